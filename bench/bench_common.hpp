// Helpers shared by the benchmark programs: reproducible inputs and the GFLOP/s / %-of-peak counters.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
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

}  // namespace bench
