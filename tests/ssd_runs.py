"""What the SSD end-to-end tests share (py_test_ssd.py: lossless decoding;
py_test_ssd_outcomes.py: synthetic outcomes, records and flag errors; py_test_draft_ranks.py:
several draft ranks): ssd-bench launches under mpiexec, the sampled runs' set-up, result-file
reading and the records checks every SSD result file must pass. A test script runs through
mpi_run.main(module, setup=ssd_runs.configure), which sets ARGS here."""
import concurrent.futures
import math
import os
import time

import h5py
import numpy as np

import mpi_run
import stat_checks

ARGS = None
TARGET = "synthetic:tiny-llama"
COMMON = ["--reps", "1", "--warmup", "0", "--threads", "1", "--ignore-eos"]
GREEDY = ["--target", TARGET, "--seed", "3", "--num-prompts", "3", "--prompt-len", "6",
          "--max-new-tokens", "24", *COMMON]
WORKERS = 2
# SpeculationSource (comm/messages.h) as written to /rounds/source.
INITIAL, CACHE_HIT, PRIMARY, BACKUP = 0, 1, 2, 3


def configure(args):
    """The test script's --ssd-bench, --work and --mpiexec, for the helpers below."""
    global ARGS
    ARGS = args
    os.makedirs(ARGS.work, exist_ok=True)


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


class SampledRuns:
    """Mixed into a TestCase (before unittest.TestCase) whose runs sample at temperature 1 and
    compare distributions: N sequences of one prompt, TOKENS new tokens each."""
    N = 1200
    TOKENS = 6

    @classmethod
    def sampled_flags(cls):
        """The flags the class's sampled runs share: work/sampled/same-prompt.jsonl (written
        afresh) N times in batches of 50, TOKENS new tokens each, and COMMON."""
        prompts = stat_checks.same_prompt_file(os.path.join(ARGS.work, "sampled"), cls.N)
        return ["--target", TARGET, "--prompts", prompts, "--batch-size", "50",
                "--max-new-tokens", str(cls.TOKENS), *COMMON]


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
