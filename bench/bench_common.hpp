// Helpers shared by the benchmark programs: reproducible inputs and the GFLOP/s / %-of-peak counters.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace bench {

// The single-core FMA peak each program measures at start-up (peak.hpp), for the pct_peak counter.
inline double& peak_gflops() {
  static double value = 0.0;
  return value;
}

inline std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// GFLOPS and pct_peak (GFLOP/s ÷ the peak measured at start, through the same rate machinery).
inline void set_flop_counters(benchmark::State& state, double flops_per_iter) {
  state.counters["GFLOPS"] = benchmark::Counter(flops_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pct_peak"] =
      benchmark::Counter(flops_per_iter * 1e-9 * 100.0 / peak_gflops(), benchmark::Counter::kIsIterationInvariantRate);
}

// The rest of a benchmark program's main, after the peak was measured and the headline printed: Google
// Benchmark's flags, the peak and the instruction set in the JSON context, the run.
inline int run_benchmarks(int argc, char** argv, const char* simd_arch) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(peak_gflops()));
  benchmark::AddCustomContext("simd_arch", simd_arch);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace bench
