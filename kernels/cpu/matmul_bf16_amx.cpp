// The bf16 x bf16 -> fp32 GEMM on AMX tiles (CpuCompute::Amx): x's rows rounded to bf16 (nearest
// even, as --compute bf16 and the GPU round them), multiplied with bf16 weights by TDPBF16PS,
// which takes a 16 x 32 tile of weights against a 32 x 16 tile of x and adds the 16 x 16 dot
// products of 32 pairs into fp32 accumulators: 8192 multiply-adds an instruction where vdpbf16ps
// does 32. This is the tensor-core regime of a GPU on a CPU core that has a tile unit (Intel's
// Sapphire Rapids and later): multi-row steps (verification, SSD's branch rows, batched
// verification, prefill) run at the weight stream's pace instead of the multiply-adds'.
//
// The weights are the tile's A operand, as they lie in the checkpoint ([out][in]): a panel of 16
// output rows stored k-vector by k-vector, 16 rows x 32 bf16 each, so that one tile load reads
// 1 KiB front to back (amx_layout.h; packed by pack_matrix_amx.cpp). x is the B operand, transposed
// into pairs (the tile unit's VNNI layout: tile row r holds x[m][2r], x[m][2r + 1] for each of up
// to 16 rows m of x). A tile of fp32 accumulators holds out[m][j] for the panel's 16 columns j and
// 16 rows m, transposed on the way out.
//
// Batch invariance: out[m][j] is summed by TDPBF16PS over the k-vectors in order, from zero, one
// instruction per k-vector, whatever other rows of x share the tile (an accumulator element reads
// only its own row of A and column of B). k past `in` is padded with zeros in both operands (a
// product of zeros adds +0). Which rows share a tile, which panels a thread takes, and how many
// passes a call makes change which dot products run together, never how one is summed. Its sums
// differ from --compute bf16's (vdpbf16ps sums 16 lanes, then reduces them in a tree), so the two
// are separate modes, each invariant.
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/amx_layout.h"
#include "kernels/cpu/amx_tile_config.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/dtype.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__)
#define SSD_AMX_KERNEL 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define SSD_AMX_KERNEL 0
#endif

namespace ssd {

#if SSD_AMX_KERNEL

using amx_layout::amx_k_vectors;
using amx_layout::amx_panels;
using amx_layout::kAmxK;
using amx_layout::kAmxPanel;
using amx_layout::kAmxTileBytes;

namespace {

// The tile unit needs the CPU's AMX-TILE and AMX-BF16, the OS saving the tile state (XCR0 bits
// 17 and 18) and, on Linux, this process's permission to use it (arch_prctl, once a process).
bool tile_unit_usable() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
  if (!amx_bf16 || !amx_tile) return false;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return false;  // OSXSAVE
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

// x rounded to bf16 and transposed into pairs, in blocks of `width` rows (the B tiles' columns;
// the last block's missing rows zero): block b, k-vector v is a 16 x width tile of 32-bit pairs,
// pair (r, m) = x[b * width + m][v * 32 + 2r .. + 1]. Kept per thread, so that a call allocates
// nothing once its size has been seen.
class PairedX {
 public:
  void build(const float* x, int rows, int in, int width) {
    width_ = width;
    vectors_ = amx_k_vectors(in);
    const int blocks = (rows + width - 1) / width;
    const size_t tile = size_t(16) * width;
    pairs_.assign(size_t(blocks) * vectors_ * tile + 16, 0u);
    const __m512i rows_apart =
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32(width));
    for (int m = 0; m < rows; ++m) {
      const float* row = x + size_t(m) * in;
      uint32_t* column = data() + size_t(m / width) * vectors_ * tile + m % width;
      for (int v = 0; v < vectors_; ++v, column += tile) {
        const int k = v * kAmxK, left = std::min(kAmxK, in - k);
        const __mmask32 keep = left == kAmxK ? ~__mmask32(0) : (__mmask32(1) << left) - 1;
        const __m512 lo = _mm512_maskz_loadu_ps(__mmask16(keep), row + k);
        const __m512 hi = _mm512_maskz_loadu_ps(__mmask16(keep >> 16), row + k + 16);
        // vcvtne2ps2bf16 rounds to nearest even, as --compute bf16's RoundedX does.
        const __m512i pairs = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        _mm512_i32scatter_epi32(column, rows_apart, pairs, 4);
      }
    }
  }
  // Block b's tile at k-vector v; its rows are 4 * width bytes apart.
  const uint32_t* tile(int b, int v) const {
    return data() + (size_t(b) * vectors_ + v) * 16 * width_;
  }

 private:
  uint32_t* data() const {
    return reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(pairs_.data()) + 63) &
                                       ~uintptr_t(63));
  }
  int width_ = 0, vectors_ = 0;
  mutable std::vector<uint32_t> pairs_;
};

// An accumulator tile, stored (16 columns j of panel p x width rows m), into out's rows
// [m0, m0 + rows) and the panel's columns that exist.
void write_tile(float* out, const float* acc, int width, int m0, int rows, int p, int out_dim) {
  const int j0 = p * kAmxPanel, columns = std::min(kAmxPanel, out_dim - j0);
  for (int m = 0; m < rows; ++m) {
    float* dst = out + size_t(m0 + m) * out_dim + j0;
    for (int j = 0; j < columns; ++j) dst[j] = acc[j * width + m];
  }
}

// How far ahead of its tile loads a panel's stream is prefetched, and where to. One-block calls
// (1-16 rows, four_panels_one_block: every weight tile read once) take it into L1 (prefetcht0),
// four streams of 4 KiB in L1's 48; two_panels (more than 16 rows, which re-reads its weight
// tiles from L2 for each pair of blocks of x) into L2 (prefetcht2). Timed in one process, the
// variants' order rotated each round (6 rounds, 1 thread, 2026-12-04), on weights as the backend
// allocates them (64-byte aligned, 2 MiB pages): t0 against t2 level at 1-5 rows (0.97-1.01 over
// seven shapes), 0.97-1.00 at 16, and level for two_panels at 20-80 rows (so it keeps t2);
// llama-3.2-1b's decode steps (bench_decode, old and new build alternated three times) took
// 0.94-0.97 of the time at 16 rows, 0.98-1.00 at 5, level at 1 and 80. On weights 16 bytes off
// a cache line (a std::vector's, every tile row split over two lines) t0 takes 0.83-0.85 of t2's
// time, on 4 KiB pages and 2 MiB alike (the split lines wait in L1, not L2); there 1-2 KiB ahead
// ran level with 4, 8 KiB 1.05-1.1x slower (32 KiB of L1 in flight), prefetcht1 as slow as t2.
constexpr size_t kAmxPrefetchAhead = 4 * 1024;

template <int Hint>
inline void prefetch_tile(const uint16_t* tile) {
  const char* line = reinterpret_cast<const char*>(tile) + kAmxPrefetchAhead;
  for (int i = 0; i < kAmxTileBytes; i += 64) _mm_prefetch(line + i, _mm_hint(Hint));
}

// The k-vectors [v0, v1) of a pass: the accumulators start from zero at v0 = 0, else from
// `saved`, and go to `saved` unless v1 ends k, where they are written out. A tile stored and
// loaded back holds the same bits, so a pass in chunks sums every element as one pass does.
struct KChunk {
  int v0, v1, vectors;
  float* saved;  // accumulator tile t (0-3) at saved + t * 256
};

// Blocks b0 and, with Blocks = 2, b0 + 1 of x (each at most 16 rows) against panels p and, when
// `pair`, p + 1, over one KChunk: tiles 0-3 accumulate (panel p block b0, p + 1 b0, p b0 + 1,
// p + 1 b0 + 1), 4 and 5 hold the panels' weights, 6 and 7 the blocks of x. Each weight tile
// serves two products and each x tile two, and one panel's next weight tile loads while the
// other panel's products run.
template <int Blocks>
void two_panels(float* out, const PairedX& x, const uint16_t* w, int rows, int width, int p,
                bool pair, int b0, int out_dim, const KChunk& k) {
  const size_t panel = size_t(k.vectors) * kAmxPanel * kAmxK;
  const uint16_t* a0 = w + size_t(p) * panel;
  const uint16_t* a1 = a0 + panel;
  const int stride = 4 * width;
  if (k.v0 == 0) {
    _tile_zero(0);
    _tile_zero(1);
    if constexpr (Blocks == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  } else {
    _tile_loadd(0, k.saved, stride);
    _tile_loadd(1, k.saved + 256, stride);
    if constexpr (Blocks == 2) {
      _tile_loadd(2, k.saved + 512, stride);
      _tile_loadd(3, k.saved + 768, stride);
    }
  }
  for (int v = k.v0; v < k.v1; ++v) {
    const size_t at = size_t(v) * kAmxPanel * kAmxK;
    prefetch_tile<_MM_HINT_T2>(a0 + at);
    _tile_loadd(4, a0 + at, 64);
    _tile_loadd(6, x.tile(b0, v), stride);
    _tile_dpbf16ps(0, 4, 6);
    if (pair) {
      prefetch_tile<_MM_HINT_T2>(a1 + at);
      _tile_loadd(5, a1 + at, 64);
      _tile_dpbf16ps(1, 5, 6);
    }
    if constexpr (Blocks == 2) {
      _tile_loadd(7, x.tile(b0 + 1, v), stride);
      _tile_dpbf16ps(2, 4, 7);
      if (pair) _tile_dpbf16ps(3, 5, 7);
    }
  }
  if (k.v1 < k.vectors) {
    _tile_stored(0, k.saved, stride);
    _tile_stored(1, k.saved + 256, stride);
    if constexpr (Blocks == 2) {
      _tile_stored(2, k.saved + 512, stride);
      _tile_stored(3, k.saved + 768, stride);
    }
    return;
  }
  alignas(64) float acc[kAmxPanel * 16];
  const auto write = [&](int b, int q) {
    write_tile(out, acc, width, b * width, std::min(width, rows - b * width), q, out_dim);
  };
  _tile_stored(0, acc, stride);
  write(b0, p);
  if (pair) {
    _tile_stored(1, acc, stride);
    write(b0, p + 1);
  }
  if constexpr (Blocks == 2) {
    _tile_stored(2, acc, stride);
    write(b0 + 1, p);
    if (pair) {
      _tile_stored(3, acc, stride);
      write(b0 + 1, p + 1);
    }
  }
}

// A pair of panels and the call's x, both of a k-chunk, stay in L2 (2 MiB on the host measured)
// while every pass over the blocks of x takes them: up to this many bytes of them. 80 rows of
// q1.5b.down (a pair of panels 560 KiB, x 1.4 MB) ran 6211 us in one chunk, 5292-5560 in chunks
// of 96-512 KiB and 5955 in chunks of 40 KiB (bench_gemm, 1 thread, one pass each, noisy host;
// narrower x, whose pair of panels and x fit, level within noise).
constexpr size_t kChunkBytes = 512 * 1024;

// One block of x (at most 16 rows: every call of 1-16 rows) against panels p .. p + n - 1 (n <=
// 4), every k-vector of the block loaded once for all of them: four weight streams and four
// accumulator chains in flight. Tiles 0-3 accumulate, 4 and 5 take the panels' weights in turn,
// 6 the block. Against two panels (two_panels<1>), bench_gemm, 1 thread, two interleaved passes,
// 1, 5 and 16 rows of 124m.qo, q1.5b.qo, .gate, q0.5b.qo, .gate, .down: 0.90-0.99 of the time
// (q0.5b.gate one row 507-544 -> 489-493 us, 16 rows 572-613 -> 530-531).
// Weight tiles load with TILELOADDT1 (read once a call; two_panels re-reads its tiles from L2):
// the 0.5B draft's one-row decode 12.03-12.29 -> 12.47-12.61 tok/s, three interleaved pairs
// (bf16: 12.87); the 1.5B target level. One weight stream instead of four was level.
void four_panels_one_block(float* out, const PairedX& x, const uint16_t* w, int rows, int width,
                           int p, int n, int out_dim, int vectors) {
  const size_t panel = size_t(vectors) * kAmxPanel * kAmxK;
  const uint16_t* a = w + size_t(p) * panel;
  const int stride = 4 * width;
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int v = 0; v < vectors; ++v) {
    const size_t at = size_t(v) * kAmxPanel * kAmxK;
    _tile_loadd(6, x.tile(0, v), stride);
    prefetch_tile<_MM_HINT_T0>(a + at);
    _tile_stream_loadd(4, a + at, 64);
    _tile_dpbf16ps(0, 4, 6);
    if (n > 1) {
      prefetch_tile<_MM_HINT_T0>(a + panel + at);
      _tile_stream_loadd(5, a + panel + at, 64);
      _tile_dpbf16ps(1, 5, 6);
    }
    if (n > 2) {
      prefetch_tile<_MM_HINT_T0>(a + 2 * panel + at);
      _tile_stream_loadd(4, a + 2 * panel + at, 64);
      _tile_dpbf16ps(2, 4, 6);
    }
    if (n > 3) {
      prefetch_tile<_MM_HINT_T0>(a + 3 * panel + at);
      _tile_stream_loadd(5, a + 3 * panel + at, 64);
      _tile_dpbf16ps(3, 5, 6);
    }
  }
  alignas(64) float acc[kAmxPanel * 16];
  _tile_stored(0, acc, stride);
  write_tile(out, acc, width, 0, rows, p, out_dim);
  if (n > 1) {
    _tile_stored(1, acc, stride);
    write_tile(out, acc, width, 0, rows, p + 1, out_dim);
  }
  if (n > 2) {
    _tile_stored(2, acc, stride);
    write_tile(out, acc, width, 0, rows, p + 2, out_dim);
  }
  if (n > 3) {
    _tile_stored(3, acc, stride);
    write_tile(out, acc, width, 0, rows, p + 3, out_dim);
  }
}

AmxTileConfig config_for(int width) {
  AmxTileConfig c;
  for (int t : {0, 1, 2, 3}) c.set(t, 16, 4 * width);  // accumulators: 16 columns j x width rows m
  for (int t : {4, 5}) c.set(t, 16, 64);               // weights: 16 columns j x 32 k
  for (int t : {6, 7}) c.set(t, 16, 4 * width);        // x: 16 pairs of k x width rows m
  return c;
}

}  // namespace

bool cpu_has_amx_bf16() {
  static const bool usable = tile_unit_usable();
  return usable;
}

void matmul_bf16_amx(float* out, const float* x, const uint16_t* w, int rows, int in, int out_dim,
                     int threads) {
  if (!cpu_has_amx_bf16()) throw std::logic_error("matmul_bf16_amx: no usable AMX on this CPU");
  if (rows <= 0) return;
  // Rows in blocks of at most 16, of one width (the B tiles' columns, set once a call): 20 rows
  // as 10 + 10, 80 as 5 x 16.
  const int blocks = (rows + 15) / 16, width = (rows + blocks - 1) / blocks;
  static thread_local PairedX caller_paired;
  caller_paired.build(x, rows, in, width);
  // The caller's: named inside the parallel region, a thread_local is each thread's own.
  const PairedX& paired = caller_paired;
  const int vectors = amx_k_vectors(in), count = amx_panels(out_dim);
  const AmxTileConfig config = config_for(width);
  const int units = (count + 1) / 2;
  // k in chunks where a pair of panels and the call's x (1 KiB a k-vector each, a block of x or a
  // panel) would not stay in L2 while the passes over the blocks of x take them.
  const size_t per_vector = size_t(2 + blocks) * kAmxTileBytes;
  const int chunks = int((per_vector * vectors + kChunkBytes - 1) / kChunkBytes);
  const int chunk = (vectors + chunks - 1) / chunks;
  const int passes = (blocks + 1) / 2;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    _tile_loadconfig(&config);
    std::vector<float> scratch(chunks > 1 ? size_t(passes) * 4 * 256 + 16 : 0);
    float* saved = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch.data()) + 63) &
                                            ~uintptr_t(63));
    if (blocks == 1) {
#pragma omp for schedule(static)
      for (int q = 0; q < (count + 3) / 4; ++q)
        four_panels_one_block(out, paired, w, rows, width, 4 * q, std::min(4, count - 4 * q),
                              out_dim, vectors);
    } else {
#pragma omp for schedule(static)
      for (int u = 0; u < units; ++u) {
        const int p = 2 * u;
        const bool pair = p + 1 < count;
        for (int v0 = 0; v0 < vectors; v0 += chunk) {
          for (int b0 = 0; b0 < blocks; b0 += 2) {
            const KChunk k{v0, std::min(vectors, v0 + chunk), vectors, saved + b0 / 2 * 4 * 256};
            if (b0 + 1 < blocks)
              two_panels<2>(out, paired, w, rows, width, p, pair, b0, out_dim, k);
            else
              two_panels<1>(out, paired, w, rows, width, p, pair, b0, out_dim, k);
          }
        }
      }
    }
    _tile_release();
  }
}

#else  // no AMX in this build: --compute amx is refused where it is asked for

bool cpu_has_amx_bf16() {
  return false;
}

void matmul_bf16_amx(float*, const float*, const uint16_t*, int, int, int, int) {
  throw std::logic_error("matmul_bf16_amx: this build has no AMX kernel");
}

#endif

}  // namespace ssd
