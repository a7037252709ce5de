// The tolerance policy of every numeric check (tests and fuzzers), written once. No GoogleTest here.
#pragma once

#include <cmath>
#include <cstddef>

namespace testing_support {

// A result passes when |got − want| <= rel · scale + abs, computed in double, where want is the
// double-precision reference and scale is |want| unless the check knows the magnitude the float error really
// scales with (Σ|a·b| for a dot product, the row's largest term for softmax). rel is in units of float's
// unit roundoff u = 2⁻²⁴ times a factor derived from the operation (k + 2 for a length-k dot product).
struct Tolerance {
  double rel;
  double abs;
};
constexpr double unit_roundoff = 5.9604644775390625e-8;  // 2⁻²⁴

// A float dot product of length k accumulated with FMA: |error| <= γ_k·Σ|a·b|, γ_k ≈ k·u. The factor 2 is
// margin for the final rounding and blocked accumulation; abs covers subnormal underflow.
inline Tolerance dot_tolerance(std::size_t k) { return {2.0 * (static_cast<double>(k) + 2.0) * unit_roundoff, 1e-37}; }

inline bool within(double got, double want, double scale, Tolerance t) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= t.rel * std::fabs(scale) + t.abs;
}

// One softmax row of length n: exp error (a few ULP) + rounding of x − max (relative error |x − max|·u in
// e^(x−max), spread = the largest |x − max| of the row) + the float row sum (at most n additions) + the final
// scaling.
inline Tolerance softmax_tolerance(std::size_t n, double spread) {
  return {(8.0 + spread + static_cast<double>(n)) * unit_roundoff, 1e-37};
}

// Attention: tolerance of one output row, from how the float algorithm rounds (docs/numerical-contract.md "attention"):
//  - each score carries (d_k + 6)·u·score_abs of rounding (dot product, pre-scaling of q, mask add, the
//    subtraction of the running max), which becomes that much relative error in its probability, plus
//    3 u of exp2;
//  - the weighted sum of v and the row sum each accumulate n_kv terms, and every key block rescales once.
// The error is relative to Σ_j p_ij·|v_jc| (the reference's weighted_abs), doubled for margin.
inline Tolerance attention_tolerance(std::size_t d_k, std::size_t n_kv, double score_abs) {
  return {2.0 * ((static_cast<double>(d_k) + 6.0) * score_abs + 3.0) * unit_roundoff +
              (2.0 * static_cast<double>(n_kv) + 24.0) * unit_roundoff,
          1e-30};
}

// Layers: end-to-end tolerance of a layer output, relative to the largest |y| of its row: three float products of
// length d (Q/K/V projections, then the output projection) around the attention (n_kv-term sums), with the
// error of each stage amplified at most by the weights' norm (|w| <= 0.3, so ≈ 0.3·d ≤ 20 here). The
// factors are the stage lengths; the constant 8 covers the weight amplification and the exp.
inline Tolerance layer_tolerance(std::size_t d, std::size_t n_kv) {
  return {8.0 * (3.0 * static_cast<double>(d) + 2.0 * static_cast<double>(n_kv) + 32.0) * unit_roundoff, 1e-6};
}

}  // namespace testing_support
