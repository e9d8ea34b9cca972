// The bf16 GEMM's cache tuning by the core's L1D (dot_tuning.h).
#include "kernels/cpu/dot_tuning.h"

#include <unistd.h>

#include <atomic>

#include "kernels/cpu/cpu_backend.h"

namespace ssd {

namespace {
std::atomic<size_t> l1d_override{0};  // set_bf16_dot_l1d_bytes: 0, the CPU's own L1D
}  // namespace

void set_bf16_dot_l1d_bytes(size_t bytes) {
  l1d_override.store(bytes);
}

DotTuning dot_tuning() {
  static const size_t reported = [] {
    const long l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    return l1d > 0 ? size_t(l1d) : size_t(0);
  }();
  const size_t set = l1d_override.load();
  const size_t l1d = set ? set : reported;
  if (l1d >= 48 * 1024) return {24 * 1024, 40, 20, true, true, 1024, 512 * 1024};
  return {12 * 1024, 10, 10, false, false, 0, 256 * 1024};
}

}  // namespace ssd
