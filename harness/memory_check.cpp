#include "harness/memory_check.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "harness/run_info.h"
#include "kernels/errors.h"

namespace ssd {
namespace {

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", bytes / double(1ull << 30));
  return text;
}

}  // namespace

MemoryNeed estimate_model_memory(const ModelConfig& c, DType weights, int tp, int64_t sequences,
                                 int64_t capacity, int64_t rows, int64_t logit_rows) {
  const double element = double(dtype_size(weights));
  const double embed = double(c.vocab_size) * c.hidden_size;
  const double replicated = embed * (c.tie_word_embeddings ? 1 : 2);
  const double sharded = double(c.parameter_count()) - replicated;
  MemoryNeed need;
  need.weights = (replicated + sharded / tp) * element;
  // K and V, fp32, per layer: the cache is sized before decoding starts and never grows.
  need.kv_cache = 2.0 * c.num_hidden_layers * double(sequences) * double(capacity) *
                  (double(c.kv_dim()) / tp) * sizeof(float);
  // The forward's activations (model/forward.cpp): x, xb, q, k, v, attn, the two MLP halves,
  // plus the logits.
  const double per_row = 2.0 * c.hidden_size + 2.0 * c.q_dim() / tp + 2.0 * c.kv_dim() / tp +
                         2.0 * c.intermediate_size / tp;
  need.scratch = (double(rows) * per_row + double(logit_rows) * (c.hidden_size + c.vocab_size)) *
                 sizeof(float);
  return need;
}

double host_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (meminfo >> key >> kib) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return -1.0;
}

void check_host_memory(MPI_Comm world, const MemoryNeed& need, const std::string& what_grows) {
  // Ranks on one node share its memory: the node's sum is what must fit.
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  double mine[4] = {need.weights, need.kv_cache, need.scratch, 1.0}, sum[4] = {0, 0, 0, 0};
  MPI_Allreduce(mine, sum, 4, MPI_DOUBLE, MPI_SUM, node);
  MPI_Comm_free(&node);
  const MemoryNeed node_need{sum[0], sum[1], sum[2]};
  const int node_ranks = int(sum[3]);
  const double available = host_available_bytes();
  if (available < 0 || node_need.total() <= available) return;
  std::ostringstream why;
  why << "not enough memory on " << host_name() << ": the run needs about "
      << gib(node_need.total()) << " (weights " << gib(node_need.weights) << ", KV cache "
      << gib(node_need.kv_cache) << ", activations " << gib(node_need.scratch) << ", over "
      << node_ranks << " rank(s) on this host), " << gib(available) << " available; reduce "
      << what_grows;
  throw InputError(why.str());
}

}  // namespace ssd
