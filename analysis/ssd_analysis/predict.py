"""`ssd-analyze predict`: a first-principles performance model of AR, SD and SSD decoding.

Inputs: forward-pass costs (hardware.py: a roofline of bytes moved and FLOPs on a named GPU
profile, or the step costs an `ssd-bench characterize` file measured on this machine), the
draft's acceptance rate alpha and power-law exponent r (miss(F) = (F+1)^-r, ssd/fanout.h), K,
the batch size b, the target's tensor parallelism and the number D of draft ranks. Nothing here
is fitted to a measured or published throughput (predict_inputs.py says where the CLI's alpha
and r come from).

A round of SSD with D draft ranks, each serving ceil(b/D) of the b sequences (row i on draft
rank i % D):
  verify   = target forward over b(K+1) rows
  build    = draft glue step + K branch steps over s B rows, s = ceil(b/D); the glue step
             feeds one row per sequence after a hit or the primary's just-in-time drafting,
             K + E_miss after a backup's speculation (glue_step)
  T_p      = build / verify;  T_b = fallback / verify (primary just in time: K draft steps of
             s rows; backup: no forward pass)
  p_hit    = A.2's objective for Theorem 12's shape of budget B (greedy integer optimum, as
             ssd/budget.cpp); with the backup fallback, Equation (1) over p_hit,p and p_hit,b
  tok/s    = b (p E_hit + (1-p) E_miss) / (verify x Corollary 16's latency + messages)
             (a miss after a build longer than verify also waits for the build: round_latency)
SD: E_SD / (K draft steps of b rows + verify) (Section 3.2); AR: b / (forward over b rows).
The speedup formulas are metrics.py's (Theorem 7, Corollary 16, Equation (1), Theorem 17).
"""
import math
from dataclasses import dataclass, field

import numpy as np

from . import metrics as M

WINDOW_SLACK = 0.9   # the hidden budget must finish within 90% of verify (as ssd/fanout.h)


# --- acceptance and the cache's hit rate ------------------------------------------------------

def tokens_per_round(alpha, K):
    """E_SD = E_hit: 1 + expected accepted tokens of K drafted, iid acceptance alpha."""
    a = min(max(alpha, 0.0), 1.0)
    return float(sum(a ** i for i in range(K + 1)))


def outcome_weights(alpha, K):
    """P(exactly k of K accepted): a^k (1-a) for k < K, a^K for k = K (A.2)."""
    a = min(max(alpha, 0.0), 1.0)
    return [a ** k * (1 - a) if k < K else a ** K for k in range(K + 1)]


def position_exponents(K, r, r_all=None):
    """The power law's exponent at each position k = 0..K: r after a rejection (k < K), r_all
    after all K accepted (Theorem 18's curve per condition, ssd/fanout.h FanoutLaw); r_all None
    is Theorem 12's one law."""
    r = max(r, 1e-3)
    r_all = r if r_all is None else max(r_all, 1e-3)
    return [r] * K + [r_all]


def hit_rate(shape, alpha, r, r_all=None):
    """A.2's objective with the shifted power law: sum_k w_k (1 - (F_k + 1)^-r_k)."""
    K = len(shape) - 1
    return float(sum(w * (1.0 - (f + 1.0) ** -rk) for w, f, rk in
                     zip(outcome_weights(alpha, K), shape, position_exponents(K, r, r_all))))


def geometric_shapes(K, max_fanout_total, alpha, r, r_all=None):
    """[(shape, p_hit)] for total fan-outs B = 0..max_fanout_total: the optimum of A.2's
    objective under the shifted law (Theorem 12's with one r, Theorem 18's with r_all at k = K),
    built one unit at a time to the largest marginal gain (ssd/fanout.h FanoutObjective)."""
    rk = position_exponents(K, r, r_all)
    w = outcome_weights(alpha, K)
    shape, p, out = [0] * (K + 1), 0.0, [([0] * (K + 1), 0.0)]
    for _ in range(max_fanout_total):
        gains = [w[k] * ((shape[k] + 1.0) ** -rk[k] - (shape[k] + 2.0) ** -rk[k])
                 for k in range(K + 1)]
        k = max(range(K + 1), key=lambda i: (gains[i], -i))
        shape[k] += 1
        p += gains[k]
        out.append((list(shape), min(max(p, 0.0), 1.0)))
    return out


def parse_shape(text, K, alpha, r, budget=None, r_all=None):
    """A --fanout string (uniform:F, list:..., geometric[:B]) -> integer shape, or None for
    'geometric' without a budget (the caller picks it)."""
    kind, _, arg = text.partition(":")
    if kind == "uniform":
        return [int(arg or 1)] * (K + 1)
    if kind == "list":
        return [int(x) for x in arg.split(",")]
    if kind == "geometric":
        b = int(arg) if arg else budget
        return None if b is None else geometric_shapes(K, b, alpha, r, r_all)[b][0]
    raise ValueError(f"fan-out '{text}'")


# --- costs of one layout ----------------------------------------------------------------------

@dataclass
class Layout:
    """Forward-pass cost functions (seconds for `rows` rows of `sequences` sequences) of the
    target (over its TP group) and of one draft rank, and the draft<->target link."""
    target: object
    draft: object
    link_latency_s: float
    link_bw: float
    vocab: int
    draft_ranks: int = 1
    sd_collocated: bool = True
    host: object = None   # Hardware with argmax_s / sample_s / candidates_s per logits row
    # SSD's draft builds its cache while the target verifies. Where characterize timed this very
    # pair side by side (a separate draft rank), those costs; else (None) the ones timed alone.
    target_beside: object = None
    draft_beside: object = None
    # Collocated SD alternates the two models on one rank, each pass after the other's. Where
    # characterize timed SD's round (measured.TakingTurns), those costs; else the ones alone.
    target_turns: object = None
    draft_turns: object = None
    # Where characterize timed SSD's round (measured.ssd_round_factors): (verify_extra_s,
    # build_factor, fallback_extra_s), applied to the costs alone by overlapped() and
    # fallback_step(), in place of target_beside / draft_beside.
    ssd_round: object = None

    def side_by_side(self):
        """(target, draft) costs to give overlapped(): of SSD's overlapped verification and
        cache build as timed side by side, or alone where SSD's round was timed."""
        if self.ssd_round is not None:
            return self.target, self.draft
        return (self.target_beside or self.target, self.draft_beside or self.draft)

    def overlapped(self, verify_s, build_s):
        """(verify, build) of one SSD round from side_by_side()'s costs: where characterize
        timed SSD's round, the verification plus its extra seconds for the share of it the
        build overlaps, and the build by its factor; else as given."""
        if self.ssd_round is None:
            return verify_s, build_s
        extra, factor, _ = self.ssd_round
        build = build_s * factor
        return verify_s + extra * min(build / verify_s, 1.0), build

    def fallback_step(self, s):
        """One just-in-time draft step over s sequences after a miss (the draft alone, or as
        SSD's round timed it)."""
        return self.draft(s, s) + (0.0 if self.ssd_round is None else self.ssd_round[2])

    def taking_turns(self):
        """(target, draft) costs of collocated SD's verification and draft steps."""
        return (self.target_turns or self.target, self.draft_turns or self.draft)

    def pick(self, temperature):
        """Host time to turn one logits row into a token (or probabilities): argmax when
        greedy, softmax + draw when sampling."""
        if self.host is None:
            return 0.0
        return self.host.sample_s if temperature > 0 else self.host.argmax_s

    def candidates(self):
        """SSD's draft: the top-64 candidate list of every drafted and branch token."""
        return 0.0 if self.host is None else self.host.candidates_s

    def messages(self, b, K, temperature):
        """Two messages a round: the outcome out (k, bonus per sequence), the speculation back
        (K tokens, plus K x vocab fp32 probabilities per sequence when sampling)."""
        out = 46 + 8 * b
        back = 46 + 4 * b * K + (4 * b * K * self.vocab if temperature > 0 else 0)
        return 2 * self.link_latency_s + (out + back) / self.link_bw


@dataclass
class Prediction:
    mode: str
    tok_s: float
    K: int = 0
    fanout_total: int = 0         # B = sum F_k per sequence of the cache (/rounds/budget)
    shape: list = field(default_factory=list)
    fallback: str = "-"
    p_hit: float = math.nan
    t_p: float = math.nan
    t_b: float = math.nan
    window_fanout_limit: int = 0  # the largest B one verification hides (window_fanout_limit)
    b_star: float = math.nan
    round_s: float = math.nan


def round_latency(p, t_p, t_b, b):
    """Corollary 16's denominator (metrics.corollary16_latency), with one correction where
    T_p > 1: this implementation's draft finishes the cache before it answers a miss
    (ssd/budget.cpp), so a miss costs max(1, T_p) + T_b rather than 1 + T_b. Identical to
    Corollary 16 for T_p <= 1."""
    any_miss = 1.0 - min(max(p, 0.0), 1.0) ** b
    return M.corollary16_latency(p, t_p, t_b, b) + any_miss * max(t_p - 1.0, 0.0)


def predict_ar(lay, b, temperature=0.0):
    t = lay.target(b, b) + b * lay.pick(temperature)
    return Prediction("ar", b / t, round_s=t)


def verify_time(lay, b, K, temperature, target=None):
    """The target's forward over b(K+1) rows (`target`'s cost, else lay.target) and the
    verification rule's work on each row."""
    target = lay.target if target is None else target
    return target(b * (K + 1), b) + b * (K + 1) * lay.pick(temperature)


def predict_sd(lay, b, K, alpha, temperature=0.0, synthetic=False):
    """Collocated SD draws K draft steps then verifies, each model's pass after the other's
    (lay.taking_turns); a separate draft adds two messages, and each model keeps its rank.
    synthetic: a run whose outcomes are drawn (--outcomes synthetic:) also lists each drafted
    token's top 64 candidates, from which the draft names the bonus (after a full accept from
    the list s_K came from: no extra step, ssd/drafter.cpp Drafter::commit)."""
    ar = predict_ar(lay, b, temperature).round_s
    target, draft_step = lay.taking_turns() if lay.sd_collocated else (lay.target, lay.draft)
    verify = verify_time(lay, b, K, temperature, target)
    draft = K * (draft_step(b, b) + b * lay.pick(temperature))
    if synthetic:
        draft += K * b * lay.candidates()
    if not lay.sd_collocated:
        draft += lay.messages(b, K, temperature)
    speedup = M.sd_speedup(tokens_per_round(alpha, K), draft / verify, verify=verify / ar)
    return Prediction("sd", b * speedup / ar, K=K, round_s=verify + draft)


def window_fanout_limit(lay, b, K, verify_s=None, cap=4096):
    """The verification window's limit (ssd/fanout.h window_fanout_limit): the largest total
    fan-out per sequence whose cache build (glue + K branch steps on each draft rank's
    ceil(b/D) sequences) fits within 90% of the verification, the 'hidden' fan-out. A limit on
    B, not a cache's own B (Prediction.fanout_total) nor the --budget setting (predict_ssd's
    budget=, None = auto)."""
    s = math.ceil(b / lay.draft_ranks)
    target, draft = lay.side_by_side()
    verify0 = target(b * (K + 1), b) if verify_s is None else verify_s
    glue = draft(s * (K + 1), s) + s * (K + 1) * lay.candidates()

    def fits(B):
        verify, build = lay.overlapped(verify0, glue + K * branch_step(lay, s, B, 0.0, draft))
        return build <= WINDOW_SLACK * verify
    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= cap and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, cap + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def glue_step(lay, s, K, backup_share, e_miss_backup, draft):
    """The cache build's glue step (ssd/saguaro_cache.cpp glue) over s sequences, each row with
    its candidate list. After a hit (take_branch) or the primary's just-in-time drafting the
    draft holds K - 1 of the speculation's K tokens: one row per sequence. After a backup's
    speculation it holds none: the accepted ones, the bonus and the K new tokens, K + E_miss
    rows. characterize times the second (its "glue", K + 1 rows); taken for every round, it
    put the pair's build at b = 8 and 16 at 1.29x and 1.15x the verification where the runs
    built in about one (389 ms beside 385; 656-775 beside 766, medians), a prediction 15%
    slow."""
    rows = s * (1.0 + backup_share * (K + e_miss_backup - 1.0))
    return draft(rows, s) + rows * lay.candidates()


def branch_step(lay, s, B, temperature, draft=None):
    """One of the cache build's K steps: the draft (`draft`, else lay.draft) over s*B branch
    rows, and each row's candidate list and token."""
    draft = lay.draft if draft is None else draft
    return draft(s * B, s) + s * B * (lay.candidates() + lay.pick(temperature))


def predict_ssd(lay, b, K, alpha, r, fallback="auto", budget=None, shape=None,
                temperature=0.0, alpha_b=0.0, r_b=None, backup_shape=None, max_budget=128,
                built=None, realised=(None, None), r_all=None):
    """SSD at lookahead K. `shape` fixes the cache; else `budget` fixes a geometric one; else
    the budget (0..max_budget) and fallback that maximise Corollary 16's rate are chosen, as
    --budget auto / --fallback auto would. fallback: primary, backup or auto (the better).
    `built` (with `shape`): branches per sequence the cache build really drafts, when fewer
    than the shape's (Definition 10: with Saguaro's C < 1 the draft's own s_{k+1} among the
    down-weighted top F_k needs no branch). `realised` (with `shape`): the hit rates after a
    primary's and a backup's speculation that a measured run drew, in place of the law's.
    r_all: the exponent after all K accepted (Theorem 18), r's when None (Theorem 12)."""
    s = math.ceil(b / lay.draft_ranks)
    # The build overlaps the verification (side by side); a miss's just-in-time drafting
    # does not (the target waits): the draft's steps alone, or as SSD's round timed them.
    draft_beside = lay.side_by_side()[1]
    verify0 = verify_time(lay, b, K, temperature, lay.side_by_side()[0])
    comm = lay.messages(b, K, temperature)
    e_hit = tokens_per_round(alpha, K)
    e_miss_backup = tokens_per_round(alpha_b, K)
    r_b = math.log2(1.0 / max(1.0 - alpha, 1e-9)) if r_b is None else r_b
    # K just-in-time steps, each row's candidate list and token beside
    jit = K * (lay.fallback_step(s) + s * (lay.candidates() + lay.pick(temperature)))
    t_backup = 0.0
    if shape is not None:
        p_law = hit_rate(shape, alpha, r, r_all)
        candidates = [(sum(shape), list(shape), p_law if realised[0] is None else realised[0])]
    else:
        curve = geometric_shapes(K, budget if budget is not None else max_budget, alpha, r,
                                 r_all)
        candidates = ([(budget, *curve[budget])] if budget is not None
                      else [(B, sh, p) for B, (sh, p) in enumerate(curve)])
    best = None
    for B, sh, p_p in candidates:
        rows = B if built is None else built
        branches = K * branch_step(lay, s, rows, temperature, draft_beside) if rows > 0 else 0.0

        def round_costs(backup_share):
            """(verify, T_p) of a round whose sequences drew the backup's speculation in the
            last round at backup_share."""
            verify, build = lay.overlapped(
                verify0, glue_step(lay, s, K, backup_share, e_miss_backup, draft_beside)
                + branches)
            return verify, build / verify
        opts = []
        if fallback in ("auto", "primary"):
            verify, t_p = round_costs(0.0)
            t_jit = jit / verify
            opts.append(("primary", p_p, e_hit, t_jit, round_latency(p_p, t_p, t_jit, b), verify,
                         t_p))
        if fallback in ("auto", "backup"):
            bsh = backup_shape if backup_shape is not None else sh
            p_b = hit_rate(bsh, alpha_b, r_b) if len(bsh) == K + 1 else 0.0
            if shape is not None and realised[1] is not None:
                p_b = realised[1]
            p = M.eq1_p_hit(p_p, p_b)
            verify, t_p = round_costs(1.0 - p)
            lat = round_latency(p, t_p, t_backup, b)
            opts.append(("backup", p, M.expected_tokens(p, e_hit, e_miss_backup), t_backup, lat,
                         verify, t_p))
        for name, p, tokens, t_b, lat, verify, t_p in opts:
            round_s = verify * lat + comm
            rate = b * tokens / round_s
            if best is None or rate > best.tok_s * (1 + 1e-9):
                best = Prediction("ssd", rate, K=K, fanout_total=B, shape=sh, fallback=name,
                                  p_hit=p, t_p=t_p, t_b=t_b, round_s=round_s)
                best_t_jit = jit / verify
    best.window_fanout_limit = window_fanout_limit(lay, b, K, verify0)
    best.b_star = M.b_star(hit_rate(best.shape, alpha, r, r_all), e_hit, e_miss_backup,
                           best_t_jit)
    return best


def accepted_draws(rng, alpha, K, size):
    """Accepted drafted tokens of `size` verifications: iid acceptance alpha (one for all, or
    one per verification) until the first rejection, at most K (the law of tokens_per_round)."""
    a = np.clip(np.broadcast_to(np.asarray(alpha, float), (size,)), 0.0, 1.0)
    # alpha = 1: a first rejection after ~1e12 draws, i.e. never within K
    return np.minimum(rng.geometric(np.maximum(1.0 - a, 1e-12)) - 1, K)


def finite_run_rate(round_at, b, n, tokens_at, trials=200, seed=1):
    """tok/s of b sequences that each stop at n new tokens, where tok/s of an endless batch
    (b x tokens per round / round) overstates a measured run twice: a sequence's last round
    commits only what it still needs, and the batch's rounds run on with fewer rows until the
    last of its b sequences is done. round_at(rows): one round's seconds with `rows` live rows;
    tokens_at(rng, live, trial): the tokens each live row (indices `live` of the batch's b)
    commits in a round of batch `trial`, so that rows may differ (a run's sequences draw
    their acceptance from different texts). Seeded: the same input gives the same rate."""
    rng = np.random.default_rng(seed)
    seconds = {}
    total = 0.0
    for trial in range(trials):
        left = np.full(b, n)
        while np.any(left > 0):
            live = np.flatnonzero(left > 0)
            if live.size not in seconds:
                seconds[live.size] = round_at(live.size)
            total += seconds[live.size]
            left[live] -= tokens_at(rng, live, trial)
    return b * n * trials / total


def best_over_k(fn, ks):
    """The prediction of highest tok/s over lookaheads `ks` (fn(K) -> Prediction)."""
    return max((fn(k) for k in ks), key=lambda p: p.tok_s)
