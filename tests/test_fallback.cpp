// SAGUARO's speedup model and fallback (paper §3.2, §4.3, Appendix A.1 and A.4): Theorem 7 and
// Corollary 16 on hand-computed numbers, Theorem 17's b* (the two speedups of its proof meet
// there, primary better below, backup above), Equation (1), Corollary 9's sandwich, the
// --fallback policy, and the random / n-gram backup speculators.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/errors.h"
#include "ssd/backup_speculator.h"
#include "ssd/fallback.h"

namespace ssd {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Speedup, Theorem7ByHand) {
  const SpeedupInputs in{0.8, 4.0, 2.0, 0.5, 0.1};
  // (0.8*4 + 0.2*2) / (0.8*max(1, 0.5) + 0.2*(1 + 0.1)) = 3.6 / 1.02
  EXPECT_NEAR(ssd_speedup_batch(in, 1), 3.6 / 1.02, 1e-12);
  SpeedupInputs slow = in;
  slow.t_jit = 1.5;  // drafting outlasts verification: a hit costs T_jit
  EXPECT_NEAR(ssd_speedup_batch(slow, 1), 3.6 / (0.8 * 1.5 + 0.2 * 1.1), 1e-12);
  // Corollary 8: primary = backup = the SD draft is at least SD's E / (1 + T).
  const SpeedupInputs same{0.6, 3.0, 3.0, 0.4, 0.4};
  EXPECT_GT(ssd_speedup_batch(same, 1), 3.0 / 1.4);
}

TEST(Speedup, Corollary16ByHand) {
  const SpeedupInputs in{0.8, 4.0, 2.0, 0.5, 0.1};
  // p^3 = 0.512: 3.6 / (0.512 + 0.488 * 1.1)
  EXPECT_NEAR(ssd_speedup_batch(in, 3), 3.6 / (0.512 + 0.488 * 1.1), 1e-12);
  // b -> infinity: every round waits for the backup, 3.6 / (1 + T_b).
  EXPECT_NEAR(ssd_speedup_batch(in, 2000), 3.6 / 1.1, 1e-12);
  for (int b = 1; b < 50; ++b) EXPECT_LE(ssd_speedup_batch(in, b + 1), ssd_speedup_batch(in, b));
}

// tests/reference/speedup_cases.json: the table analysis/ is checked against too (its
// metrics.py), so the run-time policy and the offline analysis agree on the paper's formulas.
TEST(Speedup, SharedTableWithAnalysis) {
  std::ifstream in(std::string(SSD_SOURCE_DIR) + "/tests/reference/speedup_cases.json");
  ASSERT_TRUE(in) << "tests/reference/speedup_cases.json";
  const nlohmann::json table = nlohmann::json::parse(in);
  int thresholds = 0;
  for (const auto& c : table.at("cases")) {
    const SpeedupInputs inputs{c.at("p_hit"), c.at("e_hit"), c.at("e_miss"), c.at("t_jit"),
                               c.at("t_b")};
    const int b = c.at("b");
    EXPECT_NEAR(ssd_speedup_batch(inputs, b), double(c.at("corollary16")), 1e-12) << c.dump();
    EXPECT_NEAR(speedup_primary_fallback(inputs, b), double(c.at("slow_fallback")), 1e-12)
        << c.dump();
    if (!c.contains("b_star")) continue;
    // Theorem 17: auto drafts misses with the primary below b*, with the backup above it.
    const double b_star = c.at("b_star");
    const FallbackPolicy automatic(FallbackMode::Auto);
    for (int batch = 1; batch <= 200; ++batch) {
      if (std::abs(batch - b_star) < 1e-9) continue;
      EXPECT_EQ(automatic.choose(batch, inputs, FallbackPolicy::kMinRounds),
                batch < b_star ? FallbackKind::Primary : FallbackKind::Backup)
          << c.dump() << " batch " << batch;
    }
    ++thresholds;
  }
  EXPECT_GT(thresholds, 10);
}

TEST(FallbackPolicy, Modes) {
  const SpeedupInputs in{0.9, 6.0, 1.0, 0.2, 0.0};  // b* = 5.75
  EXPECT_EQ(FallbackPolicy(FallbackMode::Primary).choose(100, in, 1000), FallbackKind::Primary);
  EXPECT_EQ(FallbackPolicy(FallbackMode::Backup).choose(1, in, 0), FallbackKind::Backup);
  const FallbackPolicy automatic(FallbackMode::Auto);
  for (int b = 1; b <= 12; ++b) {
    EXPECT_EQ(automatic.choose(b, in, 100),
              b < 5.753 ? FallbackKind::Primary : FallbackKind::Backup)
        << b;
    EXPECT_EQ(automatic.choose(b, in, FallbackPolicy::kMinRounds - 1), FallbackKind::Primary);
  }
  // Where no threshold exists the policy still takes the better one at this batch size.
  const SpeedupInputs reversed{0.5, 2.0, 4.0, 0.2, 1.0};
  EXPECT_EQ(automatic.choose(1, reversed, 100), FallbackKind::Backup);
  EXPECT_EQ(automatic.choose(3, reversed, 100), FallbackKind::Primary);
  // A mode is an enum now (the CLI rejects other names); its names are the flag's values.
  EXPECT_STREQ(fallback_mode_name(FallbackMode::Primary), "primary");
  EXPECT_STREQ(fallback_mode_name(FallbackMode::Backup), "backup");
  EXPECT_STREQ(fallback_mode_name(FallbackMode::Auto), "auto");
}

TEST(RandomBackup, TokensInRangeUniformRowsAndCounter) {
  uint64_t counter = 5;
  const BackupProposal p = random_backup(16, 100, 42, 7, counter, true);
  EXPECT_EQ(counter, 21u);
  ASSERT_EQ(p.tokens.size(), 16u);
  for (int32_t t : p.tokens) EXPECT_TRUE(t >= 0 && t < 100);
  ASSERT_EQ(p.probs.size(), 1600u);
  for (float x : p.probs) EXPECT_FLOAT_EQ(x, 0.01f);
  uint64_t again = 5;  // a pure function of (seed, stream, counter)
  EXPECT_EQ(random_backup(16, 100, 42, 7, again, false).tokens, p.tokens);
  EXPECT_TRUE(random_backup(16, 100, 42, 7, again, false).probs.empty());
  // Roughly uniform: every one of 10 tokens appears about 1000 times in 10000 draws.
  std::vector<int> seen(10, 0);
  uint64_t c = 0;
  for (int32_t t : random_backup(10000, 10, 1, 2, c, false).tokens) ++seen[t];
  for (int n : seen) EXPECT_NEAR(n, 1000, 150);
}

std::vector<int32_t> ngram(const std::vector<int32_t>& tokens, int K) {
  return ngram_backup(tokens, K, 20, 3, false).tokens;
}

TEST(NgramBackup, ContinuesARepeatedPattern) {
  EXPECT_EQ(ngram({1, 2, 3, 4, 1, 2}, 6), (std::vector<int32_t>{3, 4, 1, 2, 3, 4}));
  // The longest suffix wins over a more recent shorter one: "5 1 2" -> 9, not "1 2" -> 8.
  EXPECT_EQ(ngram({5, 1, 2, 9, 7, 1, 2, 8, 5, 1, 2}, 1), std::vector<int32_t>{9});
  // Among equal lengths the most recent occurrence wins.
  EXPECT_EQ(ngram({1, 2, 7, 1, 2, 8, 1, 2}, 2), (std::vector<int32_t>{8, 1}));
  EXPECT_EQ(ngram({4, 4}, 3), (std::vector<int32_t>{4, 4, 4}));
  // No match: repeat the last token; nothing at all: token 0.
  EXPECT_EQ(ngram({1, 2, 3}, 3), (std::vector<int32_t>{3, 3, 3}));
  EXPECT_EQ(ngram({9}, 2), (std::vector<int32_t>{9, 9}));
  EXPECT_EQ(ngram({}, 2), (std::vector<int32_t>{0, 0}));
  EXPECT_TRUE(ngram({1, 2, 1}, 0).empty());
}

TEST(NgramBackup, OneHotRows) {
  const BackupProposal p = ngram_backup({1, 2, 3, 4, 1, 2}, 4, 10, 3, true);
  ASSERT_EQ(p.probs.size(), 40u);
  for (int i = 0; i < 4; ++i)
    for (int v = 0; v < 10; ++v)
      EXPECT_EQ(p.probs[i * 10 + v], v == p.tokens[i] ? 1.0f : 0.0f) << i << " " << v;
}

}  // namespace
}  // namespace ssd
