#include "harness/calibrate.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <vector>

#include "comm/clock.h"
#include "ssd/budget.h"
#include "ssd/model_group.h"
#include "ssd/step_batches.h"

namespace ssd {
namespace {

// Samples per step: the median of three already steadies a step of tens of milliseconds; the
// draft beside a busy target takes as many more as the target leaves it time for. The target
// takes five of each verification, interleaved (see time_verifications).
constexpr int kRepeats = 3;
constexpr int kVerifyRepeats = 5;
// Branch rows per sequence of the measured cost curve (x the batch): from the budgets a CPU
// core settles at (1-5 outcomes per sequence on the Qwen pair) to the sizes where the bf16 dot
// products turn compute-bound. A line through these sizes (29.5 + 8.3 n ms on the pair, where
// its runs measured ~45 + 3 n over 1-5 rows) made caches of a few rows look cheaper than they
// were and one of 8 far dearer; the curve interpolates them instead (ssd/step_cost.h).
constexpr int kBranchMultiples[] = {1, 2, 4, 8, 16};
constexpr int kMaxBranchRows = 256;
// The branch step's K only places the branches' positions (its cost does not depend on it).
constexpr int kBranchK = 4;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double time_forward(ModelGroup& g, const ForwardBatch& batch, std::vector<float>& logits) {
  const double start = now_seconds();
  g.forward(batch, logits);
  return now_seconds() - start;
}

// The target leader's part: the verification of b x (K + 1) rows for every K, and AR's step of
// b rows beside them (verify[0], what no K should fall below), in rounds over all of them, so that
// a slow spell of the host (its bandwidth moves within seconds) lands on every K alike instead of
// on the few it happened to meet. Taken K by K, one Qwen-pair launch measured 162 / 237 / 257 ms
// for K = 1-3 where others a minute apart measured 126-141 / 170-178 / 170-178, and chose K = 1
// from it.
std::vector<double> time_verifications(ModelGroup& g, int batch, int context, int max_k) {
  prefill(g, batch, context, context + max_k + 2);
  const int vocab = g.config().vocab_size;
  std::vector<float> logits;
  std::vector<ForwardBatch> steps;
  for (int K = 0; K <= max_k; ++K) steps.push_back(causal_step(batch, context, K + 1, vocab, true));
  std::vector<std::vector<double>> samples(steps.size());
  for (int i = 0; i < kVerifyRepeats; ++i)
    for (size_t k = 0; k < steps.size(); ++k)
      samples[k].push_back(time_forward(g, steps[k], logits));
  std::vector<double> verify(size_t(max_k) + 1, 0.0);
  for (size_t k = 0; k < steps.size(); ++k) verify[k] = median(samples[k]);
  const std::vector<double> smooth =
      nondecreasing_costs(std::vector<double>(verify.begin() + 1, verify.end()));
  std::copy(smooth.begin(), smooth.end(), verify.begin() + 1);
  return verify;
}

// The draft's part: samples of its one-token step (index 0) and of each branch-step size,
// added to `samples` on every call, so that a draft beside a busy target can keep measuring.
struct DraftSteps {
  std::vector<int> rows;                     // branch rows per size
  std::vector<std::vector<double>> samples;  // [0]: one token per sequence; [1 + i]: rows[i]
  std::vector<ForwardBatch> batches;
};

DraftSteps prepare_draft(ModelGroup& g, int batch, int context) {
  DraftSteps d;
  const int vocab = g.config().vocab_size;
  const int scratch = context + kMaxAutoLookahead + 2;
  int widest = 0;
  for (int m : kBranchMultiples)
    if (m * batch <= std::max(kMaxBranchRows, batch)) d.rows.push_back(m * batch), widest = m;
  prefill(g, batch, context, scratch + widest * kBranchK + 1);
  d.batches.push_back(causal_step(batch, context, 1, vocab, true));
  for (int rows : d.rows)
    d.batches.push_back(branch_step(batch, context, kBranchK, rows, scratch, vocab));
  d.samples.resize(d.batches.size());
  return d;
}

void time_draft_once(ModelGroup& g, DraftSteps& d, std::vector<float>& logits) {
  for (size_t i = 0; i < d.batches.size(); ++i)
    d.samples[i].push_back(time_forward(g, d.batches[i], logits));
}

// The draft's one-token step, and the curve through its branch steps' medians. `rows_scale`:
// whole-batch rows per row measured (several draft ranks each build their share).
void fit_draft(const DraftSteps& d, double rows_scale, LookaheadCosts& costs) {
  costs.draft_step_s = median(d.samples[0]);
  costs.branch = StepCostCurve{};
  for (size_t i = 0; i < d.rows.size(); ++i)
    costs.branch.observe(int(std::lround(d.rows[i] * rows_scale)), median(d.samples[i + 1]));
}

// The draft's costs as doubles, for one broadcast: the one-token step, then (rows, seconds)
// per branch-step size.
std::vector<double> pack_draft(const LookaheadCosts& costs) {
  std::vector<double> out{costs.draft_step_s};
  for (const auto& [rows, seconds] : costs.branch.points())
    out.push_back(rows), out.push_back(seconds);
  return out;
}

void unpack_draft(const std::vector<double>& in, LookaheadCosts& costs) {
  costs.draft_step_s = in.at(0);
  costs.branch = StepCostCurve{};
  for (size_t i = 1; i + 1 < in.size(); i += 2)
    if (in[i] > 0) costs.branch.observe(int(in[i]), in[i + 1]);
}

}  // namespace

LookaheadCosts measure_lookahead_costs(const RunPlan& plan, Launch& launch, int context,
                                       int max_k) {
  const RankLayout& layout = launch.layout;
  const int batch = std::max(1, plan.decode.batch_size);
  // With several draft ranks each serves its share of the batch.
  const int draft_batch =
      (batch + std::max(1, layout.draft_ranks) - 1) / std::max(1, layout.draft_ranks);
  LookaheadCosts costs;
  costs.batch = batch;
  std::vector<double> verify(size_t(max_k) + 1, 0.0);
  // pack_draft's layout: the one-token step and up to one (rows, seconds) pair per size
  std::vector<double> draft(1 + 2 * std::size(kBranchMultiples), 0.0);
  std::vector<float> logits;
  MPI_Request target_done = MPI_REQUEST_NULL;
  if (launch.is_target()) {
    ModelGroup g(*launch.target_model, layout.group);
    if (layout.is_leader()) {
      verify = time_verifications(g, batch, context, max_k);
      g.stop();
    } else {
      g.serve();
    }
    if (layout.is_run_leader() && !plan.separate_draft()) {  // the collocated draft, after
      ModelGroup d(*launch.draft_model, MPI_COMM_SELF);
      DraftSteps steps = prepare_draft(d, batch, context);
      for (int i = 0; i < kRepeats; ++i) time_draft_once(d, steps, logits);
      fit_draft(steps, 1.0, costs);
      const std::vector<double> packed = pack_draft(costs);
      std::copy(packed.begin(), packed.end(), draft.begin());
    }
    MPI_Ibarrier(MPI_COMM_WORLD, &target_done);
    MPI_Wait(&target_done, MPI_STATUS_IGNORE);
  } else {
    // A draft rank: measures beside the target until the target is done, at least kRepeats.
    ModelGroup d(*launch.draft_model, MPI_COMM_SELF);
    DraftSteps steps = prepare_draft(d, draft_batch, context);
    for (int i = 0; i < kRepeats; ++i) time_draft_once(d, steps, logits);
    MPI_Ibarrier(MPI_COMM_WORLD, &target_done);
    for (int finished = 0;;) {
      MPI_Test(&target_done, &finished, MPI_STATUS_IGNORE);
      if (finished) break;
      time_draft_once(d, steps, logits);
    }
    // Each draft rank builds its share: n branch rows over D ranks cost a step of n / D.
    fit_draft(steps, double(batch) / double(draft_batch), costs);
    const std::vector<double> packed = pack_draft(costs);
    std::copy(packed.begin(), packed.end(), draft.begin());
  }
  MPI_Bcast(verify.data(), int(verify.size()), MPI_DOUBLE, layout.target_leader, MPI_COMM_WORLD);
  const int draft_root = plan.separate_draft() ? layout.draft_leader : layout.target_leader;
  MPI_Bcast(draft.data(), int(draft.size()), MPI_DOUBLE, draft_root, MPI_COMM_WORLD);
  costs.verify_s = verify;
  unpack_draft(draft, costs);
  return costs;
}

std::string describe_costs(const LookaheadCosts& costs) {
  std::string text = "verify b(K+1) rows, by K:";
  char item[96];
  for (size_t K = 1; K < costs.verify_s.size(); ++K) {
    std::snprintf(item, sizeof item, "%s %zu: %.1f", K > 1 ? "," : "", K, costs.verify_s[K] * 1e3);
    text += item;
  }
  if (!costs.verify_s.empty() && costs.verify_s[0] > 0) {
    std::snprintf(item, sizeof item, " ms; AR's step of b rows %.1f", costs.verify_s[0] * 1e3);
    text += item;
  }
  std::snprintf(item, sizeof item,
                " ms; draft step %.1f ms; branch step over n rows, n: ", costs.draft_step_s * 1e3);
  return text + item + costs.branch.describe() + " ms";
}

namespace {

bool acceptance_given(const RunPlan& plan) {
  return plan.saguaro.alpha >= 0 || plan.decode.outcomes.synthetic;
}

// The flags' acceptance and r where given (--fanout-r: one law for both conditions), the
// synthetic outcomes' where drawn (their r and r_all), else the defaults of LookaheadPrior.
LookaheadPrior plan_prior(const RunPlan& plan) {
  LookaheadPrior prior;
  const OutcomeModel& outcomes = plan.decode.outcomes;
  if (plan.saguaro.alpha >= 0)
    prior.acceptance = plan.saguaro.alpha;
  else if (outcomes.synthetic)
    prior.acceptance = outcomes.alpha;
  if (plan.saguaro.r >= 0) {
    prior.r = prior.r_all = plan.saguaro.r;
  } else if (outcomes.synthetic) {
    prior.r = outcomes.r;
    prior.r_all = outcomes.r_all;
  }
  prior.fallback = plan.saguaro.fallback;
  return prior;
}

// Every rank computes the same choice from the same broadcast numbers.
LookaheadChoice choose(const RunPlan& plan, const LookaheadCosts& costs,
                       const LookaheadPrior& prior) {
  return plan.mode == Mode::SSD
             ? choose_ssd_lookahead(costs, prior, plan.saguaro.budget_setting, kMaxAutoBudget)
             : choose_sd_lookahead(costs, prior);
}

}  // namespace

AutoLookahead choose_lookahead(const RunPlan& plan, Launch& launch, int context, int max_k) {
  const double start = now_seconds();
  const LookaheadPrior prior = plan_prior(plan);
  // Each range is timed whole, every K in the same rounds (time_verifications), rather than
  // only the K it adds: a slow spell of the host then lands on every K alike. Every rank
  // takes the same choice from the same broadcast costs, so all extend together.
  LookaheadCosts costs;
  LookaheadChoice choice;
  for (int range = std::min(max_k, kFirstAutoLookahead); range > 0;
       range = next_auto_lookahead_range(choice.lookahead, range, max_k)) {
    // Verifications of up to b(range + 1) rows, timed and then run on batch-invariant kernels.
    if (launch.is_target())
      launch.backend().keep_batch_invariant_up_to(std::max(1, plan.decode.batch_size) *
                                                  (range + 1));
    costs = measure_lookahead_costs(plan, launch, context, range);
    choice = choose(plan, costs, prior);
  }
  const double seconds = now_seconds() - start;
  char head[160];
  std::snprintf(head, sizeof head,
                "auto: K = %d of the predicted rates at acceptance %.2f%s: ", choice.lookahead,
                prior.acceptance, acceptance_given(plan) ? "" : " (prior)");
  char took[64];
  std::snprintf(took, sizeof took, " (context %d, measured in %.1f s)", context, seconds);
  return {choice.lookahead, head + describe_choice(choice), describe_costs(costs) + took, costs,
          speculation_loses_to_ar(choice)};
}

namespace {

// The calibration times each side beside the other running flat out: on the Qwen pair it
// measured the verification at 200-228 ms in launches whose rounds then verified in 150-180.
// The calibration keeps the shape over K and n; the warm-up's own rounds, at the K they ran,
// set the level.
struct ScaledCosts {
  LookaheadCosts costs;
  double verify_scale = 1.0, draft_scale = 1.0;
};
ScaledCosts scale_to_warm_up(const LookaheadCosts& calibrated, const RepTotals& warm, int K) {
  ScaledCosts out{calibrated};
  if (warm.decode_steps > 0 && warm.verify_s > 0 && calibrated.verify_s.at(size_t(K)) > 0) {
    out.verify_scale = warm.verify_s / double(warm.decode_steps) / calibrated.verify_s[size_t(K)];
    for (double& v : out.costs.verify_s) v *= out.verify_scale;
  }
  if (warm.cache_builds > 0) {
    // A build is the glue step (one draft step) and K branch steps over its rows.
    const double rows = warm.branch_rows / double(warm.cache_builds);
    const double predicted = calibrated.draft_step_s + K * calibrated.branch.seconds(rows);
    if (predicted > 0) {
      out.draft_scale = warm.cache_build_s / double(warm.cache_builds) / predicted;
      out.costs.draft_step_s *= out.draft_scale;
      out.costs.branch.scale(out.draft_scale);
    }
  }
  return out;
}

}  // namespace

std::optional<RunSetup> refine_lookahead(const RunPlan& plan, const RunSetup& setup,
                                         const RepTotals& warm_up) {
  if (!plan.lookahead_auto || acceptance_given(plan) || warm_up.draft_rounds < kMinAcceptanceRounds)
    return std::nullopt;
  LookaheadPrior prior = plan_prior(plan);
  const double prior_acceptance = prior.acceptance;
  prior.acceptance = measured_acceptance(warm_up, prior.acceptance);
  const ScaledCosts scaled =
      scale_to_warm_up(setup.lookahead_measured, warm_up, setup.decode.lookahead);
  const LookaheadChoice choice = choose(plan, scaled.costs, prior);
  char head[320];
  std::snprintf(head, sizeof head,
                "auto: K = %d of the predicted rates at acceptance %.2f, measured by the "
                "warm-up's %lld sequence-rounds at K = %d (chosen at the prior %.2f), the "
                "calibration's verification times x %.2f and draft times x %.2f to match its "
                "rounds: ",
                choice.lookahead, prior.acceptance, (long long)warm_up.draft_rounds,
                setup.decode.lookahead, prior_acceptance, scaled.verify_scale, scaled.draft_scale);
  RunSetup refined = setup;
  refined.decode.lookahead = choice.lookahead;
  refined.lookahead_choice = head + describe_choice(choice);
  refined.lookahead_warning = speculation_loses_to_ar(choice);
  return refined;
}

}  // namespace ssd
