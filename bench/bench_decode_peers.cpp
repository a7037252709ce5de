// Google Benchmark: the decoding shapes side by side in one binary, single thread, fp32 —
//   attention  n_q ∈ {1, 4, 8} queries against n_kv ∈ {256, 1024, 4096} keys, d = 64, dense and with the
//              bottom-right causal offset n_kv − n_q of decoding (every query sees the cache, the new ones
//              see each other causally);
//   matmul     m = 1 … 8 rows against a k × n = 256² or 1024² weight, b transposed (nn.Linear: y = x·Wᵀ) and not;
//   few_path   microattn's few-query path against its query-tile path for n_q = 1 … 33 (internal kernel
//              tables: the build's, and the scalar one at n_kv = 256), the measurement behind few_query_max.
// Peers: Eigen 3.4 ((Q·scale)·Kᵀ, row softmax with Eigen's array exp, ·V, rows ÷ sum; y = x·Wᵀ as a product of
// row-major maps: Eigen picks its GEMV for one row), OpenBLAS (cblas_sgemv for one query or one row, cblas_sgemm
// otherwise; attention's softmax is microattn::softmax_rows, OpenBLAS has none). Each output is checked against
// the test suite's double reference before timing (a mismatch makes that benchmark an error). After the runs a
// summary gives, per point, microattn's time, the best peer's and the ratio best peer ÷ microattn (> 1: faster).
//
//   OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_CORETYPE=SkylakeX taskset -c 1 build/bench/bench_decode_peers
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <microattn/microattn.hpp>

#include "attention_run.hpp"
#include "bench_common.hpp"
#include "kernels/kernels.hpp"
#include "peak.hpp"
#include "reference.hpp"

#if defined(MICROATTN_PEER_EIGEN)
#include <Eigen/Core>
#endif
#if defined(MICROATTN_PEER_CBLAS)
#include <cblas.h>
#endif

namespace ma = microattn;

namespace {

using bench::random_vector;
constexpr double unit_roundoff = 5.9604644775390625e-8;
constexpr double peer_margin = 4.0;  // peers round in their own ways (see bench_peers.cpp)

// ---- attention problems --------------------------------------------------------------------------------------
struct AttnProblem {
  std::size_t n_q, n_kv, d;
  bool causal;
  float scale;
  std::vector<float> q, k, v;
  std::vector<double> want, wabs, sabs;
  std::ptrdiff_t offset() const { return static_cast<std::ptrdiff_t>(n_kv) - static_cast<std::ptrdiff_t>(n_q); }
};

const AttnProblem& attn_problem(std::size_t n_q, std::size_t n_kv, bool causal) {
  static std::map<std::tuple<std::size_t, std::size_t, bool>, std::unique_ptr<AttnProblem>> cache;
  auto& slot = cache[{n_q, n_kv, causal}];
  if (!slot) {
    constexpr std::size_t d = 64;
    slot.reset(new AttnProblem{n_q,
                               n_kv,
                               d,
                               causal,
                               1.0f / std::sqrt(static_cast<float>(d)),
                               random_vector(n_q * d, 1),
                               random_vector(n_kv * d, 2),
                               random_vector(n_kv * d, 3),
                               {},
                               {},
                               {}});
    AttnProblem& p = *slot;
    ref::attention({p.q.data(), d, p.k.data(), d, p.v.data(), d, n_q, n_kv, d, d, 0.0, causal, p.offset(), nullptr, 0},
                   p.want, p.wabs, p.sabs);
  }
  return *slot;
}

// Largest |error| / tolerance (the test suite's attention tolerance, ×4 for the peers); > 1 fails.
double attn_error_ratio(const AttnProblem& p, const float* out) {
  double worst = 0.0;
  for (std::size_t i = 0; i < p.n_q; ++i) {
    const double rel =
        peer_margin *
        (2.0 * ((static_cast<double>(p.d) + 6.0) * p.sabs[i] + 3.0) + 2.0 * static_cast<double>(p.n_kv) + 24.0) *
        unit_roundoff;
    for (std::size_t c = 0; c < p.d; ++c) {
      const double got = out[i * p.d + c];
      if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();
      worst = std::max(worst, std::fabs(got - p.want[i * p.d + c]) / (rel * p.wabs[i * p.d + c] + 1e-30));
    }
  }
  return worst;
}

#if defined(MICROATTN_PEER_EIGEN) || defined(MICROATTN_PEER_CBLAS)
// Bottom-right causal for the peers: all n_kv scores computed, the few hidden ones (key j > i + offset, in the last
// n_q columns) set to −inf — what a competent user of a BLAS does for a decoding step.
void hide_future_keys(float* s, std::size_t ld, const AttnProblem& p) {
  for (std::size_t i = 0; i < p.n_q; ++i)
    for (std::size_t j = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(i) + p.offset() + 1); j < p.n_kv; ++j)
      s[i * ld + j] = -std::numeric_limits<float>::infinity();
}
#endif

struct MicroattnAttn {
  static constexpr const char* name = "microattn";
  const AttnProblem& p;
  float* out;
  std::vector<float> ws;
  ma::AttentionOptions opt;
  MicroattnAttn(const AttnProblem& pr, float* o) : p(pr), out(o), ws(ma::attention_workspace_floats(pr.d, pr.d)) {
    opt.causal = pr.causal;
    opt.causal_offset = pr.offset();
  }
  bool run() {
    return ma::attention(ma::make_view(p.q.data(), p.n_q, p.d), ma::make_view(p.k.data(), p.n_kv, p.d),
                         ma::make_view(p.v.data(), p.n_kv, p.d), ma::make_view(out, p.n_q, p.d), ws.data(), ws.size(),
                         opt) == ma::Status::ok;
  }
};

#if defined(MICROATTN_PEER_EIGEN)
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
struct EigenAttn {
  static constexpr const char* name = "eigen";
  const AttnProblem& p;
  Eigen::Map<const RowMatrix> q, k, v;
  Eigen::Map<RowMatrix> o;
  RowMatrix s;
  EigenAttn(const AttnProblem& pr, float* out)
      : p(pr),
        q(pr.q.data(), pr.n_q, pr.d),
        k(pr.k.data(), pr.n_kv, pr.d),
        v(pr.v.data(), pr.n_kv, pr.d),
        o(out, pr.n_q, pr.d),
        s(pr.n_q, pr.n_kv) {}
  bool run() {
    s.noalias() = (q * p.scale) * k.transpose();
    if (p.causal) hide_future_keys(s.data(), p.n_kv, p);
    for (Eigen::Index r = 0; r < s.rows(); ++r) {
      auto row = s.row(r).array();
      row = (row - row.maxCoeff()).exp();
      row /= row.sum();
    }
    o.noalias() = s * v;
    return true;
  }
};
#endif

#if defined(MICROATTN_PEER_CBLAS)
struct BlasAttn {
  static constexpr const char* name = "openblas";
  const AttnProblem& p;
  float* out;
  std::vector<float> s;
  BlasAttn(const AttnProblem& pr, float* o) : p(pr), out(o), s(pr.n_q * pr.n_kv) {}
  bool run() {
    const int d = static_cast<int>(p.d), n_kv = static_cast<int>(p.n_kv), n_q = static_cast<int>(p.n_q);
    if (n_q == 1)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, n_kv, d, p.scale, p.k.data(), d, p.q.data(), 1, 0.0f, s.data(), 1);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_q, n_kv, d, p.scale, p.q.data(), d, p.k.data(), d, 0.0f,
                  s.data(), n_kv);
    if (p.causal) hide_future_keys(s.data(), p.n_kv, p);
    if (ma::softmax_rows(ma::make_view(s.data(), p.n_q, p.n_kv)) != ma::Status::ok) return false;
    if (n_q == 1)
      cblas_sgemv(CblasRowMajor, CblasTrans, n_kv, d, 1.0f, p.v.data(), d, s.data(), 1, 0.0f, out, 1);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_q, d, n_kv, 1.0f, s.data(), n_kv, p.v.data(), d, 0.0f,
                  out, d);
    return true;
  }
};
#endif

// ---- matmul problems -----------------------------------------------------------------------------------------
struct MatmulProblem {
  std::size_t m, kn;
  bool transpose_b;
  std::vector<float> a, b;
  std::vector<double> want, scale;
};

const MatmulProblem& matmul_problem(std::size_t m, std::size_t kn, bool tb) {
  static std::map<std::tuple<std::size_t, std::size_t, bool>, std::unique_ptr<MatmulProblem>> cache;
  auto& slot = cache[{m, kn, tb}];
  if (!slot) {
    slot.reset(new MatmulProblem{m, kn, tb, random_vector(m * kn, 4), random_vector(kn * kn, 5), {}, {}});
    ref::matmul(slot->a.data(), kn, slot->b.data(), kn, tb, m, kn, kn, slot->want, slot->scale);
  }
  return *slot;
}

double matmul_error_ratio(const MatmulProblem& p, const float* c) {
  const double rel = peer_margin * 2.0 * (static_cast<double>(p.kn) + 2.0) * unit_roundoff;
  double worst = 0.0;
  for (std::size_t i = 0; i < p.m * p.kn; ++i) {
    if (!std::isfinite(c[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::fabs(c[i] - p.want[i]) / (rel * p.scale[i] + 1e-30));
  }
  return worst;
}

struct MicroattnMatmul {
  static constexpr const char* name = "microattn";
  const MatmulProblem& p;
  float* c;
  MicroattnMatmul(const MatmulProblem& pr, float* out) : p(pr), c(out) {}
  bool run() {
    return ma::matmul(ma::make_view(p.a.data(), p.m, p.kn), ma::make_view(p.b.data(), p.kn, p.kn),
                      ma::make_view(c, p.m, p.kn), p.transpose_b) == ma::Status::ok;
  }
};

#if defined(MICROATTN_PEER_EIGEN)
struct EigenMatmul {
  static constexpr const char* name = "eigen";
  const MatmulProblem& p;
  Eigen::Map<const RowMatrix> a, b;
  Eigen::Map<RowMatrix> c;
  EigenMatmul(const MatmulProblem& pr, float* out)
      : p(pr), a(pr.a.data(), pr.m, pr.kn), b(pr.b.data(), pr.kn, pr.kn), c(out, pr.m, pr.kn) {}
  bool run() {
    if (p.transpose_b)
      c.noalias() = a * b.transpose();
    else
      c.noalias() = a * b;
    return true;
  }
};
#endif

#if defined(MICROATTN_PEER_CBLAS)
struct BlasMatmul {
  static constexpr const char* name = "openblas";
  const MatmulProblem& p;
  float* c;
  BlasMatmul(const MatmulProblem& pr, float* out) : p(pr), c(out) {}
  bool run() {
    const int m = static_cast<int>(p.m), n = static_cast<int>(p.kn);
    if (m == 1)  // y = W·x (b transposed: W is n × k) or y = Wᵀ·x
      cblas_sgemv(CblasRowMajor, p.transpose_b ? CblasNoTrans : CblasTrans, n, n, 1.0f, p.b.data(), n, p.a.data(), 1,
                  0.0f, c, 1);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, p.transpose_b ? CblasTrans : CblasNoTrans, m, n, n, 1.0f, p.a.data(), n,
                  p.b.data(), n, 0.0f, c, n);
    return true;
  }
};
#endif

// ---- benchmarks ------------------------------------------------------------------------------------------------
struct Point {
  std::string group, impl;  // group: what is compared ("attn/dense/1x256", "matmul/T/m:1/256")
};
std::map<std::string, Point> g_points;  // benchmark name -> point
std::vector<std::string> g_groups;      // in registration order

template <class Impl, class Problem>
void bm_run(benchmark::State& state, const Problem& p, std::size_t out_floats, double flops,
            double (*error_ratio)(const Problem&, const float*)) {
  std::vector<float> out(out_floats, std::numeric_limits<float>::quiet_NaN());
  Impl impl(p, out.data());
  if (!impl.run()) return state.SkipWithError("the implementation returned an error");
  const double err = error_ratio(p, out.data());
  if (!(err <= 1.0)) {
    char msg[128];
    std::snprintf(msg, sizeof msg, "differs from the double reference: %.3g × tolerance", err);
    return state.SkipWithError(msg);
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(impl.run());
    benchmark::ClobberMemory();
  }
  bench::set_flop_counters(state, flops);
  state.counters["err_tol"] = err;
}

template <class Impl>
void register_attention(std::size_t n_q, std::size_t n_kv, bool causal) {
  const std::string group = std::string("attention/") + (causal ? "causal" : "dense") + "/" + std::to_string(n_q) +
                            "x" + std::to_string(n_kv);
  const std::string name = group + "/" + Impl::name;
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
    const AttnProblem& p = attn_problem(n_q, n_kv, causal);
    bm_run<Impl, AttnProblem>(s, p, n_q * p.d, 4.0 * static_cast<double>(n_q * n_kv * p.d), attn_error_ratio);
  })->Unit(benchmark::kMicrosecond);
  if (g_points.empty() || std::find(g_groups.begin(), g_groups.end(), group) == g_groups.end())
    g_groups.push_back(group);
  g_points[name] = {group, Impl::name};
}

template <class Impl>
void register_matmul(std::size_t m, std::size_t kn, bool tb) {
  const std::string group =
      std::string("matmul/") + (tb ? "xWt" : "xW") + "/m:" + std::to_string(m) + "/kn:" + std::to_string(kn);
  const std::string name = group + "/" + Impl::name;
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
    const MatmulProblem& p = matmul_problem(m, kn, tb);
    bm_run<Impl, MatmulProblem>(s, p, m * kn, 2.0 * static_cast<double>(m * kn * kn), matmul_error_ratio);
  })->Unit(benchmark::kMicrosecond);
  if (std::find(g_groups.begin(), g_groups.end(), group) == g_groups.end()) g_groups.push_back(group);
  g_points[name] = {group, Impl::name};
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
  state.SetLabel(std::string(kern.name) + (few ? ", few-query path" : ", query-tile path"));
}
// args: n_q, n_kv, few-query path (1) or tile path (0), scalar table (1) or the build's (0)
BENCHMARK(BM_few_path)
    ->ArgsProduct({{1, 2, 3, 4, 6, 8, 10, 12, 16, 24, 32, 33}, {1024}, {0, 1}, {0}})
    ->ArgsProduct({{1, 2, 3, 4, 6}, {256}, {0, 1}, {1}})
    ->Unit(benchmark::kMicrosecond);

void register_all() {
  for (const bool causal : {false, true})
    for (const std::size_t n_q : {1, 4, 8})
      for (const std::size_t n_kv : {256, 1024, 4096}) {
        register_attention<MicroattnAttn>(n_q, n_kv, causal);
#if defined(MICROATTN_PEER_EIGEN)
        register_attention<EigenAttn>(n_q, n_kv, causal);
#endif
#if defined(MICROATTN_PEER_CBLAS)
        register_attention<BlasAttn>(n_q, n_kv, causal);
#endif
      }
  for (const bool tb : {true, false})
    for (const std::size_t kn : {256, 1024})
      for (std::size_t m = 1; m <= 8; ++m) {
        register_matmul<MicroattnMatmul>(m, kn, tb);
#if defined(MICROATTN_PEER_EIGEN)
        register_matmul<EigenMatmul>(m, kn, tb);
#endif
#if defined(MICROATTN_PEER_CBLAS)
        register_matmul<BlasMatmul>(m, kn, tb);
#endif
      }
}

// Median real time (µs) per benchmark over repetitions, and a table after the runs.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const std::string name = r.run_name.function_name;
      if (r.error_occurred || g_points.count(name) == 0) continue;
      if (r.run_type == Run::RT_Iteration)
        times_[name].push_back(r.GetAdjustedCPUTime());
      else if (r.aggregate_name == "median")
        median_[name] = r.GetAdjustedCPUTime();
    }
  }
  double median(const std::string& name) const {
    const auto it = times_.find(name);
    if (it == times_.end() || it->second.empty()) {
      const auto m = median_.find(name);
      return m == median_.end() ? -1.0 : m->second;
    }
    std::vector<double> t = it->second;
    std::sort(t.begin(), t.end());
    return t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  }
  void print_summary() const {
    std::printf(
        "\nSummary: median CPU µs (the thread's own time: robust on a shared core); ratio = best peer ÷ microattn (> "
        "1: microattn faster)\n");
    std::printf("%-34s %10s %10s %10s %10s\n", "point", "microattn", "eigen", "openblas", "ratio");
    for (const std::string& g : g_groups) {
      const double mine = median(g + "/microattn"), e = median(g + "/eigen"), o = median(g + "/openblas");
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
  std::map<std::string, std::vector<double>> times_;
  std::map<std::string, double> median_;
};

}  // namespace

int main(int argc, char** argv) {
#if defined(MICROATTN_PEER_OPENBLAS)
  openblas_set_num_threads(1);
  std::printf("openblas: %s, core %s\n", openblas_get_config(), openblas_get_corename());
#endif
#if defined(MICROATTN_PEER_EIGEN)
  Eigen::setNbThreads(1);
#endif
  bench::peak_gflops() = bench::measure_fma_peak_gflops();
  std::printf("microattn kernels: %s (%s); single-core FMA peak (%s): %.1f GFLOP/s\n", ma::simd_arch(),
              ma::matmul_kernel_name(), bench::peak_arch(), bench::peak_gflops());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(bench::peak_gflops()));
  register_all();
  SummaryReporter reporter(benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_summary();
  benchmark::Shutdown();
  return 0;
}
