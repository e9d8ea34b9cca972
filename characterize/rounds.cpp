// SD's and SSD's rounds as the runs take them, beside the single passes forward.cpp times. A
// pass timed on its own repeats itself with its weights warm in the caches and, timed beside
// the other model's rank, overlaps whatever that rank happens to time. In a round, SD's
// verification follows the draft's steps on the same rank, and SSD's follows the go of a round
// whose cache build starts beside it and ends before it: what predictions scale their costs by.
#include <mpi.h>

#include <algorithm>

#include "characterize/parts.h"
#include "ssd/step_batches.h"

namespace ssd {
namespace {

// Rounds for five times min_time, and at least three. Two models' passes in turn, or two ranks
// side by side, vary more from round to round than one pass repeated: SSD's verification
// beside the build measured 0.98-1.17x the pass alone over 0.2 s in five characterize runs.
// round(timed) runs one round: once untimed to warm up, then timed; returns the timed rounds.
constexpr double kRoundTimes = 5.0;
template <typename Round>
int run_rounds(const ForwardPlan& p, Round&& round) {
  round(false);
  const double start = MPI_Wtime();
  int rounds = 0;
  for (; rounds < 3 || MPI_Wtime() - start < kRoundTimes * p.min_time; ++rounds) round(true);
  return rounds;
}

// Only characterize's SSD rounds send these.
constexpr int kGoTag = 112, kVerifiedTag = 113, kDoneTag = 114;

}  // namespace

// SD's collocated round: the target verifies K+1 tokens per sequence, then the draft takes its
// K one-token steps, on the same rank, round after round. Model "sd": kind verify (per round)
// and draft (per step).
std::vector<ForwardResult> time_sd_rounds(ModelGroup& target, Model& draft_model, int rank,
                                          const ForwardPlan& p) {
  ModelGroup draft(draft_model, MPI_COMM_SELF);
  const int K = p.lookahead, vocab = target.config().vocab_size;
  prefill(target, p.batch, p.context, p.context + K + 1);
  prefill(draft, p.batch, p.context, p.context + K + 1);
  const ForwardBatch verify = causal_step(p.batch, p.context, K + 1, vocab, true);
  std::vector<ForwardBatch> steps;
  for (int step = 0; step < K; ++step) {
    ForwardBatch b;
    for (int s = 0; s < p.batch; ++s)
      b.add_causal(s, p.context + step, {token_at(3000 + s * 31 + step, vocab)},
                   ForwardBatch::Logits::Last);
    steps.push_back(std::move(b));
  }
  Backend& backend = *target.model().backend;
  std::vector<float> logits;
  double verify_s = 0.0, draft_s = 0.0, best_verify = 1e300, best_draft = 1e300;
  auto round = [&](bool timed) {
    const double start = MPI_Wtime();
    target.forward(verify, logits);
    backend.synchronize();  // the draft needs the verification's outcome
    const double verified = MPI_Wtime();
    for (const ForwardBatch& step : steps) draft.forward(step, logits);
    backend.synchronize();
    const double end = MPI_Wtime();
    if (!timed) return;
    verify_s += verified - start, draft_s += end - verified;
    best_verify = std::min(best_verify, verified - start);
    best_draft = std::min(best_draft, (end - verified) / K);
  };
  const int rounds = run_rounds(p, round);
  return {{.rank = rank,
           .model = "sd",
           .kind = "verify",
           .rows = p.batch * (K + 1),
           .sequences = p.batch,
           .calls = rounds,
           .context = p.context,
           .seconds = verify_s / rounds,
           .best_seconds = best_verify},
          {.rank = rank,
           .model = "sd",
           .kind = "draft",
           .rows = p.batch,
           .sequences = p.batch,
           .calls = rounds * K,
           .context = p.context,
           .seconds = draft_s / (rounds * K),
           .best_seconds = best_draft}};
}

// SSD's round, target side: each round sends the draft rank (p.peer) its go, verifies, sends
// the outcome and waits for the draft's answer, as a round that missed the cache waits for the
// just-in-time speculation. Model "ssd", kind verify.
ForwardResult time_ssd_rounds_target(ModelGroup& target, int rank, const ForwardPlan& p) {
  const int K = p.lookahead;
  const ForwardBatch verify =
      causal_step(p.batch, p.context, K + 1, target.config().vocab_size, true);
  Backend& backend = *target.model().backend;
  std::vector<float> logits;
  double total = 0.0, best = 1e300;
  auto round = [&](bool timed) {
    int go = 1, done = 0;
    MPI_Send(&go, 1, MPI_INT, p.peer, kGoTag, MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    target.forward(verify, logits);
    backend.synchronize();
    const double seconds = MPI_Wtime() - start;
    MPI_Send(&go, 1, MPI_INT, p.peer, kVerifiedTag, MPI_COMM_WORLD);
    MPI_Recv(&done, 1, MPI_INT, p.peer, kDoneTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (timed) total += seconds, best = std::min(best, seconds);
  };
  const int rounds = run_rounds(p, round);
  int stop = 0;
  MPI_Send(&stop, 1, MPI_INT, p.peer, kGoTag, MPI_COMM_WORLD);
  return {.rank = rank,
          .model = "ssd",
          .kind = "verify",
          .rows = p.batch * (K + 1),
          .sequences = p.batch,
          .calls = rounds,
          .context = p.context,
          .seconds = total / rounds,
          .best_seconds = best,
          .concurrent = p.concurrent};
}

// SSD's round, draft side: on each go, the cache build of SaguaroDrafter::build_cache for
// uniform:1 (p.branch_rows' fewest rows, b(K+1)): the glue step over K+1 tokens per sequence,
// then K branch steps; then more branch steps until the outcome arrives, so that the draft's
// traffic lies beside the whole verification, as --budget auto's build lies beside 85-97% of
// it in the runs. The uniform:1 build alone covered about half (0.55) of a llama-124m
// verification, and predictions divided the slowdown it caused by that share: characterize
// runs an hour apart put the verification beside it at 1.00x-1.17x the pass alone.
// On the outcome, the K one-token steps of a just-in-time speculation, as after a miss. Model
// "ssd", kinds build (the uniform:1 build; rows: of each branch step), busy (from the go to
// the outcome: the build and the steps after it) and fallback (per step).
std::vector<ForwardResult> time_ssd_rounds_draft(ModelGroup& draft, int rank,
                                                 const ForwardPlan& p) {
  const int K = p.lookahead, vocab = draft.config().vocab_size;
  const int rows = p.branch_rows.empty() ? p.batch * (K + 1) : p.branch_rows.front();
  const int scratch = p.context + K + 1;
  const ForwardBatch glue = causal_step(p.batch, p.context, K + 1, vocab, true);
  const ForwardBatch branches = branch_step(p.batch, p.context, K, rows, scratch, vocab);
  const ForwardBatch step = causal_step(p.batch, p.context, 1, vocab, false);
  Backend& backend = *draft.model().backend;
  std::vector<float> logits;
  double built = 0.0, best_built = 1e300, drafted = 0.0, best_drafted = 1e300;
  double busy = 0.0, best_busy = 1e300;
  int rounds = 0;
  for (int go = 1;; ++rounds) {
    MPI_Recv(&go, 1, MPI_INT, p.peer, kGoTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (!go) break;
    const double start = MPI_Wtime();
    draft.forward(glue, logits);
    for (int k = 0; k < K; ++k) draft.forward(branches, logits);
    backend.synchronize();
    const double build_s = MPI_Wtime() - start;
    for (int verified = 0;;) {
      MPI_Iprobe(p.peer, kVerifiedTag, MPI_COMM_WORLD, &verified, MPI_STATUS_IGNORE);
      if (verified) break;
      draft.forward(branches, logits);
      backend.synchronize();
    }
    const double busy_s = MPI_Wtime() - start;
    MPI_Recv(&go, 1, MPI_INT, p.peer, kVerifiedTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const double outcome = MPI_Wtime();
    for (int k = 0; k < K; ++k) draft.forward(step, logits);
    backend.synchronize();
    const double draft_s = (MPI_Wtime() - outcome) / K;
    MPI_Send(&go, 1, MPI_INT, p.peer, kDoneTag, MPI_COMM_WORLD);
    if (rounds == 0) continue;  // warm-up
    built += build_s, best_built = std::min(best_built, build_s);
    busy += busy_s, best_busy = std::min(best_busy, busy_s);
    drafted += draft_s, best_drafted = std::min(best_drafted, draft_s);
  }
  const int timed = std::max(rounds - 1, 1);
  auto result = [&](const char* kind, int result_rows, int calls, double seconds, double best) {
    return ForwardResult{.rank = rank,
                         .model = "ssd",
                         .kind = kind,
                         .rows = result_rows,
                         .sequences = p.batch,
                         .calls = calls,
                         .context = p.context,
                         .seconds = seconds,
                         .best_seconds = best,
                         .concurrent = p.concurrent};
  };
  return {result("build", rows, timed, built / timed, best_built),
          result("busy", rows, timed, busy / timed, best_busy),
          result("fallback", p.batch, timed * K, drafted / timed, best_drafted)};
}

}  // namespace ssd
