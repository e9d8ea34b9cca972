// RunInfo: what ran where: build, host, libraries, rank layout. Printed in the console header
// and stored as HDF5 attributes.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ssd {

struct RankInfo {
  int rank = 0;
  std::string role;  // "target tp 0/1", later "draft 0/1"
  std::string host;
  int pid = 0;
  std::string device;
  int threads = 0;
  // The CPUs the rank may run on (its affinity mask as it started, process_cpus()), as
  // cpu_list_text writes them, and how many; "" and 0 where the system did not say.
  std::string cpus;
  int cpu_count = 0;
  bool gpu = false;  // computes on a GPU: its threads are host-side only
  // The last-level cache domains of those CPUs (harness/cache_domains.h), as cpu_list_text
  // writes numbers, and how many the rank's host has; "" and 0 where the system did not say.
  std::string llc;
  int host_llcs = 0;
};

struct RunInfo {
  std::string version, git_commit, build_type, compiler;
  std::string start_time;  // ISO 8601, UTC
  std::string host;
  std::string cpu_model;
  int host_cpus = 0;  // online CPUs of rank 0's host: more ranks than this share cores
  std::string gpu_model = "none";
  std::vector<std::pair<std::string, std::string>> libraries;  // name, version
  std::vector<RankInfo> ranks;
};

// Build, host and library facts of this process; ranks are left for the caller to fill.
RunInfo collect_run_info();
std::string iso_time_now();
std::string host_name();

}  // namespace ssd

namespace ssd {

// Collective over MPI_COMM_WORLD: every rank's RankInfo, in rank order, on world rank 0
// (other ranks get an empty vector).
std::vector<RankInfo> gather_rank_info(const RankInfo& mine);

// Threads per rank when --threads is not given: the node's cores shared by its ranks, and no
// more than the rank's own CPUs (process_cpus()).
int default_threads_per_rank();

// This process's CPUs, in increasing order: its affinity mask as first asked for, which main
// does right after MPI_Init, before an OpenMP or BLAS thread pool can narrow the main thread's
// (OMP_PROC_BIND pins it to one place). Empty where sched_getaffinity fails.
const std::vector<int>& process_cpus();

// CPU numbers (increasing) as the kernel's lists write them: "0-3,8,10-11".
std::string cpu_list_text(const std::vector<int>& cpus);

// One line per rank that runs more CPU threads than its affinity has CPUs, in rank order: the
// header's warnings, without their "# Warning: ". Not an error: oversubscribing may be meant.
std::vector<std::string> affinity_warnings(const std::vector<RankInfo>& ranks);

// Collective over MPI_COMM_WORLD, before any other exchange: every rank runs the same build, or
// every rank throws the same AgreedError (exit code 2). Ranks of two builds (an old binary on
// one node's path, a rebuilt one on another's) otherwise met in collectives whose messages
// differ, and OpenMPI stopped the job with a buffer-unpack error that named neither.
void check_same_build();

}  // namespace ssd
