// Row norms and activations (blocks.hpp). Scalar code with the library's own exp (scalar_math.hpp) and an erfc of
// its own: no kernel table and no libm beyond sqrtf, so a firmware calling none of this links none of it.
#include "microattn/blocks.hpp"

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "blocks_math.hpp"
#include "blocks_rows.hpp"
#include "check.hpp"
#include "kernels/scalar_math.hpp"

namespace microattn {
namespace detail {
namespace {

// The checks every norm shares; weight and bias may be null. Nothing is written before they pass.
Status norm_check(MatrixView<const float> x, const float* weight, const float* bias, float eps,
                  MatrixView<float> y) noexcept {
  if (x.data == nullptr || y.data == nullptr) return Status::null_pointer;
  if (!all_aligned(x, y, weight, bias)) return Status::misaligned;
  if (!shape_ok(x) || !shape_ok(y) || y.rows != x.rows || y.cols != x.cols) return Status::invalid_shape;
  // eps in [0, FLT_MAX] on its bits: −0 counts as 0; negative, inf and NaN lie outside.
  if ((float_bits(eps) & 0x7fffffffu) > 0x7f7fffffu || (eps < 0.0f)) return Status::invalid_shape;
  const bool in_place = x.data == y.data && x.stride == y.stride;
  if (!in_place && views_overlap(y, x)) return Status::aliasing;
  if (weight != nullptr && views_overlap(y, MatrixView<const float>{weight, 1, x.cols, x.cols})) return Status::aliasing;
  if (bias != nullptr && views_overlap(y, MatrixView<const float>{bias, 1, x.cols, x.cols})) return Status::aliasing;
  return Status::ok;
}

// Whether the float sum of squares s (or of squared deviations) is far from float's limits: below 2⁻⁹⁰ subnormal
// squares may have lost bits, above FLT_MAX (or NaN) it overflowed. Either way the row takes the slow path.
MICROATTN_SCALAR_INLINE bool sum_in_range(float s) noexcept { return s >= 0x1p-90f && s <= FLT_MAX; }

// The largest |x_i| of a row (NaNs skipped; an inf gives inf, whose scale 2⁻¹²⁸ leaves the row non-finite: the
// scaled pass then yields PyTorch's NaNs and zeros just as the plain one).
float row_max_abs(const float* x, std::size_t n) noexcept {
  float m = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    m = a > m ? a : m;
  }
  return m;
}

// 2^k for k in [−149, 127] (normal or subnormal: exact).
float pow2(int k) noexcept {
  return k >= -126 ? bits_float(static_cast<std::uint32_t>(k + 127) << 23)
                   : bits_float(std::uint32_t{1} << static_cast<unsigned>(k + 149));
}

// The power of two a row with max |x| = m > 0 is scaled by: m·2^k in [1, 2) (at most 2^126 for subnormal
// m), so squares and their sums neither overflow nor lose bits. Only down when the sum overflowed (eps·2^(2k) may
// then underflow: scaled_eps), only up when it underflowed (a huge row whose deviations are tiny, or 0, is left as
// it is), and never so far up that eps·2^(2k) passes 2^101.
float row_scale(float m, float eps, bool overflowed) noexcept {
  const int e = static_cast<int>(float_bits(m) >> 23);
  int k = e == 0 ? 126 : 127 - e;
  if (overflowed ? k > 0 : k < 0) return 1.0f;
  if (eps > 0.0f) {
    const int eps_exp = static_cast<int>(float_bits(eps) >> 23) - 127;
    const int limit = (100 - eps_exp) >> 1;  // arithmetic shift: the floor, also when negative
    k = k < limit ? k : limit;
  }
  return pow2(k);
}

// eps·s² for a row rescaled by s. Scaled down it may underflow (or flush) to 0: negligible against the variance of
// a row whose elements differ, which the scaling keeps far above FLT_MIN, but not against a constant row's 0 (its
// sums overflow through the mean's rounding alone), whose deviations 0 must give 0, not 0·inf. So a positive eps
// stays at least FLT_MIN; eps = 0 stays 0 (PyTorch's NaN).
float scaled_eps(float eps, float s) noexcept {
  const float e = eps * s * s;
  return eps > 0.0f && e < FLT_MIN ? FLT_MIN : e;
}

}  // namespace

void layer_norm_row(const float* x, std::size_t n, const float* w, const float* b, float eps, float* y) noexcept {
  const float nf = static_cast<float>(n);
  float s = 1.0f;  // the row's scale (a power of two), 1 on the fast path
  float mean, s1, s2;
  for (int pass = 0;; ++pass) {
    float sum = 0.0f;
    for (std::size_t i = 0; i < n; ++i) sum += x[i] * s;
    mean = sum / nf;
    s1 = 0.0f;
    s2 = 0.0f;
    for (std::size_t i = 0; i < n; ++i) {
      const float d = x[i] * s - mean;
      s1 += d;
      s2 = fmadd(d, d, s2);
    }
    if (pass == 1 || sum_in_range(s2)) break;
    const float m = row_max_abs(x, n);  // all zeros (or NaNs): nothing to scale
    if (m <= 0.0f) break;
    s = row_scale(m, eps, s2 > FLT_MAX);
    if (s == 1.0f) break;
    eps = scaled_eps(eps, s);
  }
  // Corrected two-pass: the mean's own rounding, measured by Σd, is taken out of both the mean and the variance.
  const float c = s1 / nf;
  mean += c;
  float var = (s2 - s1 * c) / nf;
  var = var < 0.0f ? 0.0f : var;
  const float r = 1.0f / std::sqrt(var + eps);
  for (std::size_t i = 0; i < n; ++i) {
    const float z = (x[i] * s - mean) * r;
    y[i] = fmadd(z, w != nullptr ? w[i] : 1.0f, b != nullptr ? b[i] : 0.0f);
  }
}

void rms_norm_row(const float* x, std::size_t n, const float* w, float eps, float* y) noexcept {
  float s = 1.0f;
  float ss = 0.0f;
  for (int pass = 0;; ++pass) {
    ss = 0.0f;
    for (std::size_t i = 0; i < n; ++i) {
      const float v = x[i] * s;
      ss = fmadd(v, v, ss);
    }
    if (pass == 1 || sum_in_range(ss)) break;
    const float m = row_max_abs(x, n);
    if (m <= 0.0f) break;  // all zeros (or NaNs): nothing to scale
    s = row_scale(m, eps, ss > FLT_MAX);
    if (s == 1.0f) break;
    eps = scaled_eps(eps, s);
  }
  const float r = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i] * s * r;
    y[i] = w != nullptr ? v * w[i] : v;
  }
}

namespace {

template <class F>
void each_element(MatrixView<float> x, F f) noexcept {
  for (std::size_t r = 0; r < x.rows; ++r) {
    float* row = x.data + r * x.stride;
    for (std::size_t c = 0; c < x.cols; ++c) row[c] = f(row[c]);
  }
}

}  // namespace
}  // namespace detail

Status layer_norm_rows(MatrixView<const float> x, const float* weight, const float* bias, float eps,
                       MatrixView<float> y) noexcept {
  const Status st = detail::norm_check(x, weight, bias, eps, y);
  if (st != Status::ok) return st;
  for (std::size_t r = 0; r < x.rows; ++r)
    detail::layer_norm_row(x.data + r * x.stride, x.cols, weight, bias, eps, y.data + r * y.stride);
  return Status::ok;
}

Status rms_norm_rows(MatrixView<const float> x, const float* weight, float eps, MatrixView<float> y) noexcept {
  const Status st = detail::norm_check(x, weight, nullptr, eps, y);
  if (st != Status::ok) return st;
  for (std::size_t r = 0; r < x.rows; ++r)
    detail::rms_norm_row(x.data + r * x.stride, x.cols, weight, eps, y.data + r * y.stride);
  return Status::ok;
}

Status activate_rows(MatrixView<float> x, Activation a) noexcept {
  if (x.data == nullptr) return Status::null_pointer;
  if (!detail::aligned(x)) return Status::misaligned;
  if (!detail::shape_ok(x) || static_cast<std::uint8_t>(a) > static_cast<std::uint8_t>(Activation::silu))
    return Status::invalid_shape;
  switch (a) {
    case Activation::relu:
      detail::each_element(x, [](float v) noexcept { return v < 0.0f ? 0.0f : v; });  // NaN compares false: kept
      break;
    case Activation::gelu:
      detail::each_element(x, [](float v) noexcept { return detail::gelu_float(v); });
      break;
    case Activation::gelu_tanh:
      detail::each_element(x, [](float v) noexcept { return detail::gelu_tanh_float(v); });
      break;
    case Activation::silu:
      detail::each_element(x, [](float v) noexcept { return detail::silu_float(v); });
      break;
  }
  return Status::ok;
}

}  // namespace microattn
