// CpuBackend: memory management and the element-wise and attention ops in plain C++.
#include "kernels/cpu/cpu_backend.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/simd.h"
#include "kernels/exp_weights.h"

namespace ssd {
namespace {

float* f(Buffer& b) {
  return static_cast<float*>(b.data);
}
const float* f(const Buffer& b) {
  if (b.dtype != DType::F32) throw std::logic_error("CpuBackend: an fp32 buffer was expected");
  return static_cast<const float*>(b.data);
}
const uint16_t* bf16(const Buffer& b) {
  return static_cast<const uint16_t*>(b.data);
}

void* aligned_zeroed(size_t bytes) {
  return allocate_cpu_memory(bytes, true);
}

// For a buffer its writer fills entirely (a packed matrix).
void* aligned_uninitialized(size_t bytes) {
  return allocate_cpu_memory(bytes, false);
}

// The packed layout of a matrix kept as `kept`: bf16 takes the 32-wide k-vectors of the dot
// kernel (CpuCompute::BF16) where that is the backend's bf16 kernel.
PackedFormat packed_format(DType kept, bool dot_kernel) {
  if (kept == DType::F32) return PackedFormat::F32;
  return dot_kernel ? PackedFormat::BF16Dot : PackedFormat::BF16;
}

}  // namespace

void* allocate_cpu_memory(size_t bytes, bool zero) {
  // 64-byte aligned so rows start on cache lines; zeroed so fresh KV caches are defined.
  //
  // A buffer of 1 MiB or more (a weight matrix, a KV cache) takes whole 2 MiB pages, asked of
  // the kernel as transparent huge pages (madvise: this host's THP mode is "madvise", so without
  // asking every weight sat on 4 KiB pages). A decode step streams every weight once: on 4 KiB
  // pages that is a TLB miss every 4 KiB, and the hardware prefetchers stop at each page's end.
  // bench_decode llama-124m bf16 at context 128, 3 interleaved repetitions: one row 5.29-5.45 ->
  // 5.19-5.29 ms, five rows 7.00-7.17 -> 6.84-6.90, sixteen 19.3-19.5 -> 18.6-18.9. Rounding up
  // costs at most one page per buffer (a llama-124m AR run's peak RSS: 653 -> 668 MB); buffers
  // 2 MiB-aligned but not rounded up gained about half as much.
  constexpr size_t kHugePage = size_t(2) << 20;
  if (bytes >= kHugePage / 2) {
    bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = nullptr;
    if (posix_memalign(&p, kHugePage, bytes) != 0) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);  // advice: where the kernel declines, 4 KiB pages serve
    if (zero) std::memset(p, 0, bytes);
    return p;
  }
  bytes = ((std::max<size_t>(bytes, 1) + 63) / 64) * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  if (zero) std::memset(p, 0, bytes);
  return p;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

namespace {

CpuCompute resolve_auto(CpuCompute compute, GemmKind gemm) {
  if (compute != CpuCompute::Auto) return compute;
  if (gemm != GemmKind::Invariant) return CpuCompute::F32;
  return cpu_has_amx_bf16()   ? CpuCompute::Amx
         : cpu_has_bf16_dot() ? CpuCompute::BF16
                              : CpuCompute::F32;
}

}  // namespace

CpuBackend::CpuBackend(int threads, GemmKind gemm, CpuCompute compute)
    : threads_(threads),
      gemm_(gemm),
      bf16_kernel_(Bf16Kernel::Widened),
      refuse_f32_(compute == CpuCompute::BF16 || compute == CpuCompute::Amx) {
  if (threads < 1) throw std::invalid_argument("CpuBackend needs at least one thread");
  if (refuse_f32_ && gemm != GemmKind::Invariant)
    throw std::invalid_argument(std::string(compute == CpuCompute::Amx ? "amx" : "bf16") +
                                " compute needs the invariant GEMM (OpenBLAS sgemm is fp32)");
  if (compute == CpuCompute::BF16 && !cpu_has_bf16_dot())
    throw std::invalid_argument(
        "bf16 compute needs AVX512_BF16 (vdpbf16ps), which this CPU or build lacks");
  if (compute == CpuCompute::Amx && !cpu_has_amx_bf16())
    throw std::invalid_argument(
        "amx compute needs AMX-BF16 tiles (TDPBF16PS), which this CPU, build or OS lacks");
  const CpuCompute resolved = resolve_auto(compute, gemm);
  if (resolved == CpuCompute::BF16) bf16_kernel_ = Bf16Kernel::Dot;
  if (resolved == CpuCompute::Amx) bf16_kernel_ = Bf16Kernel::Amx;
  // Every OpenMP region of the process (weight generation too) uses this rank's share of the
  // cores; otherwise idle worker threads spin on cores another rank is using.
  omp_set_num_threads(threads);
}

std::string CpuBackend::device_name() const {
  return cpu_model_name();
}

std::string CpuBackend::compute_for(DType storage) const {
  if (weight_storage(storage) != DType::BF16) return "f32";
  return bf16_kernel_ == Bf16Kernel::Amx ? "amx" : bf16_kernel_ == Bf16Kernel::Dot ? "bf16" : "f32";
}

Buffer CpuBackend::alloc(size_t count) {
  return Buffer{aligned_zeroed(count * sizeof(float)), count};
}

void CpuBackend::release(Buffer& buffer) {
  std::free(buffer.data);
  buffer = Buffer{};
}

Buffer CpuBackend::upload_weight(const float* host, size_t count) {
  Buffer b = alloc(count);
  std::memcpy(b.data, host, count * sizeof(float));
  return b;
}

Buffer CpuBackend::upload_weight_as(const float* host, size_t count, DType storage) {
  if (weight_storage(storage) == DType::F32) return upload_weight(host, count);
  Buffer b{aligned_zeroed(count * sizeof(uint16_t)), count, DType::BF16};
  uint16_t* dst = static_cast<uint16_t*>(b.data);
  for (size_t i = 0; i < count; ++i) dst[i] = float_to_bf16(host[i]);
  return b;
}

Buffer CpuBackend::upload_matrix(const float* host, int out_dim, int in, DType storage) {
  check_matrix_storage(storage);
  if (gemm_ != GemmKind::Invariant)
    return upload_weight_as(host, size_t(out_dim) * size_t(in), storage);
  // Packed straight from the host's fp32 copy, with every element (the last panel's zero rows
  // too) written by the packer, so the buffer is not zeroed first. Loading Qwen2.5-Coder-1.5B
  // (3.55 GB of bf16 matrices) went from a bf16 row-major copy, zeroed, then packed element by
  // element, to this.
  const DType kept = weight_storage(storage);
  if (kept == DType::BF16 && bf16_kernel_ == Bf16Kernel::Amx) {
    const size_t count = amx_packed_matrix_count(out_dim, in);
    Buffer b{aligned_uninitialized(count * sizeof(uint16_t)), count, kept, true};
    pack_matrix_bf16_amx_from_f32(static_cast<uint16_t*>(b.data), host, out_dim, in, threads_);
    return b;
  }
  const size_t count = packed_matrix_count(out_dim, in);
  Buffer b{aligned_uninitialized(count * dtype_size(kept)), count, kept, true};
  pack_matrix_from_f32(b.data, host, out_dim, in,
                       packed_format(kept, bf16_kernel_ == Bf16Kernel::Dot), threads_);
  return b;
}

void CpuBackend::check_matrix_storage(DType storage) const {
  if (refuse_f32_ && weight_storage(storage) != DType::BF16)
    throw std::invalid_argument("bf16 compute needs bf16 weights, and these are " +
                                std::string(dtype_name(storage)));
}

// Weights straight from a bf16 checkpoint's bits. Loading Qwen2.5-Coder-1.5B widened its 3.55 GB
// to fp32 (a 933 MB staging buffer for the embedding) and rounded them back. OpenBLAS's
// row-major matrices and AMX's tiles (pack_matrix_bf16_amx_from_f32) keep that way: no AMX host
// was at hand to check a bf16 packer of the tiles against it.
bool CpuBackend::uploads_bf16(DType storage, bool matrix) const {
  if (!matrix) return true;
  return gemm_ == GemmKind::Invariant &&
         !(weight_storage(storage) == DType::BF16 && bf16_kernel_ == Bf16Kernel::Amx);
}

Buffer CpuBackend::upload_bf16(const uint16_t* host, int rows, int cols, DType storage,
                               bool matrix) {
  if (!uploads_bf16(storage, matrix))
    return Backend::upload_bf16(host, rows, cols, storage, matrix);
  const DType kept = weight_storage(storage);
  if (!matrix) {  // as upload_weight_as stores it: row-major, every element written here
    const size_t count = size_t(rows) * size_t(cols);
    Buffer b{aligned_uninitialized(std::max<size_t>(count, 1) * dtype_size(kept)), count, kept};
    if (kept == DType::BF16) {
      if (count > 0) std::memcpy(b.data, host, count * sizeof(uint16_t));
    } else {
      for (size_t i = 0; i < count; ++i) f(b)[i] = bf16_to_float(host[i]);
    }
    return b;
  }
  check_matrix_storage(storage);
  const size_t count = packed_matrix_count(rows, cols);
  Buffer b{aligned_uninitialized(count * dtype_size(kept)), count, kept, true};
  pack_matrix_from_bf16(b.data, host, rows, cols,
                        packed_format(kept, bf16_kernel_ == Bf16Kernel::Dot), threads_);
  return b;
}

// Copies of no elements return before memcpy, which must not see the null pointer an empty
// host vector may hand over (a GEMM call of no rows round-trips one).
void CpuBackend::to_host(float* dst, const Buffer& src, size_t offset, size_t count) {
  if (count == 0) return;
  if (src.packed) throw std::logic_error("CpuBackend::to_host: a packed matrix is matmul's only");
  if (src.dtype == DType::BF16) {
    for (size_t i = 0; i < count; ++i) dst[i] = bf16_to_float(bf16(src)[offset + i]);
    return;
  }
  std::memcpy(dst, f(src) + offset, count * sizeof(float));
}

void CpuBackend::from_host(Buffer& dst, size_t offset, const float* src, size_t count) {
  if (count == 0) return;
  std::memcpy(f(dst) + offset, src, count * sizeof(float));
}

void CpuBackend::copy(Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset,
                      size_t count) {
  if (count == 0) return;
  std::memmove(f(dst) + dst_offset, f(src) + src_offset, count * sizeof(float));
}

void CpuBackend::embed(Buffer& out, const Buffer& table, const int32_t* tokens, int rows, int dim) {
  for (int r = 0; r < rows; ++r) {
    float* row = f(out) + size_t(r) * dim;
    if (!table.packed)
      to_host(row, table, size_t(tokens[r]) * dim, dim);
    else if (table.dtype == DType::BF16 && bf16_kernel_ == Bf16Kernel::Amx)  // a tied table
      packed_amx_matrix_row_bf16(row, bf16(table), tokens[r], dim);
    else if (table.dtype == DType::BF16 && bf16_kernel_ == Bf16Kernel::Dot)  // stored for the head
      packed_dot_matrix_row_bf16(row, bf16(table), tokens[r], dim);
    else if (table.dtype == DType::BF16)
      packed_matrix_row_bf16(row, bf16(table), tokens[r], dim);
    else
      packed_matrix_row(row, f(table), tokens[r], dim);
  }
}

void CpuBackend::rmsnorm(Buffer& out, const Buffer& x, const Buffer& weight, int rows, int dim,
                         float eps) {
  const float* w = f(weight);
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows >= 64)
  for (int r = 0; r < rows; ++r) {
    const float* xr = f(x) + size_t(r) * dim;
    float* o = f(out) + size_t(r) * dim;
    // The squares summed in the vector lanes (simd.h's fixed tree, then the tail in order):
    // one add after another, each waiting on the last, a call over 5 rows of 768 took 2.3 us
    // (0.64 now; one row 0.71 -> 0.36), 25 calls a llama-124m step.
    const int whole = dim - dim % simd::kLanes;
    simd::vec squares = simd::zero_vec();
    for (int i = 0; i < whole; i += simd::kLanes) {
      const simd::vec v = simd::load_vec(xr + i);
      squares = simd::fma_vec(v, v, squares);
    }
    const float sum = simd::finish_dot(squares, xr + whole, xr + whole, dim - whole);
    // Same order of operations as HF's LlamaRMSNorm: normalise, then scale by the weight.
    const float inv = 1.0f / std::sqrt(sum / float(dim) + eps);
    for (int i = 0; i < dim; ++i) o[i] = w[i] * (xr[i] * inv);
  }
}

void CpuBackend::matmul(Buffer& out, const Buffer& x, const Buffer& w, int rows, int in,
                        int out_dim) {
  // A forward of an empty batch multiplies no rows (fig7-speedup's collocated SD run makes one,
  // found when the bf16 GEMM refused it); the packed GEMM's one- and two-row path would write
  // two rows regardless, past what the caller sized for none.
  if (rows <= 0) return;
  if (gemm_ == GemmKind::OpenBLAS) {
    if (w.dtype == DType::BF16) {
      // sgemm takes fp32 only: widen (exactly) first. A prefill-throughput path; decode and
      // verification use the invariant kernel, which widens in registers.
      std::vector<float> wide(size_t(out_dim) * in);
      to_host(wide.data(), w, 0, wide.size());
      matmul_openblas(f(out), f(x), wide.data(), rows, in, out_dim, threads_);
    } else {
      matmul_openblas(f(out), f(x), f(w), rows, in, out_dim, threads_);
    }
  } else if (w.packed && w.dtype == DType::BF16 && bf16_kernel_ == Bf16Kernel::Amx) {
    matmul_bf16_amx(f(out), f(x), bf16(w), rows, in, out_dim, threads_);
  } else if (w.packed && w.dtype == DType::BF16 && bf16_kernel_ == Bf16Kernel::Dot) {
    matmul_bf16_dot(f(out), f(x), bf16(w), rows, in, out_dim, threads_);
  } else if (w.packed && w.dtype == DType::BF16) {
    matmul_packed_bf16(f(out), f(x), bf16(w), rows, in, out_dim, threads_);
  } else if (w.packed) {
    matmul_packed(f(out), f(x), f(w), rows, in, out_dim, threads_);
  } else if (w.dtype == DType::BF16) {
    matmul_invariant_bf16(f(out), f(x), bf16(w), rows, in, out_dim, threads_);
  } else {
    matmul_invariant(f(out), f(x), f(w), rows, in, out_dim, threads_);
  }
}

void CpuBackend::rope(Buffer& x, const int32_t* positions, int rows, int heads, int head_dim,
                      const Buffer& inv_freq) {
  const int half = head_dim / 2;
  const float* freq = f(inv_freq);
  std::vector<float> cos_t(half), sin_t(half);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < half; ++i) {
      // HF forms the angle as an fp32 product, then takes cos/sin.
      const float angle = float(positions[r]) * freq[i];
      cos_t[i] = std::cos(angle);
      sin_t[i] = std::sin(angle);
    }
    for (int h = 0; h < heads; ++h) {
      float* v = f(x) + (size_t(r) * heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cos_t[i] - b * sin_t[i];
        v[i + half] = b * cos_t[i] + a * sin_t[i];
      }
    }
  }
}

void CpuBackend::kv_store(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout, const Buffer& k,
                          const Buffer& v, const AttentionMask& mask) {
  const size_t kv_dim = size_t(layout.kv_heads) * layout.head_dim;
  for (int r = 0; r < mask.rows; ++r) {
    if (mask.seq[r] < 0 || mask.seq[r] >= layout.sequences || mask.slot[r] < 0 ||
        mask.slot[r] >= layout.capacity)
      throw std::out_of_range("kv_store: slot outside the KV cache");
    const size_t at = (size_t(mask.seq[r]) * layout.capacity + mask.slot[r]) * kv_dim;
    std::memcpy(f(k_cache) + at, f(k) + r * kv_dim, kv_dim * sizeof(float));
    std::memcpy(f(v_cache) + at, f(v) + r * kv_dim, kv_dim * sizeof(float));
  }
}

void CpuBackend::kv_move(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout, int src_seq,
                         int src_slot, int dst_seq, int dst_slot, int count) {
  const size_t kv_dim = size_t(layout.kv_heads) * layout.head_dim;
  const size_t src = (size_t(src_seq) * layout.capacity + src_slot) * kv_dim;
  const size_t dst = (size_t(dst_seq) * layout.capacity + dst_slot) * kv_dim;
  copy(k_cache, dst, k_cache, src, count * kv_dim);
  copy(v_cache, dst, v_cache, src, count * kv_dim);
}

void CpuBackend::attention(Buffer& out, const Buffer& q, const Buffer& k_cache,
                           const Buffer& v_cache, const KVLayout& layout, int heads,
                           const AttentionMask& mask) {
  attention_cpu(f(out), f(q), f(k_cache), f(v_cache), layout, heads, mask, threads_);
}

void CpuBackend::swiglu(Buffer& out, const Buffer& gate, const Buffer& up, size_t count) {
  const float* g = f(gate);
  const float* u = f(up);
  float* o = f(out);
  silu_mul(g, u, count, o);
}

void CpuBackend::add(Buffer& x, const Buffer& y, size_t count) {
  float* a = f(x);
  const float* b = f(y);
  for (size_t i = 0; i < count; ++i) a[i] += b[i];
}

void CpuBackend::add_bias(Buffer& x, const Buffer& bias, int rows, int dim) {
  float* a = f(x);
  const float* b = f(bias);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < dim; ++j) a[size_t(r) * dim + j] += b[j];
}

}  // namespace ssd
