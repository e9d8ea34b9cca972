// Forward-pass timings with the real models, through ModelGroup as the decoding loops drive
// them (so TP followers, their broadcasts and all-reduces are included): the target's AR step
// and K+1-token verification, the draft's one-token step, its glue step (K+1 tokens per
// sequence, what SSD runs before building a cache), SSD's branch-masked branch steps, and for
// both models the cost curve over 2-16 tokens per sequence ("rows") and one token for each of
// many sequences ("sequences"). SD's and SSD's rounds are rounds.cpp's.
#include <algorithm>
#include <functional>
#include <utility>

#include "characterize/parts.h"
#include "ssd/model_group.h"
#include "ssd/saguaro_sampling.h"
#include "ssd/sampling.h"
#include "ssd/step_batches.h"

namespace ssd {
namespace {

// One kind of forward pass to time: its batch, its kind and the context it steps from.
struct Pass {
  ForwardBatch batch;
  const char* kind;
  int sequences;
  int context;
};

// The passes timed together (time_calls_interleaved: their batches in turn), one result each.
std::vector<ForwardResult> timed(ModelGroup& g, const std::vector<Pass>& passes, const char* model,
                                 int rank, const ForwardPlan& plan) {
  std::vector<float> logits;
  std::vector<std::function<void()>> calls;
  for (const Pass& pass : passes)
    calls.push_back([&g, &logits, batch = &pass.batch] { g.forward(*batch, logits); });
  const std::vector<Timing> times =
      time_calls_interleaved(*g.model().backend, calls, plan.min_time);
  std::vector<ForwardResult> out;
  for (size_t i = 0; i < passes.size(); ++i)
    out.push_back({.rank = rank,
                   .model = model,
                   .kind = passes[i].kind,
                   .rows = passes[i].batch.rows(),
                   .sequences = passes[i].sequences,
                   .calls = times[i].calls,
                   .context = passes[i].context,
                   .seconds = times[i].median_s,
                   .best_seconds = times[i].best_s,
                   .concurrent = plan.concurrent});
  return out;
}

void append(std::vector<ForwardResult>& out, const std::vector<ForwardResult>& more) {
  out.insert(out.end(), more.begin(), more.end());
}

// Forward passes over m tokens per sequence with every row's logits: the cost curve between the
// AR step (m = 1) and the verification (m = K+1) and past it, which predictions read at a run's
// own row counts (AR over b sequences, verification of b(K+1) rows, the draft's steps). Also
// at 2(K+1) and 4(K+1), the verification of 2 and 4 sequences, measured where predictions
// would otherwise interpolate (llama-124m at context 32: 10 rows of one sequence 13.0-13.5 ms,
// 2 sequences of 5 rows 13.1-13.3, 8 and 16 rows interpolated 13.2-13.6).
constexpr int kMostCurveTokens = 16;  // and again at a quarter of the context
constexpr int kManySequences = 16;

std::vector<int> curve_tokens(int K) {
  std::vector<int> m = {2, 3, 4, 8, kMostCurveTokens, 2 * (K + 1), 4 * (K + 1)};
  std::sort(m.begin(), m.end());
  m.erase(std::unique(m.begin(), m.end()), m.end());
  m.erase(std::remove(m.begin(), m.end(), K + 1), m.end());
  return m;
}

// Slots a sequence needs for every step above after its context.
int curve_capacity(int K) {
  return std::max(K + 1, curve_tokens(K).back());
}

// The curve's passes (kind "rows"), for timing beside a model's other single passes.
void add_curve(const ForwardPlan& p, int vocab, std::vector<Pass>& passes) {
  for (int m : curve_tokens(p.lookahead))
    passes.push_back({causal_step(p.batch, p.context, m, vocab, true), "rows", p.batch, p.context});
  // The longest step again at a quarter of the context: the difference is what attending to the
  // context costs per row and token, which predictions scale to a run's own context.
  const int short_context = p.context / 4;
  if (short_context >= 1)
    passes.push_back({causal_step(p.batch, short_context, kMostCurveTokens, vocab, true), "rows",
                      p.batch, short_context});
}

// One token for each of many sequences (kind "sequences"): an AR step over a batch, each row
// reading its own sequence's K/V, where the curve's rows all share one sequence's. Predictions
// charge the difference per further sequence and context token. Leaves a fresh cache behind.
void time_sequences(ModelGroup& g, const ForwardPlan& p, const char* model, int rank,
                    std::vector<ForwardResult>& out) {
  const int many = std::max(kManySequences, 2 * p.batch);
  prefill(g, many, p.context, p.context + 1);
  append(out, timed(g,
                    {{causal_step(many, p.context, 1, g.config().vocab_size, false), "sequences",
                      many, p.context}},
                    model, rank, p));
}

// Releases the TP followers from serve() on every path out of the leader, an exception
// included, so they are not left waiting for a broadcast.
struct StopFollowers {
  ModelGroup& group;
  ~StopFollowers() { group.stop(); }
};

// The host work the decoding loops do per logits row, beside the forward pass: greedy argmax,
// temperature sampling (softmax + draw: the target's verification at T > 0, AR and the draft's
// sampled tokens) and the draft's candidate list (its top 64, for every drafted and branch
// token of SSD). Model "host", one row per call, on this rank's CPU whatever the backend. The
// rows are taken in turn from 64, so each comes from the last-level cache, as a batch's rows
// do after its forward pass: one row timed over and over sat in L1/L2 and took a quarter of
// the time (bench/bench_token_selection).
std::vector<ForwardResult> time_host_sampling(Backend& backend, int vocab, int rank,
                                              double min_time) {
  constexpr size_t kRows = 64;
  const std::vector<float> logits = random_floats(kRows * size_t(vocab), 17, 1);
  size_t next = 0;
  auto row = [&] { return logits.data() + (next++ % kRows) * size_t(vocab); };
  std::vector<float> probs;
  volatile int64_t sink = 0;  // keeps the calls from being optimised away
  const std::pair<const char*, std::function<void()>> kinds[] = {
      {"argmax", [&] { sink = sink + argmax(row(), vocab); }},
      {"sample",
       [&] {
         softmax(row(), vocab, 1.0, probs);
         sink = sink + sample_from(probs, 0.37);
       }},
      {"candidates", [&] { sink = sink + top_tokens(row(), vocab, 64, -1).front(); }},
  };
  std::vector<ForwardResult> out;
  for (const auto& [kind, call] : kinds) {
    const Timing t = time_calls(backend, call, min_time);
    out.push_back({.rank = rank,
                   .model = "host",
                   .kind = kind,
                   .rows = 1,
                   .sequences = 1,
                   .calls = t.calls,
                   .seconds = t.median_s,
                   .best_seconds = t.best_s});
  }
  return out;
}

// Side by side, the two models' timings last different times. Whichever finishes first keeps
// doing its SSD work (verifications; branch steps) until the other has finished too, so every
// pass timed "beside" had the other model's memory traffic beside it all along.
void keep_busy_until_peer_done(int peer, const std::function<void()>& work) {
  constexpr int kDoneTag = 111;  // only characterize's forward phase sends it
  int mine = 1, theirs = 0, done = 0;
  MPI_Request received, sent;
  MPI_Irecv(&theirs, 1, MPI_INT, peer, kDoneTag, MPI_COMM_WORLD, &received);
  MPI_Isend(&mine, 1, MPI_INT, peer, kDoneTag, MPI_COMM_WORLD, &sent);
  for (MPI_Test(&received, &done, MPI_STATUS_IGNORE); !done;
       MPI_Test(&received, &done, MPI_STATUS_IGNORE))
    work();
  MPI_Wait(&sent, MPI_STATUS_IGNORE);
}

}  // namespace

std::vector<ForwardResult> time_target_forwards(Model& model, MPI_Comm group, int rank,
                                                const ForwardPlan& p, Model* sd_draft) {
  ModelGroup g(model, group);
  if (!g.leader()) {
    g.serve();
    return {};
  }
  StopFollowers stop{g};
  const int K = p.lookahead, vocab = model.config.vocab_size;
  std::vector<ForwardResult> out;
  time_sequences(g, p, "target", rank, out);
  prefill(g, p.batch, p.context, p.context + curve_capacity(K));
  // The AR step, the verification and the curve together: predictions read them as ratios.
  const ForwardBatch verify = causal_step(p.batch, p.context, K + 1, vocab, true);
  std::vector<Pass> passes = {
      {causal_step(p.batch, p.context, 1, vocab, false), "ar", p.batch, p.context},
      {verify, "verify", p.batch, p.context}};
  add_curve(p, vocab, passes);
  append(out, timed(g, passes, "target", rank, p));
  if (sd_draft)
    for (const ForwardResult& r : time_sd_rounds(g, *sd_draft, rank, p)) out.push_back(r);
  if (p.peer >= 0) {
    std::vector<float> logits;
    keep_busy_until_peer_done(p.peer, [&] { g.forward(verify, logits); });
    out.push_back(time_ssd_rounds_target(g, rank, p));
  }
  if (p.host_sampling)
    for (const ForwardResult& r : time_host_sampling(*model.backend, vocab, rank, p.min_time))
      out.push_back(r);
  return out;
}

std::vector<ForwardResult> time_draft_forwards(Model& model, int rank, const ForwardPlan& p) {
  ModelGroup g(model, MPI_COMM_SELF);
  const int K = p.lookahead, vocab = model.config.vocab_size;
  // Committed tokens and the speculation below `scratch`, K slots per branch above it.
  const int scratch = p.context + K + 1;
  int most_rows = 1;
  for (int rows : p.branch_rows) most_rows = std::max(most_rows, rows);
  const int per_sequence = (most_rows + p.batch - 1) / p.batch;
  std::vector<ForwardResult> out;
  time_sequences(g, p, "draft", rank, out);
  prefill(g, p.batch, p.context,
          std::max(scratch + per_sequence * K, p.context + curve_capacity(K)));
  // The glue step also writes the speculation's K/V, which the branch steps attend to.
  std::vector<Pass> passes = {
      {causal_step(p.batch, p.context, 1, vocab, false), "draft", p.batch, p.context},
      {causal_step(p.batch, p.context, K + 1, vocab, true), "glue", p.batch, p.context}};
  add_curve(p, vocab, passes);
  for (int rows : p.branch_rows)
    passes.push_back(
        {branch_step(p.batch, p.context, K, rows, scratch, vocab), "branch", p.batch, p.context});
  append(out, timed(g, passes, "draft", rank, p));
  if (p.peer >= 0) {
    const ForwardBatch branches = branch_step(p.batch, p.context, K, most_rows, scratch, vocab);
    std::vector<float> logits;
    keep_busy_until_peer_done(p.peer, [&] { g.forward(branches, logits); });
    for (const ForwardResult& r : time_ssd_rounds_draft(g, rank, p)) out.push_back(r);
  }
  return out;
}

}  // namespace ssd
