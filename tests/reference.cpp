#include "reference.hpp"

#include <cmath>
#include <limits>

namespace ref {

// Everything in double, 29 bits beyond float: long double would be software where most of the suite runs
// (AArch64's 128-bit format; x87 under QEMU). visible() keeps it for its exact integers.

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
  double mx = -std::numeric_limits<double>::infinity();
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
  double sum = 0.0;
  std::vector<double> e(n);
  for (std::size_t i = 0; i < n; ++i) {
    e[i] = std::isinf(x[i]) ? 0.0 : std::exp(static_cast<double>(x[i]) - mx);
    sum += e[i];
  }
  for (std::size_t i = 0; i < n; ++i) y[i] = static_cast<double>(e[i] / sum);
}

double exp(float x) { return std::exp(static_cast<double>(x)); }

}  // namespace ref

namespace ref {

bool visible(std::size_t i, std::size_t j, bool causal, long long causal_offset, std::size_t window) {
  // In long double (64-bit significand or more where size_t has 64 bits): every integer the tests use is exact,
  // and nothing overflows.
  const long double t = static_cast<long double>(j) - static_cast<long double>(i) - causal_offset;  // j − centre
  const long double w = static_cast<long double>(window);
  if (causal) return t <= 0 && (window == 0 || t > -w);
  return window == 0 || (t < w && t > -w);
}

void rotate(double* m, std::size_t rows, std::size_t ld, std::size_t heads, std::size_t head_dim, double theta,
            std::size_t dims, bool interleaved, std::size_t first_position, std::size_t step) {
  if (dims == 0) dims = head_dim;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t p = 0; p < dims / 2; ++p) {
        const double angle = (static_cast<double>(first_position) + static_cast<double>(r * step)) *
                             std::pow(static_cast<double>(theta), -2.0 * p / static_cast<double>(dims));
        const std::size_t a = h * head_dim + (interleaved ? 2 * p : p);
        const std::size_t b = h * head_dim + (interleaved ? 2 * p + 1 : p + dims / 2);
        const double x = m[r * ld + a], z = m[r * ld + b];
        m[r * ld + a] = static_cast<double>(x * std::cos(angle) - z * std::sin(angle));
        m[r * ld + b] = static_cast<double>(x * std::sin(angle) + z * std::cos(angle));
      }
}

void attention(const AttentionCase& c, std::vector<double>& out, std::vector<double>& weighted_abs,
               std::vector<double>& score_abs) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double scale = c.scale != 0.0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.d_k));
  out.assign(c.n_q * c.d_v, 0.0);
  weighted_abs.assign(c.n_q * c.d_v, 0.0);
  score_abs.assign(c.n_q, 0.0);
  std::vector<double> s(c.n_kv);
  std::vector<bool> visible(c.n_kv);
  for (std::size_t i = 0; i < c.n_q; ++i) {
    bool bad = false, any = false;
    double mx = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < c.n_kv; ++j) {
      visible[j] = ref::visible(i, j, c.causal, c.causal_offset, c.window);
      if (!visible[j]) continue;
      double dot = 0.0;
      double dot_abs = 0.0;
      for (std::size_t p = 0; p < c.d_k; ++p) {
        dot += static_cast<double>(c.q[i * c.ldq + p]) * c.k[j * c.ldk + p];
        dot_abs += std::fabs(static_cast<double>(c.q[i * c.ldq + p]) * c.k[j * c.ldk + p]);
      }
      const double mval = c.mask ? c.mask[i * c.ldm + j] : 0.0;
      s[j] = dot * scale + mval;
      if (std::isnan(s[j]) || s[j] == std::numeric_limits<double>::infinity()) bad = true;
      if (std::isfinite(static_cast<double>(s[j])))
        score_abs[i] = std::fmax(score_abs[i], dot_abs * scale + std::fabs(mval));
      if (s[j] > mx) mx = s[j];
      any = true;
    }
    if (bad) {
      for (std::size_t cc = 0; cc < c.d_v; ++cc) out[i * c.d_v + cc] = nan;
      continue;
    }
    if (!any || std::isinf(static_cast<double>(mx))) continue;  // nothing visible: zeros
    double sum = 0.0;
    for (std::size_t j = 0; j < c.n_kv; ++j) {
      s[j] = visible[j] && !std::isinf(s[j]) ? std::exp(s[j] - mx) : 0.0;
      sum += s[j];
    }
    for (std::size_t cc = 0; cc < c.d_v; ++cc) {
      double acc = 0.0;
      double wabs = 0.0;
      for (std::size_t j = 0; j < c.n_kv; ++j) {
        if (s[j] == 0.0) continue;
        const double pj = s[j] / sum;
        acc += pj * c.v[j * c.ldv + cc];
        wabs += static_cast<double>(pj) * std::fabs(static_cast<double>(c.v[j * c.ldv + cc]));
      }
      out[i * c.d_v + cc] = static_cast<double>(acc);
      weighted_abs[i * c.d_v + cc] = wabs;
    }
  }
}

namespace {
// y (rows × n) = x (rows × in, stride ldx) · wᵀ + b, in double.
std::vector<double> linear(const float* x, std::size_t rows, std::size_t ldx, std::size_t in, const float* w,
                           const float* b, std::size_t n) {
  std::vector<double> y(rows * n);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < n; ++o) {
      double acc = b ? b[o] : 0.0;
      for (std::size_t p = 0; p < in; ++p) acc += static_cast<double>(x[r * ldx + p]) * w[o * in + p];
      y[r * n + o] = acc;
    }
  return y;
}
}  // namespace

void multihead_attention(const MhaCase& c, std::vector<double>& y) {
  const std::size_t hd = c.d / c.heads, kvd = c.kv_heads * hd, group = c.heads / c.kv_heads;
  std::vector<double> q = linear(c.query, c.n_q, c.ldq, c.d, c.wq, c.bq, c.d);
  std::vector<double> k = linear(c.context, c.n_kv, c.ldc, c.d, c.wk, c.bk, kvd);
  if (c.rope_theta != 0.0) {
    rotate(q.data(), c.n_q, c.d, c.heads, hd, c.rope_theta, c.rope_dims, c.rope_interleaved, c.q_position,
           c.position_step);
    rotate(k.data(), c.n_kv, kvd, c.kv_heads, hd, c.rope_theta, c.rope_dims, c.rope_interleaved, c.kv_position,
           c.position_step);
  }
  const std::vector<double> v = linear(c.context, c.n_kv, c.ldc, c.d, c.wv, c.bv, kvd);
  std::vector<double> heads(c.n_q * c.d, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> s(c.n_kv);
  for (std::size_t h = 0; h < c.heads; ++h) {
    const std::size_t g = h / group;
    for (std::size_t i = 0; i < c.n_q; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < c.n_kv; ++j) {
        const bool vis = visible(i, j, c.causal, c.causal_offset, c.window);
        double dot = 0.0;
        for (std::size_t p = 0; p < hd; ++p)
          dot += static_cast<double>(q[i * c.d + h * hd + p]) * k[j * kvd + g * hd + p];
        s[j] = vis ? dot * scale + (c.mask ? c.mask[i * c.ldm + j] : 0.0f) : -std::numeric_limits<double>::infinity();
        if (s[j] > mx) mx = s[j];
      }
      if (std::isinf(static_cast<double>(mx))) continue;
      double sum = 0.0;
      for (std::size_t j = 0; j < c.n_kv; ++j) sum += s[j] = std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx);
      for (std::size_t cc = 0; cc < hd; ++cc) {
        double acc = 0.0;
        for (std::size_t j = 0; j < c.n_kv; ++j) acc += s[j] / sum * v[j * kvd + g * hd + cc];
        heads[i * c.d + h * hd + cc] = static_cast<double>(acc);
      }
    }
  }
  if (c.wo == nullptr) {
    y = heads;
    return;
  }
  y.assign(c.n_q * c.d, 0.0);
  for (std::size_t r = 0; r < c.n_q; ++r)
    for (std::size_t o = 0; o < c.d; ++o) {
      double acc = c.bo ? c.bo[o] : 0.0;
      for (std::size_t p = 0; p < c.d; ++p) acc += heads[r * c.d + p] * c.wo[o * c.d + p];
      y[r * c.d + o] = acc;
    }
}

}  // namespace ref
