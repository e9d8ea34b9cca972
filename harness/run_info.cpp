#include "harness/run_info.h"

#include <cblas.h>
#include <hdf5.h>
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <CLI/Version.hpp>
#include <algorithm>
#include <cerrno>
#include <ctime>
#include <nlohmann/json.hpp>
#include <thread>

#include "build_info.h"
#include "comm/collective.h"
#include "git_commit.h"
#include "kernels/cpu/cpu_backend.h"

namespace ssd {

std::string iso_time_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

RunInfo collect_run_info() {
  RunInfo info;
  info.version = SSD_VERSION;
  info.git_commit = SSD_GIT_COMMIT;
  info.build_type = SSD_BUILD_TYPE;
  info.compiler = SSD_CXX_COMPILER;
  info.start_time = iso_time_now();
  info.host = host_name();
  info.cpu_model = cpu_model_name();
  info.host_cpus = int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));

  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  info.libraries.push_back({"hdf5", std::to_string(major) + "." + std::to_string(minor) + "." +
                                        std::to_string(release)});
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int length = 0;
  MPI_Get_library_version(mpi_version, &length);
  std::string mpi(mpi_version, length);
  if (auto comma = mpi.find(','); comma != std::string::npos) mpi = mpi.substr(0, comma);
  info.libraries.push_back({"mpi", mpi});
  std::string blas = openblas_get_config();
  while (!blas.empty() && blas.back() == ' ') blas.pop_back();
  info.libraries.push_back({"openblas", blas});
  info.libraries.push_back({"cli11", CLI11_VERSION});
  info.libraries.push_back({"nlohmann_json", std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                                                 std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                                                 std::to_string(NLOHMANN_JSON_VERSION_PATCH)});
  info.libraries.push_back({"compiler", info.compiler});
  return info;
}

}  // namespace ssd

namespace ssd {

std::vector<RankInfo> gather_rank_info(const RankInfo& mine) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string text =
      nlohmann::json{{"rank", mine.rank}, {"role", mine.role},           {"host", mine.host},
                     {"pid", mine.pid},   {"device", mine.device},       {"threads", mine.threads},
                     {"cpus", mine.cpus}, {"cpu_count", mine.cpu_count}, {"gpu", mine.gpu},
                     {"llc", mine.llc},   {"host_llcs", mine.host_llcs}}
          .dump();
  int length = int(text.size());
  std::vector<int> lengths(size), offsets(size);
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(rank == 0 ? size_t(total) : 0, '\0');
  MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
              0, MPI_COMM_WORLD);
  std::vector<RankInfo> out;
  if (rank != 0) return out;
  for (int r = 0; r < size; ++r) {
    const auto j = nlohmann::json::parse(all.substr(offsets[r], lengths[r]));
    out.push_back({j["rank"], j["role"], j["host"], j["pid"], j["device"], j["threads"], j["cpus"],
                   j["cpu_count"], j["gpu"], j["llc"], j["host_llcs"]});
  }
  return out;
}

namespace {

// This binary's code, as the ranks compare it: version and commit (a Debug rank beside a
// Release one, or a CPU-only build beside a CUDA one, runs the same protocol).
std::string build_identity() {
  return std::string("ssd-bench ") + SSD_VERSION + " (commit " + SSD_GIT_COMMIT + ")";
}

// Of every rank's build_identity, in rank order: "" when all are the same, else one line naming
// the first rank whose build differs from rank 0's.
std::string build_mismatch(const std::vector<std::string>& identities) {
  for (size_t r = 1; r < identities.size(); ++r)
    if (identities[r] != identities[0])
      return "rank " + std::to_string(r) + " runs " + identities[r] + " but rank 0 runs " +
             identities[0] + ": launch the same ssd-bench build on every rank";
  return "";
}

}  // namespace

void check_same_build() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size == 1) return;
  // Fixed-size records, so that two builds exchange the same number of bytes whatever their
  // identities' lengths.
  constexpr int kRecord = 256;
  std::string mine = build_identity();
  mine.resize(kRecord - 1);
  std::vector<char> all(size_t(size) * kRecord);
  MPI_Allgather(mine.c_str(), kRecord, MPI_CHAR, all.data(), kRecord, MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> identities;
  for (int r = 0; r < size; ++r) identities.emplace_back(all.data() + size_t(r) * kRecord);
  if (std::string mismatch = build_mismatch(identities); !mismatch.empty())
    throw AgreedError(mismatch, 2);
}

int default_threads_per_rank() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local_ranks = 1;
  MPI_Comm_size(node, &local_ranks);
  MPI_Comm_free(&node);
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, cores / local_ranks);
  const int own = int(process_cpus().size());
  return own > 0 ? std::min(threads, own) : threads;
}

const std::vector<int>& process_cpus() {
  static const std::vector<int> cpus = [] {
    std::vector<int> out;
    // A mask as large as the kernel's: sched_getaffinity refuses (EINVAL) one smaller.
    for (int size = CPU_SETSIZE; size <= (1 << 20); size *= 2) {
      cpu_set_t* set = CPU_ALLOC(size);
      if (!set) break;
      const size_t bytes = CPU_ALLOC_SIZE(size);
      CPU_ZERO_S(bytes, set);
      const bool ok = sched_getaffinity(0, bytes, set) == 0;
      const int error = errno;
      if (ok)
        for (int cpu = 0; cpu < size; ++cpu)
          if (CPU_ISSET_S(cpu, bytes, set)) out.push_back(cpu);
      CPU_FREE(set);
      if (ok || error != EINVAL) break;
    }
    return out;
  }();
  return cpus;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t last = i;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
    out += (out.empty() ? "" : ",") + std::to_string(cpus[i]);
    if (last > i) out += "-" + std::to_string(cpus[last]);
    i = last + 1;
  }
  return out;
}

std::vector<std::string> affinity_warnings(const std::vector<RankInfo>& ranks) {
  std::vector<std::string> out;
  for (const RankInfo& r : ranks) {
    if (r.gpu || r.cpu_count <= 0 || r.threads <= r.cpu_count) continue;
    const std::string t = std::to_string(r.threads);
    out.push_back("rank " + std::to_string(r.rank) + " runs " + t + " threads on " +
                  std::to_string(r.cpu_count) + (r.cpu_count == 1 ? " CPU" : " CPUs") +
                  " (affinity " + r.cpus +
                  "): mpirun binds a rank to one core by default; launch with --map-by slot:PE=" +
                  t + " --bind-to core (or --bind-to none), or srun with --cpus-per-task=" + t);
  }
  return out;
}

}  // namespace ssd
