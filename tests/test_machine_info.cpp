// /machine's CPU identity from /proc/cpuinfo's text, and what this host reports.
#include <gtest/gtest.h>

#include <sstream>

#include "harness/machine_info.h"

namespace ssd {
namespace {

TEST(ParseCpuinfo, TheFirstProcessorAndTheKernelsFlags) {
  std::istringstream text(
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
      "model name\t: AMD EPYC 9B14\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_bf16\n\n"
      "processor\t: 1\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: other\n");
  const CpuIdentity cpu = parse_cpuinfo(text);
  EXPECT_EQ(cpu.model, "AMD EPYC 9B14");
  EXPECT_EQ(cpu.family, 25);
  EXPECT_EQ(cpu.model_number, 17);
  EXPECT_EQ(cpu.flags, "avx2 avx512f avx512_bf16");
}

TEST(ParseCpuinfo, WhatTheTextDoesNotSay) {
  std::istringstream text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n");
  const CpuIdentity cpu = parse_cpuinfo(text);
  EXPECT_EQ(cpu.model, "unknown");
  EXPECT_EQ(cpu.family, -1);
  EXPECT_EQ(cpu.model_number, -1);
  EXPECT_EQ(cpu.flags, "");
}

TEST(CollectMachineInfo, ThisHost) {
  RunInfo info = collect_run_info();
  const MachineInfo m = collect_machine_info(info);
  EXPECT_EQ(m.cpu.model, info.cpu_model);
  EXPECT_EQ(m.hostname, info.host);
  EXPECT_GT(m.cpus, 0);
  EXPECT_GT(m.memory_bytes, int64_t(1) << 20);
  EXPECT_EQ(m.gpu_name, "none");  // the CPU backend's run info names no GPU
  info.gpu_model = "NVIDIA H100 80GB HBM3 (cuda:0, PCI 0000:1B:00.0, cc 9.0)";
  info.libraries.push_back({"cuda_driver", "13.0"});
  EXPECT_EQ(collect_machine_info(info).gpu_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(collect_machine_info(info).cuda_driver, "13.0");
}

}  // namespace
}  // namespace ssd
