// Bit-for-bit comparison of logits (or any float vectors), shared by the CPU and CUDA backends'
// forward tests: batch invariance is a claim about bits, so these report how many values differ
// and by how much rather than whether they are close.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace ssd::test {

inline bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline void expect_bitwise_equal(const std::vector<float>& got, const std::vector<float>& want,
                                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_FALSE(got.empty()) << what;
  if (bits_equal(got, want)) return;
  size_t differ = 0;
  double max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) ++differ;
    max_diff = std::max(max_diff, double(std::fabs(got[i] - want[i])));
  }
  ADD_FAILURE() << what << ": " << differ << " of " << got.size() << " values differ, max |diff| "
                << max_diff;
}

// Row `row` of `logits` ([rows][vocab]) as its own vector.
inline std::vector<float> row_of(const std::vector<float>& logits, int row, int vocab) {
  return {logits.begin() + size_t(row) * vocab, logits.begin() + size_t(row + 1) * vocab};
}

}  // namespace ssd::test
