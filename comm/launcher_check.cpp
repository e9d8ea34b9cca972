#include "comm/launcher_check.h"

#include <cstdlib>
#include <stdexcept>

#include "kernels/errors.h"

namespace ssd {
namespace {

std::optional<int> env_int(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  char* end = nullptr;
  long n = std::strtol(value, &end, 10);
  if (*end != '\0' || n < 1) return std::nullopt;
  return int(n);
}

}  // namespace

std::optional<LauncherSize> launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (auto n = env_int(name)) return LauncherSize{*n, name};
  // Inside an sbatch script SLURM_NTASKS is set even without srun; only a job step (srun)
  // announces its own task count.
  if (std::getenv("SLURM_STEP_ID"))
    for (const char* name : {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"})
      if (auto n = env_int(name)) return LauncherSize{*n, name};
  return std::nullopt;
}

void check_launch(int mpi_world_size) {
  auto launcher = launcher_world_size();
  if (launcher && launcher->size != mpi_world_size)
    throw InputError(
        "the launcher started " + std::to_string(launcher->size) + " tasks (" + launcher->variable +
        ") but MPI sees a world of " + std::to_string(mpi_world_size) +
        ": ssd-bench was launched by a different MPI than it was built with; use its mpirun");
}

}  // namespace ssd
