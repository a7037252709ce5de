// The activations' scalar math (blocks.cpp; the tests reach erfc itself). No libm, no double: Cortex-M pulls in
// nothing. Every function saturates without NaN from exp overflow: e^−|z| is all they evaluate.
#pragma once

#include <cmath>

#include "kernels/scalar_math.hpp"

namespace microattn {
namespace detail {

// erfc(a) for a in [0, erfc_a_max] (beyond, erfc(a)/2 is below the smallest subnormal): t·e^(P(t) − a²) with
// t = 1/(1 + a/2) and P a degree-9 polynomial in u = k1·t + k0 (t's range mapped onto [−1, 1]), minimax in
// absolute error of P, i.e. relative error of erfc (scripts/fit_erfc_poly.py 9: 1.3·2⁻²⁴ with these float
// coefficients, 3.5·2⁻²⁴ evaluated in float without FMA). a2 = a² is passed in (the caller has it exactly
// rounded from its own input).
constexpr float erfc_a_max = 10.25f;
constexpr float erfc_a2_max = 105.0625f;  // erfc_a_max²
MICROATTN_SCALAR_INLINE float erfc_nonnegative_float(float a, float a2) noexcept {
  const float t = 1.0f / fmadd(a, 0.5f, 1.0f);
  const float u = fmadd(t, 2.390244007e+00f, -1.390243888e+00f);
  float p = fmadd(5.655670611e-05f, u, 7.303780876e-05f);
  p = fmadd(p, u, -5.512268981e-04f);
  p = fmadd(p, u, -2.159427531e-04f);
  p = fmadd(p, u, 3.788386472e-03f);
  p = fmadd(p, u, -1.157734660e-03f);
  p = fmadd(p, u, -2.981421538e-02f);
  p = fmadd(p, u, 1.623978838e-02f);
  p = fmadd(p, u, 5.725043416e-01f);
  p = fmadd(p, u, -5.609229207e-01f);
  return t * exp_float(p - a2);
}

// x·Φ(x), Φ the standard normal CDF: Φ = erfc(|x|/√2)/2 for x < 0 (no cancellation: the small tail directly),
// 1 − erfc(|x|/√2)/2 for x >= 0. |x| is clamped where the tail underflows; NaN passes every comparison through.
MICROATTN_SCALAR_INLINE float gelu_float(float x) noexcept {
  float a = std::fabs(x) * 0.70710678118654752f;
  float a2 = 0.5f * (x * x);
  a = a > erfc_a_max ? erfc_a_max : a;
  a2 = a2 > erfc_a2_max ? erfc_a2_max : a2;
  const float half_tail = 0.5f * erfc_nonnegative_float(a, a2);
  return x * (x < 0.0f ? half_tail : 1.0f - half_tail);
}

// x·sigmoid(z) = x/(1 + e^−z), as (z >= 0 ? x : x·e^z)/(1 + e^−|z|): e^−|z| <= 1 never overflows, and the
// negative side computes the small result directly (x·e^z may be subnormal, not 0 too early).
MICROATTN_SCALAR_INLINE float x_sigmoid_float(float x, float z) noexcept {
  const float e = exp_float(-std::fabs(z));
  return (z >= 0.0f ? x : x * e) / (1.0f + e);
}

MICROATTN_SCALAR_INLINE float silu_float(float x) noexcept { return x_sigmoid_float(x, x); }

// x/2·(1 + tanh(v)) = x·sigmoid(2v), 2v = x·(2√(2/π) + 2√(2/π)·0.044715·x²) (x² may overflow: 2v = ±inf, fine).
MICROATTN_SCALAR_INLINE float gelu_tanh_float(float x) noexcept {
  const float two_v = x * fmadd(0.0713548162726f, x * x, 1.59576912160573f);
  return x_sigmoid_float(x, two_v);
}

}  // namespace detail
}  // namespace microattn
