#include "harness/machine_info.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "harness/hdf5_writer.h"
#if defined(SSD_HAVE_CUDA)
#include "kernels/cuda/cuda_device.h"
#endif

namespace ssd {
namespace {

std::string field_value(const std::string& line) {
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return "";
  const size_t start = line.find_first_not_of(" \t", colon + 1);
  return start == std::string::npos ? "" : line.substr(start);
}

int to_int(const std::string& text) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  return end == text.c_str() ? -1 : int(v);
}

// The GPU's name as the rank table shows it carries the device's place in its node
// ("NVIDIA H100 80GB HBM3 (cuda:0, PCI ..., cc 9.0)"); a machine is the kind of GPU.
std::string gpu_kind(const std::string& description) {
  const size_t paren = description.find(" (cuda:");
  return paren == std::string::npos ? description : description.substr(0, paren);
}

std::string library(const RunInfo& info, const std::string& name) {
  for (const auto& [key, version] : info.libraries)
    if (key == name) return version;
  return "none";
}

}  // namespace

CpuIdentity parse_cpuinfo(std::istream& in) {
  CpuIdentity cpu;
  std::string line;
  std::vector<std::string> present;
  while (std::getline(in, line)) {
    if (line.empty() && cpu.family >= 0) break;  // the first processor's entry ends
    const std::string key = line.substr(0, line.find_first_of("\t:"));
    if (key == "model name") cpu.model = field_value(line);
    if (key == "cpu family") cpu.family = to_int(field_value(line));
    if (key == "model") cpu.model_number = to_int(field_value(line));
    if (key == "flags") {
      std::istringstream words(field_value(line));
      present.assign(std::istream_iterator<std::string>(words), {});
    }
  }
  for (const char* flag : {"avx2", "avx512f", "avx512_bf16"}) {
    for (const std::string& p : present)
      if (p == flag) cpu.flags += (cpu.flags.empty() ? "" : " ") + p;
  }
  return cpu;
}

MachineInfo collect_machine_info(const RunInfo& info) {
  MachineInfo m;
  std::ifstream cpuinfo("/proc/cpuinfo");
  m.cpu = parse_cpuinfo(cpuinfo);
  m.cpu.model = info.cpu_model;  // as the header and the root attribute name it
  m.cpus = info.host_cpus;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  m.memory_bytes = pages > 0 && page > 0 ? int64_t(pages) * page : 0;
  m.hostname = info.host;
  if (const char* job = std::getenv("SLURM_JOB_ID")) m.slurm_job_id = job;
  if (info.gpu_model != "none" && !info.gpu_model.empty()) {
    m.gpu_name = gpu_kind(info.gpu_model);
    m.cuda_driver = library(info, "cuda_driver");
    m.cuda_runtime = library(info, "cuda_runtime");
#if defined(SSD_HAVE_CUDA)
    try {
      const CudaDeviceFacts facts = cuda_current_device_facts();
      m.gpu_sm_count = facts.sm_count;
      m.gpu_memory_bytes = facts.memory_bytes;
    } catch (const std::exception&) {
      // The run has ended; a device that cannot answer now leaves 0 (unknown), not a lost file.
    }
#endif
  }
  return m;
}

void write_machine_group(ResultFile& file, const RunInfo& info) {
  const MachineInfo m = collect_machine_info(info);
  const std::string g = "/machine";
  file.set_attr(g, "cpu_model", m.cpu.model);
  file.set_attr(g, "cpu_family", m.cpu.family);
  file.set_attr(g, "cpu_model_number", m.cpu.model_number);
  file.set_attr(g, "cpu_flags", m.cpu.flags);
  file.set_attr(g, "cpus", m.cpus);
  file.set_attr(g, "memory_bytes", m.memory_bytes);
  file.set_attr(g, "gpu_name", m.gpu_name);
  file.set_attr(g, "gpu_sm_count", m.gpu_sm_count);
  file.set_attr(g, "gpu_memory_bytes", m.gpu_memory_bytes);
  file.set_attr(g, "cuda_driver", m.cuda_driver);
  file.set_attr(g, "cuda_runtime", m.cuda_runtime);
  file.set_attr(g, "hostname", m.hostname);
  file.set_attr(g, "slurm_job_id", m.slurm_job_id);
}

}  // namespace ssd
