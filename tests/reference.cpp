#include "reference.hpp"

#include <cmath>
#include <limits>

namespace ref {

void matmul(const float* a, std::size_t lda, const float* b, std::size_t ldb, bool transpose_b, std::size_t m,
            std::size_t n, std::size_t k, std::vector<double>& c, std::vector<double>& abs_c) {
  c.assign(m * n, 0.0);
  abs_c.assign(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0.0, sa = 0.0;
      for (std::size_t p = 0; p < k; ++p) {
        const double bv = transpose_b ? b[j * ldb + p] : b[p * ldb + j];
        const double prod = static_cast<double>(a[i * lda + p]) * bv;
        s += prod;
        sa += std::fabs(prod);
      }
      c[i * n + j] = s;
      abs_c[i * n + j] = sa;
    }
}

void softmax_row(const float* x, std::size_t n, std::vector<double>& y) {
  y.assign(n, 0.0);
  long double mx = -std::numeric_limits<long double>::infinity();
  bool bad = false;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i]) || x[i] == std::numeric_limits<float>::infinity()) bad = true;
    if (x[i] > mx) mx = x[i];
  }
  if (bad) {
    y.assign(n, std::numeric_limits<double>::quiet_NaN());
    return;
  }
  if (std::isinf(mx)) return;  // all −inf: zeros
  long double sum = 0.0L;
  std::vector<long double> e(n);
  for (std::size_t i = 0; i < n; ++i) {
    e[i] = std::isinf(x[i]) ? 0.0L : std::exp(static_cast<long double>(x[i]) - mx);
    sum += e[i];
  }
  for (std::size_t i = 0; i < n; ++i) y[i] = static_cast<double>(e[i] / sum);
}

double exp(float x) { return static_cast<double>(std::exp(static_cast<long double>(x))); }

}  // namespace ref
