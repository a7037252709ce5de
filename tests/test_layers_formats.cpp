// MultiHeadAttention built from LayerWeightMatrices: every weight format for each projection (mixed in one layer
// too), q8 groups per row, shorter than a row, spanning rows and straddling rows unevenly, through forward, cross
// forward, append and attend, with grouped-query heads, against the double reference of the dequantized weights
// (decoded and dequantized here, never by the library), and every bad argument.
//
// Bounds (README "Numerical contract"): f16 weights are exact floats, so the fp32 layer tolerance holds. q8: x on
// the quantization grid (every group's max |x| is 127·2⁻⁷ and every element a multiple of 2⁻⁷) quantizes exactly,
// so the input projections keep the fp32 tolerance; off the grid the projection's error is at most linear()'s q8
// term ½·(1 + 2⁻¹⁶)·Σ_g s_g·Σ_{c∈g}|w_rc|, checked where it reaches y unamplified: the out projection (y is its
// output) and V (y is a convex combination of V rows: its error is at most the largest V error of the column).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reference.hpp"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

// ---- weights in every format, with their dequantized floats ---------------------------------------------

// IEEE binary16 → double from the definition (sign, 5-bit exponent with bias 15, 10-bit fraction).
double decode_half(std::uint16_t h) {
  const int sign = h >> 15, e = (h >> 10) & 31, f = h & 1023;
  const double mag = e == 0 ? std::ldexp(f, -24) : std::ldexp(1024 + f, e - 25);
  return sign != 0 ? -mag : mag;
}

struct Matrix {
  ma::Format format = ma::Format::f32;
  std::size_t rows = 0, cols = 0, group = 0;
  std::vector<float> f32;          // f32 data
  std::vector<std::uint16_t> f16;  // f16 data
  std::vector<std::int8_t> q8;     // q8 data (one spare byte in front: misaligned starts)
  std::vector<float> scales;       // q8
  std::vector<float> dequantized;  // every element as the reference sees it (exact floats)
  std::size_t q8_offset = 0;       // where the q8 data starts in q8 (0 or 1: int8 needs no alignment)

  ma::WeightMatrix view() const {
    switch (format) {
      case ma::Format::f32:
        return ma::weights_f32(f32.data(), rows, cols);
      case ma::Format::f16:
        return ma::weights_f16(f16.data(), rows, cols);
      case ma::Format::q8:
        return ma::weights_q8(q8.data() + q8_offset, scales.data(), rows, cols, group);
    }
    return {};
  }
};

// Random weights of about |w| <= 0.3 in the format. f16: exponents −7 … −3 with random fractions, some zeros and
// subnormals. q8: values in [−127, 127] (−128 at times) and scales j·2⁻²² (j < 2¹⁴), so that every s·q is exact in
// float and the dequantized floats are the exact values.
Matrix make_matrix(ma::Format f, std::size_t rows, std::size_t cols, std::size_t group, std::uint32_t seed,
                   std::size_t q8_offset = 1) {
  Matrix m;
  m.format = f;
  m.rows = rows;
  m.cols = cols;
  m.group = group;
  const std::size_t n = rows * cols;
  m.dequantized.resize(n);
  std::mt19937 rng(seed);
  if (f == ma::Format::f32) {
    Uniform u(seed, -0.3f, 0.3f);
    m.f32.resize(n);
    for (std::size_t i = 0; i < n; ++i) m.dequantized[i] = m.f32[i] = u();
  } else if (f == ma::Format::f16) {
    m.f16.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h;
      if (rng() % 29 == 0) {
        h = static_cast<std::uint16_t>(rng() % 1024);  // zero or subnormal
      } else {
        h = static_cast<std::uint16_t>(((15 - 7 + rng() % 5) << 10) | (rng() % 1024));
      }
      if (rng() % 2 != 0) h = static_cast<std::uint16_t>(h | 0x8000u);
      m.f16[i] = h;
      m.dequantized[i] = static_cast<float>(decode_half(h));
    }
  } else {
    m.q8_offset = q8_offset;
    m.q8.resize(n + 1);
    m.scales.resize(n / group);
    for (float& s : m.scales) s = std::ldexp(static_cast<float>(4096 + rng() % 5800), -22);
    for (std::size_t i = 0; i < n; ++i) {
      const int q = rng() % 41 == 0 ? -128 : static_cast<int>(rng() % 255) - 127;
      m.q8[q8_offset + i] = static_cast<std::int8_t>(q);
      const double v = static_cast<double>(m.scales[i / group]) * q;
      m.dequantized[i] = static_cast<float>(v);
      if (static_cast<double>(m.dequantized[i]) != v) ADD_FAILURE() << "test setup: s·q not exact in float";
    }
  }
  return m;
}

// The four projections and biases of a layer; out absent when out_format is not given.
struct Formats {
  ma::Format q, k, v, out;
  std::size_t gq, gk, gv, gout;  // q8 groups
  bool with_out = true, biases = true;
};

struct LayerData {
  Matrix q, k, v, out;
  std::vector<float> bq, bk, bv, bo;
  bool with_out, biases;
  LayerData(std::size_t d, std::size_t kv_dim, const Formats& f, std::uint32_t seed)
      : q(make_matrix(f.q, d, d, f.gq, seed)),
        k(make_matrix(f.k, kv_dim, d, f.gk, seed + 1)),
        v(make_matrix(f.v, kv_dim, d, f.gv, seed + 2)),
        out(make_matrix(f.out, d, d, f.gout, seed + 3, 0)),
        bq(d),
        bk(kv_dim),
        bv(kv_dim),
        bo(d),
        with_out(f.with_out),
        biases(f.biases) {
    Uniform u(seed + 4, -0.3f, 0.3f);
    for (auto* b : {&bq, &bk, &bv, &bo})
      for (float& x : *b) x = u();
  }
  ma::LayerWeightMatrices matrices() const {
    ma::LayerWeightMatrices w{};
    w.q = q.view();
    w.k = k.view();
    w.v = v.view();
    w.q_bias = biases ? bq.data() : nullptr;
    w.k_bias = biases ? bk.data() : nullptr;
    w.v_bias = biases ? bv.data() : nullptr;
    w.out = with_out ? out.view() : ma::WeightMatrix{};
    w.out_bias = with_out && biases ? bo.data() : nullptr;
    return w;
  }
};

// ---- inputs and the reference -----------------------------------------------------------------------------

// x on q8's grid: multiples of 2⁻⁷ in [−127, 127]·2⁻⁷, with ±127·2⁻⁷ at every 8th column (every group of these
// tests starts at a multiple of 8 and holds one): each group's scale is exactly 2⁻⁷ and x/s an integer.
void fill_on_grid(Guarded& x, std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (std::size_t i = 0; i < x.rows(); ++i)
    for (std::size_t c = 0; c < x.cols(); ++c) {
      const int q = c % 8 == 0 ? (rng() % 2 != 0 ? 127 : -127) : static_cast<int>(rng() % 255) - 127;
      x.at(i, c) = std::ldexp(static_cast<float>(q), -7);
    }
}

// linear()'s q8 quantization term for y_ir = Σ_c x_ic·w_rc with m's groups: ½·(1 + 2⁻¹⁶)·Σ_g s_g·Σ_{c∈g}|w_rc|,
// s_g = max_{c∈g}|x_ic|/127 over the columns of row r's groups (x in double; slack covers x's own rounding).
// Groups that straddle rows unevenly are computed in float (no term): 0 there.
double q8_term(const Matrix& m, const double* x, std::size_t r) {
  if (m.format != ma::Format::q8 || !(m.cols % m.group == 0 || m.group % m.cols == 0)) return 0.0;
  const std::size_t seg = m.group < m.cols ? m.group : m.cols;
  double term = 0.0;
  for (std::size_t c0 = 0; c0 < m.cols; c0 += seg) {
    double amax = 0.0, wsum = 0.0;
    for (std::size_t c = c0; c < c0 + seg; ++c) {
      amax = std::fmax(amax, std::fabs(x[c]));
      wsum += std::fabs(static_cast<double>(m.dequantized[r * m.cols + c]));
    }
    term += amax / 127.0 * wsum;
  }
  return 0.5 * (1.0 + 0x1p-16) * term * (1.0 + 1e-5);
}

struct Call {
  std::size_t n_q, n_kv;
  bool causal;
  long long offset;
  std::size_t q_position = 0, kv_position = 0;
};

// The reference output (n_q × d) of the layer on query / context, and the extra allowance per element from q8
// projections off the grid: the out projection's term (from the reference heads), V's (the column's largest).
void reference(const LayerData& w, std::size_t d, std::size_t heads, std::size_t kv_heads, const float* query,
               std::size_t ldq, const float* context, std::size_t ldc, const Call& c, std::vector<double>& y,
               std::vector<double>& extra, bool context_on_grid = true) {
  const std::size_t kv_dim = kv_heads * (d / heads);
  const float* bq = w.biases ? w.bq.data() : nullptr;
  const float* bk = w.biases ? w.bk.data() : nullptr;
  const float* bv = w.biases ? w.bv.data() : nullptr;
  const float* wo = w.with_out ? w.out.dequantized.data() : nullptr;
  const float* bo = w.with_out && w.biases ? w.bo.data() : nullptr;
  ref::MhaCase mc{d,
                  heads,
                  kv_heads,
                  w.q.dequantized.data(),
                  w.k.dequantized.data(),
                  w.v.dequantized.data(),
                  bq,
                  bk,
                  bv,
                  wo,
                  bo,
                  query,
                  c.n_q,
                  ldq,
                  context,
                  c.n_kv,
                  ldc,
                  c.causal,
                  c.offset,
                  nullptr,
                  0};
  mc.q_position = c.q_position;
  mc.kv_position = c.kv_position;
  ref::multihead_attention(mc, y);
  extra.assign(c.n_q * d, 0.0);
  // V off the grid: every output column c of head h is a convex combination of V(j, c): at most max_j of its term.
  std::vector<double> vmax(kv_dim, 0.0);
  std::vector<double> xrow(d);
  for (std::size_t j = 0; j < c.n_kv && !context_on_grid; ++j) {  // on the grid V is exact
    for (std::size_t i = 0; i < d; ++i) xrow[i] = context[j * ldc + i];
    for (std::size_t r = 0; r < kv_dim; ++r) vmax[r] = std::fmax(vmax[r], q8_term(w.v, xrow.data(), r));
  }
  const std::size_t group = heads / kv_heads, hd = d / heads;
  std::vector<double> heads_ref;
  if (w.with_out) {
    mc.wo = nullptr;
    mc.bo = nullptr;
    ref::multihead_attention(mc, heads_ref);
  }
  for (std::size_t i = 0; i < c.n_q; ++i) {
    for (std::size_t col = 0; col < d; ++col) {
      const double v_err = vmax[(col / hd) / group * hd + col % hd];  // the K/V head of query head col / hd
      extra[i * d + col] = v_err;
    }
    if (w.with_out) {
      // The heads carry V's error (and the fp32 error, in the layer tolerance) into the out projection, whose own
      // q8 term comes from the heads.
      std::vector<double> e(d);
      for (std::size_t r = 0; r < d; ++r) {
        double prop = 0.0;
        for (std::size_t col = 0; col < d; ++col)
          prop += std::fabs(static_cast<double>(w.out.dequantized[r * d + col])) * extra[i * d + col];
        e[r] = prop + q8_term(w.out, heads_ref.data() + i * d, r);
      }
      for (std::size_t r = 0; r < d; ++r) extra[i * d + r] = e[r];
    }
  }
}

// y (rows of the call) against the reference: the layer tolerance relative to the row's largest |y|, plus extra.
void expect_near(const Guarded& y, const std::vector<double>& want, const std::vector<double>& extra, std::size_t d,
                 std::size_t n_kv) {
  const Tolerance tol = layer_tolerance(d, n_kv);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < y.rows(); ++i) {
    double row = 0.0;
    for (std::size_t c = 0; c < d; ++c) row = std::fmax(row, std::fabs(want[i * d + c]));
    for (std::size_t c = 0; c < d; ++c) {
      const double err = std::fabs(y.at(i, c) - want[i * d + c]);
      if (!(err <= tol.rel * row + tol.abs + extra[i * d + c]) && bad++ < 5)
        ADD_FAILURE() << "y(" << i << "," << c << ") = " << y.at(i, c) << ", reference " << want[i * d + c]
                      << ", allowed " << tol.rel * row + tol.abs + extra[i * d + c];
    }
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_TRUE(y.canaries_intact());
}

constexpr std::size_t kD = 48, kHeads = 6, kKv = 2, kHd = kD / kHeads, kKvDim = kKv * kHd, kMaxSeq = 40;
using Layer = ma::MultiHeadAttention<kMaxSeq, kD, kHeads, kKv>;
using SharedLayer = ma::MultiHeadAttentionSharedScratch<kMaxSeq, kD, kHeads, kKv>;

constexpr ma::Format F32 = ma::Format::f32, F16 = ma::Format::f16, Q8 = ma::Format::q8;

// Formats per projection: each alone, all alike, mixed; q8 groups: per row (48 / 16 = cols), shorter than a row
// (8, 16, 24), spanning rows (96, 32 for 16-wide... ) and straddling rows unevenly (float path: 32, 64, 72).
std::vector<Formats> format_cases() {
  return {
      {F16, F16, F16, F16, 0, 0, 0, 0},
      {Q8, Q8, Q8, Q8, kD, kD, kD, kD},              // one scale per row
      {Q8, Q8, Q8, Q8, 8, 16, 24, 16},               // groups shorter than a row
      {Q8, Q8, Q8, Q8, 96, 2 * kD, 4 * kD, 3 * kD},  // groups spanning 2, 2, 4 and 3 rows
      {Q8, Q8, Q8, Q8, 32, 64, 32, 72},              // straddling rows unevenly: the float path
      {Q8, F32, F16, F32, 16, 0, 0, 0},
      {F32, Q8, F32, F16, 0, kD, 0, 0},
      {F16, F32, Q8, Q8, 0, 0, 8, 24},
      {F32, F16, Q8, F16, 0, 0, 96, 0, false},        // no out projection
      {Q8, Q8, F16, F32, 24, 32, 0, 0, true, false},  // no biases
      {F32, F32, F32, F32, 0, 0, 0, 0},
  };
}

std::string describe(const Formats& f) {
  const char* names[] = {"f32", "f16", "q8"};
  std::string s;
  const ma::Format fs[] = {f.q, f.k, f.v, f.out};
  const std::size_t gs[] = {f.gq, f.gk, f.gv, f.gout};
  for (int i = 0; i < 4; ++i) {
    s += names[static_cast<int>(fs[i])];
    if (fs[i] == Q8) s += "/" + std::to_string(gs[i]);
    s += i < 3 ? "," : "";
  }
  return s + (f.with_out ? "" : " no-out") + (f.biases ? "" : " no-bias");
}

// ---- tests -------------------------------------------------------------------------------------------------

TEST(LayersFormats, ForwardEveryFormatOnAndOffTheGrid) {
  std::uint32_t seed = 100;
  for (const Formats& f : format_cases()) {
    const LayerData w(kD, kKvDim, f, seed);
    Layer layer{w.matrices(), ma::LayerConfig{}};
    for (bool grid : {true, false}) {
      // Off the grid, q8 Q and K would perturb the scores (amplified through the softmax): only V and out are
      // checked there, with Q and K taken from the grid case.
      if (!grid && (f.q == Q8 || f.k == Q8)) continue;
      for (std::size_t n : {1, 5, 33, 40}) {
        SCOPED_TRACE(::testing::Message() << describe(f) << " grid " << grid << " n " << n);
        Guarded x(n, kD, kD + 3), y(n, kD, kD + 1);
        if (grid) {
          fill_on_grid(x, seed + static_cast<std::uint32_t>(n));
        } else {
          Uniform u(seed + static_cast<std::uint32_t>(n));
          x.fill(u);
        }
        for (bool causal : {false, true}) {
          ma::AttentionOptions o;
          o.causal = causal;
          ASSERT_EQ(layer.forward(x.cview(), y.view(), o), ma::Status::ok);
          std::vector<double> want, extra;
          reference(w, kD, kHeads, kKv, x.data(), x.stride(), x.data(), x.stride(), {n, n, causal, 0}, want, extra,
                    grid);
          expect_near(y, want, extra, kD, n);
          EXPECT_EQ(layer.cached(), n);
        }
      }
    }
    ++seed;
  }
}

TEST(LayersFormats, CrossForwardAndAttend) {
  std::uint32_t seed = 300;
  for (const Formats& f : format_cases()) {
    const LayerData w(kD, kKvDim, f, seed);
    Layer layer{w.matrices()};
    for (std::size_t n_q : {1, 7, 40}) {
      const std::size_t n_kv = n_q == 7 ? 40 : 9;
      SCOPED_TRACE(::testing::Message() << describe(f) << " n_q " << n_q << " n_kv " << n_kv);
      Guarded q(n_q, kD), ctx(n_kv, kD, kD + 5), y(n_q, kD), y2(n_q, kD);
      fill_on_grid(q, seed + 1);
      fill_on_grid(ctx, seed + 2);
      ASSERT_EQ(layer.forward(q.cview(), ctx.cview(), y.view()), ma::Status::ok);
      std::vector<double> want, extra;
      reference(w, kD, kHeads, kKv, q.data(), q.stride(), ctx.data(), ctx.stride(), {n_q, n_kv, false, 0}, want, extra);
      expect_near(y, want, extra, kD, n_kv);
      // attend: the same queries against the cache the cross forward filled.
      ASSERT_EQ(layer.attend(q.cview(), y2.view()), ma::Status::ok);
      expect_near(y2, want, extra, kD, n_kv);
      EXPECT_EQ(layer.cached(), n_kv);
    }
    ++seed;
  }
}

TEST(LayersFormats, AppendTokenByTokenAndInChunksIsTheCausalForward) {
  std::uint32_t seed = 500;
  for (const Formats& f : format_cases()) {
    const LayerData w(kD, kKvDim, f, seed);
    ma::LayerScratch<ma::layer_scratch_floats(kD, kHeads)> scratch;
    SharedLayer layer{w.matrices(), scratch, ma::LayerConfig{}};
    const std::size_t n = 37;
    Guarded x(n, kD), y(n, kD);
    fill_on_grid(x, seed);
    std::vector<double> want, extra;
    reference(w, kD, kHeads, kKv, x.data(), x.stride(), x.data(), x.stride(), {n, n, true, 0}, want, extra);
    for (std::size_t chunk : {1, 4, 33}) {
      SCOPED_TRACE(::testing::Message() << describe(f) << " chunk " << chunk);
      layer.reset();
      for (std::size_t i0 = 0; i0 < n; i0 += chunk) {
        const std::size_t rows = n - i0 < chunk ? n - i0 : chunk;
        ASSERT_EQ(layer.append({x.data() + i0 * kD, rows, kD, kD}, {y.data() + i0 * kD, rows, kD, kD}), ma::Status::ok);
      }
      EXPECT_EQ(layer.position(), n);
      expect_near(y, want, extra, kD, n);
    }
    ++seed;
  }
}

TEST(LayersFormats, RotaryAndRingWindowWithQ8AndF16) {
  // Decoding with rotary embeddings and a ring cache: positions keep counting past MaxSeq.
  const Formats f{Q8, F16, Q8, Q8, 16, 0, kD, 24};
  const LayerData w(kD, kKvDim, f, 700);
  ma::LayerConfig cfg;
  cfg.rope_theta = 10000.0f;
  cfg.window = 12;
  Layer layer{w.matrices(), cfg};
  const std::size_t n = 90;
  Guarded x(n, kD), y(1, kD);
  fill_on_grid(x, 701);
  for (std::size_t t = 0; t < n; ++t) {
    ASSERT_EQ(layer.append({x.data() + t * kD, 1, kD, kD}, y.view()), ma::Status::ok) << t;
    if (t % 13 != 5) continue;
    // Reference: the window's rows (the token and the 11 before it), rotated at their positions.
    const std::size_t first = t + 1 >= cfg.window ? t + 1 - cfg.window : 0, n_kv = t + 1 - first;
    std::vector<double> want, extra;
    const LayerData& wd = w;
    ref::MhaCase mc{kD,
                    kHeads,
                    kKv,
                    wd.q.dequantized.data(),
                    wd.k.dequantized.data(),
                    wd.v.dequantized.data(),
                    wd.bq.data(),
                    wd.bk.data(),
                    wd.bv.data(),
                    wd.out.dequantized.data(),
                    wd.bo.data(),
                    x.data() + t * kD,
                    1,
                    kD,
                    x.data() + first * kD,
                    n_kv,
                    kD,
                    false,
                    0,
                    nullptr,
                    0};
    mc.rope_theta = 10000.0;
    mc.q_position = t;
    mc.kv_position = first;
    ref::multihead_attention(mc, want);
    // The out projection's q8 term, from the reference heads.
    std::vector<double> heads;
    mc.wo = nullptr;
    mc.bo = nullptr;
    ref::multihead_attention(mc, heads);
    extra.assign(kD, 0.0);
    for (std::size_t r = 0; r < kD; ++r) extra[r] = q8_term(w.out, heads.data(), r);
    // Rotation angles of positions near 90: a few more float roundings in the scores, well within the tolerance.
    SCOPED_TRACE(::testing::Message() << "token " << t);
    expect_near(y, want, extra, kD, n_kv);
  }
}

TEST(LayersFormats, MatricesOfF32GiveTheBitsOfLayerWeights) {
  // The same fp32 weights through both constructors: the same kernels, the same bits.
  const LayerTestWeights lw(kD, kKvDim, 800);
  Layer plain{lw.view()};
  ma::LayerWeightMatrices m{};
  m.q = ma::weights_f32(lw.wq.data(), kD, kD);
  m.k = ma::weights_f32(lw.wk.data(), kKvDim, kD);
  m.v = ma::weights_f32(lw.wv.data(), kKvDim, kD);
  m.out = ma::weights_f32(lw.wo.data(), kD, kD);
  m.q_bias = lw.bq.data();
  m.k_bias = lw.bk.data();
  m.v_bias = lw.bv.data();
  m.out_bias = lw.bo.data();
  Layer matrices{m};
  Guarded x(29, kD), y1(29, kD), y2(29, kD);
  Uniform u(801);
  x.fill(u);
  ASSERT_EQ(plain.forward(x.cview(), y1.view()), ma::Status::ok);
  ASSERT_EQ(matrices.forward(x.cview(), y2.view()), ma::Status::ok);
  EXPECT_EQ(y1.snapshot(), y2.snapshot());
  EXPECT_EQ(matrices.weight_matrices().q.data, lw.wq.data());
}

// ---- bad input -------------------------------------------------------------------------------------------

// Every bad weight argument, through forward, append and attend: its status, y untouched, cache unchanged.
TEST(LayersFormats, BadWeightsAreRejectedAndNothingChanges) {
  const Formats f{Q8, F16, F32, Q8, 16, 0, 0, kD};
  LayerData w(kD, kKvDim, f, 900);
  // Aligned storage for misaligned and overlapping cases.
  std::vector<float> spare(4096);
  struct Case {
    const char* what;
    ma::Status status;
    ma::LayerWeightMatrices m;
  };
  const ma::LayerWeightMatrices good = w.matrices();
  std::vector<Case> cases;
  auto add = [&](const char* what, ma::Status s, auto edit) {
    ma::LayerWeightMatrices m = good;
    edit(m);
    cases.push_back({what, s, m});
  };
  using S = ma::Status;
  add("q data null", S::null_pointer, [](auto& m) { m.q.data = nullptr; });
  add("k data null", S::null_pointer, [](auto& m) { m.k.data = nullptr; });
  add("v data null", S::null_pointer, [](auto& m) { m.v.data = nullptr; });
  add("q8 scales null", S::null_pointer, [](auto& m) { m.q.scales = nullptr; });
  add("out q8 scales null", S::null_pointer, [](auto& m) { m.out.scales = nullptr; });
  add("out_bias without out", S::null_pointer, [](auto& m) { m.out.data = nullptr; });
  add("null before misaligned", S::null_pointer, [&](auto& m) {
    m.q.data = nullptr;
    m.v.data = reinterpret_cast<const char*>(w.v.f32.data()) + 1;
  });
  add("f32 data misaligned", S::misaligned,
      [&](auto& m) { m.v.data = reinterpret_cast<const char*>(w.v.f32.data()) + 2; });
  add("f16 data odd", S::misaligned, [&](auto& m) { m.k.data = reinterpret_cast<const char*>(w.k.f16.data()) + 1; });
  add("q8 scales misaligned", S::misaligned, [&](auto& m) {
    m.q.scales = reinterpret_cast<const float*>(reinterpret_cast<const char*>(w.q.scales.data()) + 1);
  });
  add("bias misaligned", S::misaligned,
      [&](auto& m) { m.k_bias = reinterpret_cast<const float*>(reinterpret_cast<const char*>(w.bk.data()) + 2); });
  add("out bias misaligned", S::misaligned,
      [&](auto& m) { m.out_bias = reinterpret_cast<const float*>(reinterpret_cast<const char*>(w.bo.data()) + 1); });
  add("misaligned before invalid shape", S::misaligned, [&](auto& m) {
    m.q.rows = 7;
    m.k.data = reinterpret_cast<const char*>(w.k.f16.data()) + 1;
  });
  add("format outside the enum", S::invalid_shape, [](auto& m) { m.v.format = static_cast<ma::Format>(3); });
  add("format 255", S::invalid_shape, [](auto& m) { m.out.format = static_cast<ma::Format>(255); });
  add("q rows", S::invalid_shape, [](auto& m) { m.q.rows = kD - 1; });
  add("q cols", S::invalid_shape, [](auto& m) { m.q.cols = kD + 1; });
  add("k rows (Heads·HeadDim instead of KvHeads·HeadDim)", S::invalid_shape, [](auto& m) { m.k.rows = kD; });
  add("v cols", S::invalid_shape, [](auto& m) { m.v.cols = kKvDim; });
  add("out rows", S::invalid_shape, [](auto& m) { m.out.rows = kKvDim; });
  add("q8 group 0", S::invalid_shape, [](auto& m) { m.q.group = 0; });
  add("q8 group not dividing", S::invalid_shape, [](auto& m) { m.out.group = 50; });
  add("zero rows and cols", S::invalid_shape, [](auto& m) {
    m.q.rows = 0;
    m.q.cols = 0;
  });
  for (const Case& c : cases) {
    Layer layer{c.m};
    Guarded x(3, kD), y(3, kD);
    fill_on_grid(x, 901);
    for (int op = 0; op < 3; ++op) {
      SCOPED_TRACE(::testing::Message() << c.what << " op " << op);
      const auto before = y.snapshot();
      ma::Status s = op == 0   ? layer.forward(x.cview(), y.view())
                     : op == 1 ? layer.append(x.cview(), y.view())
                               : layer.attend(x.cview(), y.view());
      EXPECT_EQ(s, c.status);  // attend's empty cache (invalid_shape) ranks after every weight check
      EXPECT_EQ(y.snapshot(), before);
      EXPECT_EQ(layer.cached(), 0u);
      EXPECT_EQ(layer.position(), 0u);
    }
  }
}

TEST(LayersFormats, OverlapsWithWeightBytesAreAliasing) {
  // Weights placed inside one float buffer, y pointed at each of their bytes' floats in turn.
  std::vector<float> buf(8192, 0.0f);
  const Formats f{Q8, F16, F32, Q8, 16, 0, 0, kD};
  const LayerData w(kD, kKvDim, f, 950);
  float* p = buf.data();
  // q8 q data (2304 bytes = 576 floats), its scales (144), f16 k (768 halves = 384 floats), f32 v (768), biases,
  // q8 out (576 floats) and its scales (48).
  auto place = [&](const void* src, std::size_t bytes) {
    float* at = p;
    std::memcpy(at, src, bytes);
    p += (bytes + 3) / 4;
    return at;
  };
  ma::LayerWeightMatrices m{};
  const float* qd = place(w.q.q8.data() + 1, kD * kD);
  const float* qs = place(w.q.scales.data(), w.q.scales.size() * 4);
  const float* kd = place(w.k.f16.data(), kKvDim * kD * 2);
  const float* vd = place(w.v.f32.data(), kKvDim * kD * 4);
  const float* bq = place(w.bq.data(), kD * 4);
  const float* bk = place(w.bk.data(), kKvDim * 4);
  const float* bv = place(w.bv.data(), kKvDim * 4);
  const float* od = place(w.out.q8.data(), kD * kD);
  const float* os = place(w.out.scales.data(), w.out.scales.size() * 4);
  const float* bo = place(w.bo.data(), kD * 4);
  m.q = ma::weights_q8(reinterpret_cast<const std::int8_t*>(qd), qs, kD, kD, 16);
  m.k = ma::weights_f16(reinterpret_cast<const std::uint16_t*>(kd), kKvDim, kD);
  m.v = ma::weights_f32(vd, kKvDim, kD);
  m.out = ma::weights_q8(reinterpret_cast<const std::int8_t*>(od), os, kD, kD, kD);
  m.q_bias = bq;
  m.k_bias = bk;
  m.v_bias = bv;
  m.out_bias = bo;
  Layer layer{m};
  Guarded x(2, kD), good(2, kD);
  fill_on_grid(x, 951);
  ASSERT_EQ(layer.forward(x.cview(), good.view()), ma::Status::ok);
  const std::size_t used = static_cast<std::size_t>(p - buf.data());
  const auto before = std::vector<float>(buf.begin(), buf.end());
  for (std::size_t at = 0; at < used; at += 7) {
    // A one-row y of 2 floats ending at float `at` (so it starts before some arrays and inside others).
    const std::size_t start = at >= 1 ? at - 1 : 0;
    Guarded x1(1, kD);
    fill_on_grid(x1, 952);
    ma::MatrixView<float> y{buf.data() + start, 1, kD, kD};
    // Cols must be kD: y spans kD floats from start; it overlaps whatever lies in [start, start + kD).
    EXPECT_EQ(layer.forward(x1.cview(), y), ma::Status::aliasing) << "y at float " << start;
  }
  EXPECT_EQ(std::memcmp(before.data(), buf.data(), buf.size() * sizeof(float)), 0) << "an aliasing call wrote";
  // Right after the last array: no overlap.
  ma::MatrixView<float> after{buf.data() + used, 1, kD, kD};
  Guarded x1(1, kD);
  fill_on_grid(x1, 953);
  EXPECT_EQ(layer.forward(x1.cview(), after), ma::Status::ok);
}

}  // namespace
