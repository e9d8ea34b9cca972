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
// 8 FMAs per 16-byte chunk and row) costs next to nothing here.
//
// Bandwidth: every weight byte is read once per row tile with 16-byte loads (the 4 lanes of a
// quad read 64 contiguous bytes of one column), through a ring in shared memory that keeps
// several steps of loads in flight (below). Until 2026-12-04 the loads went to registers in
// batches of U steps, issued together and then drained, which kept the 8B one-row step 6-12%
// slower than the CUDA-core kernel's (ncu: DRAM at 66-84% of peak, long-scoreboard stalls
// 20 per issue, against the CUDA-core kernel's 76-92% and 9-15). Through the ring (H200, same
// shapes: DRAM 77-92%, 2-13 stalls per issue) the large GEMMs stream at 3.6-4.5 TB/s, and
// one-row steps are 1-2% (8B) and 4-5% (1B) shorter than the CUDA-core kernel's; 5, 16 and 32
// rows cost 1.19-1.21, 1.79-1.83 and 2.73-2.80 of its own 8B one-row step (docs/gpu-notes.md).
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

// 16 bytes from global to shared memory without passing through registers; src_bytes 0 fills
// zeros (a step past the end of k, a row past the call's last). Weights bypass L1 (.cg; each
// byte is read once) and ask the L2 for the whole 128-byte line (the next warp's step reads its
// other half); x stays in L1 (.ca), since every block re-reads it.
__device__ __forceinline__ void cp_async_cg16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_ca16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

template <int NT, int CT, int D>
constexpr size_t ring_bytes() {
  constexpr size_t ring = size_t(kMmaWarps) * D * (2 * CT + NT) * 32 * sizeof(uint4);
  constexpr size_t partial = size_t(kMmaWarps) * (CT * 16) * (NT * 8 + 1) * sizeof(float);
  return ring > partial ? ring : partial;
}

// One block: CT tiles of 16 columns, every row in tiles of NT * 8, the whole k range.
//
// The ring. Each lane's 16-byte pieces of a step (its weights, then its x rows) are copied into
// a ring of D steps in shared memory with cp.async, D - 1 steps ahead of the MMAs, so D - 1 steps
// are in flight at all times without holding registers. Each lane reads back only what it copied
// itself, so the loop needs no barrier; the ring's memory then holds the 8 warps' partial sums.
//
// Fragments. Lane l is in quad g = l / 4 at place q = l % 4. For k-step s it loads 16 bytes
// (elements 32 s + 8 q .. + 7) of columns g and g + 8 of each column tile, and of rows g of each
// row tile. An MMA's k index is a position, not an address: its positions 2q, 2q + 1, 2q + 8,
// 2q + 9 (a lane's share of A's row and of B's column) take the lane's elements 0-3 in the first
// MMA and 4-7 in the second, for A and B alike, so the two MMAs add each of the step's 32
// products exactly once. Accumulator i of a lane is column g + 8 (i / 2) and row 2q + i % 2.
template <int NT, int CT, int D>
__global__ void __launch_bounds__(kMmaThreads)
    matmul_mma_ring_kernel(bf16* __restrict__ out, const bf16* __restrict__ x,
                           const bf16* __restrict__ w, int rows, int in, int out_dim) {
  constexpr int kPieces = 2 * CT + NT;  // the weights' loads of a step, then x's
  constexpr int kCols = CT * 16, kRows = NT * 8;
  extern __shared__ uint4 ring[];  // [kMmaWarps][D][kPieces][32]; then partial sums
  auto& partial = *reinterpret_cast<float(*)[kMmaWarps][kCols][kRows + 1]>(ring);

  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int chunks = in / kChunk;
  const int steps = (chunks + kStepChunks - 1) / kStepChunks;
  const int j0 = int(blockIdx.x) * kCols;
  const uint4* wcol[CT][2];
#pragma unroll
  for (int c = 0; c < CT; ++c)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int j = min(j0 + c * 16 + h * 8 + g, out_dim - 1);
      wcol[c][h] = reinterpret_cast<const uint4*>(w + size_t(j) * size_t(in));
    }
  uint4* mine = ring + size_t(warp) * D * kPieces * 32 + lane;
  const int my_steps = steps > warp ? (steps - warp + kMmaWarps - 1) / kMmaWarps : 0;

  for (int r0 = 0; r0 < rows; r0 += kRows) {
    const uint4* xrow[NT];
    bool xvalid[NT];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const int r = r0 + n * 8 + g;
      xvalid[n] = r < rows;
      xrow[n] = reinterpret_cast<const uint4*>(x + size_t(min(r, rows - 1)) * size_t(in));
    }
    int write_slot = 0;
    auto issue = [&](int i) {
      if (i < my_steps) {
        const int ch = (warp + i * kMmaWarps) * kStepChunks + q;
        const bool in_k = ch < chunks;
        const int at = in_k ? ch : 0;
        uint4* slot = mine + write_slot * kPieces * 32;
#pragma unroll
        for (int c = 0; c < CT; ++c)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            cp_async_cg16(slot + (2 * c + h) * 32, wcol[c][h] + at, in_k ? 16 : 0);
#pragma unroll
        for (int n = 0; n < NT; ++n)
          cp_async_ca16(slot + (2 * CT + n) * 32, xrow[n] + at, in_k && xvalid[n] ? 16 : 0);
      }
      cp_async_commit();  // empty past the warp's steps, so wait_group's count stays exact
      write_slot = write_slot + 1 == D ? 0 : write_slot + 1;
    };
#pragma unroll
    for (int i = 0; i < D - 1; ++i) issue(i);

    float acc[CT][NT][4];
#pragma unroll
    for (int c = 0; c < CT; ++c)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[c][n][i] = 0.0f;
    int read_slot = 0;
    for (int i = 0; i < my_steps; ++i) {
      // The slot written now was read (and its MMAs issued) in the step before.
      issue(i + D - 1);
      cp_async_wait<D - 1>();
      const uint4* slot = mine + read_slot * kPieces * 32;
      uint4 xr[NT];
#pragma unroll
      for (int n = 0; n < NT; ++n) xr[n] = slot[(2 * CT + n) * 32];
#pragma unroll
      for (int c = 0; c < CT; ++c) {
        const uint4 a = slot[(2 * c) * 32], b = slot[(2 * c + 1) * 32];
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          mma_bf16(acc[c][n], a.x, b.x, a.y, b.y, xr[n].x, xr[n].y);
          mma_bf16(acc[c][n], a.z, b.z, a.w, b.w, xr[n].z, xr[n].w);
        }
      }
      read_slot = read_slot + 1 == D ? 0 : read_slot + 1;
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with the ring, which now holds the partial sums

#pragma unroll
    for (int c = 0; c < CT; ++c)
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          partial[warp][c * 16 + g + (i >> 1) * 8][n * 8 + 2 * q + (i & 1)] = acc[c][n][i];
    __syncthreads();
    for (int e = int(threadIdx.x); e < kCols * kRows; e += kMmaThreads) {
      const int cl = e % kCols, rl = e / kCols;
      const int row = r0 + rl, col = j0 + cl;
      if (row < rows && col < out_dim) {
        const float s =
            ((partial[0][cl][rl] + partial[1][cl][rl]) +
             (partial[2][cl][rl] + partial[3][cl][rl])) +
            ((partial[4][cl][rl] + partial[5][cl][rl]) + (partial[6][cl][rl] + partial[7][cl][rl]));
        out[size_t(row) * size_t(out_dim) + size_t(col)] = __float2bfloat16(s);
      }
    }
    __syncthreads();  // the next pass's copies overwrite the partial sums
  }
}

template <int NT, int CT, int D>
void launch_ring(bf16* out, const bf16* x, const bf16* w, int rows, int in, int out_dim,
                 cudaStream_t stream) {
  constexpr size_t bytes = ring_bytes<NT, CT, D>();
  static const bool attribute_set = [] {
    SSD_CUDA_CHECK(cudaFuncSetAttribute(matmul_mma_ring_kernel<NT, CT, D>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    return true;
  }();
  (void)attribute_set;
  const unsigned blocks = unsigned((out_dim + CT * 16 - 1) / (CT * 16));
  matmul_mma_ring_kernel<NT, CT, D>
      <<<blocks, kMmaThreads, bytes, stream>>>(out, x, w, rows, in, out_dim);
  SSD_CUDA_CHECK_LAUNCH();
}

// Steps in flight per warp (D - 1), by tile: the most that still leaves several blocks per SM.
// Measured on an H200 (docs/gpu-notes.md, 2026-12-04 second entry; D = 2, 3, 4 and 6 compared
// per shape, interleaved): one-row tiles of 16 columns (q/k/v/o, down) are fastest with D = 6
// (72 KB, 3 blocks per SM), of 32 columns (gate/up, lm_head) with D = 2 (40 KB, 5 blocks), the
// 16-row tiles with D = 4, the 32-row tiles, whose steps are 4x the MMAs, with D = 2.
template <int NT, int CT>
constexpr int ring_stages() {
  if constexpr (NT == 1) return CT == 1 ? 6 : 2;
  if constexpr (NT == 2) return 4;
  return 2;
}

template <int NT>
void launch_ring_cols(bool wide, bf16* out, const bf16* x, const bf16* w, int rows, int in,
                      int out_dim, cudaStream_t stream) {
  if (wide) return launch_ring<NT, 2, ring_stages<NT, 2>()>(out, x, w, rows, in, out_dim, stream);
  launch_ring<NT, 1, ring_stages<NT, 1>()>(out, x, w, rows, in, out_dim, stream);
}

}  // namespace

void matmul_invariant_tc(bf16* out, const bf16* x, const bf16* w, int rows, int in, int out_dim,
                         int sm_count, cudaStream_t stream) {
  if (rows <= 0 || out_dim <= 0) return;
  if (in % kChunk != 0 || !aligned16(x) || !aligned16(w))
    return matmul_invariant(out, x, w, rows, in, out_dim, sm_count, stream);
  // 32 columns per block (each x load serves twice the weights) where that still leaves >= 2
  // blocks per SM; 16 otherwise. Row tiles of 8, 16 or 32 (more rows: passes of 32, the weights
  // again from L2). No choice here or of the ring's depth affects the results.
  const bool wide = (out_dim + 31) / 32 >= 2 * sm_count;
  if (rows <= 8) return launch_ring_cols<1>(wide, out, x, w, rows, in, out_dim, stream);
  if (rows <= 16) return launch_ring_cols<2>(wide, out, x, w, rows, in, out_dim, stream);
  return launch_ring_cols<4>(wide, out, x, w, rows, in, out_dim, stream);
}

}  // namespace ssd::cuda_kernels
