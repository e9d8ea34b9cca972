// ModelGroup: one model spread over a tensor-parallel group, driven by its leader. The leader
// runs the decoding algorithm; every call it makes here is broadcast to the followers, which
// run the same forward pass on their shard (joining the all-reduces) and otherwise just wait
// in serve(). A ForwardBatch carries explicit positions, slots and visible sets, so followers
// need no decoding state of their own.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace ssd {

class ModelGroup {
 public:
  // `group` holds the ranks sharing the model (MPI_COMM_SELF, or MPI_COMM_NULL, for one rank).
  ModelGroup(Model& model, MPI_Comm group);
  ~ModelGroup();
  ModelGroup(const ModelGroup&) = delete;
  ModelGroup& operator=(const ModelGroup&) = delete;

  const Model& model() const { return model_; }
  const ModelConfig& config() const { return model_.config; }
  int size() const { return size_; }
  bool leader() const { return rank_ == 0; }

  // Leader side. Each mirrors the call on every follower.
  void reset_cache(int sequences, int capacity);  // fresh cache, all lengths 0
  void forward(const ForwardBatch& batch, std::vector<float>& logits);
  void kv_move(int src_seq, int src_slot, int dst_seq, int dst_slot, int count);
  void stop();  // releases the followers from serve()
  // Forward passes the leader has made since the group was built: each reads the whole model's
  // weights once, whatever its rows, so passes x weight bytes is the decode's weight traffic
  // (the runs' /reps target_forward_passes and draft_forward_passes).
  int64_t forward_passes() const { return forward_passes_; }

  // Follower side: executes the leader's calls until stop().
  void serve();

  // Committed lengths are bookkeeping of the leader's algorithm, kept here for convenience.
  std::vector<int>& lengths() { return cache_.length; }
  const KVCache& cache() const { return cache_; }

 private:
  enum Op : int { kReset = 1, kForward = 2, kMove = 3, kStop = 4 };
  void broadcast(std::vector<int32_t>& message);
  void apply(const std::vector<int32_t>& message, std::vector<float>& logits);

  Model& model_;
  MPI_Comm group_;
  int rank_ = 0;
  int size_ = 1;
  KVCache cache_;
  Activations acts_;
  bool has_cache_ = false;
  int64_t forward_passes_ = 0;
};

}  // namespace ssd
