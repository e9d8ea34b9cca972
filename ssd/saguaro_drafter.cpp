// SaguaroDrafter: answering outcomes (cache lookup, fallback) and drafting just in time.
#include "ssd/saguaro_drafter.h"

#include <algorithm>
#include <stdexcept>

#include "comm/clock.h"
#include "ssd/backup_speculator.h"
#include "ssd/draft_endpoint.h"
#include "ssd/saguaro_sampling.h"
#include "ssd/sampling.h"
#include "ssd/synthetic_outcome.h"

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
  const int max_budget = s_.budget > 0 ? std::max(s_.budget, list_limit_) : 128;
  capacity_ = scratch_begin_ + max_budget * K;
  draft_.reset_cache(int(rows_.size()), capacity_);
}

std::vector<int32_t> SaguaroDrafter::shape_for(SpeculationSource source) const {
  const bool backup = source == SpeculationSource::Backup;
  const FanoutSpec& spec = backup ? s_.backup_fanout : s_.fanout;
  const FanoutEstimator& stats = backup ? backup_stats_ : primary_stats_;
  const double alpha = s_.alpha >= 0 ? s_.alpha : stats.acceptance(0.7);
  const double r = s_.r >= 0 ? s_.r : stats.power_law_r(0.7);
  const int budget = spec.budget > 0 ? spec.budget : current_budget();
  std::vector<int> shape = resolve_fanout(spec, s_.lookahead, budget, alpha, r);
  return std::vector<int32_t>(shape.begin(), shape.end());
}

int32_t SaguaroDrafter::sample(Row& row, const float* logits, int fanout_here,
                               std::vector<float>* probs_out, int64_t spec, int k) {
  if (s_.draft_temperature == 0.0) {
    const int32_t token = argmax(logits, vocab_);
    if (probs_out && target_temperature_ > 0.0) {
      // A greedy draft's distribution is one-hot; a sampling target needs it to verify.
      probs_out->resize(probs_out->size() + vocab_, 0.0f);
      (*probs_out)[probs_out->size() - vocab_ + token] = 1.0f;
    }
    return token;
  }
  // Definition 14: the draft samples from sigma_{F,C}, and that exact distribution is what the
  // target verifies against, so the output stays lossless.
  saguaro_distribution(logits, vocab_, s_.draft_temperature, fanout_here, s_.saguaro_c, probs_);
  const int32_t token =
      sample_from(probs_, uniform01(s_.seed, sampling_stream(row.sequence) + 2, row.draws++));
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
  for (int r : rows) {
    rows_[r].source = SpeculationSource::Primary;
    rows_[r].spec_id = next_spec_id_++;
    shapes.push_back(shape_for(SpeculationSource::Primary));
    rows_[r].spec.clear();
    rows_[r].lists.assign(K + 1, {});
  }
  for (int step = 0; step < K; ++step) {
    ForwardBatch batch;
    for (int r : rows) {
      Row& row = rows_[r];
      const int len = int(row.tokens.size());
      if (step == 0) {
        std::vector<int32_t> pending(row.tokens.begin() + row.cached, row.tokens.end());
        batch.add_causal(r, row.cached, pending, ForwardBatch::Logits::Last);
      } else {
        batch.add_causal(r, len + step - 1, {row.spec.back()}, ForwardBatch::Logits::All);
      }
    }
    draft_.forward(batch, logits_);
    for (size_t i = 0; i < rows.size(); ++i) {
      Row& row = rows_[rows[i]];
      const float* l = logits_.data() + i * vocab_;
      row.lists[step] = top_tokens(l, vocab_, list_limit_, -1);
      SequenceSpeculation& out = spec.sequences[slots[i]];
      const int32_t token = sample(row, l, shapes[i][step], &out.probs, row.spec_id, step);
      row.spec.push_back(token);
      out.tokens.push_back(token);
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    Row& row = rows_[rows[i]];
    row.cached = int(row.tokens.size());
    row.spec_cached = K - 1;
    row.fanout = std::move(shapes[i]);  // its cache is built with the shape it was sampled with
  }
}

SpeculationMessage SaguaroDrafter::respond(const OutcomeMessage& outcome) {
  const int K = s_.lookahead;
  SpeculationMessage spec;
  spec.round = outcome.round;
  spec.vocab = vocab_;
  spec.cache_build_s = last_build_s_;
  spec.branches = last_branches_;
  spec.budget = last_budget_;
  spec.sequences.resize(outcome.sequences.size());
  std::vector<int> misses, miss_slots;
  for (Row& row : rows_) row.active = false;
  if (outcome.target_busy_s > 0)  // a moving average over the last ~8 verifications
    verify_s_ = verify_s_ > 0 ? verify_s_ + 0.125 * (outcome.target_busy_s - verify_s_)
                              : outcome.target_busy_s;
  if (window_started_at_ > 0) {
    const double arrival = arrival_seen_at_ >= 0 ? arrival_seen_at_ : global_now();
    verify_window_sum_ += arrival - window_started_at_;
    windows_ += 1;
    window_started_at_ = -1.0;
  }

  for (size_t i = 0; i < outcome.sequences.size(); ++i) {
    const SequenceOutcome& o = outcome.sequences[i];
    Row& row = rows_.at(o.row);
    row.active = true;
    SequenceSpeculation& out = spec.sequences[i];
    out.row = o.row;
    out.fanout = row.prepared;
    const int len = int(row.tokens.size());
    if (row.source == SpeculationSource::Initial) {
      row.tokens.push_back(o.bonus);
    } else {
      if (o.accepted < 0 || o.accepted > K) throw std::runtime_error("Saguaro: bad outcome");
      const int32_t excluded = o.accepted < K ? row.spec[o.accepted] : -1;
      const std::vector<int32_t>& list = row.lists[o.accepted];
      int32_t bonus = o.bonus;
      if (bonus < 0) {
        // Synthetic outcome: the bonus is our rank-th candidate at position k.
        UniformStream u{s_.seed ^ kResolveSeed, sampling_stream(row.sequence) + 3,
                        row.resolve_draws};
        bonus = resolve_ranked_bonus(list, excluded, o.bonus_rank, vocab_, u);
        row.resolve_draws = u.counter;
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
      (was_backup ? backup_rounds_ : primary_rounds_) += 1;
      (was_backup ? backup_accepted_ : primary_accepted_) += o.accepted;
      row.tokens.insert(row.tokens.end(), row.spec.begin(), row.spec.begin() + o.accepted);
      row.tokens.push_back(bonus);
      row.cached = len + o.accepted;  // the glue step cached the whole speculation
      if (int(row.tokens.size()) != o.length)
        throw std::runtime_error("Saguaro: sequence length disagrees with the target's");
      ++lookups_;
      auto hit = row.cache.find({o.accepted, bonus});
      if (o.finishing) {  // the sequence ended: record how its last outcome fared, no more
        out.cache_hit = hit != row.cache.end();
        hits_ += out.cache_hit ? 1 : 0;
        row.active = false;
        continue;
      }
      if (hit != row.cache.end()) {
        ++hits_;
        Branch& b = row.branches[hit->second];
        // Move t, b_1 .. b_{K-1} from their scratch slots behind the accepted prefix.
        draft_.kv_move(o.row, b.base_slot, o.row, len + o.accepted, K);
        row.cached = len + o.accepted + 1;
        row.spec = b.tokens;
        row.spec_cached = K - 1;
        row.lists = std::move(b.lists);
        row.lists.resize(K + 1);
        row.spec_id = b.id;
        row.fanout = row.branch_fanout;  // the shape its tokens were sampled with
        row.source = SpeculationSource::CacheHit;
        out.cache_hit = true;
        out.source = SpeculationSource::CacheHit;
        out.tokens = row.spec;
        out.probs = std::move(b.probs);
        continue;
      }
    }
    if (int(row.tokens.size()) != o.length)
      throw std::runtime_error("Saguaro: sequence length disagrees with the target's");
    misses.push_back(o.row);
    miss_slots.push_back(int(i));
  }
  for (Row& row : rows_) {
    row.cache.clear();
    row.branches.clear();
  }
  if (misses.empty()) return spec;

  // Cache misses: the whole batch waits for them, so Theorem 17 picks the speculator.
  const double start = global_now();
  SpeedupInputs measured;
  measured.p_hit = lookups_ ? double(hits_) / double(lookups_) : 0.0;
  measured.e_hit = 1.0 + (primary_rounds_ ? double(primary_accepted_) / primary_rounds_ : 0.0);
  measured.e_miss = 1.0 + (backup_rounds_ ? double(backup_accepted_) / backup_rounds_ : 0.0);
  const double window = windows_ ? verify_window_sum_ / double(windows_) : 0.0;
  measured.t_p = window > 0 && primary_drafts_ ? primary_draft_s_ / primary_drafts_ / window : 0.0;
  measured.t_b = window > 0 && backup_drafts_ ? backup_draft_s_ / backup_drafts_ / window : 0.0;
  bool initial = false;
  for (int r : misses) initial |= rows_[r].source == SpeculationSource::Initial;
  // Corollary 16's b is the rows that wait on one another this round: those still decoding,
  // fewer than the configured batch once sequences finish (or in a last, partial group).
  int live = 0;
  for (const SequenceOutcome& o : outcome.sequences) live += o.finishing ? 0 : 1;
  const FallbackKind kind =
      initial ? FallbackKind::Primary
              : policy_.choose(live, measured, int(primary_rounds_ + backup_rounds_));
  if (kind == FallbackKind::Primary) {
    draft_primary(misses, spec, miss_slots);
    for (int slot : miss_slots)
      spec.sequences[slot].source =
          initial ? SpeculationSource::Initial : SpeculationSource::Primary;
    primary_draft_s_ += global_now() - start;
    primary_drafts_ += 1;
  } else {
    for (size_t i = 0; i < misses.size(); ++i) {
      Row& row = rows_[misses[i]];
      SequenceSpeculation& out = spec.sequences[miss_slots[i]];
      const bool want_probs = target_temperature_ > 0.0;
      BackupProposal p = s_.backup == BackupKind::Ngram
                             ? ngram_backup(row.tokens, K, vocab_, 3, want_probs)
                             : random_backup(K, vocab_, s_.seed, sampling_stream(row.sequence) + 3,
                                             row.draws, want_probs);
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
    backup_draft_s_ += global_now() - start;
    backup_drafts_ += 1;
  }
  spec.fallback_s = global_now() - start;
  return spec;
}

void serve_saguaro(PeerLink& link, SaguaroDrafter& drafter) {
  // The verification window: build the next round's cache while the target verifies.
  serve_draft_rank(
      link, [&](const StartMessage& m) { drafter.start(m); },
      [&](const OutcomeMessage& o) { return drafter.respond(o); },
      [&](double sent_at) { drafter.build_cache(link, sent_at); });
}

}  // namespace ssd
