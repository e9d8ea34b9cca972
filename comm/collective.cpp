#include "comm/collective.h"

#include <stdexcept>
#include <string>

#include "kernels/errors.h"

namespace ssd {

void run_collectively(MPI_Comm comm, const std::function<void()>& step) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::string message;
  int kind = 0;  // 0 ok, 1 input error, 2 other error
  try {
    step();
  } catch (const InputError& e) {
    kind = 1;
    message = e.what();
  } catch (const std::exception& e) {
    kind = 2;
    message = e.what();
  }
  // The lowest failing rank speaks for all.
  int failing = kind ? rank : size;
  int first = size;
  MPI_Allreduce(&failing, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size) return;
  int header[2] = {kind, int(message.size())};
  MPI_Bcast(header, 2, MPI_INT, first, comm);
  message.resize(header[1]);
  MPI_Bcast(message.data(), header[1], MPI_CHAR, first, comm);
  throw AgreedError(message, header[0] == 1 ? 2 : 1);
}

}  // namespace ssd
