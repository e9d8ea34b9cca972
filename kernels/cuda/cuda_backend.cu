// CudaBackend: device memory, host<->device transfers with fp32<->bf16 conversion, staging of
// host-side op arguments, and the op entry points (kernels in *_kernels.cu, cuBLAS for large
// GEMMs).
#include <cublas_v2.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernels.cuh"

#define SSD_CUBLAS_CHECK(call)                                                                  \
  do {                                                                                          \
    const cublasStatus_t ssd_cublas_status_ = (call);                                           \
    if (ssd_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                            \
      throw std::runtime_error(std::string("cuBLAS error: ") + #call +                          \
                               " failed: " + cublasGetStatusString(ssd_cublas_status_) + " (" + \
                               cublasGetStatusName(ssd_cublas_status_) + ") at " + __FILE__ +   \
                               ":" + std::to_string(__LINE__));                                 \
  } while (0)

namespace ssd {

using cuda_kernels::bf16;

namespace {

constexpr size_t kElement = sizeof(bf16);
// fp32 staging per conversion step: 4M elements (16 MB).
constexpr size_t kConvertChunk = size_t(1) << 22;
constexpr size_t kStagingAlign = 256;
constexpr size_t kStagingInitial = size_t(1) << 20;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

bf16* data(Buffer& b) {
  return static_cast<bf16*>(b.data);
}
const bf16* data(const Buffer& b) {
  return static_cast<const bf16*>(b.data);
}

void check_range(const Buffer& b, size_t offset, size_t count, const char* what) {
  if (offset > b.count || count > b.count - offset)
    throw std::out_of_range(std::string(what) + ": [" + std::to_string(offset) + ", " +
                            std::to_string(offset) + " + " + std::to_string(count) +
                            ") outside a buffer of " + std::to_string(b.count) + " elements");
}

void check_elements(const Buffer& b, size_t count, const char* what) {
  if (count > b.count)
    throw std::out_of_range(std::string(what) + ": needs " + std::to_string(count) +
                            " elements, buffer has " + std::to_string(b.count));
}

cublasHandle_t handle(void* h) {
  return static_cast<cublasHandle_t>(h);
}

}  // namespace

// What the backend owns besides its stream and cuBLAS handle.
struct CudaBackend::State {
  // Staging for host arrays passed to ops (tokens, positions, masks): a ring of pinned host
  // memory mirrored by device memory. Each upload copies into the next free stretch of the
  // pinned ring, enqueues the host->device copy of that stretch on the stream and records an
  // event. A stretch is reused only after the event of every earlier copy from it has
  // completed (the device side needs no wait: the new copy is stream-ordered after every kernel
  // that read the old contents).
  struct Pending {
    size_t begin, end;
    cudaEvent_t done;
  };
  // The last upload of each kind, kept while its stretch is not overwritten: the same mask or
  // positions passed again (every layer of a forward pass) reuse the device copy.
  struct Cached {
    std::vector<char> bytes;
    size_t begin = 0, end = 0;
    bool valid = false;
  };
  enum Kind { kTokens, kPositions, kMask, kSeqSlot, kKinds };

  char* host = nullptr;
  char* dev = nullptr;
  size_t capacity = 0, head = 0;
  std::deque<Pending> pending;
  std::vector<cudaEvent_t> spare_events;
  Cached cached[kKinds];
  std::vector<int32_t> mask_words;  // host assembly of a mask upload

  // Device scratch: fp32 staging for conversions, bf16 for overlapping copies, fp32 inverse
  // frequencies converted from a bf16 buffer without an fp32 shadow.
  float* f32 = nullptr;
  size_t f32_count = 0;
  void* copy_tmp = nullptr;
  size_t copy_bytes = 0;
  float* freq_tmp = nullptr;
  size_t freq_count = 0;

  // fp32 copies of small uploaded weights, by the weight's device pointer.
  std::unordered_map<const void*, float*> shadows;

  const void* stage(cudaStream_t stream, Kind kind, const void* src, size_t bytes);
  float* f32_scratch(cudaStream_t stream, size_t count);
  void* copy_scratch(cudaStream_t stream, size_t bytes);
  float* freq_scratch(cudaStream_t stream, size_t count);
  void release_all() noexcept;

 private:
  void grow(cudaStream_t stream, size_t bytes);
  void wait_for(size_t begin, size_t end);
};

void CudaBackend::State::wait_for(size_t begin, size_t end) {
  for (auto it = pending.begin(); it != pending.end();) {
    if (it->begin < end && begin < it->end) {
      SSD_CUDA_CHECK(cudaEventSynchronize(it->done));
      spare_events.push_back(it->done);
      it = pending.erase(it);
    } else {
      ++it;
    }
  }
  for (Cached& c : cached)
    if (c.valid && c.begin < end && begin < c.end) c.valid = false;
}

void CudaBackend::State::grow(cudaStream_t stream, size_t bytes) {
  const size_t want = std::max({bytes, kStagingInitial, 2 * capacity});
  // Nothing may still read the old ring: wait for the stream, then free it.
  SSD_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (const Pending& p : pending) spare_events.push_back(p.done);
  pending.clear();
  for (Cached& c : cached) c.valid = false;
  if (host) SSD_CUDA_CHECK(cudaFreeHost(host));
  if (dev) SSD_CUDA_CHECK(cudaFree(dev));
  host = nullptr;
  dev = nullptr;
  capacity = head = 0;
  SSD_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host), want));
  SSD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev), want));
  capacity = want;
}

const void* CudaBackend::State::stage(cudaStream_t stream, Kind kind, const void* src,
                                      size_t bytes) {
  Cached& c = cached[kind];
  if (c.valid && c.bytes.size() == bytes &&
      (bytes == 0 || std::memcmp(c.bytes.data(), src, bytes) == 0))
    return dev + c.begin;
  const size_t need = round_up(std::max<size_t>(bytes, 1), kStagingAlign);
  if (need > capacity) grow(stream, need);
  if (head + need > capacity) {
    // Wrap around; the skipped tail is retired too, so `pending` stays short.
    wait_for(head, capacity);
    head = 0;
  }
  const size_t begin = head, end = head + need;
  wait_for(begin, end);
  if (bytes > 0) {
    std::memcpy(host + begin, src, bytes);
    SSD_CUDA_CHECK(
        cudaMemcpyAsync(dev + begin, host + begin, bytes, cudaMemcpyHostToDevice, stream));
  }
  cudaEvent_t done;
  if (spare_events.empty()) {
    SSD_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  } else {
    done = spare_events.back();
    spare_events.pop_back();
  }
  SSD_CUDA_CHECK(cudaEventRecord(done, stream));
  pending.push_back({begin, end, done});
  head = end;
  const char* s = static_cast<const char*>(src);
  c.bytes.assign(s, s + bytes);
  c.begin = begin;
  c.end = end;
  c.valid = true;
  return dev + begin;
}

float* CudaBackend::State::f32_scratch(cudaStream_t stream, size_t count) {
  if (count > f32_count) {
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream));  // the old scratch may still be in use
    if (f32) SSD_CUDA_CHECK(cudaFree(f32));
    f32 = nullptr;
    f32_count = 0;
    SSD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&f32), count * sizeof(float)));
    f32_count = count;
  }
  return f32;
}

void* CudaBackend::State::copy_scratch(cudaStream_t stream, size_t bytes) {
  if (bytes > copy_bytes) {
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (copy_tmp) SSD_CUDA_CHECK(cudaFree(copy_tmp));
    copy_tmp = nullptr;
    copy_bytes = 0;
    SSD_CUDA_CHECK(cudaMalloc(&copy_tmp, bytes));
    copy_bytes = bytes;
  }
  return copy_tmp;
}

float* CudaBackend::State::freq_scratch(cudaStream_t stream, size_t count) {
  if (count > freq_count) {
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (freq_tmp) SSD_CUDA_CHECK(cudaFree(freq_tmp));
    freq_tmp = nullptr;
    freq_count = 0;
    SSD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&freq_tmp), count * sizeof(float)));
    freq_count = count;
  }
  return freq_tmp;
}

void CudaBackend::State::release_all() noexcept {
  // Called with the stream already synchronised; errors are ignored (destructor path).
  for (const Pending& p : pending) cudaEventDestroy(p.done);
  pending.clear();
  for (cudaEvent_t e : spare_events) cudaEventDestroy(e);
  spare_events.clear();
  if (host) cudaFreeHost(host);
  if (dev) cudaFree(dev);
  host = dev = nullptr;
  capacity = head = 0;
  for (Cached& c : cached) c.valid = false;
  if (f32) cudaFree(f32);
  if (copy_tmp) cudaFree(copy_tmp);
  if (freq_tmp) cudaFree(freq_tmp);
  f32 = nullptr;
  copy_tmp = nullptr;
  freq_tmp = nullptr;
  f32_count = copy_bytes = freq_count = 0;
  for (auto& [weight, shadow] : shadows) cudaFree(shadow);
  shadows.clear();
}

// --- construction ---

CudaBackend::CudaBackend(int device, int threads, CudaGemm gemm)
    : device_(device), threads_(threads), gemm_(gemm), state_(std::make_unique<State>()) {
  if (threads < 1) throw std::invalid_argument("CudaBackend: threads must be >= 1");
  int count = 0;
  SSD_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    throw std::runtime_error("CudaBackend: no CUDA device " + std::to_string(device) + " (" +
                             std::to_string(count) + " visible)");
  SSD_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  SSD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  device_name_ = prop.name;
  sm_count_ = std::max(1, prop.multiProcessorCount);
  try {
    SSD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cublasHandle_t h = nullptr;
    SSD_CUBLAS_CHECK(cublasCreate(&h));
    cublas_ = h;
    SSD_CUBLAS_CHECK(cublasSetStream(h, stream_));
  } catch (...) {
    if (cublas_) cublasDestroy(handle(cublas_));
    if (stream_) cudaStreamDestroy(stream_);
    throw;
  }
}

CudaBackend::~CudaBackend() {
  // No throwing from here: errors (a dead context) only mean there is nothing left to free.
  if (cudaSetDevice(device_) == cudaSuccess && stream_) cudaStreamSynchronize(stream_);
  state_->release_all();
  if (cublas_) cublasDestroy(handle(cublas_));
  if (stream_) cudaStreamDestroy(stream_);
  (void)cudaGetLastError();
}

std::string CudaBackend::device_name() const {
  return device_name_;
}

void CudaBackend::make_current() const {
  int current = -1;
  SSD_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_) SSD_CUDA_CHECK(cudaSetDevice(device_));
}

void CudaBackend::set_invariant_max_rows(int rows) {
  if (rows < 0) throw std::invalid_argument("CudaBackend: invariant_max_rows must be >= 0");
  invariant_max_rows_ = rows;
}

// --- memory ---

Buffer CudaBackend::alloc(size_t count) {
  make_current();
  const size_t bytes = round_up(std::max<size_t>(count, 1) * kElement, kStagingAlign);
  void* p = nullptr;
  SSD_CUDA_CHECK(cudaMalloc(&p, bytes));
  // Zeroed on the stream, so fresh KV caches are defined before any op reads them.
  SSD_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  return Buffer{p, count};
}

void CudaBackend::release(Buffer& buffer) {
  if (!buffer.data) {
    buffer = Buffer{};
    return;
  }
  make_current();
  // Work enqueued on the stream may still use the memory.
  SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
  auto shadow = state_->shadows.find(buffer.data);
  if (shadow != state_->shadows.end()) {
    SSD_CUDA_CHECK(cudaFree(shadow->second));
    state_->shadows.erase(shadow);
  }
  SSD_CUDA_CHECK(cudaFree(buffer.data));
  buffer = Buffer{};
}

Buffer CudaBackend::upload_weight(const float* host, size_t count) {
  make_current();
  Buffer b = alloc(count);
  from_host(b, 0, host, count);
  if (count <= kFp32ShadowMax && count > 0) {
    float* shadow = nullptr;
    SSD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&shadow), count * sizeof(float)));
    state_->shadows[b.data] = shadow;  // owned from here on, freed by release()
    SSD_CUDA_CHECK(
        cudaMemcpyAsync(shadow, host, count * sizeof(float), cudaMemcpyHostToDevice, stream_));
    SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `host` may be freed when we return
  }
  return b;
}

void CudaBackend::to_host(float* dst, const Buffer& src, size_t offset, size_t count) {
  check_range(src, offset, count, "CudaBackend::to_host");
  if (count == 0) return;
  make_current();
  const size_t chunk = std::min(count, kConvertChunk);
  float* scratch = state_->f32_scratch(stream_, chunk);
  for (size_t done = 0; done < count; done += chunk) {
    const size_t n = std::min(chunk, count - done);
    // The next chunk's conversion is stream-ordered after this chunk's copy out of scratch.
    cuda_kernels::bf16_to_f32(scratch, data(src) + offset + done, n, stream_);
    SSD_CUDA_CHECK(
        cudaMemcpyAsync(dst + done, scratch, n * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  }
  SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::from_host(Buffer& dst, size_t offset, const float* src, size_t count) {
  check_range(dst, offset, count, "CudaBackend::from_host");
  if (count == 0) return;
  make_current();
  const size_t chunk = std::min(count, kConvertChunk);
  float* scratch = state_->f32_scratch(stream_, chunk);
  for (size_t done = 0; done < count; done += chunk) {
    const size_t n = std::min(chunk, count - done);
    SSD_CUDA_CHECK(
        cudaMemcpyAsync(scratch, src + done, n * sizeof(float), cudaMemcpyHostToDevice, stream_));
    cuda_kernels::f32_to_bf16(data(dst) + offset + done, scratch, n, stream_);
  }
  // Pageable source memory: return only once it has been read.
  SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy(Buffer& dst, size_t dst_offset, const Buffer& src, size_t src_offset,
                       size_t count) {
  check_range(dst, dst_offset, count, "CudaBackend::copy (destination)");
  check_range(src, src_offset, count, "CudaBackend::copy (source)");
  if (count == 0) return;
  make_current();
  bf16* to = data(dst) + dst_offset;
  const bf16* from = data(src) + src_offset;
  if (to == from) return;
  const size_t bytes = count * kElement;
  const bool overlap = to < from + count && from < to + count;
  if (overlap) {
    // cudaMemcpy* is undefined for overlapping ranges; go through scratch (memmove semantics).
    void* tmp = state_->copy_scratch(stream_, bytes);
    SSD_CUDA_CHECK(cudaMemcpyAsync(tmp, from, bytes, cudaMemcpyDeviceToDevice, stream_));
    SSD_CUDA_CHECK(cudaMemcpyAsync(to, tmp, bytes, cudaMemcpyDeviceToDevice, stream_));
  } else {
    SSD_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
}

void CudaBackend::synchronize() {
  make_current();
  SSD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// --- ops ---

void CudaBackend::embed(Buffer& out, const Buffer& table, const int32_t* tokens, int rows,
                        int dim) {
  if (rows <= 0) return;
  if (dim <= 0) throw std::invalid_argument("CudaBackend::embed: dim must be > 0");
  check_elements(out, size_t(rows) * size_t(dim), "CudaBackend::embed (out)");
  const size_t vocab = table.count / size_t(dim);
  for (int r = 0; r < rows; ++r)
    if (tokens[r] < 0 || size_t(tokens[r]) >= vocab)
      throw std::out_of_range("CudaBackend::embed: token " + std::to_string(tokens[r]) +
                              " outside the table");
  make_current();
  const auto* dev_tokens = static_cast<const int32_t*>(
      state_->stage(stream_, State::kTokens, tokens, size_t(rows) * sizeof(int32_t)));
  cuda_kernels::embed(data(out), data(table), dev_tokens, rows, dim, stream_);
}

void CudaBackend::rmsnorm(Buffer& out, const Buffer& x, const Buffer& weight, int rows, int dim,
                          float eps) {
  if (rows <= 0) return;
  if (dim <= 0) throw std::invalid_argument("CudaBackend::rmsnorm: dim must be > 0");
  check_elements(x, size_t(rows) * size_t(dim), "CudaBackend::rmsnorm (x)");
  check_elements(out, size_t(rows) * size_t(dim), "CudaBackend::rmsnorm (out)");
  check_elements(weight, size_t(dim), "CudaBackend::rmsnorm (weight)");
  make_current();
  cuda_kernels::rmsnorm(data(out), data(x), data(weight), rows, dim, eps, stream_);
}

void CudaBackend::matmul(Buffer& out, const Buffer& x, const Buffer& w, int rows, int in,
                         int out_dim) {
  const bool invariant =
      gemm_ == CudaGemm::Invariant || (gemm_ == CudaGemm::Auto && rows <= invariant_max_rows_);
  matmul_with(invariant ? CudaGemm::Invariant : CudaGemm::Cublas, out, x, w, rows, in, out_dim);
}

void CudaBackend::matmul_with(CudaGemm kernel, Buffer& out, const Buffer& x, const Buffer& w,
                              int rows, int in, int out_dim) {
  if (rows <= 0 || out_dim <= 0) return;
  if (in <= 0) throw std::invalid_argument("CudaBackend::matmul: in must be > 0");
  check_elements(x, size_t(rows) * size_t(in), "CudaBackend::matmul (x)");
  check_elements(w, size_t(out_dim) * size_t(in), "CudaBackend::matmul (w)");
  check_elements(out, size_t(rows) * size_t(out_dim), "CudaBackend::matmul (out)");
  if (kernel == CudaGemm::Auto)
    kernel = rows <= invariant_max_rows_ ? CudaGemm::Invariant : CudaGemm::Cublas;
  make_current();
  if (kernel == CudaGemm::Invariant)
    cuda_kernels::matmul_invariant(data(out), data(x), data(w), rows, in, out_dim, sm_count_,
                                   stream_);
  else
    matmul_cublas(out, x, w, rows, in, out_dim);
}

void CudaBackend::matmul_cublas(Buffer& out, const Buffer& x, const Buffer& w, int rows, int in,
                                int out_dim) {
  // Row-major out[rows][out] = x[rows][in] * w[out][in]^T is, column-major,
  // out^T [out x rows] = (w viewed as [in x out])^T * (x viewed as [in x rows]).
  const float alpha = 1.0f, beta = 0.0f;
  SSD_CUBLAS_CHECK(cublasGemmEx(handle(cublas_), CUBLAS_OP_T, CUBLAS_OP_N, out_dim, rows, in,
                                &alpha, w.data, CUDA_R_16BF, in, x.data, CUDA_R_16BF, in, &beta,
                                out.data, CUDA_R_16BF, out_dim, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::rope(Buffer& x, const int32_t* positions, int rows, int heads, int head_dim,
                       const Buffer& inv_freq) {
  if (rows <= 0 || heads <= 0) return;
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw std::invalid_argument("CudaBackend::rope: head_dim must be even and > 0");
  const int half = head_dim / 2;
  check_elements(x, size_t(rows) * size_t(heads) * size_t(head_dim), "CudaBackend::rope (x)");
  check_elements(inv_freq, size_t(half), "CudaBackend::rope (inv_freq)");
  make_current();
  const float* freq = nullptr;
  auto shadow = state_->shadows.find(inv_freq.data);
  if (shadow != state_->shadows.end()) {
    freq = shadow->second;
  } else {
    // Not an uploaded weight: use its bf16 values.
    float* tmp = state_->freq_scratch(stream_, size_t(half));
    cuda_kernels::bf16_to_f32(tmp, data(inv_freq), size_t(half), stream_);
    freq = tmp;
  }
  const auto* dev_positions = static_cast<const int32_t*>(
      state_->stage(stream_, State::kPositions, positions, size_t(rows) * sizeof(int32_t)));
  cuda_kernels::rope(data(x), dev_positions, freq, rows, heads, head_dim, stream_);
}

const int32_t* CudaBackend::upload_mask(const AttentionMask& mask) {
  // One upload: seq[rows] slot[rows] prefix[rows] extra_begin[rows + 1] extra_slots[...].
  const size_t rows = size_t(mask.rows);
  const int32_t extras = mask.extra_begin[rows];
  if (mask.extra_begin[0] != 0 || extras < 0)
    throw std::invalid_argument("CudaBackend: AttentionMask extra_begin must start at 0");
  std::vector<int32_t>& w = state_->mask_words;
  w.resize(4 * rows + 1 + size_t(extras));
  std::copy(mask.seq, mask.seq + rows, w.begin());
  std::copy(mask.slot, mask.slot + rows, w.begin() + rows);
  std::copy(mask.prefix, mask.prefix + rows, w.begin() + 2 * rows);
  std::copy(mask.extra_begin, mask.extra_begin + rows + 1, w.begin() + 3 * rows);
  if (extras > 0) std::copy(mask.extra_slots, mask.extra_slots + extras, w.begin() + 4 * rows + 1);
  return static_cast<const int32_t*>(
      state_->stage(stream_, State::kMask, w.data(), w.size() * sizeof(int32_t)));
}

void CudaBackend::kv_store(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout,
                           const Buffer& k, const Buffer& v, const AttentionMask& mask) {
  if (mask.rows <= 0) return;
  for (int r = 0; r < mask.rows; ++r)
    if (mask.seq[r] < 0 || mask.seq[r] >= layout.sequences || mask.slot[r] < 0 ||
        mask.slot[r] >= layout.capacity)
      throw std::out_of_range("kv_store: slot outside the KV cache");
  const size_t kv_dim = size_t(layout.kv_heads) * size_t(layout.head_dim);
  check_elements(k_cache, layout.elements(), "CudaBackend::kv_store (k_cache)");
  check_elements(v_cache, layout.elements(), "CudaBackend::kv_store (v_cache)");
  check_elements(k, size_t(mask.rows) * kv_dim, "CudaBackend::kv_store (k)");
  check_elements(v, size_t(mask.rows) * kv_dim, "CudaBackend::kv_store (v)");
  make_current();
  const size_t rows = size_t(mask.rows);
  const int32_t* m = nullptr;
  if (mask.prefix && mask.extra_begin) {
    m = upload_mask(mask);  // the whole mask: attention() on the same mask reuses the upload
  } else {
    // kv_store needs only seq and slot (callers outside forward() may pass no more).
    std::vector<int32_t>& w = state_->mask_words;
    w.assign(mask.seq, mask.seq + rows);
    w.insert(w.end(), mask.slot, mask.slot + rows);
    m = static_cast<const int32_t*>(
        state_->stage(stream_, State::kSeqSlot, w.data(), w.size() * sizeof(int32_t)));
  }
  cuda_kernels::kv_store(data(k_cache), data(v_cache), data(k), data(v), m, m + rows, mask.rows,
                         layout.capacity, int(kv_dim), stream_);
}

void CudaBackend::kv_move(Buffer& k_cache, Buffer& v_cache, const KVLayout& layout, int src_seq,
                          int src_slot, int dst_seq, int dst_slot, int count) {
  if (count <= 0) return;
  const auto inside = [&](int seq, int slot) {
    return seq >= 0 && seq < layout.sequences && slot >= 0 && slot + count <= layout.capacity;
  };
  if (!inside(src_seq, src_slot) || !inside(dst_seq, dst_slot))
    throw std::out_of_range("kv_move: slots outside the KV cache");
  const size_t kv_dim = size_t(layout.kv_heads) * size_t(layout.head_dim);
  const size_t src = (size_t(src_seq) * size_t(layout.capacity) + size_t(src_slot)) * kv_dim;
  const size_t dst = (size_t(dst_seq) * size_t(layout.capacity) + size_t(dst_slot)) * kv_dim;
  copy(k_cache, dst, k_cache, src, size_t(count) * kv_dim);
  copy(v_cache, dst, v_cache, src, size_t(count) * kv_dim);
}

void CudaBackend::attention(Buffer& out, const Buffer& q, const Buffer& k_cache,
                            const Buffer& v_cache, const KVLayout& layout, int heads,
                            const AttentionMask& mask) {
  if (mask.rows <= 0 || heads <= 0) return;
  if (layout.kv_heads <= 0 || heads % layout.kv_heads != 0)
    throw std::invalid_argument("CudaBackend::attention: heads must be a multiple of kv_heads");
  if (layout.head_dim <= 0 || layout.head_dim > cuda_kernels::kMaxAttentionHeadDim)
    throw std::invalid_argument("CudaBackend::attention: head_dim must be in [1, " +
                                std::to_string(cuda_kernels::kMaxAttentionHeadDim) + "]");
  int longest = 0;
  for (int r = 0; r < mask.rows; ++r) {
    if (mask.seq[r] < 0 || mask.seq[r] >= layout.sequences || mask.prefix[r] < 0 ||
        mask.prefix[r] > layout.capacity || mask.extra_begin[r + 1] < mask.extra_begin[r])
      throw std::out_of_range("CudaBackend::attention: mask row outside the KV cache");
    longest = std::max(longest, mask.prefix[r] + (mask.extra_begin[r + 1] - mask.extra_begin[r]));
    for (int e = mask.extra_begin[r]; e < mask.extra_begin[r + 1]; ++e)
      if (mask.extra_slots[e] < 0 || mask.extra_slots[e] >= layout.capacity)
        throw std::out_of_range("CudaBackend::attention: extra slot outside the KV cache");
  }
  const size_t q_elements = size_t(mask.rows) * size_t(heads) * size_t(layout.head_dim);
  check_elements(q, q_elements, "CudaBackend::attention (q)");
  check_elements(out, q_elements, "CudaBackend::attention (out)");
  check_elements(k_cache, layout.elements(), "CudaBackend::attention (k_cache)");
  check_elements(v_cache, layout.elements(), "CudaBackend::attention (v_cache)");
  make_current();
  const int32_t* m = upload_mask(mask);
  const size_t rows = size_t(mask.rows);
  const cuda_kernels::DeviceMask dm{m, m + rows, m + 2 * rows, m + 3 * rows, m + 4 * rows + 1};
  float* partials = state_->f32_scratch(
      stream_, cuda_kernels::attention_partial_floats(mask.rows, heads, layout.head_dim, longest));
  cuda_kernels::attention(data(out), partials, data(q), data(k_cache), data(v_cache), dm, mask.rows,
                          heads, layout.kv_heads, layout.head_dim, layout.capacity, longest,
                          stream_);
}

void CudaBackend::swiglu(Buffer& out, const Buffer& gate, const Buffer& up, size_t count) {
  check_elements(out, count, "CudaBackend::swiglu (out)");
  check_elements(gate, count, "CudaBackend::swiglu (gate)");
  check_elements(up, count, "CudaBackend::swiglu (up)");
  make_current();
  cuda_kernels::swiglu(data(out), data(gate), data(up), count, stream_);
}

void CudaBackend::add(Buffer& x, const Buffer& y, size_t count) {
  check_elements(x, count, "CudaBackend::add (x)");
  check_elements(y, count, "CudaBackend::add (y)");
  make_current();
  cuda_kernels::add(data(x), data(y), count, stream_);
}

// --- CudaTimer ---

CudaTimer::CudaTimer(const CudaBackend& backend)
    : device_(backend.device()), stream_(backend.stream()) {
  backend.make_current();
  SSD_CUDA_CHECK(cudaEventCreate(&start_));
  try {
    SSD_CUDA_CHECK(cudaEventCreate(&stop_));
  } catch (...) {
    cudaEventDestroy(start_);
    throw;
  }
}

CudaTimer::~CudaTimer() {
  if (cudaSetDevice(device_) == cudaSuccess) {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  (void)cudaGetLastError();
}

void CudaTimer::start() {
  SSD_CUDA_CHECK(cudaSetDevice(device_));
  SSD_CUDA_CHECK(cudaEventRecord(start_, stream_));
}

void CudaTimer::stop() {
  SSD_CUDA_CHECK(cudaSetDevice(device_));
  SSD_CUDA_CHECK(cudaEventRecord(stop_, stream_));
}

double CudaTimer::elapsed_ms() {
  SSD_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0.0f;
  SSD_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return double(ms);
}

void cuda_sum_ranks_bf16(void* out, const void* gathered, size_t count, int ranks,
                         cudaStream_t stream) {
  cuda_kernels::sum_ranks(static_cast<bf16*>(out), static_cast<const bf16*>(gathered), count, ranks,
                          stream);
}

}  // namespace ssd
