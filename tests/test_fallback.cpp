// SAGUARO's speedup model and fallback (paper §3.2, §4.3, Appendix A.1 and A.4): Theorem 7 and
// Corollary 16 on hand-computed numbers, Theorem 17's b* (the two speedups of its proof meet
// there, primary better below, backup above), Equation (1), Corollary 9's sandwich, the
// --fallback policy, and the random / n-gram backup speculators.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "model/errors.h"
#include "ssd/backup_speculator.h"
#include "ssd/fallback.h"

namespace ssd {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Speedup, Theorem7ByHand) {
  const SpeedupInputs in{0.8, 4.0, 2.0, 0.5, 0.1};
  // (0.8*4 + 0.2*2) / (0.8*max(1, 0.5) + 0.2*(1 + 0.1)) = 3.6 / 1.02
  EXPECT_NEAR(ssd_speedup(in), 3.6 / 1.02, 1e-12);
  SpeedupInputs slow = in;
  slow.t_p = 1.5;  // drafting outlasts verification: a hit costs T_p
  EXPECT_NEAR(ssd_speedup(slow), 3.6 / (0.8 * 1.5 + 0.2 * 1.1), 1e-12);
  // Corollary 8: primary = backup = the SD draft is at least SD's E / (1 + T).
  const SpeedupInputs same{0.6, 3.0, 3.0, 0.4, 0.4};
  EXPECT_GT(ssd_speedup(same), 3.0 / 1.4);
}

TEST(Speedup, Corollary16ByHand) {
  const SpeedupInputs in{0.8, 4.0, 2.0, 0.5, 0.1};
  EXPECT_NEAR(ssd_speedup_batch(in, 1), ssd_speedup(in), 1e-15);
  // p^3 = 0.512: 3.6 / (0.512 + 0.488 * 1.1)
  EXPECT_NEAR(ssd_speedup_batch(in, 3), 3.6 / (0.512 + 0.488 * 1.1), 1e-12);
  // b -> infinity: every round waits for the backup, 3.6 / (1 + T_b).
  EXPECT_NEAR(ssd_speedup_batch(in, 2000), 3.6 / 1.1, 1e-12);
  for (int b = 1; b < 50; ++b) EXPECT_LE(ssd_speedup_batch(in, b + 1), ssd_speedup_batch(in, b));
}

// The two speedups of Theorem 17's proof at real-valued b, with general T_p, T_b.
double primary_at(const SpeedupInputs& in, double b) {
  const double x = std::pow(in.p_hit, b), h = std::max(1.0, in.t_p);
  return in.e_hit / (x * h + (1 - x) * (1 + in.t_p));
}
double backup_at(const SpeedupInputs& in, double b) {
  const double x = std::pow(in.p_hit, b), h = std::max(1.0, in.t_p);
  const double n = in.p_hit * in.e_hit + (1 - in.p_hit) * in.e_miss;
  return n / (x * h + (1 - x) * (1 + in.t_b));
}

void expect_threshold(const SpeedupInputs& in) {
  const double b_star = critical_batch_size(in);
  ASSERT_TRUE(std::isfinite(b_star) && b_star > 0);
  EXPECT_NEAR(primary_at(in, b_star), backup_at(in, b_star), 1e-9);
  for (int b = 1; b < 200; ++b) {
    if (b < b_star) {
      EXPECT_GT(speedup_primary_fallback(in, b), speedup_backup_fallback(in, b)) << b;
    } else {
      EXPECT_LE(speedup_primary_fallback(in, b), speedup_backup_fallback(in, b)) << b;
    }
  }
}

TEST(CriticalBatchSize, Theorem17Formula) {
  const SpeedupInputs in{0.9, 6.0, 1.0, 0.2, 0.0};
  const double n = 0.9 * 6.0 + 0.1 * 1.0;
  const double paper = std::log(1 + 1 / 0.2 - 6.0 / (0.2 * n)) / std::log(0.9);
  EXPECT_NEAR(critical_batch_size(in), paper, 1e-12);
  EXPECT_NEAR(paper, 5.753, 1e-3);
  expect_threshold(in);
  expect_threshold({0.97, 5.0, 1.2, 0.4, 0.0});
  expect_threshold({0.7, 3.0, 1.0, 0.8, 0.0});
}

TEST(CriticalBatchSize, GeneralisesToSlowBackupsAndSlowDrafts) {
  expect_threshold({0.9, 6.0, 1.0, 0.3, 0.02});  // T_b > 0
  expect_threshold({0.95, 6.0, 1.0, 1.4, 0.1});  // T_p >= 1: a hit costs T_p
}

TEST(CriticalBatchSize, EdgeCases) {
  // No misses at all: the fallback never runs.
  EXPECT_EQ(critical_batch_size({1.0, 4.0, 1.0, 0.5, 0.0}), kInf);
  // Backup as productive as the primary and free: x* = 1, backup at every b.
  EXPECT_EQ(critical_batch_size({0.8, 4.0, 4.0, 0.5, 0.0}), 0.0);
  EXPECT_EQ(critical_batch_size({0.8, 4.0, 5.0, 0.5, 0.0}), 0.0);
  // x* <= 0: E_hit / (1 + T_p) = 2.67 beats the backup's 2.5 even when every round misses.
  const SpeedupInputs primary_always{0.5, 4.0, 1.0, 0.5, 0.0};
  EXPECT_EQ(critical_batch_size(primary_always), kInf);
  for (int b : {1, 2, 10, 1000})
    EXPECT_GT(speedup_primary_fallback(primary_always, b),
              speedup_backup_fallback(primary_always, b));
  // Every round misses (p = 0): whichever wins at x = 0.
  EXPECT_EQ(critical_batch_size({0.0, 4.0, 1.0, 0.5, 0.0}), kInf);  // 4/1.5 > 1
  EXPECT_EQ(critical_batch_size({0.0, 4.0, 3.0, 0.5, 0.0}), 0.0);   // 4/1.5 < 3
  // A free primary (T_p = T_b = 0): primary iff it yields more.
  EXPECT_EQ(critical_batch_size({0.5, 4.0, 1.0, 0.0, 0.0}), kInf);
  // A "backup" that is slower per token than the primary: the preference flips the other way
  // round with b (backup at b = 1, primary at b = 3), so no threshold exists.
  const SpeedupInputs reversed{0.5, 2.0, 4.0, 0.2, 1.0};
  EXPECT_TRUE(std::isnan(critical_batch_size(reversed)));
  EXPECT_LT(speedup_primary_fallback(reversed, 1), speedup_backup_fallback(reversed, 1));
  EXPECT_GT(speedup_primary_fallback(reversed, 3), speedup_backup_fallback(reversed, 3));
}

TEST(Sandwich, Corollary9) {
  const auto [lower, upper] = speedup_sandwich(0.5, 4.0, 3.0, 0.8);
  EXPECT_NEAR(upper, 1.5 * 4.0 / 3.0, 1e-12);
  EXPECT_NEAR(lower, 1.5 * 4.0 / 3.0 * 0.8, 1e-12);
  // The actual ratio with T_p < 1, T_b = 0 and 1 <= E_miss <= E_hit lies in between.
  for (double e_miss : {1.0, 2.0, 4.0}) {
    const double ratio = ssd_speedup({0.8, 4.0, e_miss, 0.5, 0.0}) / (3.0 / 1.5);
    EXPECT_GE(ratio, lower - 1e-12);
    EXPECT_LE(ratio, upper + 1e-12);
  }
}

TEST(StationaryHitRate, Equation1) {
  EXPECT_NEAR(stationary_hit_rate(0.9, 0.3), 0.3 / 0.4, 1e-12);
  EXPECT_NEAR(stationary_hit_rate(0.4, 0.4), 0.4, 1e-12);
  EXPECT_EQ(stationary_hit_rate(1.0, 0.0), 1.0);
  // The recurrence of Appendix A.1.2 converges to it.
  const double pp = 0.7, pb = 0.2;
  double p = pp;
  for (int t = 0; t < 200; ++t) p = p * pp + (1 - p) * pb;
  EXPECT_NEAR(stationary_hit_rate(pp, pb), p, 1e-12);
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
