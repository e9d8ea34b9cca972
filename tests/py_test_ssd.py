#!/usr/bin/python3
"""SSD / SAGUARO end to end through ssd-bench and mpirun.

1. Greedy SSD is lossless: it generates exactly AR's tokens across lookahead K, batch size,
   target TP degree, fallback (primary, backup random, backup ngram, auto), fan-out (uniform,
   geometric with --budget auto, list) and draft quality (the target itself, an unrelated
   model, a perturbed target).
2. Sampled SSD is lossless: at temperature 1 the distribution of the first generated tokens
   (and of later ones, which come from cache hits and fallbacks) matches AR's, by a chi-square
   homogeneity test over many sequences of one prompt; the test tells temperature 1 from 0.7.
3. Synthetic outcomes (--outcomes synthetic:alpha=A,r=R[,alpha_b=AB,r_b=RB]) are faithful
   per speculation source: the acceptance rate, per-position acceptance and cache hit rate of
   primary-drafted rounds match A and R, those of backup rounds AB (0 for random tokens) and
   RB (default log2(1/(1-A))), and every looked-up outcome's hit is exactly 1 <= bonus_rank <= F_k.
4. The /rounds records and the /summary SSD attributes agree with each other and with the
   algorithm (sources, fallbacks, fan-out budgets).
5. Bad SSD flags get one "ssd-bench: error:" line naming the flag, and exit status 2."""
import argparse
import concurrent.futures
import math
import os
import shutil
import sys
import time
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402
from stat_checks import (chi2_sf, first_difference, homogeneity_p_value,  # noqa: E402
                         tokens_of)

ARGS = None
TARGET = "synthetic:tiny-llama"
COMMON = ["--reps", "1", "--warmup", "0", "--threads", "1", "--ignore-eos"]
GREEDY = ["--target", TARGET, "--seed", "3", "--num-prompts", "3", "--prompt-len", "6",
          "--max-new-tokens", "24", *COMMON]
WORKERS = 2
# SpeculationSource (comm/messages.h) as written to /rounds/source.
INITIAL, CACHE_HIT, PRIMARY, BACKUP = 0, 1, 2, 3


def launch(np_, flags, timeout=240, quiet=False):
    """ssd-bench under mpiexec with np_ ranks; returns the CompletedProcess."""
    return mpi_run.launch(ARGS, np_, flags, timeout, env={"OMPI_MCA_mpi_yield_when_idle": "1"},
                          quiet=quiet)


def run_to_file(name, np_, flags):
    path = os.path.join(ARGS.work, name + ".h5")
    if os.path.exists(path):
        os.remove(path)
    start = time.monotonic()
    proc = launch(np_, [*flags, "--out", path])
    return name, path, proc, time.monotonic() - start


def run_all(jobs):
    """jobs: {name: (np, flags)}, run WORKERS at a time; returns {name: (path, proc)}."""
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(run_to_file, n, np_, f) for n, (np_, f) in jobs.items()]
        done = [f.result() for f in futures]
    slowest = max(done, key=lambda d: d[3])
    print(f"\n  {len(done)} runs, slowest {slowest[0]} {slowest[3]:.1f} s", end="", flush=True)
    return {name: (path, proc) for name, path, proc, _ in done}


def read_rounds(path):
    """(rounds columns as numpy arrays, /summary attributes as a dict, /config as a dict)."""
    with h5py.File(path, "r") as f:
        rounds = {k: f["/rounds"][k][...] for k in f["/rounds"].keys()}
        summary = dict(f["/summary"].attrs)
        config = dict(f["/config"].attrs)
    return rounds, summary, config


# --- the records checks every SSD result file must pass ---

def check_ssd_records(test, name, path, fallback, fixed_budget=None):
    """/rounds and /summary of an SSD run agree with each other and with the algorithm.
    fallback: primary, backup or auto; fixed_budget: B when the fan-out is geometric with a
    fixed budget (every looked-up cache then has sum F_k == B)."""
    r, s, _ = read_rounds(path)
    n = len(r["round"])
    test.assertGreater(n, 0, name)
    K = int(r["drafted"][0])
    fanout = r["fanout"]
    test.assertEqual(fanout.shape, (n, K + 1), name)
    hit, source, accepted, rank = r["outcome_hit"], r["source"], r["accepted"], r["bonus_rank"]
    looked = hit >= 0

    test.assertEqual(int(s["cache_lookups"]), int(looked.sum()), name)
    test.assertEqual(int(s["cache_hits"]), int(hit[looked].sum()), name)
    # p_hit and its split by speculator (3 = backup; 0, 1, 2 = primary); NaN where no round
    # qualifies.
    hits = source == CACHE_HIT
    misses = np.isin(source, (PRIMARY, BACKUP)) & (r["round"] > 0)
    for attr, values, mask, offset in (
            ("p_hit", hit, looked, 0),
            ("p_hit_backup", hit, looked & (source == BACKUP), 0),
            ("p_hit_primary", hit, looked & (source != BACKUP), 0),
            # E_hit over cache-hit rounds, E_miss over fallback rounds after a miss.
            ("e_hit", accepted, hits, 1),
            ("e_miss", accepted, misses, 1)):
        got = float(s[attr])
        if not mask.any():
            test.assertTrue(math.isnan(got), f"{name} {attr}: {got} with no qualifying round")
        else:
            test.assertAlmostEqual(got, offset + values[mask].mean(), places=12,
                                   msg=f"{name} {attr}")
    # T_p and T_b in units of the mean verification time.
    verify = r["verify_time_s"].mean()
    t_p = r["cache_build_time_s"][looked].mean() / verify if looked.any() else 0.0
    t_b = r["fallback_time_s"][misses].mean() / verify if misses.any() else 0.0
    test.assertAlmostEqual(float(s["t_p"]), t_p, delta=1e-9 * max(1.0, t_p), msg=f"{name} t_p")
    test.assertAlmostEqual(float(s["t_b"]), t_b, delta=1e-9 * max(1.0, t_b), msg=f"{name} t_b")
    test.assertTrue((r["fallback_time_s"][hits] == 0).all(), f"{name}: a hit has fallback time")

    # Figure 3: a looked-up outcome is a hit exactly when its bonus ranks within F_k.
    rows = np.nonzero(looked)[0]
    f_k = fanout[rows, accepted[rows]]
    test.assertTrue((fanout[rows] >= 0).all(), f"{name}: a looked-up round without a fan-out")
    predicted = ((rank[rows] >= 1) & (rank[rows] <= f_k)).astype(int)
    wrong = rows[predicted != hit[rows]]
    test.assertEqual(len(wrong), 0, f"{name}: outcome_hit != (1 <= bonus_rank <= F_k) in rounds "
                     f"{wrong[:5]}: hit {hit[wrong[:5]]} rank {rank[wrong[:5]]} "
                     f"k {accepted[wrong[:5]]} fanout {fanout[wrong[:5]].tolist()}")
    test.assertTrue((fanout[~looked] == -1).all(), f"{name}: fan-out without a lookup")
    if fixed_budget is not None:
        sums = fanout[rows].sum(axis=1)
        test.assertTrue((sums == fixed_budget).all(),
                        f"{name}: fan-out rows sum to {sorted(set(sums.tolist()))}, "
                        f"not the budget {fixed_budget}")
        test.assertTrue((r["budget"][rows] == fixed_budget).all(), f"{name}: budget column")

    # Per sequence, in round order: the first round comes from no cache (source 0), each
    # later one from the cache on a hit and from the fallback after a miss; every round but
    # the last is looked up.
    problems = []
    keys = np.stack([r["rep"], r["sequence"]], axis=1)
    for key in np.unique(keys, axis=0):
        idx = np.nonzero((keys == key).all(axis=1))[0]
        idx = idx[np.argsort(r["round"][idx])]
        where = f"rep {key[0]} sequence {key[1]}"
        if source[idx[0]] != INITIAL:
            problems.append(f"{where}: first round (round {r['round'][idx[0]]}) has source "
                            f"{source[idx[0]]}, want {INITIAL}")
        for prev, cur in zip(idx[:-1], idx[1:]):
            if hit[prev] < 0:
                problems.append(f"{where} round {r['round'][prev]}: not looked up but not last")
            elif hit[prev] == 1 and source[cur] != CACHE_HIT:
                problems.append(f"{where} round {r['round'][cur]}: after a hit, source "
                                f"{source[cur]}")
            elif hit[prev] == 0:
                allowed = {"primary": (PRIMARY,), "backup": (BACKUP,),
                           "auto": (PRIMARY, BACKUP)}[fallback]
                if source[cur] not in allowed:
                    problems.append(f"{where} round {r['round'][cur]}: after a miss with "
                                    f"--fallback {fallback}, source {source[cur]}")
        if (source[idx[1:]] == INITIAL).any():
            problems.append(f"{where}: source 0 after the first round")
    test.assertEqual(problems[:8], [], f"{name}: {len(problems)} record problems")
    return r, s


class ChiSquare(unittest.TestCase):
    def test_survival_function(self):
        # scipy.stats.chi2.sf reference values.
        self.assertAlmostEqual(chi2_sf(3.841458820694124, 1), 0.05, places=9)
        self.assertAlmostEqual(chi2_sf(30.0, 10), 0.000856641210775301, places=10)
        self.assertAlmostEqual(chi2_sf(100.0, 63), 0.002077236552784822, places=10)


def greedy_configs():
    """24 SSD configurations against AR: every value of every factor at least twice, every
    (draft, fallback) and (draft, K) pair at least once."""
    drafts = ["perturb:0", "synthetic:tiny-llama-other", "perturb:0.1"]
    fallbacks = [("primary", "random"), ("backup", "random"), ("backup", "ngram"),
                 ("auto", "random"), ]
    configs = {}
    for i in range(24):
        draft = drafts[i % 3]
        fallback, backup = fallbacks[i % 4]
        k = (1, 3)[(i // 3) % 2]
        batch = (1, 3)[(i // 2) % 2]
        tp = (1, 2)[(i // 4) % 2]
        fanout_kind = ("uniform", "geometric", "list")[(i + i // 6) % 3]
        fanout = {"uniform": ["--fanout", "uniform:2"],
                  "geometric": ["--fanout", "geometric", "--budget", "auto"],
                  "list": ["--fanout", "list:2,1" if k == 1 else "list:3,1,1,2"]}[fanout_kind]
        if fallback == "backup" and i >= 12:
            fanout += ["--fanout-backup", "uniform:1"]  # a different shape after backup rounds
        name = (f"greedy/ssd{i:02d}_{draft.split(':')[-1]}_k{k}_b{batch}_tp{tp}_{fanout_kind}_"
                f"{fallback}-{backup}")
        flags = [*GREEDY, "--mode", "ssd", "--draft", draft, "-k", str(k), "--batch-size",
                 str(batch), "--target-tp", str(tp), "--fallback", fallback, "--backup", backup,
                 *fanout]
        configs[name] = dict(draft=draft, k=k, batch=batch, tp=tp, fanout=fanout_kind,
                             fallback=fallback, backup=backup, flags=flags)
    return configs


class GreedyLossless(unittest.TestCase):
    """Greedy SSD generates AR's tokens exactly."""

    @classmethod
    def setUpClass(cls):
        shutil.rmtree(os.path.join(ARGS.work, "greedy"), ignore_errors=True)
        os.makedirs(os.path.join(ARGS.work, "greedy"))
        cls.configs = greedy_configs()
        jobs = {f"greedy/ar_tp{tp}": (tp, [*GREEDY, "--target-tp", str(tp)]) for tp in (1, 2)}
        for name, cfg in cls.configs.items():
            jobs[name] = (cfg["tp"] + 1, cfg["flags"])
        cls.results = run_all(jobs)

    def checked(self, name):
        path, proc = self.results[name]
        self.assertEqual(proc.returncode, 0, f"{name}: {proc.stdout[-2000:]}{proc.stderr}")
        return path

    def test_design_covers_every_factor_twice(self):
        for factor, values in (("draft", 3), ("k", 2), ("batch", 2), ("tp", 2), ("fanout", 3),
                               ("fallback", 3)):
            seen = [cfg[factor] for cfg in self.configs.values()]
            self.assertEqual(len(set(seen)), values, factor)
            for v in set(seen):
                self.assertGreaterEqual(seen.count(v), 2, f"{factor}={v}")
        backups = [(c["fallback"], c["backup"]) for c in self.configs.values()]
        self.assertGreaterEqual(backups.count(("backup", "ngram")), 2)
        self.assertGreaterEqual(backups.count(("backup", "random")), 2)

    def test_ssd_equals_ar(self):
        ar = {tp: tokens_of(self.checked(f"greedy/ar_tp{tp}")) for tp in (1, 2)}
        self.assertEqual(ar[1].shape, (3, 24))
        mismatches = []
        for name, cfg in self.configs.items():
            tokens = tokens_of(self.checked(name))
            if not np.array_equal(tokens, ar[cfg["tp"]]):
                mismatches.append(f"{name}: {first_difference(tokens, ar[cfg['tp']])}"
                                  f"{self.round_of_first_difference(name, tokens, ar[cfg['tp']])}")
        self.assertEqual(mismatches, [], "SSD != AR:\n" + "\n".join(mismatches))

    def round_of_first_difference(self, name, got, want):
        """Which round emitted the first wrong token: its source, k and the previous round's
        cache outcome."""
        if got.shape != want.shape:
            return ""
        seq, pos = np.argwhere(got != want)[0]
        r, _, _ = read_rounds(self.results[name][0])
        idx = np.nonzero(r["sequence"] == seq)[0]
        idx = idx[np.argsort(r["round"][idx])]
        emitted = 1  # the prefill's token
        for n, i in enumerate(idx):
            if emitted + r["tokens"][i] > pos:
                prev = r["outcome_hit"][idx[n - 1]] if n else None
                return (f"; emitted by round {r['round'][i]} (token {pos - emitted} of it): "
                        f"source {r['source'][i]}, k {r['accepted'][i]}, previous round's "
                        f"outcome_hit {prev}")
            emitted += r["tokens"][i]
        return "; no round emitted it"

    def test_statistics_by_draft(self):
        stats = {}
        for name, cfg in self.configs.items():
            _, s, _ = read_rounds(self.checked(name))
            stats.setdefault(cfg["draft"], []).append(
                (name, cfg, float(s["acceptance_rate"]), float(s["p_hit"])))
        for draft, values in stats.items():
            rates = [v[2] for v in values]
            p_hits = [v[3] for v in values]
            print(f"\n  greedy {draft}: acceptance {min(rates):.3f}..{max(rates):.3f}, p_hit "
                  f"{min(p_hits):.3f}..{max(p_hits):.3f} over {len(values)} runs", end="",
                  flush=True)
        for name, cfg, rate, p_hit in stats["perturb:0"]:
            # The target as its own draft: every drafted token accepted, also in rounds
            # speculated by cache branches (so branch decoding matches sequential drafting),
            # and the bonus (the draft's top token after s_K) is always the cache's first guess
            # at k = K. With fixed fan-outs every lookup hits, so no backup round ever runs.
            r, _, _ = read_rounds(self.results[name][0])
            looked = r["outcome_hit"] >= 0
            drafted = r["source"] != BACKUP
            self.assertTrue((r["accepted"][drafted] == cfg["k"]).all(), f"{name}: rate {rate}")
            self.assertTrue((r["bonus_rank"][looked] == 1).all(), name)
            if cfg["fanout"] != "geometric":
                self.assertGreater((r["source"] == CACHE_HIT).sum(), 10, name)
                self.assertEqual(p_hit, 1.0, name)
                self.assertEqual(rate, 1.0, name)
            else:  # --budget auto may leave no branch at k = K when the window is short
                rows = np.nonzero(looked)[0]
                f_k = r["fanout"][rows, r["accepted"][rows]]
                self.assertTrue((r["outcome_hit"][rows] == (f_k >= 1)).all(), name)
        for name, cfg, rate, p_hit in stats["synthetic:tiny-llama-other"]:
            self.assertLess(rate, 0.5, name)
        for name, cfg, rate, p_hit in stats["perturb:0.1"]:
            self.assertTrue(0.0 < rate < 1.0, f"{name}: acceptance {rate} is not a mix")

    def test_records(self):
        for name, cfg in self.configs.items():
            with self.subTest(name=name):
                check_ssd_records(self, name, self.checked(name), cfg["fallback"])


class SampledLossless(unittest.TestCase):
    """Temperature 1: N sequences of one prompt; SSD's token distribution equals AR's."""
    N = 1200
    TOKENS = 6

    @classmethod
    def setUpClass(cls):
        work = os.path.join(ARGS.work, "sampled")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        prompts = os.path.join(work, "same-prompt.jsonl")
        with open(prompts, "w") as f:
            f.write('{"ids": [1, 17, 93, 5, 200, 41]}\n' * cls.N)
        # t0 comes from the prefill, t1..t3 from the first round (drafted just in time), t4 on
        # from rounds after it: cache hits, primary or backup fallbacks.
        common = ["--target", TARGET, "--prompts", prompts, "--batch-size", "50",
                  "--max-new-tokens", str(cls.TOKENS), *COMMON]
        ssd = [*common, "--mode", "ssd", "--draft", "perturb:0.3", "-k", "2", "--temperature",
               "1", "--saguaro-c", "0.5"]
        cls.jobs = {
            "sampled/ssd_primary": (2, [*ssd, "--fallback", "primary", "--fanout", "uniform:2",
                                        "--seed", "104"]),
            # A fixed budget keeps the run deterministic (--budget auto follows timings).
            "sampled/ssd_backup": (2, [*ssd, "--fallback", "backup", "--backup", "random",
                                       "--fanout", "geometric", "--budget", "6", "--seed",
                                       "105"]),
            "sampled/ar_t1": (1, [*common, "--temperature", "1", "--seed", "101"]),
            "sampled/ar_t07": (1, [*common, "--temperature", "0.7", "--seed", "103"]),
        }
        cls.results = run_all(cls.jobs)

    def tokens(self, name):
        path, proc = self.results[name]
        self.assertEqual(proc.returncode, 0, f"{name}: {proc.stdout[-2000:]}{proc.stderr}")
        t = tokens_of(path)
        self.assertEqual(t.shape, (self.N, self.TOKENS))
        return t

    def compare(self, a, b, columns):
        p, statistic, df = homogeneity_p_value(self.tokens(a)[:, columns],
                                               self.tokens(b)[:, columns])
        print(f"\n  {a} vs {b}, tokens {columns}: chi2 {statistic:.1f} df {df} p {p:.3g}",
              end="", flush=True)
        return p

    def test_ssd_matches_ar(self):
        for name, fallback in (("sampled/ssd_primary", "primary"),
                               ("sampled/ssd_backup", "backup")):
            r, s = check_ssd_records(self, name, self.results[name][0], fallback)
            sources = np.bincount(r["source"], minlength=4)
            print(f"\n  {name}: acceptance {float(s['acceptance_rate']):.3f} p_hit "
                  f"{float(s['p_hit']):.3f} rounds by source {sources.tolist()}", end="",
                  flush=True)
            self.assertTrue(0.05 < float(s["acceptance_rate"]) < 0.95, name)
            # The later tokens must have come through the cache and the fallback.
            self.assertGreater(sources[CACHE_HIT], 50, name)
            self.assertGreater(sources[BACKUP if fallback == "backup" else PRIMARY], 50, name)
            for columns in ([0, 1], [1, 2], [2, 3], [4, 5]):
                self.assertGreater(self.compare(name, "sampled/ar_t1", columns), 1e-3,
                                   f"{name} tokens {columns}")

    def test_power_temperature_07_is_rejected(self):
        self.assertLess(self.compare("sampled/ar_t07", "sampled/ar_t1", [0, 1]), 1e-6)
        self.compare("sampled/ar_t07", "sampled/ar_t1", [4, 5])  # for information


class SyntheticOutcomes(unittest.TestCase):
    """--outcomes synthetic:alpha=A,r=R[,alpha_b=AB,r_b=RB]: the drawn outcomes follow the
    model of the speculation's source (the primary's A, R; the backup's AB, RB, AB = 0 for a
    random backup), and the cache hits exactly the outcomes whose bonus ranks within F."""
    K = 3
    PROMPTS = 12
    # name: (mode, A, R, F, fallback, backup, AB or None for the default, RB or None)
    CASES = {
        "ssd_a06_r07_f3": ("ssd", 0.6, 0.7, 3, "primary", "random", None, None),
        "ssd_a08_r12_f1": ("ssd", 0.8, 1.2, 1, "backup", "random", None, None),
        "ssd_a07_r09_f2_ngram": ("ssd", 0.7, 0.9, 2, "backup", "ngram", 0.4, 0.5),
        "sd_a06_r07": ("sd", 0.6, 0.7, None, None, None, None, None),
        "sd_a08_r12": ("sd", 0.8, 1.2, None, None, None, None, None),
    }

    @classmethod
    def setUpClass(cls):
        shutil.rmtree(os.path.join(ARGS.work, "synthetic"), ignore_errors=True)
        os.makedirs(os.path.join(ARGS.work, "synthetic"))
        common = ["--target", TARGET, "--draft", "synthetic:tiny-llama-other", "-k",
                  str(cls.K), "--num-prompts", str(cls.PROMPTS), "--batch-size", "6",
                  "--prompt-len", "6", "--max-new-tokens", "160", "--seed", "5", *COMMON]
        jobs = {}
        for name, (mode, a, r, f, fallback, backup, ab, rb) in cls.CASES.items():
            spec = f"synthetic:alpha={a},r={r}"
            spec += f",alpha_b={ab}" if ab is not None else ""
            spec += f",r_b={rb}" if rb is not None else ""
            flags = [*common, "--mode", mode, "--outcomes", spec]
            if mode == "ssd":
                flags += ["--fanout", f"uniform:{f}", "--fallback", fallback, "--backup", backup]
            jobs[f"synthetic/{name}"] = (2, flags)
        cls.results = run_all(jobs)

    def load(self, name):
        path, proc = self.results[f"synthetic/{name}"]
        self.assertEqual(proc.returncode, 0, f"{name}: {proc.stdout[-2000:]}{proc.stderr}")
        with h5py.File(path, "r") as f:
            self.assertEqual(int(f.attrs["synthetic_outcomes"]), 1, name)
        tokens = tokens_of(path)
        self.assertEqual(tokens.shape, (self.PROMPTS, 160))
        self.assertTrue((tokens >= 0).all(), f"{name}: unresolved bonus (-1) at "
                        f"{np.argwhere(tokens < 0)[:5].tolist()}")
        return path

    def check_summary(self, name, rounds, s):
        """The /summary acceptance attributes are those of the /rounds records."""
        K, accepted = self.K, rounds["accepted"]
        self.assertAlmostEqual(float(s["acceptance_rate"]), accepted.mean() / K, places=12,
                               msg=name)
        per_position = np.array([(accepted >= i).mean() for i in range(1, K + 1)])
        np.testing.assert_allclose(s["per_position_acceptance"], per_position, rtol=0,
                                   atol=1e-12, err_msg=name)

    def check_acceptance(self, name, a, accepted, least=300):
        """k of these rounds follows the capped geometric law of acceptance a."""
        K = self.K
        n = len(accepted)
        self.assertGreater(n, least, name)
        if a == 0:
            self.assertTrue((accepted == 0).all(), f"{name}: a = 0 but k = "
                            f"{sorted(set(accepted.tolist()))}")
            print(f"\n  {name}: {n} rounds, all k = 0 (model a = 0)", end="", flush=True)
            return
        # P(k >= i) = A^i; E[k] = sum_i A^i.
        p_ge = np.array([a ** i for i in range(1, K + 1)])
        p_k = np.array([a ** j * (1 - a) for j in range(K)] + [a ** K])
        mean_k = (np.arange(K + 1) * p_k).sum()
        sd_k = math.sqrt(((np.arange(K + 1) - mean_k) ** 2 * p_k).sum())
        rate = accepted.mean() / K
        print(f"\n  {name}: {n} rounds, acceptance {rate:.4f} (model {mean_k / K:.4f} +- "
              f"{sd_k / math.sqrt(n) / K:.4f})", end="", flush=True)
        self.assertLess(abs(rate - mean_k / K), 4 * sd_k / math.sqrt(n) / K, name)
        per_position = np.array([(accepted >= i).mean() for i in range(1, K + 1)])
        se = np.sqrt(p_ge * (1 - p_ge) / n)
        print(f"; per position {np.round(per_position, 4).tolist()} (model "
              f"{np.round(p_ge, 4).tolist()})", end="", flush=True)
        self.assertTrue((np.abs(per_position - p_ge) < 4 * se).all(), name)

    def check_ranks(self, name, rounds, mask, f, r):
        """Cache hits and bonus ranks of the looked-up rounds in `mask` follow
        P(rank > F) = (F+1)^-r."""
        hit = rounds["outcome_hit"]
        looked = mask & (hit >= 0)
        n = int(looked.sum())
        p = 1 - (f + 1) ** (-r)
        measured = hit[looked].mean()
        se = math.sqrt(p * (1 - p) / n)
        print(f"; p_hit {measured:.4f} over {n} lookups (model {p:.4f} +- {se:.4f})",
              end="", flush=True)
        self.assertLess(abs(measured - p), 4 * se, name)
        rank = rounds["bonus_rank"][looked]
        for j in (2, 4, 16):
            q = j ** (-r)
            got = ((rank >= j) | (rank == 0)).mean()
            self.assertLess(abs(got - q), 4 * math.sqrt(q * (1 - q) / n),
                            f"{name}: P(rank >= {j}) = {got:.4f}, model {q:.4f}")

    def test_ssd(self):
        for name, (mode, a, r, f, fallback, backup, ab, rb) in self.CASES.items():
            if mode != "ssd":
                continue
            with self.subTest(name=name):
                path = self.load(name)
                rounds, s = check_ssd_records(self, name, path, fallback)
                self.check_summary(name, rounds, s)
                looked = rounds["outcome_hit"] >= 0
                self.assertTrue((rounds["fanout"][looked] == f).all(), name)
                from_backup = rounds["source"] == BACKUP
                # Rounds the primary drafted (first, cache hit, just in time) follow A and R.
                self.check_acceptance(f"{name} primary-drafted", a, rounds["accepted"][~from_backup])
                self.check_ranks(name, rounds, ~from_backup, f, r)
                if fallback == "primary":
                    self.assertFalse(from_backup.any(), name)
                    continue
                # Backup rounds follow AB (0 for random tokens: ~1/vocab) and RB (default
                # log2(1/(1-A)): the draft's top guess is the bonus with probability A).
                self.check_acceptance(f"{name} backup-drafted", 0.0 if ab is None else ab,
                                      rounds["accepted"][from_backup], least=100)
                self.check_ranks(name, rounds, from_backup, f,
                                 math.log2(1 / (1 - a)) if rb is None else rb)

    def test_sd(self):
        for name, (mode, a, r, f, fallback, backup, ab, rb) in self.CASES.items():
            if mode != "sd":
                continue
            with self.subTest(name=name):
                rounds, s, _ = read_rounds(self.load(name))
                self.check_summary(name, rounds, s)
                self.check_acceptance(name, a, rounds["accepted"], least=600)

class Records(unittest.TestCase):
    """Fan-out budgets and fallback sources in the records, with real outcomes."""

    @classmethod
    def setUpClass(cls):
        shutil.rmtree(os.path.join(ARGS.work, "records"), ignore_errors=True)
        os.makedirs(os.path.join(ARGS.work, "records"))
        common = ["--target", TARGET, "--mode", "ssd", "--draft", "perturb:0.1", "-k", "3",
                  "--num-prompts", "6", "--batch-size", "3", "--prompt-len", "6",
                  "--max-new-tokens", "40", "--seed", "8", *COMMON]
        cls.cases = {  # name: (flags, fallback, fixed budget)
            "records/geometric_budget6": (["--fanout", "geometric", "--budget", "6",
                                           "--fallback", "auto"], "auto", 6),
            "records/geometric5_backup": (["--fanout", "geometric:5", "--fallback", "backup",
                                           "--backup", "ngram"], "backup", 5),
            "records/list_primary": (["--fanout", "list:2,2,1,3", "--fallback", "primary"],
                                     "primary", 8),
            "records/sampled_backup": (["--fanout", "geometric", "--budget", "7",
                                        "--fallback", "backup", "--temperature", "1"],
                                       "backup", 7),
        }
        cls.results = run_all({n: (2, [*common, *flags]) for n, (flags, _, _) in
                               cls.cases.items()})

    def test_records(self):
        for name, (_, fallback, budget) in self.cases.items():
            with self.subTest(name=name):
                path, proc = self.results[name]
                self.assertEqual(proc.returncode, 0, f"{name}: {proc.stderr}")
                r, s = check_ssd_records(self, name, path, fallback, fixed_budget=budget)
                misses = int((r["outcome_hit"] == 0).sum())
                self.assertGreater(misses, 0, f"{name}: no miss, the fallback is untested")
                print(f"\n  {name}: p_hit {float(s['p_hit']):.3f} e_hit "
                      f"{float(s['e_hit']):.3f} e_miss {float(s['e_miss']):.3f} t_p "
                      f"{float(s['t_p']):.2f} t_b {float(s['t_b']):.3f}", end="", flush=True)


class Errors(unittest.TestCase):
    TINY = ["--target", TARGET, "--mode", "ssd", "--draft", "perturb:0.1", "--max-new-tokens",
            "4", "--reps", "1", "--warmup", "0", "--threads", "1"]

    def expect_error(self, np_, flags, *needles):
        proc = launch(np_, flags, timeout=120, quiet=True)
        self.assertEqual(proc.returncode, 2, f"{flags}: {proc.stdout}{proc.stderr}")
        lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, f"{flags}: expected one line, got {proc.stderr!r}")
        self.assertTrue(lines[0].startswith("ssd-bench: error: "), lines[0])
        for needle in needles:
            self.assertIn(needle, lines[0], f"{flags}: {lines[0]}")

    def test_ssd_needs_a_draft_rank(self):
        self.expect_error(1, self.TINY, "--mode ssd")
        self.expect_error(2, [*self.TINY, "--target-tp", "2"], "--mode ssd")

    def test_bad_flags(self):
        for flags, needle in (
                (["-k", "3", "--fanout", "list:1,2"], "--fanout"),
                (["-k", "1", "--fanout", "list:1,2,3"], "--fanout"),
                (["--fanout", "nonsense"], "--fanout"),
                (["--fanout", "uniform:0"], "--fanout"),
                (["--saguaro-c", "1.5"], "--saguaro-c"),
                (["--saguaro-c", "0.5"], "--saguaro-c"),  # a greedy draft: nothing to reshape
                (["--budget", "-3"], "--budget"),
                (["--outcomes", "synthetic:alpha=2,r=1"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5,r=0"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5,r=1,alpha_b=1.5"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5,r=1,alpha=0.6"], "--outcomes"),
                (["--outcomes", "synthetic:alpha=0.5,r=1", "--backup", "ngram",
                  "--fallback", "auto"], "alpha_b"),
                (["--fallback", "sometimes"], "--fallback"),
                (["--backup", "oracle"], "--backup")):
            with self.subTest(flags=flags):
                self.expect_error(2, [*self.TINY, *flags], needle)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--ssd-bench", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--mpiexec", default=shutil.which("mpiexec") or "mpiexec")
    ARGS, rest = parser.parse_known_args()
    os.makedirs(ARGS.work, exist_ok=True)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
