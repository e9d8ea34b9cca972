#!/usr/bin/python3
"""ssd-bench under mpiexec: rank-layout and draft errors (one line, naming the flag, exit 2),
the header's rank table (each rank's CPUs, and a warning where its threads outnumber them),
refusing a launcher it was not built for and ranks of two builds, the SD result file's /rounds
table and speculation summary (recomputed from /rounds), and a rank that dies mid-run taking
the whole job down."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402
from processes import alive, killed_on_exit, world_ranks  # noqa: E402

ARGS = None
TINY = ["--target", "synthetic:tiny-llama", "--max-new-tokens", "4", "--reps", "1",
        "--warmup", "0", "--threads", "1"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_mpi_yield_when_idle="1")


def mpi_command(np_, flags):
    return [ARGS.mpiexec, "--oversubscribe", "--bind-to", "none", "-np", str(np_),
            ARGS.ssd_bench, *flags]


def mpirun(np_, *flags):
    return subprocess.run(mpi_command(np_, flags), capture_output=True, text=True, timeout=120,
                          env=ENV)


def cpu_list_text(cpus):
    """CPU numbers as the kernel lists them (Cpus_allowed_list): "0-3,8"."""
    cpus, parts, i = sorted(cpus), [], 0
    while i < len(cpus):
        last = i
        while last + 1 < len(cpus) and cpus[last + 1] == cpus[last] + 1:
            last += 1
        parts.append(str(cpus[i]) if last == i else f"{cpus[i]}-{cpus[last]}")
        i = last + 1
    return ",".join(parts)


def last_level_cache(cpu):
    """The sysfs id of `cpu`'s highest-level cache (its first sharing CPU without an id), or
    None where sysfs says nothing: what ssd-bench records as a rank's `llc`."""
    base = f"/sys/devices/system/cpu/cpu{cpu}/cache"
    best = (0, None)
    for index in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        try:
            with open(f"{base}/{index}/level") as f:
                level = int(f.read())
        except (OSError, ValueError):
            continue
        try:
            with open(f"{base}/{index}/id") as f:
                ident = int(f.read())
        except (OSError, ValueError):
            with open(f"{base}/{index}/shared_cpu_list") as f:
                ident = int(re.split(r"[-,]", f.read().strip())[0])
        if level >= best[0]:
            best = (level, ident)
    return best[1]


def own_lines(stderr):
    """ssd-bench's own lines (mpirun adds banners of its own)."""
    return [line for line in stderr.splitlines() if line.startswith("ssd-bench:")]


class Layout(unittest.TestCase):
    def expect_error(self, np_, flags, *needles):
        proc = mpirun(np_, *flags)
        self.assertEqual(proc.returncode, 2, f"{flags}: {proc.stdout}{proc.stderr}")
        lines = own_lines(proc.stderr)
        self.assertEqual(len(lines), 1, f"{flags}: expected one ssd-bench line: {proc.stderr!r}")
        self.assertTrue(lines[0].startswith("ssd-bench: error:"), lines[0])
        for needle in needles:
            self.assertIn(needle, lines[0], f"{flags}: {lines[0]}")
        return lines[0]

    def test_world_size_must_match_layout(self):
        self.expect_error(3, [*TINY, "--mode", "sd", "--draft", "perturb:0", "--target-tp", "2",
                              "--draft-ranks", "2"], "--target-tp", "--draft-ranks")

    def test_tp_must_divide_heads(self):
        # tiny-llama has 4 attention heads and 2 KV heads.
        self.expect_error(3, [*TINY, "--target-tp", "3"], "--target-tp")

    def test_sd_needs_a_draft(self):
        self.expect_error(1, [*TINY, "--mode", "sd"], "--draft")
        self.expect_error(2, [*TINY, "--mode", "sd", "--target-tp", "2"], "--draft")

    def test_draft_vocabulary_must_match(self):
        config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                  "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                  "vocab_size": 300, "max_position_embeddings": 512, "rms_norm_eps": 1e-5,
                  "rope_theta": 10000.0, "bos_token_id": 1, "eos_token_id": 2,
                  "tie_word_embeddings": False, "hidden_act": "silu"}
        path = os.path.join(ARGS.work, "vocab300", "config.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(config, f)
        line = self.expect_error(3, [*TINY, "--mode", "sd", "--target-tp", "2",
                                     "--draft", "synthetic:" + path], "--draft", "vocabulary")
        self.assertIn("300", line)

    def test_header_lists_ranks_in_order(self):
        for placement, np_, roles in [
                ("separate", 3, ["target tp 0/2", "target tp 1/2", "draft 0/1"]),
                ("collocated", 2, ["target tp 0/2 + draft", "target tp 1/2"])]:
            proc = mpirun(np_, *TINY, "--mode", "sd", "--draft", "perturb:0", "--target-tp", "2",
                          "--draft-placement", placement)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            lines = proc.stdout.splitlines()
            start = lines.index("# rank layout:")
            self.assertRegex(lines[start + 1],
                             r"^#\s+rank\s+role\s+host\s+pid\s+device\s+threads\s+cpus$")
            pattern = re.compile(
                r"^#\s+(\d+)\s+(target tp \d+/\d+(?: \+ draft)?|draft \d+/\d+)\s+(\S+)\s+(\d+)\s"
                r".*\s(\d+)\s+(\S+)$")
            rows = [pattern.match(line) for line in lines[start + 2:start + 2 + np_]]
            self.assertTrue(all(rows), lines[start:start + 2 + np_])
            self.assertEqual([int(m.group(1)) for m in rows], list(range(np_)))
            self.assertEqual([m.group(2) for m in rows], roles, placement)
            pids = [int(m.group(4)) for m in rows]
            self.assertEqual(len(set(pids)), np_, f"pids {pids}")
            self.assertNotIn(os.getpid(), pids)
            self.assertEqual([int(m.group(5)) for m in rows], [1] * np_)  # --threads 1
            # --bind-to none: every rank keeps this process's CPUs.
            mine = cpu_list_text(os.sched_getaffinity(0))
            self.assertEqual([m.group(6) for m in rows], [mine] * np_, placement)
            self.assertEqual(lines[start + 2 + np_], "#")  # 1 thread each: no warning

    def test_warning_where_threads_outnumber_the_cpus(self):
        # -np 1 --bind-to core: the rank gets one core whatever the host has (what mpirun does
        # by default for -np <= 2), and --threads 2 then shares it.
        path = os.path.join(ARGS.work, "bound.h5")
        self.assertEqual(TINY[-2:], ["--threads", "1"])
        flags = TINY[:-2]
        command = [ARGS.mpiexec, "--bind-to", "core", "-np", "1", ARGS.ssd_bench, *flags,
                   "--threads", "2", "--out", path]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=ENV)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = proc.stdout.splitlines()
        start = lines.index("# rank layout:")
        row = re.match(r"^#\s+0\s.*\s2\s+(\d+)$", lines[start + 2])
        self.assertTrue(row, lines[start:start + 4])
        cpu = row.group(1)
        self.assertEqual(
            lines[start + 3],
            f"# Warning: rank 0 runs 2 threads on 1 CPU (affinity {cpu}): mpirun binds a rank to "
            "one core by default; launch with --map-by slot:PE=2 --bind-to core (or --bind-to "
            "none), or srun with --cpus-per-task=2")
        self.assertEqual(lines[start + 4], "#")
        with h5py.File(path, "r") as f:
            rank = dict(f["/ranks/0"].attrs)
            self.assertEqual(int(f.attrs["oversubscribed_ranks"]), 1)
        self.assertEqual((rank["cpus"], int(rank["cpu_count"]), int(rank["threads"])),
                         (cpu, 1, 2))
        # The rank's last-level cache, as sysfs names it, and the host's count of them (>= 1).
        llc = last_level_cache(int(cpu))
        self.assertEqual(rank["llc"], "" if llc is None else str(llc))
        self.assertGreaterEqual(int(rank["host_llcs"]), 0 if llc is None else 1)

        # Without --threads the rank sizes itself to its one CPU: no warning.
        command = [ARGS.mpiexec, "--bind-to", "core", "-np", "1", ARGS.ssd_bench, *flags,
                   "--out", path, "--overwrite"]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=ENV)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = proc.stdout.splitlines()
        start = lines.index("# rank layout:")
        self.assertRegex(lines[start + 2], rf"^#\s+0\s.*\s1\s+{cpu}$")
        self.assertEqual(lines[start + 3], "#")
        self.assertNotIn("# Warning", proc.stdout)
        with h5py.File(path, "r") as f:
            self.assertEqual(int(f.attrs["oversubscribed_ranks"]), 0)
            self.assertEqual(int(f["/ranks/0"].attrs["threads"]), 1)

    def test_launcher_mismatch_is_refused(self):
        # What an ssd-bench built against another MPI sees when this launcher starts it: the
        # launcher's task count in the environment, but a world of one.
        env = dict(ENV, OMPI_COMM_WORLD_SIZE="2")
        proc = subprocess.run([ARGS.ssd_bench, *TINY], capture_output=True, text=True,
                              timeout=120, env=env)
        self.assertNotEqual(proc.returncode, 0, proc.stdout)
        lines = own_lines(proc.stderr)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("launcher", lines[0])
        self.assertIn("OMPI_COMM_WORLD_SIZE", lines[0])
        self.assertNotIn("Results", proc.stdout)

    def test_ranks_of_two_builds_are_refused(self):
        # A copy of the binary naming another commit (its commit string's first character
        # changed), launched beside the real one: every rank stops with one line naming both.
        proc = mpirun(1, *TINY)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        commit = re.search(r"\(commit (\S+?)[,)]", proc.stdout).group(1)
        other = ("1" if commit[0] != "1" else "2") + commit[1:]
        with open(ARGS.ssd_bench, "rb") as f:
            binary = f.read()
        needle = commit.encode() + b"\0"
        self.assertIn(needle, binary)
        copy = os.path.join(ARGS.work, "ssd-bench-other-build")
        with open(copy, "wb") as f:
            f.write(binary.replace(needle, other.encode() + b"\0"))
        os.chmod(copy, 0o755)
        command = [ARGS.mpiexec, "--oversubscribe", "--bind-to", "none", "-np", "1",
                   ARGS.ssd_bench, *TINY, ":", "-np", "1", copy, *TINY]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=ENV)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        lines = own_lines(proc.stderr)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("rank 1 runs ssd-bench", lines[0])
        self.assertIn(f"(commit {other})", lines[0])
        self.assertIn(f"(commit {commit})", lines[0])
        self.assertIn("the same ssd-bench build on every rank", lines[0])

    def test_sd_result_file(self):
        path = os.path.join(ARGS.work, "sd.h5")
        K, new = 3, 12
        proc = mpirun(3, "--target", "synthetic:tiny-llama", "--mode", "sd", "--draft",
                      "perturb:0.05", "--target-tp", "2", "-k", str(K), "--batch-size", "2",
                      "--num-prompts", "3", "--prompt-len", "5", "--max-new-tokens", str(new),
                      "--ignore-eos", "--reps", "2", "--warmup", "1", "--threads", "1", "--out",
                      path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(path, "r") as f:
            self.assertEqual(f.attrs["mode"], "sd")
            rounds = {name: f["/rounds"][name][...] for name in f["/rounds"]}
            summary = dict(f["/summary"].attrs)
            generated = f["/generated_tokens"][...]
            roles = [f[f"/ranks/{r}"].attrs["role"] for r in range(3)]
        self.assertEqual(roles, ["target tp 0/2", "target tp 1/2", "draft 0/1"])
        for column in ["rep", "round", "accepted", "drafted", "bonus_token", "draft_time_s",
                       "verify_time_s", "accept_time_s", "comm_time_s", "target_idle_s",
                       "draft_idle_s", "start_s", "end_s"]:
            self.assertIn(column, rounds)
        n = len(rounds["rep"])
        self.assertGreater(n, 0)
        for name, values in rounds.items():
            self.assertEqual(len(values), n, name)
        accepted, drafted = rounds["accepted"], rounds["drafted"]
        self.assertTrue(np.all(drafted == K))
        self.assertTrue(np.all((accepted >= 0) & (accepted <= K)))
        self.assertEqual(sorted(set(rounds["rep"].tolist())), [0, 1])  # warm-up not recorded
        self.assertTrue(np.all(rounds["end_s"] >= rounds["start_s"]))
        for column in ["draft_time_s", "verify_time_s", "accept_time_s", "comm_time_s",
                       "target_idle_s", "draft_idle_s"]:
            self.assertTrue(np.all(rounds[column] >= 0), column)

        self.assertEqual(summary["rounds"], n)
        self.assertEqual(summary["drafted_tokens"], drafted.sum())
        self.assertEqual(summary["accepted_tokens"], accepted.sum())
        self.assertAlmostEqual(summary["mean_acceptance_length"], 1 + accepted.sum() / n,
                               places=12)
        self.assertAlmostEqual(summary["acceptance_rate"], accepted.sum() / drafted.sum(),
                               places=12)
        per_position = [np.mean(accepted > i) for i in range(K)]
        np.testing.assert_allclose(summary["per_position_acceptance"], per_position, rtol=1e-12)
        histogram = np.bincount(accepted, minlength=K + 1)
        np.testing.assert_array_equal(summary["acceptance_length_histogram"], histogram)
        self.assertEqual(np.sum(summary["acceptance_length_histogram"]), n)
        # Draft and verify times are per round (every sequence of a round shares them).
        per_round = {}
        for i in range(n):
            key = (rounds["rep"][i], rounds["group"][i], rounds["round"][i])
            times = (rounds["draft_time_s"][i], rounds["verify_time_s"][i])
            self.assertEqual(per_round.setdefault(key, times), times, f"round {key}")
        draft_s = sum(t[0] for t in per_round.values())
        verify_s = sum(t[1] for t in per_round.values())
        self.assertAlmostEqual(summary["draft_time_s"], draft_s, delta=1e-9 * max(draft_s, 1))
        self.assertAlmostEqual(summary["verify_time_s"], verify_s, delta=1e-9 * max(verify_s, 1))
        self.assertAlmostEqual(summary["t_sd"], draft_s / verify_s, places=9)

        # Replaying rep 0's rounds reproduces /generated_tokens: after the prefill's token,
        # each round emits its accepted drafts and then its bonus token.
        rep0 = rounds["rep"] == 0
        for s in range(generated.shape[0]):
            mine = np.flatnonzero(rep0 & (rounds["sequence"] == s))
            self.assertTrue(np.all(np.diff(rounds["round"][mine]) > 0), f"sequence {s}")
            self.assertEqual(1 + rounds["tokens"][mine].sum(), new, f"sequence {s}")
            at = 1
            for i in mine:
                k, emitted = rounds["accepted"][i], rounds["tokens"][i]
                if emitted == k + 1:
                    self.assertEqual(generated[s, at + k], rounds["bonus_token"][i],
                                     f"sequence {s} round {rounds['round'][i]}")
                else:  # the token limit cut the round short
                    self.assertLessEqual(emitted, k)
                    self.assertEqual(at + emitted, new)
                at += emitted

    def test_rank_dying_mid_run_ends_the_job(self):
        # No fault-injection flag: kill a rank from outside while it decodes.
        for victim in (1, 2):  # a target TP follower, the draft rank
            with self.subTest(victim=victim):
                self.kill_rank_mid_run(victim)

    def kill_rank_mid_run(self, victim):
        flags = ["--target", "synthetic:tiny-llama", "--mode", "sd", "--draft", "perturb:0.05",
                 "--target-tp", "2", "--max-new-tokens", "20", "--ignore-eos", "--reps",
                 "1000000", "--warmup", "0", "--threads", "1"]
        with killed_on_exit(subprocess.Popen(mpi_command(3, flags), stdout=subprocess.DEVNULL,
                                             stderr=subprocess.PIPE, text=True, env=ENV)) as proc:
            ranks = self.wait_for_ranks(proc.pid, 3)
            time.sleep(1.0)  # well into the (effectively endless) decode loop
            self.assertIsNone(proc.poll(), "the run ended before the rank was killed")
            os.kill(ranks[victim], signal.SIGKILL)
            start = time.monotonic()
            _, stderr = proc.communicate(timeout=60)
            print(f"\n  rank {victim} killed: mpiexec exited {proc.returncode} after "
                  f"{time.monotonic() - start:.1f} s", end="", flush=True)
            self.assertNotEqual(proc.returncode, 0, stderr)
            time.sleep(0.5)
            for rank, pid in ranks.items():
                self.assertFalse(alive(pid), f"rank {rank} (pid {pid}) outlived the job")

    def wait_for_ranks(self, launcher, count):
        """{rank: pid} of the launcher's children, once all `count` have started."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ranks = world_ranks(launcher)
            if len(ranks) == count:
                return ranks
            time.sleep(0.05)
        self.fail("the ranks did not start")


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__], fresh_work=True)
