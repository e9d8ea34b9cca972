// ssd-bench: one binary, launched as `mpirun -np N ssd-bench [flags]` (or plainly, one rank).
// It sits above harness/ and characterize/ and dispatches to both, so that the harness library
// does not depend on characterize, which is built on it.
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <iostream>

#include "characterize/characterize.h"
#include "comm/collective.h"
#include "comm/launcher_check.h"
#include "harness/cli.h"
#include "harness/run.h"
#include "harness/run_info.h"
#include "harness/stop_signals.h"
#include "kernels/errors.h"
#include "model/checkpoint.h"

namespace {

int dispatch(const ssd::Cli& cli, int world_size) {
  switch (cli.command) {
    case ssd::Command::MakeCheckpoint: {
      if (world_size != 1) throw ssd::InputError("make-checkpoint runs on one rank");
      const ssd::CheckpointConfig& c = cli.checkpoint;
      if (c.shards > 1)
        ssd::make_sharded_checkpoint(c.preset, c.out, c.seed, c.dtype, c.shards, c.overwrite);
      else
        ssd::make_checkpoint(c.preset, c.out, c.seed, c.dtype, c.overwrite);
      std::cout << "wrote " << c.out << "/config.json and weights (" << c.dtype << ")\n";
      return 0;
    }
    case ssd::Command::Characterize:
      return ssd::run_characterize(cli);
    case ssd::Command::Run:
      return ssd::run_benchmark(cli);
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  ssd::install_stop_handlers(ssd::launcher_rank());  // before MPI_Init: see stop_signals.h
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  ssd::process_cpus();               // the launcher's binding, before any thread pool narrows it
  ssd::install_stop_handlers(rank);  // again: MPI_Init may have set its own

  // Errors every rank meets together (the command line, set-up checks run collectively) let
  // every rank exit cleanly with rank 0 speaking; an error on some ranks only, or in the
  // middle of a run, takes the whole job down with MPI_Abort so no rank is left waiting.
  int code = 0;
  try {
    ssd::check_launch(world_size);
    ssd::check_same_build();
    const ssd::Cli cli = ssd::parse_cli(argc, argv);
    code = dispatch(cli, world_size);
    ssd::quiet_stop_handlers();
  } catch (const ssd::CliExit& e) {
    ssd::quiet_stop_handlers();
    if (rank == 0)
      (e.code == 0 ? std::cout : std::cerr)
          << (e.code ? "ssd-bench: error: " : "") << e.text << "\n";
    code = e.code;
  } catch (const ssd::AgreedError& e) {
    ssd::quiet_stop_handlers();
    if (rank == 0) std::cerr << "ssd-bench: error: " << e.what() << "\n";
    code = e.exit_code;
  } catch (const ssd::InputError& e) {
    ssd::quiet_stop_handlers();
    std::cerr << "ssd-bench: error: " << e.what() << "\n";
    if (world_size > 1) {
      std::fflush(nullptr);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    code = 2;
  } catch (const std::exception& e) {
    ssd::quiet_stop_handlers();
    std::cerr << "ssd-bench: rank " << rank << ": fatal: " << e.what() << "\n";
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}
