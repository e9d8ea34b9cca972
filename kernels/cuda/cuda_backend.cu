// CudaBackend: the device, its stream and cuBLAS handle, device memory, host<->device transfers
// with fp32<->bf16 conversion, and CudaTimer. The op entry points are in cuda_backend_ops.cu,
// the staging and scratch memory in cuda_backend_state.cu.
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_internal.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"

namespace ssd {

using namespace cuda_backend_detail;

namespace {

constexpr size_t kElement = sizeof(bf16);
// fp32 staging per conversion step: 4M elements (16 MB).
constexpr size_t kConvertChunk = size_t(1) << 22;

void check_range(const Buffer& b, size_t offset, size_t count, const char* what) {
  if (offset > b.count || count > b.count - offset)
    throw std::out_of_range(std::string(what) + ": [" + std::to_string(offset) + ", " +
                            std::to_string(offset) + " + " + std::to_string(count) +
                            ") outside a buffer of " + std::to_string(b.count) + " elements");
}

}  // namespace

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
  const char* graphs = std::getenv("SSD_CUDA_GRAPHS");
  graphs_ = !(graphs && std::string(graphs) == "0");
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
  if (recorder_) recorder_->release_all();
  if (cublas_) cublasDestroy(handle(cublas_));
  if (stream_) cudaStreamDestroy(stream_);
  (void)cudaGetLastError();
}

std::string CudaBackend::device_name() const {
  return device_name_;
}

std::string CudaBackend::device_description() const {
  return device_name_ + " (cuda:" + std::to_string(device_) + ", PCI " +
         cuda_device_pci_bus_id(device_) + ", cc " + cuda_compute_capability(device_) + ")";
}

std::vector<std::pair<std::string, std::string>> CudaBackend::library_versions() const {
  return cuda_versions();
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

void CudaBackend::keep_batch_invariant_up_to(int rows) {
  invariant_max_rows_ = std::max(invariant_max_rows_, rows);
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
  // cudaMemcpy* is undefined for overlapping ranges; those go through scratch (memmove).
  void* tmp = overlap ? state_->copy_scratch(stream_, bytes) : nullptr;
  if (!note_launch({kOpCopy, word(to), word(from), word(bytes), word(tmp)})) return;
  if (overlap) {
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
