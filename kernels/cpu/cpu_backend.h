// The CPU backend: fp32 activations and KV cache, weights in fp32 or bf16 (the checkpoint's
// type, widened in registers), OpenMP threads, a batch-invariant GEMM of our own for the
// forward pass and OpenBLAS for the throughput-only paths.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/backend.h"

namespace ssd {

// Which GEMM the forward pass uses. Invariant: our kernel, whose per-element summation order
// is independent of the number of rows (required for greedy SD == AR bit for bit). OpenBLAS:
// sgemm, faster for large prefills but its M=1 and M>1 paths round differently.
enum class GemmKind { Invariant, OpenBLAS };

// What the invariant GEMM multiplies bf16 weights with (--compute). F32: each weight widened to
// fp32 and fused with the fp32 activation (exact products). BF16: the activation rows rounded to
// bf16 (round to nearest even, as the GPU's tensor-core kernel rounds them) and multiplied with
// the bf16 weights two products per fp32 lane (AVX512_BF16's vdpbf16ps), accumulating in fp32:
// twice the multiply-adds per instruction, the GPU's numeric regime. Amx: the same rounding and
// bf16 x bf16 products on AMX tiles (TDPBF16PS, 16 x 16 dot products of 32 pairs an instruction;
// matmul_bf16_amx.cpp), summed in another order than BF16's, so a mode of its own. Auto: Amx
// where this build, CPU and OS have the tile unit, else BF16 where they have AVX512_BF16, else
// F32. fp32 weights are multiplied in fp32 under every mode but BF16 and Amx, which refuse them
// (CpuBackend::upload_matrix).
enum class CpuCompute { F32, BF16, Amx, Auto };

// Memory as CpuBackend holds weights, KV caches and activations: 64-byte aligned; a buffer of
// 1 MiB or more on whole 2 MiB transparent huge pages (cpu_backend.cpp says why). Zeroed when
// `zero`. Freed with std::free. bench_gemm takes its weights from here, so that it measures the
// GEMMs on the pages the forward pass reads them from.
void* allocate_cpu_memory(size_t bytes, bool zero);

// True when this build has the AVX512_BF16 kernel (compiled with -march=native on a CPU that has
// it) and the CPU running it has the instructions.
bool cpu_has_bf16_dot();
// The L1 data cache size the bf16 GEMM picks its tuning by (matmul_bf16_dot.cpp's DotTuning),
// in place of the CPU's; 0 restores the CPU's. For tests, which run every profile on any host.
void set_bf16_dot_l1d_bytes(size_t bytes);

class CpuBackend final : public Backend {
 public:
  // Throws std::invalid_argument for BF16 compute without cpu_has_bf16_dot(), Amx without
  // cpu_has_amx_bf16(), or either with the OpenBLAS GEMM (sgemm is fp32).
  explicit CpuBackend(int threads, GemmKind gemm = GemmKind::Invariant,
                      CpuCompute compute = CpuCompute::F32);

  std::string name() const override { return "cpu"; }
  std::string device_name() const override;
  int threads() const override { return threads_; }
  GemmKind gemm() const { return gemm_; }
  std::string compute_for(DType storage) const override;

  Buffer alloc(size_t count) override;
  void release(Buffer& buffer) override;
  Buffer upload_weight(const float* host, size_t count) override;
  // F32 or BF16 (values rounded to nearest even; exact for bf16-valued input). F16 weights
  // are kept as fp32 (exact too): this backend has no f16 GEMM.
  Buffer upload_weight_as(const float* host, size_t count, DType storage) override;
  // With the invariant GEMM, packed for matmul_packed (kernels/cpu/matmul_packed.cpp), or for
  // matmul_bf16_dot or matmul_bf16_amx where bf16 weights are multiplied in bf16; OpenBLAS takes
  // row-major weights, so with it the matrix stays row-major. Throws std::invalid_argument for
  // fp32 storage under CpuCompute::BF16 and Amx.
  Buffer upload_matrix(const float* host, int out_dim, int in, DType storage) override;
  bool uploads_bf16(DType storage, bool matrix) const override;
  Buffer upload_bf16(const uint16_t* host, int rows, int cols, DType storage, bool matrix) override;
  DType weight_storage(DType storage) const override {
    return storage == DType::BF16 ? DType::BF16 : DType::F32;
  }
  void to_host(float* dst, const Buffer& src, size_t offset, size_t count) override;
  void from_host(Buffer& dst, size_t offset, const float* src, size_t count) override;
  void copy(Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset,
            size_t count) override;
  void synchronize() override {}

  void embed(Buffer& out, const Buffer& table, const int32_t* tokens, int rows, int dim) override;
  void rmsnorm(Buffer& out, const Buffer& x, const Buffer& weight, int rows, int dim,
               float eps) override;
  void matmul(Buffer& out, const Buffer& x, const Buffer& w, int rows, int in,
              int out_dim) override;
  void rope(Buffer& x, const int32_t* positions, int rows, int heads, int head_dim,
            const Buffer& inv_freq) override;
  void kv_store(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout, const Buffer& k,
                const Buffer& v, const AttentionMask& mask) override;
  void kv_move(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout, int src_seq, int src_slot,
               int dst_seq, int dst_slot, int count) override;
  void attention(Buffer& out, const Buffer& q, const Buffer& k_cache, const Buffer& v_cache,
                 const KVLayout& layout, int heads, const AttentionMask& mask) override;
  void swiglu(Buffer& out, const Buffer& gate, const Buffer& up, size_t count) override;
  void add(Buffer& x, const Buffer& y, size_t count) override;
  void add_bias(Buffer& x, const Buffer& bias, int rows, int dim) override;

 private:
  // upload_matrix's refusal of fp32 weights under bf16 or amx compute (refuse_f32_).
  void check_matrix_storage(DType storage) const;
  int threads_;
  GemmKind gemm_;
  // Which kernel packs and multiplies bf16 matrices: matmul_packed_bf16 (fp32 products),
  // matmul_bf16_dot or matmul_bf16_amx.
  enum class Bf16Kernel { Widened, Dot, Amx };
  Bf16Kernel bf16_kernel_;
  bool refuse_f32_;  // CpuCompute::BF16, Amx: an fp32 matrix is an error, not a silent f32 GEMM
};

// The kernels behind CpuBackend, exposed for tests and benchmarks.
// out[r][j] = sum_k x[r][k] * w[j][k], each element summed in the same order for any `rows`.
void matmul_invariant(float* out, const float* x, const float* w, int rows, int in, int out_dim,
                      int threads);
// The same with bf16 weights (raw bf16 bits), widened in registers: bit for bit the result of
// matmul_invariant on the widened fp32 weights.
void matmul_invariant_bf16(float* out, const float* x, const uint16_t* w, int rows, int in,
                           int out_dim, int threads);
// The same GEMM on a matrix in the packed layout (matmul_packed.cpp), which one core streams
// faster: bit for bit matmul_invariant's (and matmul_invariant_bf16's) result. pack_matrix* write
// packed_matrix_count(out_dim, in) elements (out_dim rounded up to whole panels).
size_t packed_matrix_count(int out_dim, int in);
void pack_matrix(float* dst, const float* w, int out_dim, int in);
void pack_matrix_bf16(uint16_t* dst, const uint16_t* w, int out_dim, int in);
// One row of a packed matrix, widened to fp32 (an embedding lookup in a tied table).
void packed_matrix_row(float* dst, const float* w, int row, int in);
void packed_matrix_row_bf16(float* dst, const uint16_t* w, int row, int in);
void matmul_packed(float* out, const float* x, const float* w, int rows, int in, int out_dim,
                   int threads);
void matmul_packed_bf16(float* out, const float* x, const uint16_t* w, int rows, int in,
                        int out_dim, int threads);
// The bf16 x bf16 -> fp32 GEMM (matmul_bf16_dot.cpp; CpuCompute::BF16) on a matrix packed by
// pack_matrix_bf16_dot (the same panels as pack_matrix_bf16, with 32-wide k-vectors: one
// vdpbf16ps operand per row). Rounds x's rows to bf16 (nearest even), then sums each element in
// an order fixed by `in` alone: batch-invariant for any `rows` and `threads`. Throws
// std::logic_error without cpu_has_bf16_dot().
void pack_matrix_bf16_dot(uint16_t* dst, const uint16_t* w, int out_dim, int in);
// What upload_matrix packs straight from the fp32 host copy (no row-major copy in between): the
// layout of pack_matrix (F32), pack_matrix_bf16 (BF16) or pack_matrix_bf16_dot (BF16Dot), fp32
// values rounded to bf16 (nearest even) for the last two; `threads` share the panels.
enum class PackedFormat { F32, BF16, BF16Dot };
void pack_matrix_from_f32(void* dst, const float* w, int out_dim, int in, PackedFormat format,
                          int threads);
// The same from bf16 bits (a bf16 checkpoint's): the bytes pack_matrix_from_f32 writes from their
// fp32 values, without the widening.
void pack_matrix_from_bf16(void* dst, const uint16_t* w, int out_dim, int in, PackedFormat format,
                           int threads);
void packed_dot_matrix_row_bf16(float* dst, const uint16_t* w, int row, int in);
void matmul_bf16_dot(float* out, const float* x, const uint16_t* w, int rows, int in, int out_dim,
                     int threads);
void matmul_openblas(float* out, const float* x, const float* w, int rows, int in, int out_dim,
                     int threads);
// The bf16 x bf16 -> fp32 GEMM on AMX tiles (matmul_bf16_amx.cpp; CpuCompute::Amx), on a matrix
// packed by pack_matrix_bf16_amx*: panels of 16 output rows, each k-vector of 32 a 16 x 32 tile
// (1 KiB), zero past out_dim and in. x's rows rounded to bf16 (nearest even) as under BF16; each
// element summed by TDPBF16PS over the k-vectors in order: batch-invariant for any `rows` and
// `threads`, with other sums than matmul_bf16_dot's. cpu_has_amx_bf16: this build has the kernel
// (-march=native on a CPU with AMX-BF16), the CPU has the tile unit and the OS let this process
// use it. matmul_bf16_amx throws std::logic_error without it.
bool cpu_has_amx_bf16();
size_t amx_packed_matrix_count(int out_dim, int in);
void pack_matrix_bf16_amx(uint16_t* dst, const uint16_t* w, int out_dim, int in);
void pack_matrix_bf16_amx_from_f32(uint16_t* dst, const float* w, int out_dim, int in, int threads);
void packed_amx_matrix_row_bf16(float* dst, const uint16_t* w, int row, int in);
void matmul_bf16_amx(float* out, const float* x, const uint16_t* w, int rows, int in, int out_dim,
                     int threads);
// Grouped-query attention (attention.cpp): every (row, head) alone, in a fixed order.
void attention_cpu(float* out, const float* q, const float* k_cache, const float* v_cache,
                   const KVLayout& layout, int heads, const AttentionMask& mask, int threads);
// The CPU's model name from /proc/cpuinfo ("unknown" if not found).
std::string cpu_model_name();

}  // namespace ssd
