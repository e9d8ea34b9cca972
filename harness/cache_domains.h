// Which last-level cache each rank's CPUs sit under, and the header's warning where SSD's draft
// rank shares one with the target's ranks while its host has others. Ranks under one
// last-level cache (one die of an AMD EPYC, one socket of most Intel parts) share that cache
// and the die's path to memory; SSD's two ranks stream their weights at once, so that path is
// the bound. Measured on a 2-core Zen 5 KVM guest whose hypervisor moves the vCPUs between one
// die and two (characterize's `# node placement`): both cores together read 38 GB/s while on
// one die, 60 while on two (docs/pair-measurements.md, "What the two-core state is").
#pragma once

#include <string>
#include <vector>

#include "harness/run_info.h"

namespace ssd {

// The kernel's CPU list syntax ("0-3,8,10-11") as CPU numbers; {} for "" or a malformed list.
std::vector<int> parse_cpu_list(const std::string& text);

// Each CPU's last-level cache domain under `cpu_dir` (a /sys/devices/system/cpu): the `id` of
// the highest-level cache its cache/indexN directories describe, or, without an `id` (older
// kernels), the first CPU of that cache's shared_cpu_list; -1 where the directory says nothing.
std::vector<int> last_level_cache_ids(const std::vector<int>& cpus,
                                      const std::string& cpu_dir = "/sys/devices/system/cpu");

// The distinct last-level cache domains of `cpus` (unknown ones left out), increasing, and how
// many the host's online CPUs span (0 where unknown), from `cpu_dir`.
std::vector<int> cache_domains(const std::vector<int>& cpus,
                               const std::string& cpu_dir = "/sys/devices/system/cpu");
int host_cache_domains(const std::string& cpu_dir = "/sys/devices/system/cpu");

// One line per draft rank whose last-level cache domains (RankInfo::llc) meet a target rank's on
// the same host, where that host has more domains than the one they share; none unless
// `ranks_stream_together` (SSD and characterize: the draft builds while the target verifies;
// SD's ranks take turns). The header's warnings, without their "# Warning: ".
std::vector<std::string> shared_cache_warnings(const std::vector<RankInfo>& ranks,
                                               bool ranks_stream_together);

}  // namespace ssd
