// Writing synthetic checkpoints in Hugging Face layout (config.json + safetensors), so that the
// real-checkpoint loading path can be exercised and benchmarked without downloading a model.
#pragma once

#include <cstdint>
#include <string>

namespace ssd {

// Writes out_dir/config.json and out_dir/model.safetensors holding the synthetic weights of
// `spec` ("tiny-llama", "synthetic:tiny-llama" or a config.json path) for `seed`, stored as
// `dtype` ("f32" or "bf16"). Loading the result gives exactly the synthetic source's values
// (f32) or their bf16 roundings. Refuses an out_dir that already holds a config.json unless
// `overwrite`, and any model whose weights would exceed kMaxCheckpointBytes.
void make_checkpoint(const std::string& spec, const std::string& out_dir, uint64_t seed,
                     const std::string& dtype, bool overwrite = false);

// The same, sharded across `num_files` files model-0000i-of-0000N.safetensors with a
// model.safetensors.index.json, as large HF checkpoints are.
void make_sharded_checkpoint(const std::string& spec, const std::string& out_dir, uint64_t seed,
                             const std::string& dtype, int num_files, bool overwrite = false);

// Large enough for the CPU benchmark models, small enough that a typo cannot fill a disk with
// a 70B checkpoint.
constexpr uint64_t kMaxCheckpointBytes = uint64_t(4) << 30;

}  // namespace ssd
