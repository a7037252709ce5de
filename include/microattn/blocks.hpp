// microattn — the pieces of a transformer block around attention: row norms (nn.LayerNorm, RMSNorm) and the
// feed-forward activations (ReLU, GELU, GELU tanh, SiLU), with PyTorch's semantics.
//
// Each function works row by row on a MatrixView, in one pass per row (two for the norms' statistics) with no
// workspace and no libm call (exp, erfc are the library's own): a firmware that does not call them links none of
// this code. Accuracy bounds below are in units of u = 2⁻²⁴ and hold on every target (FMA or not); the tests check
// them against double-precision references over row lengths 1…70, 255…257, odd strides and extreme values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "microattn/matrix_view.hpp"
#include "microattn/status.hpp"

namespace microattn {

// y_i = (x_i − μ) / sqrt(σ² + eps) · weight_i + bias_i for every row of x (nn.LayerNorm over the last dimension):
// μ and σ² are the row's mean and biased variance (divided by n = x.cols). weight nullptr: 1; bias nullptr: 0.
// Both are x.cols floats. y may be exactly x (same data and stride: in place); any other overlap of y with x,
// weight or bias is aliasing.
// eps: finite and >= 0 (else invalid_shape). eps = 0 is allowed, as in PyTorch: a constant row then gives NaN.
// Range: every finite input. Where the sums of the statistics would overflow or underflow in float (|x| beyond
// about 1e19 or below 1e-19), the row is rescaled by a power of two first, so no finite row gives inf or NaN.
// Non-finite inputs: a row with a NaN or ±inf gives NaN in every entry of that row (as PyTorch), other rows
// are unaffected.
// Accuracy, with z*_i = (x_i − μ)/sqrt(σ² + eps) the exact value from the float inputs and σ_ε = sqrt(σ² + eps):
//   |y_i − (z*_i·w_i + b_i)| <= |w_i|·(layer_norm_error_factor(n)·u·(|z*_i| + 1) + 4u·|μ|/σ_ε) + 2u·|b_i|
// where layer_norm_error_factor(n) = n + 8 (statistics in float). The mean is refined by the corrected two-pass
// formula (Σ(x − mean) taken out again), so a mean large against the spread costs 4u·|μ|/σ_ε, not n·u·|μ|/σ_ε:
// rows like 1000 ± 1 keep their precision.
// Errors, in this order (y untouched): null_pointer (x.data or y.data); misaligned (any float pointer);
// invalid_shape (a dimension 0, stride < cols, extent overflow, y's shape differs from x's, eps negative or not
// finite); aliasing.
Status layer_norm_rows(MatrixView<const float> x, const float* weight, const float* bias, float eps,
                       MatrixView<float> y) noexcept;

// y_i = x_i / sqrt(mean_j(x_j²) + eps) · weight_i for every row (llama2.c's rmsnorm, HF LlamaRMSNorm).
// weight nullptr: 1. In place (y exactly x) allowed, other overlaps are aliasing; eps as layer_norm_rows.
// Range: every finite input (rescaled by a power of two where the sum of squares would overflow or underflow).
// Non-finite inputs, as PyTorch's formula: a NaN gives NaN in every entry of its row; ±inf (and no NaN) makes
// mean(x²) infinite, so the ±inf entries give NaN and the finite ones 0 (±0).
// Accuracy: |y_i − y*_i| <= rms_norm_error_factor(n)·u·|y*_i|, rms_norm_error_factor(n) = n/2 + 6.
// Errors: as layer_norm_rows.
Status rms_norm_rows(MatrixView<const float> x, const float* weight, float eps, MatrixView<float> y) noexcept;

constexpr double layer_norm_error_factor(std::size_t n) noexcept { return static_cast<double>(n) + 8.0; }
constexpr double rms_norm_error_factor(std::size_t n) noexcept { return static_cast<double>(n) / 2.0 + 6.0; }

// The activations of a feed-forward block. The values are part of the C API (MICROATTN_ACTIVATION_*).
//   relu:      max(x, 0)                                  (NaN stays NaN)
//   gelu:      x·Φ(x) = x/2·(1 + erf(x/√2))               (F.gelu, approximate='none')
//   gelu_tanh: x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³)))   (F.gelu, approximate='tanh'; GPT-2's "gelu_new")
//   silu:      x·sigmoid(x) = x/(1 + e^−x)                 (F.silu, llama's FFN gate)
// Computed without cancellation at large negative x (Φ through the library's own erfc, 1 + tanh(v) as
// 2·sigmoid(2v)) and without an exp overflow: large |x| saturates to x or to (−)0, never NaN. As PyTorch's
// formulas (−∞·0): gelu, gelu_tanh and silu of −inf are NaN; of +inf, +inf; NaN stays NaN everywhere.
enum class Activation : std::uint8_t { relu = 0, gelu = 1, gelu_tanh = 2, silu = 3 };

// Every element of x becomes a(x), in place. Accuracy (exact value y* of the float input, u = 2⁻²⁴):
//   relu exact; silu |y − y*| <= 8u·|y*|; gelu <= (16 + 1.5·x²)·u·|y*|; gelu_tanh <= (12 + 4·|v|)·u·|y*| with
//   v = 1.5958·(x + 0.044715·x³). The terms in x² and v are the rounding of the tail's exponent (x²/2 or v in
//   float), which the result amplifies by that exponent: the functions' own condition number at large negative
//   x, not cancellation (PyTorch's float formulas return 0 there, beyond x ≈ −9); plus, where y* is below FLT_MIN (subnormal),
//   (|x| + 1)·2⁻¹⁴⁹ absolute.
// Errors (x untouched): null_pointer; misaligned; invalid_shape (a dimension 0, stride < cols, extent overflow,
// or a not a listed Activation).
Status activate_rows(MatrixView<float> x, Activation a) noexcept;

}  // namespace microattn
