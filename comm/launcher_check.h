// Checks that the MPI world matches what the launcher started: an ssd-bench built against one
// MPI but launched by another launcher comes up as N independent singletons, each running the
// whole benchmark; we refuse that instead of writing N bogus result files.
#pragma once

#include <optional>
#include <string>

namespace ssd {

struct LauncherSize {
  int size = 0;
  std::string variable;  // which environment variable said so
};

// The task count the launcher announced (OMPI_COMM_WORLD_SIZE, PMI_SIZE, or Slurm's step task
// count), if any.
std::optional<LauncherSize> launcher_world_size();

// Throws InputError when the launcher announced more tasks than the MPI world has.
void check_launch(int mpi_world_size);

}  // namespace ssd
