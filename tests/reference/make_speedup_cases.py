"""Writes speedup_cases.json: the paper's speedup formulas evaluated on a grid, the one table
that ssd-bench's fallback policy (ssd/fallback.cpp, tests/test_fallback.cpp) and analysis/
(ssd_analysis/metrics.py, analysis/tests/test_metrics.py) are both checked against. The
formulas are typed here straight from the paper, independently of either implementation:
    Corollary 16:  (p E_hit + (1-p) E_miss) / (p^b max(1, T) + (1 - p^b)(1 + T_b))
    Theorem 17, slow (primary) fallback:  E_hit / (p^b max(1, T) + (1 - p^b)(1 + T))
    Theorem 17, b* = log(1 + 1/T - E_hit / (T (p E_hit + (1-p) E_miss))) / log(p), given
      where the theorem's premises hold (T_b = 0, T < 1) and b* is finite and positive
T is the paper's primary latency T_p, one value in both places. Its key is "t_jit" because
ssd-bench's policy feeds these formulas the primary's just-in-time drafting time
(ssd/fallback.h SpeedupInputs::t_jit, /summary's t_jit), not /summary's t_p (the cache build
over the verification); analysis's Corollary 16 takes the same number as its T_p.
Run: /usr/bin/python3 tests/reference/make_speedup_cases.py (from the repository root)."""
import itertools
import json
import math
import os

cases = []
for p, e_hit, e_miss, t_jit, t_b, b in itertools.product(
        (0.0, 0.3, 0.8, 0.97, 1.0), (1.0, 3.2), (1.0, 1.9), (0.2, 0.9, 1.6), (0.0, 0.4),
        (1, 2, 7, 64)):
    x = p ** b
    tokens = p * e_hit + (1 - p) * e_miss
    case = {"p_hit": p, "e_hit": e_hit, "e_miss": e_miss, "t_jit": t_jit, "t_b": t_b, "b": b,
            "corollary16": tokens / (x * max(1.0, t_jit) + (1 - x) * (1 + t_b)),
            "slow_fallback": e_hit / (x * max(1.0, t_jit) + (1 - x) * (1 + t_jit))}
    x_star = 1 + 1 / t_jit - e_hit / (t_jit * tokens)
    if t_b == 0 and t_jit < 1 and 0 < p < 1 and 0 < x_star < 1:
        case["b_star"] = math.log(x_star) / math.log(p)
    cases.append(case)
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "speedup_cases.json")
with open(path, "w") as f:
    json.dump({"source": "tests/reference/make_speedup_cases.py", "cases": cases}, f, indent=0)
    f.write("\n")
print(f"{len(cases)} cases -> {path}")
