// resolve_ranked_bonus: the draft's half of synthetic verification outcomes turns the rank the
// target drew into a token. Ranks within the candidate list count past the excluded token
// s_{k+1}; a rank past the list becomes a token that is neither a candidate nor excluded (so it
// can never be a cached branch); the same stream state gives the same token; rank < 1 throws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <vector>

#include "ssd/synthetic_outcome.h"
#include "ssd/verification.h"

namespace ssd {
namespace {

const std::vector<int32_t> kList{5, 9, 2, 7};

TEST(ResolveRankedBonus, RanksWithinTheListSkipTheExcludedToken) {
  UniformStream u{11, 3, 0};
  // s_{k+1} = 9 is the list's second entry: ranks 1, 2, 3 are 5, 2, 7.
  EXPECT_EQ(resolve_ranked_bonus(kList, 9, 1, 64, u), 5);
  EXPECT_EQ(resolve_ranked_bonus(kList, 9, 2, 64, u), 2);
  EXPECT_EQ(resolve_ranked_bonus(kList, 9, 3, 64, u), 7);
  // Excluded first in the list.
  EXPECT_EQ(resolve_ranked_bonus(kList, 5, 1, 64, u), 9);
  // Nothing excluded (k = K), or an excluded token that is not a candidate: ranks are positions.
  for (int32_t excluded : {-1, 40}) {
    for (int rank = 1; rank <= int(kList.size()); ++rank)
      EXPECT_EQ(resolve_ranked_bonus(kList, excluded, rank, 64, u), kList[rank - 1])
          << "excluded " << excluded << " rank " << rank;
  }
  // A rank inside the list draws nothing from the stream.
  EXPECT_EQ(u.counter, 0u);
}

TEST(ResolveRankedBonus, RankPastTheListIsOutsideTheListAndNotExcluded) {
  constexpr int vocab = 16;
  struct Case {
    int32_t excluded;
    int rank;  // the first rank past the list
  };
  // Excluded inside the list leaves 3 rankable candidates; outside it, or none, leaves 4.
  for (const Case c : {Case{9, 4}, Case{3, 5}, Case{-1, 5}}) {
    UniformStream u{7, 1, 0};
    std::set<int32_t> seen;
    for (int draw = 0; draw < 2000; ++draw) {
      const int rank = c.rank + draw % 3;  // any rank past the list behaves the same
      const int32_t t = resolve_ranked_bonus(kList, c.excluded, rank, vocab, u);
      ASSERT_GE(t, 0);
      ASSERT_LT(t, vocab);
      ASSERT_NE(t, c.excluded) << "draw " << draw;
      ASSERT_EQ(std::find(kList.begin(), kList.end(), t), kList.end())
          << "draw " << draw << ": " << t << " is a candidate";
      seen.insert(t);
    }
    EXPECT_GT(u.counter, 0u);
    // Every token that is neither a candidate nor excluded turns up (uniform over them).
    const size_t allowed = vocab - kList.size() - (c.excluded == 3 ? 1 : 0);
    EXPECT_EQ(seen.size(), allowed) << "excluded " << c.excluded;
  }
}

TEST(ResolveRankedBonus, EmptyListDrawsAnyTokenButTheExcludedOne) {
  UniformStream u{2, 2, 0};
  std::set<int32_t> seen;
  for (int draw = 0; draw < 500; ++draw) {
    const int32_t t = resolve_ranked_bonus({}, 4, 1, 8, u);
    ASSERT_NE(t, 4);
    ASSERT_GE(t, 0);
    ASSERT_LT(t, 8);
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 7u);
}

TEST(ResolveRankedBonus, DeterministicForTheSameStreamState) {
  const std::vector<int32_t> list{1, 2, 3};
  UniformStream a{42, 9, 17}, b{42, 9, 17};
  std::vector<int32_t> from_a, from_b;
  for (int i = 0; i < 50; ++i) {
    from_a.push_back(resolve_ranked_bonus(list, 2, 10, 1000, a));
    from_b.push_back(resolve_ranked_bonus(list, 2, 10, 1000, b));
  }
  EXPECT_EQ(from_a, from_b);
  EXPECT_EQ(a.counter, b.counter);
  // Resuming from a saved counter reproduces the continuation (the draft stores the counter
  // between rounds).
  UniformStream c{42, 9, 17};
  for (int i = 0; i < 25; ++i) resolve_ranked_bonus(list, 2, 10, 1000, c);
  UniformStream resumed{42, 9, c.counter};
  for (int i = 25; i < 50; ++i)
    EXPECT_EQ(resolve_ranked_bonus(list, 2, 10, 1000, resumed), from_a[i]) << i;
  // Another stream gives another sequence of tokens.
  UniformStream other{42, 10, 17};
  std::vector<int32_t> from_other;
  for (int i = 0; i < 50; ++i) from_other.push_back(resolve_ranked_bonus(list, 2, 10, 1000, other));
  EXPECT_NE(from_other, from_a);
}

TEST(ResolveRankedBonus, ThrowsOnRankBelowOne) {
  UniformStream u{1, 1, 0};
  EXPECT_THROW(resolve_ranked_bonus(kList, 9, 0, 64, u), std::invalid_argument);
  EXPECT_THROW(resolve_ranked_bonus(kList, 9, -3, 64, u), std::invalid_argument);
  EXPECT_THROW(resolve_ranked_bonus({}, -1, 0, 64, u), std::invalid_argument);
}

TEST(ResolveRankedBonus, ThrowsRatherThanLoopingWhenNoTokenIsLeft) {
  // The list plus the excluded token cover the whole vocabulary: no token can be past the list.
  UniformStream u{1, 1, 0};
  EXPECT_ANY_THROW(resolve_ranked_bonus({0, 1, 2}, 3, 4, 4, u));
  EXPECT_ANY_THROW(resolve_ranked_bonus({0, 1, 2, 3}, -1, 5, 4, u));
}

}  // namespace
}  // namespace ssd
