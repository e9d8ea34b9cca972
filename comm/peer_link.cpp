#include "comm/peer_link.h"

#include <limits>
#include <stdexcept>

namespace ssd {

PeerLink::~PeerLink() {
  if (pending_ != MPI_REQUEST_NULL) MPI_Wait(&pending_, MPI_STATUS_IGNORE);
}

void PeerLink::finish_sends() {
  if (pending_ != MPI_REQUEST_NULL) MPI_Wait(&pending_, MPI_STATUS_IGNORE);
}

void PeerLink::send_bytes(MessageTag tag, std::vector<uint8_t> bytes) {
  if (bytes.size() > size_t(std::numeric_limits<int>::max()))
    throw std::length_error("PeerLink: message over 2 GB");
  const double start = MPI_Wtime();
  finish_sends();
  pending_bytes_ = std::move(bytes);
  MPI_Isend(pending_bytes_.data(), int(pending_bytes_.size()), MPI_BYTE, peer_, int(tag), comm_,
            &pending_);
  stats_.send_s += MPI_Wtime() - start;
  stats_.sent_messages += 1;
  stats_.sent_bytes += int64_t(pending_bytes_.size());
  last_sent_ = int64_t(pending_bytes_.size());
}

bool PeerLink::poll(MessageTag tag) {
  int flag = 0;
  MPI_Iprobe(peer_, int(tag), comm_, &flag, MPI_STATUS_IGNORE);
  return flag != 0;
}

double PeerLink::receive_bytes(MessageTag tag, std::vector<uint8_t>& bytes) {
  const double start = MPI_Wtime();
  MPI_Status status;
  MPI_Probe(peer_, int(tag), comm_, &status);
  const double arrived = MPI_Wtime();
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  bytes.resize(size_t(count));
  MPI_Recv(bytes.data(), count, MPI_BYTE, peer_, int(tag), comm_, MPI_STATUS_IGNORE);
  const double waited = arrived - start;
  stats_.wait_s += waited;
  stats_.receive_s += MPI_Wtime() - arrived;
  stats_.received_messages += 1;
  stats_.received_bytes += count;
  last_received_ = count;
  return waited;
}

}  // namespace ssd
