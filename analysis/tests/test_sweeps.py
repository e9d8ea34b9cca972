#!/usr/bin/python3
"""The shipped sweep files give `ssd-analyze validate` what it needs: every SD/SSD run of a
sweep has an AR run in the same sweep with the same validate group (Run.sweep_key: target,
batch size, temperature, token limit, prompts). Static: expands the files, runs nothing.
Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import glob
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "sweeps"))

import sweep  # noqa: E402

# ssd-bench's defaults for the flags that decide the group (num-prompts: the batch size)
DEFAULTS = {"target": "synthetic:llama-124m", "batch-size": 1, "temperature": 0.0,
            "max-new-tokens": 128, "prompt-len": 16, "prompts": "", "seed": 0,
            "weight-seed": 0}


def group(flags):
    """What io.Run.sweep_key compares, from a run's flags (the prompts by what makes them)."""
    f = {**DEFAULTS, **flags}
    num_prompts = f.get("num-prompts", f["batch-size"])
    return (f["target"], int(f["batch-size"]), float(f["temperature"]), int(f["max-new-tokens"]),
            str(f["prompts"]), int(num_prompts), int(f["prompt-len"]), int(f["seed"]),
            int(f["weight-seed"]))


class ShippedSweeps(unittest.TestCase):
    def test_every_speculative_run_has_an_ar_baseline(self):
        files = sorted(glob.glob(os.path.join(ROOT, "sweeps", "*.toml")))
        self.assertTrue(files)
        for path in files:
            with self.subTest(sweep=os.path.basename(path)):
                runs = sweep.expand(sweep.load(path), "/nonexistent")
                ar = {group(r.flags) for r in runs if r.flags.get("mode", "ar") == "ar"}
                orphans = [r.label for r in runs
                           if r.flags.get("mode", "ar") != "ar" and group(r.flags) not in ar]
                self.assertEqual(orphans, [], "SD/SSD runs without an AR run of their group")

    def test_group_follows_validate_key(self):
        # num-prompts defaults to the batch size; SSD-only flags do not split groups
        a = group({"mode": "ar", "batch-size": 4})
        self.assertEqual(a, group({"mode": "ssd", "batch-size": 4, "num-prompts": 4,
                                   "fanout": "uniform:2", "saguaro-c": 0.5}))
        self.assertNotEqual(a, group({"mode": "ssd", "batch-size": 4, "temperature": 1.0}))


if __name__ == "__main__":
    unittest.main()
