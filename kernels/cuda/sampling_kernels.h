// Device-side sampling helpers (softmax, argmax, top-k) over logits in GPU memory, for when the
// decoding loop samples on the device. Not wired into ssd/ yet. Every function enqueues on
// `stream` and returns at once; results are deterministic (fixed reduction orders, ties broken
// by the lower index, so no result depends on thread scheduling).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ssd {

enum class LogitsType { F32, BF16 };

// Row-major [rows][vocab] logits in device memory.
struct DeviceLogits {
  const void* data = nullptr;
  LogitsType type = LogitsType::F32;
  int rows = 0;
  int vocab = 0;
};

// probs[r][:] = softmax(logits[r][:] / temperature) in fp32; temperature > 0. NaN logits count
// as -inf.
void cuda_softmax(float* probs, const DeviceLogits& logits, float temperature, cudaStream_t stream);

// out[r] = the index of row r's largest logit (the lowest such index on ties; NaN never wins
// over a number).
void cuda_argmax(int32_t* out, const DeviceLogits& logits, cudaStream_t stream);

// The k largest logits of each row in decreasing order (ties: lower index first):
// values[r * k + i], indices[r * k + i]. 1 <= k <= vocab. O(k * vocab) per row: meant for the
// small k of top-k sampling.
void cuda_top_k(float* values, int32_t* indices, const DeviceLogits& logits, int k,
                cudaStream_t stream);

}  // namespace ssd
