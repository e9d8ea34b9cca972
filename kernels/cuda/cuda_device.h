// Host-side questions about the machine's GPUs, safe to ask anywhere: on a machine without an
// NVIDIA driver or GPU they answer "none" (with the reason) instead of failing. No CUDA headers
// here, so harness code and tests include it with the ordinary host compiler.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ssd {

// Number of CUDA devices this process can use; 0 when there is no driver, no device, or the
// runtime cannot start. `reason` (optional) receives why it is 0, e.g.
// "cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version
// (cudaErrorInsufficientDriver)". Never throws.
int cuda_device_count(std::string* reason = nullptr) noexcept;

// Name ("NVIDIA H100 80GB HBM3"), PCI bus id ("0000:1B:00.0") and compute capability ("9.0")
// of a device. Throw std::runtime_error on CUDA errors.
std::string cuda_device_name(int device);
std::string cuda_device_pci_bus_id(int device);
std::string cuda_compute_capability(int device);

// SMs and memory of the device this process has current (cudaSetDevice: a CudaBackend's), for
// a result file's /machine. Throws std::runtime_error on CUDA errors.
struct CudaDeviceFacts {
  int sm_count = 0;
  long long memory_bytes = 0;
};
CudaDeviceFacts cuda_current_device_facts();

// {"cuda_driver", "13.0"}, {"cuda_runtime", "13.0"}, {"cublas", "13.0.2"}; a version that cannot
// be read is reported as "unavailable: <why>". Never throws.
std::vector<std::pair<std::string, std::string>> cuda_versions();

}  // namespace ssd
