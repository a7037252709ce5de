// Helpers shared by the benchmark programs: reproducible inputs and the GFLOP/s / %-of-peak counters.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
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

// --rounds=N taken out of argv (Google Benchmark refuses flags it does not know): N, or `fallback` without one.
inline int take_rounds(int& argc, char** argv, int fallback) {
  int rounds = fallback;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
      rounds = std::atoi(argv[i] + 9);
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      --i;
    }
  return rounds;
}

// Times per benchmark name over the rounds of a round-robin run: the median (or, with best, the minimum); -1 for a
// name with none.
class RoundTimes {
 public:
  void add(const std::string& name, double t) { times_[name].push_back(t); }
  double get(const std::string& name, bool best = false) const {
    const auto it = times_.find(name);
    if (it == times_.end() || it->second.empty()) return -1.0;
    std::vector<double> t = it->second;
    std::sort(t.begin(), t.end());
    if (best) return t.front();
    return t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  }

 private:
  std::map<std::string, std::vector<double>> times_;
};

// Google Benchmark's console output, and each benchmark's times over the rounds (CPU time, or with wall the real
// time of a multi-threaded run) for a summary after the run.
class RoundReporter : public benchmark::ConsoleReporter {
 public:
  explicit RoundReporter(bool wall = false) : ConsoleReporter(OO_Tabular), wall_(wall) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs)
      if (!r.error_occurred && r.run_type == Run::RT_Iteration)
        times_.add(r.run_name.function_name, wall_ ? r.GetAdjustedRealTime() : r.GetAdjustedCPUTime());
  }
  const RoundTimes& times() const { return times_; }

 private:
  bool wall_;
  RoundTimes times_;
};

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
