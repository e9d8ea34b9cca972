// Host-only queries (device count, names, versions); compiled by the host C++ compiler.
#include "kernels/cuda/cuda_device.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/cuda_check.h"

namespace ssd {
namespace {

std::string version_string(int v) {
  // CUDA encodes versions as 1000 * major + 10 * minor.
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string describe(const char* call, cudaError_t e) {
  return std::string(call) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
}

}  // namespace

int cuda_device_count(std::string* reason) noexcept {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    // Not sticky, but clear it so a later cudaGetLastError() does not report it.
    (void)cudaGetLastError();
    if (reason) *reason = describe("cudaGetDeviceCount", e);
    return 0;
  }
  if (count == 0 && reason) *reason = "cudaGetDeviceCount: 0 devices";
  return count;
}

std::string cuda_device_name(int device) {
  cudaDeviceProp prop{};
  SSD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

std::string cuda_device_pci_bus_id(int device) {
  char id[64] = {};
  SSD_CUDA_CHECK(cudaDeviceGetPCIBusId(id, int(sizeof(id)), device));
  return id;
}

std::string cuda_compute_capability(int device) {
  int major = 0, minor = 0;
  SSD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SSD_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return std::to_string(major) + "." + std::to_string(minor);
}

CudaDeviceFacts cuda_current_device_facts() {
  int device = 0;
  SSD_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  SSD_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return {prop.multiProcessorCount, static_cast<long long>(prop.totalGlobalMem)};
}

std::vector<std::pair<std::string, std::string>> cuda_versions() {
  std::vector<std::pair<std::string, std::string>> out;
  int v = 0;
  cudaError_t e = cudaDriverGetVersion(&v);
  // cudaDriverGetVersion reports 0 (and success) when no driver is installed.
  out.emplace_back("cuda_driver", e != cudaSuccess
                                      ? "unavailable: " + describe("cudaDriverGetVersion", e)
                                  : v == 0 ? std::string("unavailable: no driver")
                                           : version_string(v));
  e = cudaRuntimeGetVersion(&v);
  out.emplace_back("cuda_runtime", e != cudaSuccess
                                       ? "unavailable: " + describe("cudaRuntimeGetVersion", e)
                                       : version_string(v));
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    out.emplace_back("cublas", std::to_string(major) + "." + std::to_string(minor) + "." +
                                   std::to_string(patch));
  else
    out.emplace_back("cublas", "unavailable: cublasGetProperty failed");
  (void)cudaGetLastError();
  return out;
}

}  // namespace ssd
