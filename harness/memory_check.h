// Preflight: does the run fit in host memory? Estimated from the model configs and the run's
// shape before any weight is loaded, so a run that cannot fit (--batch-size 100000) exits 2 in
// seconds with both figures instead of swapping or being killed mid-run.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "kernels/dtype.h"
#include "model/config.h"

namespace ssd {

// What one model needs on one rank, in bytes.
struct MemoryNeed {
  double weights = 0, kv_cache = 0, scratch = 0;
  double total() const { return weights + kv_cache + scratch; }
  MemoryNeed& operator+=(const MemoryNeed& o) {
    weights += o.weights;
    kv_cache += o.kv_cache;
    scratch += o.scratch;
    return *this;
  }
};

// One model's shard (tp ranks share the layers; embedding, norms and head are replicated) with
// a KV cache of `sequences` x `capacity` fp32 slots and activations for `rows` rows per forward
// (prefill: the sequences' prompts at once) and `logit_rows` rows of logits.
MemoryNeed estimate_model_memory(const ModelConfig& c, DType weights, int tp, int64_t sequences,
                                 int64_t capacity, int64_t rows, int64_t logit_rows);

// MemAvailable of /proc/meminfo in bytes; negative where it cannot be read (the check is then
// skipped).
double host_available_bytes();

// Collective over `world`: sums `need` over the ranks that share this rank's node and throws
// ssd::InputError on every rank of a node whose sum exceeds its available memory, naming both
// figures, the host and `what_grows` (the flags that size the KV cache).
void check_host_memory(MPI_Comm world, const MemoryNeed& need, const std::string& what_grows);

}  // namespace ssd
