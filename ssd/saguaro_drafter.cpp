// SaguaroDrafter: answering outcomes (cache lookup, fallback) and drafting just in time.
#include "ssd/saguaro_drafter.h"

#include <algorithm>
#include <stdexcept>

#include "comm/clock.h"
#include "ssd/backup_speculator.h"
#include "ssd/draft_endpoint.h"
#include "ssd/draft_steps.h"
#include "ssd/saguaro_sampling.h"
#include "ssd/sampling.h"

namespace ssd {

SaguaroDrafter::SaguaroDrafter(ModelGroup& draft, const SaguaroSettings& settings)
    : draft_(draft), s_(settings), vocab_(draft.config().vocab_size), policy_(settings.fallback) {
  int widest = 1;
  for (const FanoutSpec* f : {&s_.fanout, &s_.backup_fanout}) {
    widest = std::max(widest, f->uniform);
    for (int v : f->list) widest = std::max(widest, v);
    widest = std::max(widest, f->budget);
  }
  widest = std::max(widest, s_.budget);
  list_limit_ = std::max(64, widest + 1);
  auto_budget_ = s_.lookahead + 1;  // one guess per position until there is a prediction
}

void SaguaroDrafter::start(const StartMessage& m) {
  target_temperature_ = m.temperature;
  rows_.assign(m.prompts.size(), Row{});
  size_t longest = 0;
  for (size_t r = 0; r < m.prompts.size(); ++r) {
    rows_[r].tokens = m.prompts[r];
    rows_[r].sequence = m.sequence_ids.at(r);
    longest = std::max(longest, m.prompts[r].size());
  }
  const int K = s_.lookahead;
  // Committed tokens and the speculation live below scratch_begin_; branches above it.
  scratch_begin_ = int(longest) + m.max_new_tokens + 2 * K + 2;
  const int max_budget = s_.budget > 0 ? std::max(s_.budget, list_limit_) : kMaxAutoBudget;
  capacity_ = scratch_begin_ + max_budget * K;
  draft_.reset_cache(int(rows_.size()), capacity_);
}

std::vector<int32_t> SaguaroDrafter::shape_for(SpeculationSource source) const {
  const bool backup = source == SpeculationSource::Backup;
  const FanoutSpec& spec = backup ? s_.backup_fanout : s_.fanout;
  const FanoutLaw law = (backup ? backup_stats_ : primary_stats_).law(s_.alpha, s_.r);
  const int budget = spec.budget > 0 ? spec.budget : current_budget();
  std::vector<int> shape = resolve_fanout(spec, s_.lookahead, budget, law.acceptance, law.r);
  return std::vector<int32_t>(shape.begin(), shape.end());
}

int32_t SaguaroDrafter::sample(Row& row, const float* logits, int fanout_here,
                               std::vector<float>* probs_out, int64_t spec, int k) {
  if (s_.draft_temperature == 0.0) {
    const int32_t token = argmax(logits, vocab_);
    if (probs_out && target_temperature_ > 0.0) append_one_hot(*probs_out, vocab_, token);
    return token;
  }
  // Definition 14: the draft samples from sigma_{F,C}, and that exact distribution is what the
  // target verifies against, so the output stays lossless.
  saguaro_distribution(logits, vocab_, s_.draft_temperature, fanout_here, s_.saguaro_c, probs_);
  const int32_t token =
      sample_from(probs_, uniform01(s_.seed, draft_sampling_stream(row.sequence), row.draws++));
  if (s_.trace)
    s_.trace->sampled.push_back({spec, k,
                                 saguaro_downweights() ? top_tokens(logits, vocab_, fanout_here, -1)
                                                       : std::vector<int32_t>{},
                                 token});
  if (probs_out && target_temperature_ > 0.0)
    probs_out->insert(probs_out->end(), probs_.begin(), probs_.end());
  return token;
}

void SaguaroDrafter::draft_primary(const std::vector<int>& rows, SpeculationMessage& spec,
                                   const std::vector<int>& slots) {
  const int K = s_.lookahead;
  std::vector<std::vector<int32_t>> shapes;
  std::vector<DraftInput> inputs;
  for (int r : rows) {
    Row& row = rows_[r];
    row.source = SpeculationSource::Primary;
    row.spec_id = next_spec_id_++;
    row.lists.assign(K + 1, {});
    shapes.push_back(shape_for(SpeculationSource::Primary));
    inputs.push_back({r, &row.tokens, row.cached});
  }
  const auto pick = [&](size_t i, int step, const float* l) {
    Row& row = rows_[rows[i]];
    row.lists[step] = top_tokens(l, vocab_, list_limit_, -1);
    return sample(row, l, shapes[i][step], &spec.sequences[slots[i]].probs, row.spec_id, step);
  };
  const auto drafted = draft_k_tokens(draft_, inputs, K, pick, logits_);
  for (size_t i = 0; i < rows.size(); ++i) {
    Row& row = rows_[rows[i]];
    row.spec = drafted[i];
    spec.sequences[slots[i]].tokens = drafted[i];
    row.cached = int(row.tokens.size());
    row.spec_cached = K - 1;
    row.fanout = std::move(shapes[i]);  // its cache is built with the shape it was sampled with
  }
}

void SaguaroDrafter::draft_backup(const std::vector<int>& rows, SpeculationMessage& spec,
                                  const std::vector<int>& slots) {
  const int K = s_.lookahead;
  const bool want_probs = target_temperature_ > 0.0;
  for (size_t i = 0; i < rows.size(); ++i) {
    Row& row = rows_[rows[i]];
    SequenceSpeculation& out = spec.sequences[slots[i]];
    BackupProposal p =
        s_.backup == BackupKind::Ngram
            ? ngram_backup(row.tokens, K, vocab_, 3, want_probs)
            : random_backup(K, vocab_, s_.seed, backup_stream(row.sequence), row.draws, want_probs);
    row.spec = p.tokens;
    row.spec_cached = 0;
    row.lists.assign(K + 1, {});
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
  const int K = s_.lookahead;
  if (o.accepted < 0 || o.accepted > K) throw std::runtime_error("Saguaro: bad outcome");
  const int32_t excluded = o.accepted < K ? row.spec[o.accepted] : -1;
  const std::vector<int32_t>& list = row.lists[o.accepted];
  int32_t bonus = o.bonus;
  if (bonus < 0) {  // synthetic outcome: the bonus is our rank-th candidate at position k
    bonus = resolve_synthetic_bonus(s_.seed, row.sequence, row.resolve_draws, list, excluded,
                                    o.bonus_rank, vocab_);
    out.resolved_bonus = bonus;
  }
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
  const int committed_before = int(row.tokens.size());
  row.tokens.insert(row.tokens.end(), row.spec.begin(), row.spec.begin() + o.accepted);
  row.tokens.push_back(bonus);
  row.cached = committed_before + o.accepted;  // the glue step cached the whole speculation
  if (int(row.tokens.size()) != o.length)
    throw std::runtime_error("Saguaro: sequence length disagrees with the target's");
  return bonus;
}

void SaguaroDrafter::take_branch(Row& row, int r, int committed_before, Branch& branch,
                                 SequenceSpeculation& out) {
  const int K = s_.lookahead;
  const int accepted = branch.k;
  // Move t, b_1 .. b_{K-1} from their scratch slots behind the accepted prefix.
  draft_.kv_move(r, branch.base_slot, r, committed_before + accepted, K);
  row.cached = committed_before + accepted + 1;
  row.spec = branch.tokens;
  row.spec_cached = K - 1;
  row.lists = std::move(branch.lists);
  row.lists.resize(K + 1);
  row.spec_id = branch.id;
  row.fanout = row.branch_fanout;  // the shape its tokens were sampled with
  row.source = SpeculationSource::CacheHit;
  out.cache_hit = true;
  out.source = SpeculationSource::CacheHit;
  out.tokens = row.spec;
  out.probs = std::move(branch.probs);
}

SpeculationMessage SaguaroDrafter::respond(const OutcomeMessage& outcome) {
  SpeculationMessage spec;
  spec.round = outcome.round;
  spec.vocab = vocab_;
  spec.cache_build_s = last_build_s_;
  spec.branches = last_branches_;
  spec.budget = last_budget_;
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
    const int committed_before = int(row.tokens.size());
    if (row.source == SpeculationSource::Initial) {
      row.tokens.push_back(o.bonus);
      if (int(row.tokens.size()) != o.length)
        throw std::runtime_error("Saguaro: sequence length disagrees with the target's");
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
  if (!misses.empty()) fall_back(misses, miss_slots, spec);
  return spec;
}

void SaguaroDrafter::fall_back(const std::vector<int>& misses, const std::vector<int>& slots,
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
  meter_.fallback(kind, global_now() - start);
  spec.fallback_s = global_now() - start;
}

void serve_saguaro(PeerLink& link, SaguaroDrafter& drafter) {
  // The verification window: build the next round's cache while the target verifies.
  serve_draft_rank(
      link, [&](const StartMessage& m) { drafter.start(m); },
      [&](const OutcomeMessage& o) { return drafter.respond(o); },
      [&](double sent_at) { drafter.build_cache(link, sent_at); });
}

}  // namespace ssd
