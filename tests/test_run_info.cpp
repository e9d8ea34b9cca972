// The rank table's CPU list and the header's warning where a rank's threads outnumber its CPUs.
#include <gtest/gtest.h>

#include <thread>

#include "harness/run_info.h"

namespace ssd {
namespace {

TEST(CpuListText, RangesAndSingles) {
  EXPECT_EQ(cpu_list_text({}), "");
  EXPECT_EQ(cpu_list_text({0}), "0");
  EXPECT_EQ(cpu_list_text({0, 1}), "0-1");
  EXPECT_EQ(cpu_list_text({0, 2}), "0,2");
  EXPECT_EQ(cpu_list_text({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(cpu_list_text({5, 7, 8, 9, 63}), "5,7-9,63");
}

TEST(ProcessCpus, TheAffinityMaskInOrder) {
  const std::vector<int>& cpus = process_cpus();
  ASSERT_FALSE(cpus.empty());
  for (size_t i = 1; i < cpus.size(); ++i) EXPECT_LT(cpus[i - 1], cpus[i]);
  EXPECT_LE(int(cpus.size()), int(std::thread::hardware_concurrency()));
  EXPECT_EQ(&process_cpus(), &cpus);  // read once
}

RankInfo rank(int number, int threads, std::string cpus, int cpu_count, bool gpu = false) {
  RankInfo r;
  r.rank = number;
  r.threads = threads;
  r.cpus = std::move(cpus);
  r.cpu_count = cpu_count;
  r.gpu = gpu;
  return r;
}

TEST(AffinityWarnings, OneLinePerRankWithMoreThreadsThanCpus) {
  const std::vector<std::string> lines =
      affinity_warnings({rank(0, 2, "0", 1), rank(1, 1, "1", 1), rank(2, 4, "2-3", 2)});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "rank 0 runs 2 threads on 1 CPU (affinity 0): mpirun binds a rank to one core by "
            "default; launch with --map-by slot:PE=2 --bind-to core (or --bind-to none), or srun "
            "with --cpus-per-task=2");
  EXPECT_NE(lines[1].find("rank 2 runs 4 threads on 2 CPUs (affinity 2-3)"), std::string::npos)
      << lines[1];
  EXPECT_NE(lines[1].find("--map-by slot:PE=4"), std::string::npos) << lines[1];
}

TEST(AffinityWarnings, NoneWhereThreadsFitOrCannotBeJudged) {
  EXPECT_TRUE(affinity_warnings({rank(0, 2, "0-1", 2), rank(1, 1, "0-1", 2)}).empty());
  EXPECT_TRUE(affinity_warnings({rank(0, 1, "3", 1)}).empty());
  EXPECT_TRUE(affinity_warnings({rank(0, 4, "", 0)}).empty());  // the system did not say
  // A GPU rank's threads are host-side only (kernels/cuda): one core does.
  EXPECT_TRUE(affinity_warnings({rank(0, 4, "0", 1, true)}).empty());
}

}  // namespace
}  // namespace ssd
