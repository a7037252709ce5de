// Google Benchmark: linear() on one worker against linear() over PosixPool with 2 workers (microattn/parallel.hpp),
// f32 and q8 (groups of 64, 32 where 64 does not divide a row) weights, m = 1 (decoding) at llama2.c's shapes
// (stories15M: 288 × 288, 768 × 288, 288 × 768, its classifier 32000 × 288) and square ones from 512 to 4096.
// Wall-clock time (two threads), each point's variants round-robin over `--rounds` (default 7); the summary prints the
// median time of each and one ÷ two workers, against the goal (≥ 1.6 at 1024 × 1024 and larger; never below 1
// elsewhere: small products stay on the calling thread). Run on two cores: taskset -c 0,1 build/bench/bench_parallel
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <microattn/microattn.hpp>
#include <microattn/posix_pool.hpp>

#include "bench_common.hpp"

namespace ma = microattn;

namespace {

struct Point {
  std::size_t n, k;
  std::string name() const { return std::to_string(n) + "x" + std::to_string(k); }
};
const std::vector<Point> points = {{288, 288},   {768, 288},   {288, 768},   {512, 512},  {1024, 1024},
                                   {2048, 2048}, {4096, 4096}, {32000, 288}, {4096, 1024}};
const std::vector<std::string> formats = {"f32", "q8"};

// q8 in groups of 64, or 32 where 64 does not divide the row (llama2.c's export halves the group until it does).
std::size_t group_for(std::size_t k) { return k % 64 == 0 ? 64 : 32; }

struct Weights {
  std::vector<float> f32;
  std::vector<std::int8_t> q8;
  std::vector<float> scales;
  Weights(std::size_t n, std::size_t k) : f32(bench::random_vector(n * k, 3)), q8(n * k), scales(n * k / group_for(k)) {
    if (ma::quantize_q8(ma::make_view(static_cast<const float*>(f32.data()), n, k), group_for(k), q8.data(),
                        scales.data()) != ma::Status::ok)
      std::abort();
  }
};

ma::PosixPool<2>& pool() {
  static ma::PosixPool<2> p(2);
  return p;
}

void run_point(benchmark::State& state, const Point& p, const std::string& format, std::size_t workers) {
  static std::map<std::string, std::unique_ptr<Weights>> all;
  auto& w = all[p.name()];
  if (!w) w = std::make_unique<Weights>(p.n, p.k);
  const std::vector<float> x = bench::random_vector(p.k, 5);
  std::vector<float> y(p.n);
  const auto xv = ma::make_view(x.data(), 1, p.k);
  const auto yv = ma::make_view(y.data(), 1, p.n);
  const ma::WeightMatrix wm = format == "f32"
                                  ? ma::weights_f32(w->f32.data(), p.n, p.k)
                                  : ma::weights_q8(w->q8.data(), w->scales.data(), p.n, p.k, group_for(p.k));
  const ma::Parallel par = pool().parallel();
  for (auto _ : state) {
    const ma::Status s = workers == 1 ? ma::linear(xv, wm, nullptr, yv) : ma::linear(xv, wm, nullptr, yv, par);
    if (s != ma::Status::ok) state.SkipWithError("call failed");
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
}

std::string bench_name(const Point& p, const std::string& f, std::size_t workers) {
  return "linear_parallel/" + p.name() + "/" + f + "/w" + std::to_string(workers);
}

// The ratio table from the medians of the rounds; the points that miss their goal.
int print_summary(const bench::RoundTimes& times) {
  std::printf("\nSummary: median wall µs over the rounds; ratio = one worker ÷ two workers\n");
  std::printf("%-12s %-4s %10s %10s %7s | goal\n", "point", "fmt", "1 worker", "2 workers", "ratio");
  int missed = 0;
  for (const Point& p : points)
    for (const std::string& f : formats) {
      const double t1 = times.get(bench_name(p, f, 1)), t2 = times.get(bench_name(p, f, 2));
      if (t1 <= 0 || t2 <= 0) continue;
      const bool large = p.n * p.k >= 1024 * 1024;
      const double goal = large ? 1.6 : 0.97;  // small: not slower (3 % for noise)
      const bool met = t1 / t2 >= goal;
      missed += met ? 0 : 1;
      std::printf("%-12s %-4s %10.2f %10.2f %7.2f | >= %.2f: %s\n", p.name().c_str(), f.c_str(), t1, t2, t1 / t2, goal,
                  met ? "met" : "MISSED");
    }
  return missed;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = bench::take_rounds(argc, argv, 7);
  std::printf("microattn kernels: %s; linear: %s, %s; pool workers: %zu\n", ma::simd_arch(),
              ma::linear_kernel_name(ma::Format::f32), ma::linear_kernel_name(ma::Format::q8), pool().workers());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (int r = 0; r < rounds; ++r)
    for (const Point& p : points)
      for (const std::string& f : formats)
        for (std::size_t workers : {1, 2})
          benchmark::RegisterBenchmark(bench_name(p, f, workers).c_str(),
                                       [p, f, workers](benchmark::State& s) { run_point(s, p, f, workers); })
              ->MinTime(0.05)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
  bench::RoundReporter reporter(true);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const int missed = print_summary(reporter.times());
  std::printf("%d point(s) missing a goal (medians)\n", missed);
  benchmark::Shutdown();
  return 0;
}
