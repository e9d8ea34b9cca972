// SaguaroDrafter: answering outcomes (cache lookup, fallback) and drafting just in time.
#include "ssd/saguaro_drafter.h"

#include <algorithm>

#include "comm/clock.h"
#include "ssd/backup_speculator.h"
#include "ssd/decode.h"
#include "ssd/draft_endpoint.h"
#include "ssd/saguaro_sampling.h"
#include "ssd/sampling.h"

namespace ssd {

namespace {

// Candidates examined per position (ranks beyond count as 0): the 64 that synthetic ranks are
// named from, or one past the widest fan-out the settings ask for.
int list_limit(const SaguaroSettings& s) {
  int widest = 1;
  for (const FanoutSpec* f : {&s.fanout, &s.backup_fanout}) {
    widest = std::max(widest, f->uniform);
    for (int v : f->list) widest = std::max(widest, v);
    widest = std::max(widest, f->fanout_total);
  }
  widest = std::max(widest, s.budget_setting);
  return std::max(64, widest + 1);
}

}  // namespace

SaguaroDrafter::SaguaroDrafter(ModelGroup& draft, const SaguaroSettings& settings)
    : draft_(draft),
      s_(settings),
      vocab_(draft.config().vocab_size),
      list_limit_(list_limit(settings)),
      primary_(draft, settings.draft_temperature, settings.seed, list_limit_),
      policy_(settings.fallback) {}

void SaguaroDrafter::start(const StartMessage& m) {
  const int K = m.lookahead;
  // Later repetitions keep what the earlier ones learned, at the same K. A new K (-k auto's
  // choice after the warm-up) starts afresh, as a run given that K does: the verification and
  // fallback times, the budget, the acceptance and the branch steps' cost fit were all
  // measured on rounds of the old K. Kept from a warm-up at K = 1 or 2, they had the Qwen
  // pair's K = 3 rounds spend 3.2-4.9 outcomes per sequence at T_p 1.1-1.3, where runs given
  // -k 3 settled at ~2 and T_p 0.96 (and the step-cost fit alone, kept, still gave 4.9).
  if (K != learned_lookahead_) {
    learned_lookahead_ = K;
    auto_fanout_total_ = K + 1;  // one guess per position until there is a prediction
    zero_budget_rounds_ = 0;
    meter_ = SpeculationMeter{};
    primary_stats_ = FanoutEstimator{};
    backup_stats_ = FanoutEstimator{};
    step_cost_ = StepCostCurve{};
    glue_s_ = 0.0;
  }
  // Committed tokens and the speculation live below scratch_begin_, branches above it. The
  // next speculation is drafted on top of the one being verified: K more committed slots.
  scratch_begin_ = int(sequence_kv_capacity(longest_sequence(m) + K, K));
  const int max_fanout_total =
      s_.budget_setting > 0 ? std::max(s_.budget_setting, list_limit_) : kMaxAutoBudget;
  capacity_ = scratch_begin_ + max_fanout_total * K;
  primary_.start(m, capacity_);
  rows_.assign(m.prompts.size(), Row{});
}

std::vector<int32_t> SaguaroDrafter::shape_for(SpeculationSource source) const {
  const bool backup = source == SpeculationSource::Backup;
  const FanoutSpec& spec = backup ? s_.backup_fanout : s_.fanout;
  const FanoutLaw law = (backup ? backup_stats_ : primary_stats_).law(s_.alpha, s_.r);
  const int fanout_total = spec.fanout_total > 0 ? spec.fanout_total : current_fanout_total();
  std::vector<int> shape = resolve_fanout(spec, primary_.lookahead(), fanout_total, law);
  return std::vector<int32_t>(shape.begin(), shape.end());
}

int32_t SaguaroDrafter::sample(Sequence& seq, const float* logits, int fanout_here,
                               std::vector<float>* probs_out, int64_t spec, int k) {
  const double temperature = primary_.temperature();
  if (temperature == 0.0) return primary_.greedy(logits, probs_out);
  // Definition 14: the draft samples from sigma_{F,C}, and that exact distribution is what the
  // target verifies against, so the output stays lossless.
  saguaro_distribution(logits, vocab_, temperature, fanout_here, s_.saguaro_c, probs_);
  const int32_t token = primary_.draw(seq, probs_);
  if (s_.trace)
    s_.trace->sampled.push_back({spec, k,
                                 saguaro_downweights() ? top_tokens(logits, vocab_, fanout_here, -1)
                                                       : std::vector<int32_t>{},
                                 token});
  if (probs_out && primary_.target_samples())
    probs_out->insert(probs_out->end(), probs_.begin(), probs_.end());
  return token;
}

void SaguaroDrafter::draft_primary(const std::vector<int>& rows, SpeculationMessage& spec,
                                   const std::vector<int>& slots) {
  std::vector<std::vector<int32_t>> shapes;
  for (int r : rows) {
    rows_[r].source = SpeculationSource::Primary;
    rows_[r].spec_id = next_spec_id_++;
    shapes.push_back(shape_for(SpeculationSource::Primary));
  }
  const auto drafted = primary_.draft(rows, [&](size_t i, int step, const float* l) {
    return sample(primary_.sequence(rows[i]), l, shapes[i][step], &spec.sequences[slots[i]].probs,
                  rows_[rows[i]].spec_id, step);
  });
  for (size_t i = 0; i < rows.size(); ++i) {
    spec.sequences[slots[i]].tokens = drafted[i];
    // Its cache is built with the shape it was sampled with.
    rows_[rows[i]].fanout = std::move(shapes[i]);
  }
}

void SaguaroDrafter::draft_backup(const std::vector<int>& rows, SpeculationMessage& spec,
                                  const std::vector<int>& slots) {
  const int K = primary_.lookahead();
  const bool want_probs = primary_.target_samples();
  for (size_t i = 0; i < rows.size(); ++i) {
    Sequence& seq = primary_.sequence(rows[i]);
    Row& row = rows_[rows[i]];
    SequenceSpeculation& out = spec.sequences[slots[i]];
    // The random backup counts its draws on the draft sampling counter (its stream is its own).
    BackupProposal p = s_.backup == BackupKind::Ngram
                           ? ngram_backup(seq.tokens, K, vocab_, 3, want_probs)
                           : random_backup(K, vocab_, primary_.seed(), backup_stream(seq.id),
                                           seq.draws, want_probs);
    seq.draft = p.tokens;
    seq.draft_cached = 0;
    seq.lists.assign(K + 1, {});
    row.source = SpeculationSource::Backup;
    row.spec_id = next_spec_id_++;
    row.fanout = shape_for(SpeculationSource::Backup);
    out.source = SpeculationSource::Backup;
    out.tokens = std::move(p.tokens);
    out.probs = std::move(p.probs);
  }
}

int32_t SaguaroDrafter::commit_outcome(Row& row, const SequenceOutcome& o,
                                       SequenceSpeculation& out) {
  const int K = primary_.lookahead();
  Sequence& seq = primary_.sequence(o.row);
  // s_{k+1} is never the bonus after its own rejection: the ranks skip it.
  const int32_t excluded =
      o.accepted >= 0 && o.accepted < int(seq.draft.size()) ? seq.draft[o.accepted] : -1;
  const int32_t bonus = primary_.commit(o);
  if (o.bonus < 0) out.resolved_bonus = bonus;
  const std::vector<int32_t>& list = seq.lists[o.accepted];
  int rank = 0, seen = 0;
  for (int32_t t : list) {
    if (t == excluded) continue;
    ++seen;
    if (t == bonus) {
      rank = seen;
      break;
    }
  }
  out.bonus_rank = rank;
  const bool was_backup = row.source == SpeculationSource::Backup;
  (was_backup ? backup_stats_ : primary_stats_)
      .observe(o.accepted, K, rank, int(list.size()) - (excluded >= 0 ? 1 : 0));
  meter_.verified(row.source, o.accepted);
  return bonus;
}

void SaguaroDrafter::take_branch(Row& row, int r, int committed_before, Branch& branch,
                                 SequenceSpeculation& out) {
  const int K = primary_.lookahead();
  const int accepted = branch.k;
  Sequence& seq = primary_.sequence(r);
  // Move t, b_1 .. b_{K-1} from their scratch slots behind the accepted prefix.
  draft_.kv_move(r, branch.base_slot, r, committed_before + accepted, K);
  seq.cached = committed_before + accepted + 1;
  seq.draft = branch.tokens;
  seq.draft_cached = K - 1;
  seq.lists = std::move(branch.lists);
  seq.lists.resize(K + 1);
  row.spec_id = branch.id;
  row.fanout = row.branch_fanout;  // the shape its tokens were sampled with
  row.source = SpeculationSource::CacheHit;
  out.cache_hit = true;
  out.source = SpeculationSource::CacheHit;
  out.tokens = seq.draft;
  out.probs = std::move(branch.probs);
}

SpeculationMessage SaguaroDrafter::respond(const OutcomeMessage& outcome,
                                           DraftTelemetry& telemetry) {
  SpeculationMessage spec;
  spec.round = outcome.round;
  spec.vocab = vocab_;
  telemetry.cache_build_s = last_build_s_;
  telemetry.branches = last_branches_;
  telemetry.fanout_total = last_fanout_total_;
  spec.sequences.resize(outcome.sequences.size());
  meter_.target_busy(outcome.target_busy_s);
  int local_live = 0;
  for (const SequenceOutcome& o : outcome.sequences) local_live += o.finishing ? 0 : 1;
  batch_live_ = outcome.batch_live > 0 ? outcome.batch_live : local_live;
  if (window_started_at_ > 0) {
    const double arrival = arrival_seen_at_ >= 0 ? arrival_seen_at_ : global_now();
    meter_.window(arrival - window_started_at_);
    window_started_at_ = -1.0;
  }
  for (Row& row : rows_) row.active = false;
  std::vector<int> misses, miss_slots;
  for (size_t i = 0; i < outcome.sequences.size(); ++i) {
    const SequenceOutcome& o = outcome.sequences[i];
    Row& row = rows_.at(o.row);
    SequenceSpeculation& out = spec.sequences[i];
    out.row = o.row;
    out.fanout = row.prepared;
    row.active = !o.finishing;
    const int committed_before = int(primary_.sequence(o.row).tokens.size());
    if (row.source == SpeculationSource::Initial) {
      primary_.commit(o);  // the target's first token, after the prefill
    } else {
      const int32_t bonus = commit_outcome(row, o, out);
      const auto hit = row.cache.find({o.accepted, bonus});
      meter_.lookup(hit != row.cache.end());
      if (o.finishing) {  // the sequence ended: record how its last outcome fared, no more
        out.cache_hit = hit != row.cache.end();
        continue;
      }
      if (hit != row.cache.end()) {
        take_branch(row, o.row, committed_before, row.branches[hit->second], out);
        continue;
      }
    }
    misses.push_back(o.row);
    miss_slots.push_back(int(i));
  }
  for (Row& row : rows_) {
    row.cache.clear();
    row.branches.clear();
  }
  telemetry.fallback_s = misses.empty() ? 0.0 : fall_back(misses, miss_slots, spec);
  return spec;
}

double SaguaroDrafter::fall_back(const std::vector<int>& misses, const std::vector<int>& slots,
                                 SpeculationMessage& spec) {
  const double start = global_now();
  bool initial = false;
  for (int r : misses) initial |= rows_[r].source == SpeculationSource::Initial;
  // Corollary 16's b is the rows that wait on one another this round: the whole batch's still
  // decoding, over every draft rank (a miss on another rank stalls this one's rows too), fewer
  // than the configured batch once sequences finish (or in a last, partial group).
  const FallbackKind kind =
      initial ? FallbackKind::Primary
              : policy_.choose(batch_live_, meter_.speedup_inputs(), int(meter_.verified_rounds()));
  if (kind == FallbackKind::Primary) {
    draft_primary(misses, spec, slots);
    for (int slot : slots)
      spec.sequences[slot].source =
          initial ? SpeculationSource::Initial : SpeculationSource::Primary;
  } else {
    draft_backup(misses, spec, slots);
  }
  // The group's first speculation has no cache to miss: not a fallback, nor timed as one (when
  // it still held the draft's prefill of the prompts, counting it made the just-in-time draft
  // look ~3x slower than it is, 460 ms against ~150 on the Qwen pair, and Theorem 17's choice
  // then sent every miss to the backup).
  const double seconds = global_now() - start;
  if (!initial) meter_.fallback(kind, seconds);
  return seconds;
}

void serve_saguaro(PeerLink& link, SaguaroDrafter& drafter) {
  // The verification window: build the next round's cache while the target verifies.
  serve_draft_rank(
      link, [&](const StartMessage& m) { drafter.start(m); },
      [&](const OutcomeMessage& o, DraftTelemetry& t) { return drafter.respond(o, t); },
      [&](double sent_at) { drafter.build_cache(link, sent_at); },
      [&] { return drafter.forward_passes(); });
}

}  // namespace ssd
