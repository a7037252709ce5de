// The exact path: one row of attention recomputed with power-of-two rescaling, for the rows the fused float
// loop of either path may get wrong (finite extremes, non-finite values).
#pragma once

#include "attention/common.hpp"

namespace microattn {
namespace detail {

namespace {

// ---- the exact path ------------------------------------------------------------------------------------
// The fused loop runs in float with the scores pre-multiplied by scale·log2(e). For finite inputs that can
// overflow where the true result is finite (q·scale·log2 e, the score in log2 units, mask·log2 e, the
// un-normalised Σ p·v) or lose its precision (a subnormal scale·log2 e). Such rows are recomputed here, one
// at a time, in float again but with power-of-two rescaling so that no intermediate overflows or underflows.
// The same routine decides every row that involves a non-finite value, so the rules of
// docs/numerical-contract.md "Non-finite values" have one implementation. Only rows the fused loop flags come
// here: finite inputs never pay.

// floor(log2 |x|) for a normal x, −126 for subnormals and zero (finite x).
inline int exponent_of(float x) noexcept {
  const int e = static_cast<int>((float_bits(x) >> 23) & 0xffu);
  return e == 0 ? -126 : e - 127;
}

// x·2^e for a finite x, saturated at ±FLT_MAX (the result is finite whenever x is); steps of 2^±126.
inline float times_pow2(float x, int e) noexcept {
  e = e > 400 ? 400 : (e < -400 ? -400 : e);
  for (; e > 126; e -= 126) x *= pow2(126);
  for (; e < -126; e += 126) x *= pow2(-126);
  x *= pow2(e);
  return is_finite(x) ? x : std::copysign(float_max, x);
}

// a + b for finite a and b, saturated at ±FLT_MAX.
inline float saturating_add(float a, float b) noexcept {
  const float t = a + b;
  return is_finite(t) ? t : std::copysign(float_max, t);
}

inline int max_exponent(const float* x, std::size_t n) noexcept {
  int e = -126;
  for (std::size_t i = 0; i < n; ++i) {
    const int ei = exponent_of(x[i]);
    e = ei > e ? ei : e;
  }
  return e;
}

// scale·(q·k) in natural units. Finite inputs: q and k are brought to [1, 2) by powers of two (so every product
// is < 4 and the sum cannot overflow), scale is split as mantissa·2^exponent, and the exponents are applied
// last, once: a scale of 2^−149 or a product of 1e44 is no problem. The result saturates at ±FLT_MAX.
// Anything non-finite: plain IEEE arithmetic (NaN stays NaN, ±inf stays infinite).
struct ExactScale {
  float value;     // the scale itself
  float mantissa;  // value = mantissa·2^exponent, |mantissa| in [1, 2); valid when finite
  int exponent;
  bool finite;
};

inline ExactScale split_scale(float scale) noexcept {
  ExactScale s{scale, 1.0f, 0, is_finite(scale) && scale != 0.0f};
  if (s.finite) {
    const bool subnormal = std::fabs(scale) < pow2(-126);
    const float a = std::fabs(scale) * (subnormal ? pow2(23) : 1.0f);  // exact, and normal
    const int e = exponent_of(a);
    s.exponent = subnormal ? e - 23 : e;
    s.mantissa = std::copysign(a * pow2(-e), scale);
  }
  return s;
}

float exact_score(const float* q, bool q_finite, int q_exp, const float* kj, std::size_t d_k,
                  const ExactScale& sc) noexcept {
  if (!q_finite || !sc.finite || !row_finite(kj, d_k)) {
    float dot = 0.0f;
    for (std::size_t p = 0; p < d_k; ++p) dot += q[p] * kj[p];
    return dot * sc.value;
  }
  const int k_exp = max_exponent(kj, d_k);
  const float fq = pow2(-q_exp), fk = pow2(-k_exp);
  float dot = 0.0f;
  for (std::size_t p = 0; p < d_k; ++p) dot = fmadd(q[p] * fq, kj[p] * fk, dot);
  return times_pow2(dot * sc.mantissa, q_exp + k_exp + sc.exponent);
}

// Row i of attention, exactly as docs/numerical-contract.md "Finite extremes" and "Non-finite values" define it:
//  - key j is hidden when the causal rule or the window hides it (j outside `keys`) or its mask entry is −inf;
//    hidden keys are never read;
//  - t_j = score_j + mask_ij (saturated at ±FLT_MAX when both are finite); any NaN or +inf t_j: the row is NaN;
//  - p_j = e^(t_j − max t), out = Σ p_j·v_j / Σ p_j; no key with t_j > −inf: zeros;
//  - then every column c in which a visible key has a NaN or ±inf v_jc is NaN, whatever p_j (even 0).
// scratch: 2·d_v floats. Key j's rows are k_row(j) and v_row(j) (d_k and d_v floats): the f32 views' rows, or
// rows of an f16 / q8 cache converted one at a time (each pointer is used before the next call of the same one).
template <class KRow, class VRow>
inline __attribute__((always_inline)) void attention_row_exact_rows(const float* q, std::size_t d_k, std::size_t d_v,
                                                                    const KRow& k_row, const VRow& v_row,
                                                                    const float* mask_row, KeyRange keys,
                                                                    const ExactScale& sc, float* out,
                                                                    float* scratch) noexcept {
  float* acc = scratch;            // Σ p_j·v_jc·2^−e_c
  float* col_exp = scratch + d_v;  // e_c, or NaN for a column that must come out NaN
  const bool q_finite = row_finite(q, d_k);
  const int q_exp = q_finite ? max_exponent(q, d_k) : 0;
  auto visible = [&](std::size_t j) { return mask_row == nullptr || mask_row[j] != -INFINITY; };
  auto score = [&](std::size_t j) __attribute__((always_inline)) {  // one frame less on the stack path
    const float s = exact_score(q, q_finite, q_exp, k_row(j), d_k, sc);
    if (mask_row == nullptr) return s;
    return is_finite(s) && is_finite(mask_row[j]) ? saturating_add(s, mask_row[j]) : s + mask_row[j];
  };

  // Pass 1: the max score, and per column of v the largest exponent (accumulating v·2^−e_c cannot overflow).
  for (std::size_t c = 0; c < d_v; ++c) col_exp[c] = -126.0f;
  float m = -INFINITY;
  bool row_nan = false;
  for (std::size_t j = keys.lo; j < keys.hi; ++j) {
    if (!visible(j)) continue;
    const float t = score(j);
    row_nan = row_nan || !(t < INFINITY);  // NaN or +inf
    m = t > m ? t : m;
    const float* vj = v_row(j);
    for (std::size_t c = 0; c < d_v; ++c) {
      const float e = is_finite(vj[c]) ? static_cast<float>(exponent_of(vj[c])) : NAN;
      col_exp[c] = e > col_exp[c] || e != e ? e : col_exp[c];  // NaN sticks
    }
  }
  if (row_nan) {
    for (std::size_t c = 0; c < d_v; ++c) out[c] = NAN;
    return;
  }
  // Pass 2: probabilities and the weighted sum. Columns below 2^60 are not rescaled (nothing can overflow).
  for (std::size_t c = 0; c < d_v; ++c) {
    acc[c] = 0.0f;
    if (col_exp[c] < 60.0f) col_exp[c] = 0.0f;
  }
  float l = 0.0f;
  if (m > -INFINITY)
    for (std::size_t j = keys.lo; j < keys.hi; ++j) {
      if (!visible(j)) continue;
      const float t = score(j);
      if (t == -INFINITY) continue;
      const float p = exp2_nonpositive_call((t - m) * log2e);  // t − m <= 0; below −FLT_MAX it is −inf: p = 0
      l += p;
      const float* vj = v_row(j);
      for (std::size_t c = 0; c < d_v; ++c)
        if (col_exp[c] == col_exp[c]) acc[c] = fmadd(p, vj[c] * pow2(-static_cast<int>(col_exp[c])), acc[c]);
    }
  for (std::size_t c = 0; c < d_v; ++c) {
    if (col_exp[c] != col_exp[c]) {
      out[c] = NAN;
    } else {
      out[c] = l == 0.0f ? 0.0f : times_pow2(acc[c] / l, static_cast<int>(col_exp[c]));
    }
  }
}

inline void attention_row_exact(const float* q, std::size_t d_k, const MatrixView<const float>& k,
                                const MatrixView<const float>& v, const float* mask_row, KeyRange keys,
                                const ExactScale& sc, float* out, float* scratch) noexcept {
  attention_row_exact_rows(
      q, d_k, v.cols, [&](std::size_t j) { return k.data + j * k.stride; },
      [&](std::size_t j) { return v.data + j * v.stride; }, mask_row, keys, sc, out, scratch);
}

}  // namespace

}  // namespace detail
}  // namespace microattn
