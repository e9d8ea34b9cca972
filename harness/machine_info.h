// MachineInfo: which machine a result or characterize file came from, written as its /machine
// group (docs/hdf5-schema.md), so that `ssd-analyze compare` can set machines side by side and
// never average files of two kinds of host.
#pragma once

#include <cstdint>
#include <istream>
#include <string>

#include "harness/run_info.h"

namespace ssd {

class ResultFile;

struct CpuIdentity {
  std::string model = "unknown";  // /proc/cpuinfo "model name"
  int family = -1;                // "cpu family"; -1 where the file does not say (not x86)
  int model_number = -1;          // "model"
  // Of the flags the kernels dispatch on (avx2, avx512f, avx512_bf16), those the CPU has, in
  // that order, space separated: two hosts of one model name can differ in them (a VM that
  // hides AVX-512), and the compute peaks with them.
  std::string flags;
};

struct MachineInfo {
  CpuIdentity cpu;
  int cpus = 0;              // online CPUs (hardware threads), as RunInfo::host_cpus
  int64_t memory_bytes = 0;  // physical memory
  std::string gpu_name = "none";
  int gpu_sm_count = 0;
  int64_t gpu_memory_bytes = 0;
  std::string cuda_driver = "none", cuda_runtime = "none";
  std::string hostname;
  std::string slurm_job_id;  // SLURM_JOB_ID, "" outside a Slurm job
};

// The first processor's entry of a /proc/cpuinfo text.
CpuIdentity parse_cpuinfo(std::istream& in);

// This process's machine, from what `info` already holds (host name, CPU model, CPUs, GPU and
// CUDA versions from collect_run_info and the backend) and what it does not: /proc/cpuinfo's
// numbers and flags, the memory, the GPU's SMs and memory (the process's current CUDA device,
// the one its backend computes on), SLURM_JOB_ID.
MachineInfo collect_machine_info(const RunInfo& info);

// Writes collect_machine_info(info) as the attributes of /machine.
void write_machine_group(ResultFile& file, const RunInfo& info);

}  // namespace ssd
