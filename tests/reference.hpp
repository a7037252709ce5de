// Independent double-precision reference for the tests. Written from the definitions, straight loops,
// sharing no code with the library.
#pragma once

#include <cstddef>
#include <vector>

namespace ref {

// c[i][j] = Σ_p a[i][p]·b[p][j] (or b[j][p] when transpose_b), in double; abs_c[i][j] = Σ_p |a·b|, the
// magnitude a float result's rounding error scales with. c, abs_c: m×n, row-major, contiguous.
void matmul(const float* a, std::size_t lda, const float* b, std::size_t ldb, bool transpose_b, std::size_t m,
            std::size_t n, std::size_t k, std::vector<double>& c, std::vector<double>& abs_c);

// Softmax of one row in long double, following the definition: exp(x_j − max) / Σ exp(x_i − max),
// with −inf → 0, all −inf → zeros, any NaN or +inf → NaN.
void softmax_row(const float* x, std::size_t n, std::vector<double>& y);

// e^x correctly rounded to double from long double (x87 80-bit: 64-bit significand).
double exp(float x);

}  // namespace ref
