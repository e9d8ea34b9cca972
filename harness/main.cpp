// ssd-bench: one binary, launched as `mpirun -np N ssd-bench [flags]` (or plainly, one rank).
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <iostream>

#include "comm/launch.h"
#include "harness/characterize.h"
#include "harness/cli.h"
#include "harness/run.h"
#include "model/checkpoint.h"
#include "model/errors.h"

namespace {

int dispatch(const ssd::Cli& cli, int world_size) {
  if (world_size != 1)
    throw ssd::InputError("mpirun -np " + std::to_string(world_size) +
                          ": this version runs on exactly one rank");
  switch (cli.command) {
    case ssd::Command::MakeCheckpoint: {
      const ssd::CheckpointConfig& c = cli.checkpoint;
      if (c.shards > 1)
        ssd::make_sharded_checkpoint(c.preset, c.out, c.seed, c.dtype, c.shards, c.overwrite);
      else
        ssd::make_checkpoint(c.preset, c.out, c.seed, c.dtype, c.overwrite);
      std::cout << "wrote " << c.out << "/config.json and weights (" << c.dtype << ")\n";
      return 0;
    }
    case ssd::Command::Characterize:
      return ssd::run_characterize(cli.characterize);
    case ssd::Command::Run:
      return ssd::run_benchmark(cli);
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);

  int code = 0;
  try {
    ssd::check_launch(world_size);
    const ssd::Cli cli = ssd::parse_cli(argc, argv);
    code = dispatch(cli, world_size);
  } catch (const ssd::CliExit& e) {
    if (rank == 0)
      (e.code == 0 ? std::cout : std::cerr)
          << (e.code == 0 ? "" : "ssd-bench: error: ") << e.text << "\n";
    code = e.code;
  } catch (const ssd::InputError& e) {
    if (rank == 0) std::cerr << "ssd-bench: error: " << e.what() << "\n";
    code = 2;
  } catch (const std::exception& e) {
    std::cerr << "ssd-bench: rank " << rank << ": fatal: " << e.what() << "\n";
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}
