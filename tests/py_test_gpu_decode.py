#!/usr/bin/python3
"""The CUDA backend end to end, through ssd-bench and mpirun (label gpu).

Greedy SD and SSD on the GPU generate exactly the GPU's AR tokens, for Llama- and Qwen3-shaped
tiny models, several K and batch sizes, with the draft beside the target (SD) and on its own
rank (SD and SSD, SSD also with 2 and 3 draft ranks; on a one-GPU machine the ranks share the
GPU). The result files record the backend and the GPU. Skips, with the reason, when this build
has no CUDA backend or no GPU is visible."""
import os
import subprocess
import sys
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_run  # noqa: E402
from stat_checks import first_difference, tokens_of  # noqa: E402

ARGS = None
COMMON = ["--backend", "cuda", "--seed", "5", "--num-prompts", "3", "--prompt-len", "7",
          "--max-new-tokens", "24", "--ignore-eos", "--reps", "1", "--warmup", "0",
          "--threads", "1"]


def launch(np_, flags, timeout=300):
    return mpi_run.launch(ARGS, np_, flags, timeout, env={"OMPI_MCA_mpi_yield_when_idle": "1"})


def gpu_unavailable_reason():
    """Why the GPU path cannot run here, or '' when it can."""
    proc = subprocess.run([ARGS.ssd_bench, "--backend", "cuda", "--target", "synthetic:tiny-llama",
                           "--num-prompts", "1", "--prompt-len", "2", "--max-new-tokens", "1",
                           "--reps", "1", "--warmup", "0"],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    if proc.returncode == 0:
        return ""
    for line in proc.stderr.splitlines():
        if "no CUDA backend" in line or "no usable GPU" in line:
            return line.strip()
    raise AssertionError(f"probe run failed for another reason:\n{proc.stdout}{proc.stderr}")


class GpuGreedyLossless(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        mpi_run.skip_if(gpu_unavailable_reason())

    def run_to_file(self, name, np_, flags, common=COMMON):
        path = os.path.join(ARGS.work, name + ".h5")
        if os.path.exists(path):
            os.remove(path)
        proc = launch(np_, [*common, *flags, "--out", path])
        self.assertEqual(proc.returncode, 0, f"{name}: {proc.stdout[-3000:]}{proc.stderr}")
        return path

    def check_model(self, target, draft_other):
        tag = target.split(":")[-1]
        ar_path = self.run_to_file(f"{tag}_ar", 1, ["--target", target])
        ar = tokens_of(ar_path)
        self.assertEqual(ar.shape, (3, 24))
        with h5py.File(ar_path, "r") as f:
            # gpu_model is written only when the run's backend resolved to cuda (argv and
            # config_json merely echo the --backend flag); /libraries then holds its versions.
            gpu_model = f.attrs["gpu_model"]
            libraries = set(f["/libraries"].attrs)
        self.assertNotEqual(gpu_model, "none", "the result file must record the GPU it ran on")
        self.assertIn("cuda_runtime", libraries)
        runs, accept_all = {}, set()
        for draft in ("perturb:0", "perturb:0.05", draft_other):
            for k, batch, fanout in ((1, 1, "uniform:2"), (3, 3, "uniform:2"), (5, 2, "geometric")):
                base = ["--target", target, "--draft", draft, "-k", str(k), "--batch-size",
                        str(batch)]
                short = f"{draft.split(':')[-1]}_k{k}_b{batch}"
                runs[f"{tag}_sd_{short}"] = self.run_to_file(
                    f"{tag}_sd_{short}", 1, [*base, "--mode", "sd", "--draft-placement",
                                             "collocated"])
                runs[f"{tag}_sdsep_{short}"] = self.run_to_file(
                    f"{tag}_sdsep_{short}", 2, [*base, "--mode", "sd"])
                runs[f"{tag}_ssd_{short}"] = self.run_to_file(
                    f"{tag}_ssd_{short}", 2, [*base, "--mode", "ssd", "--fanout", fanout,
                                              "--budget", "auto"])
                if draft == "perturb:0":
                    accept_all.update({f"{tag}_sd_{short}", f"{tag}_sdsep_{short}"})
                    # With a fixed fan-out every cache lookup hits, so no backup round (random
                    # tokens) runs and every drafted token is accepted; with geometric fan-out
                    # and --budget auto a short verification window may leave k = K uncovered.
                    if fanout != "geometric":
                        accept_all.add(f"{tag}_ssd_{short}")
        # SSD's cache built by two and three draft ranks, each serving its share of the batch
        # (B8); on a one-GPU machine every rank shares the GPU.
        for ranks in (2, 3):
            name = f"{tag}_ssd_D{ranks}"
            runs[name] = self.run_to_file(
                name, 1 + ranks, ["--target", target, "--draft", draft_other, "-k", "3",
                                  "--batch-size", "3", "--mode", "ssd", "--draft-ranks",
                                  str(ranks), "--fanout", "uniform:2", "--budget", "auto"])
        mismatches = []
        for name, path in runs.items():
            tokens = tokens_of(path)
            if not np.array_equal(tokens, ar):
                mismatches.append(f"{name}: {first_difference(tokens, ar)}")
            with h5py.File(path, "r") as f:
                rate = float(f["/summary"].attrs["acceptance_rate"])
                p_hit = float(f["/summary"].attrs.get("p_hit", 1.0))
            if name in accept_all:
                self.assertEqual(rate, 1.0, f"{name}: the target as its own draft accepts all")
                self.assertEqual(p_hit, 1.0, f"{name}: every lookup hits")
        self.assertEqual(mismatches, [], "GPU SD/SSD != GPU AR:\n" + "\n".join(mismatches))

    def test_llama(self):
        self.check_model("synthetic:tiny-llama", "synthetic:tiny-llama-other")

    def test_qwen3(self):
        self.check_model("synthetic:tiny-qwen3", "perturb:0.3")

    def test_verification_past_64_rows(self):
        """Batch 16 x (K 4 + 1) = 80 verification rows, past the 64 up to which the CUDA GEMM is
        batch-invariant by default: the run raises that bound, so SD still equals AR."""
        common = [("16" if prev == "--num-prompts" else v) for prev, v in zip([""] + COMMON, COMMON)]
        for gemm in ("invariant", "invariant-tc"):
            flags = ["--target", "synthetic:llama-124m", "--batch-size", "16", "--gemm", gemm]
            ar = tokens_of(self.run_to_file(f"b16_ar_{gemm}", 1, flags, common))
            sd = tokens_of(self.run_to_file(
                f"b16_sd_{gemm}", 1, [*flags, "--draft", "perturb:0.05", "-k", "4", "--mode", "sd",
                                      "--draft-placement", "collocated"], common))
            self.assertEqual(ar.shape, (16, 24))
            if not np.array_equal(sd, ar):
                self.fail(f"--gemm {gemm}, SD batch 16: {first_difference(sd, ar)}")


if __name__ == "__main__":
    mpi_run.main(sys.modules[__name__])
