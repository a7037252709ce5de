// Google Benchmark: microattn::attention side by side with what a user would otherwise build attention from,
// in one binary, single thread, fp32, n queries = n keys, head size d:
//   eigen     Eigen 3.4: S = (Q·scale)·Kᵀ, row softmax with Eigen's vectorized array exp, O = S·V, rows / sum
//   openblas  cblas_sgemm (scale as alpha), microattn::softmax_rows (the vectorized softmax: OpenBLAS has
//             none), cblas_sgemm; any CBLAS when OpenBLAS itself is not found ("cblas")
//   onednn    oneDNN 2.x matmul primitive (scale as output scale), softmax primitive (in place), matmul
// The problems, their reference check, microattn and the peers are bench/peers.cpp's, shared with
// bench_decode_peers; each peer is compiled in only when Meson found it (MICROATTN_PEER_*), and the program says
// which are missing. Causal peers walk the queries in blocks and skip the hidden half too (peers::PeerPlan).
//
// Before a benchmark is timed, its output is compared with the double-precision reference of the test suite
// (tests/reference.cpp); a mismatch turns that benchmark into an error (SkipWithError), nothing else stops.
// Counters: GFLOPS counting 4·n²·d for dense and causal alike (so causal speed-ups show directly), pct_peak
// against the single-core FMA peak measured at start-up (bench/peak.cpp, the build's instruction set), and
// err_tol, the largest |error| / tolerance of the checked output (<= 1 passes). After the runs, a summary
// gives per shape and mode the best peer, its GFLOP/s, microattn's, and microattn ÷ best peer (median over
// repetitions when --benchmark_repetitions is given).
//
// Run pinned to one core, single-threaded peers: scripts/bench_peers.sh does it (taskset, OPENBLAS_CORETYPE,
// the AVX2 variant); by hand:
//   OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_CORETYPE=SkylakeX taskset -c 0 build/bench/bench_peers
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <time.h>
#include <unistd.h>

#include <microattn/microattn.hpp>

#include "bench_common.hpp"
#include "peak.hpp"
#include "peers.hpp"

namespace ma = microattn;
namespace peers = bench::peers;

namespace {

// Query rows per block in the peers' causal variant (peers::PeerPlan). 0: the better of 32 and 64 as measured on
// this project's machine for all three peers (32 up to n = 256, 64 from n = 512, where 32 costs them 5–15 %);
// --peer_block_q=N fixes it.
std::size_t g_peer_block_q = 0;
std::size_t peer_block_q(std::size_t n) { return g_peer_block_q != 0 ? g_peer_block_q : n >= 512 ? 64 : 32; }

// ---- benchmarks ----------------------------------------------------------------------------------------------
std::vector<peers::AttentionImpl> g_implementations;  // compiled in, microattn first
std::vector<std::tuple<std::size_t, std::size_t>> g_shapes;

std::string benchmark_name(const std::string& impl, std::size_t n, std::size_t d, bool causal) {
  return "peers/" + impl + (causal ? "/causal" : "/dense") + "/n:" + std::to_string(n) + "/d:" + std::to_string(d);
}

void register_all() {
  // The shapes, then n = 16 … 1024 at d = 64 for the plot (shared shapes once).
  g_shapes = {{16, 32}, {64, 64}, {128, 64}, {256, 64}, {512, 64}, {256, 128}, {16, 64}, {32, 64}, {1024, 64}};
  g_implementations = peers::attention_impls(true);
  for (const auto& [n, d] : g_shapes)
    for (const bool causal : {false, true})
      for (const peers::AttentionImpl& impl : g_implementations) {
        const std::string name = benchmark_name(impl.name, n, d, causal);
        benchmark::RegisterBenchmark(name.c_str(), [impl, n = n, d = d, causal](benchmark::State& s) {
          peers::PeerPlan plan;
          plan.block_q = peer_block_q(n);
          peers::time_checked(s, impl, peers::attention_problem(n, n, d, causal), plan);
        })->Unit(benchmark::kMicrosecond);
      }
}

// ---- summary: the console reporter, plus a table of the ratio to the best peer after the runs ---------------
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  explicit SummaryReporter(OutputOptions o) : ConsoleReporter(o) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) {
        errors_[r.run_name.function_name] = r.error_message;
        continue;
      }
      const auto it = r.counters.find("GFLOPS");
      if (it != r.counters.end()) gflops_.record(r, it->second.value);
    }
  }

  // peak: for the % column (the larger of the peaks measured at start and end).
  void print_summary(double peak) const {
    std::printf(
        "\nSummary: GFLOP/s counting 4·n²·d (dense and causal alike), median over repetitions; single-core FMA "
        "peak %.1f GFLOP/s\n",
        peak);
    std::printf("%-10s %-7s %-10s %12s %12s %8s %10s\n", "n×d", "mode", "best peer", "peer GFLOP/s", "microattn",
                "% peak", "ratio");
    for (const auto& [n, d] : g_shapes)
      for (const bool causal : {false, true}) {
        // Median GFLOP/s; < 0 when there is none (error, filtered out).
        const double mine = gflops_.median(benchmark_name(g_implementations.front().name, n, d, causal));
        std::string best = "-";
        double best_g = -1.0;
        for (std::size_t i = 1; i < g_implementations.size(); ++i) {  // the peers, after microattn
          const double g = gflops_.median(benchmark_name(g_implementations[i].name, n, d, causal));
          if (g > best_g) {
            best_g = g;
            best = g_implementations[i].name;
          }
        }
        if (mine < 0.0 && best_g < 0.0) continue;  // filtered out (or only errors, listed below)
        char shape[32], peer_g[32], mine_g[32], pct[32], ratio[32];
        std::snprintf(shape, sizeof shape, "%zu×%zu", n, d);
        std::snprintf(peer_g, sizeof peer_g, best_g > 0 ? "%.1f" : "-", best_g);
        std::snprintf(mine_g, sizeof mine_g, mine > 0 ? "%.1f" : "-", mine);
        std::snprintf(pct, sizeof pct, mine > 0 ? "%.0f %%" : "-", 100.0 * mine / peak);
        std::snprintf(ratio, sizeof ratio, mine > 0 && best_g > 0 ? "%.2f" : "-", mine / best_g);
        // "n×d" holds a 2-byte character: widen the field by one so the columns line up.
        std::printf("%-10s %-7s %-10s %12s %12s %8s %10s\n", shape, causal ? "causal" : "dense",
                    best_g > 0 ? best.c_str() : "-", peer_g, mine_g, pct, ratio);
      }
    for (const auto& [name, msg] : errors_) std::printf("error: %s: %s\n", name.c_str(), msg.c_str());
  }

 private:
  peers::Medians gflops_;
  std::map<std::string, std::string> errors_;
};

// ---- the FMA peak ------------------------------------------------------------------------------------------------
// bench/peak.cpp's burst, timed on this thread's CPU clock like the benchmarks themselves (Google Benchmark's
// rates use CPU time): on a shared machine, wall-clock time would charge other processes' time slices to the
// peak. Best of 60 bursts of ~5 ms (the other core's load moves this core's clock: the best is the peak).
double measure_peak_cpu_time() {
  float sink = 0.0f;
  double best = 0.0;
  for (int rep = 0; rep < 60; ++rep) {
    timespec t0{}, t1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    const double flops = bench::fma_burst(2000000, &sink);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    const double s = static_cast<double>(t1.tv_sec - t0.tv_sec) + 1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec);
    if (s > 0.0) best = std::max(best, flops / s * 1e-9);
  }
  benchmark::DoNotOptimize(sink);
  return best;
}

// Takes this program's own flag (--peer_block_q=N) out of argv before Google Benchmark sees the rest.
bool parse_own_flags(int& argc, char** argv) {
  const char* flag = "--peer_block_q=";
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0) {
      const long b = std::strtol(argv[i] + std::strlen(flag), nullptr, 10);
      if (b < 1) {
        std::fprintf(stderr, "bench_peers: --peer_block_q needs a positive number of query rows\n");
        return false;
      }
      g_peer_block_q = static_cast<std::size_t>(b);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  argv[argc] = nullptr;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!parse_own_flags(argc, argv)) return 1;
  const double start_peak = measure_peak_cpu_time();
  bench::peak_gflops() = start_peak;  // for the pct_peak counters
  std::printf("microattn kernels: %s; single-core FMA peak (%s) measured at start: %.1f GFLOP/s\n", ma::simd_arch(),
              bench::peak_arch(), start_peak);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(start_peak));
  peers::set_up(true);
  peers::note("peer_block_q", g_peer_block_q != 0
                                  ? std::to_string(g_peer_block_q) + " query rows per block (peers, causal)"
                                  : "32 (n < 512) or 64 query rows per block (peers, causal)");
  std::fflush(stdout);
  register_all();
  SummaryReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                 : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  // Measured again: a peak that moved between start and end says the machine was busy (this core's clock follows
  // the other core's load). The pct_peak counters used the start; the summary uses the larger of the two.
  const double end_peak = measure_peak_cpu_time();
  reporter.print_summary(std::max(start_peak, end_peak));
  std::printf("FMA peak measured again at the end: %.1f GFLOP/s (start: %.1f)\n", end_peak, start_peak);
  benchmark::Shutdown();
  return 0;
}
