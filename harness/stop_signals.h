// SIGTERM and SIGINT: Slurm's time limit (srun, or scancel, sends SIGTERM to every task; the
// templates ask for it early with --signal), Ctrl-C, or mpirun forwarding either to its ranks.
// Every rank that receives one removes the partial result file it is writing, if any, and
// exits at once with 128 + the signal; world rank 0 says so in one line. A rank blocked in MPI
// is interrupted like any other, so the whole job stops within the launcher's forwarding time.
#pragma once

#include <string>

namespace ssd {

void install_stop_handlers(int world_rank);

// The world rank the launcher gave this process, from its environment (0 when launched
// plainly). main installs the handlers with it before MPI_Init: Slurm's early TERM can arrive
// a second into a job, while MPI_Init (PMIx wire-up) is still running, and would otherwise
// kill the rank by the default action, with no line and no clean-up (seen in CI: a 1-minute
// job cancelled 1 s after it started). MPI_Comm_rank's rank replaces it afterwards.
int launcher_rank();

// The run is over (finished, or ending on an error it has reported): a signal from now on is
// the launcher tearing the job down after some rank exited non-zero, not a stop request, and
// must not add a line of its own. The partial file is still removed.
void quiet_stop_handlers();

// The partial file a stop must remove (ResultFile registers it while it is open; "" clears).
void set_partial_file_for_signals(const std::string& path);

}  // namespace ssd
