// The exponentials of a row that a softmax normalises (the decode layer's softmax and SAGUARO's
// distribution over host logits, the CPU backend's attention scores), 16 lanes at a time. The
// scalar loops they replace called exp once per element in a dependency chain with the running
// total: 130 us per row of a 32k vocabulary, the largest host cost of a sampled verification
// (bench/bench_token_selection), and 40% of a 5-row verification's attention.
#pragma once

#include <cstddef>

namespace ssd {

// out[i] = exp((x[i] - minus) * scale) for i < n, NaN counting as -inf (weight 0); returns the
// sum of out in double. Requires (x[i] - minus) * scale <= ~0 for every i (minus at least the
// largest x when scale > 0): the callers subtract their row's largest log-weight, so nothing
// overflows. Within 2 float ulp of exp over [-87, 0]; below -87 (weights under 1.6e-38 of the
// largest) the result is 0. An error in `minus` multiplies every weight alike, so it cancels
// when the caller normalises.
double exp_weights(const float* x, int n, float minus, float scale, float* out);

// The largest of n floats (n >= 1), NaN counting as -inf: -inf when none is a number.
float max_ignoring_nan(const float* x, int n);

// The sum of n floats in double, 8 lanes at a time.
double sum_in_double(const float* x, int n);

// out[i] = silu(gate[i]) * up[i] = gate[i] * sigmoid(gate[i]) * up[i] for i < n, 16 lanes at a
// time (the CPU backend's SwiGLU, whose scalar exp was 3% of a 5-row verification). The
// sigmoid comes from e = exp(-|gate|) <= 1, as 1 / (1 + e) for gate >= 0 and e / (1 + e)
// below, so no exponential overflows. Within a few float ulp of gate / (1 + exp(-gate)) * up;
// NaN in gate gives NaN. `out` may be `gate` or `up`.
void silu_mul(const float* gate, const float* up, size_t n, float* out);

}  // namespace ssd
