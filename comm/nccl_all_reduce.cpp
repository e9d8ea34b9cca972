// NcclComm and NcclAllReduce (see the header). Compiled in target ssd_comm_nccl, which defines
// SSD_NCCL_ALL_REDUCE_TU; comm/CMakeLists.txt's glob also hands this file to ssd_comm, where
// the guard makes it an empty translation unit (ssd_comm builds without CUDA or NCCL).
#if defined(SSD_NCCL_ALL_REDUCE_TU)

#include "comm/nccl_all_reduce.h"

#include <nccl.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"

#define SSD_NCCL_CHECK(call)                                                                 \
  do {                                                                                       \
    const ncclResult_t ssd_nccl_status_ = (call);                                            \
    if (ssd_nccl_status_ != ncclSuccess)                                                     \
      throw std::runtime_error(std::string("NCCL error: ") + #call +                         \
                               " failed: " + ncclGetErrorString(ssd_nccl_status_) + " at " + \
                               __FILE__ + ":" + std::to_string(__LINE__));                   \
  } while (0)

namespace ssd {

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unavailable";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch, older ones major * 1000 + ...
  const int major = v >= 10000 ? v / 10000 : v / 1000;
  const int minor = v >= 10000 ? (v % 10000) / 100 : (v % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

struct NcclComm::Impl {
  ncclComm_t comm = nullptr;
  CudaBackend* backend = nullptr;
  int rank = 0, size = 1;
  cudaStream_t stream = nullptr;
  cudaEvent_t backend_ready = nullptr;  // recorded on the backend's stream
  cudaEvent_t comm_done = nullptr;      // recorded on the communicator's stream

  // Creates the stream and events on the backend's device (the comm is set by the caller).
  void create_stream() {
    backend->make_current();
    SSD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    SSD_CUDA_CHECK(cudaEventCreateWithFlags(&backend_ready, cudaEventDisableTiming));
    SSD_CUDA_CHECK(cudaEventCreateWithFlags(&comm_done, cudaEventDisableTiming));
  }
  // The communicator's next work waits for everything enqueued on the backend's stream.
  void after_backend() {
    backend->make_current();
    SSD_CUDA_CHECK(cudaEventRecord(backend_ready, backend->stream()));
    SSD_CUDA_CHECK(cudaStreamWaitEvent(stream, backend_ready, 0));
  }
  // The backend's next work waits for everything enqueued on the communicator's stream.
  void before_backend() {
    SSD_CUDA_CHECK(cudaEventRecord(comm_done, stream));
    SSD_CUDA_CHECK(cudaStreamWaitEvent(backend->stream(), comm_done, 0));
  }
  void destroy() noexcept {
    if (backend) backend->make_current();
    if (stream) cudaStreamSynchronize(stream);
    if (comm) ncclCommDestroy(comm);
    if (backend_ready) cudaEventDestroy(backend_ready);
    if (comm_done) cudaEventDestroy(comm_done);
    if (stream) cudaStreamDestroy(stream);
    comm = nullptr;
    stream = nullptr;
    backend_ready = comm_done = nullptr;
    (void)cudaGetLastError();
  }
};

NcclComm::NcclComm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NcclComm::NcclComm(MPI_Comm comm, CudaBackend& backend) : impl_(std::make_unique<Impl>()) {
  impl_->backend = &backend;
  MPI_Comm_rank(comm, &impl_->rank);
  MPI_Comm_size(comm, &impl_->size);
  // Rank 0's failure to make the id must reach the others, or they would wait in MPI_Bcast's
  // partner forever: broadcast a status first.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  int status = int(ncclSuccess);
  if (impl_->rank == 0) status = int(ncclGetUniqueId(&id));
  MPI_Bcast(&status, 1, MPI_INT, 0, comm);
  if (status != int(ncclSuccess))
    throw std::runtime_error(std::string("NCCL error: ncclGetUniqueId failed on rank 0: ") +
                             ncclGetErrorString(ncclResult_t(status)));
  MPI_Bcast(&id, int(sizeof(id)), MPI_BYTE, 0, comm);
  try {
    backend.make_current();
    SSD_NCCL_CHECK(ncclCommInitRank(&impl_->comm, impl_->size, id, impl_->rank));
    impl_->create_stream();
  } catch (...) {
    impl_->destroy();
    throw;
  }
}

std::vector<std::unique_ptr<NcclComm>> NcclComm::create_local(
    const std::vector<CudaBackend*>& backends) {
  const int n = int(backends.size());
  if (n < 1) throw std::invalid_argument("NcclComm::create_local: no backends");
  std::vector<int> devices;
  for (CudaBackend* b : backends) devices.push_back(b->device());
  std::vector<ncclComm_t> comms(size_t(n), nullptr);
  SSD_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devices.data()));
  std::vector<std::unique_ptr<NcclComm>> out;
  try {
    for (int i = 0; i < n; ++i) {
      auto impl = std::make_unique<Impl>();
      impl->comm = comms[size_t(i)];
      comms[size_t(i)] = nullptr;  // owned by impl from here
      impl->backend = backends[size_t(i)];
      impl->rank = i;
      impl->size = n;
      try {
        impl->create_stream();
      } catch (...) {
        impl->destroy();
        throw;
      }
      out.push_back(std::unique_ptr<NcclComm>(new NcclComm(std::move(impl))));
    }
  } catch (...) {
    for (ncclComm_t c : comms)
      if (c) ncclCommDestroy(c);
    throw;
  }
  return out;
}

NcclComm::~NcclComm() {
  impl_->destroy();
}

int NcclComm::rank() const {
  return impl_->rank;
}
int NcclComm::size() const {
  return impl_->size;
}
CudaBackend& NcclComm::backend() const {
  return *impl_->backend;
}
cudaStream_t NcclComm::stream() const {
  return impl_->stream;
}

void NcclComm::synchronize() {
  impl_->backend->make_current();
  SSD_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
}

// --- NcclAllReduce ---

NcclAllReduce::NcclAllReduce(MPI_Comm comm, CudaBackend& backend)
    : NcclAllReduce(std::make_unique<NcclComm>(comm, backend)) {}

NcclAllReduce::NcclAllReduce(std::unique_ptr<NcclComm> comm) : comm_(std::move(comm)) {
  if (!comm_) throw std::invalid_argument("NcclAllReduce: no communicator");
}

NcclAllReduce::~NcclAllReduce() {
  comm_->backend().make_current();
  cudaStreamSynchronize(comm_->stream());
  if (gathered_) cudaFree(gathered_);
  (void)cudaGetLastError();
}

void NcclAllReduce::sum(Buffer& buffer, size_t count) {
  if (count > buffer.count) throw std::out_of_range("NcclAllReduce::sum: count > buffer size");
  stats_.calls += 1;
  stats_.bytes += int64_t(count * 2);
  const int ranks = comm_->size();
  if (ranks == 1 || count == 0) return;
  comm_->backend().make_current();
  const size_t need = count * 2 * size_t(ranks);
  if (need > gathered_bytes_) {
    comm_->synchronize();  // the old scratch may still be read by the previous sum
    if (gathered_) SSD_CUDA_CHECK(cudaFree(gathered_));
    gathered_ = nullptr;
    gathered_bytes_ = 0;
    SSD_CUDA_CHECK(cudaMalloc(&gathered_, need));
    gathered_bytes_ = need;
  }
  NcclComm::Impl& c = *comm_->impl_;
  c.after_backend();
  // Rank r's partial lands at gathered[r * count].
  SSD_NCCL_CHECK(ncclAllGather(buffer.data, gathered_, count, ncclBfloat16, c.comm, c.stream));
  cuda_sum_ranks_bf16(buffer.data, gathered_, count, ranks, c.stream);
  c.before_backend();
}

}  // namespace ssd

#endif  // SSD_NCCL_ALL_REDUCE_TU
