// The ranks' last-level cache domains, read from a sysfs tree built here (the host's own has
// whatever the machine has), and the header's warning where SSD's draft rank shares one with a
// target rank while its host has others.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "harness/cache_domains.h"
#include "harness/run_info.h"

namespace ssd {
namespace {

namespace fs = std::filesystem;

// A /sys/devices/system/cpu with `online` and, per CPU, its caches: {level, id (-1: no id file),
// shared_cpu_list}.
struct FakeCpuDir {
  struct Cache {
    int level, id;
    std::string shared;
  };
  fs::path root = fs::temp_directory_path() / ("ssd-cache-domains-" + std::to_string(::getpid()));
  FakeCpuDir() {
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~FakeCpuDir() { fs::remove_all(root); }
  static void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text << "\n";
  }
  void online(const std::string& list) { write(root / "online", list); }
  void cpu(int number, const std::vector<Cache>& caches) {
    for (size_t i = 0; i < caches.size(); ++i) {
      const fs::path dir =
          root / ("cpu" + std::to_string(number)) / "cache" / ("index" + std::to_string(i));
      write(dir / "level", std::to_string(caches[i].level));
      if (caches[i].id >= 0) write(dir / "id", std::to_string(caches[i].id));
      write(dir / "shared_cpu_list", caches[i].shared);
    }
  }
};

TEST(ParseCpuList, TheKernelsSyntax) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), (std::vector<int>{5}));
  EXPECT_EQ(parse_cpu_list("2,0-1"), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(parse_cpu_list("").empty());
  EXPECT_TRUE(parse_cpu_list("3-1").empty());
  EXPECT_TRUE(parse_cpu_list("0-").empty());
  EXPECT_TRUE(parse_cpu_list("a").empty());
  EXPECT_TRUE(parse_cpu_list("0-999999999").empty());
  for (const std::vector<int>& cpus : {std::vector<int>{0, 1, 2, 3, 8, 10, 11}, {5, 7, 8, 63}})
    EXPECT_EQ(parse_cpu_list(cpu_list_text(cpus)), cpus);
}

TEST(LastLevelCache, TheHighestLevelsIdOrItsFirstSharingCpu) {
  FakeCpuDir sys;
  sys.online("0-5");
  // Two dies of two CPUs each: L1 and L2 per CPU, L3 per die (id 0, 1).
  for (int cpu = 0; cpu < 4; ++cpu)
    sys.cpu(cpu, {{1, cpu, std::to_string(cpu)},
                  {1, cpu, std::to_string(cpu)},
                  {2, cpu, std::to_string(cpu)},
                  {3, cpu / 2, cpu < 2 ? "0-1" : "2-3"}});
  // An older kernel's CPUs without id files: the L3 known by its first sharing CPU.
  for (int cpu = 4; cpu < 6; ++cpu) sys.cpu(cpu, {{2, -1, std::to_string(cpu)}, {3, -1, "4-5"}});
  const std::string dir = sys.root.string();
  EXPECT_EQ(last_level_cache_ids({0, 1, 2, 3, 4, 5, 9}, dir),
            (std::vector<int>{0, 0, 1, 1, 4, 4, -1}));  // CPU 9: no directory
  EXPECT_EQ(cache_domains({1, 2}, dir), (std::vector<int>{0, 1}));
  EXPECT_EQ(cache_domains({3, 9}, dir), (std::vector<int>{1}));
  EXPECT_EQ(host_cache_domains(dir), 3);
  EXPECT_EQ(host_cache_domains((sys.root / "missing").string()), 0);
}

TEST(LastLevelCache, ThisHost) {
  // Whatever the machine has: every domain of the process's CPUs is one of the host's.
  const std::vector<int> mine = cache_domains(process_cpus());
  EXPECT_LE(int(mine.size()), host_cache_domains());
}

RankInfo rank(int number, const std::string& role, const std::string& llc, int host_llcs,
              const std::string& host = "node1") {
  RankInfo r;
  r.rank = number;
  r.role = role;
  r.host = host;
  r.threads = 1;
  r.llc = llc;
  r.host_llcs = host_llcs;
  return r;
}

TEST(SharedCacheWarnings, TheDraftUnderATargetsCacheOnAHostWithOthers) {
  const std::vector<std::string> lines =
      shared_cache_warnings({rank(0, "target tp 0/2", "0", 4), rank(1, "target tp 1/2", "0-1", 4),
                             rank(2, "draft 0/1", "1", 4)},
                            true);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "draft rank 2 shares last-level cache 1 with target rank 1 on node1, which has 4: "
            "their weight streams then share one die's path to memory; mpirun --map-by "
            "l3cache:PE=1 --bind-to core puts each rank under a cache of its own");
  const std::vector<std::string> both =
      shared_cache_warnings({rank(0, "target tp 0/2", "0", 2), rank(1, "target tp 1/2", "0", 2),
                             rank(2, "draft 0/1", "0", 2)},
                            true);
  ASSERT_EQ(both.size(), 1u);
  EXPECT_NE(both[0].find("shares last-level cache 0 with target ranks 0,1 on node1"),
            std::string::npos)
      << both[0];
}

TEST(SharedCacheWarnings, NoneWhereTheRanksCannotDoBetterOrDoNotOverlap) {
  const RankInfo target = rank(0, "target tp 0/1", "0", 2);
  EXPECT_TRUE(shared_cache_warnings({target, rank(1, "draft 0/1", "1", 2)}, true).empty());
  // One cache on the host (the 2-core guests here): nowhere else to go.
  EXPECT_TRUE(
      shared_cache_warnings({rank(0, "target tp 0/1", "0", 1), rank(1, "draft 0/1", "0", 1)}, true)
          .empty());
  EXPECT_TRUE(shared_cache_warnings({target, rank(1, "draft 0/1", "0", 2, "node2")}, true).empty());
  EXPECT_TRUE(shared_cache_warnings({target, rank(1, "draft 0/1", "", 0)}, true).empty());
  // SD's separate draft takes turns with the target: their streams do not meet.
  EXPECT_TRUE(shared_cache_warnings({target, rank(1, "draft 0/1", "0", 2)}, false).empty());
  // A collocated draft is the target rank's own.
  EXPECT_TRUE(shared_cache_warnings({rank(0, "target tp 0/1 + draft", "0", 2)}, true).empty());
}

}  // namespace
}  // namespace ssd
