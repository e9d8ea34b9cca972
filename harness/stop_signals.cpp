#include "harness/stop_signals.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>

namespace ssd {
namespace {

// Only async-signal-safe work in the handler: fixed buffers, write(2), unlink(2), _exit(2).
char g_partial[4096] = {};
volatile std::sig_atomic_t g_world_rank = 0;
volatile std::sig_atomic_t g_quiet = 0;

void write_text(const char* text) {
  const ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

extern "C" void on_stop_signal(int sig) {
  const bool had_partial = g_partial[0] != '\0';
  if (had_partial) ::unlink(g_partial);
  if (g_world_rank == 0 && !g_quiet) {
    write_text(sig == SIGINT ? "ssd-bench: stopped by SIGINT" : "ssd-bench: stopped by SIGTERM");
    write_text(had_partial ? "; the partial result file was removed\n"
                           : "; no result file was written\n");
  }
  ::_exit(128 + sig);
}

}  // namespace

int launcher_rank() {
  // Open MPI's mpirun, PMIx launchers (srun --mpi=pmix), Slurm itself, and MPICH-style PMI.
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long rank = std::strtol(value, &end, 10);
    if (*end == '\0' && rank >= 0 && rank < (1L << 24)) return static_cast<int>(rank);
  }
  return 0;
}

void install_stop_handlers(int world_rank) {
  g_world_rank = world_rank;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGTERM, SIGINT}) sigaction(sig, &action, nullptr);
}

void quiet_stop_handlers() {
  g_quiet = 1;
}

void set_partial_file_for_signals(const std::string& path) {
  // Cleared first, so a signal in between never sees half a path.
  g_partial[0] = '\0';
  if (path.empty() || path.size() >= sizeof(g_partial)) return;
  std::memcpy(g_partial + 1, path.c_str() + 1, path.size());  // all but the first byte
  g_partial[0] = path[0];
}

}  // namespace ssd
