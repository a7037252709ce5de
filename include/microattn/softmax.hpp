// microattn — row softmax and the vectorized exp behind it.
#pragma once

#include <cstddef>

#include "microattn/matrix_view.hpp"
#include "microattn/status.hpp"

namespace microattn {

// Every row of x becomes softmax(row), in place: y_j = exp(x_j − max) / Σ_i exp(x_i − max).
// Subtracting the row max first means no input overflows (rows like {1e4, 90} are fine).
//   −inf entries give 0; a row that is all −inf gives all zeros (never NaN);
//   a row containing NaN, or +inf, gives NaN in every entry of that row, and only that row.
// Accuracy: each output y_j is within (8 + spread + n)·2⁻²⁴ relative of the exact softmax of the float inputs
// (spread = max_j |x_j − max|, from the rounding of x_j − max; n, the row length, from the float row sum; plus
// the exp's 1.5 ULP) when y_j is a normal float; subnormal outputs (below 2⁻¹²⁶) are within one subnormal
// step, 2⁻¹⁴⁹, as exp_elements (2⁻¹²⁶ on ARMv7 NEON and Helium, which flush them).
// See docs/numerical-contract.md "softmax_rows".
//
// Errors, in this order (x untouched): null_pointer if x.data is null; misaligned if it is not 4-byte
// aligned; invalid_shape if a dimension is 0, stride < cols or the extent overflows.
Status softmax_rows(MatrixView<float> x) noexcept;

// y[i] = e^x[i] for i < n, with the same vectorized exp softmax_rows uses.
// Accuracy: at most exp_max_ulp ULP from the correctly rounded result for every float x whose e^x is a
// normal float (x in [−87.33, 88.72]); tested on sweeps of the whole float range against long double.
// Measured over all 2³² floats: 1.0593 ULP (x = 5.20118141) with FMA, 1.3415 ULP (x = 59.2704582) without.
// Outside that range: e^x > FLT_MAX gives +inf; subnormal results are within one subnormal step, 2⁻¹⁴⁹
// (x below −103.98 gives 0) — except on ARMv7 NEON builds, whose vector unit flushes subnormals to zero by
// architecture; exp(−inf) = 0, exp(+inf) = +inf, exp(NaN) = NaN.
// x and y may be the same array (in place); partially overlapping arrays give aliasing.
// Errors, in this order (y untouched): null_pointer if x or y is null with n > 0; misaligned if x or y is not
// 4-byte aligned; invalid_shape if n floats overflow the address space; aliasing for partial overlap. n == 0
// is ok (no pointer is looked at).
Status exp_elements(const float* x, float* y, std::size_t n) noexcept;

// Bound, in units in the last place, of exp_elements on normal results (the figure the tests check).
constexpr float exp_max_ulp = 1.5f;

}  // namespace microattn
