"""Analysis of ssd-bench HDF5 result files (docs/hdf5-schema.md).

Modules:
  io       -- load one run (or a `characterize` file) into a `Run` dataclass
  schema   -- docs/hdf5-schema.md as checks; /summary recomputed from the records
  metrics  -- pure functions: the paper's formulas (Theorem 7, Corollaries 9 and 16,
              Theorem 17, Equation (1)), hit statistics, power-law fit, Pareto frontier
  timing   -- pure functions over /rounds and /steps columns: batch rounds, latency components
  validate -- predicted vs measured speedups per sweep group
  summary  -- one aligned row (or CSV row) per run
  figures  -- the paper's figures from a set of runs (matplotlib, Agg); figures_detail: the
              rank timeline and the roofline
  compare  -- machines side by side (`ssd-analyze compare`); machine: which machine a file
              came from; figures_compare: the machines' roofline

Paper: Kumar, Dao, May, "Speculative Speculative Decoding" (SAGUARO), ICLR 2026.
"""

__all__ = ["io", "schema", "metrics", "timing", "validate", "summary", "figures",
           "figures_detail"]
