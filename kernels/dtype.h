// Element types of stored tensors: checkpoints (safetensors) and backend weight buffers.
// Activations are always fp32 on the CPU; weights keep the checkpoint's type so a decode step
// reads half the bytes of an fp32 copy, and are widened to fp32 in registers, which is exact.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ssd {

enum class DType { F32, BF16, F16 };

inline std::string dtype_name(DType dtype) {  // "F32", "BF16", "F16" (safetensors' names)
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
  }
  throw std::logic_error("dtype_name: bad DType");
}

inline size_t dtype_size(DType dtype) {
  return dtype == DType::F32 ? 4 : 2;
}

// bf16 is the top half of an fp32: widening is a shift, exact.
// (memcpy rather than std::bit_cast: CUDA translation units include this as C++17.)
inline float bf16_to_float(uint16_t bits) {
  const uint32_t wide = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// Round to nearest even; NaN stays a (quiet) NaN.
inline uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if (std::isnan(value)) return uint16_t((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return uint16_t((bits + rounding) >> 16);
}

// The fp32 value nearest to `value` that bf16 can hold.
inline float round_to_bf16(float value) {
  return bf16_to_float(float_to_bf16(value));
}

}  // namespace ssd
