// Error checking for CUDA runtime calls: every call goes through SSD_CUDA_CHECK, which throws
// std::runtime_error naming the call, the error and file:line. Kernel launches are followed by
// SSD_CUDA_CHECK_LAUNCH() (launch-configuration errors; faults inside a kernel surface at the
// next synchronising call, also checked).
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ssd::cuda_detail {

[[noreturn]] inline void throw_cuda_error(const char* call, cudaError_t code, const char* file,
                                          int line) {
  throw std::runtime_error(std::string("CUDA error: ") + call + " failed: " +
                           cudaGetErrorString(code) + " (" + cudaGetErrorName(code) + " = " +
                           std::to_string(int(code)) + ") at " + file + ":" + std::to_string(line));
}

}  // namespace ssd::cuda_detail

#define SSD_CUDA_CHECK(call)                                                             \
  do {                                                                                   \
    const cudaError_t ssd_cuda_status_ = (call);                                         \
    if (ssd_cuda_status_ != cudaSuccess)                                                 \
      ::ssd::cuda_detail::throw_cuda_error(#call, ssd_cuda_status_, __FILE__, __LINE__); \
  } while (0)

#define SSD_CUDA_CHECK_LAUNCH() SSD_CUDA_CHECK(cudaGetLastError())
