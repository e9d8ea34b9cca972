// Agreeing on failure. A set-up step that fails on some ranks only (a prompt file one node
// cannot read, an output path only rank 0 checks) must not leave the other ranks waiting in a
// collective forever: every rank runs the step, then all learn whether any rank failed and
// throw the first failing rank's message together.
#pragma once

#include <mpi.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace ssd {

// An error every rank of the communicator throws together, so each can exit cleanly (no
// MPI_Abort needed). exit_code 2 for bad input, 1 otherwise.
struct AgreedError : std::runtime_error {
  AgreedError(const std::string& message, int code)
      : std::runtime_error(message), exit_code(code) {}
  int exit_code;
};

// Runs `step` on every rank of `comm`; if it throws on any rank, every rank throws an
// AgreedError with the first failing rank's message (exit code 2 if that was an InputError).
// Collective: every rank of comm must call it.
void run_collectively(MPI_Comm comm, const std::function<void()>& step);

}  // namespace ssd
