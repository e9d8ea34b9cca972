// Counter-based random numbers for weights: every value is a pure function of (seed, tensor
// name, flat index), so any shard's slice can be generated without the rest of the tensor and
// equals the same part of the full tensor.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace ssd {

inline uint64_t mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t tensor_key(uint64_t seed, const std::string& name) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a
  for (unsigned char ch : name) hash = (hash ^ ch) * 0x100000001b3ULL;
  return mix64(seed ^ mix64(hash));
}

// Uniform in [-1, 1) for element `index` of the tensor keyed `key`.
inline float counter_uniform(uint64_t key, uint64_t index) {
  const uint64_t bits = mix64(key + index * 0x9e3779b97f4a7c15ULL);
  return float(int64_t(bits >> 40) - (int64_t(1) << 23)) * 0x1p-23f;
}

// Standard normal for element `index` (Box-Muller over two counter uniforms).
inline float counter_normal(uint64_t key, uint64_t index) {
  const uint64_t a = mix64(key + (2 * index) * 0x9e3779b97f4a7c15ULL);
  const uint64_t b = mix64(key + (2 * index + 1) * 0x9e3779b97f4a7c15ULL);
  const double u1 = (double(a >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = double(b >> 11) * 0x1.0p-53;
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace ssd
