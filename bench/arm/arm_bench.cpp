// Instruction-count benchmark for the Linux ARM targets (Cortex-A, NEON): microattn side by side with Eigen 3.4,
// both compiled with the same flags (the cross file's, -O3), one head, fp32, single thread.
//
// Cases: attention n × 64 (n = 64, 128, 256; n queries = n keys, d = 64, dense and causal), decoding n_q × n_kv × 64
// (the few-query shapes of the decoding issue: n_q = 1, 4, 8 queries against n_kv = 256, 1024, 4096 keys; dense as
// op "decode", bottom-right causal as "decode_causal": query i sees keys j <= i + n_kv − n_q), matmul 128³, and
// linear() with one row of x (m = 1) against 64 × 256, 256 × 64, 256 × 256 and 1024 × 1024 weights in f32, f16 and q8.
// Every implementation runs once unmeasured and its output is compared with the test suite's double-precision reference
// (tests/reference.cpp); then it runs again between arm_bench_mark_begin() and arm_bench_mark_end(), two empty
// out-of-line functions whose addresses the QEMU plugin tools/qemu_insn_count.c is given, and must give the same bits.
// scripts/arm_bench.sh builds this program, runs it under qemu-aarch64 / qemu-arm with the plugin and prints the table
// (docs/benchmarks.md "Cortex-A (NEON): instruction counts").
//
// Output, one line per measured pair k (k = 0 is an empty pair: the markers' own cost, which the script
// subtracts):  "case k | impl | op | shape | MACs | ok"  ("| WRONG RESULT" instead of "| ok" on a mismatch,
// and the program exits 1). MACs count the dense work (2·n_q·n_kv·d for attention, causal included, so a
// causal row shows the work it skips; m·n·k for matmul).
//
// Eigen's attention is what a competent Eigen user writes (bench/peers.cpp's peer, as bench_peers times it):
// S = (Q·scale)·Kᵀ as one GEMM, a row softmax on Eigen's vectorized exp, O = S·V, rows divided by their sums;
// causal walks the queries in blocks of 32 and computes only the visible keys of each block, masking the last
// square. Decoding (few queries) is one block: all n_q·n_kv scores (for one query Eigen's product takes its GEMV),
// the few hidden by the bottom-right causal rule set to −inf, as bench_decode_peers times bench/peers.cpp's Eigen
// peer.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <microattn/microattn.hpp>

#include "reference.hpp"
#include "tolerance.hpp"

namespace ma = microattn;

extern "C" {
// The markers: empty and out of line, so the plugin sees every measured call start and end at them.
__attribute__((noinline, used)) void arm_bench_mark_begin() { asm volatile("" ::: "memory"); }
__attribute__((noinline, used)) void arm_bench_mark_end() { asm volatile("" ::: "memory"); }
}

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix>;
using Map = Eigen::Map<RowMatrix>;

std::vector<float> random_vector(std::size_t n, std::uint32_t seed) {  // uniform [-1, 1), xorshift32
  std::vector<float> v(n);
  std::uint32_t s = seed * 2654435761u + 1u;
  for (float& x : v) {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    x = static_cast<float>(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
  return v;
}

int next_case = 0;
bool all_ok = true;

// Runs f once to check (check(out) says whether the output is right), then once between the markers; the
// measured run must reproduce the checked output bit for bit.
template <typename F, typename C>
void measure(const char* impl, const char* op, const std::string& shape, double macs, std::vector<float>& out, F f,
             C check) {
  std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
  f();
  bool ok = check(out);
  const std::vector<float> first = out;
  std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
  arm_bench_mark_begin();
  f();
  arm_bench_mark_end();
  ok = ok && std::memcmp(first.data(), out.data(), out.size() * sizeof(float)) == 0;
  all_ok = all_ok && ok;
  std::printf("case %d | %s | %s | %s | %.0f | %s\n", ++next_case, impl, op, shape.c_str(), macs,
              ok ? "ok" : "WRONG RESULT");
}

// ---- attention ------------------------------------------------------------------------------------------------
struct AttentionProblem {
  std::size_t n_q, n_kv, d;
  bool causal;
  std::ptrdiff_t causal_offset;
  std::vector<float> q, k, v;
  std::vector<double> want, weighted_abs, score_abs;
};

AttentionProblem make_attention(std::size_t n_q, std::size_t n_kv, std::size_t d, bool causal,
                                std::ptrdiff_t causal_offset) {
  AttentionProblem p{n_q,
                     n_kv,
                     d,
                     causal,
                     causal_offset,
                     random_vector(n_q * d, 1),
                     random_vector(n_kv * d, 2),
                     random_vector(n_kv * d, 3),
                     {},
                     {},
                     {}};
  ref::AttentionCase c{};
  c.q = p.q.data();
  c.ldq = d;
  c.k = p.k.data();
  c.ldk = d;
  c.v = p.v.data();
  c.ldv = d;
  c.n_q = n_q;
  c.n_kv = n_kv;
  c.d_k = c.d_v = d;
  c.scale = 0.0;  // 1/sqrt(d)
  c.causal = causal;
  c.causal_offset = causal_offset;
  ref::attention(c, p.want, p.weighted_abs, p.score_abs);
  return p;
}

// The test suite's tolerance, times 4 for Eigen (its exp and summation orders round their own way).
bool attention_ok(const AttentionProblem& p, const std::vector<float>& out) {
  for (std::size_t i = 0; i < p.n_q; ++i) {
    testing_support::Tolerance t = testing_support::attention_tolerance(p.d, p.n_kv, p.score_abs[i]);
    t.rel *= 4.0;
    for (std::size_t c = 0; c < p.d; ++c)
      if (!std::isfinite(out[i * p.d + c]) ||
          !testing_support::within(out[i * p.d + c], p.want[i * p.d + c], p.weighted_abs[i * p.d + c], t))
        return false;
  }
  return true;
}

// causal_offset: 0 for the square cases (top-left), n_kv − n_q for decoding (bottom-right).
void run_attention(std::size_t n_q, std::size_t n_kv, std::size_t d, bool causal, std::ptrdiff_t causal_offset,
                   const char* op) {
  const AttentionProblem p = make_attention(n_q, n_kv, d, causal, causal_offset);
  const std::string shape = std::to_string(n_q) + "x" + std::to_string(n_kv) + "x" + std::to_string(d);
  const double macs = 2.0 * static_cast<double>(n_q * n_kv * d);
  std::vector<float> out(n_q * d);
  auto check = [&](const std::vector<float>& o) { return attention_ok(p, o); };

  std::vector<float> ws(ma::attention_workspace_floats(d, d));
  ma::AttentionOptions opt;
  opt.causal = causal;
  opt.causal_offset = causal_offset;
  measure(
      "microattn", op, shape, macs, out,
      [&] {
        if (ma::attention(ma::make_view(p.q.data(), n_q, d), ma::make_view(p.k.data(), n_kv, d),
                          ma::make_view(p.v.data(), n_kv, d), ma::make_view(out.data(), n_q, d), ws.data(), ws.size(),
                          opt) != ma::Status::ok)
          out[0] = std::numeric_limits<float>::quiet_NaN();
      },
      check);

  // Eigen: blocks of query rows, each with the keys it may see (dense: one block of everything).
  const std::size_t block = causal ? 32 : n_q;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const ConstMap q(p.q.data(), n_q, d), k(p.k.data(), n_kv, d), v(p.v.data(), n_kv, d);
  Map o(out.data(), n_q, d);
  RowMatrix s_buf(block, n_kv);
  Eigen::VectorXf row_sum(block);
  measure(
      "eigen", op, shape, macs, out,
      [&] {
        for (std::size_t i0 = 0; i0 < n_q; i0 += block) {
          const std::size_t rows = std::min(block, n_q - i0);
          const std::size_t keys =
              causal ? std::min(n_kv, static_cast<std::size_t>(static_cast<std::ptrdiff_t>(i0 + rows) + causal_offset))
                     : n_kv;
          auto s = s_buf.topLeftCorner(rows, keys);
          s.noalias() = (q.middleRows(i0, rows) * scale) * k.topRows(keys).transpose();
          if (causal)
            for (std::size_t r = 0; r < rows; ++r)
              for (std::size_t j = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(i0 + r + 1) + causal_offset);
                   j < keys; ++j)
                s(r, j) = -std::numeric_limits<float>::infinity();
          for (Eigen::Index r = 0; r < s.rows(); ++r) {
            auto row = s.row(r).array();
            const float m = row.maxCoeff();
            row = (row - m).exp();
            row_sum(r) = row.sum();
          }
          auto orows = o.middleRows(i0, rows);
          orows.noalias() = s * v.topRows(keys);
          for (Eigen::Index r = 0; r < orows.rows(); ++r) orows.row(r) *= 1.0f / row_sum(r);
        }
      },
      check);
}

// ---- matmul ---------------------------------------------------------------------------------------------------
void run_matmul(std::size_t m, std::size_t n, std::size_t kk) {
  const std::vector<float> a = random_vector(m * kk, 4), b = random_vector(kk * n, 5);
  std::vector<double> want, abs_want;
  ref::matmul(a.data(), kk, b.data(), n, false, m, n, kk, want, abs_want);
  const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(kk);
  const double macs = static_cast<double>(m * n * kk);
  std::vector<float> c(m * n);
  auto check = [&](const std::vector<float>& out) {
    const testing_support::Tolerance t = testing_support::dot_tolerance(kk);
    for (std::size_t i = 0; i < m * n; ++i)
      if (!testing_support::within(out[i], want[i], abs_want[i], t)) return false;
    return true;
  };
  measure(
      "microattn", "matmul", shape, macs, c,
      [&] {
        if (ma::matmul(ma::make_view(a.data(), m, kk), ma::make_view(b.data(), kk, n), ma::make_view(c.data(), m, n),
                       false) != ma::Status::ok)
          c[0] = std::numeric_limits<float>::quiet_NaN();
      },
      check);
  const ConstMap am(a.data(), m, kk), bm(b.data(), kk, n);
  Map cm(c.data(), m, n);
  measure(
      "eigen", "matmul", shape, macs, c, [&] { cm.noalias() = am * bm; }, check);
}

// ---- linear (m = 1) ------------------------------------------------------------------------------------------
// One row of x against n × k weights in f32, f16 and q8 (one scale per row, as CMSIS-NN's per-channel int8): the
// decoding projection. Checked against a double product of x and the weights as stored, within weights.hpp's
// bounds (q8: plus the activation quantization term). Op names linear_f32 / linear_f16 / linear_q8, no Eigen row.
double half_value(std::uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(m + 1024, e - 25);
  return (h & 0x8000) != 0 ? -v : v;
}
void run_linear(std::size_t n, std::size_t k) {
  const std::vector<float> wf = random_vector(n * k, 6), x = random_vector(k, 7), bias = random_vector(n, 8);
  std::vector<std::uint16_t> wh(n * k);
  std::vector<std::int8_t> wq(n * k);
  std::vector<float> scales(n, 1.0f / 127.0f);
  for (std::size_t i = 0; i < n * k; ++i) {
    wh[i] = ma::f16_from_float(wf[i]);
    wq[i] = static_cast<std::int8_t>(std::lround(wf[i] * 127.0f));
  }
  const std::string shape = "1x" + std::to_string(n) + "x" + std::to_string(k);
  std::vector<float> y(n);
  double amax = 0.0;
  for (float v : x) amax = std::max(amax, std::fabs(static_cast<double>(v)));
  for (int f = 0; f < 3; ++f) {
    const ma::WeightMatrix w = f == 0   ? ma::weights_f32(wf.data(), n, k)
                               : f == 1 ? ma::weights_f16(wh.data(), n, k)
                                        : ma::weights_q8(wq.data(), scales.data(), n, k, k);
    auto check = [&](const std::vector<float>& out) {
      for (std::size_t r = 0; r < n; ++r) {
        double want = bias[r], abs = std::fabs(bias[r]), wabs = 0.0;
        for (std::size_t c = 0; c < k; ++c) {
          const std::size_t i = r * k + c;
          const double wv = f == 0 ? wf[i] : f == 1 ? half_value(wh[i]) : scales[r] * static_cast<double>(wq[i]);
          want += wv * x[c];
          abs += std::fabs(wv * x[c]);
          wabs += std::fabs(wv);
        }
        const double quant = f == 2 ? 0.5 * amax / 127.0 * wabs : 0.0;
        if (!(std::fabs(out[r] - want) <= quant + 2.0 * (k + 3) * 0x1p-24 * (abs + quant))) return false;
      }
      return true;
    };
    measure(
        "microattn",
        f == 0   ? "linear_f32"
        : f == 1 ? "linear_f16"
                 : "linear_q8",
        shape, static_cast<double>(n * k), y,
        [&] {
          if (ma::linear(ma::make_view(x.data(), 1, k), w, bias.data(), ma::make_view(y.data(), 1, n)) !=
              ma::Status::ok)
            y[0] = std::numeric_limits<float>::quiet_NaN();
        },
        check);
  }
}

}  // namespace

int main() {
  std::printf("arm_bench: microattn %s kernels (%s), Eigen %d.%d.%d%s\n", ma::simd_arch(), ma::matmul_kernel_name(),
              EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION,
#if defined(EIGEN_VECTORIZE_NEON)
              " NEON"
#else
              " not vectorized"
#endif
  );
  arm_bench_mark_begin();  // case 0: the markers alone
  arm_bench_mark_end();
  std::printf("case 0 | - | empty | - | 1 | ok\n");
  for (std::size_t n : {64, 128, 256}) {
    run_attention(n, n, 64, false, 0, "attention");
    run_attention(n, n, 64, true, 0, "attention_causal");
  }
  for (std::size_t n_q : {1, 4, 8})
    for (std::size_t n_kv : {256, 1024, 4096}) {
      const auto offset = static_cast<std::ptrdiff_t>(n_kv - n_q);
      run_attention(n_q, n_kv, 64, false, offset, "decode");
      run_attention(n_q, n_kv, 64, true, offset, "decode_causal");
    }
  run_matmul(128, 128, 128);
  for (const auto& nk : {std::pair<std::size_t, std::size_t>{64, 256}, {256, 64}, {256, 256}, {1024, 1024}})
    run_linear(nk.first, nk.second);
  return all_ok ? 0 : 1;
}
