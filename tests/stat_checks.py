"""Helpers shared by the Python tests: reading generated tokens back, and a chi-square
homogeneity test (Debian's test Python has numpy but no scipy), with the one-prompt file whose
many sequences the sampled tests compare by it and the printed result of a comparison."""
import math
import os
import shutil

import h5py
import numpy as np


def tokens_of(path):
    with h5py.File(path, "r") as f:
        return f["/generated_tokens"][...]


def first_difference(got, want):
    """'sequence s position t: got x, want y' for the first differing token."""
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    s, t = np.argwhere(got != want)[0]
    return f"sequence {s} position {t}: got {got[s, t]}, want {want[s, t]}"


# --- chi-square survival function, Q(df/2, x/2) (no scipy in Debian's test Python) ---

def upper_gamma_q(a, x):
    if x <= 0:
        return 1.0
    log_prefactor = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = 1
        while abs(term) > abs(total) * 1e-16 and n < 100000:
            term *= x / (a + n)
            total += term
            n += 1
        return max(0.0, 1.0 - total * math.exp(log_prefactor))
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 100000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return math.exp(log_prefactor) * h


def chi2_sf(statistic, df):
    return upper_gamma_q(0.5 * df, 0.5 * statistic)


def homogeneity_p_value(a, b):
    """Chi-square test that the rows of a and b (samples of token tuples) come from the same
    distribution. Tuples too rare for an expected count of 5 in both samples are pooled into
    one cell. Returns (p-value, statistic, degrees of freedom)."""
    keys_a = [tuple(r) for r in a]
    keys_b = [tuple(r) for r in b]
    n_a, n_b = len(keys_a), len(keys_b)
    counts = {}
    for k in keys_a:
        counts.setdefault(k, [0, 0])[0] += 1
    for k in keys_b:
        counts.setdefault(k, [0, 0])[1] += 1
    need = 5 * (n_a + n_b) / min(n_a, n_b)  # pooled count giving expected >= 5 in both rows
    cells, rare = [], [0, 0]
    for c in counts.values():
        if sum(c) >= need:
            cells.append(c)
        else:
            rare[0] += c[0]
            rare[1] += c[1]
    if 0 < sum(rare) < need and cells:  # too few rare ones for a cell of their own
        smallest = min(cells, key=sum)
        smallest[0] += rare[0]
        smallest[1] += rare[1]
    elif sum(rare) > 0:
        cells.append(rare)
    statistic = 0.0
    for c in cells:
        pooled = sum(c)
        for observed, n in zip(c, (n_a, n_b)):
            expected = pooled * n / (n_a + n_b)
            statistic += (observed - expected) ** 2 / expected
    df = len(cells) - 1
    return chi2_sf(statistic, df), statistic, df


# --- sampled runs: many sequences of one prompt, compared by the test above ---

def same_prompt_file(directory, copies):
    """Empties `directory` and writes same-prompt.jsonl there: one 6-token prompt `copies` times,
    so that a run samples `copies` independent sequences from one distribution; returns its
    path."""
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    path = os.path.join(directory, "same-prompt.jsonl")
    with open(path, "w") as f:
        f.write('{"ids": [1, 17, 93, 5, 200, 41]}\n' * copies)
    return path


def printed_p_value(a_name, a, b_name, b, columns):
    """homogeneity_p_value of token columns `columns` of samples a and b (rows: sequences),
    printed with its statistic and degrees of freedom; returns the p-value."""
    p, statistic, df = homogeneity_p_value(a[:, columns], b[:, columns])
    print(f"\n  {a_name} vs {b_name}, tokens {columns}: chi2 {statistic:.1f} df {df} p {p:.3g}",
          end="", flush=True)
    return p
