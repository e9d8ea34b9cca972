// The verification rule of speculative decoding is lossless: whatever the draft distribution q,
// the tokens it emits are distributed as the target's p. Checked by simulation on explicit small
// distributions with a chi-square goodness-of-fit test (first emitted token, and the first two
// across rounds), with verify_biased_for_tests as the negative control that the test must
// reject; plus the greedy rule's accept/bonus logic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "ssd/sampling.h"
#include "ssd/verification.h"

namespace ssd {
namespace {

using Row = std::vector<float>;
using Rows = std::vector<Row>;

// --- chi-square survival function: Q(df/2, x/2), the regularized upper incomplete gamma ---

double upper_gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_prefactor = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {  // series for P(a, x), then Q = 1 - P
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 100000; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-16) break;
    }
    return std::max(0.0, 1.0 - sum * std::exp(log_prefactor));
  }
  // Continued fraction for Q(a, x) (modified Lentz).
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-16) break;
  }
  return std::exp(log_prefactor) * h;
}

double chi_square_survival(double statistic, int df) {
  return upper_gamma_q(0.5 * df, 0.5 * statistic);
}

// Goodness of fit of `observed` counts to probabilities `expected_p`. Cells with expected count
// below 5 are merged (smallest first); an observation in a cell of probability 0 gives p = 0.
double chi_square_p_value(const std::vector<int64_t>& observed,
                          const std::vector<double>& expected_p, std::string* detail = nullptr) {
  int64_t n = 0;
  for (int64_t o : observed) n += o;
  struct Cell {
    double expected;
    int64_t observed;
  };
  std::vector<Cell> cells;
  for (size_t i = 0; i < observed.size(); ++i) {
    if (expected_p[i] <= 0) {
      if (observed[i] > 0) {
        if (detail) *detail = "impossible cell " + std::to_string(i) + " observed";
        return 0.0;
      }
      continue;
    }
    cells.push_back({expected_p[i] * double(n), observed[i]});
  }
  std::sort(cells.begin(), cells.end(), [](const Cell& a, const Cell& b) {
    return a.expected > b.expected;  // smallest at the back
  });
  while (cells.size() > 1 && cells.back().expected < 5) {
    Cell last = cells.back();
    cells.pop_back();
    cells.back().expected += last.expected;
    cells.back().observed += last.observed;
    std::sort(cells.begin(), cells.end(),
              [](const Cell& a, const Cell& b) { return a.expected > b.expected; });
  }
  if (cells.size() < 2) return 1.0;
  double statistic = 0;
  for (const Cell& c : cells)
    statistic += (c.observed - c.expected) * (c.observed - c.expected) / c.expected;
  const int df = int(cells.size()) - 1;
  if (detail) *detail = "chi2 " + std::to_string(statistic) + " df " + std::to_string(df);
  return chi_square_survival(statistic, df);
}

TEST(ChiSquare, SurvivalFunctionKnownValues) {
  // Reference values (scipy.stats.chi2.sf).
  EXPECT_NEAR(chi_square_survival(3.841458820694124, 1), 0.05, 1e-9);
  EXPECT_NEAR(chi_square_survival(2.0, 2), std::exp(-1.0), 1e-12);
  EXPECT_NEAR(chi_square_survival(10.0, 4), 0.04042768199451279, 1e-9);
  EXPECT_NEAR(chi_square_survival(30.0, 10), 0.000856641210775301, 1e-10);
  EXPECT_NEAR(chi_square_survival(100.0, 63), 0.002077236552784822, 1e-10);
  EXPECT_NEAR(chi_square_survival(0.5, 7), 0.9994464813904249, 1e-10);
  EXPECT_DOUBLE_EQ(chi_square_survival(0.0, 3), 1.0);
}

// --- the synthetic setting: fixed target rows P[j] and draft rows Q[j] per position j ---

struct Case {
  std::string name;
  int K;
  Rows P;  // K + 2 rows: positions 0..K+1 (a second round starting at position 1 needs K+1)
  Rows Q;  // K + 1 rows
};

// gtest prints parameters in test names and failure messages: the case's name is enough.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

Row normalized(Row r) {
  double total = 0;
  for (float v : r) total += v;
  for (float& v : r) v = float(v / total);
  return r;
}

// A random distribution over `vocab` tokens; tokens in `zeros` get probability 0.
Row random_row(std::mt19937_64& rng, int vocab, const std::vector<int>& zeros = {}) {
  std::exponential_distribution<double> e(1.0);
  Row r(vocab);
  for (int t = 0; t < vocab; ++t) r[t] = float(0.05 + e(rng));
  for (int z : zeros) r[z] = 0;
  return normalized(r);
}

Row one_hot(int vocab, int token) {
  Row r(vocab, 0.0f);
  r[token] = 1;
  return r;
}

std::vector<Case> cases() {
  std::mt19937_64 rng(20260101);
  std::vector<Case> out;
  auto rows = [&](int n, int vocab, const std::vector<int>& zeros = {}) {
    Rows r;
    for (int i = 0; i < n; ++i) r.push_back(random_row(rng, vocab, zeros));
    return r;
  };
  out.push_back({"generic_v8_k1", 1, rows(3, 8), rows(2, 8)});
  // The draft never proposes tokens 0 and 3, which the target likes: only the residual emits them.
  out.push_back({"q_zero_where_p_positive_v6_k2", 2, rows(4, 6), rows(3, 6, {0, 3})});
  // The target never emits tokens 1 and 4, which the draft proposes: they must always be rejected.
  out.push_back({"p_zero_where_q_positive_v6_k3", 3, rows(5, 6, {1, 4}), rows(4, 6)});
  {
    Rows p = rows(4, 5);
    out.push_back({"p_equals_q_v5_k2", 2, p, Rows(p.begin(), p.begin() + 3)});
  }
  out.push_back({"q_one_hot_greedy_draft_v8_k3",
                 3,
                 rows(5, 8),
                 {one_hot(8, 2), one_hot(8, 5), one_hot(8, 0), one_hot(8, 7)}});
  // Disjoint supports: every draft token is rejected.
  out.push_back({"disjoint_supports_v4_k2", 2, rows(4, 4, {2, 3}), rows(3, 4, {0, 1})});
  out.push_back({"p_one_hot_greedy_target_v7_k2",
                 2,
                 {one_hot(7, 3), one_hot(7, 1), one_hot(7, 6), one_hot(7, 3)},
                 rows(3, 7)});
  return out;
}

using Rule = Verdict (*)(const float*, const float*, const int32_t*, int, int, UniformStream&);

Rows slice(const Rows& r, int begin, int count) {
  return Rows(r.begin() + begin, r.begin() + begin + count);
}

std::vector<float> flat(const Rows& r) {
  std::vector<float> out;
  for (const Row& row : r) out.insert(out.end(), row.begin(), row.end());
  return out;
}

// One speculation round starting at position `pos`: K draft tokens from Q[pos..pos+K), verified
// against P[pos..pos+K]. The emitted tokens are draft[0..accepted) and then the bonus.
struct Round {
  std::vector<float> p, q;
  Rows q_rows;
  int K, vocab;
  Round(const Case& c, int pos)
      : p(flat(slice(c.P, pos, c.K + 1))),
        q(flat(slice(c.Q, pos, c.K))),
        q_rows(slice(c.Q, pos, c.K)),
        K(c.K),
        vocab(int(c.P[0].size())) {}
  Verdict run(Rule rule, UniformStream& u, std::vector<int32_t>& draft) const {
    for (int i = 0; i < K; ++i) draft[i] = sample_from(q_rows[i], u.next());
    return rule(p.data(), q.data(), draft.data(), K, vocab, u);
  }
};

int32_t emitted(const Verdict& v, const std::vector<int32_t>& draft, int i) {
  return i < v.accepted ? draft[i] : v.bonus;
}

struct Sampled {
  std::vector<int64_t> first;           // [vocab]
  std::vector<int64_t> pair;            // [vocab * vocab]: (t1, t2)
  int64_t first_position_accepted = 0;  // rounds at position 0 that accepted draft[0]
};

// Simulates `trials` independent decodes of two tokens: a round at position 0, and when it
// emits only one token (k = 0), a second round at position 1.
Sampled simulate(const Case& c, Rule rule, int trials, uint64_t seed) {
  const int vocab = int(c.P[0].size());
  const Round first(c, 0), second(c, 1);
  Sampled s{std::vector<int64_t>(vocab), std::vector<int64_t>(size_t(vocab) * vocab), 0};
  std::vector<int32_t> draft(c.K);
  UniformStream u{seed, 7, 0};
  for (int t = 0; t < trials; ++t) {
    const Verdict v = first.run(rule, u, draft);
    const int32_t t1 = emitted(v, draft, 0);
    int32_t t2;
    if (v.accepted > 0) {
      ++s.first_position_accepted;
      t2 = emitted(v, draft, 1);
    } else {
      t2 = emitted(second.run(rule, u, draft), draft, 0);
    }
    ++s.first[t1];
    ++s.pair[size_t(t1) * vocab + t2];
  }
  return s;
}

constexpr int kTrials = 200000;

std::vector<double> as_double(const Row& r) {
  return std::vector<double>(r.begin(), r.end());
}

std::vector<double> product(const Row& a, const Row& b) {
  std::vector<double> out;
  for (float x : a)
    for (float y : b) out.push_back(double(x) * y);
  return out;
}

class Lossless : public ::testing::TestWithParam<Case> {};

TEST_P(Lossless, EmittedTokensAreDistributedAsTheTarget) {
  const Case& c = GetParam();
  const Sampled s = simulate(c, verify_sampled, kTrials, 1234 + c.K);
  std::string detail;
  const double p_first = chi_square_p_value(s.first, as_double(c.P[0]), &detail);
  std::cout << "  " << c.name << ": first token p-value " << p_first << " (" << detail << ")";
  EXPECT_GT(p_first, 1e-3) << c.name << " first token: " << detail;
  // Position 1 of this synthetic setting does not depend on the first token, so the pair is
  // distributed as P[0] x P[1] (whether the second token came from the same round or the next).
  const double p_pair = chi_square_p_value(s.pair, product(c.P[0], c.P[1]), &detail);
  std::cout << "; pair p-value " << p_pair << " (" << detail << ")";
  EXPECT_GT(p_pair, 1e-3) << c.name << " (t1, t2): " << detail;

  // Acceptance of the first draft token happens with probability sum_x min(p(x), q(x)).
  double alpha = 0;
  for (size_t t = 0; t < c.P[0].size(); ++t) alpha += std::min(c.P[0][t], c.Q[0][t]);
  const double rate = double(s.first_position_accepted) / kTrials;
  const double sigma = std::sqrt(std::max(alpha * (1 - alpha), 1e-12) / kTrials);
  std::cout << "; acceptance " << rate << " (expected " << alpha << ")\n";
  EXPECT_NEAR(rate, alpha, 5 * sigma + 1e-6) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Pairs, Lossless, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(LosslessRule, AllAcceptedWhenDraftEqualsTarget) {
  const Case c = cases()[3];
  ASSERT_EQ(c.name, "p_equals_q_v5_k2");
  const Round round(c, 0);
  std::vector<int32_t> draft(c.K);
  UniformStream u{99, 1, 0};
  for (int t = 0; t < 10000; ++t) ASSERT_EQ(round.run(verify_sampled, u, draft).accepted, c.K);
}

// The negative control: a rule that samples the bonus from p instead of the residual is not
// lossless, and the same test has the power to see it.
TEST(LosslessRule, BiasedRuleIsRejected) {
  for (const Case& c : cases()) {
    if (c.name != "generic_v8_k1" && c.name != "q_zero_where_p_positive_v6_k2") continue;
    const Sampled s = simulate(c, verify_biased_for_tests, kTrials, 555);
    std::string detail;
    const double p_first = chi_square_p_value(s.first, as_double(c.P[0]), &detail);
    std::cout << "  biased " << c.name << ": first token p-value " << p_first << " (" << detail
              << ")\n";
    EXPECT_LT(p_first, 1e-6) << c.name << ": " << detail;
  }
}

// --- greedy verification ---

// K+1 rows of logits whose argmaxes are `best`.
std::vector<float> logits_with_argmax(const std::vector<int32_t>& best, int vocab) {
  std::vector<float> logits;
  for (size_t i = 0; i < best.size(); ++i)
    for (int t = 0; t < vocab; ++t)
      logits.push_back(t == best[i] ? 3.0f : -0.1f * float((t * 7 + int(i)) % 5));
  return logits;
}

TEST(VerifyGreedy, AllAcceptedTakesBonusFromLastRow) {
  const int vocab = 8;
  const std::vector<float> logits = logits_with_argmax({4, 1, 6, 2}, vocab);
  const std::vector<int32_t> draft{4, 1, 6};
  const Verdict v = verify_greedy(logits.data(), draft.data(), 3, vocab);
  EXPECT_EQ(v.accepted, 3);
  EXPECT_EQ(v.bonus, 2);
}

TEST(VerifyGreedy, FirstMismatchStopsAndTakesItsArgmax) {
  const int vocab = 8;
  const std::vector<float> logits = logits_with_argmax({4, 1, 6, 2}, vocab);
  for (int mismatch = 0; mismatch < 3; ++mismatch) {
    std::vector<int32_t> draft{4, 1, 6};
    draft[mismatch] = (draft[mismatch] + 3) % vocab;
    if (mismatch < 2) draft[mismatch + 1] = 0;  // later tokens do not matter
    const Verdict v = verify_greedy(logits.data(), draft.data(), 3, vocab);
    EXPECT_EQ(v.accepted, mismatch);
    EXPECT_EQ(v.bonus, std::vector<int32_t>({4, 1, 6})[mismatch]);
  }
}

TEST(VerifyGreedy, KOneAndTiesGoToTheLowestIndex) {
  const int vocab = 4;
  const std::vector<float> logits{1, 5, 5, 0, /* row 1 */ 2, 2, 2, 2};
  const int32_t accept = 1, reject = 2;
  Verdict v = verify_greedy(logits.data(), &accept, 1, vocab);
  EXPECT_EQ(v.accepted, 1);
  EXPECT_EQ(v.bonus, 0);
  v = verify_greedy(logits.data(), &reject, 1, vocab);
  EXPECT_EQ(v.accepted, 0);
  EXPECT_EQ(v.bonus, 1);
}

// Temperature-0 sampling through verify_sampled with one-hot p and q reduces to the greedy rule.
TEST(VerifySampled, OneHotRowsActLikeGreedy) {
  const int vocab = 5, K = 2;
  const std::vector<float> p = flat({one_hot(vocab, 3), one_hot(vocab, 1), one_hot(vocab, 4)});
  UniformStream u{3, 3, 0};
  {
    const std::vector<float> q = flat({one_hot(vocab, 3), one_hot(vocab, 1)});
    const std::vector<int32_t> draft{3, 1};
    const Verdict v = verify_sampled(p.data(), q.data(), draft.data(), K, vocab, u);
    EXPECT_EQ(v.accepted, 2);
    EXPECT_EQ(v.bonus, 4);
  }
  {
    const std::vector<float> q = flat({one_hot(vocab, 3), one_hot(vocab, 2)});
    const std::vector<int32_t> draft{3, 2};
    const Verdict v = verify_sampled(p.data(), q.data(), draft.data(), K, vocab, u);
    EXPECT_EQ(v.accepted, 1);
    EXPECT_EQ(v.bonus, 1);
  }
}

}  // namespace
}  // namespace ssd
