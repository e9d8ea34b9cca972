#!/usr/bin/python3
"""Unit tests of analysis/ssd_analysis/schema.py on tiny hand-written HDF5 run files: a file
that follows docs/hdf5-schema.md gets no warnings (NaN where a quantity is undefined, SD's
sources), and the wrong encodings the checks exist for are still reported.
Run: /usr/bin/python3 -m unittest discover -s analysis/tests"""
import json
import math
import os
import shutil
import sys
import tempfile
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ssd_analysis import io  # noqa: E402
from ssd_analysis import schema as S  # noqa: E402
from test_metrics import rounds_table  # noqa: E402

K = 3
NAN = math.nan


def ssd_rounds(sources, outcomes, accepted):
    """/rounds of one batch-1 sequence, round i from i to i+1 s (verify 0.5 s, draft 0.2 s,
    cache build 0.3 s on looked-up rounds, fallback 0.1 s on rounds not served by the cache)."""
    rows = []
    for i, (src, hit, acc) in enumerate(zip(sources, outcomes, accepted)):
        rows.append(dict(round=i, source=src, outcome_hit=hit, accepted=acc, drafted=K,
                         tokens=acc + 1, bonus_rank=1 if hit == 1 else 0,
                         cache_build_time_s=0.3 if hit >= 0 else 0.0,
                         fallback_time_s=0.0 if src == S.SOURCE_HIT else 0.1,
                         start_s=float(i), end_s=i + 1.0, draft_start_s=float(i),
                         draft_end_s=i + 0.2, draft_time_s=0.2, verify_time_s=0.5))
    table = rounds_table(rows)
    table["fanout"] = np.ones((len(rows), K + 1), dtype=np.int32)
    return table


def summary_of(mode, rd):
    """/summary as the C++ harness writes it (harness/summary.cpp), NaN where undefined."""
    def mean(x):
        return float(np.mean(x)) if len(x) else NAN
    acc = rd["accepted"]
    tokens = float(rd["tokens"].sum())
    wall = float((rd["end_s"] - rd["start_s"]).sum())
    s = dict(decode_tokens_per_s=tokens / wall, decode_tokens_per_s_std=0.0,
             prefill_tokens_per_s=100.0, prefill_tokens_per_s_std=0.0,
             ms_per_token_mean=1e3 * wall / tokens, ms_per_token_std=0.0, reps=1,
             generated_tokens_per_rep=int(tokens), tokens_identical_across_reps=1,
             rounds=len(acc), drafted_tokens=int(rd["drafted"].sum()),
             accepted_tokens=int(acc.sum()), mean_acceptance_length=1 + acc.mean(),
             acceptance_rate=acc.sum() / rd["drafted"].sum(),
             per_position_acceptance=[float(np.mean(acc > i)) for i in range(K)],
             acceptance_length_histogram=np.bincount(np.minimum(acc, K), minlength=K + 1),
             t_sd=rd["draft_time_s"].sum() / rd["verify_time_s"].sum(),
             draft_time_s=float(rd["draft_time_s"].sum()),
             verify_time_s=float(rd["verify_time_s"].sum()),
             clock_span_s=float(rd["end_s"].max()) if len(rd["end_s"]) else 0.0)
    if mode == "ssd":
        src, hit = rd["source"], rd["outcome_hit"]
        looked = hit >= 0
        backup = looked & (src == S.SOURCE_BACKUP)
        miss = (src != S.SOURCE_HIT) & (rd["round"] > 0)
        v = rd["verify_time_s"].mean()
        s.update(cache_lookups=int(looked.sum()), cache_hits=int(hit[looked].sum()),
                 p_hit=mean(hit[looked]), p_hit_primary=mean(hit[looked & ~backup]),
                 p_hit_backup=mean(hit[backup]), e_hit=1 + mean(acc[src == S.SOURCE_HIT]),
                 e_miss=1 + mean(acc[miss]), t_p=rd["cache_build_time_s"][looked].mean() / v,
                 t_b=rd["fallback_time_s"][miss].mean() / v if miss.any() else 0.0,
                 ssd_warning="")
    return s


class RunFiles:
    """Writes tiny run files in a temporary directory (a mixin for TestCases here and in
    test_traffic.py)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ssd-schema-test-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, mode, rd, reps_extra=None, draft_ranks=None, model_attrs=None,
              **summary_overrides):
        """A complete run file of `mode` with /rounds `rd` (and /reps columns `reps_extra`,
        /draft_ranks `draft_ranks`, /models/<role> attributes `model_attrs`); returns the loaded
        Run."""
        path = os.path.join(self.dir, f"{mode}_{len(os.listdir(self.dir))}.h5")
        summary = summary_of(mode, rd) | summary_overrides
        tokens = float(rd["tokens"].sum())
        wall = float((rd["end_s"] - rd["start_s"]).sum())
        config = {"target": "synthetic:tiny-llama", "draft": "perturb:0.1", "lookahead": str(K),
                  "batch_size": "1", "temperature": "0", "max_new_tokens": "16",
                  "fanout": "uniform:1", "fallback": "primary"}
        with h5py.File(path, "w") as f:
            for a in S.ROOT_ATTRS:
                f.attrs[a] = "x"
            f.attrs.update(schema_version="1.1", complete=1, mode=mode,
                           config_json=json.dumps(config), synthetic_outcomes=0)
            g = f.create_group("summary")
            for k, v in summary.items():
                g.attrs[k] = v
            reps = dict(rep=[0], prefill_time_s=[0.1], prefill_tokens=[8],
                        decode_time_s=[wall], decode_tokens=[tokens],
                        decode_steps=[len(rd["rep"])], per_sequence_decode_tokens=[tokens],
                        generated_tokens=[int(tokens)], decode_tokens_per_s=[tokens / wall],
                        ms_per_token=[1e3 * wall / tokens]) | (reps_extra or {})
            tables = [("reps", reps), ("steps", {c: [] for c in S.STEP_COLUMNS}), ("rounds", rd)]
            if draft_ranks:
                tables.append(("draft_ranks", draft_ranks))
            for name, table in tables:
                grp = f.create_group(name)
                for col, values in table.items():
                    grp.create_dataset(col, data=np.asarray(values) if len(values) else
                                       np.zeros(0))
            for model in ("target", "draft"):
                g = f.create_group(f"models/{model}")
                g.attrs["spec"] = config[model]
                g.attrs.update((model_attrs or {}).get(model, {}))
        return io.load_run(path)



class SchemaChecks(RunFiles, unittest.TestCase):
    def problems(self, run):
        return S.schema_problems(run) + S.consistency_problems(run)

    # --- forward passes (files since 2026-12-03) --------------------------------------------

    def test_forward_passes_agree_with_rounds_and_draft_ranks(self):
        rd = ssd_rounds(sources=[0, 1, 2, 1], outcomes=[1, 0, 1, -1], accepted=[2, 3, 1, 0])
        ranks = dict(rep=[0, 0, 0, 0], forward_passes=[3, 4, 7, 4])
        run = self.write("ssd", rd, reps_extra=dict(target_forward_passes=[4],
                                                    draft_forward_passes=[18]),
                         draft_ranks=ranks)
        self.assertEqual(self.problems(run), [])
        run = self.write("ssd", rd, reps_extra=dict(target_forward_passes=[5],
                                                    draft_forward_passes=[17]),
                         draft_ranks=ranks)
        found = self.problems(run)
        self.assertEqual(len(found), 2, found)
        self.assertIn("/reps/target_forward_passes (one per step or round) = [5]", found[0])
        self.assertIn("/reps/draft_forward_passes (sum of /draft_ranks forward_passes) = [17] "
                      "but the records give [18]", found[1])

    # --- files that follow the schema: no warnings ----------------------------------------

    def test_ssd_without_backup_lookups_nan_is_clean(self):
        # fallback primary: no backup-speculated lookups, so p_hit_backup is NaN
        rd = ssd_rounds(sources=[0, 1, 2, 1], outcomes=[1, 0, 1, -1], accepted=[2, 3, 1, 0])
        run = self.write("ssd", rd)
        self.assertTrue(math.isnan(run.summary["p_hit_backup"]))
        self.assertEqual(self.problems(run), [])

    def test_ssd_without_hits_nan_e_hit_is_clean(self):
        # every lookup missed: no round speculated from a cache hit, so E_hit is NaN
        rd = ssd_rounds(sources=[0, 2, 2, 2], outcomes=[0, 0, 0, -1], accepted=[1, 0, 2, 1])
        run = self.write("ssd", rd)
        self.assertTrue(math.isnan(run.summary["e_hit"]))
        self.assertTrue(math.isnan(run.summary["p_hit_backup"]))
        self.assertEqual(self.problems(run), [])

    def test_sd_round0_primary_is_clean(self):
        # SD has no cache: round 0 is drafted by the primary like every other (source 2)
        rd = ssd_rounds(sources=[2, 2, 2], outcomes=[-1, -1, -1], accepted=[3, 1, 0])
        run = self.write("sd", rd)
        self.assertEqual(self.problems(run), [])

    # --- wrong encodings are still reported ------------------------------------------------

    def test_ssd_sentinel_instead_of_nan_is_reported(self):
        rd = ssd_rounds(sources=[0, 2, 2, 2], outcomes=[0, 0, 0, -1], accepted=[1, 0, 2, 1])
        run = self.write("ssd", rd, p_hit_backup=-1.0, e_hit=0.0)
        found = self.problems(run)
        self.assertEqual(len([p for p in found if "p_hit_backup = -1.0" in p]), 1, found)
        self.assertEqual(len([p for p in found if "e_hit = 0.0" in p]), 1, found)
        self.assertEqual(len(found), 2, found)

    def test_ssd_round0_not_first_is_reported(self):
        rd = ssd_rounds(sources=[2, 1, 2, 1], outcomes=[1, 0, 1, -1], accepted=[2, 3, 1, 0])
        found = self.problems(self.write("ssd", rd))
        self.assertEqual(len(found), 1, found)
        self.assertIn("/rounds/source is never 0 on round 0", found[0])

    def test_sd_non_primary_source_is_reported(self):
        rd = ssd_rounds(sources=[0, 2, 2], outcomes=[-1, -1, -1], accepted=[3, 1, 0])
        found = self.problems(self.write("sd", rd))
        self.assertEqual(len(found), 1, found)
        self.assertIn("not 2 on every SD round", found[0])

    def test_timestamps_outside_the_clock_are_reported(self):
        rd = ssd_rounds(sources=[0, 1, 2, 1], outcomes=[1, 0, 1, -1], accepted=[2, 3, 1, 0])
        for c in ("draft_start_s", "draft_end_s"):  # the draft's times on another clock
            rd[c] = rd[c] + 1000.0
        found = self.problems(self.write("ssd", rd))
        self.assertEqual(len(found), 2, found)
        self.assertIn("/rounds/draft_start_s spans", found[0])
        self.assertIn("/rounds/draft_end_s spans", found[1])

    def test_nan_where_defined_is_reported(self):
        rd = ssd_rounds(sources=[0, 1, 2, 1], outcomes=[1, 0, 1, -1], accepted=[2, 3, 1, 0])
        found = self.problems(self.write("ssd", rd, e_hit=NAN))
        self.assertEqual(len(found), 1, found)
        self.assertIn("e_hit = nan but the records give 2.5", found[0])


if __name__ == "__main__":
    unittest.main()
