// Google Benchmark: microattn::attention side by side with what a user would otherwise build attention from,
// in one binary, single thread, fp32, n queries = n keys, head size d:
//   eigen     Eigen 3.4: S = (Q·scale)·Kᵀ, row softmax with Eigen's vectorized array exp, O = S·V, rows / sum
//   openblas  cblas_sgemm (scale as alpha), microattn::softmax_rows (the vectorized softmax: OpenBLAS has
//             none), cblas_sgemm; any CBLAS when OpenBLAS itself is not found ("cblas")
//   onednn    oneDNN 2.x matmul primitive (scale as output scale), softmax primitive (in place), matmul
// Each peer is compiled in only when Meson found it (MICROATTN_PEER_*); the program says which are missing.
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
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <time.h>
#include <unistd.h>

#include <microattn/microattn.hpp>

#include "bench_common.hpp"
#include "peak.hpp"
#include "reference.hpp"

#if defined(MICROATTN_PEER_EIGEN)
#include <Eigen/Core>
#endif
#if defined(MICROATTN_PEER_CBLAS)
#include <cblas.h>
#endif
#if defined(MICROATTN_PEER_DNNL)
#include <oneapi/dnnl/dnnl.hpp>
#endif
#if defined(MICROATTN_PEER_OPENMP)
#include <omp.h>
#endif

namespace ma = microattn;

namespace {

double g_peak_gflops = 0.0;

// Query rows per block in the peers' causal variant (see blocks_for below). 0: the better of 32 and 64 as
// measured on this project's machine for all three peers (32 up to n = 256, 64 from n = 512, where 32 costs them
// 5–15 %); --peer_block_q=N fixes it.
std::size_t g_peer_block_q = 0;
std::size_t peer_block_q(std::size_t n) { return g_peer_block_q != 0 ? g_peer_block_q : n >= 512 ? 64 : 32; }

// ---- problems and the reference ----------------------------------------------------------------------------
// Same data as bench_attention (uniform [-1, 1], seeds 1, 2, 3), so the two programs' microattn rows agree.
struct Problem {
  std::size_t n = 0, d = 0;
  bool causal = false;
  float scale = 0.0f;
  std::vector<float> q, k, v;
  std::vector<double> want, weighted_abs, score_abs;  // ref::attention's outputs
};

using bench::random_vector;

// Built on first use and kept: every implementation of a shape and mode is checked against the same numbers.
const Problem& problem(std::size_t n, std::size_t d, bool causal) {
  static std::map<std::tuple<std::size_t, std::size_t, bool>, std::unique_ptr<Problem>> cache;
  std::unique_ptr<Problem>& slot = cache[{n, d, causal}];
  if (!slot) {
    auto p = std::make_unique<Problem>();
    p->n = n;
    p->d = d;
    p->causal = causal;
    p->scale = 1.0f / std::sqrt(static_cast<float>(d));
    p->q = random_vector(n * d, 1);
    p->k = random_vector(n * d, 2);
    p->v = random_vector(n * d, 3);
    ref::AttentionCase c{};
    c.q = p->q.data();
    c.ldq = d;
    c.k = p->k.data();
    c.ldk = d;
    c.v = p->v.data();
    c.ldv = d;
    c.n_q = c.n_kv = n;
    c.d_k = c.d_v = d;
    c.scale = 0.0;  // 1/sqrt(d) in double
    c.causal = causal;
    c.causal_offset = 0;
    c.mask = nullptr;
    c.ldm = 0;
    ref::attention(c, p->want, p->weighted_abs, p->score_abs);
    slot = std::move(p);
  }
  return *slot;
}

// The test suite's tolerance idea (tests/test_attention.cpp): out[i][c] may differ from the reference by
//   [2·((d + 6)·S_i + 3) + 2·n + 24] · 2⁻²⁴ · Σ_j p_ij·|v_jc|
// (S_i the magnitude of row i's scores: their rounding becomes relative error of the probabilities; the
// weighted sum and the row sum add n terms each), times a margin of 4 here because the peers round in their
// own ways (exp implementations of a few ULP, other summation orders, the scale applied in float). A wrong
// result (a missed mask, a wrong scale, a transposed operand) is off by orders of magnitude more.
constexpr double peer_tolerance_margin = 4.0;

// Largest |got − want| / tolerance over the output (NaN or inf: infinity). <= 1 passes.
double worst_error_ratio(const Problem& p, const float* out) {
  constexpr double u = 5.9604644775390625e-8;  // 2⁻²⁴
  double worst = 0.0;
  for (std::size_t i = 0; i < p.n; ++i) {
    const double rel =
        peer_tolerance_margin *
        (2.0 * ((static_cast<double>(p.d) + 6.0) * p.score_abs[i] + 3.0) + 2.0 * static_cast<double>(p.n) + 24.0) * u;
    for (std::size_t c = 0; c < p.d; ++c) {
      const double got = out[i * p.d + c], want = p.want[i * p.d + c];
      if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();
      const double bound = rel * p.weighted_abs[i * p.d + c] + 1e-30;
      worst = std::max(worst, std::fabs(got - want) / bound);
    }
  }
  return worst;
}

// ---- the peers' causal variant -------------------------------------------------------------------------------
// A competent user of a GEMM library does not compute the whole n×n score matrix and mask half of it: they
// walk the queries in blocks of B rows (peer_block_q); block [i0, i0 + rows) can see keys [0, i0 + rows) only, so
// they compute that rows × (i0 + rows) slab of scores, set the strict upper triangle of its last square
// (key j > query i) to −inf, take the row softmax and multiply by the first i0 + rows rows of V. The peers
// thereby skip the hidden half as microattn does (Σ over blocks ≈ n²/2 + n·B/2 scores), at the
// cost of more, smaller GEMM calls. Dense is one block of all n rows and n keys.
struct Block {
  std::size_t row0, rows, keys;
};

[[maybe_unused]] std::vector<Block> blocks_for(const Problem& p) {
  if (!p.causal) return {{0, p.n, p.n}};
  std::vector<Block> b;
  const std::size_t block = peer_block_q(p.n);
  for (std::size_t i0 = 0; i0 < p.n; i0 += block) {
    const std::size_t rows = std::min(block, p.n - i0);
    b.push_back({i0, rows, i0 + rows});
  }
  return b;
}

// Hides key j > query i in a rows × keys score slab (row stride ld) whose first row is query b.row0.
[[maybe_unused]] void mask_upper_triangle(float* s, std::size_t ld, const Block& b) {
  const float hidden = -std::numeric_limits<float>::infinity();
  for (std::size_t r = 0; r < b.rows; ++r)
    for (std::size_t j = b.row0 + r + 1; j < b.keys; ++j) s[r * ld + j] = hidden;
}

// ---- implementations: constructed outside the timed loop, run() is what is timed ---------------------------
class MicroattnImpl {
 public:
  static constexpr const char* name = "microattn";
  MicroattnImpl(const Problem& p, float* out) : p_(p), out_(out), ws_(ma::attention_workspace_floats(p.d, p.d)) {
    opt_.causal = p.causal;
  }
  bool run() {
    return ma::attention(ma::make_view(p_.q.data(), p_.n, p_.d), ma::make_view(p_.k.data(), p_.n, p_.d),
                         ma::make_view(p_.v.data(), p_.n, p_.d), ma::make_view(out_, p_.n, p_.d), ws_.data(),
                         ws_.size(), opt_) == ma::Status::ok;
  }

 private:
  const Problem& p_;
  float* out_;
  std::vector<float> ws_;
  ma::AttentionOptions opt_;
};

#if defined(MICROATTN_PEER_EIGEN)
class EigenImpl {
 public:
  static constexpr const char* name = "eigen";
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ConstMap = Eigen::Map<const RowMatrix>;
  using Map = Eigen::Map<RowMatrix>;

  EigenImpl(const Problem& p, float* out)
      : p_(p),
        blocks_(blocks_for(p)),
        q_(p.q.data(), p.n, p.d),
        k_(p.k.data(), p.n, p.d),
        v_(p.v.data(), p.n, p.d),
        o_(out, p.n, p.d),
        s_(blocks_.front().rows, p.n),
        row_sum_(blocks_.front().rows) {}

  bool run() {
    for (const Block& b : blocks_) {
      auto s = s_.topLeftCorner(b.rows, b.keys);
      // The scalar factor goes into the GEMM's alpha (Eigen's product extracts it), no temporary.
      s.noalias() = (q_.middleRows(b.row0, b.rows) * p_.scale) * k_.topRows(b.keys).transpose();
      if (p_.causal) mask_upper_triangle(s.data(), static_cast<std::size_t>(s_.cols()), b);
      for (Eigen::Index r = 0; r < s.rows(); ++r) {
        auto row = s.row(r).array();
        const float m = row.maxCoeff();
        row = (row - m).exp();  // Eigen's vectorized (SIMD) exp
        row_sum_(r) = row.sum();
      }
      auto o = o_.middleRows(b.row0, b.rows);
      o.noalias() = s * v_.topRows(b.keys);
      for (Eigen::Index r = 0; r < o.rows(); ++r) o.row(r) *= 1.0f / row_sum_(r);
    }
    return true;
  }

 private:
  const Problem& p_;
  std::vector<Block> blocks_;
  ConstMap q_, k_, v_;
  Map o_;
  RowMatrix s_;
  Eigen::VectorXf row_sum_;
};
#endif

#if defined(MICROATTN_PEER_CBLAS)
class CblasImpl {
 public:
#if defined(MICROATTN_PEER_OPENBLAS)
  static constexpr const char* name = "openblas";
#else
  static constexpr const char* name = "cblas";
#endif
  CblasImpl(const Problem& p, float* out) : p_(p), out_(out), blocks_(blocks_for(p)), s_(blocks_.front().rows * p.n) {}

  bool run() {
    const int d = static_cast<int>(p_.d);
    for (const Block& b : blocks_) {
      const int rows = static_cast<int>(b.rows), keys = static_cast<int>(b.keys);
      float* s = s_.data();  // rows × keys, contiguous
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, d, p_.scale, p_.q.data() + b.row0 * p_.d, d,
                  p_.k.data(), d, 0.0f, s, keys);
      if (p_.causal) mask_upper_triangle(s, b.keys, b);
      if (ma::softmax_rows(ma::make_view(s, b.rows, b.keys)) != ma::Status::ok) return false;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, d, keys, 1.0f, s, keys, p_.v.data(), d, 0.0f,
                  out_ + b.row0 * p_.d, d);
    }
    return true;
  }

 private:
  const Problem& p_;
  float* out_;
  std::vector<Block> blocks_;
  std::vector<float> s_;
};
#endif

#if defined(MICROATTN_PEER_DNNL)
class DnnlImpl {
 public:
  static constexpr const char* name = "onednn";
  // Every primitive (one set per query block in the causal variant, their shapes differ) and every argument
  // map is created here, outside the timed loop; run() only executes them.
  DnnlImpl(const Problem& p, float* out)
      : p_(p),
        blocks_(blocks_for(p)),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_),
        s_(blocks_.front().rows * p.n) {
    using dt = dnnl::memory::data_type;
    using dims = dnnl::memory::dims;
    const dnnl::memory::dim d = static_cast<dnnl::memory::dim>(p.d);
    for (const Block& b : blocks_) {
      const dnnl::memory::dim rows = static_cast<dnnl::memory::dim>(b.rows),
                              keys = static_cast<dnnl::memory::dim>(b.keys);
      const dnnl::memory::desc q_md(dims{rows, d}, dt::f32, dims{d, 1});
      const dnnl::memory::desc kt_md(dims{d, keys}, dt::f32, dims{1, d});  // Kᵀ: element (p, j) at j·d + p
      const dnnl::memory::desc s_md(dims{rows, keys}, dt::f32, dims{keys, 1});
      const dnnl::memory::desc v_md(dims{keys, d}, dt::f32, dims{d, 1});
      const dnnl::memory::desc o_md(dims{rows, d}, dt::f32, dims{d, 1});
      dnnl::primitive_attr scaled;
      scaled.set_output_scales(0, {p.scale});
      const dnnl::matmul::primitive_desc qk_pd(dnnl::matmul::desc(q_md, kt_md, s_md), scaled, engine_);
      const dnnl::softmax_forward::primitive_desc sm_pd(
          dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, s_md, 1), engine_);
      const dnnl::matmul::primitive_desc pv_pd(dnnl::matmul::desc(s_md, v_md, o_md), engine_);
      // oneDNN's memory objects take non-const handles; the inputs are only read.
      const dnnl::memory q(q_md, engine_, const_cast<float*>(p.q.data()) + b.row0 * p.d);
      const dnnl::memory k(kt_md, engine_, const_cast<float*>(p.k.data()));
      const dnnl::memory v(v_md, engine_, const_cast<float*>(p.v.data()));
      const dnnl::memory s(s_md, engine_, s_.data());
      const dnnl::memory o(o_md, engine_, out + b.row0 * p.d);
      steps_.push_back({b,
                        dnnl::matmul(qk_pd),
                        dnnl::softmax_forward(sm_pd),
                        dnnl::matmul(pv_pd),
                        {{DNNL_ARG_SRC, q}, {DNNL_ARG_WEIGHTS, k}, {DNNL_ARG_DST, s}},
                        {{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, s}},
                        {{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, v}, {DNNL_ARG_DST, o}}});
    }
  }

  bool run() {
    for (const Step& st : steps_) {
      st.qk.execute(stream_, st.qk_args);
      if (p_.causal) mask_upper_triangle(s_.data(), st.block.keys, st.block);
      st.softmax.execute(stream_, st.softmax_args);
      st.pv.execute(stream_, st.pv_args);
    }
    stream_.wait();
    return true;
  }

 private:
  struct Step {
    Block block;
    dnnl::matmul qk;
    dnnl::softmax_forward softmax;
    dnnl::matmul pv;
    std::unordered_map<int, dnnl::memory> qk_args, softmax_args, pv_args;
  };
  const Problem& p_;
  std::vector<Block> blocks_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<float> s_;
  std::vector<Step> steps_;
};
#endif

// ---- benchmarks ----------------------------------------------------------------------------------------------
template <class Impl>
void bm_implementation(benchmark::State& state, std::size_t n, std::size_t d, bool causal) {
  const Problem& p = problem(n, d, causal);
  std::vector<float> out(n * d, std::numeric_limits<float>::quiet_NaN());
  std::unique_ptr<Impl> impl;
  double err_tol = 0.0;
  try {
    impl = std::make_unique<Impl>(p, out.data());
    if (!impl->run()) {
      state.SkipWithError("the implementation returned an error");
      return;
    }
    err_tol = worst_error_ratio(p, out.data());
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("set-up failed: ") + e.what()).c_str());
    return;
  }
  if (!(err_tol <= 1.0)) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "output differs from the double-precision reference: max |error| = %.3g × tolerance",
                  err_tol);
    state.SkipWithError(msg);
    return;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(impl->run());
    benchmark::ClobberMemory();
  }
  const double flops = 4.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(d);
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pct_peak"] =
      benchmark::Counter(flops * 1e-9 * 100.0 / g_peak_gflops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["err_tol"] = err_tol;
}

struct Entry {
  std::string impl;
  std::size_t n, d;
  bool causal;
};
std::vector<Entry> g_entries;                  // registration order
std::map<std::string, Entry> g_entry_by_name;  // benchmark name -> what it measures
std::vector<std::string> g_implementations;    // compiled in, microattn first
std::vector<std::tuple<std::size_t, std::size_t>> g_shapes;

std::string benchmark_name(const std::string& impl, std::size_t n, std::size_t d, bool causal) {
  return "peers/" + impl + (causal ? "/causal" : "/dense") + "/n:" + std::to_string(n) + "/d:" + std::to_string(d);
}

template <class Impl>
void register_implementation(std::size_t n, std::size_t d, bool causal) {
  const std::string name = benchmark_name(Impl::name, n, d, causal);
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
    bm_implementation<Impl>(s, n, d, causal);
  })->Unit(benchmark::kMicrosecond);
  g_entries.push_back({Impl::name, n, d, causal});
  g_entry_by_name[name] = g_entries.back();
}

void register_all() {
  // The shapes, then n = 16 … 1024 at d = 64 for the plot (shared shapes once).
  g_shapes = {{16, 32}, {64, 64}, {128, 64}, {256, 64}, {512, 64}, {256, 128}, {16, 64}, {32, 64}, {1024, 64}};
  g_implementations.push_back(MicroattnImpl::name);
#if defined(MICROATTN_PEER_EIGEN)
  g_implementations.push_back(EigenImpl::name);
#endif
#if defined(MICROATTN_PEER_CBLAS)
  g_implementations.push_back(CblasImpl::name);
#endif
#if defined(MICROATTN_PEER_DNNL)
  g_implementations.push_back(DnnlImpl::name);
#endif
  for (const auto& [n, d] : g_shapes)
    for (const bool causal : {false, true}) {
      register_implementation<MicroattnImpl>(n, d, causal);
#if defined(MICROATTN_PEER_EIGEN)
      register_implementation<EigenImpl>(n, d, causal);
#endif
#if defined(MICROATTN_PEER_CBLAS)
      register_implementation<CblasImpl>(n, d, causal);
#endif
#if defined(MICROATTN_PEER_DNNL)
      register_implementation<DnnlImpl>(n, d, causal);
#endif
    }
}

// ---- summary: the console reporter, plus a table of the ratio to the best peer after the runs ---------------
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  explicit SummaryReporter(OutputOptions o) : ConsoleReporter(o) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const std::string& name = r.run_name.function_name;
      if (r.error_occurred) {
        errors_[name] = r.error_message;
        continue;
      }
      const auto it = r.counters.find("GFLOPS");
      if (it == r.counters.end()) continue;
      // Repetitions give a median here; with --benchmark_display_aggregates_only only the aggregates come.
      if (r.run_type == Run::RT_Iteration)
        gflops_[name].push_back(it->second.value);
      else if (r.aggregate_name == "median")
        aggregate_median_[name] = it->second.value;
    }
  }

  // Median GFLOP/s of a benchmark's repetitions; < 0 when it has none (error, filtered out).
  double median(const std::string& name) const {
    const auto it = gflops_.find(name);
    if (it == gflops_.end() || it->second.empty()) {
      const auto agg = aggregate_median_.find(name);
      return agg == aggregate_median_.end() ? -1.0 : agg->second;
    }
    std::vector<double> v = it->second;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
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
        const double mine = median(benchmark_name(MicroattnImpl::name, n, d, causal));
        std::string best = "-";
        double best_g = -1.0;
        for (const std::string& impl : g_implementations) {
          if (impl == MicroattnImpl::name) continue;
          const double g = median(benchmark_name(impl, n, d, causal));
          if (g > best_g) {
            best_g = g;
            best = impl;
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
  std::map<std::string, std::vector<double>> gflops_;
  std::map<std::string, double> aggregate_median_;
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

// ---- threads, instruction sets, versions ---------------------------------------------------------------------
void note(const std::string& key, const std::string& value) {
  std::printf("  %-16s %s\n", (key + ":").c_str(), value.c_str());
  benchmark::AddCustomContext(key, value);
}

#if defined(MICROATTN_PEER_DNNL)
const char* dnnl_isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}
#endif

void set_up_peers() {
  // Single thread everywhere. OpenMP (oneDNN's runtime in Debian, and Eigen's when compiled with -fopenmp).
#if defined(MICROATTN_PEER_OPENMP)
  omp_set_num_threads(1);
#endif
  std::printf("peers (single thread each):\n");
  note("simd_arch", ma::simd_arch());
#if defined(MICROATTN_PEER_EIGEN)
  Eigen::setNbThreads(1);
  // Eigen's own SimdInstructionSetsInUse() has no AVX2 line (an AVX2+FMA build reads "AVX SSE, ..."): say it here.
#if defined(EIGEN_VECTORIZE_AVX512)
  const char* eigen_isa = "AVX-512";
#elif defined(EIGEN_VECTORIZE_AVX2)
  const char* eigen_isa = "AVX2";
#elif defined(EIGEN_VECTORIZE_AVX)
  const char* eigen_isa = "AVX";
#elif defined(EIGEN_VECTORIZE)
  const char* eigen_isa = "SSE/NEON";
#else
  const char* eigen_isa = "not vectorized";
#endif
#if defined(EIGEN_VECTORIZE_FMA)
  const char* eigen_fma = "+FMA";
#else
  const char* eigen_fma = "";
#endif
  note("eigen", std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                    std::to_string(EIGEN_MINOR_VERSION) + ", " + eigen_isa + eigen_fma);
#else
  note("eigen", "compiled out (not found by Meson, or -Dpeers=disabled)");
#endif
#if defined(MICROATTN_PEER_OPENBLAS)
  openblas_set_num_threads(1);
  const std::string core = openblas_get_corename();
  note("openblas", std::string(openblas_get_config()) + ", core " + core + ", threads " +
                       std::to_string(openblas_get_num_threads()));
  std::string lower = core;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  [[maybe_unused]] const bool avx512_core = lower.find("skylakex") != std::string::npos ||
                                            lower.find("cooperlake") != std::string::npos ||
                                            lower.find("sapphire") != std::string::npos;
#if defined(__AVX512F__)
  if (!avx512_core)
    std::printf(
        "  note: OpenBLAS runs its %s kernels, not AVX-512 ones: set OPENBLAS_CORETYPE=SkylakeX on a CPU it "
        "does not recognise\n",
        core.c_str());
#elif defined(__AVX2__)
  if (avx512_core)
    std::printf(
        "  note: this build has no AVX-512 but OpenBLAS runs %s kernels: set OPENBLAS_CORETYPE=Haswell for "
        "an AVX2-only comparison\n",
        core.c_str());
#endif
#elif defined(MICROATTN_PEER_CBLAS)
  note("openblas", "not found; a generic CBLAS is benchmarked as \"cblas\" (threads as its library decides)");
#else
  note("openblas", "compiled out (neither OpenBLAS nor a CBLAS found by Meson, or -Dpeers=disabled)");
#endif
#if defined(MICROATTN_PEER_DNNL)
#if !defined(__AVX512F__) && defined(__AVX2__)
  // The build is AVX2-only (x86-64-v3): cap oneDNN there too, whatever ONEDNN_MAX_CPU_ISA says. Only possible
  // before oneDNN first dispatches on the ISA, hence here, before any primitive exists.
  if (dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2) != dnnl::status::success)
    std::printf("  note: could not cap oneDNN at AVX2\n");
#endif
  const dnnl_version_t* ver = dnnl_version();
  note("onednn", std::to_string(ver->major) + "." + std::to_string(ver->minor) + "." + std::to_string(ver->patch) +
                     ", isa " + dnnl_isa_name(dnnl::get_effective_cpu_isa())
#if defined(MICROATTN_PEER_OPENMP)
                     + ", OpenMP threads " + std::to_string(omp_get_max_threads())
#endif
  );
#else
  note("onednn", "compiled out (not found by Meson, or -Dpeers=disabled)");
#endif
  note("ggml", "not packaged in Debian 12: not compared");
  note("peer_block_q", g_peer_block_q != 0 ? std::to_string(g_peer_block_q) + " query rows per block (peers, causal)"
                                           : "32 (n < 512) or 64 query rows per block (peers, causal)");
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
  g_peak_gflops = measure_peak_cpu_time();
  std::printf("microattn kernels: %s; single-core FMA peak (%s) measured at start: %.1f GFLOP/s\n", ma::simd_arch(),
              bench::peak_arch(), g_peak_gflops);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("fma_peak_gflops", std::to_string(g_peak_gflops));
  set_up_peers();
  std::fflush(stdout);
  register_all();
  SummaryReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                 : benchmark::ConsoleReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  // Measured again: a peak that moved between start and end says the machine was busy (this core's clock follows
  // the other core's load). The pct_peak counters used the start; the summary uses the larger of the two.
  const double end_peak = measure_peak_cpu_time();
  reporter.print_summary(std::max(g_peak_gflops, end_peak));
  std::printf("FMA peak measured again at the end: %.1f GFLOP/s (start: %.1f)\n", end_peak, g_peak_gflops);
  benchmark::Shutdown();
  return 0;
}
