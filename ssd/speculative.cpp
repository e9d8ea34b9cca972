#include "ssd/speculative.h"

#include <algorithm>
#include <cmath>

#include "comm/clock.h"
#include "ssd/sampling.h"
#include "ssd/verification.h"

namespace ssd {
namespace {

struct RowState {
  int sequence = 0;
  bool done = false;
  int32_t last = 0;  // the newest token, not yet in the target's cache
  int accepted = 0;  // k of the previous round, sent to the draft
  UniformStream uniforms;
  // Synthetic outcomes: the bonus is known as a rank until the draft names the token.
  int pending_rank = 0;
  int pending_index = -1;  // its place in the generated tokens, -1 when none is pending
};

// Draws a synthetic outcome (see OutcomeModel) for a speculation from `source`: k accepted,
// and the bonus as a rank. The backup's law applies only to the backup's own speculations: a
// cache hit or a just-in-time draft was drafted by the primary, whatever came before.
Verdict draw_synthetic(const OutcomeModel& m, SpeculationSource source, int K, UniformStream& u,
                       int& rank) {
  const bool backup = source == SpeculationSource::Backup;
  const double alpha = backup ? m.alpha_backup : m.alpha;
  const double r = backup ? m.r_backup : m.r;
  Verdict v;
  while (v.accepted < K && u.next() < alpha) ++v.accepted;
  // P(rank >= j) = j^(-r) for j >= 1, so rank = floor(U^(-1/r)) with U uniform on (0, 1].
  const double U = 1.0 - u.next();
  rank = int(std::min(1e9, std::floor(std::pow(U, -1.0 / r))));
  v.bonus = -1;
  return v;
}

}  // namespace

RepTotals run_speculative(ModelGroup& target, DraftEndpoint& draft,
                          const std::vector<std::vector<int32_t>>& prompts,
                          const SpeculativeSettings& settings, int rep, double clock_zero,
                          RunRecords* records, std::vector<std::vector<int32_t>>& generated) {
  const DecodeSettings& s = settings.decode;
  const int K = settings.lookahead;
  const ModelConfig& config = target.config();
  const int vocab = config.vocab_size;
  const int n_prompts = int(prompts.size());
  const int batch = std::min(s.batch_size, n_prompts);
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());

  RepTotals totals;
  totals.rep = rep;
  generated.assign(n_prompts, {});
  std::vector<float> logits, p_rows;
  std::vector<float> probs;

  for (int first = 0, group = 0; first < n_prompts; first += batch, ++group) {
    const int rows = std::min(batch, n_prompts - first);
    target.reset_cache(rows, int(longest) + s.max_new_tokens + K + 2);
    std::vector<int>& length = target.lengths();
    std::vector<RowState> state(rows);
    std::vector<int> last_record(rows, -1);  // each row's latest round in records->rounds

    StartMessage start;
    start.group = group;
    start.max_new_tokens = s.max_new_tokens;
    start.lookahead = K;
    start.temperature = s.temperature;
    start.seed = s.seed;
    start.synthetic = settings.outcomes.synthetic;
    for (int r = 0; r < rows; ++r) {
      start.sequence_ids.push_back(first + r);
      start.prompts.push_back(prompts[first + r]);
      state[r].sequence = first + r;
      state[r].uniforms = UniformStream{s.seed, acceptance_stream(first + r), 0};
    }
    draft.start(start);

    // Returns false once the row is finished (token limit or EOS).
    auto emit = [&](int r, int32_t token) {
      auto& out = generated[state[r].sequence];
      out.push_back(token);
      ++totals.generated_tokens;
      if (int(out.size()) >= s.max_new_tokens || (!s.ignore_eos && config.is_eos(token)))
        state[r].done = true;
      state[r].last = token;
      return !state[r].done;
    };

    // Prefill, exactly as AR does it (so greedy SD reproduces AR from the first token on).
    const double prefill_start = global_now();
    ForwardBatch prefill;
    for (int r = 0; r < rows; ++r) {
      length[r] = 0;
      prefill.add_causal(r, 0, prompts[first + r], ForwardBatch::Logits::Last);
    }
    target.forward(prefill, logits);
    for (int r = 0; r < rows; ++r) {
      length[r] = int(prompts[first + r].size());
      const double u = uniform01(s.seed, sampling_stream(first + r), 0);
      emit(r, sample_token(logits.data() + size_t(r) * vocab, vocab, s.temperature, u));
    }
    const double prefill_s = global_now() - prefill_start;
    totals.prefill_s += prefill_s;
    totals.prefill_tokens += prefill.rows();
    if (records)
      for (int r = 0; r < rows; ++r)
        records->steps.push_back(
            {rep, -1, r, first + r, 1, prefill_start - clock_zero, prefill_s, prefill_s});

    double busy_s = 0.0;  // verification + acceptance of the previous round
    for (int round = 0;; ++round) {
      OutcomeMessage outcome;
      outcome.round = round;
      outcome.temperature = s.temperature;
      outcome.target_busy_s = busy_s;
      for (int r = 0; r < rows; ++r)
        if (!state[r].done || state[r].pending_index >= 0)
          outcome.sequences.push_back(
              {r, state[r].accepted, state[r].last,
               int32_t(prompts[first + r].size() + generated[state[r].sequence].size()),
               state[r].pending_index >= 0 ? state[r].pending_rank : 0, state[r].done ? 1 : 0});
      if (outcome.sequences.empty()) {
        outcome.stop = true;
        draft.finish_group(outcome);
        break;
      }
      const double round_start = global_now();
      ExchangeTiming timing;
      const SpeculationMessage spec = draft.exchange(outcome, timing);
      // This speculation also reports how last round's outcome fared in the draft's cache.
      if (records)
        for (const SequenceSpeculation& sp : spec.sequences) {
          const int at = last_record[sp.row];
          if (at < 0 || sp.fanout.empty()) continue;
          RoundRecord& previous = records->rounds[at];
          previous.outcome_hit = sp.cache_hit ? 1 : 0;
          previous.bonus_rank = sp.bonus_rank;
          previous.fanout = sp.fanout;
          previous.budget = spec.budget;
          previous.branches = spec.branches;
          previous.cache_build_s = spec.cache_build_s;
        }

      // Synthetic outcomes: the draft has named last round's bonus tokens.
      for (const SequenceSpeculation& sp : spec.sequences) {
        RowState& row = state[sp.row];
        if (row.pending_index < 0) continue;
        generated[row.sequence][row.pending_index] = sp.resolved_bonus;
        row.last = sp.resolved_bonus;
        row.pending_index = -1;
        if (records && last_record[sp.row] >= 0)
          records->rounds[last_record[sp.row]].bonus = sp.resolved_bonus;
      }
      std::vector<const SequenceSpeculation*> drafted;
      for (const SequenceSpeculation& sp : spec.sequences)
        if (!sp.tokens.empty()) drafted.push_back(&sp);
      if (drafted.empty()) continue;  // only finished sequences' bonuses were resolved

      // Verify: the newest token plus the K draft tokens, K+1 logits rows per sequence.
      const double verify_start = global_now();
      ForwardBatch verify;
      for (const SequenceSpeculation* spp : drafted) {
        const SequenceSpeculation& sp = *spp;
        std::vector<int32_t> tokens{state[sp.row].last};
        tokens.insert(tokens.end(), sp.tokens.begin(), sp.tokens.end());
        verify.add_causal(sp.row, length[sp.row], tokens, ForwardBatch::Logits::All);
      }
      target.forward(verify, logits);
      const double verify_s = global_now() - verify_start;

      const double accept_start = global_now();
      std::vector<RoundRecord> round_records;
      for (size_t i = 0; i < drafted.size(); ++i) {
        const SequenceSpeculation& sp = *drafted[i];
        RowState& row = state[sp.row];
        const float* l = logits.data() + i * size_t(K + 1) * vocab;
        Verdict v;
        int rank = 0;
        if (settings.outcomes.synthetic) {
          v = draw_synthetic(settings.outcomes, sp.source, K, row.uniforms, rank);
        } else if (s.temperature == 0.0) {
          v = verify_greedy(l, sp.tokens.data(), K, vocab);
        } else {
          p_rows.resize(size_t(K + 1) * vocab);
          for (int j = 0; j <= K; ++j) {
            softmax(l + size_t(j) * vocab, vocab, s.temperature, probs);
            std::copy(probs.begin(), probs.end(), p_rows.begin() + size_t(j) * vocab);
          }
          v = verify_sampled(p_rows.data(), sp.probs.data(), sp.tokens.data(), K, vocab,
                             row.uniforms);
        }
        // The newest token and the accepted drafts are now in the target's cache.
        length[sp.row] += 1 + v.accepted;
        int emitted = 0;
        bool open = true;
        for (int j = 0; j < v.accepted && open; ++j, ++emitted) open = emit(sp.row, sp.tokens[j]);
        if (open && v.bonus < 0) {
          // Synthetic: the token behind the rank arrives with the next speculation.
          row.pending_rank = rank;
          row.pending_index = int(generated[row.sequence].size());
          emit(sp.row, -1);
          row.last = -1;
          ++emitted;
        } else if (open) {
          emit(sp.row, v.bonus);
          ++emitted;
        }
        row.accepted = v.accepted;
        totals.rounds += 1;
        totals.drafted += K;
        totals.accepted += v.accepted;
        RoundRecord rr;
        rr.rep = rep;
        rr.group = group;
        rr.round = round;
        rr.row = sp.row;
        rr.sequence = row.sequence;
        rr.drafted = K;
        rr.accepted = v.accepted;
        rr.bonus = v.bonus;
        rr.tokens = emitted;
        rr.source = int(sp.source);
        rr.fallback_s = sp.source == SpeculationSource::CacheHit ? 0.0 : spec.fallback_s;
        rr.start_s = round_start - clock_zero;
        rr.draft_start_s = timing.draft_start_s - clock_zero;
        rr.draft_end_s = timing.draft_end_s - clock_zero;
        rr.draft_s = timing.draft_s;
        rr.verify_s = verify_s;
        rr.comm_s = timing.comm_s;
        rr.target_idle_s = timing.target_idle_s;
        rr.draft_idle_s = timing.draft_idle_s;
        rr.message_bytes = timing.bytes;
        round_records.push_back(rr);
        totals.decode_tokens += emitted;
        totals.per_sequence_decode_tokens += double(emitted) / rows;
      }
      const double end = global_now();
      busy_s = end - verify_start;
      totals.decode_s += end - round_start;
      totals.decode_steps += 1;
      if (s.on_tokens) {
        int64_t emitted = 0;
        for (const RoundRecord& rr : round_records) emitted += rr.tokens;
        s.on_tokens(emitted);
      }
      totals.draft_s += timing.draft_s;
      totals.verify_s += verify_s;
      if (records)
        for (RoundRecord& rr : round_records) {
          rr.accept_s = end - accept_start;
          rr.end_s = end - clock_zero;
          last_record[rr.row] = int(records->rounds.size());
          records->rounds.push_back(rr);
        }
    }
  }
  return totals;
}

}  // namespace ssd
