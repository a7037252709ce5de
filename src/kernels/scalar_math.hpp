// Scalar float helpers shared by the scalar kernels and the scalar tails of the xsimd kernels.
// No xsimd include: this header is part of the Cortex-M build.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/exp_constants.hpp"

// Forced inline: at -Os (the Cortex-M cross files) GCC would otherwise call these per element — a call per
// exp and per multiply-add costs more than the arithmetic itself.
#define MICROATTN_SCALAR_INLINE inline __attribute__((always_inline))

namespace microattn {
namespace detail {

// a·b + c, fused where the target has a hardware FMA (Cortex-M4F/M7, x86 FMA3, NEON-VFPv4), plain otherwise:
// a software fmaf would cost far more than the rounding it saves.
MICROATTN_SCALAR_INLINE float fmadd(float a, float b, float c) noexcept {
#if defined(__FP_FAST_FMAF)
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

MICROATTN_SCALAR_INLINE std::uint32_t float_bits(float f) noexcept {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

MICROATTN_SCALAR_INLINE float bits_float(std::uint32_t u) noexcept {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// c0 + c1·r + … + c6·r⁶ in Horner form: both exps' polynomials (the vector kernels evaluate in the same order).
MICROATTN_SCALAR_INLINE float horner6(float r, float c0, float c1, float c2, float c3, float c4, float c5,
                                      float c6) noexcept {
  float p = fmadd(c6, r, c5);
  p = fmadd(p, r, c4);
  p = fmadd(p, r, c3);
  p = fmadd(p, r, c2);
  p = fmadd(p, r, c1);
  return fmadd(p, r, c0);
}

// e^x, the same algorithm (exp_constants.hpp) as the vector kernels, one float at a time.
MICROATTN_SCALAR_INLINE float exp_float(float x) noexcept {
  using namespace exp_constants;
  x = x < x_min ? x_min : x;  // written so that a NaN passes through both clamps
  x = x > x_max ? x_max : x;
  const float t = fmadd(x, log2e, round_magic);
  const float n = t - round_magic;
  float r = fmadd(n, -ln2_hi, x);
  r = fmadd(n, -ln2_lo, r);
  const float p = horner6(r, poly.c0, poly.c1, poly.c2, poly.c3, poly.c4, poly.c5, poly.c6);
  const std::int32_t ni = static_cast<std::int32_t>(float_bits(t) - float_bits(round_magic));
  const std::int32_t e1 = ni >> 1;  // n in [−150, 128]: both halves keep 2^e normal (arithmetic shift)
  const std::int32_t e2 = ni - e1;
  const float s1 = bits_float(static_cast<std::uint32_t>(e1 + 127) << 23);
  const float s2 = bits_float(static_cast<std::uint32_t>(e2 + 127) << 23);
  return (p * s1) * s2;
}

// 2^x for x <= 0 or NaN (exp2_constants in exp_constants.hpp), with the Horner addends c5 … c0 passed in (a
// caller that has them in registers already; each step's fused multiply-add overwrites its addend).
MICROATTN_SCALAR_INLINE float exp2_nonpositive_float_with(float x, float c5, float c4, float c3, float c2, float c1,
                                                          float c0) noexcept {
  using namespace exp2_constants;
  x = x < x_min ? x_min : x;  // NaN passes through
  const float t = x + round_magic;
  const float r = x - (t - round_magic);
  const float p = horner6(r, c0, c1, c2, c3, c4, c5, poly.c6);
  // (bits(t) − bits(magic) + 127) << 23, n >= −127: field >= 0; written so that it is one shifted add.
  const std::uint32_t e = (float_bits(t) << 23) + ((127u - float_bits(round_magic)) << 23);
  return p * bits_float(e);
}

// 2^x for x <= 0 or NaN, one float at a time.
MICROATTN_SCALAR_INLINE float exp2_nonpositive_float(float x) noexcept {
  using namespace exp2_constants;
  return exp2_nonpositive_float_with(x, poly.c5, poly.c4, poly.c3, poly.c2, poly.c1, poly.c0);
}

}  // namespace detail
}  // namespace microattn
