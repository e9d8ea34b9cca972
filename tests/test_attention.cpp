// The CPU attention kernel (kernels/cpu/attention.cpp): softmax(q.k / sqrt(d)) V under the
// mask's prefix and extra slots, grouped-query heads, against a double-precision reference;
// and batch invariance: a row's output is bit for bit the same alone or beside other rows, also
// beside rows of its own sequence (a verification window, SSD branches).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace {

struct Case {
  int heads = 4, kv_heads = 2, head_dim = 64, sequences = 3, capacity = 40;
  std::vector<float> k, v;
  // One query row each: sequence, own slot, prefix, extra slots.
  struct Row {
    int seq, slot, prefix;
    std::vector<int32_t> extras;
  };
  std::vector<Row> rows;
};

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> out(n);
  for (float& x : out) x = d(gen);
  return out;
}

// A case's shape: head_dim, query heads, K/V heads.
struct Shape {
  int head_dim, heads, kv_heads;
};

Case make_case(Shape shape) {
  Case c;
  const int head_dim = shape.head_dim;
  c.head_dim = head_dim;
  c.heads = shape.heads;
  c.kv_heads = shape.kv_heads;
  const size_t cache = size_t(c.sequences) * c.capacity * c.kv_heads * head_dim;
  c.k = random_floats(cache, 1);
  c.v = random_floats(cache, 2);
  // Causal rows of different lengths, a one-slot row, and branch rows (prefix + own path);
  // then rows of one sequence side by side: a verification window (prefixes 34-38) and
  // branches over a committed prefix of 17.
  c.rows = {{0, 12, 13, {}},           {1, 0, 1, {}},         {2, 30, 31, {}},
            {0, 35, 10, {10, 11, 35}}, {1, 38, 20, {20, 38}}, {2, 39, 0, {39}},
            {0, 33, 34, {}},           {0, 34, 35, {}},       {0, 35, 36, {}},
            {0, 36, 37, {}},           {0, 37, 38, {}},       {1, 30, 17, {30}},
            {1, 31, 17, {30, 31}},     {1, 32, 20, {32}},     {1, 33, 17, {32, 33}}};
  return c;
}

std::vector<int> all_rows(const Case& c) {
  std::vector<int> all;
  for (size_t i = 0; i < c.rows.size(); ++i) all.push_back(int(i));
  return all;
}

// Runs the kernel over `rows` of the case (indices into c.rows), q rows given.
std::vector<float> run(const Case& c, const std::vector<int>& which, const std::vector<float>& q,
                       int threads) {
  std::vector<int32_t> seq, slot, prefix, begin{0}, extras;
  for (int i : which) {
    const Case::Row& r = c.rows[size_t(i)];
    seq.push_back(r.seq), slot.push_back(r.slot), prefix.push_back(r.prefix);
    extras.insert(extras.end(), r.extras.begin(), r.extras.end());
    begin.push_back(int32_t(extras.size()));
  }
  ssd::AttentionMask mask{int(which.size()), seq.data(),   slot.data(),
                          prefix.data(),     begin.data(), extras.data()};
  ssd::KVLayout layout{c.sequences, c.capacity, c.kv_heads, c.head_dim};
  std::vector<float> out(q.size(), NAN);
  ssd::attention_cpu(out.data(), q.data(), c.k.data(), c.v.data(), layout, c.heads, mask, threads);
  return out;
}

// The row's q for head h, in double precision, against every visible slot.
std::vector<double> reference(const Case& c, const Case::Row& r, const float* q, int h) {
  const int hd = c.head_dim, kvh = h / (c.heads / c.kv_heads);
  std::vector<int32_t> visible;
  for (int s = 0; s < r.prefix; ++s) visible.push_back(s);
  visible.insert(visible.end(), r.extras.begin(), r.extras.end());
  auto at = [&](const std::vector<float>& cache, int slot) {
    return cache.data() + ((size_t(r.seq) * c.capacity + slot) * c.kv_heads + kvh) * hd;
  };
  std::vector<double> score;
  double top = -INFINITY, total = 0.0;
  for (int s : visible) {
    double dot = 0.0;
    for (int d = 0; d < hd; ++d) dot += double(q[d]) * at(c.k, s)[d];
    score.push_back(dot / std::sqrt(double(hd)));
    top = std::max(top, score.back());
  }
  for (double& s : score) total += (s = std::exp(s - top));
  std::vector<double> out(size_t(hd), 0.0);
  for (size_t i = 0; i < visible.size(); ++i)
    for (int d = 0; d < hd; ++d) out[size_t(d)] += score[i] / total * at(c.v, visible[i])[d];
  return out;
}

class AttentionTest : public ::testing::TestWithParam<Shape> {};

TEST_P(AttentionTest, MatchesDoublePrecisionReference) {
  const Case c = make_case(GetParam());
  const std::vector<int> all = all_rows(c);
  const size_t per_row = size_t(c.heads) * c.head_dim;
  const std::vector<float> q = random_floats(all.size() * per_row, 3);
  const std::vector<float> out = run(c, all, q, 1);
  for (size_t i = 0; i < all.size(); ++i)
    for (int h = 0; h < c.heads; ++h) {
      const size_t at = i * per_row + size_t(h) * c.head_dim;
      const std::vector<double> want = reference(c, c.rows[i], q.data() + at, h);
      for (int d = 0; d < c.head_dim; ++d)
        ASSERT_NEAR(out[at + size_t(d)], want[size_t(d)], 2e-5 * (1.0 + std::fabs(want[size_t(d)])))
            << "row " << i << " head " << h << " dim " << d;
    }
}

TEST_P(AttentionTest, RowIsTheSameAloneOrBesideOthers) {
  const Case c = make_case(GetParam());
  const std::vector<int> all = all_rows(c);
  const size_t per_row = size_t(c.heads) * c.head_dim;
  const std::vector<float> q = random_floats(all.size() * per_row, 4);
  for (int threads : {1, 2}) {
    const std::vector<float> together = run(c, all, q, threads);
    for (size_t i = 0; i < all.size(); ++i) {
      const std::vector<float> q_row(q.begin() + long(i * per_row),
                                     q.begin() + long((i + 1) * per_row));
      const std::vector<float> alone = run(c, {int(i)}, q_row, 1);
      for (size_t e = 0; e < per_row; ++e)
        ASSERT_EQ(alone[e], together[i * per_row + e])
            << "row " << i << " element " << e << " threads " << threads;
      // One row over 4 threads: its heads split into blocks, some cutting a K/V group.
      if (threads == 2) {
        const std::vector<float> split = run(c, {int(i)}, q_row, 4);
        for (size_t e = 0; e < per_row; ++e)
          ASSERT_EQ(alone[e], split[e]) << "row " << i << " element " << e << " heads split";
      }
    }
  }
}

TEST_P(AttentionTest, NoRowsIsANoOp) {
  const Case c = make_case(GetParam());
  for (int threads : {1, 2}) EXPECT_TRUE(run(c, {}, {}, threads).empty());
}

// 64 and 128: whole vectors only (4 and 8 of AVX-512's, 8 and 16 of AVX2's); 72: a tail past the
// last whole vector; 5: the tail alone. K/V groups of 2, 3 (llama-124m's) and 4 query heads.
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(Shape{64, 4, 2}, Shape{72, 4, 2}, Shape{5, 4, 2},
                                           Shape{64, 6, 2}, Shape{64, 8, 2}, Shape{128, 8, 2},
                                           Shape{128, 6, 2}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           const Shape& s = info.param;
                           return "head_dim" + std::to_string(s.head_dim) + "_heads" +
                                  std::to_string(s.heads) + "_kv" + std::to_string(s.kv_heads);
                         });

}  // namespace
