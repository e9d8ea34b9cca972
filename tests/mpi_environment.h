// For GoogleTest programs whose code under test uses MPI (PeerLink, the global clock,
// characterize's timer): including this header initialises MPI once for the program, a
// singleton MPI_Init that needs no launcher, and finalises it after the last test.
// tests/CMakeLists.txt gives every test source that includes it the environment a sanitizer
// build needs for an in-process MPI_Init.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

namespace ssd::test {

class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    int done = 0;
    MPI_Initialized(&done);
    if (!done) MPI_Init(nullptr, nullptr);
  }
  void TearDown() override { MPI_Finalize(); }
};

inline const auto* const kMpiEnvironment = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

}  // namespace ssd::test
