#!/usr/bin/python3
"""SSD / SAGUARO end to end through ssd-bench and mpirun: lossless decoding.

1. Greedy SSD is lossless: it generates exactly AR's tokens across lookahead K, batch size,
   target TP degree, fallback (primary, backup random, backup ngram, auto), fan-out (uniform,
   geometric with --budget auto, list) and draft quality (the target itself, an unrelated
   model, a perturbed target); every result file's records pass ssd_runs.check_ssd_records.
2. Sampled SSD is lossless: at temperature 1 the distribution of the first generated tokens
   (and of later ones, which come from cache hits and fallbacks) matches AR's, by a chi-square
   homogeneity test over many sequences of one prompt; the test tells temperature 1 from 0.7.
Synthetic outcomes, the records' own test and bad flags: py_test_ssd_outcomes.py."""
import os
import shutil
import sys
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402
import ssd_runs  # noqa: E402
from ssd_runs import (BACKUP, CACHE_HIT, COMMON, GREEDY, PRIMARY,  # noqa: E402
                      check_ssd_records, read_rounds, run_all)
from stat_checks import chi2_sf, first_difference, printed_p_value, tokens_of  # noqa: E402

ARGS = None


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


def bf16_compute_jobs(compute="bf16"):
    """AR, SD and SSD under --compute bf16 or amx, both bf16 x bf16 products (tiny-llama is an
    fp32 checkpoint: bf16 weights)."""
    flags = ["--compute", compute, "--weight-dtype", "bf16"]
    c = compute
    jobs = {f"greedy/{c}_ar_tp{tp}": (tp, [*GREEDY, *flags, "--target-tp", str(tp)])
            for tp in (1, 2)}
    jobs[f"greedy/{c}_sd_k3_b3_tp1"] = (1, [*GREEDY, *flags, "--mode", "sd", "--draft",
                                            "perturb:0.1", "-k", "3", "--batch-size", "3"])
    jobs[f"greedy/{c}_ssd_k3_b3_tp1"] = (2, [*GREEDY, *flags, "--mode", "ssd", "--draft",
                                             "perturb:0.1", "-k", "3", "--batch-size", "3",
                                             "--fanout", "geometric", "--budget", "auto"])
    jobs[f"greedy/{c}_ssd_k1_b1_tp2"] = (3, [*GREEDY, *flags, "--mode", "ssd", "--draft",
                                             "synthetic:tiny-llama-other", "-k", "1",
                                             "--target-tp", "2", "--fanout", "uniform:2"])
    return jobs


def with_flag(flags, name, value):
    """flags with `name`'s value replaced."""
    out = list(flags)
    out[out.index(name) + 1] = value
    return out


def auto_lookahead_jobs():
    """-k auto: SSD's default (no -k), SD's on request, a --fanout list that fixes K, and SSD's
    default with a warm-up, after which K is chosen again at the acceptance it measured."""
    warm = with_flag(with_flag(GREEDY, "--warmup", "1"), "--max-new-tokens", "64")
    return {
        "greedy/ssd_kwarm_b1_tp1": (2, [*warm, "--mode", "ssd", "--draft", "perturb:0.1"]),
        "greedy/ssd_kdefault_b1_tp1": (2, [*GREEDY, "--mode", "ssd", "--draft", "perturb:0.1"]),
        "greedy/sd_kauto_b3_tp2": (2, [*GREEDY, "--mode", "sd", "--draft", "perturb:0.1", "-k",
                                       "auto", "--batch-size", "3", "--target-tp", "2"]),
        "greedy/ssd_klist_b1_tp1": (2, [*GREEDY, "--mode", "ssd", "--draft", "perturb:0.1",
                                        "--fanout", "list:3,1,1"]),
    }


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
        if mpi_run.cpu_has_bf16():
            jobs.update(bf16_compute_jobs())
        if mpi_run.cpu_has_amx_bf16():
            jobs.update(bf16_compute_jobs("amx"))
        jobs.update(auto_lookahead_jobs())
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

    def test_bf16_compute_sd_and_ssd_equal_ar(self):
        """Under --compute bf16 (activations rounded to bf16, vdpbf16ps), verification and the
        SSD cache's branch rows still sum each row as AR's one-row steps do: SD and SSD give
        AR's tokens, with the same compute, at TP 1 and 2."""
        if not mpi_run.cpu_has_bf16():
            self.skipTest("no avx512_bf16 in /proc/cpuinfo")
        self.check_compute_sd_and_ssd_equal_ar("bf16")

    def test_amx_compute_sd_and_ssd_equal_ar(self):
        """The same under --compute amx (AMX tiles: TDPBF16PS sums each element in k order,
        whichever rows share a tile)."""
        if not mpi_run.cpu_has_amx_bf16():
            self.skipTest("no amx_bf16 in /proc/cpuinfo")
        self.check_compute_sd_and_ssd_equal_ar("amx")

    def check_compute_sd_and_ssd_equal_ar(self, compute):
        ar = {tp: tokens_of(self.checked(f"greedy/{compute}_ar_tp{tp}")) for tp in (1, 2)}
        for name in bf16_compute_jobs(compute):
            with h5py.File(self.checked(name), "r") as f:
                self.assertEqual(f["models/target"].attrs["compute"], compute, name)
        mismatches = []
        for name, (ranks, _) in bf16_compute_jobs(compute).items():
            if "_ar_" in name:
                continue
            tp = 2 if name.endswith("tp2") else 1
            tokens = tokens_of(self.checked(name))
            if not np.array_equal(tokens, ar[tp]):
                mismatches.append(f"{name}: {first_difference(tokens, ar[tp])}")
        self.assertEqual(mismatches, [],
                         f"{compute} compute: SD/SSD != AR:\n" + "\n".join(mismatches))

    def test_auto_lookahead_is_lossless_and_recorded(self):
        """-k auto measures the step costs on the launch, picks K among 1-8 (up to 32 while the
        best is a range's last), runs with it (the rounds draft K tokens) and says how in the
        header and /config; the tokens stay AR's."""
        ar = {tp: tokens_of(self.checked(f"greedy/ar_tp{tp}")) for tp in (1, 2)}
        for name in ("greedy/ssd_kdefault_b1_tp1", "greedy/sd_kauto_b3_tp2",
                     "greedy/ssd_kwarm_b1_tp1"):
            path = self.checked(name)
            tp = 2 if name.endswith("tp2") else 1
            # The warm-up's run decodes 64 tokens: AR's 24 are its first (greedy).
            got = tokens_of(path)[:, :ar[tp].shape[1]]
            self.assertTrue(np.array_equal(got, ar[tp]), name)
            with h5py.File(path, "r") as f:
                config = f["config"].attrs
                k = int(config["lookahead"])
                self.assertIn(k, range(1, 33), name)
                self.assertTrue(str(config["lookahead_choice"]).startswith(f"auto: K = {k} "),
                                config["lookahead_choice"])
                self.assertIn("verify b(K+1) rows, by K: 1: ", str(config["lookahead_costs"]))
                self.assertEqual(int(f["summary"].attrs["lookahead"]), k, name)
            r, _, _ = read_rounds(path)
            self.assertLessEqual(int(r["drafted"].max()), k, name)
            self.assertIn(f"lookahead_choice=auto: K = {k} ",
                          self.results[name][1].stdout, name)
        # After the warm-up, K is chosen again at the acceptance its rounds measured, from the
        # calibration's costs scaled to its rounds' times; the header, printed after it, shows
        # that choice.
        with h5py.File(self.checked("greedy/ssd_kwarm_b1_tp1"), "r") as f:
            choice = str(f["config"].attrs["lookahead_choice"])
        self.assertRegex(choice, r"^auto: K = \d+ of the predicted rates at acceptance "
                         r"[01]\.\d\d, measured by the warm-up's \d+ sequence-rounds at K = \d+ "
                         r"\(chosen at the prior 0\.80\), the calibration's verification times "
                         r"x \d+\.\d\d and draft times x \d+\.\d\d to match its rounds: ")
        path = self.checked("greedy/ssd_klist_b1_tp1")
        self.assertTrue(np.array_equal(tokens_of(path), ar[1]))
        with h5py.File(path, "r") as f:
            self.assertEqual(int(f["config"].attrs["lookahead"]), 2)
            self.assertEqual(f["config"].attrs["lookahead_choice"], "the --fanout list's length")
            self.assertEqual(f["config"].attrs["lookahead_costs"], "none")

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


class AutoLookaheadNearTheContextLimit(unittest.TestCase):
    """-k auto weighs only the K whose speculation fits the model's positions: SSD by default
    runs where K = 1 or 2 still fits (tiny-llama: 512 positions), and a run where not even K = 1
    fits gets --max-new-tokens' one-line error."""

    def run_near_limit(self, new_tokens):
        path = os.path.join(ARGS.work, f"limit_{new_tokens}.h5")
        proc = mpi_run.launch(ARGS, 2, ["--target", "synthetic:tiny-llama", "--draft",
                                        "perturb:0.1", "--mode", "ssd", "--num-prompts", "1",
                                        "--prompt-len", "6", "--max-new-tokens",
                                        str(new_tokens), *COMMON, "--out", path,
                                        "--overwrite"])
        return path, proc

    def test_k_fits_the_positions_left(self):
        for new_tokens, largest in ((503, 2), (504, 1)):  # 6 + new + K + 1 <= 512
            path, proc = self.run_near_limit(new_tokens)
            self.assertEqual(proc.returncode, 0, proc.stdout[-2000:] + proc.stderr)
            with h5py.File(path, "r") as f:
                self.assertLessEqual(int(f["config"].attrs["lookahead"]), largest)
                costs = str(f["config"].attrs["lookahead_costs"])
            self.assertIn("by K: 1: ", costs)
            self.assertNotIn(f" {largest + 1}: ", costs.split(" ms;")[0])

    def test_no_room_for_any_k_is_one_line(self):
        _, proc = self.run_near_limit(506)
        self.assertEqual(proc.returncode, 2, proc.stdout[-2000:] + proc.stderr)
        self.assertIn("--max-new-tokens: prompt (6) + 506 new tokens exceed the model's "
                      "max_position_embeddings (512)", proc.stderr)


class SampledLossless(ssd_runs.SampledRuns, unittest.TestCase):
    """Temperature 1: N sequences of one prompt; SSD's token distribution equals AR's."""

    @classmethod
    def setUpClass(cls):
        # t0 comes from the prefill, t1..t3 from the first round (drafted just in time), t4 on
        # from rounds after it: cache hits, primary or backup fallbacks.
        common = cls.sampled_flags()
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
        return printed_p_value(a, self.tokens(a), b, self.tokens(b), columns)

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


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__], setup=ssd_runs.configure)
