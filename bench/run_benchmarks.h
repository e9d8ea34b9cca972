// The end of every bench program's main: Google Benchmark's own flags (--benchmark_filter,
// --benchmark_repetitions, ...), then every benchmark main() registered. Exit status 1 on a
// flag neither main nor Google Benchmark knows.
#pragma once

#include <benchmark/benchmark.h>

inline int run_registered_benchmarks(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
