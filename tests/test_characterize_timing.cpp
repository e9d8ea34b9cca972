// characterize's timing: its timer of several calls (characterize/timing.cpp), where every call
// gets its own batches and the batches of the calls take turns, so that a host's drift during
// the measurement moves every call alike; and its check that the passes' cost rises with their
// rows (characterize/steadiness.cpp), which flags a host disturbed while timing.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "characterize/parts.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/mpi_environment.h"  // MPI for the code under test

namespace ssd {
namespace {

// Busy for `seconds` (a sleep could take much longer than asked on a loaded host).
void spin(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}

// The runs of one letter in `log`, as (letter, length) pairs.
std::vector<std::pair<char, int>> runs_of(const std::string& log) {
  std::vector<std::pair<char, int>> runs;
  for (char c : log) {
    if (runs.empty() || runs.back().first != c)
      runs.push_back({c, 1});
    else
      ++runs.back().second;
  }
  return runs;
}

TEST(CharacterizeTiming, BatchesOfTheCallsTakeTurns) {
  CpuBackend backend(1);
  std::string log;
  const std::vector<std::function<void()>> calls = {[&] {
                                                      log += 'a';
                                                      spin(200e-6);
                                                    },
                                                    [&] {
                                                      log += 'b';
                                                      spin(600e-6);
                                                    }};
  const double min_time = 0.03;
  const std::vector<Timing> t = time_calls_interleaved(backend, calls, min_time);
  ASSERT_EQ(t.size(), 2u);
  // Each call's warm-up and the call that sizes its batches, then 5 rounds of a batch of a, then
  // a batch of b.
  ASSERT_GE(log.size(), 4u);
  EXPECT_EQ(log.substr(0, 4), "aabb");
  const auto runs = runs_of(log.substr(4));
  ASSERT_EQ(runs.size(), 10u) << log;
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].first, i % 2 == 0 ? 'a' : 'b') << log;
    EXPECT_EQ(runs[i].second, runs[i % 2].second) << "batch sizes differ: " << log;
  }
  EXPECT_EQ(t[0].calls, 5 * runs[0].second);
  EXPECT_EQ(t[1].calls, 5 * runs[1].second);
  for (const Timing& one : t) EXPECT_LE(one.best_s, one.median_s);
  EXPECT_GE(t[0].best_s, 200e-6);
  EXPECT_GE(t[1].best_s, 600e-6);
  // Each timing belongs to its own call: the best batches, not the medians, which a loaded host
  // (CI's tests in parallel on 2 cores) can push above the longer call's for 3 of 5 batches.
  EXPECT_GT(t[1].best_s, t[0].best_s);
}

TEST(CharacterizeTiming, OneCallIsTimeCalls) {
  CpuBackend backend(1);
  int calls = 0;
  const Timing t = time_calls(
      backend,
      [&] {
        ++calls;
        spin(100e-6);
      },
      0.01);
  EXPECT_EQ(calls, 2 + t.calls);  // warm-up and sizing call, then the timed batches
  EXPECT_EQ(t.calls % 5, 0);
  EXPECT_GE(t.best_s, 100e-6);
}

ForwardResult pass(const char* model, const char* kind, int rows, double ms, bool beside = false,
                   int context = 128) {
  return {.rank = model[0] == 't' ? 0 : 1,
          .model = model,
          .kind = kind,
          .rows = rows,
          .sequences = 1,
          .calls = 10,
          .context = context,
          .seconds = ms * 1e-3,
          .best_seconds = ms * 1e-3,
          .concurrent = beside};
}

TEST(CharacterizeSteadiness, RisingCurvesAndSmallDipsPass) {
  // Zen 5 results/characterize.txt (4ca099d): rows 4 and the verification 0.5-1.8% under rows 3.
  const std::vector<ForwardResult> steady = {
      pass("target", "ar", 1, 5.007),
      pass("target", "rows", 2, 5.894),
      pass("target", "rows", 3, 6.054),
      pass("target", "rows", 4, 6.026),
      pass("target", "verify", 5, 5.946),
      pass("target", "rows", 16, 17.345),
      pass("target", "rows", 16, 16.71, false, 32),  // another context: not the same curve
      pass("draft", "draft", 1, 0.393),
      pass("draft", "glue", 5, 0.719),
      pass("draft", "branch", 5, 0.733),
      pass("draft", "branch", 40, 5.435),
      pass("host", "argmax", 1, 0.004),
      pass("sd", "verify", 5, 6.32)};
  EXPECT_TRUE(unsteady_passes(steady).empty());
}

TEST(CharacterizeSteadiness, FlagsAPassOfMoreRowsClearlyBelowOneOfFewer) {
  // A disturbed Zen 4 run: 2 rows timed while the host was busy, 3 and 4 after.
  const std::vector<ForwardResult> disturbed = {
      pass("target", "ar", 1, 7.8),
      pass("target", "rows", 2, 13.197),
      pass("target", "rows", 3, 10.32),
      pass("target", "rows", 4, 12.2),
      pass("target", "verify", 5, 13.461),
      pass("target", "ar", 1, 8.15, true),
      pass("target", "verify", 5, 13.18, true),  // beside: a curve of its own, steady
      pass("draft", "branch", 5, 1.6),
      pass("draft", "branch", 10, 1.4)};
  const std::vector<std::string> flagged = unsteady_passes(disturbed);
  ASSERT_EQ(flagged.size(), 3u);
  EXPECT_EQ(flagged[0], "target alone rows 3 rows 10.320 ms < rows 2 rows 13.197 ms");
  EXPECT_EQ(flagged[1], "target alone rows 4 rows 12.200 ms < rows 2 rows 13.197 ms");
  EXPECT_EQ(flagged[2], "draft alone branch 10 rows 1.400 ms < branch 5 rows 1.600 ms");
}

TEST(CharacterizeSteadiness, FlagsSsdRoundsFarSlowerThanTheirPassesBeside) {
  // The pair's characterize file of bdcc43e: its rounds verified at 199.6 ms beside the build and
  // built in 238.6, the passes beside the other model's took 131.3 (the verification) and
  // 36.5 + 4 x 36.3 (the glue step, K = 4 branch steps of 5 rows).
  auto round = [](const char* kind, double ms) {
    ForwardResult r = pass("target", kind, 5, ms, true);
    r.model = "ssd";
    return r;
  };
  const std::vector<ForwardResult> passes = {
      pass("target", "verify", 5, 117.035), pass("target", "verify", 5, 131.345, true),
      pass("draft", "glue", 5, 36.487, true), pass("draft", "branch", 5, 36.269, true),
      pass("draft", "branch", 10, 54.273, true)};
  auto flags = [&](std::vector<ForwardResult> rounds) {
    rounds.insert(rounds.begin(), passes.begin(), passes.end());
    return unsteady_passes(rounds);
  };
  const std::vector<std::string> flagged =
      flags({round("verify", 199.588), round("build", 238.637)});
  ASSERT_EQ(flagged.size(), 2u);
  EXPECT_EQ(flagged[0],
            "ssd beside verify 5 rows 199.588 ms > 1.20 x target verify beside 131.345 ms");
  EXPECT_EQ(flagged[1],
            "ssd beside build 5 rows 238.637 ms > 1.20 x draft glue + K branch beside 181.563 ms");
  // Within 20% of the passes beside is not flagged, however far above the passes alone.
  EXPECT_TRUE(flags({round("verify", 157.0), round("build", 217.0)}).empty());
  // Today's runs: 128.3 against 124.2, a build of 199.5 against 266.2.
  EXPECT_TRUE(flags({round("verify", 128.346), round("build", 199.457)}).empty());
}

}  // namespace
}  // namespace ssd
