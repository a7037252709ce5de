// Row norms and activations (blocks.hpp) against double-precision references written here: PyTorch's formulas
// (nn.LayerNorm with biased variance, LlamaRMSNorm, F.gelu both forms, F.silu, relu) evaluated in double, with
// the non-finite behaviour PyTorch's own float formulas give. Sweeps of row lengths across vector widths, odd
// strides, in place and out of place, canaries around every output, and values up to float's limits.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "blocks_math.hpp"
#include "microattn/blocks.hpp"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

constexpr double u = unit_roundoff;
constexpr double min_sub = 1.4012984643248171e-45;  // 2⁻¹⁴⁹
const float nan = std::numeric_limits<float>::quiet_NaN();

std::vector<std::size_t> row_lengths() {
  std::vector<std::size_t> n;
  for (std::size_t i = 1; i <= 70; ++i) n.push_back(i);
  for (std::size_t i : {255, 256, 257}) n.push_back(i);
  return n;
}

// ---- references ---------------------------------------------------------------------------------------------
struct RowStats {
  double mean, sigma_eps;  // sigma_eps = sqrt(var + eps)
};
RowStats layer_norm_stats(const float* x, std::size_t n, double eps) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += x[i];
  const double mean = s / static_cast<double>(n);
  double v = 0;
  for (std::size_t i = 0; i < n; ++i) v += (x[i] - mean) * (x[i] - mean);
  return {mean, std::sqrt(v / static_cast<double>(n) + eps)};
}

// Values a row is filled with: a distribution, scaled.
enum class Fill { uniform, offset, huge, tiny, mixed };
void fill_row(float* x, std::size_t n, Fill f, Uniform& g) {
  for (std::size_t i = 0; i < n; ++i) {
    const float v = g();
    switch (f) {
      case Fill::uniform: x[i] = 3.0f * v; break;
      case Fill::offset: x[i] = 1000.0f + v; break;     // mean large against the spread (cancellation)
      case Fill::huge: x[i] = 3e37f * v; break;         // x² and Σx overflow float
      case Fill::tiny: x[i] = 1e-30f * v; break;        // x² underflows float
      case Fill::mixed: x[i] = (i % 7 == 3) ? 1e25f * v : v; break;  // x² overflows for some
    }
  }
}
const char* fill_name(Fill f) {
  switch (f) {
    case Fill::uniform: return "uniform";
    case Fill::offset: return "offset";
    case Fill::huge: return "huge";
    case Fill::tiny: return "tiny";
    default: return "mixed";
  }
}

double norm_worst = 0;  // the largest error seen, as a fraction of its bound

// ---- layer norm ---------------------------------------------------------------------------------------------
struct NormCase {
  bool weight, bias, in_place;
  float eps;
};

::testing::AssertionResult check_layer_norm(std::size_t n, std::size_t rows, Fill fill, const NormCase& c,
                                            std::uint32_t seed) {
  Uniform g(seed);
  Guarded x(rows, n, n + 3);  // odd stride
  for (std::size_t r = 0; r < rows; ++r) fill_row(&x.at(r, 0), n, fill, g);
  std::vector<float> w(n), b(n);
  for (std::size_t i = 0; i < n; ++i) {
    w[i] = 0.5f + g();
    b[i] = 0.25f * g();
  }
  Guarded y(rows, n, n + 5);
  const Guarded x0 = x;
  Guarded& out = c.in_place ? x : y;
  const ma::Status s = ma::layer_norm_rows(x.cview(), c.weight ? w.data() : nullptr, c.bias ? b.data() : nullptr,
                                           c.eps, out.view());
  if (s != ma::Status::ok) return ::testing::AssertionFailure() << "status " << ma::to_string(s);
  if (!out.canaries_intact()) return out.canaries_intact();
  if (!c.in_place && x.snapshot() != x0.snapshot()) return ::testing::AssertionFailure() << "input written";
  for (std::size_t r = 0; r < rows; ++r) {
    const RowStats st = layer_norm_stats(x0.data() + r * x0.stride(), n, c.eps);
    for (std::size_t i = 0; i < n; ++i) {
      const double wi = c.weight ? w[i] : 1.0, bi = c.bias ? b[i] : 0.0;
      const double z = (x0.at(r, i) - st.mean) / st.sigma_eps;
      const double want = z * wi + bi;
      const double tol = std::fabs(wi) * (ma::layer_norm_error_factor(n) * u * (std::fabs(z) + 1.0) +
                                          4 * u * std::fabs(st.mean) / st.sigma_eps) +
                         2 * u * std::fabs(bi) + min_sub;
      const double got = out.at(r, i);
      if (!(std::fabs(got - want) <= tol))
        return ::testing::AssertionFailure() << "n " << n << " " << fill_name(fill) << " row " << r << " col " << i
                                             << ": got " << got << " want " << want << " tol " << tol;
      norm_worst = std::max(norm_worst, std::fabs(got - want) / tol);
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(Blocks, LayerNormSweep) {
  const NormCase cases[] = {{true, true, false, 1e-5f}, {false, false, true, 1e-5f}, {true, false, true, 0.0f},
                            {false, true, false, 0.1f}};
  std::uint32_t seed = 1;
  for (std::size_t n : row_lengths())
    for (Fill f : {Fill::uniform, Fill::offset, Fill::huge, Fill::tiny, Fill::mixed})
      for (const NormCase& c : cases) {
        if (n == 1 && c.eps == 0.0f) continue;  // a one-element row is constant: NaN with eps 0 (tested below)
        EXPECT_TRUE(check_layer_norm(n, 3, f, c, seed++)) << "eps " << c.eps << " in place " << c.in_place;
      }
  std::printf("layer_norm_rows: worst error %.3f of the bound\n", norm_worst);
  norm_worst = 0;
}

// Float sums the plain algorithm would overflow (Σx, Σd²) or lose to underflow: finite, accurate outputs.
TEST(Blocks, LayerNormExtremeRowsStayFinite) {
  for (float big : {1e19f, 1e30f, FLT_MAX, -FLT_MAX}) {
    float x[4] = {big, -big / 2, big / 4, 0.0f};
    float y[4];
    ASSERT_EQ(ma::layer_norm_rows(ma::make_view<const float>(x, 1, 4), nullptr, nullptr, 1e-5f,
                                  ma::make_view(y, 1, 4)),
              ma::Status::ok);
    const RowStats st = layer_norm_stats(x, 4, 1e-5);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], (x[i] - st.mean) / st.sigma_eps, 16 * u) << big << " " << i;
  }
  // Subnormal inputs with eps 0: the statistics rescaled, the result as for normal numbers.
  float x[3] = {1e-44f, -3e-45f, 0.0f};
  float y[3];
  ASSERT_EQ(ma::layer_norm_rows(ma::make_view<const float>(x, 1, 3), nullptr, nullptr, 0.0f, ma::make_view(y, 1, 3)),
            ma::Status::ok);
  const RowStats st = layer_norm_stats(x, 3, 0.0);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(y[i], (x[i] - st.mean) / st.sigma_eps, 16 * u) << i;
}

// A constant row's deviations are 0 after the mean's correction, whatever the rounding of Σx: the output is the
// bias exactly, also with an eps far below the float variance's rounding (no NaN from a negative variance).
TEST(Blocks, LayerNormConstantRowsGiveTheBias) {
  Uniform g(77, 0.0f, 1.0f);
  std::size_t bad = 0;
  for (std::size_t n = 1; n <= 70; ++n)
    for (int k = 0; k < 40; ++k) {
      const float v = std::ldexp(1.0f + g(), k - 20) * (k % 2 ? -1.0f : 1.0f);
      std::vector<float> x(n, v), b(n), y(n);
      for (float& e : b) e = g();
      ASSERT_EQ(ma::layer_norm_rows(ma::make_view<const float>(x.data(), 1, n), nullptr, b.data(), 1e-30f,
                                    ma::make_view(y.data(), 1, n)),
                ma::Status::ok);
      for (std::size_t i = 0; i < n; ++i)
        if (y[i] != b[i] && ++bad <= 5) ADD_FAILURE() << "n " << n << " v " << v << ": " << y[i] << " != " << b[i];
    }
  EXPECT_EQ(bad, 0u);
}

// PyTorch's float LayerNorm on rows with NaN or ±inf: the row's mean or variance is NaN, so is every output of
// the row (other rows untouched). A constant row with eps 0: 0/0, NaN; with eps > 0: the bias.
TEST(Blocks, LayerNormNonFinite) {
  const float rows[][4] = {{1, nan, 2, 3}, {1, inf, 2, 3}, {-inf, 1, 2, 3}, {inf, -inf, 0, 0}, {1, 2, 3, 4}};
  float x[5 * 4], y[5 * 4];
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < 4; ++i) x[r * 4 + i] = rows[r][i];
  ASSERT_EQ(ma::layer_norm_rows(ma::make_view<const float>(x, 5, 4), nullptr, nullptr, 1e-5f, ma::make_view(y, 5, 4)),
            ma::Status::ok);
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(y[r * 4 + i])) << r << " " << i;
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(y[16 + i]));
  float c[3] = {2.5f, 2.5f, 2.5f}, out[3];
  const float bias[3] = {0.5f, -1.0f, 0.0f};
  ASSERT_EQ(ma::layer_norm_rows(ma::make_view<const float>(c, 1, 3), nullptr, bias, 0.0f, ma::make_view(out, 1, 3)),
            ma::Status::ok);
  for (float v : out) EXPECT_TRUE(std::isnan(v));
  ASSERT_EQ(ma::layer_norm_rows(ma::make_view<const float>(c, 1, 3), nullptr, bias, 1e-5f, ma::make_view(out, 1, 3)),
            ma::Status::ok);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i], bias[i]);
}

// ---- RMS norm -----------------------------------------------------------------------------------------------
::testing::AssertionResult check_rms_norm(std::size_t n, std::size_t rows, Fill fill, const NormCase& c,
                                          std::uint32_t seed) {
  Uniform g(seed);
  Guarded x(rows, n, n + 3);
  for (std::size_t r = 0; r < rows; ++r) fill_row(&x.at(r, 0), n, fill, g);
  std::vector<float> w(n);
  for (std::size_t i = 0; i < n; ++i) w[i] = 2.0f * g();
  Guarded y(rows, n, n + 1);
  const Guarded x0 = x;
  Guarded& out = c.in_place ? x : y;
  const ma::Status s = ma::rms_norm_rows(x.cview(), c.weight ? w.data() : nullptr, c.eps, out.view());
  if (s != ma::Status::ok) return ::testing::AssertionFailure() << "status " << ma::to_string(s);
  if (!out.canaries_intact()) return out.canaries_intact();
  if (!c.in_place && x.snapshot() != x0.snapshot()) return ::testing::AssertionFailure() << "input written";
  for (std::size_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::size_t i = 0; i < n; ++i) ss += static_cast<double>(x0.at(r, i)) * x0.at(r, i);
    const double rs = 1.0 / std::sqrt(ss / static_cast<double>(n) + c.eps);
    for (std::size_t i = 0; i < n; ++i) {
      const double want = x0.at(r, i) * rs * (c.weight ? w[i] : 1.0);
      const double tol = ma::rms_norm_error_factor(n) * u * std::fabs(want) + min_sub;
      const double got = out.at(r, i);
      if (!(std::fabs(got - want) <= tol))
        return ::testing::AssertionFailure() << "n " << n << " " << fill_name(fill) << " row " << r << " col " << i
                                             << ": got " << got << " want " << want << " tol " << tol;
      norm_worst = std::max(norm_worst, std::fabs(got - want) / tol);
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(Blocks, RmsNormSweep) {
  const NormCase cases[] = {{true, false, false, 1e-5f}, {false, false, true, 1e-6f}, {true, false, true, 0.0f}};
  std::uint32_t seed = 100;
  for (std::size_t n : row_lengths())
    for (Fill f : {Fill::uniform, Fill::offset, Fill::huge, Fill::tiny, Fill::mixed})
      for (const NormCase& c : cases) EXPECT_TRUE(check_rms_norm(n, 3, f, c, seed++)) << "eps " << c.eps;
  std::printf("rms_norm_rows: worst error %.3f of the bound\n", norm_worst);
  norm_worst = 0;
}

// The plain float formula would give 0 (Σx² = inf) for huge rows and inf or NaN for subnormal ones with eps 0.
TEST(Blocks, RmsNormExtremeRowsStayFinite) {
  const float rows[][3] = {{FLT_MAX, -FLT_MAX, 1.0f}, {1e20f, 3e19f, -2e20f}, {1e-44f, -3e-45f, 0.0f}};
  for (const auto& x : rows) {
    float y[3];
    ASSERT_EQ(ma::rms_norm_rows(ma::make_view<const float>(x, 1, 3), nullptr, 0.0f, ma::make_view(y, 1, 3)),
              ma::Status::ok);
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(y[i], x[i] / std::sqrt(ss / 3), 8 * u) << x[0] << " " << i;
  }
}

// PyTorch's formula x·rsqrt(mean(x²) + eps): NaN anywhere makes the row NaN; ±inf gives mean(x²) = inf and
// rsqrt 0, so ±inf entries become NaN (inf·0) and finite ones 0. An all-zero row with eps 0: 0·inf, NaN.
TEST(Blocks, RmsNormNonFinite) {
  const float x[4 * 3] = {1, nan, 2, 1, inf, -2, -inf, 3, 0, 0, 0, 0};
  float y[4 * 3];
  ASSERT_EQ(ma::rms_norm_rows(ma::make_view<const float>(x, 4, 3), nullptr, 1e-5f, ma::make_view(y, 4, 3)),
            ma::Status::ok);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[i])) << i;
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_TRUE(std::isnan(y[4]));
  EXPECT_EQ(y[5], 0.0f);
  EXPECT_TRUE(std::isnan(y[6]));
  EXPECT_EQ(y[7], 0.0f);
  EXPECT_EQ(y[8], 0.0f);
  for (int i = 9; i < 12; ++i) EXPECT_EQ(y[i], 0.0f);  // zeros with eps > 0: 0
  ASSERT_EQ(ma::rms_norm_rows(ma::make_view<const float>(x + 9, 1, 3), nullptr, 0.0f, ma::make_view(y, 1, 3)),
            ma::Status::ok);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[i]));
}

// ---- rows at float's limits ---------------------------------------------------------------------------------
// Rows of one magnitude a, every power of two 2⁻¹⁴⁹ … 2¹²⁷ and FLT_MAX of both signs, in shapes whose statistics sit
// at float's edges: constant (variance 0), one element one or three ulps off (a variance of about ulp²), and
// alternating around 0 (±a) or around a (a, a·(1 + 2⁻ᵏ)). At the extremes their sums overflow or underflow in
// float, where the norms rescale the row: that rescaling must keep eps from vanishing against a variance of 0.
enum class Shape { constant, ulp_up, ulp_down, ulps_up3, plus_minus, ratio_1, ratio_12, ratio_23 };
const Shape all_shapes[] = {Shape::constant,   Shape::ulp_up,  Shape::ulp_down, Shape::ulps_up3,
                            Shape::plus_minus, Shape::ratio_1, Shape::ratio_12, Shape::ratio_23};
const char* shape_name(Shape s) {
  switch (s) {
    case Shape::constant: return "constant";
    case Shape::ulp_up: return "one ulp up";
    case Shape::ulp_down: return "one ulp down";
    case Shape::ulps_up3: return "three ulps up";
    case Shape::plus_minus: return "+a, -a";
    case Shape::ratio_1: return "a, a(1 + 2^-1)";
    case Shape::ratio_12: return "a, a(1 + 2^-12)";
    default: return "a, a(1 + 2^-23)";
  }
}

// k ulps away from 0 (up) or towards it; FLT_MAX, which has no float above it, goes towards 0 either way.
float ulps_off(float a, int k, bool up) {
  const float to = up && std::fabs(a) < FLT_MAX ? std::copysign(inf, a) : 0.0f;
  for (int i = 0; i < k; ++i) a = std::nextafter(a, to);
  return a;
}

void fill_limit_row(float* x, std::size_t n, Shape s, float a) {
  for (std::size_t i = 0; i < n; ++i) x[i] = a;
  switch (s) {
    case Shape::constant: break;
    case Shape::ulp_up: x[n / 2] = ulps_off(a, 1, true); break;
    case Shape::ulp_down: x[n / 2] = ulps_off(a, 1, false); break;
    case Shape::ulps_up3: x[n / 2] = ulps_off(a, 3, true); break;
    case Shape::plus_minus:
      for (std::size_t i = 1; i < n; i += 2) x[i] = -a;
      break;
    default: {
      const int k = s == Shape::ratio_1 ? 1 : s == Shape::ratio_12 ? 12 : 23;
      const float up = a * (1.0f + std::ldexp(1.0f, -k));  // exact for normal powers of two; rounded below
      const float b = std::isfinite(up) ? up : a * (1.0f - std::ldexp(1.0f, -k));
      for (std::size_t i = 1; i < n; i += 2) x[i] = b;
    }
  }
}

std::vector<float> limit_magnitudes() {
  std::vector<float> v;
  for (int e = -149; e <= 127; ++e) v.push_back(std::ldexp(1.0f, e));
  v.push_back(FLT_MAX);
  const std::size_t positive = v.size();
  for (std::size_t i = 0; i < positive; ++i) v.push_back(-v[i]);
  return v;
}

std::vector<std::size_t> limit_row_lengths() {
#if MICROATTN_TEST_EMULATED
  const std::size_t long_row = 257;
#else
  const std::size_t long_row = 1000;
#endif
  return {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, long_row};
}

struct LimitCase {
  bool rms, weight, bias, in_place;
};
const char* limit_case_name(const LimitCase& c) {
  if (c.rms) return c.weight ? "rms_norm weight" : "rms_norm no weight, in place";
  return c.weight ? "layer_norm weight bias" : "layer_norm no weight no bias, in place";
}

// The bounds' absolute term: 2⁻¹⁴⁹, or where the result is subnormal the headers' (|w| + 1)·2⁻¹⁴⁹ (a rounding to
// 2⁻¹⁴⁹ before the weight and one after).
double subnormal_slack(double want, double w) {
  return std::fabs(want) < FLT_MIN ? (std::fabs(w) + 1.0) * min_sub : min_sub;
}

// Runs one norm over every magnitude's row of one shape and length (32 rows a call), counting the outputs that
// are not finite, a constant row's layer norm that is not exactly the bias (0 before it: PyTorch's 0·rsqrt(eps)),
// and the others outside the norm's bound against the double reference (the sweeps' tolerance). eps = 0 skips the
// rows the norm defines as 0/0 (NaN, as PyTorch): a constant row for layer_norm, a row of zeros for rms_norm.
void check_limit_rows(std::size_t n, Shape shape, const LimitCase& c, float eps, std::size_t& bad,
                      std::size_t& checked) {
  const std::vector<float> mags = limit_magnitudes();
  Uniform g(static_cast<std::uint32_t>(n * 131 + static_cast<int>(shape)));
  std::vector<float> w(n), b(n);
  for (std::size_t i = 0; i < n; ++i) {
    w[i] = c.rms ? 2.0f * g() : 0.5f + g();
    b[i] = 0.25f * g();
  }
  const float* wp = c.weight ? w.data() : nullptr;
  const float* bp = c.bias ? b.data() : nullptr;
  auto fail = [&](float a, std::size_t col, const char* what, double got, double want) {
    if (++bad <= 8)
      ADD_FAILURE() << limit_case_name(c) << ", n " << n << ", " << shape_name(shape) << ", a " << a << ", eps " << eps
                    << ", col " << col << ": " << what << ": got " << got << " want " << want;
  };
  for (std::size_t first = 0; first < mags.size(); first += 32) {
    const std::size_t rows = std::min<std::size_t>(32, mags.size() - first);
    Guarded x(rows, n, n + 3), y(rows, n, n + 5);
    for (std::size_t r = 0; r < rows; ++r) fill_limit_row(&x.at(r, 0), n, shape, mags[first + r]);
    const Guarded x0 = x;
    Guarded& out = c.in_place ? x : y;
    const ma::Status s = c.rms ? ma::rms_norm_rows(x.cview(), wp, eps, out.view())
                               : ma::layer_norm_rows(x.cview(), wp, bp, eps, out.view());
    if (s != ma::Status::ok) {
      fail(mags[first], 0, "status not ok", 0, 0);
      continue;
    }
    if (!out.canaries_intact()) fail(mags[first], 0, "written outside y", 0, 0);
    if (!c.in_place && x.snapshot() != x0.snapshot()) fail(mags[first], 0, "input written", 0, 0);
    for (std::size_t r = 0; r < rows; ++r) {
      const float a = mags[first + r];
      const float* xr = x0.data() + r * x0.stride();
      bool constant = true, zero = true;
      for (std::size_t i = 0; i < n; ++i) {
        constant = constant && xr[i] == xr[0];
        zero = zero && xr[i] == 0.0f;
      }
      if (eps == 0.0f && (c.rms ? zero : constant)) continue;
      ++checked;
      if (c.rms) {
        double ss = 0;
        for (std::size_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
        const double rs = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
        for (std::size_t i = 0; i < n; ++i) {
          const double wi = c.weight ? w[i] : 1.0, want = xr[i] * rs * wi, got = out.at(r, i);
          const double tol = ma::rms_norm_error_factor(n) * u * std::fabs(want) + subnormal_slack(want, wi);
          if (!std::isfinite(got) || !(std::fabs(got - want) <= tol))
            fail(a, i, std::isfinite(got) ? "outside the bound" : "not finite", got, want);
        }
        continue;
      }
      const RowStats st = layer_norm_stats(xr, n, eps);
      for (std::size_t i = 0; i < n; ++i) {
        const double wi = c.weight ? w[i] : 1.0, bi = c.bias ? b[i] : 0.0, got = out.at(r, i);
        const double z = (xr[i] - st.mean) / st.sigma_eps, want = z * wi + bi;
        const double tol = std::fabs(wi) * (ma::layer_norm_error_factor(n) * u * (std::fabs(z) + 1.0) +
                                            4 * u * std::fabs(st.mean) / st.sigma_eps) +
                           2 * u * std::fabs(bi) + subnormal_slack(want, wi);
        const char* wrong = !std::isfinite(got)                            ? "not finite"
                            : constant && got != bi                        ? "constant row, not the bias"
                            : !constant && !(std::fabs(got - want) <= tol) ? "outside the bound"
                                                                           : nullptr;
        if (wrong != nullptr) fail(a, i, wrong, got, want);
      }
    }
  }
}

// A positive eps and none; natively also a second positive one (under emulation, where the double reference is
// software on the Cortex-M4, the classes only).
std::vector<float> limit_eps() {
#if MICROATTN_TEST_EMULATED
  return {1e-5f, 0.0f};
#else
  return {1e-5f, 1e-6f, 0.0f};
#endif
}

void check_norms_at_limits(bool rms) {
  const LimitCase cases[] = {{rms, true, !rms, false}, {rms, false, false, true}};
  std::size_t bad = 0, checked = 0;
  for (std::size_t n : limit_row_lengths())
    for (Shape shape : all_shapes)
      for (const LimitCase& c : cases)
        for (float eps : limit_eps()) check_limit_rows(n, shape, c, eps, bad, checked);
  EXPECT_EQ(bad, 0u) << "outputs wrong, of " << checked << " rows";
  std::printf("%s: %zu rows at float's limits\n", rms ? "rms_norm_rows" : "layer_norm_rows", checked);
}

// {1e30, 1e30, 1e30} with eps 1e-5: the bias, as PyTorch (rescaled, eps once underflowed to 0 and gave −nan).
TEST(Blocks, LayerNormRowsAtFloatLimits) {
  const float x[3] = {1e30f, 1e30f, 1e30f}, bias[3] = {0.5f, -1.0f, 0.0f};
  float y[3];
  ASSERT_EQ(ma::layer_norm_rows(ma::make_view(x, 1, 3), nullptr, bias, 1e-5f, ma::make_view(y, 1, 3)), ma::Status::ok);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y[i], bias[i]) << i;
  check_norms_at_limits(false);
}
TEST(Blocks, RmsNormRowsAtFloatLimits) { check_norms_at_limits(true); }

// ---- activations --------------------------------------------------------------------------------------------
double ref_activation(ma::Activation a, double x) {
  switch (a) {
    case ma::Activation::relu: return std::isnan(x) ? x : (x < 0 ? 0.0 : x);
    case ma::Activation::gelu:
      if (x == -INFINITY) return NAN;  // PyTorch: −inf·(1 + erf(−inf))/2 = −inf·0
      return x * 0.5 * std::erfc(-x / std::sqrt(2.0));
    case ma::Activation::gelu_tanh: {
      if (x == -INFINITY) return NAN;
      const double v = std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
      return x / (1.0 + std::exp(-2.0 * v));  // = x/2·(1 + tanh v), without 1 + tanh's cancellation in double
    }
    default:
      if (x == -INFINITY) return NAN;
      return x / (1.0 + std::exp(-x));
  }
}

// The header's bound for an activation at x, in absolute terms.
double activation_tolerance(ma::Activation a, double x, double want) {
  double rel = 0;
  switch (a) {
    case ma::Activation::relu: rel = 0; break;
    case ma::Activation::gelu: rel = 16 + 1.5 * x * x; break;
    case ma::Activation::gelu_tanh: rel = 12 + 4 * std::fabs(1.5957691216057308 * (x + 0.044715 * x * x * x)); break;
    default: rel = 8; break;
  }
  return rel * u * std::fabs(want) + (std::fabs(want) < FLT_MIN ? (std::fabs(x) + 1) * min_sub : 0.0);
}

bool same_or_within(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol;
}

const ma::Activation all_activations[] = {ma::Activation::relu, ma::Activation::gelu, ma::Activation::gelu_tanh,
                                          ma::Activation::silu};

// Values every activation is checked at: a dense grid over [−20, 20] (every saturation region), powers of two over
// the whole float range of both signs (subnormal to FLT_MAX), and the specials.
std::vector<float> activation_inputs() {
  std::vector<float> v;
#if MICROATTN_TEST_EMULATED
  const int steps = 40000;
#else
  const int steps = 400000;
#endif
  for (int i = 0; i <= steps; ++i) v.push_back(-20.0f + 40.0f * static_cast<float>(i) / steps);
  for (int e = -149; e <= 127; ++e)
    for (float m : {1.0f, 1.37f, 1.99f}) {
      const float p = std::ldexp(m, e);
      if (std::isfinite(p)) {
        v.push_back(p);
        v.push_back(-p);
      }
    }
  for (float s : {0.0f, -0.0f, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, inf, -inf, nan}) v.push_back(s);
  return v;
}

TEST(Blocks, ActivationsAgainstDouble) {
  const std::vector<float> xs = activation_inputs();
  for (ma::Activation a : all_activations) {
    // In rows of 61 with stride 64 (the last row short: each row length differs from the vector widths).
    const std::size_t cols = 61, rows = (xs.size() + cols - 1) / cols;
    Guarded x(rows, cols, 64);
    for (std::size_t i = 0; i < rows * cols; ++i) x.at(i / cols, i % cols) = xs[i % xs.size()];
    ASSERT_EQ(ma::activate_rows(x.view(), a), ma::Status::ok);
    ASSERT_TRUE(x.canaries_intact());
    std::size_t bad = 0;
    double worst = 0;
    for (std::size_t i = 0; i < rows * cols; ++i) {
      const double in = xs[i % xs.size()], got = x.at(i / cols, i % cols), want = ref_activation(a, in);
      const double tol = activation_tolerance(a, in, want);
      if (!same_or_within(got, want, tol)) {
        if (++bad <= 5) ADD_FAILURE() << "activation " << int(a) << " x " << in << ": got " << got << " want " << want;
      } else if (std::isfinite(want) && tol > 0) {
        worst = std::max(worst, std::fabs(got - want) / tol);
      }
    }
    EXPECT_EQ(bad, 0u) << "activation " << int(a);
    std::printf("activation %d: worst error %.3f of the bound\n", int(a), worst);
  }
}

// Saturation: no NaN from exp overflow, results exactly x far on the positive side and (−)0 far on the negative.
TEST(Blocks, ActivationsSaturate) {
  for (ma::Activation a : {ma::Activation::gelu, ma::Activation::gelu_tanh, ma::Activation::silu}) {
    float x[6] = {1e4f, 3e38f, inf, -1e4f, -3e38f, -200.0f};
    ASSERT_EQ(ma::activate_rows(ma::make_view(x, 1, 6), a), ma::Status::ok);
    EXPECT_EQ(x[0], 1e4f);
    EXPECT_EQ(x[1], 3e38f);
    EXPECT_EQ(x[2], inf);
    for (int i = 3; i < 6; ++i) EXPECT_EQ(x[i], 0.0f) << int(a) << " " << i;
  }
}

// The erfc behind gelu on its own, relative to double erfc over its whole range [0, 10.25].
TEST(Blocks, ErfcPolynomial) {
  double worst = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float a = 10.25f * static_cast<float>(i) / 200000;
    const float a2 = a * a;
    const double got = ma::detail::erfc_nonnegative_float(a, a2);
    // The reference of the float a and float a²: erfc(a)·e^(a² − a2) takes a2's rounding out.
    const double want = std::erfc(static_cast<double>(a)) *
                        std::exp(static_cast<double>(a) * a - static_cast<double>(a2));
    if (want < FLT_MIN) {  // subnormal: rounded at 2⁻¹⁴⁹ (twice: e^x, then ·t)
      EXPECT_NEAR(got, want, (12 + 1.5 * a2) * u * want + 2 * min_sub) << a;
      continue;
    }
    // fit 1.3 u, float evaluation 3.5 u (no FMA), exp 3 u, t and the product 2 u, the rounding of p − a² (a² u).
    const double err = std::fabs(got - want) / want / u;
    EXPECT_LE(err, 12 + 1.5 * a2) << a;
    worst = std::max(worst, err / (12 + 1.5 * a2));
  }
  std::printf("erfc: worst %.3f of the bound (12 + 1.5·a²) u\n", worst);
}

}  // namespace
