// Google Benchmark: the decoding shapes side by side in one binary, single thread, fp32 —
//   attention  n_q ∈ {1, 4, 8} queries against n_kv ∈ {256, 1024, 4096} keys, d = 64, dense and with the
//              bottom-right causal offset n_kv − n_q of decoding (every query sees the cache, the new ones
//              see each other causally);
//   matmul     m = 1 … 8 rows against a k × n = 256² or 1024² weight, b transposed (nn.Linear: y = x·Wᵀ) and not;
//   few_path   microattn's few-query path against its query-tile path for n_q = 1 … 33 (internal kernel
//              tables: the build's, and the scalar one at n_kv = 256), the measurement behind few_query_max.
// Peers: Eigen 3.4 ((Q·scale)·Kᵀ, row softmax with Eigen's array exp, ·V, rows ÷ sum; y = x·Wᵀ as a product of
// row-major maps: Eigen picks its GEMV for one row), OpenBLAS (cblas_sgemv for one query or one row, cblas_sgemm
// otherwise; attention's softmax is microattn::softmax_rows, OpenBLAS has none): bench/peers.cpp's, shared with
// bench_peers, as are the problems. Each output is checked against the test suite's double reference before
// timing (a mismatch makes that benchmark an error). After the runs a summary gives, per point, microattn's time,
// the best peer's and the ratio best peer ÷ microattn (> 1: microattn faster).
//
//   OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_CORETYPE=SkylakeX taskset -c 1 build/bench/bench_decode_peers
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <microattn/microattn.hpp>

#include "attention_run.hpp"
#include "bench_common.hpp"
#include "kernels/attention.hpp"
#include "peak.hpp"
#include "peers.hpp"

namespace ma = microattn;
namespace peers = bench::peers;

namespace {

using bench::random_vector;

// ---- benchmarks ------------------------------------------------------------------------------------------------
std::vector<std::string> g_groups;  // what is compared ("attention/dense/1x256", "matmul/xWt/m:1/kn:256"), in order

void add_group(const std::string& group) {
  if (std::find(g_groups.begin(), g_groups.end(), group) == g_groups.end()) g_groups.push_back(group);
}

void register_attention(const peers::AttentionImpl& impl, std::size_t n_q, std::size_t n_kv, bool causal) {
  const std::string group = std::string("attention/") + (causal ? "causal" : "dense") + "/" + std::to_string(n_q) +
                            "x" + std::to_string(n_kv);
  benchmark::RegisterBenchmark((group + "/" + impl.name).c_str(), [=](benchmark::State& s) {
    // One block of all queries: every score computed, the few hidden ones set to −inf; Eigen divides the
    // probabilities by their sums.
    peers::PeerPlan plan;
    plan.normalize_probabilities = true;
    peers::time_checked(s, impl, peers::attention_problem(n_q, n_kv, 64, causal), plan);
  })->Unit(benchmark::kMicrosecond);
  add_group(group);
}

void register_matmul(const peers::MatmulImpl& impl, std::size_t m, std::size_t kn, bool tb) {
  const std::string group =
      std::string("matmul/") + (tb ? "xWt" : "xW") + "/m:" + std::to_string(m) + "/kn:" + std::to_string(kn);
  benchmark::RegisterBenchmark((group + "/" + impl.name).c_str(), [=](benchmark::State& s) {
    peers::time_checked(s, impl, peers::matmul_problem(m, kn, tb));
  })->Unit(benchmark::kMicrosecond);
  add_group(group);
}

// The few-query path against the query-tile path, through the build's kernel table (internal API): the tile
// path is the same table with few_query_max = 0.
void BM_few_path(benchmark::State& state) {
  const auto n_q = static_cast<std::size_t>(state.range(0)), n_kv = static_cast<std::size_t>(state.range(1));
  const bool few = state.range(2) != 0;
  constexpr std::size_t d = 64;
  const auto q = random_vector(n_q * d, 1), k = random_vector(n_kv * d, 2), v = random_vector(n_kv * d, 3);
  std::vector<float> out(n_q * d), ws(ma::attention_workspace_floats(d, d));
  ma::detail::Kernels kern = state.range(3) != 0 ? ma::detail::scalar_kernels() : ma::detail::selected_kernels();
  kern.few_query_max = few ? n_q : 0;
  ma::AttentionOptions o;
  for (auto _ : state) {
    ma::detail::attention_run(kern, ma::make_view(q.data(), n_q, d), ma::make_view(k.data(), n_kv, d),
                              ma::make_view(v.data(), n_kv, d), ma::make_view(out.data(), n_q, d), ws.data(), o);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(kern.arch) + (few ? ", few-query path" : ", query-tile path"));
}
// args: n_q, n_kv, few-query path (1) or tile path (0), scalar table (1) or the build's (0)
BENCHMARK(BM_few_path)
    ->ArgsProduct({{1, 2, 3, 4, 6, 8, 10, 12, 16, 24, 32, 33}, {1024}, {0, 1}, {0}})
    ->ArgsProduct({{1, 2, 3, 4, 6}, {256}, {0, 1}, {1}})
    ->Unit(benchmark::kMicrosecond);

void register_all() {
  // oneDNN is compared at bench_peers' square shapes only.
  const std::vector<peers::AttentionImpl> attention = peers::attention_impls(false);
  for (const bool causal : {false, true})
    for (const std::size_t n_q : {1, 4, 8})
      for (const std::size_t n_kv : {256, 1024, 4096})
        for (const peers::AttentionImpl& impl : attention) register_attention(impl, n_q, n_kv, causal);
  const std::vector<peers::MatmulImpl> matmul = peers::matmul_impls();
  for (const bool tb : {true, false})
    for (const std::size_t kn : {256, 1024})
      for (std::size_t m = 1; m <= 8; ++m)
        for (const peers::MatmulImpl& impl : matmul) register_matmul(impl, m, kn, tb);
}

// Median CPU time (µs) per benchmark over repetitions, and a table after the runs.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs)
      if (!r.error_occurred) times_.record(r, r.GetAdjustedCPUTime());
  }
  void print_summary() const {
    std::printf(
        "\nSummary: median CPU µs (the thread's own time: robust on a shared core); ratio = best peer ÷ microattn (> "
        "1: microattn faster)\n");
    std::printf("%-34s %10s %10s %10s %10s\n", "point", "microattn", "eigen", peers::blas_name, "ratio");
    for (const std::string& g : g_groups) {
      // < 0: no time (not compiled in, an error, filtered out).
      const double mine = times_.median(g + "/microattn"), e = times_.median(g + "/eigen"),
                   o = times_.median(g + "/" + peers::blas_name);
      double best = -1.0;
      for (double t : {e, o})
        if (t > 0 && (best < 0 || t < best)) best = t;
      if (mine < 0 && best < 0) continue;
      auto cell = [](double t) {
        char b[32];
        std::snprintf(b, sizeof b, t > 0 ? "%.2f" : "-", t);
        return std::string(b);
      };
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, mine > 0 && best > 0 ? "%.2f" : "-", best / mine);
      std::printf("%-34s %10s %10s %10s %10s\n", g.c_str(), cell(mine).c_str(), cell(e).c_str(), cell(o).c_str(),
                  ratio);
    }
  }

 private:
  peers::Medians times_;
};

}  // namespace

int main(int argc, char** argv) {
  bench::peak_gflops() = bench::measure_fma_peak_gflops();
  std::printf("microattn kernels: %s (%s); single-core FMA peak (%s): %.1f GFLOP/s\n", ma::simd_arch(),
              ma::matmul_kernel_name(), bench::peak_arch(), bench::peak_gflops());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(bench::peak_gflops()));
  peers::set_up(false);
  std::fflush(stdout);
  register_all();
  SummaryReporter reporter(benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_summary();
  benchmark::Shutdown();
  return 0;
}
