// Google Benchmark: matmul (square and attention-shaped), softmax_rows and the FMA peak, each reporting
// GFLOP/s or elements/s and the fraction of the single-core FMA peak measured at start-up in the same run.
// Run pinned to one core: taskset -c 0 build/bench/bench_kernels (scripts/bench.sh does this).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <microattn/microattn.hpp>

#include "bench_common.hpp"
#include "peak.hpp"

namespace ma = microattn;

namespace {

using bench::random_vector;
using bench::set_flop_counters;

void BM_fma_peak(benchmark::State& state) {
  float sink = 0.0f;
  double flops = 0.0;
  for (auto _ : state) flops = bench::fma_burst(100000, &sink);
  benchmark::DoNotOptimize(sink);
  set_flop_counters(state, flops);
  state.SetLabel(bench::peak_arch());
}
BENCHMARK(BM_fma_peak);

// c (m×n) = a (m×k) · b (k×n), or · bᵀ with b n×k.
void run_matmul(benchmark::State& state, std::size_t m, std::size_t n, std::size_t k, bool tb) {
  const auto a = random_vector(m * k, 1), b = random_vector(k * n, 2);
  std::vector<float> c(m * n);
  const ma::MatrixView<const float> av{a.data(), m, k, k};
  const ma::MatrixView<const float> bv =
      tb ? ma::MatrixView<const float>{b.data(), n, k, k} : ma::MatrixView<const float>{b.data(), k, n, n};
  const ma::MatrixView<float> cv{c.data(), m, n, n};
  for (auto _ : state) {
    const ma::Status s = ma::matmul(av, bv, cv, tb);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flop_counters(state, 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
  state.SetLabel(ma::matmul_kernel_name());
}

void BM_matmul_square(benchmark::State& state) {
  const auto s = static_cast<std::size_t>(state.range(0));
  run_matmul(state, s, s, s, false);
}
BENCHMARK(BM_matmul_square)->RangeMultiplier(2)->Range(16, 1024);

void BM_matmul_square_transposed(benchmark::State& state) {
  const auto s = static_cast<std::size_t>(state.range(0));
  run_matmul(state, s, s, s, true);
}
BENCHMARK(BM_matmul_square_transposed)->RangeMultiplier(2)->Range(16, 1024);

// The two products of unfused attention with head size d: scores = Q·Kᵀ (n×d · (n×d)ᵀ) and out = P·V
// (n×n · n×d).
void BM_matmul_scores_qkT(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  run_matmul(state, n, n, d, true);
}
BENCHMARK(BM_matmul_scores_qkT)->ArgsProduct({{16, 64, 128, 256, 512, 1024}, {64}});

void BM_matmul_weights_pv(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  run_matmul(state, n, d, n, false);
}
BENCHMARK(BM_matmul_weights_pv)->ArgsProduct({{16, 64, 128, 256, 512, 1024}, {64}});

void set_element_counters(benchmark::State& state, double elements) {
  state.counters["elems_per_s"] = benchmark::Counter(elements, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_softmax_rows(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  // Softmax is applied again to its own output each iteration: the same work on values in [0, 1]
  // (restoring the input would time a copy, or Pause/ResumeTiming's own overhead at small n).
  std::vector<float> x = random_vector(n * n, 3, -8.0f, 8.0f);
  for (auto _ : state) {
    benchmark::DoNotOptimize(ma::softmax_rows(ma::MatrixView<float>{x.data(), n, n, n}));
    benchmark::ClobberMemory();
  }
  set_element_counters(state, static_cast<double>(n * n));
  state.SetLabel(ma::simd_arch());
}
BENCHMARK(BM_softmax_rows)->RangeMultiplier(4)->Range(16, 1024);

// The baseline the softmax target is measured against: the textbook loop with std::exp.
void BM_softmax_rows_std_exp_loop(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> x = random_vector(n * n, 3, -8.0f, 8.0f);
  for (auto _ : state) {
    for (std::size_t r = 0; r < n; ++r) {
      float* row = x.data() + r * n;
      float m = row[0];
      for (std::size_t i = 1; i < n; ++i) m = std::max(m, row[i]);
      float sum = 0.0f;
      for (std::size_t i = 0; i < n; ++i) sum += row[i] = std::exp(row[i] - m);
      for (std::size_t i = 0; i < n; ++i) row[i] /= sum;
    }
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  set_element_counters(state, static_cast<double>(n * n));
}
BENCHMARK(BM_softmax_rows_std_exp_loop)->RangeMultiplier(4)->Range(16, 1024);

void BM_exp_elements(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto x = random_vector(n, 4, -80.0f, 80.0f);
  std::vector<float> y(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(ma::exp_elements(x.data(), y.data(), n));
    benchmark::ClobberMemory();
  }
  set_element_counters(state, static_cast<double>(n));
}
BENCHMARK(BM_exp_elements)->Arg(4096);

}  // namespace

int main(int argc, char** argv) {
  bench::peak_gflops() = bench::measure_fma_peak_gflops();
  std::printf("microattn kernels: %s, matmul %s; single-core FMA peak (%s) measured at start: %.1f GFLOP/s\n",
              ma::simd_arch(), ma::matmul_kernel_name(), bench::peak_arch(), bench::peak_gflops());
  return bench::run_benchmarks(argc, argv, ma::simd_arch());
}
