// SaguaroDrafter: building the speculation cache in the verification window (paper §4.1).
#include <algorithm>
#include <cmath>

#include "comm/clock.h"
#include "ssd/budget.h"
#include "ssd/fanout.h"
#include "ssd/saguaro_drafter.h"
#include "ssd/saguaro_sampling.h"

namespace ssd {

int SaguaroDrafter::current_fanout_total() const {
  return s_.budget_setting > 0 ? s_.budget_setting : auto_fanout_total_;
}

void SaguaroDrafter::choose_auto_budget(int rows, int batch) {
  if (s_.budget_setting > 0) return;
  const int K = primary_.lookahead();
  // Until a verification and two branch steps have been timed there is nothing to predict
  // from: one guess per position, cheap, and a first point for the step-cost fit.
  if (step_cost_.samples() < 2 || meter_.verify_s() <= 0) {
    auto_fanout_total_ = K + 1;
    return;
  }
  BudgetInputs in;
  in.lookahead = K;
  in.rows = std::max(rows, 1);
  in.batch = std::max(batch, in.rows);
  in.max_fanout_total = (capacity_ - scratch_begin_) / K;
  in.verify_s = meter_.verify_s();
  in.glue_s = glue_s_;
  in.step_s = [this](double rows) { return step_cost_.seconds(rows); };
  in.law = primary_stats_.law(s_.alpha, s_.r);
  // Just in time, the primary drafts K steps for the batch; before it ever did, that is K
  // branch-sized steps over one row per sequence.
  in.primary_fallback_s = meter_.primary_fallbacks() ? meter_.mean_primary_fallback_s()
                                                     : K * step_cost_.seconds(in.rows);
  in.backup_fallback_s = meter_.mean_backup_fallback_s();
  in.e_miss_backup = meter_.e_miss_backup();
  in.primary_fallback_allowed = s_.fallback != FallbackMode::Backup;
  in.backup_fallback_allowed = s_.fallback != FallbackMode::Primary;
  const BudgetPrediction best = best_budget(in);
  const int chosen = next_auto_budget(best.fanout_total, step_cost_.largest_rows() / in.rows, K);
  zero_budget_rounds_ = chosen > 0 ? 0 : zero_budget_rounds_ + 1;
  auto_fanout_total_ = probe_zero_budget(chosen, zero_budget_rounds_, K);
}

void SaguaroDrafter::glue(const std::vector<int>& rows) {
  // Puts every token not yet in the cache (the bonus after a backup round, and the tail of the
  // speculation) into the committed and speculation slots, and computes the candidate lists
  // still missing: the "extend" step of Appendix B.1.
  const int K = primary_.lookahead();
  ForwardBatch batch;
  std::vector<std::pair<int, int>> wanted;  // (row, list index) per logit row
  for (int r : rows) {
    const Sequence& seq = primary_.sequence(r);
    const int len = int(seq.tokens.size());
    for (int p = seq.cached; p < len + K; ++p) {
      const int32_t token = p < len ? seq.tokens[p] : seq.draft[p - len];
      if (p >= len && p - len < seq.draft_cached) continue;  // already cached
      const int list = p - len + 1;  // the token at position p + 1 is spec list `list`
      const bool want = list >= 0 && list <= K && seq.lists[list].empty();
      batch.add_token(r, token, p, p, p + 1, {}, want);
      if (want) wanted.push_back({r, list});
    }
  }
  if (batch.rows() == 0) return;
  draft_.forward(batch, logits_);
  for (size_t i = 0; i < wanted.size(); ++i)
    primary_.sequence(wanted[i].first).lists[wanted[i].second] =
        top_tokens(logits_.data() + i * vocab_, vocab_, list_limit_, -1);
  for (int r : rows) {
    Sequence& seq = primary_.sequence(r);
    seq.cached = int(seq.tokens.size());
    seq.draft_cached = K;
  }
}

std::vector<SaguaroDrafter::BranchRef> SaguaroDrafter::prepare_branches(
    const std::vector<int>& rows) {
  const int K = primary_.lookahead();
  std::vector<BranchRef> refs;
  for (int r : rows) {
    const Sequence& seq = primary_.sequence(r);
    Row& row = rows_[r];
    // A hit turns a branch into a primary-drafted speculation; its shape is fixed now, before
    // its tokens are sampled, and its own cache will be built with it.
    row.branch_fanout = shape_for(SpeculationSource::CacheHit);
    // The F_k best tokens other than s_{k+1} (which cannot be the bonus after its own
    // rejection), whatever C is. Definition 14 down-weighted the top F_k when s_{k+1} was
    // sampled; when s_{k+1} is one of them, the F_k+1-th token takes its place, so that every C
    // builds a cache of the same size and Figure 5 compares C at equal cost (caching only the
    // down-weighted set left F_k - 1 there: 5.3-5.7 outcomes per sequence against 8 at C = 0
    // and 1 on the Qwen pair).
    row.prepared.assign(K + 1, 0);
    for (int k = 0; k <= K; ++k) {
      const int32_t excluded = k < K ? seq.draft[k] : -1;
      const int limit = row.fanout[k];
      std::vector<int32_t> roots;
      for (size_t i = 0; i < seq.lists[k].size() && int(roots.size()) < limit; ++i) {
        const int32_t t = seq.lists[k][i];
        if (t == excluded) continue;
        Branch b;
        b.k = k;
        b.root = t;
        b.id = next_spec_id_++;
        b.base_slot = scratch_begin_ + int(row.branches.size()) * K;
        if (b.base_slot + K > capacity_) break;
        row.cache[{k, t}] = int(row.branches.size());
        row.branches.push_back(std::move(b));
        refs.push_back({r, int(row.branches.size()) - 1});
        roots.push_back(t);
      }
      row.prepared[k] = int32_t(roots.size());
      if (s_.trace) s_.trace->cached.push_back({row.spec_id, k, std::move(roots)});
    }
  }
  return refs;
}

void SaguaroDrafter::draft_branches(const std::vector<BranchRef>& refs,
                                    const std::function<void()>& poll) {
  const int K = primary_.lookahead();
  // K batched steps over every branch: step j feeds the branch's j-th token (t, then b_1..)
  // and samples the next, each branch seeing the prefix, s_1..s_k and its own path.
  for (int step = 0; step < K && !refs.empty(); ++step) {
    const double step_start = global_now();
    ForwardBatch batch;
    for (const BranchRef& ref : refs) {
      Branch& b = rows_[ref.row].branches[ref.branch];
      const int len = int(primary_.sequence(ref.row).tokens.size());
      std::vector<int32_t> visible;
      for (int i = 0; i < b.k; ++i) visible.push_back(len + i);
      for (int i = 0; i <= step; ++i) visible.push_back(b.base_slot + i);
      const int32_t token = step == 0 ? b.root : b.tokens.back();
      batch.add_token(ref.row, token, len + b.k + step, b.base_slot + step, len, visible, true);
    }
    draft_.forward(batch, logits_);
    for (size_t i = 0; i < refs.size(); ++i) {
      Row& row = rows_[refs[i].row];
      Branch& b = row.branches[refs[i].branch];
      const float* l = logits_.data() + i * vocab_;
      b.lists.push_back(top_tokens(l, vocab_, list_limit_, -1));
      // A hit makes this branch a primary-drafted speculation: sample as the primary would.
      b.tokens.push_back(
          sample(primary_.sequence(refs[i].row), l, row.branch_fanout[step], &b.probs, b.id, step));
    }
    step_cost_.observe(int(refs.size()), global_now() - step_start);
    poll();
  }
}

void SaguaroDrafter::build_cache(PeerLink& link, double sent_at) {
  window_started_at_ = sent_at;
  arrival_seen_at_ = -1.0;
  const auto poll = [&] {
    if (arrival_seen_at_ < 0 && link.poll(MessageTag::Outcome)) arrival_seen_at_ = global_now();
  };
  const double start = global_now();
  std::vector<int> rows;
  for (size_t r = 0; r < rows_.size(); ++r)
    if (rows_[r].active) rows.push_back(int(r));
  choose_auto_budget(int(rows.size()), batch_live_);
  glue(rows);
  glue_s_ = global_now() - start;
  poll();
  // Which outcomes to prepare for: the F_k likeliest bonus tokens at each position k.
  const std::vector<BranchRef> refs = prepare_branches(rows);
  last_branches_ = int(refs.size());
  last_fanout_total_ = rows.empty() ? 0 : int(refs.size() / rows.size());
  draft_branches(refs, poll);
  last_build_s_ = global_now() - start;
}

}  // namespace ssd
