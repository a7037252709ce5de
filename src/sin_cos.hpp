// sin and cos of a float angle, for the rotary embeddings (layers.cpp). Internal: a header of its own so that
// the tests reach the function itself. No libm, no double: nothing that Cortex-M would pull in.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/scalar_math.hpp"

namespace microattn {
namespace detail {

// Payne–Hanek reduction: r = x − n·π/2 in [−π/4, π/4] and n mod 4 in quadrant, for |x| >= 4096 (NaN for x
// infinite or NaN): x times the bits of 2/π that matter, in integers (32×32→64-bit products, UMULL/UMLAL on
// Cortex-M). r is within about an ulp of itself (its int-to-float conversion) plus 2e−9.
MICROATTN_SCALAR_INLINE float reduce_large(float x, unsigned& quadrant) noexcept {
  // The bits of 2/π after the point, 16 zero bits first, most significant first. Words, not bytes: the window
  // below starts at any bit, and a load of a word at a byte offset faults where unaligned accesses trap.
  static const std::uint32_t two_over_pi[7] = {0x0000a2f9u, 0x836e4e44u, 0x1529fc27u, 0x57d1f534u,
                                               0xddc0db62u, 0x95993c43u, 0x9041fe51u};
  // |x| = m·2^(e − 150). The bits of 2/π of weight 2^−i for i < e − 151 give multiples of 4 in x·2/π (whole
  // turns): dropped. The 96 bits from there, times m, hold x·2/π mod 4 with 62 bits after the point in the
  // product's middle 64 bits: what is dropped below them, and the bits of 2/π after the 96, add less than 2^−62.
  const std::uint32_t bits = float_bits(x);
  const std::uint32_t m = (bits & 0x007fffffu) | 0x00800000u;
  const std::uint32_t j = ((bits >> 23) & 0xffu) - 136u;  // the window's first bit: from 3 (|x| >= 4096) to 119
  const std::uint32_t* t = two_over_pi + (j >> 5);
  const std::uint32_t sh = j & 31u;
  // The middle words' high half: the low word of (m·w0 << 32) + m·w1 + (m·w2 >> 32), least significant first.
  std::uint64_t acc = 0;
  for (int i = 2; i >= 0; --i) {
    const std::uint32_t w = (t[i] << sh) | (t[i + 1] >> 1 >> (31u - sh));  // no shift by 32 when sh = 0
    acc = (acc >> 32) + static_cast<std::uint64_t>(m) * w;
  }
  // Round to the nearest quarter turn n; the rest, in units of 2^−30 of a quarter turn, is r.
  const std::uint32_t h = static_cast<std::uint32_t>(acc) + 0x20000000u;
  std::uint32_t n = h >> 30;
  std::int32_t f = static_cast<std::int32_t>(h & 0x3fffffffu) - 0x20000000;
  if ((bits >> 31) != 0) {  // x < 0: −x turned the other way
    n = 0u - n;
    f = -f;
  }
  quadrant = n;
  return static_cast<float>(f) * 1.46291808e-9f + (x - x);  // π/2·2^−30; x − x: NaN for x infinite or NaN
}

// sin and cos of x, for every float x, within a few ulps of 1. Up to |x| = 4096·π/2 (6434): a Cody–Waite
// reduction, x − k·π/2 with π/2 in three parts, the first two of 12 significant bits, so that k·C1, k·C2 and
// x − k·C1 are exact for |k| <= 4096 with or without FMA. Beyond, k·C1 would round (and from 2^22 on the
// rounding of t to k fails): reduce_large, kept out of the common path by the branch hint. Then Taylor
// polynomials on [−π/4, π/4] (truncation below 3e−9).
MICROATTN_SCALAR_INLINE void sin_cos(float x, float& s, float& c) noexcept {
  const float t = x * 0.636619772f;
  float r;
  unsigned quadrant;
  if (__builtin_expect(std::fabs(t) < 4096.0f, 1)) {
    const float k = (t + 12582912.0f) - 12582912.0f;  // round to nearest
    r = fmadd(k, -1.57080078125f, x);
    r = fmadd(k, 4.453584551811218e-06f, r);
    r = fmadd(k, 8.705516307827565e-10f, r);
    quadrant = static_cast<unsigned>(static_cast<long>(k));
  } else {
    r = reduce_large(x, quadrant);
  }
  const float r2 = r * r;
  const float sr = fmadd(
      r * r2, fmadd(fmadd(fmadd(2.75573192e-6f, r2, -1.98412698e-4f), r2, 8.33333333e-3f), r2, -1.66666667e-1f), r);
  const float cr =
      fmadd(fmadd(fmadd(fmadd(fmadd(-2.75573192e-7f, r2, 2.48015873e-5f), r2, -1.38888889e-3f), r2, 4.16666667e-2f), r2,
                  -0.5f),
            r2, 1.0f);
  // Quadrant q: (sin, cos) = (sr, cr), (cr, −sr), (−sr, −cr), (−cr, sr).
  const float sign = (quadrant & 2u) != 0 ? -1.0f : 1.0f;
  s = sign * ((quadrant & 1u) != 0 ? cr : sr);
  c = sign * ((quadrant & 1u) != 0 ? -sr : cr);
}

}  // namespace detail
}  // namespace microattn
