// Weights: a model's tensors in backend memory, and where they come from (a safetensors
// checkpoint, or seeded synthetic values at any preset's real shapes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/config.h"

namespace ssd {

// This rank's place in a tensor-parallel group. Megatron-style: q/k/v/gate/up are split by
// rows of the HF [out, in] weight (heads / intermediate columns), o/down by columns; embedding,
// norms and LM head are replicated.
struct Shard {
  int rank = 0;
  int size = 1;
};

// A rectangle of a 2-D tensor [rows, cols] (1-D tensors have cols = their length, rows = 1).
struct Slice {
  int64_t row_begin = 0, row_count = 0;
  int64_t col_begin = 0, col_count = 0;
};

// Where weight values come from. read_into() fills `out` (resized to fit) with the fp32 values
// of `slice` of the HF tensor `name`, row-major, converting from the stored dtype; only the
// slice is read or generated.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual std::string describe() const = 0;  // "safetensors:DIR", "synthetic:PRESET seed=S"
  virtual const ModelConfig& config() const = 0;
  // The loader reuses one `out` for every tensor. A fresh vector per tensor made the kernel
  // zero ~7 GB of new pages while loading Qwen2.5-Coder-1.5B: half of the load's time.
  virtual void read_into(const std::string& name, const Slice& slice, std::vector<float>& out) = 0;
  std::vector<float> read(const std::string& name, const Slice& slice) {
    std::vector<float> out;
    read_into(name, slice, out);
    return out;
  }
  // The type the weights are stored in (a checkpoint's, or a synthetic config's
  // torch_dtype): what --weight-dtype auto keeps them in.
  virtual DType dtype() const { return DType::F32; }
  // The slice's stored bf16 bits, where the source holds `name` as bf16 values to be taken as
  // they are (a bf16 checkpoint; not a perturbed or synthetic source): fills `out` and returns
  // true. Else returns false and read_into() gives its values. Widening bf16 to fp32 and
  // rounding it back took a fifth of the samples of loading Qwen2.5-Coder-1.5B (perf; most of
  // the rest the kernel zeroing fresh pages), and its fp32 staging twice the largest tensor's
  // bytes.
  virtual bool read_bf16_into(const std::string& /*name*/, const Slice& /*slice*/,
                              std::vector<uint16_t>& /*out*/) {
    return false;
  }
};

// The storage --weight-dtype asks for: "auto" (the source's type), "f32", "bf16". Throws
// InputError naming the flag otherwise.
// Throws InputError unless `tp` ranks can split the model: heads, KV heads and the MLP width
// must divide evenly.
void check_tensor_parallel(const ModelConfig& config, int tp);

DType resolve_weight_dtype(const std::string& flag_value, const WeightSource& source);

// Opens a model spec: a checkpoint directory (config.json + model.safetensors or a sharded
// index), "synthetic:PRESET" or "synthetic:path/config.json". Checks every tensor against the
// config (missing, extra, mis-shaped, truncated) and throws InputError naming it.
std::unique_ptr<WeightSource> open_weight_source(const std::string& spec, uint64_t seed);

// A draft derived from `base` by multiplying every weight by (1 + sigma * z), z a seeded
// standard normal per element (the `--draft perturb:SIGMA` calibration draft).
std::unique_ptr<WeightSource> perturb_weight_source(std::unique_ptr<WeightSource> base,
                                                    double sigma, uint64_t seed);

// The HF tensor names and shapes a config implies, in checkpoint order.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};
std::vector<TensorSpec> expected_tensors(const ModelConfig& config);

struct LayerWeights {
  Buffer attn_norm;       // [hidden]
  Buffer wq, wk, wv;      // [local q_dim | kv_dim, hidden]
  Buffer q_norm, k_norm;  // [head_dim], Qwen3 only
  Buffer bq, bk, bv;      // [local q_dim | kv_dim], Qwen2 only (sharded with their rows)
  Buffer wo;              // [hidden, local q_dim]
  Buffer mlp_norm;        // [hidden]
  Buffer w_gate, w_up;    // [local intermediate, hidden]
  Buffer w_down;          // [hidden, local intermediate]
};

struct Weights {
  Buffer embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  Buffer final_norm;  // [hidden]
  Buffer lm_head;     // [vocab, hidden]; the same memory as embed when tied
  size_t bytes = 0;   // bytes of weights this rank holds (an untied embedding is held, not read)
  DType dtype = DType::F32;  // how the matrices (embedding, projections, head) are stored
};

// Reads this shard's slices of every tensor from `source` into backend memory, the matrices
// in `storage` (as far as the backend keeps that type, Backend::weight_storage), the norms in
// fp32.
Weights load_weights(WeightSource& source, Backend& backend, const Shard& shard,
                     DType storage = DType::F32);
void release_weights(Weights& weights, Backend& backend);

}  // namespace ssd
