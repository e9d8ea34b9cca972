#!/usr/bin/python3
"""Where `ssd-analyze predict`'s alpha and r come from, its band, and the search caps it must
say it hit (analysis/ssd_analysis/predict_inputs.py).
Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, ".."))

from ssd_analysis import hardware as H  # noqa: E402
from ssd_analysis import predict as P  # noqa: E402
from ssd_analysis import predict_inputs as PI  # noqa: E402

ANALYZE = os.path.join(ROOT, "analysis", "ssd-analyze")


def analyze(*args):
    return subprocess.run(["/usr/bin/python3", ANALYZE, "predict", *args], capture_output=True,
                          text=True, timeout=120)


def layout(target, draft, vocab):
    hw = H.PROFILES["h100-sxm"]
    t = H.RooflineStep(H.shape_of(target), hw, 4, 1024)
    d = H.RooflineStep(H.shape_of(draft), hw, 1, 1024)
    return P.Layout(t, d, hw.link_latency_s, hw.link_bw, vocab, 1)


class ImpliedAlpha(unittest.TestCase):
    def test_reproduces_the_papers_sd_over_ar_at_k5(self):
        for target, draft, vocab, ratio in (("llama-3.1-70b", "llama-3.2-1b", 128256, 2.958),
                                            ("qwen3-32b", "qwen3-0.6b", 151936, 1.541)):
            lay = layout(target, draft, vocab)
            a = PI.implied_alpha(lay, ratio)
            sd = P.predict_sd(lay, 1, PI.PAPER_K, a).tok_s / P.predict_ar(lay, 1).tok_s
            self.assertAlmostEqual(sd, ratio, places=4)
            self.assertTrue(0.3 < a < 0.95, (target, a))

    def test_out_of_reach_is_clipped(self):
        lay = layout("llama-3.1-70b", "llama-3.2-1b", 128256)
        self.assertEqual(PI.implied_alpha(lay, 50.0), 0.999)
        self.assertEqual(PI.implied_alpha(lay, 0.01), 0.0)


class Cli(unittest.TestCase):
    def test_every_input_states_its_source(self):
        p = analyze("-b", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("# alpha: 0.8", p.stdout)
        self.assertIn("implied by the paper's SD/AR", p.stdout)
        self.assertIn("# r: 2.22 (measured on Qwen2.5-Coder", p.stdout)
        given = analyze("-b", "1", "--alpha", "0.7", "--r", "0.6").stdout
        self.assertIn("# alpha: 0.700 (--alpha)", given)
        self.assertIn("# r: 0.60 (--r)", given)
        # not a setting of the paper's table (another GPU): the pair's measured alpha
        h200 = analyze("-b", "1", "--hardware", "h200").stdout
        self.assertIn("# alpha: 0.860 (measured on Qwen2.5-Coder", h200)
        sampled = analyze("-b", "1", "--temperature", "1").stdout
        self.assertIn("# alpha: 0.800 (measured on Qwen2.5-Coder-1.5B/0.5B, code prompts, T = 1",
                      sampled)

    def test_the_band_holds_the_point_forecast(self):
        rows = json.loads(analyze("-b", "1,16", "--format", "json").stdout)["rows"]
        for row in rows:
            for col in ("SD", "SSD"):
                lo, hi = map(float, row[col + "_band"].split("-"))
                self.assertLessEqual(lo, row[col] + 0.5, row)
                self.assertGreaterEqual(hi, row[col] - 0.5, row)

    def test_a_binding_cap_is_said_with_the_uncapped_optimum(self):
        # -k auto's range reaches 32: the paper's Llama pair finds its optimum inside it.
        p = analyze("-b", "1")
        self.assertNotIn("is -k auto's cap", p.stdout)
        best = json.loads(analyze("-b", "1", "--format", "json").stdout)["rows"][0]
        self.assertEqual(int(best["K"]), 13)
        # A best K on the range's end is said, with the optimum past it.
        row = {"b": 1, "D": 1, "K_txt": str(PI.K_CAP)}
        capped = P.Prediction("ssd", 100.0, K=PI.K_CAP, fanout_total=16)
        wider = P.Prediction("ssd", 110.0, K=PI.K_CAP + 7, fanout_total=16)
        notes = PI.cap_notes(row, capped, False, range(1, PI.K_CAP + 1), 128, lambda: wider,
                             lambda: capped)
        self.assertEqual(row["K_txt"], f"{PI.K_CAP}*")
        self.assertIn(f"K = {PI.K_CAP} is -k auto's cap (ssd/lookahead.h); the model's optimum "
                      f"is K = {PI.K_CAP + 7} at 110.0 tok/s (run -k {PI.K_CAP + 7})", notes[0])
        small = analyze("-b", "1", "--max-budget", "4", "-k", "4", "--format", "json")
        notes = json.loads(small.stdout)["inputs"]["notes"]
        self.assertTrue(any("B = 4 is the budget cap" in n for n in notes), notes)
        over = analyze("-b", "1", "--max-budget", "256")
        self.assertIn("only as a fixed --budget", over.stdout)

    def test_the_papers_second_setting_is_compared_too(self):
        p = analyze("-b", "1", "--target", "qwen3-32b", "--draft", "qwen3-0.6b")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("203.8", p.stdout)
        self.assertIn("paper vs model at b=1: AR step 11.3", p.stdout)

    def test_gpu_steps_against_the_h100_measurements(self):
        p = analyze("--gpu-steps")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [l for l in p.stdout.splitlines() if l.startswith("llama-")]
        self.assertEqual(len(lines), len(PI.GPU_STEPS_H100))
        # the 8B one-row step streams its weights at ~90% of the roofline's bandwidth
        self.assertTrue(any(l.startswith("llama-3.1-8b      1") and l.endswith("yes")
                            for l in lines), lines)


if __name__ == "__main__":
    unittest.main()
