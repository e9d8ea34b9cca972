// characterize's node measurements across ranks, launched as `mpiexec -np 2`: the latency
// between the node's ranks' cores (NodeLatencyProbe: a cache line passed back and forth through
// an MPI shared-memory window) and the read loop on every rank at once (measure_node_read),
// whose passes each follow such a latency. Here under the sanitizers too, which the timing
// tests of py_test_characterize skip.
//
// Every rank runs every test in the same order (tests/mpi_test_main.cpp: only rank 0 prints
// gtest's report, other ranks their own failures; nonzero exit when any rank failed).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <vector>

#include "characterize/parts.h"

namespace ssd {
namespace {

// The same value on every rank of `comm`: its minimum equals its maximum.
void expect_same_everywhere(double value, MPI_Comm comm) {
  double low = 0.0, high = 0.0;
  MPI_Allreduce(&value, &low, 1, MPI_DOUBLE, MPI_MIN, comm);
  MPI_Allreduce(&value, &high, 1, MPI_DOUBLE, MPI_MAX, comm);
  EXPECT_EQ(low, high);
}

MPI_Comm node_comm() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  return node;
}

TEST(NodeLatency, BothRanksGetOnePositiveLatency) {
  MPI_Comm node = node_comm();
  int ranks = 0;
  MPI_Comm_size(node, &ranks);
  ASSERT_EQ(ranks, 2);  // the test's two ranks share this host
  {
    NodeLatencyProbe probe(node);
    for (int i = 0; i < 3; ++i) {  // the probe is reused, its flags reset each time
      const double ns = probe.farthest_ns();
      EXPECT_TRUE(std::isfinite(ns));
      EXPECT_GT(ns, 0.0);
      // Two ranks sharing one core wait on the scheduler (~0.1 ms a pass here); a second is
      // beyond any of it: the measurement's 20 ms deadline bounds the groups it takes.
      EXPECT_LT(ns, 1e9);
      expect_same_everywhere(ns, node);
    }
  }
  MPI_Comm_free(&node);
}

TEST(NodeLatency, OneRankHasNoOtherCore) {
  NodeLatencyProbe probe(MPI_COMM_SELF);
  EXPECT_EQ(probe.farthest_ns(), 0.0);
}

TEST(NodeRead, PassesPairALatencyWithTheNodesRate) {
  const std::vector<float> buffer = read_loop_buffer(int64_t(1) << 20, 1);
  const NodeReadResult r = measure_node_read(buffer, 1, 2, 0.001);
  EXPECT_EQ(r.ranks, 2);
  EXPECT_EQ(r.streams, 2);
  EXPECT_EQ(r.spacing_s, 0.001);
  ASSERT_EQ(r.passes.size(), 10u);
  double mean = 0.0;
  for (const NodeReadPass& p : r.passes) {
    EXPECT_GT(p.latency_ns, 0.0);
    EXPECT_GT(p.gbps, 0.0);
    mean += p.gbps / double(r.passes.size());
    expect_same_everywhere(p.latency_ns, MPI_COMM_WORLD);
    expect_same_everywhere(p.gbps, MPI_COMM_WORLD);
  }
  // The node's figure, the ranks' mean rates summed, is the passes' sums averaged.
  EXPECT_NEAR(r.gbps, mean, 1e-9 * mean);
  EXPECT_GT(r.min_rank_gbps, 0.0);
  EXPECT_LE(r.min_rank_gbps, r.max_rank_gbps);
  EXPECT_LE(r.gbps, 2 * r.max_rank_gbps * (1 + 1e-12));
  EXPECT_GE(r.gbps, 2 * r.min_rank_gbps * (1 - 1e-12));
  expect_same_everywhere(r.gbps, MPI_COMM_WORLD);
}

}  // namespace
}  // namespace ssd
