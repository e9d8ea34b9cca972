// The batch-invariant GEMM for few rows on tensor cores (--gemm invariant-tc):
// out[r][j] = sum_k x[r][k] * w[j][k], x [rows][in], w [out][in] (HF layout), bf16 in and out,
// fp32 accumulation; the same contract as matmul_kernel.cu's CUDA-core kernel, another order.
//
// Summation order (the invariant). mma.sync m16n8k16, bf16 inputs, fp32 accumulators, with
// A = 16 columns of w and B = 8 rows of x (transposed). k is cut into 32-element steps; warp v
// of the block's 8 takes steps v, v + 8, v + 16, ... in increasing order, and each step is two
// MMAs into the same accumulators. The 8 warps' sums are then added as
// ((w0 + w1) + (w2 + w3)) + ((w4 + w5) + (w6 + w7)). An MMA computes each output element from
// its own row of A and column of B alone, so what one output's sum is made of, and in which
// order, depends on `in` only. Rows go in tiles of 8, 16 or 32 (one, two or four MMA columns)
// and columns in groups of 16 or 32 per block; those only decide which dot products share a
// pass over the weights, never how one is summed, so a row's output is bit-identical whatever
// the number of rows in the call (a tile's rows past the call's last are zeros, never stored).
// Shapes this path does not take (in % 8 != 0, x or w not 16-byte aligned) go to
// matmul_invariant, whose choice of path depends on the same shape and alignment alone.
//
// Why tensor cores for a memory-bound product: bf16 products are exact in fp32 and the weights
// need no widening, so the row work that bounds the CUDA-core kernel past ~2 rows (widening x,
// 8 FMAs per 16-byte chunk and row) costs next to nothing here. H100 (docs/gpu-notes.md,
// 2026-11-26 seventh session), context 512, against the CUDA-core kernel: llama-3.2-1b steps of
// 5, 8 and 16 rows 9%, 18% and 32% shorter, one row level; llama-3.1-8b 8 and 16 rows 22% and
// 51% shorter, 5 rows level, but one row 11% longer -- which is why it is not the default.
//
// Bandwidth: every weight byte is read once per row tile with 16-byte loads (the 4 lanes of a
// quad read 64 contiguous bytes of one column), and U steps' loads (256 bytes of weights per
// lane) are issued before their first use. x is small and re-read from L1/L2 by every block.
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda_kernels {
namespace {

constexpr int kMmaWarps = 8;  // the k range is split over 8 warps
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kChunk = 8;       // bf16 elements per 16-byte load
constexpr int kStepChunks = 4;  // one k-step = 32 elements = 4 chunks, one per lane of a quad

// d += A B for one m16n8k16 tile: A 16x16 (row-major, bf16 pairs), B 16x8 (column-major), fp32 d.
__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One block: CT tiles of 16 columns, every row in tiles of NT * 8, the whole k range.
//
// Fragments. Lane l is in quad g = l / 4 at place q = l % 4. For k-step s it loads 16 bytes
// (elements 32 s + 8 q .. + 7) of columns g and g + 8 of each column tile, and of rows g of each
// row tile. An MMA's k index is a position, not an address: its positions 2q, 2q + 1, 2q + 8,
// 2q + 9 (a lane's share of A's row and of B's column) take the lane's elements 0-3 in the first
// MMA and 4-7 in the second, for A and B alike, so the two MMAs add each of the step's 32
// products exactly once. Accumulator i of a lane is column g + 8 (i / 2) and row 2q + i % 2.
template <int NT, int CT>
__global__ void __launch_bounds__(kMmaThreads)
    matmul_mma_kernel(bf16* __restrict__ out, const bf16* __restrict__ x,
                      const bf16* __restrict__ w, int rows, int in, int out_dim) {
  // k-steps whose loads are in flight together: 256 bytes of weights per lane (more row tiles
  // hold more x in registers).
  constexpr int U = (NT >= 4 ? 4 : 8) / CT;
  constexpr int kCols = CT * 16, kRows = NT * 8;
  __shared__ float partial[kMmaWarps][kCols][kRows + 1];  // +1: no bank conflicts when summed

  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int chunks = in / kChunk;
  const int steps = (chunks + kStepChunks - 1) / kStepChunks;  // the last may be partial
  const int j0 = int(blockIdx.x) * kCols;
  const uint4* wcol[CT][2];
#pragma unroll
  for (int c = 0; c < CT; ++c)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // Columns past the end (last block) read the last column and are never stored.
      const int j = min(j0 + c * 16 + h * 8 + g, out_dim - 1);
      wcol[c][h] = reinterpret_cast<const uint4*>(w + size_t(j) * size_t(in));
    }

  for (int r0 = 0; r0 < rows; r0 += kRows) {
    const uint4* xrow[NT];
    bool xvalid[NT];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const int r = r0 + n * 8 + g;
      xvalid[n] = r < rows;
      xrow[n] = reinterpret_cast<const uint4*>(x + size_t(min(r, rows - 1)) * size_t(in));
    }
    float acc[CT][NT][4];
#pragma unroll
    for (int c = 0; c < CT; ++c)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[c][n][i] = 0.0f;

    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    for (int s0 = warp; s0 < steps; s0 += U * kMmaWarps) {
      uint4 wv[U][CT][2], xv[U][NT];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int ch = (s0 + u * kMmaWarps) * kStepChunks + q;
        const bool in_k = ch < chunks;
#pragma unroll
        for (int c = 0; c < CT; ++c)
#pragma unroll
          for (int h = 0; h < 2; ++h) wv[u][c][h] = in_k ? __ldg(wcol[c][h] + ch) : zero;
#pragma unroll
        for (int n = 0; n < NT; ++n) xv[u][n] = in_k && xvalid[n] ? __ldg(xrow[n] + ch) : zero;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (s0 + u * kMmaWarps >= steps) break;  // the same for the whole warp
#pragma unroll
        for (int c = 0; c < CT; ++c)
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            const uint4 &a = wv[u][c][0], &b = wv[u][c][1], &xr = xv[u][n];
            mma_bf16(acc[c][n], a.x, b.x, a.y, b.y, xr.x, xr.y);
            mma_bf16(acc[c][n], a.z, b.z, a.w, b.w, xr.z, xr.w);
          }
      }
    }

#pragma unroll
    for (int c = 0; c < CT; ++c)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          partial[warp][c * 16 + g + (i >> 1) * 8][n * 8 + 2 * q + (i & 1)] = acc[c][n][i];
    __syncthreads();
    static_assert(kMmaWarps == 8, "the final sum below adds exactly eight warp partials");
    for (int e = int(threadIdx.x); e < kCols * kRows; e += kMmaThreads) {
      const int cl = e % kCols, rl = e / kCols;  // neighbouring threads store neighbouring columns
      const int row = r0 + rl, col = j0 + cl;
      if (row < rows && col < out_dim) {
        const float s =
            ((partial[0][cl][rl] + partial[1][cl][rl]) +
             (partial[2][cl][rl] + partial[3][cl][rl])) +
            ((partial[4][cl][rl] + partial[5][cl][rl]) + (partial[6][cl][rl] + partial[7][cl][rl]));
        out[size_t(row) * size_t(out_dim) + size_t(col)] = __float2bfloat16(s);
      }
    }
    __syncthreads();
  }
}

template <int NT, int CT>
void launch_mma(bf16* out, const bf16* x, const bf16* w, int rows, int in, int out_dim,
                cudaStream_t stream) {
  const unsigned blocks = unsigned((out_dim + CT * 16 - 1) / (CT * 16));
  matmul_mma_kernel<NT, CT><<<blocks, kMmaThreads, 0, stream>>>(out, x, w, rows, in, out_dim);
  SSD_CUDA_CHECK_LAUNCH();
}

template <int NT>
void launch_mma_cols(bool wide, bf16* out, const bf16* x, const bf16* w, int rows, int in,
                     int out_dim, cudaStream_t stream) {
  if (wide) return launch_mma<NT, 2>(out, x, w, rows, in, out_dim, stream);
  launch_mma<NT, 1>(out, x, w, rows, in, out_dim, stream);
}

}  // namespace

void matmul_invariant_tc(bf16* out, const bf16* x, const bf16* w, int rows, int in, int out_dim,
                         int sm_count, cudaStream_t stream) {
  if (rows <= 0 || out_dim <= 0) return;
  if (in % kChunk != 0 || !aligned16(x) || !aligned16(w))
    return matmul_invariant(out, x, w, rows, in, out_dim, sm_count, stream);
  // 32 columns per block (each x load serves twice the weights) where that still leaves >= 2
  // blocks per SM; 16 otherwise. Row tiles of 8, 16 or 32 (more rows: passes of 32, the weights
  // again from L2). Neither choice affects the results.
  const bool wide = (out_dim + 31) / 32 >= 2 * sm_count;
  if (rows <= 8) return launch_mma_cols<1>(wide, out, x, w, rows, in, out_dim, stream);
  if (rows <= 16) return launch_mma_cols<2>(wide, out, x, w, rows, in, out_dim, stream);
  return launch_mma_cols<4>(wide, out, x, w, rows, in, out_dim, stream);
}

}  // namespace ssd::cuda_kernels
