// Google Benchmark: linear() with f32, f16 and q8 weights against fp32 matmul on the same shape (y = x·Wᵀ, W in
// nn.Linear layout): m = 1 at 1024 × 1024 (decoding through a large projection: the weights stream from the caches
// or memory) and m = 1 … 8 at 256 × 256 (the weights stay in L2). Every point's variants run round-robin, `--rounds`
// times (default 7), so slow phases of a shared machine hit them alike; the summary takes the median CPU time of
// each and prints matmul ÷ variant (> 1: faster than fp32 matmul) against the goals.
// Run pinned to one core: taskset -c 1 build/bench/bench_linear
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <microattn/microattn.hpp>

#include "bench_common.hpp"
#include "peak.hpp"

namespace ma = microattn;

namespace {

// One weight matrix in every format.
struct Weights {
  std::size_t n, k;
  std::vector<float> f32;
  std::vector<std::uint16_t> f16;
  std::map<std::size_t, std::vector<std::int8_t>> q8;  // by group
  std::map<std::size_t, std::vector<float>> scales;    // by group
  Weights(std::size_t rows, std::size_t cols) : n(rows), k(cols), f32(bench::random_vector(rows * cols, 3)) {
    for (float v : f32) f16.push_back(ma::f16_from_float(v));
    for (std::size_t g : {std::size_t{32}, std::size_t{64}, cols}) {
      std::vector<std::int8_t>& q = q8[g];
      std::vector<float>& s = scales[g];
      q.resize(rows * cols);
      s.resize(rows * cols / g);
      if (ma::quantize_q8(ma::make_view(static_cast<const float*>(f32.data()), rows, cols), g, q.data(), s.data()) !=
          ma::Status::ok)
        std::abort();
    }
  }
  ma::WeightMatrix matrix(const std::string& variant) const {
    if (variant == "f32") return ma::weights_f32(f32.data(), n, k);
    if (variant == "f16") return ma::weights_f16(f16.data(), n, k);
    const std::size_t g = variant == "q8_g32" ? 32 : variant == "q8_g64" ? 64 : k;
    return ma::weights_q8(q8.at(g).data(), scales.at(g).data(), n, k, g);
  }
};

const std::vector<std::string> variants = {"matmul", "f32", "f16", "q8_g64", "q8_g32", "q8_grow"};

struct Point {
  std::size_t m, nk;
  std::string name() const { return std::to_string(nk) + "x" + std::to_string(nk) + "/m" + std::to_string(m); }
};
std::vector<Point> points() {
  std::vector<Point> p{{1, 1024}};
  for (std::size_t m = 1; m <= 8; ++m) p.push_back({m, 256});
  return p;
}

void run_point(benchmark::State& state, const Point& p, const std::string& variant) {
  static std::map<std::size_t, Weights> all;
  auto it = all.find(p.nk);
  if (it == all.end()) it = all.emplace(p.nk, Weights(p.nk, p.nk)).first;
  const Weights& w = it->second;
  const std::vector<float> x = bench::random_vector(p.m * p.nk, 5), bias = bench::random_vector(p.nk, 6);
  std::vector<float> y(p.m * p.nk);
  const auto xv = ma::make_view(x.data(), p.m, p.nk);
  const auto yv = ma::make_view(y.data(), p.m, p.nk);
  const ma::WeightMatrix wm = w.matrix(variant == "matmul" ? "f32" : variant);
  for (auto _ : state) {
    const ma::Status s = variant == "matmul" ? ma::matmul(xv, ma::make_view(w.f32.data(), p.nk, p.nk), yv, true)
                                             : ma::linear(xv, wm, nullptr, yv);
    if (s != ma::Status::ok) state.SkipWithError("call failed");
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  bench::set_flop_counters(state, 2.0 * static_cast<double>(p.m * p.nk * p.nk));
}

// The ratio table from the rounds' medians (or, with best, their fastest); the points that miss a goal.
int print_summary(const bench::RoundTimes& times, bool best) {
  std::printf("\nSummary: %s CPU µs over the rounds; ratio = fp32 matmul ÷ variant (> 1: faster than matmul)\n",
              best ? "fastest" : "median");
  std::printf("%-14s %9s %9s %9s %9s %9s %9s | %6s %6s %6s %6s | goal\n", "point", "matmul", "f32", "f16", "q8_g64",
              "q8_g32", "q8_grow", "f16", "q8_g64", "q8_g32", "q8_grow");
  int missed = 0;
  for (const Point& p : points()) {
    double t[6];
    for (std::size_t v = 0; v < variants.size(); ++v) t[v] = times.get("linear/" + p.name() + "/" + variants[v], best);
    if (t[0] <= 0) continue;
    const double f16_goal = p.nk == 1024 ? 1.7 : 1.0, q8_goal = p.nk == 1024 ? 3.0 : 1.0;
    const double rf16 = t[0] / t[2], rq64 = t[0] / t[3], rq32 = t[0] / t[4], rqrow = t[0] / t[5];
    const bool met = rf16 >= f16_goal && rq64 >= q8_goal && rq32 >= q8_goal && rqrow >= q8_goal;
    missed += met ? 0 : 1;
    std::printf("%-14s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f | %6.2f %6.2f %6.2f %6.2f | f16 >= %.1f, q8 >= %.1f: %s\n",
                p.name().c_str(), t[0], t[1], t[2], t[3], t[4], t[5], rf16, rq64, rq32, rqrow, f16_goal, q8_goal,
                met ? "met" : "MISSED");
  }
  return missed;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = bench::take_rounds(argc, argv, 7);
  bench::peak_gflops() = bench::measure_fma_peak_gflops();
  std::printf("microattn kernels: %s (%s); linear: %s, %s, %s; single-core FMA peak (%s): %.1f GFLOP/s\n",
              ma::simd_arch(), ma::matmul_kernel_name(), ma::linear_kernel_name(ma::Format::f32),
              ma::linear_kernel_name(ma::Format::f16), ma::linear_kernel_name(ma::Format::q8), bench::peak_arch(),
              bench::peak_gflops());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(bench::peak_gflops()));
  for (int r = 0; r < rounds; ++r)
    for (const Point& p : points())
      for (const std::string& v : variants)
        benchmark::RegisterBenchmark(("linear/" + p.name() + "/" + v).c_str(),
                                     [p, v](benchmark::State& s) { run_point(s, p, v); })
            ->MinTime(0.05)
            ->Unit(benchmark::kMicrosecond);
  bench::RoundReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_summary(reporter.times(), true);
  const int missed = print_summary(reporter.times(), false);
  std::printf("%d point(s) missing a goal (medians)\n", missed);
  benchmark::Shutdown();
  return 0;
}
