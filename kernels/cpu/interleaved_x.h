// x of a GEMM call that is one tile of rows (matmul_packed.cpp, 3 to 5 rows: a verification's
// K + 1), copied with its k-vectors interleaved by row: [k-vector][row][kLanes], so that a
// k-step's vectors of x for all the rows are one contiguous run (the k tail past the last whole
// vector stays in x). Internal to kernels/cpu.
//
// Row-major, a tile's x is R streams 4 * in bytes apart, and it falls out of L1 behind the weight
// stream. A stand-alone loop of a 5-row tile's 25 fmas per 320 bytes of fp32 weights streamed
// 37 GB/s with x in registers, 25-27 with 5 rows of a 768-wide x (36 with 256 columns of it) and
// 32 with the rows interleaved. bench_gemm, fp32 weights, 5 rows, 2 interleaved runs: 124m.qo
// 81-83 -> 67-69 us, 124m.gate 214-223 -> 169-180, 124m.head 3.45-3.52 -> 2.73-2.78 ms; bf16
// head 5-7% faster, the rest level (its tile is bound by the fmas beside the stream, not by x).
// bench_decode llama-124m, 5 rows, 3 interleaved runs: fp32 14.8 -> 12.7-13.4 ms, bf16
// 5.93-6.35 -> 5.78-5.96. The same values reach the same fmas in the same order: the bits do not
// change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/simd.h"

namespace ssd {

class InterleavedX {
 public:
  // The copy of x's `rows` rows of `in` values, 64-byte aligned: row r's k-vector at k (a
  // multiple of kLanes below in_vec) lies at r * kLanes + k * rows. Valid until the next build.
  const float* build(const float* x, int rows, int in) {
    using namespace simd;
    const int in_vec = in / kLanes * kLanes;
    storage_.resize(size_t(rows) * in_vec + 64 / sizeof(float));
    float* copy = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(storage_.data()) + 63) &
                                           ~uintptr_t(63));
    for (int k = 0; k < in_vec; k += kLanes)
      for (int r = 0; r < rows; ++r)
        store_vec(copy + size_t(k) * rows + size_t(r) * kLanes, load_vec(x + size_t(r) * in + k));
    return copy;
  }

 private:
  std::vector<float> storage_;
};

}  // namespace ssd
