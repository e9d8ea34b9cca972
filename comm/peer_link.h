// PeerLink: typed messages between the target leader and the draft leader over MPI point to
// point. Sends are non-blocking (the buffer is kept until the next send completes it), receives
// can be polled, so a draft can keep computing while it waits. Every message is timed and
// sized.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "comm/messages.h"

namespace ssd {

struct LinkStats {
  int64_t sent_messages = 0, sent_bytes = 0;
  int64_t received_messages = 0, received_bytes = 0;
  double send_s = 0.0;     // time inside send calls (posting, completing the previous send)
  double wait_s = 0.0;     // time blocked waiting for a message to arrive
  double receive_s = 0.0;  // time copying arrived messages in
};

class PeerLink {
 public:
  PeerLink(MPI_Comm comm, int peer) : comm_(comm), peer_(peer) {}
  ~PeerLink();
  PeerLink(const PeerLink&) = delete;
  PeerLink& operator=(const PeerLink&) = delete;

  template <typename Message>
  void send(MessageTag tag, const Message& m) {
    send_bytes(tag, encode(m));
  }
  // True when a message with this tag has arrived and waits to be received.
  bool poll(MessageTag tag);
  // Blocks until a message with this tag arrives; the blocked time is returned and counted as
  // wait_s.
  template <typename Message>
  double receive(MessageTag tag, Message& m) {
    std::vector<uint8_t> bytes;
    const double waited = receive_bytes(tag, bytes);
    decode(bytes, m);
    return waited;
  }
  // Size of the last message sent or received, in bytes.
  int64_t last_sent_bytes() const { return last_sent_; }
  int64_t last_received_bytes() const { return last_received_; }
  const LinkStats& stats() const { return stats_; }
  void finish_sends();  // completes the outstanding send

 private:
  void send_bytes(MessageTag tag, std::vector<uint8_t> bytes);
  double receive_bytes(MessageTag tag, std::vector<uint8_t>& bytes);

  MPI_Comm comm_;
  int peer_;
  MPI_Request pending_ = MPI_REQUEST_NULL;
  std::vector<uint8_t> pending_bytes_;
  int64_t last_sent_ = 0, last_received_ = 0;
  LinkStats stats_;
};

}  // namespace ssd
