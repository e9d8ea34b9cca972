// The host CPU's register-only compute peaks (compute_peak.cpp): characterize's compute roofs
// of a CPU step, one per --compute, and bench_gemm's yardstick for its kernels.
#pragma once

#include <optional>

namespace ssd {

struct HostPeakResult {  // one peak of world rank 0's CPU (the host, whatever the backend)
  int threads = 0;
  int lanes = 0;  // fp32 lanes (accumulators) per vector instruction in this build
  double gflops = 0.0, one_thread_gflops = 0.0;
};

// fp32 FMAs at the GEMMs' vector width (2 FLOPs per lane per instruction): the roof of
// --compute f32, whose GEMMs widen every weight to fp32.
HostPeakResult measure_host_fma(int threads);
// AVX512_BF16's vdpbf16ps (4 FLOPs per fp32 lane per instruction: two bf16 products and two
// adds): the roof of --compute bf16. nullopt where this build or this CPU lacks the instruction.
std::optional<HostPeakResult> measure_host_bf16_dot(int threads);
// AMX's TDPBF16PS on tiles (16 x 16 fp32 accumulators, 32 bf16 products each, 16384 FLOPs an
// instruction): the roof of --compute amx. nullopt where this build, CPU or OS lacks the tile
// unit.
std::optional<HostPeakResult> measure_host_amx_bf16(int threads);

}  // namespace ssd
