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
// Accuracy: each output is within (8 + spread + n)·2⁻²⁴ relative of the exact softmax of the float inputs, where
// spread is the row's largest |x − max| (the rounding of x − max) and n its length (the float row sum): the
// bound the tests check (README "Numerical contract").
//
// Errors (x untouched): null_pointer if x.data is null; invalid_shape if a dimension is 0 or stride < cols.
Status softmax_rows(MatrixView<float> x) noexcept;

// y[i] = e^x[i] for i < n, with the same vectorized exp softmax_rows uses.
// Accuracy: at most exp_max_ulp ULP from the correctly rounded result for every float x whose e^x is a
// normal float (x in [−87.33, 88.72]); tested on a sweep of the whole float range against long double.
// Outside that range: e^x > FLT_MAX gives +inf; subnormal results are within one subnormal step, 2⁻¹⁴⁹
// (x below −103.98 gives 0) — except on ARMv7 NEON builds, whose vector unit flushes subnormals to zero by
// architecture; exp(−inf) = 0, exp(+inf) = +inf, exp(NaN) = NaN.
// x and y may be the same array (in place); partially overlapping arrays give aliasing.
// Errors (y untouched): null_pointer if x or y is null with n > 0; invalid_shape if n floats overflow the address
// space; aliasing for partial overlap. n == 0 is ok.
Status exp_elements(const float* x, float* y, std::size_t n) noexcept;

// Bound, in units in the last place, of exp_elements on normal results (the figure the tests check).
constexpr float exp_max_ulp = 1.5f;

}  // namespace microattn
