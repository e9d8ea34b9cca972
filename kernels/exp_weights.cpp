#include "kernels/exp_weights.h"

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>

// The helpers below take and return 16-float vectors. Without AVX-512 in -march, GCC and Clang
// warn that such a vector's calling convention differs from an AVX-512 build's: a concern for
// calls between translation units, and these functions are local to this one.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace ssd {
namespace {

// GCC's vector extension (also Clang's): one AVX-512 register of floats where the build's
// -march has it, two AVX2 registers otherwise.
constexpr int kLanes = 16;
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
using Ints = int32_t __attribute__((vector_size(kLanes * sizeof(int32_t))));
using HalfFloats = float __attribute__((vector_size(kLanes / 2 * sizeof(float))));
using Doubles = double __attribute__((vector_size(kLanes / 2 * sizeof(double))));

Floats splat(float v) {
  Floats out;
  for (int l = 0; l < kLanes; ++l) out[l] = v;
  return out;
}

// e^a lane by lane for a <= ~0: a = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2 is
// exact to float precision), e^r by its Taylor series to r^7 (truncation under 6e-9 relative,
// a tenth of float's rounding), and 2^n made in the exponent bits. a < -87 and NaN give 0,
// which keeps 2^n a normal float; a is capped at 88 (e^88 is near float's largest).
Floats exp_lanes(Floats a) {
  const Ints kept = a >= splat(-87.0f);  // false for NaN
  a = kept ? a : splat(-87.0f);
  a = a <= splat(88.0f) ? a : splat(88.0f);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const Floats n = (a * 1.44269504088896341f + kRound) - kRound;
  const Floats r = (a - n * 0.693359375f) - n * -2.12194440e-4f;
  Floats p = splat(1.0f / 5040.0f);
  for (float c : {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f})
    p = p * r + c;
  const Ints exponent = (__builtin_convertvector(n, Ints) + 127) << 23;
  Floats two_to_n;
  std::memcpy(&two_to_n, &exponent, sizeof two_to_n);
  return kept ? p * two_to_n : splat(0.0f);
}

Doubles widen_sum(Floats v) {
  HalfFloats low, high;
  std::memcpy(&low, &v, sizeof low);
  std::memcpy(&high, reinterpret_cast<const char*>(&v) + sizeof low, sizeof high);
  return __builtin_convertvector(low, Doubles) + __builtin_convertvector(high, Doubles);
}

Floats silu_mul_lanes(Floats g, Floats u) {
  const Ints positive = g >= splat(0.0f);  // false for NaN, which exp_lanes turns into 0
  const Floats e = exp_lanes(positive ? -g : g);
  const Floats one = splat(1.0f);
  const Floats sigmoid = positive ? one / (one + e) : e / (one + e);
  return g * sigmoid * u;
}

double total(Doubles sum) {
  double out = 0.0;
  for (int l = 0; l < kLanes / 2; ++l) out += sum[l];
  return out;
}

}  // namespace

double exp_weights(const float* x, int n, float minus, float scale, float* out) {
  Doubles sum{};
  int i = 0;
  Floats v, e;
  for (; i + kLanes <= n; i += kLanes) {  // whole blocks: fixed-size copies stay in registers
    std::memcpy(&v, x + i, sizeof v);
    e = exp_lanes((v - minus) * scale);  // NaN in, 0 out
    std::memcpy(out + i, &e, sizeof e);
    sum += widen_sum(e);
  }
  if (i < n) {  // the short last block: the lanes past n are -inf, weight 0
    v = splat(-std::numeric_limits<float>::infinity());
    std::memcpy(&v, x + i, size_t(n - i) * sizeof(float));
    e = exp_lanes((v - minus) * scale);
    std::memcpy(out + i, &e, size_t(n - i) * sizeof(float));
    sum += widen_sum(e);
  }
  return total(sum);
}

float max_ignoring_nan(const float* x, int n) {
  Floats best = splat(-std::numeric_limits<float>::infinity()), v;
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    std::memcpy(&v, x + i, sizeof v);
    best = v > best ? v : best;  // NaN never wins
  }
  float out = -std::numeric_limits<float>::infinity();
  for (int l = 0; l < kLanes; ++l) out = best[l] > out ? best[l] : out;
  for (; i < n; ++i) out = x[i] > out ? x[i] : out;
  return out;
}

void silu_mul(const float* gate, const float* up, size_t n, float* out) {
  size_t i = 0;
  Floats g, u, o;
  for (; i + kLanes <= n; i += kLanes) {
    std::memcpy(&g, gate + i, sizeof g);
    std::memcpy(&u, up + i, sizeof u);
    o = silu_mul_lanes(g, u);
    std::memcpy(out + i, &o, sizeof o);
  }
  if (i < n) {
    g = splat(0.0f);
    u = splat(0.0f);
    std::memcpy(&g, gate + i, (n - i) * sizeof(float));
    std::memcpy(&u, up + i, (n - i) * sizeof(float));
    o = silu_mul_lanes(g, u);
    std::memcpy(out + i, &o, (n - i) * sizeof(float));
  }
}

double sum_in_double(const float* x, int n) {
  Doubles sum{};
  int i = 0;
  Floats v;
  for (; i + kLanes <= n; i += kLanes) {
    std::memcpy(&v, x + i, sizeof v);
    sum += widen_sum(v);
  }
  if (i < n) {
    v = splat(0.0f);
    std::memcpy(&v, x + i, size_t(n - i) * sizeof(float));
    sum += widen_sum(v);
  }
  return total(sum);
}

}  // namespace ssd
