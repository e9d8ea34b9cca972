#include "comm/clock.h"

#include <chrono>

namespace ssd {
namespace {
double g_offset = 0.0;
}

double global_now() {
  return MPI_Wtime() + g_offset;
}
void set_clock_offset(double offset) {
  g_offset = offset;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

double estimate_clock_offset(MPI_Comm comm, int round_trips) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int tag = 77;
  double offset = 0.0;
  for (int peer = 1; peer < size; ++peer) {
    if (rank == 0) {
      for (int i = 0; i < round_trips; ++i) {
        double ping = 0.0;
        MPI_Recv(&ping, 1, MPI_DOUBLE, peer, tag, comm, MPI_STATUS_IGNORE);
        const double now = MPI_Wtime();
        MPI_Send(&now, 1, MPI_DOUBLE, peer, tag, comm);
      }
    } else if (rank == peer) {
      double best_rtt = 1e30;
      for (int i = 0; i < round_trips; ++i) {
        const double sent = MPI_Wtime();
        double root_time = 0.0;
        MPI_Send(&sent, 1, MPI_DOUBLE, 0, tag, comm);
        MPI_Recv(&root_time, 1, MPI_DOUBLE, 0, tag, comm, MPI_STATUS_IGNORE);
        const double received = MPI_Wtime();
        if (received - sent < best_rtt) {
          best_rtt = received - sent;
          offset = root_time - 0.5 * (sent + received);
        }
      }
    }
  }
  return offset;
}

}  // namespace ssd
