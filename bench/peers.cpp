// The peer module (peers.hpp): compiled with the library's instruction-set flags and the peers found by Meson
// (MICROATTN_PEER_*), so Eigen (header-only) vectorizes for the same target as microattn.
#include "peers.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <microattn/microattn.hpp>

#include "bench_common.hpp"
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

namespace bench::peers {

#if defined(MICROATTN_PEER_CBLAS) && !defined(MICROATTN_PEER_OPENBLAS)
const char* const blas_name = "cblas";
#else
const char* const blas_name = "openblas";
#endif

// ---- problems and the reference ----------------------------------------------------------------------------
const AttentionProblem& attention_problem(std::size_t n_q, std::size_t n_kv, std::size_t d, bool causal) {
  if (n_q > n_kv) throw std::invalid_argument("attention_problem: more queries than keys");
  static std::map<std::tuple<std::size_t, std::size_t, std::size_t, bool>, std::unique_ptr<AttentionProblem>> cache;
  std::unique_ptr<AttentionProblem>& slot = cache[{n_q, n_kv, d, causal}];
  if (!slot) {
    auto p = std::make_unique<AttentionProblem>();
    p->n_q = n_q;
    p->n_kv = n_kv;
    p->d = d;
    p->causal = causal;
    p->scale = 1.0f / std::sqrt(static_cast<float>(d));
    p->q = random_vector(n_q * d, 1);
    p->k = random_vector(n_kv * d, 2);
    p->v = random_vector(n_kv * d, 3);
    ref::AttentionCase c{};
    c.q = p->q.data();
    c.ldq = d;
    c.k = p->k.data();
    c.ldk = d;
    c.v = p->v.data();
    c.ldv = d;
    c.n_q = n_q;
    c.n_kv = n_kv;
    c.d_k = c.d_v = d;
    c.scale = 0.0;  // 1/sqrt(d) in double
    c.causal = causal;
    c.causal_offset = static_cast<long long>(p->causal_offset());
    c.mask = nullptr;
    c.ldm = 0;
    ref::attention(c, p->want, p->weighted_abs, p->score_abs);
    slot = std::move(p);
  }
  return *slot;
}

const MatmulProblem& matmul_problem(std::size_t m, std::size_t kn, bool transpose_b) {
  static std::map<std::tuple<std::size_t, std::size_t, bool>, std::unique_ptr<MatmulProblem>> cache;
  std::unique_ptr<MatmulProblem>& slot = cache[{m, kn, transpose_b}];
  if (!slot) {
    auto p = std::make_unique<MatmulProblem>();
    p->m = m;
    p->kn = kn;
    p->transpose_b = transpose_b;
    p->a = random_vector(m * kn, 4);
    p->b = random_vector(kn * kn, 5);
    ref::matmul(p->a.data(), kn, p->b.data(), kn, transpose_b, m, kn, kn, p->want, p->abs_sum);
    slot = std::move(p);
  }
  return *slot;
}

// The test suite's tolerances (tests/test_attention.cpp, tests/test_matmul.cpp) times a margin of 4, because the
// peers round in their own ways (exp implementations of a few ULP, other summation orders, the scale applied in
// float). A wrong result (a missed mask, a wrong scale, a transposed operand) is off by orders of magnitude more.
constexpr double peer_tolerance_margin = 4.0;
constexpr double unit_roundoff = 5.9604644775390625e-8;  // 2⁻²⁴

// out[i][c] may differ from the reference by
//   [2·((d + 6)·S_i + 3) + 2·n_kv + 24] · 2⁻²⁴ · Σ_j p_ij·|v_jc|
// (S_i the magnitude of row i's scores: their rounding becomes relative error of the probabilities; the weighted
// sum and the row sum add n_kv terms each).
double error_ratio(const AttentionProblem& p, const float* out) {
  double worst = 0.0;
  for (std::size_t i = 0; i < p.n_q; ++i) {
    const double rel =
        peer_tolerance_margin *
        (2.0 * ((static_cast<double>(p.d) + 6.0) * p.score_abs[i] + 3.0) + 2.0 * static_cast<double>(p.n_kv) + 24.0) *
        unit_roundoff;
    for (std::size_t c = 0; c < p.d; ++c) {
      const double got = out[i * p.d + c], want = p.want[i * p.d + c];
      if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();
      const double bound = rel * p.weighted_abs[i * p.d + c] + 1e-30;
      worst = std::max(worst, std::fabs(got - want) / bound);
    }
  }
  return worst;
}

// c[i][j] may differ by 2·(k + 2)·2⁻²⁴·Σ_p |a_ip·b_pj|.
double error_ratio(const MatmulProblem& p, const float* c) {
  const double rel = peer_tolerance_margin * 2.0 * (static_cast<double>(p.kn) + 2.0) * unit_roundoff;
  double worst = 0.0;
  for (std::size_t i = 0; i < p.m * p.kn; ++i) {
    if (!std::isfinite(c[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::fabs(c[i] - p.want[i]) / (rel * p.abs_sum[i] + 1e-30));
  }
  return worst;
}

namespace {

// ---- the peers' blocks -------------------------------------------------------------------------------------------
// Query rows [row0, row0 + rows) against keys [0, keys) (PeerPlan::block_q). The causal blocks compute
// ≈ n_q·(n_kv − n_q/2) + n_q·block_q/2 scores instead of n_q·n_kv: with n_q = n_kv the peers skip the hidden half
// as microattn does, at the cost of more, smaller GEMM calls. Dense is one block of all queries and keys.
struct Block {
  std::size_t row0, rows, keys;
};

[[maybe_unused]] std::vector<Block> blocks_for(const AttentionProblem& p, const PeerPlan& plan) {
  if (!p.causal) return {{0, p.n_q, p.n_kv}};
  const std::size_t block = plan.block_q != 0 ? plan.block_q : p.n_q;
  std::vector<Block> b;
  for (std::size_t i0 = 0; i0 < p.n_q; i0 += block) {
    const std::size_t rows = std::min(block, p.n_q - i0);
    b.push_back({i0, rows, i0 + rows + p.causal_offset()});
  }
  return b;
}

// Hides key j > query i + causal_offset in a rows × keys score slab (row stride ld) whose first row is query
// b.row0: the last square's strict upper triangle.
[[maybe_unused]] void hide_future_keys(float* s, std::size_t ld, const Block& b, std::size_t causal_offset) {
  const float hidden = -std::numeric_limits<float>::infinity();
  for (std::size_t r = 0; r < b.rows; ++r)
    for (std::size_t j = b.row0 + r + causal_offset + 1; j < b.keys; ++j) s[r * ld + j] = hidden;
}

// ---- attention -------------------------------------------------------------------------------------------------
class MicroattnAttention final : public Runner {
 public:
  MicroattnAttention(const AttentionProblem& p, float* out)
      : p_(p), out_(out), ws_(ma::attention_workspace_floats(p.d, p.d)) {
    opt_.causal = p.causal;
    opt_.causal_offset = static_cast<std::ptrdiff_t>(p.causal_offset());
  }
  bool run() override {
    return ma::attention(ma::make_view(p_.q.data(), p_.n_q, p_.d), ma::make_view(p_.k.data(), p_.n_kv, p_.d),
                         ma::make_view(p_.v.data(), p_.n_kv, p_.d), ma::make_view(out_, p_.n_q, p_.d), ws_.data(),
                         ws_.size(), opt_) == ma::Status::ok;
  }

 private:
  const AttentionProblem& p_;
  float* out_;
  std::vector<float> ws_;
  ma::AttentionOptions opt_;
};

#if defined(MICROATTN_PEER_EIGEN)
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// S = (Q·scale)·Kᵀ, row softmax with Eigen's vectorized (SIMD) array exp, O = S·V, normalized (PeerPlan); for one
// query Eigen's product takes its GEMV.
class EigenAttention final : public Runner {
 public:
  EigenAttention(const AttentionProblem& p, float* out, const PeerPlan& plan)
      : p_(p),
        blocks_(blocks_for(p, plan)),
        normalize_probabilities_(plan.normalize_probabilities),
        q_(p.q.data(), p.n_q, p.d),
        k_(p.k.data(), p.n_kv, p.d),
        v_(p.v.data(), p.n_kv, p.d),
        o_(out, p.n_q, p.d),
        s_(blocks_.front().rows, p.n_kv),
        row_sum_(blocks_.front().rows) {}

  bool run() override {
    for (const Block& b : blocks_) {
      auto s = s_.topLeftCorner(b.rows, b.keys);
      // The scalar factor goes into the GEMM's alpha (Eigen's product extracts it), no temporary.
      s.noalias() = (q_.middleRows(b.row0, b.rows) * p_.scale) * k_.topRows(b.keys).transpose();
      if (p_.causal) hide_future_keys(s.data(), static_cast<std::size_t>(s_.cols()), b, p_.causal_offset());
      for (Eigen::Index r = 0; r < s.rows(); ++r) {
        auto row = s.row(r).array();
        const float m = row.maxCoeff();
        row = (row - m).exp();
        if (normalize_probabilities_)
          row /= row.sum();
        else
          row_sum_(r) = row.sum();
      }
      auto o = o_.middleRows(b.row0, b.rows);
      o.noalias() = s * v_.topRows(b.keys);
      if (!normalize_probabilities_)
        for (Eigen::Index r = 0; r < o.rows(); ++r) o.row(r) *= 1.0f / row_sum_(r);
    }
    return true;
  }

 private:
  const AttentionProblem& p_;
  std::vector<Block> blocks_;
  bool normalize_probabilities_;
  Eigen::Map<const RowMatrix> q_, k_, v_;
  Eigen::Map<RowMatrix> o_;
  RowMatrix s_;
  Eigen::VectorXf row_sum_;
};
#endif

#if defined(MICROATTN_PEER_CBLAS)
// cblas_sgemm (scale as alpha), microattn::softmax_rows (the vectorized softmax: a BLAS has none), cblas_sgemm.
class CblasAttention final : public Runner {
 public:
  CblasAttention(const AttentionProblem& p, float* out, const PeerPlan& plan)
      : p_(p), out_(out), blocks_(blocks_for(p, plan)), s_(blocks_.front().rows * p.n_kv) {}

  bool run() override {
    const int d = static_cast<int>(p_.d);
    // One query (a decoding step) is a matrix–vector product: what a BLAS user calls for it is GEMV.
    const bool one_query = p_.n_q == 1;
    for (const Block& b : blocks_) {
      const int rows = static_cast<int>(b.rows), keys = static_cast<int>(b.keys);
      const float* q = p_.q.data() + b.row0 * p_.d;
      float* s = s_.data();  // rows × keys, contiguous
      float* o = out_ + b.row0 * p_.d;
      if (one_query)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, keys, d, p_.scale, p_.k.data(), d, q, 1, 0.0f, s, 1);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, d, p_.scale, q, d, p_.k.data(), d, 0.0f, s,
                    keys);
      if (p_.causal) hide_future_keys(s, b.keys, b, p_.causal_offset());
      if (ma::softmax_rows(ma::make_view(s, b.rows, b.keys)) != ma::Status::ok) return false;
      if (one_query)
        cblas_sgemv(CblasRowMajor, CblasTrans, keys, d, 1.0f, p_.v.data(), d, s, 1, 0.0f, o, 1);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, d, keys, 1.0f, s, keys, p_.v.data(), d, 0.0f, o,
                    d);
    }
    return true;
  }

 private:
  const AttentionProblem& p_;
  float* out_;
  std::vector<Block> blocks_;
  std::vector<float> s_;
};
#endif

#if defined(MICROATTN_PEER_DNNL)
// oneDNN 2.x matmul primitive (scale as output scale), softmax primitive (in place), matmul.
class DnnlAttention final : public Runner {
 public:
  // Every primitive (one set per query block in the causal variant, their shapes differ) and every argument
  // map is created here, outside the timed loop; run() only executes them.
  DnnlAttention(const AttentionProblem& p, float* out, const PeerPlan& plan)
      : p_(p),
        blocks_(blocks_for(p, plan)),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_),
        s_(blocks_.front().rows * p.n_kv) {
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

  bool run() override {
    for (const Step& st : steps_) {
      st.qk.execute(stream_, st.qk_args);
      if (p_.causal) hide_future_keys(s_.data(), st.block.keys, st.block, p_.causal_offset());
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
  const AttentionProblem& p_;
  std::vector<Block> blocks_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<float> s_;
  std::vector<Step> steps_;
};
#endif

// ---- matmul ------------------------------------------------------------------------------------------------------
class MicroattnMatmul final : public Runner {
 public:
  MicroattnMatmul(const MatmulProblem& p, float* c) : p_(p), c_(c) {}
  bool run() override {
    return ma::matmul(ma::make_view(p_.a.data(), p_.m, p_.kn), ma::make_view(p_.b.data(), p_.kn, p_.kn),
                      ma::make_view(c_, p_.m, p_.kn), p_.transpose_b) == ma::Status::ok;
  }

 private:
  const MatmulProblem& p_;
  float* c_;
};

#if defined(MICROATTN_PEER_EIGEN)
// A product of row-major maps: Eigen picks its GEMV for one row.
class EigenMatmul final : public Runner {
 public:
  EigenMatmul(const MatmulProblem& p, float* c)
      : p_(p), a_(p.a.data(), p.m, p.kn), b_(p.b.data(), p.kn, p.kn), c_(c, p.m, p.kn) {}
  bool run() override {
    if (p_.transpose_b)
      c_.noalias() = a_ * b_.transpose();
    else
      c_.noalias() = a_ * b_;
    return true;
  }

 private:
  const MatmulProblem& p_;
  Eigen::Map<const RowMatrix> a_, b_;
  Eigen::Map<RowMatrix> c_;
};
#endif

#if defined(MICROATTN_PEER_CBLAS)
// cblas_sgemv for one row, cblas_sgemm otherwise.
class CblasMatmul final : public Runner {
 public:
  CblasMatmul(const MatmulProblem& p, float* c) : p_(p), c_(c) {}
  bool run() override {
    const int m = static_cast<int>(p_.m), n = static_cast<int>(p_.kn);
    if (m == 1)  // y = W·x (b transposed: W is n × k) or y = Wᵀ·x
      cblas_sgemv(CblasRowMajor, p_.transpose_b ? CblasNoTrans : CblasTrans, n, n, 1.0f, p_.b.data(), n, p_.a.data(), 1,
                  0.0f, c_, 1);
    else
      cblas_sgemm(CblasRowMajor, CblasNoTrans, p_.transpose_b ? CblasTrans : CblasNoTrans, m, n, n, 1.0f, p_.a.data(),
                  n, p_.b.data(), n, 0.0f, c_, n);
    return true;
  }

 private:
  const MatmulProblem& p_;
  float* c_;
};
#endif

// The entries of the tables below (AttentionImpl::make, MatmulImpl::make); microattn needs no plan.
template <class Impl>
std::unique_ptr<Runner> make_planned(const AttentionProblem& p, float* out, const PeerPlan& plan) {
  return std::make_unique<Impl>(p, out, plan);
}
template <class Impl>
std::unique_ptr<Runner> make_unplanned(const AttentionProblem& p, float* out, const PeerPlan&) {
  return std::make_unique<Impl>(p, out);
}
template <class Impl>
std::unique_ptr<Runner> make_matmul(const MatmulProblem& p, float* c) {
  return std::make_unique<Impl>(p, c);
}

template <class Problem, class Make>
void check_then_time(benchmark::State& state, const Problem& p, std::size_t out_floats, double flops,
                     const Make& make) {
  std::vector<float> out(out_floats, std::numeric_limits<float>::quiet_NaN());
  std::unique_ptr<Runner> impl;
  double err_tol = 0.0;
  try {
    impl = make(out.data());
    if (!impl->run()) {
      state.SkipWithError("the implementation returned an error");
      return;
    }
    err_tol = error_ratio(p, out.data());
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
  set_flop_counters(state, flops);
  state.counters["err_tol"] = err_tol;
}

}  // namespace

std::vector<AttentionImpl> attention_impls([[maybe_unused]] bool with_onednn) {
  std::vector<AttentionImpl> impls{{"microattn", make_unplanned<MicroattnAttention>}};
#if defined(MICROATTN_PEER_EIGEN)
  impls.push_back({"eigen", make_planned<EigenAttention>});
#endif
#if defined(MICROATTN_PEER_CBLAS)
  impls.push_back({blas_name, make_planned<CblasAttention>});
#endif
#if defined(MICROATTN_PEER_DNNL)
  if (with_onednn) impls.push_back({"onednn", make_planned<DnnlAttention>});
#endif
  return impls;
}

std::vector<MatmulImpl> matmul_impls() {
  std::vector<MatmulImpl> impls{{"microattn", make_matmul<MicroattnMatmul>}};
#if defined(MICROATTN_PEER_EIGEN)
  impls.push_back({"eigen", make_matmul<EigenMatmul>});
#endif
#if defined(MICROATTN_PEER_CBLAS)
  impls.push_back({blas_name, make_matmul<CblasMatmul>});
#endif
  return impls;
}

void time_checked(benchmark::State& state, const AttentionImpl& impl, const AttentionProblem& p, const PeerPlan& plan) {
  const double flops = 4.0 * static_cast<double>(p.n_q) * static_cast<double>(p.n_kv) * static_cast<double>(p.d);
  check_then_time(state, p, p.n_q * p.d, flops, [&](float* out) { return impl.make(p, out, plan); });
}

void time_checked(benchmark::State& state, const MatmulImpl& impl, const MatmulProblem& p) {
  const double flops = 2.0 * static_cast<double>(p.m) * static_cast<double>(p.kn) * static_cast<double>(p.kn);
  check_then_time(state, p, p.m * p.kn, flops, [&](float* c) { return impl.make(p, c); });
}

// ---- set-up and report -------------------------------------------------------------------------------------------
void note(const std::string& key, const std::string& value) {
  std::printf("  %-16s %s\n", (key + ":").c_str(), value.c_str());
  benchmark::AddCustomContext(key, value);
}

namespace {

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

void set_up_eigen() {
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
}

void set_up_blas() {
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
}

void set_up_dnnl([[maybe_unused]] bool compared) {
#if defined(MICROATTN_PEER_DNNL)
  if (!compared) {
    note("onednn", "not compared by this program");
    return;
  }
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
  note("onednn", compared ? "compiled out (not found by Meson, or -Dpeers=disabled)" : "not compared by this program");
#endif
}

}  // namespace

void set_up(bool with_onednn) {
  // Single thread everywhere. OpenMP (oneDNN's runtime in Debian, and Eigen's when compiled with -fopenmp).
#if defined(MICROATTN_PEER_OPENMP)
  omp_set_num_threads(1);
#endif
  std::printf("peers (single thread each):\n");
  note("simd_arch", ma::simd_arch());
  set_up_eigen();
  set_up_blas();
  set_up_dnnl(with_onednn);
  note("ggml", "not packaged in Debian 12: not compared");
}

// ---- summaries ---------------------------------------------------------------------------------------------------
void Medians::record(const benchmark::BenchmarkReporter::Run& run, double value) {
  const std::string& name = run.run_name.function_name;
  if (run.run_type == benchmark::BenchmarkReporter::Run::RT_Iteration)
    repetitions_[name].push_back(value);
  else if (run.aggregate_name == "median")
    aggregate_median_[name] = value;
}

double Medians::median(const std::string& name) const {
  const auto it = repetitions_.find(name);
  if (it == repetitions_.end() || it->second.empty()) {
    const auto agg = aggregate_median_.find(name);
    return agg == aggregate_median_.end() ? -1.0 : agg->second;
  }
  std::vector<double> v = it->second;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace bench::peers
