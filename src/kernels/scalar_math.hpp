// Scalar float helpers shared by the scalar kernels and the scalar tails of the xsimd kernels.
// No xsimd include: this header is part of the Cortex-M build.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/exp/constants.hpp"

// Forced inline: at -Os (the Cortex-M cross files) GCC would otherwise call these per element — a call per
// exp and per multiply-add costs more than the arithmetic itself.
#define MICROATTN_SCALAR_INLINE inline __attribute__((always_inline))
#define MICROATTN_SCALAR_LAMBDA __attribute__((always_inline))

// The Cortex-M head-dim-8 decoding kernels (attention/scalar_rows_asm.hpp: f32, cache/rows_scalar.hpp: q8) hold two
// rows of sums in s0–s7 and s8–s15: the asm that rescales them by their alphas (in registers al_a, al_b) at the start
// of a P·V block, and the clobbers of those sixteen registers.
// clang-format off
#define MICROATTN_D8_RESCALE(al_a, al_b) \
  "vmul.f32 s0, s0, " al_a "\n\t" \
  "vmul.f32 s1, s1, " al_a "\n\t" \
  "vmul.f32 s2, s2, " al_a "\n\t" \
  "vmul.f32 s3, s3, " al_a "\n\t" \
  "vmul.f32 s4, s4, " al_a "\n\t" \
  "vmul.f32 s5, s5, " al_a "\n\t" \
  "vmul.f32 s6, s6, " al_a "\n\t" \
  "vmul.f32 s7, s7, " al_a "\n\t" \
  "vmul.f32 s8, s8, " al_b "\n\t" \
  "vmul.f32 s9, s9, " al_b "\n\t" \
  "vmul.f32 s10, s10, " al_b "\n\t" \
  "vmul.f32 s11, s11, " al_b "\n\t" \
  "vmul.f32 s12, s12, " al_b "\n\t" \
  "vmul.f32 s13, s13, " al_b "\n\t" \
  "vmul.f32 s14, s14, " al_b "\n\t" \
  "vmul.f32 s15, s15, " al_b "\n\t"
#define MICROATTN_D8_CLOBBERS \
  "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13", "s14", "s15"
// Both kernels' loops. Scores: q_a and q_b in s0–s15, then per key `key` (its two sums into registers sum_a and
// sum_b), stored to %[sa] and %[sb], %[k] stepped by %[step] to the next key, %[n] keys.
#define MICROATTN_D8_DOT_LOOP(key, sum_a, sum_b) \
  "vldmia %[qa], {s0-s7}\n\t" \
  "vldmia %[qb], {s8-s15}\n" \
  "1:\n\t" key \
  "add %[k], %[k], %[step]\n\t" \
  "vstmia %[sa]!, {" sum_a "}\n\t" \
  "vstmia %[sb]!, {" sum_b "}\n\t" \
  "subs %[n], %[n], #1\n\t" \
  "bne 1b"
// P·V: o_a and o_b rescaled by the alphas at addresses al_a and al_b (loaded into registers p_a and p_b) and the
// value rows added (row_rest), or with a null al_a the sums of the value rows alone (row_first the first, a product);
// each row macro ends by counting %[n] down.
#define MICROATTN_D8_AXPY_LOOP(al_a, al_b, p_a, p_b, row_first, row_rest) \
  "cmp " al_a ", #0\n\t" \
  "beq 3f\n\t" \
  "vldmia %[oa], {s0-s7}\n\t" \
  "vldmia %[ob], {s8-s15}\n\t" \
  "vldr " p_a ", [" al_a "]\n\t" \
  "vldr " p_b ", [" al_b "]\n\t" \
  MICROATTN_D8_RESCALE(p_a, p_b) \
  "b 1f\n" \
  "3:\n\t" row_first \
  "beq 2f\n" \
  "1:\n\t" row_rest \
  "bne 1b\n" \
  "2:\n\t" \
  "vstmia %[ob], {s8-s15}\n\t" \
  "vstmia %[oa], {s0-s7}"
// clang-format on

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

// e^x, the same algorithm (exp/constants.hpp) as the vector kernels, one float at a time.
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

// 2^x for x <= 0 or NaN (exp2_constants in exp/constants.hpp), with the Horner addends c5 … c0 passed in (a
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

// The query rows of a decoding product's scores two at a time (the rows of one K/V head's query group), a last single
// row as a pair of itself (its two sums the same, the first stored last): body(q0, q1, s0, s1) with rows r0 and
// r0 + 1 of q (row stride ldq) and of s (lds). The f32 row kernels' and the q8 cache's.
template <class Body>
MICROATTN_SCALAR_INLINE void row_pairs(const float* q, std::size_t ldq, float* s, std::size_t lds, std::size_t nr,
                                       Body body) noexcept {
  for (std::size_t r0 = 0; r0 < nr; r0 += 2) {
    const bool two = nr - r0 >= 2;
    const float* const q0 = q + r0 * ldq;
    float* const s0 = s + r0 * lds;
    body(q0, two ? q0 + ldq : q0, s0, two ? s0 + lds : s0);
  }
}

// The eight sums of a decoding product's inner kernel (two rows × four keys or four columns: rows_dot_2x4 and
// rows_axpy_2x4 in attention/scalar.cpp, their q8 forms in cache/rows_scalar.hpp), kept in registers.
struct Sums2x4 {
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, b0 = 0.0f, b1 = 0.0f, b2 = 0.0f, b3 = 0.0f;
  // a_i = oa[i]·al0, b_i = ob[i]·al1 (P·V's rescaled output).
  MICROATTN_SCALAR_INLINE void scaled(const float* oa, float al0, const float* ob, float al1) noexcept {
    a0 = oa[0] * al0;
    a1 = oa[1] * al0;
    a2 = oa[2] * al0;
    a3 = oa[3] * al0;
    b0 = ob[0] * al1;
    b1 = ob[1] * al1;
    b2 = ob[2] * al1;
    b3 = ob[3] * al1;
  }
  // a_i += x·w_i, b_i += y·w_i.
  MICROATTN_SCALAR_INLINE void add(float x, float y, float w0, float w1, float w2, float w3) noexcept {
    a0 = fmadd(x, w0, a0);
    a1 = fmadd(x, w1, a1);
    a2 = fmadd(x, w2, a2);
    a3 = fmadd(x, w3, a3);
    b0 = fmadd(y, w0, b0);
    b1 = fmadd(y, w1, b1);
    b2 = fmadd(y, w2, b2);
    b3 = fmadd(y, w3, b3);
  }
  // b's to sb[0..3], then a's to sa[0..3]: sb may be sa (a last single row), whose a's land last.
  MICROATTN_SCALAR_INLINE void store(float* sa, float* sb) const noexcept {
    sb[0] = b0;
    sb[1] = b1;
    sb[2] = b2;
    sb[3] = b3;
    sa[0] = a0;
    sa[1] = a1;
    sa[2] = a2;
    sa[3] = a3;
  }
};

}  // namespace detail
}  // namespace microattn
