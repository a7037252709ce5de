// e^x per vector and the softmax of one row (the table's exp and softmax_row).
#pragma once

#include "kernels/attention/simd_common.hpp"

namespace microattn {
namespace detail {
namespace {

// --- exp -------------------------------------------------------------------------------------------------

// c.c0 + c.c1·r + … + c.c6·r⁶, in the order of scalar_math.hpp's horner6.
inline vfloat horner6(vfloat r, const Poly6& c) noexcept {
  vfloat p = xsimd::fma(vfloat(c.c6), r, vfloat(c.c5));
  p = xsimd::fma(p, r, vfloat(c.c4));
  p = xsimd::fma(p, r, vfloat(c.c3));
  p = xsimd::fma(p, r, vfloat(c.c2));
  p = xsimd::fma(p, r, vfloat(c.c1));
  return xsimd::fma(p, r, vfloat(c.c0));
}

// e^x per lane; algorithm and constants in exp/constants.hpp, identical to exp_float().
inline vfloat exp_vec(vfloat x) noexcept {
  using namespace exp_constants;
  // On x86, max/min return their SECOND operand when either is NaN, and NEON's propagate NaN: a NaN x
  // passes both clamps and comes out as NaN (tested).
  x = xsimd::max(vfloat(x_min), x);
  x = xsimd::min(vfloat(x_max), x);
  const vfloat t = xsimd::fma(x, vfloat(log2e), vfloat(round_magic));
  const vfloat n = t - vfloat(round_magic);
  vfloat r = xsimd::fma(n, vfloat(-ln2_hi), x);
  r = xsimd::fma(n, vfloat(-ln2_lo), r);
  const vfloat p = horner6(r, poly);
  const vint ni = bits_as_int(t) - vint(static_cast<std::int32_t>(float_bits(round_magic)));
  const vint e1 = ni >> 1;
  const vint e2 = ni - e1;
  const vfloat s1 = bits_as_float((e1 + vint(127)) << 23);
  const vfloat s2 = bits_as_float((e2 + vint(127)) << 23);
  return (p * s1) * s2;
}

void exp_simd(const float* x, float* y, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) exp_vec(vfloat::load_unaligned(x + i)).store_unaligned(y + i);
  if (i < n) {
    alignas(64) float tail[lanes] = {};
    for (std::size_t j = i; j < n; ++j) tail[j - i] = x[j];
    exp_vec(vfloat::load_aligned(tail)).store_aligned(tail);
    for (std::size_t j = i; j < n; ++j) y[j] = tail[j - i];
  }
}

// --- softmax ---------------------------------------------------------------------------------------------

inline float horizontal_max(vfloat v) noexcept {  // xsimd 8.1 has no reduce_max
#if XSIMD_WITH_AVX512F
  return _mm512_reduce_max_ps(v);  // a tree of 4 shuffles and maxes instead of 15 dependent scalar compares
#endif
  alignas(64) float l[lanes];
  v.store_aligned(l);
  float m = l[0];
  for (std::size_t i = 1; i < lanes; ++i) m = l[i] > m ? l[i] : m;
  return m;
}

void softmax_row_simd(float* x, std::size_t n) noexcept {
  // The tail (n % lanes) goes through a padded copy so every element sees the same vector exp.
  const std::size_t body = n - n % lanes;
  const std::size_t tail = n - body;
  alignas(64) float pad[lanes];
  for (std::size_t j = 0; j < lanes; ++j) pad[j] = j < tail ? x[body + j] : -INFINITY;

  vfloat vmax = vfloat::load_aligned(pad);
  for (std::size_t i = 0; i < body; i += lanes) vmax = xsimd::max(vmax, vfloat::load_unaligned(x + i));
  const float m = horizontal_max(vmax);
  if (m == -INFINITY) {  // all −inf, possibly with NaNs that max dropped: zeros, or NaN if a NaN is there
    bool has_nan = false;
    for (std::size_t i = 0; i < n; ++i) has_nan = has_nan || x[i] != x[i];
    for (std::size_t i = 0; i < n; ++i) x[i] = has_nan ? NAN : 0.0f;
    return;
  }
  // A NaN (or +inf, where inf − inf is NaN) anywhere makes its exp NaN, hence the sum, hence the whole row.
  const vfloat vm(m);
  vfloat vsum(0.0f);
  for (std::size_t i = 0; i < body; i += lanes) {
    const vfloat e = exp_vec(vfloat::load_unaligned(x + i) - vm);
    e.store_unaligned(x + i);
    vsum += e;
  }
  const vfloat etail = exp_vec(vfloat::load_aligned(pad) - vm);  // padding: exp(−inf) = 0
  vsum += etail;
  const vfloat inv(1.0f / xsimd::hadd(vsum));
  for (std::size_t i = 0; i < body; i += lanes) (vfloat::load_unaligned(x + i) * inv).store_unaligned(x + i);
  (etail * inv).store_aligned(pad);
  for (std::size_t j = 0; j < tail; ++j) x[body + j] = pad[j];
}

}  // namespace
}  // namespace detail
}  // namespace microattn
