// The batch-invariant GEMM for few rows (decode, verification, branch decoding):
// out[r][j] = sum_k x[r][k] * w[j][k], x [rows][in], w [out][in] (HF layout), bf16 in and out,
// fp32 accumulation.
//
// Summation order (the invariant). A block of 128 threads owns COLS output columns and, for
// each, reduces the whole k range:
//   - vector path (in % 8 == 0, 16-byte aligned x and w): k is cut into 8-element chunks (one
//     16-byte load); thread t takes chunks t, t + 128, t + 256, ... in increasing order and
//     accumulates each chunk's 8 products in element order with fmaf into one fp32 partial;
//   - scalar path (any other shape): thread t takes elements t, t + 128, ... in order;
//   - then each warp reduces its 32 partials with a fixed butterfly (warp_sum), and the four
//     warp sums are added as (w0 + w1) + (w2 + w3).
// That order depends on `in` (and which path `in` selects) only. Rows are processed in tiles of
// RT rows (1-5, or 8) and columns in groups of COLS per block; RT and COLS are chosen from `rows`
// and the shape, but they only decide which dot products share a pass over the weights, never how
// one is summed. So a row's output is bit-identical whatever the number of rows in the call.
//
// Bandwidth (M = 1): every weight byte is read once per call with 16-byte coalesced loads
// (a block streams 2 KB of each of its columns per step), U = 16 / COLS chunk loads per column
// (8 / COLS with 8-row tiles) are issued (predicated) before their first use, and COLS is
// chosen so the grid has at least ~4 blocks per SM. x is small and re-read from L1/L2 by every
// block. Rows beyond RT re-stream the block's weights once per row tile (mostly from L2); at
// rows >= ~16 the kernel is bound by fp32 FMA throughput rather than memory, which is why
// prefill goes to cuBLAS.
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

namespace ssd::cuda_kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 8;  // bf16 elements per 16-byte load

// acc += the 8 products of one chunk, element 0 first.
__device__ __forceinline__ float dot_chunk(const uint4& xv, const uint4& wv, float acc) {
  acc = fmaf(bf16_lo(xv.x), bf16_lo(wv.x), acc);
  acc = fmaf(bf16_hi(xv.x), bf16_hi(wv.x), acc);
  acc = fmaf(bf16_lo(xv.y), bf16_lo(wv.y), acc);
  acc = fmaf(bf16_hi(xv.y), bf16_hi(wv.y), acc);
  acc = fmaf(bf16_lo(xv.z), bf16_lo(wv.z), acc);
  acc = fmaf(bf16_hi(xv.z), bf16_hi(wv.z), acc);
  acc = fmaf(bf16_lo(xv.w), bf16_lo(wv.w), acc);
  acc = fmaf(bf16_hi(xv.w), bf16_hi(wv.w), acc);
  return acc;
}

// Reduces acc[RT][COLS] over the block and writes the valid outputs of row tile r0. Ends with
// a barrier, so `partial` may be reused at once.
template <int RT, int COLS>
__device__ __forceinline__ void reduce_and_store(float (&acc)[RT][COLS],
                                                 float (&partial)[kWarps][RT][COLS],
                                                 bf16* __restrict__ out, int r0, int rows, int j0,
                                                 int out_dim) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int c = 0; c < COLS; ++c) {
      const float v = warp_sum(acc[r][c]);
      if (lane == 0) partial[warp][r][c] = v;
    }
  __syncthreads();
  static_assert(kWarps == 4, "the final sum below adds exactly four warp partials");
  for (int e = tid; e < RT * COLS; e += kThreads) {
    const int r = e / COLS, c = e % COLS;
    const int row = r0 + r, col = j0 + c;
    if (row < rows && col < out_dim) {
      const float s = (partial[0][r][c] + partial[1][r][c]) + (partial[2][r][c] + partial[3][r][c]);
      out[size_t(row) * size_t(out_dim) + size_t(col)] = __float2bfloat16(s);
    }
  }
  __syncthreads();
}

template <int RT, int COLS>
__global__ void __launch_bounds__(kThreads)
    matmul_vec_kernel(bf16* __restrict__ out, const bf16* __restrict__ x,
                      const bf16* __restrict__ w, int rows, int in, int out_dim) {
  // Chunks in flight per column and thread: 16 loads of 16 bytes per thread, 8 with 8-row
  // tiles (their accumulators need the registers; they are FMA-bound anyway).
  constexpr int U = (RT >= 8 ? 8 : 16) / COLS;
  static_assert(COLS >= 1 && COLS <= 8 && U >= 1, "COLS in 1..8");
  __shared__ float partial[kWarps][RT][COLS];

  const int tid = threadIdx.x;
  const int chunks = in / kChunk;
  const int j0 = int(blockIdx.x) * COLS;
  const uint4* wrow[COLS];
#pragma unroll
  for (int c = 0; c < COLS; ++c) {
    // Columns past the end (last block) read the last column and are never stored.
    const int j = min(j0 + c, out_dim - 1);
    wrow[c] = reinterpret_cast<const uint4*>(w + size_t(j) * size_t(in));
  }

  for (int r0 = 0; r0 < rows; r0 += RT) {
    const uint4* xrow[RT];
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      // Rows past the end repeat the last row (cheap L1 hits) and are never stored.
      const int rr = min(r0 + r, rows - 1);
      xrow[r] = reinterpret_cast<const uint4*>(x + size_t(rr) * size_t(in));
    }
    float acc[RT][COLS];
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int c = 0; c < COLS; ++c) acc[r][c] = 0.0f;

    // Groups of U chunks per column: every weight load of the group is issued (predicated on
    // the chunk existing) before the first FMA, then the chunks are accumulated in increasing
    // order -- the same sequence of fmaf per accumulator as one chunk at a time.
    for (int base = tid; base < chunks; base += U * kThreads) {
      uint4 wv[U][COLS];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int ch = base + u * kThreads;
#pragma unroll
        for (int c = 0; c < COLS; ++c)
          wv[u][c] = ch < chunks ? __ldg(wrow[c] + ch) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int ch = base + u * kThreads;
        if (ch < chunks) {
#pragma unroll
          for (int r = 0; r < RT; ++r) {
            const uint4 xv = __ldg(xrow[r] + ch);
#pragma unroll
            for (int c = 0; c < COLS; ++c) acc[r][c] = dot_chunk(xv, wv[u][c], acc[r][c]);
          }
        }
      }
    }
    reduce_and_store<RT, COLS>(acc, partial, out, r0, rows, j0, out_dim);
  }
}

// Any shape: element-wise loads, one column per block.
template <int RT>
__global__ void __launch_bounds__(kThreads)
    matmul_scalar_kernel(bf16* __restrict__ out, const bf16* __restrict__ x,
                         const bf16* __restrict__ w, int rows, int in, int out_dim) {
  __shared__ float partial[kWarps][RT][1];
  const int tid = threadIdx.x;
  const int j0 = int(blockIdx.x);
  const bf16* wrow = w + size_t(j0) * size_t(in);
  for (int r0 = 0; r0 < rows; r0 += RT) {
    const bf16* xrow[RT];
#pragma unroll
    for (int r = 0; r < RT; ++r) xrow[r] = x + size_t(min(r0 + r, rows - 1)) * size_t(in);
    float acc[RT][1];
#pragma unroll
    for (int r = 0; r < RT; ++r) acc[r][0] = 0.0f;
    for (int k = tid; k < in; k += kThreads) {
      const float wk = __bfloat162float(wrow[k]);
#pragma unroll
      for (int r = 0; r < RT; ++r) acc[r][0] = fmaf(__bfloat162float(xrow[r][k]), wk, acc[r][0]);
    }
    reduce_and_store<RT, 1>(acc, partial, out, r0, rows, j0, out_dim);
  }
}

template <int RT, int COLS>
void launch_vec(bf16* out, const bf16* x, const bf16* w, int rows, int in, int out_dim,
                cudaStream_t stream) {
  const unsigned blocks = unsigned((out_dim + COLS - 1) / COLS);
  matmul_vec_kernel<RT, COLS><<<blocks, kThreads, 0, stream>>>(out, x, w, rows, in, out_dim);
  SSD_CUDA_CHECK_LAUNCH();
}

template <int RT>
void launch_vec_cols(int cols, bf16* out, const bf16* x, const bf16* w, int rows, int in,
                     int out_dim, cudaStream_t stream) {
  switch (cols) {
    case 8:
      if constexpr (RT <= 4) {
        launch_vec<RT, 8>(out, x, w, rows, in, out_dim, stream);
        return;
      }
      [[fallthrough]];
    case 4:
      launch_vec<RT, 4>(out, x, w, rows, in, out_dim, stream);
      return;
    case 2:
      launch_vec<RT, 2>(out, x, w, rows, in, out_dim, stream);
      return;
    default:
      launch_vec<RT, 1>(out, x, w, rows, in, out_dim, stream);
      return;
  }
}

template <int RT>
void launch_scalar(bf16* out, const bf16* x, const bf16* w, int rows, int in, int out_dim,
                   cudaStream_t stream) {
  matmul_scalar_kernel<RT>
      <<<unsigned(out_dim), kThreads, 0, stream>>>(out, x, w, rows, in, out_dim);
  SSD_CUDA_CHECK_LAUNCH();
}

}  // namespace

void matmul_invariant(bf16* out, const bf16* x, const bf16* w, int rows, int in, int out_dim,
                      int sm_count, cudaStream_t stream) {
  if (rows <= 0 || out_dim <= 0) return;
  // Row tile: the registers each thread keeps per column (acc[RT][COLS]). A call of 1 to 5 rows
  // (decode; K = 1..4 verification) is one tile of exactly its rows: past ~2 rows the tile's
  // time is its per-row work (widening x, the FMAs), and 5 rows in an 8-row tile did 8 rows'
  // work (H100: a 1B 5-row step 1.52 one-row steps). 6 to 8 rows and each 8 of more share a tile
  // of 8.
  const int rt = rows <= 5 ? rows : 8;
  const bool vec = in % kChunk == 0 && aligned16(x) && aligned16(w);
  if (!vec) {
    switch (rt) {
      case 1:
        return launch_scalar<1>(out, x, w, rows, in, out_dim, stream);
      case 2:
        return launch_scalar<2>(out, x, w, rows, in, out_dim, stream);
      case 3:
        return launch_scalar<3>(out, x, w, rows, in, out_dim, stream);
      case 4:
        return launch_scalar<4>(out, x, w, rows, in, out_dim, stream);
      case 5:
        return launch_scalar<5>(out, x, w, rows, in, out_dim, stream);
      default:
        return launch_scalar<8>(out, x, w, rows, in, out_dim, stream);
    }
  }
  // Columns per block: as many as keep >= 4 blocks per SM (more columns per block share each
  // x load; fewer give more blocks). Never affects the results.
  const int max_cols = rt <= 4 ? 8 : 4;
  int cols = max_cols;
  while (cols > 1 && (out_dim + cols - 1) / cols < 4 * sm_count) cols /= 2;
  switch (rt) {
    case 1:
      return launch_vec_cols<1>(cols, out, x, w, rows, in, out_dim, stream);
    case 2:
      return launch_vec_cols<2>(cols, out, x, w, rows, in, out_dim, stream);
    case 3:
      return launch_vec_cols<3>(cols, out, x, w, rows, in, out_dim, stream);
    case 4:
      return launch_vec_cols<4>(cols, out, x, w, rows, in, out_dim, stream);
    case 5:
      return launch_vec_cols<5>(cols, out, x, w, rows, in, out_dim, stream);
    default:
      return launch_vec_cols<8>(cols, out, x, w, rows, in, out_dim, stream);
  }
}

}  // namespace ssd::cuda_kernels
