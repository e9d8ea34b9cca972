// The exponentials of a row that a softmax normalises (the decode layer's softmax and SAGUARO's
// distribution over host logits, the CPU backend's attention scores), 16 lanes at a time. The
// scalar loops they replace called exp once per element in a dependency chain with the running
// total: 130 us per row of a 32k vocabulary, the largest host cost of a sampled verification
// (bench/bench_token_selection), and 40% of a 5-row verification's attention.
#pragma once

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

}  // namespace ssd
