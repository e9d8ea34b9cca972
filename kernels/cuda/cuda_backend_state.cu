// CudaBackend::State: the pinned staging ring for host-side op arguments and the device scratch
// buffers (see cuda_backend_internal.cuh).
#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_backend_internal.cuh"
#include "kernels/cuda/cuda_check.h"

namespace ssd {

using namespace cuda_backend_detail;

namespace {
constexpr size_t kStagingInitial = size_t(1) << 20;
}  // namespace

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

}  // namespace ssd
