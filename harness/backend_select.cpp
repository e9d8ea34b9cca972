// make_backend(): --backend and --devices to a Backend, binding each rank to its GPU. The
// all-reduce factory is made here, beside the concrete backend, so nothing above needs to ask
// which backend it holds.
#include "harness/backend_select.h"

#include <mpi.h>
#include <unistd.h>

#include <charconv>
#include <string>
#include <system_error>

#include "comm/mpi_all_reduce.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/errors.h"

#if defined(SSD_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#endif
#if defined(SSD_HAVE_NCCL)
#include "comm/nccl_all_reduce.h"
#endif

namespace ssd {
namespace {

// "0,1,2" -> {0, 1, 2}; "" -> {}.
std::vector<int> parse_devices(const std::string& devices) {
  std::vector<int> out;
  if (devices.empty()) return out;
  const auto bad = [&] {
    return InputError("--devices " + devices +
                      ": expected comma-separated GPU indices, one per rank on a node (e.g. 0,1)");
  };
  size_t start = 0;
  while (true) {
    const size_t comma = devices.find(',', start);
    const size_t end = comma == std::string::npos ? devices.size() : comma;
    int value = -1;
    const char* first = devices.data() + start;
    const char* last = devices.data() + end;
    const auto [ptr, ec] = std::from_chars(first, last, value);
    if (first == last || ec != std::errc() || ptr != last || value < 0) throw bad();
    out.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void check_name(const std::string& name) {
  if (name != "cpu" && name != "cuda" && name != "auto")
    throw InputError("--backend " + name + ": expected cpu, cuda or auto");
}

GemmKind cpu_gemm(const std::string& gemm) {
  if (gemm == "invariant") return GemmKind::Invariant;
  if (gemm == "openblas") return GemmKind::OpenBLAS;
  throw InputError("--gemm " + gemm + ": the cpu backend has invariant or openblas");
}

// Every backend's values; whether one suits the backend and --gemm is for make_cpu and
// check_cuda_compute to say.
CpuCompute cpu_compute(const std::string& compute) {
  if (compute == "f32") return CpuCompute::F32;
  if (compute == "bf16") return CpuCompute::BF16;
  if (compute == "amx") return CpuCompute::Amx;
  if (compute == "auto") return CpuCompute::Auto;
  throw InputError("--compute " + compute + ": expected f32, bf16, amx or auto");
}

BackendSetup make_cpu(int threads, const std::string& gemm, const std::string& compute) {
  BackendSetup setup;
  const GemmKind kind = cpu_gemm(gemm);
  try {
    setup.backend = std::make_unique<CpuBackend>(threads, kind, cpu_compute(compute));
  } catch (const std::invalid_argument& e) {
    // The constructor refuses bf16 compute without AVX512_BF16, amx without AMX tiles, either
    // with OpenBLAS: the user's choice of flags, not a bug.
    if (compute != "bf16" && compute != "amx") throw;
    throw InputError("--compute " + compute + ": " + e.what());
  }
  setup.make_all_reduce = [](MPI_Comm group) -> std::unique_ptr<AllReduce> {
    return std::make_unique<MpiAllReduce>(group);
  };
  setup.libraries = setup.backend->library_versions();
  return setup;
}

#if defined(SSD_HAVE_CUDA)
std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "this host";
  return name;
}

CudaGemm cuda_gemm(const std::string& gemm) {
  if (gemm == "invariant") return CudaGemm::Auto;
  if (gemm == "invariant-tc") return CudaGemm::AutoTc;
  if (gemm == "cublas") return CudaGemm::Cublas;
  throw InputError("--gemm " + gemm + ": the cuda backend has invariant, invariant-tc or cublas");
}

// Every CUDA kernel takes bf16 activations and weights (CudaBackend keeps both in bf16), so
// --gemm alone decides the multiply: the CUDA-core kernel (invariant) widens both and runs fp32
// FMAs, the tensor-core kernel (invariant-tc) and cuBLAS multiply bf16 x bf16 -> fp32
// (CudaBackend::compute_for). f32 and auto leave --gemm's choice as it is.
void check_cuda_compute(const std::string& compute, const std::string& gemm) {
  if (compute == "amx")
    throw InputError(
        "--compute amx: AMX tiles are the CPU's; the cuda backend multiplies bf16 x "
        "bf16 on tensor cores with --compute bf16 --gemm invariant-tc");
  if (compute == "bf16" && gemm != "invariant-tc" && gemm != "cublas")
    throw InputError("--compute bf16: --gemm " + gemm +
                     " runs fp32 FMAs on the GPU; use --gemm invariant-tc (tensor cores)");
}

// This rank's index among the ranks on its node, and how many there are. Collective over
// MPI_COMM_WORLD when MPI is running.
std::pair<int, int> node_local_rank() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return {0, 1};
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int rank = 0, size = 1;
  MPI_Comm_rank(local, &rank);
  MPI_Comm_size(local, &size);
  MPI_Comm_free(&local);
  return {rank, size};
}

// The sum over a one-rank group: the buffer itself.
class IdentityAllReduce final : public AllReduce {
 public:
  void sum(Buffer&, size_t) override {}
};

// The all-reduce over `backend`'s device buffers (see BackendSetup::make_all_reduce). Holds a
// reference: the backend is on the heap, so moving its unique_ptr does not move it.
std::function<std::unique_ptr<AllReduce>(MPI_Comm)> cuda_all_reduce(CudaBackend& backend) {
  return [&backend](MPI_Comm group) -> std::unique_ptr<AllReduce> {
    int size = 1;
    MPI_Comm_size(group, &size);
    // Never an MpiAllReduce here: it would read device pointers as host memory.
    if (size == 1) return std::make_unique<IdentityAllReduce>();
#if defined(SSD_HAVE_NCCL)
    return std::make_unique<NcclAllReduce>(group, backend);
#else
    (void)backend;
    throw InputError(
        "--backend cuda: tensor parallelism needs NCCL, and this build has none (set NCCL_HOME "
        "and reconfigure)");
#endif
  };
}

BackendSetup make_cuda(int threads, CudaGemm gemm, const std::string& devices,
                       const std::vector<int>& device_list, int local_rank, int local_size,
                       int visible) {
  const std::string host = host_name();
  int device = 0;
  if (!device_list.empty()) {
    if (local_rank >= int(device_list.size()))
      throw InputError("--devices " + devices + ": " + std::to_string(device_list.size()) +
                       " GPU(s) for " + std::to_string(local_size) + " ranks on " + host);
    device = device_list[size_t(local_rank)];
    if (device >= visible)
      throw InputError("--devices " + devices + ": GPU " + std::to_string(device) +
                       " does not exist on " + host + " (" + std::to_string(visible) + " visible)");
  } else {
    // More ranks than GPUs on a node share them round-robin (e.g. a draft rank beside its
    // target on one GPU).
    device = local_rank % visible;
  }
  std::unique_ptr<CudaBackend> cuda;
  try {
    cuda = std::make_unique<CudaBackend>(device, threads, gemm);
  } catch (const std::runtime_error& e) {
    throw InputError("--backend cuda: no usable GPU on " + host + " (GPU " +
                     std::to_string(device) + ": " + e.what() + ")");
  }
  BackendSetup setup;
  setup.libraries = cuda->library_versions();
#if defined(SSD_HAVE_NCCL)
  setup.libraries.emplace_back("nccl", nccl_version());
#endif
  setup.make_all_reduce = cuda_all_reduce(*cuda);
  setup.backend = std::move(cuda);
  return setup;
}
#endif

}  // namespace

BackendSetup make_backend(const std::string& name, int threads, const std::string& gemm,
                          const std::string& compute, const std::string& devices) {
  check_name(name);
  cpu_compute(compute);  // a value no backend has, before anything else, on every rank alike
  const std::vector<int> device_list = parse_devices(devices);
  if (name == "cpu") return make_cpu(threads, gemm, compute);
#if defined(SSD_HAVE_CUDA)
  if (name == "cuda") {  // reject a bad --gemm or --compute before the collective step
    cuda_gemm(gemm);
    check_cuda_compute(compute, gemm);
  }
  const auto [local_rank, local_size] = node_local_rank();
  std::string why;
  const int visible = cuda_device_count(&why);
  if (name == "auto" && visible == 0) return make_cpu(threads, gemm, compute);
  if (visible == 0)
    throw InputError("--backend cuda: no usable GPU on " + host_name() + " (" + why + ")");
  const CudaGemm kind = cuda_gemm(gemm);
  check_cuda_compute(compute, gemm);
  return make_cuda(threads, kind, devices, device_list, local_rank, local_size, visible);
#else
  (void)device_list;  // validated above, so --devices errors do not depend on the build
  if (name == "auto") return make_cpu(threads, gemm, compute);
  throw InputError("--backend cuda: this build has no CUDA backend (configure with -DSSD_CUDA=ON)");
#endif
}

}  // namespace ssd
