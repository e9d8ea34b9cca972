// launcher_rank(): the world rank the stop handlers are installed with before MPI_Init, read
// from the launcher's environment (harness/stop_signals.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/stop_signals.h"

namespace {

const char* const kNames[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK"};

// Clears every launcher variable for the test and restores them after it.
class LauncherRank : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_)
      value ? setenv(name.c_str(), value->c_str(), 1) : unsetenv(name.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(LauncherRank, PlainLaunchIsRankZero) {
  EXPECT_EQ(ssd::launcher_rank(), 0);
}

TEST_F(LauncherRank, ReadsEachLauncherVariable) {
  for (const char* name : kNames) {
    setenv(name, "3", 1);
    EXPECT_EQ(ssd::launcher_rank(), 3) << name;
    unsetenv(name);
  }
}

TEST_F(LauncherRank, MpirunsRankComesBeforeSlurms) {
  setenv("SLURM_PROCID", "0", 1);  // srun around mpirun: the job step's task, not the rank
  setenv("OMPI_COMM_WORLD_RANK", "5", 1);
  EXPECT_EQ(ssd::launcher_rank(), 5);
}

TEST_F(LauncherRank, MalformedValuesAreSkipped) {
  setenv("OMPI_COMM_WORLD_RANK", "", 1);
  setenv("PMIX_RANK", "2x", 1);
  setenv("SLURM_PROCID", "-1", 1);
  setenv("PMI_RANK", "7", 1);
  EXPECT_EQ(ssd::launcher_rank(), 7);
}

}  // namespace
