// linear()'s Cortex-M4/M7 kernels (Armv7E-M: the DSP extension and a single-precision FPU), the table those
// targets select; empty elsewhere (Cortex-M55 selects Helium's, linear_helium.cpp).
//
// q8: the chunk's x is first expanded to the halfword pairs SXTB16 makes of a word of four bytes, (x0, x2) and
// (x1, x3), so that per four weights a row costs one load, two SXTB16 and two SMLAD (int16 × int16 pairs summed
// into int32: exact, −128 included). Two weight rows share each load of x; where the rows and segments are
// word-aligned, 16 columns per step with LDRD/LDM (asm: GCC -Os would spill the 13 live registers), else words
// through LDR (unaligned access is allowed on these cores) and bytes for the last k % 4.
// f16: two halves per word, converted by the FPU (VCVTB/VCVTT: exact, FZ does not apply to them), four rows per x.
// Quantization as quantize_one, without its compares: round-half-away(t) = trunc(2t) − trunc(t) (2t is exact).
#include "kernels/linear_kernels.hpp"

#if MICROATTN_LINEAR_ARMV7EM || MICROATTN_LINEAR_HELIUM

#include <arm_acle.h>

#pragma GCC optimize("O2")

#include <cassert>
#include <cstring>

#include "kernels/scalar_math.hpp"

namespace microattn {
namespace detail {
namespace {

#define MICROATTN_ARMV7EM_INLINE inline __attribute__((always_inline))

MICROATTN_ARMV7EM_INLINE std::uint32_t load_word(const void* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);  // LDR: unaligned is fine on Armv7E-M
  return v;
}

MICROATTN_ARMV7EM_INLINE std::uint32_t ror8(std::uint32_t v) noexcept { return (v >> 8) | (v << 24); }

// ---- f16 ------------------------------------------------------------------------------------------------------

// The two halves of a word as floats: low (column c) and high (column c + 1).
MICROATTN_ARMV7EM_INLINE void halves(std::uint32_t bits, float& lo, float& hi) noexcept {
  float s;
  asm("vmov %0, %1" : "=t"(s) : "r"(bits));
  asm("vcvtb.f32.f16 %0, %1" : "=t"(lo) : "t"(s));
  asm("vcvtt.f32.f16 %0, %1" : "=t"(hi) : "t"(s));
}
MICROATTN_ARMV7EM_INLINE float half_low(std::uint32_t bits) noexcept {
  float s, f;
  asm("vmov %0, %1" : "=t"(s) : "r"(bits));
  asm("vcvtb.f32.f16 %0, %1" : "=t"(f) : "t"(s));
  return f;
}

float bias_of(const float* bias, std::size_t r) noexcept { return bias != nullptr ? bias[r] : 0.0f; }

// Rows [r, r + R) of y for one x row: two columns per step.
template <int R>
MICROATTN_ARMV7EM_INLINE void f16_rows(const float* x, const std::uint16_t* w, std::size_t k, const float* bias,
                                       float* y) noexcept {
  const std::uint16_t* p0 = w;
  const std::uint16_t* p1 = p0 + (R > 1 ? k : 0);
  const std::uint16_t* p2 = p1 + (R > 2 ? k : 0);
  const std::uint16_t* p3 = p2 + (R > 3 ? k : 0);
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  const float* xp = x;
  for (std::size_t c = k / 2; c != 0; --c) {
    const float x0 = xp[0], x1 = xp[1];
    xp += 2;
    float lo, hi;
    halves(load_word(p0), lo, hi);
    s0 = fmadd(x1, hi, fmadd(x0, lo, s0));
    p0 += 2;
    if constexpr (R > 1) {
      halves(load_word(p1), lo, hi);
      s1 = fmadd(x1, hi, fmadd(x0, lo, s1));
      p1 += 2;
    }
    if constexpr (R > 2) {
      halves(load_word(p2), lo, hi);
      s2 = fmadd(x1, hi, fmadd(x0, lo, s2));
      p2 += 2;
    }
    if constexpr (R > 3) {
      halves(load_word(p3), lo, hi);
      s3 = fmadd(x1, hi, fmadd(x0, lo, s3));
      p3 += 2;
    }
  }
  if (k % 2 != 0) {
    const float xl = *xp;
    s0 = fmadd(xl, half_low(*p0), s0);
    if constexpr (R > 1) s1 = fmadd(xl, half_low(*p1), s1);
    if constexpr (R > 2) s2 = fmadd(xl, half_low(*p2), s2);
    if constexpr (R > 3) s3 = fmadd(xl, half_low(*p3), s3);
  }
  y[0] = bias_of(bias, 0) + s0;
  if constexpr (R > 1) y[1] = bias_of(bias, 1) + s1;
  if constexpr (R > 2) y[2] = bias_of(bias, 2) + s2;
  if constexpr (R > 3) y[3] = bias_of(bias, 3) + s3;
}

}  // namespace

void linear_f16_1x4_armv7em(const LinearArgs& a) noexcept {
  const auto* w = static_cast<const std::uint16_t*>(a.w);
  const std::size_t k = a.k;
  for (std::size_t i = 0; i < a.m; ++i) {
    const float* x = a.x + i * a.ldx;
    float* y = a.y + i * a.ldy;
    std::size_t r = 0;
    for (; r + 4 <= a.n; r += 4) f16_rows<4>(x, w + r * k, k, a.bias != nullptr ? a.bias + r : nullptr, y + r);
    for (; r < a.n; ++r) f16_rows<1>(x, w + r * k, k, a.bias != nullptr ? a.bias + r : nullptr, y + r);
  }
}

#if MICROATTN_LINEAR_ARMV7EM
namespace {

// ---- q8 -------------------------------------------------------------------------------------------------------

// Largest |x| bits: the doubled bits (sign shifted out) compare as unsigned in the same order.
std::uint32_t absmax_bits_armv7em(const float* x, std::size_t n) noexcept {
  std::uint32_t m = 0;  // the largest doubled bits: compare, and keep b << 1 where it is larger (3 instructions)
  const auto* p = reinterpret_cast<const std::uint32_t*>(x);
  for (std::size_t i = n / 4; i != 0; --i, p += 4) {
    const std::uint32_t b0 = p[0], b1 = p[1], b2 = p[2], b3 = p[3];
    asm("cmp %0, %1, lsl #1\n\tit lo\n\tlsllo %0, %1, #1\n\t"
        "cmp %0, %2, lsl #1\n\tit lo\n\tlsllo %0, %2, #1\n\t"
        "cmp %0, %3, lsl #1\n\tit lo\n\tlsllo %0, %3, #1\n\t"
        "cmp %0, %4, lsl #1\n\tit lo\n\tlsllo %0, %4, #1"
        : "+r"(m)
        : "r"(b0), "r"(b1), "r"(b2), "r"(b3)
        : "cc");
  }
  for (std::size_t i = 0; i < n % 4; ++i) {
    const std::uint32_t b = p[i] << 1;
    m = b > m ? b : m;
  }
  return m >> 1;
}

void quantize_armv7em(const float* x, std::size_t n, float s, std::int8_t* q) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    float t = x[i] / s;  // |t| <= 127 (and a hair): 2t is exact, no conversion saturates
#if defined(__ARM_FP) && (__ARM_FP & 8)
    // FPv5 (Cortex-M7 with double precision) rounds to nearest with ties away from zero itself.
    asm("vcvta.s32.f32 %0, %0" : "+t"(t));
    q[i] = static_cast<std::int8_t>(static_cast<std::int32_t>(float_bits(t)));
#else
    float whole;
    asm("vcvt.s32.f32 %0, %1" : "=t"(whole) : "t"(t));
    asm("vcvt.s32.f32 %0, %0, #1" : "+t"(t));  // trunc(2t), as a fixed-point conversion with one fraction bit
    q[i] = static_cast<std::int8_t>(static_cast<std::int32_t>(float_bits(t) - float_bits(whole)));
#endif
  }
}

// One step of dot16_x2 (16 columns of two rows), as asm text.
#define MICROATTN_ARMV7EM_DOT16_X2                 \
  "ldmia %[xp]!, {%[x0], %[x1], %[x2], %[x3]}\n\t" \
  "ldrd %[wa], %[wb], [%[p0]], #8\n\t"             \
  "sxtb16 %[t], %[wa], ror #8\n\t"                 \
  "sxtb16 %[wa], %[wa]\n\t"                        \
  "smlad %[a0], %[wa], %[x0], %[a0]\n\t"           \
  "smlad %[a0], %[t], %[x1], %[a0]\n\t"            \
  "sxtb16 %[t], %[wb], ror #8\n\t"                 \
  "sxtb16 %[wb], %[wb]\n\t"                        \
  "smlad %[a0], %[wb], %[x2], %[a0]\n\t"           \
  "smlad %[a0], %[t], %[x3], %[a0]\n\t"            \
  "ldrd %[wa], %[wb], [%[p1]], #8\n\t"             \
  "sxtb16 %[t], %[wa], ror #8\n\t"                 \
  "sxtb16 %[wa], %[wa]\n\t"                        \
  "smlad %[a1], %[wa], %[x0], %[a1]\n\t"           \
  "smlad %[a1], %[t], %[x1], %[a1]\n\t"            \
  "sxtb16 %[t], %[wb], ror #8\n\t"                 \
  "sxtb16 %[wb], %[wb]\n\t"                        \
  "smlad %[a1], %[wb], %[x2], %[a1]\n\t"           \
  "smlad %[a1], %[t], %[x3], %[a1]\n\t"            \
  "ldmia %[xp]!, {%[x0], %[x1], %[x2], %[x3]}\n\t" \
  "ldrd %[wa], %[wb], [%[p0]], #8\n\t"             \
  "sxtb16 %[t], %[wa], ror #8\n\t"                 \
  "sxtb16 %[wa], %[wa]\n\t"                        \
  "smlad %[a0], %[wa], %[x0], %[a0]\n\t"           \
  "smlad %[a0], %[t], %[x1], %[a0]\n\t"            \
  "sxtb16 %[t], %[wb], ror #8\n\t"                 \
  "sxtb16 %[wb], %[wb]\n\t"                        \
  "smlad %[a0], %[wb], %[x2], %[a0]\n\t"           \
  "smlad %[a0], %[t], %[x3], %[a0]\n\t"            \
  "ldrd %[wa], %[wb], [%[p1]], #8\n\t"             \
  "sxtb16 %[t], %[wa], ror #8\n\t"                 \
  "sxtb16 %[wa], %[wa]\n\t"                        \
  "smlad %[a1], %[wa], %[x0], %[a1]\n\t"           \
  "smlad %[a1], %[t], %[x1], %[a1]\n\t"            \
  "sxtb16 %[t], %[wb], ror #8\n\t"                 \
  "sxtb16 %[wb], %[wb]\n\t"                        \
  "smlad %[a1], %[wb], %[x2], %[a1]\n\t"           \
  "smlad %[a1], %[t], %[x3], %[a1]\n\t"

// Two rows' int32 sums over 16 columns per step, `steps` steps: p0, p1 (word-aligned weight rows) and xp (the
// expanded x) advance past them.
MICROATTN_ARMV7EM_INLINE void dot16_x2(const std::int8_t*& p0, const std::int8_t*& p1, const std::uint32_t*& xp,
                                       std::size_t steps, std::int32_t& a0, std::int32_t& a1) noexcept {
  // LDM fills its registers in ascending order: x0–x3 are pinned to ascending ones.
  register std::uint32_t x0 asm("r8"), x1 asm("r9"), x2 asm("r10"), x3 asm("r11");
  std::uint32_t wa, wb, t;
  asm volatile(
      "1:\n\t" MICROATTN_ARMV7EM_DOT16_X2
      "subs %[n], %[n], #1\n\t"
      "bne 1b\n\t"
      : [a0] "+r"(a0), [a1] "+r"(a1), [p0] "+r"(p0), [p1] "+r"(p1), [xp] "+r"(xp), [n] "+r"(steps), [x0] "=&r"(x0),
        [x1] "=&r"(x1), [x2] "=&r"(x2), [x3] "=&r"(x3), [wa] "=&r"(wa), [wb] "=&r"(wb), [t] "=&r"(t)
      :
      : "cc", "memory");
}

// What pairs_x16 reads from memory (it has no register left for them).
struct PairParams {
  std::size_t steps;        // 16-column steps per row
  const std::uint32_t* xx;  // the segment's expanded x
  std::size_t ldw;          // weight row stride
  std::size_t advance;      // 2·ldw − 16·steps: from the end of a pair's first row to the next pair
  std::int32_t* sums;       // where the next pair's two sums go (advanced)
  const std::int32_t* sums_end;
};

// The int32 sums of (sums_end − sums) / 2 consecutive row pairs from p0 (word-aligned rows), one segment each, stored
// as pairs: the whole loop in asm, so that a pair costs 12 instructions besides its dot products.
void pairs_x16(const std::int8_t* p0, PairParams& prm) noexcept {
  register std::uint32_t x0 asm("r8"), x1 asm("r9"), x2 asm("r10"), x3 asm("r11");
  std::uint32_t wa, wb, t, a0, a1, n;
  const std::int8_t* p1;
  const std::uint32_t* xp;
  asm volatile(
      "2:\n\t"
      "ldrd %[n], %[xp], [%[P]]\n\t"
      "ldr %[t], [%[P], #8]\n\t"
      "add %[p1], %[p0], %[t]\n\t"
      "movs %[a0], #0\n\t"
      "movs %[a1], #0\n\t"
      "1:\n\t" MICROATTN_ARMV7EM_DOT16_X2
      "subs %[n], %[n], #1\n\t"
      "bne 1b\n\t"
      "ldrd %[t], %[wa], [%[P], #12]\n\t"
      "add %[p0], %[p0], %[t]\n\t"
      "strd %[a0], %[a1], [%[wa]], #8\n\t"
      "ldr %[t], [%[P], #20]\n\t"
      "str %[wa], [%[P], #16]\n\t"
      "cmp %[wa], %[t]\n\t"
      "bne 2b\n\t"
      : [a0] "=&r"(a0), [a1] "=&r"(a1), [p0] "+r"(p0), [p1] "=&r"(p1), [xp] "=&r"(xp), [n] "=&r"(n), [x0] "=&r"(x0),
        [x1] "=&r"(x1), [x2] "=&r"(x2), [x3] "=&r"(x3), [wa] "=&r"(wa), [wb] "=&r"(wb), [t] "=&r"(t)
      : [P] "r"(&prm)
      : "cc", "memory");
}

// Four columns of one row against the expanded pair (xe, xo).
MICROATTN_ARMV7EM_INLINE std::int32_t dot4(std::uint32_t w, std::uint32_t xe, std::uint32_t xo,
                                           std::int32_t acc) noexcept {
  return __smlad(static_cast<std::int32_t>(__sxtb16(ror8(w))), static_cast<std::int32_t>(xo),
                 __smlad(static_cast<std::int32_t>(__sxtb16(w)), static_cast<std::int32_t>(xe), acc));
}

// Rows r, r + 1 of the chunk (both the same row when only one is left: its second sum is dropped).
MICROATTN_ARMV7EM_INLINE void q8_pair(const std::int8_t* w0, const std::int8_t* w1, const Q8Chunk& ch,
                                      const std::uint32_t* xx, const float* sw0, const float* sw1, bool aligned,
                                      float& f0, float& f1) noexcept {
  const std::size_t seg = ch.seg, segs = ch.len / seg, quads = seg / 4, tail = seg % 4;
  const std::int8_t* xq = ch.q;
  f0 = 0.0f;
  f1 = 0.0f;
  for (std::size_t s = 0; s < segs; ++s) {
    std::int32_t a0 = 0, a1 = 0;
    const std::uint32_t* xp = xx;
    std::size_t left = quads;
    if (aligned) {
      if (left >= 4) dot16_x2(w0, w1, xp, left / 4, a0, a1);
      left %= 4;
    }
    for (; left != 0; --left) {
      const std::uint32_t xe = xp[0], xo = xp[1];
      xp += 2;
      a0 = dot4(load_word(w0), xe, xo, a0);
      a1 = dot4(load_word(w1), xe, xo, a1);
      w0 += 4;
      w1 += 4;
    }
    xx = xp;
    xq += quads * 4;
    for (std::size_t c = 0; c < tail; ++c) {
      const std::int32_t xc = xq[c];
      a0 += xc * w0[c];
      a1 += xc * w1[c];
    }
    xq += tail;
    w0 += tail;
    w1 += tail;
    const float sxs = ch.sx[s];
    f0 = fmadd(static_cast<float>(a0) * sw0[s], sxs, f0);
    f1 = fmadd(static_cast<float>(a1) * sw1[s], sxs, f1);
  }
}

// Every segment a multiple of 16 columns and every row word-aligned: the asm loop alone, nothing else per segment
// but its scaling.
__attribute__((noinline)) void q8_rows_x16(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch,
                                           const std::uint32_t* xx) noexcept {
  constexpr std::size_t block = 16;  // rows whose sums are kept at a time (stack: 128 B with their floats)
  const std::size_t seg = ch.seg, segs = ch.len / seg, steps = seg / 16;
  const bool per_row = ch.rows_per_scale == 1;
  for (std::size_t r0 = 0; r0 < n; r0 += block) {
    const std::size_t rows = n - r0 < block ? n - r0 : block;
    float f[block];
    for (std::size_t s = 0; s < segs; ++s) {
      alignas(8) std::int32_t sums[block];
      const std::int8_t* p0 = w + r0 * ldw + s * seg;
      const std::uint32_t* xs = xx + s * (seg / 2);
      if (rows >= 2) {
        PairParams prm{steps, xs, ldw, 2 * ldw - seg, sums, sums + (rows & ~std::size_t{1})};
        pairs_x16(p0, prm);
      }
      if (rows % 2 != 0) {  // the last row alone (twice)
        const std::int8_t* q0 = p0 + (rows - 1) * ldw;
        const std::int8_t* q1 = q0;
        std::int32_t a0 = 0, a1 = 0;
        dot16_x2(q0, q1, xs, steps, a0, a1);
        sums[rows - 1] = a0;
      }
      const float sxs = ch.sx[s];
      if (segs == 1 && per_row) {  // one segment per row, one scale each: straight into y
        const std::size_t st = ch.sw_stride;
        const float* swp = ch.sw + r0 * st;
        float* yp = ch.y + r0;
        const float* bp = ch.bias != nullptr ? ch.bias + r0 : nullptr;
        const std::int32_t* sp = sums;
        const std::int32_t* const end = sums + rows;
        if (!ch.first) {
          for (; sp != end; swp += st) *yp++ += static_cast<float>(*sp++) * *swp * sxs;
        } else if (bp != nullptr) {
          for (; sp != end; swp += st) *yp++ = *bp++ + static_cast<float>(*sp++) * *swp * sxs;
        } else {
          for (; sp != end; swp += st) *yp++ = 0.0f + static_cast<float>(*sp++) * *swp * sxs;
        }
        continue;
      }
      for (std::size_t i = 0; i < rows; ++i) {
        const float v = static_cast<float>(sums[i]) * row_scales(ch, r0 + i)[s] * sxs;
        f[i] = s == 0 ? v : f[i] + v;
      }
    }
    if (segs == 1 && per_row) continue;
    float* const y = ch.y + r0;
    if (ch.first) {
      for (std::size_t i = 0; i < rows; ++i) y[i] = (ch.bias != nullptr ? ch.bias[r0 + i] : 0.0f) + f[i];
    } else {
      for (std::size_t i = 0; i < rows; ++i) y[i] += f[i];
    }
  }
}

void q8_chunk_armv7em(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch) noexcept {
  assert(ch.rows == 1);
  const std::size_t seg = ch.seg, segs = ch.len / seg, quads = seg / 4;
  // x as SXTB16 pairs, segment after segment (each segment's last seg % 4 columns stay in ch.q).
  alignas(8) std::uint32_t xx[linear_q8_chunk_bytes / 2];
  {
    std::uint32_t* out = xx;
    const std::int8_t* in = ch.q;
    for (std::size_t s = 0; s < segs; ++s, in += seg)
      for (std::size_t j = 0; j < quads; ++j, out += 2) {
        const std::uint32_t v = load_word(in + 4 * j);
        out[0] = __sxtb16(v);
        out[1] = __sxtb16(ror8(v));
      }
  }
  // LDRD needs every row's segments word-aligned.
  const bool aligned = (reinterpret_cast<std::uintptr_t>(w) | ldw | (segs > 1 ? seg : 0)) % 4 == 0;
  if (aligned && seg % 16 == 0) {
    q8_rows_x16(w, ldw, n, ch, xx);
    return;
  }
  float* y = ch.y;
  for (std::size_t r = 0; r < n; r += 2) {
    const std::size_t r1 = r + 1 < n ? r + 1 : r;
    float f0, f1;
    q8_pair(w + r * ldw, w + r1 * ldw, ch, xx, row_scales(ch, r), row_scales(ch, r1), aligned, f0, f1);
    y[r] = (ch.first ? bias_of(ch.bias, r) : y[r]) + f0;
    if (r1 != r) y[r1] = (ch.first ? bias_of(ch.bias, r1) : y[r1]) + f1;
  }
}

constexpr LinearKernels table{"armv7em",
                              "linear_f32_gemm_armv7em",  // matmul's gemm (scalar on these cores)
                              "linear_f16_1x4_armv7em",
                              "linear_q8_1x2_armv7em",
                              linear_f32_gemm,
                              linear_f16_1x4_armv7em,
                              q8_chunk_armv7em,
                              1,
                              absmax_bits_armv7em,
                              quantize_armv7em};

}  // namespace

const LinearKernels& armv7em_linear_kernels() noexcept { return table; }
#endif

}  // namespace detail
}  // namespace microattn

#endif
