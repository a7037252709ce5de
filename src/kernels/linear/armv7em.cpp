// linear()'s Cortex-M4/M7 kernels (Armv7E-M: the DSP extension and a single-precision FPU), the table those
// targets select; empty elsewhere (Cortex-M55 selects Helium's, linear/helium.cpp, whose f16 kernel is its own).
//
// q8: the chunk's x is first expanded to the halfword pairs SXTB16 makes of a word of four bytes, (x0, x2) and
// (x1, x3), so that per four weights a row costs one load, two SXTB16 and two SMLAD (int16 × int16 pairs summed
// into int32: exact, −128 included). Two weight rows share each load of x; where the rows and segments are
// word-aligned, the multiples of 16 columns go through one asm loop over all row pairs (LDRD/LDM, 32 columns a step:
// 1.22 instructions per MAC; GCC would spill its 14 live registers), the rest through words by LDR (unaligned access
// is allowed on these cores) and bytes for the last seg % 4. The int32 sums of a block of rows are then scaled four
// rows a step (with the bias and nothing else in the way, in y itself).
// f16: the halves converted by the FPU (VCVTB/VCVTT: exact, FZ does not apply to them), four rows per x: eight
// columns a step in asm, each row's eight halves by one VLDM, x by one VLDM for the four rows (2.2 instructions per
// MAC); word-aligned rows only, so a row that starts 2 mod 4 takes its first column alone, and odd k (rows that
// alternate in alignment) goes row by row.
// Quantization as q8_round, without its compares (linear_quantize_armv7em).
#include "kernels/linear.hpp"

#if MICROATTN_LINEAR_ARMV7EM

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

// Eight columns of one row: the four words of its halves by one VLDM into s12–s15, converted in place into
// s8–s15 (each word's two halves are taken before its register is overwritten), then eight FMAs against x in
// s0–s7, in column order: the row's sum is the same sequential fp32 sum as the scalar kernel's. VCVTB/VCVTT are
// exact, subnormal halves included (FZ does not apply to half-precision conversions).
// clang-format off
#define MICROATTN_ARMV7EM_F16_ROW8(p, a)          \
  "vldmia %[" p "]!, {s12-s15}\n\t"                \
  "vcvtb.f32.f16 s8, s12\n\t"                      \
  "vcvtt.f32.f16 s9, s12\n\t"                      \
  "vcvtb.f32.f16 s10, s13\n\t"                     \
  "vcvtt.f32.f16 s11, s13\n\t"                     \
  "vcvtb.f32.f16 s12, s14\n\t"                     \
  "vcvtt.f32.f16 s13, s14\n\t"                     \
  "vcvtb.f32.f16 s14, s15\n\t"                     \
  "vcvtt.f32.f16 s15, s15\n\t"                     \
  "vfma.f32 %[" a "], s0, s8\n\t"                  \
  "vfma.f32 %[" a "], s1, s9\n\t"                  \
  "vfma.f32 %[" a "], s2, s10\n\t"                 \
  "vfma.f32 %[" a "], s3, s11\n\t"                 \
  "vfma.f32 %[" a "], s4, s12\n\t"                 \
  "vfma.f32 %[" a "], s5, s13\n\t"                 \
  "vfma.f32 %[" a "], s6, s14\n\t"                 \
  "vfma.f32 %[" a "], s7, s15\n\t"
#define MICROATTN_ARMV7EM_F16_CLOBBERS                                                                          \
  "cc", "memory", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13", "s14", \
      "s15"
// clang-format on

// acc + the dot product of x and one row's first `cols` halves, in column order: two columns per LDR (unaligned
// is fine), the last one alone. The columns around the asm steps: out of line, they are not per MAC.
__attribute__((noinline, optimize("Os"))) float f16_cols(const float* x, const std::uint16_t* p, std::size_t cols,
                                                         float acc) noexcept {
  for (std::size_t c = cols / 2; c != 0; --c, x += 2, p += 2) {
    float lo, hi;
    halves(load_word(p), lo, hi);
    acc = fmadd(x[1], hi, fmadd(x[0], lo, acc));
  }
  if (cols % 2 != 0) acc = fmadd(*x, half_low(*p), acc);
  return acc;
}

// Columns [0, k) of G rows (w, w + k, ...; all at the same alignment, k even when G > 1) added to s0..s(G−1): one
// column first where the rows are 2 mod 4 (VLDM faults unless word-aligned), then 8 columns a step in asm with x
// loaded once per step for the G rows (4 rows: 71 instructions per 32 MACs), then the last (k − c) % 8.
template <int G>
MICROATTN_ARMV7EM_INLINE void f16_group(const float* x, const std::uint16_t* w, std::size_t k, float& s0, float& s1,
                                        float& s2, float& s3) noexcept {
  const std::uint16_t* p0 = w;
  const std::uint16_t* p1 = p0 + (G > 1 ? k : 0);
  const std::uint16_t* p2 = p1 + (G > 1 ? k : 0);
  const std::uint16_t* p3 = p2 + (G > 1 ? k : 0);
  const float* xp = x;
  std::size_t left = k;
  if (reinterpret_cast<std::uintptr_t>(w) % 4 != 0 && left != 0) {
    const float xl = *xp++;
    s0 = fmadd(xl, half_low(*p0++), s0);
    if constexpr (G > 1) {
      s1 = fmadd(xl, half_low(*p1++), s1);
      s2 = fmadd(xl, half_low(*p2++), s2);
      s3 = fmadd(xl, half_low(*p3++), s3);
    }
    --left;
  }
  if (std::size_t steps = left / 8; steps != 0) {
    if constexpr (G > 1)
      asm("1:\n\t"
          "vldmia %[xp]!, {s0-s7}\n\t" MICROATTN_ARMV7EM_F16_ROW8("p0", "a0") MICROATTN_ARMV7EM_F16_ROW8("p1", "a1")
              MICROATTN_ARMV7EM_F16_ROW8("p2", "a2") MICROATTN_ARMV7EM_F16_ROW8("p3", "a3")
          "subs %[n], %[n], #1\n\t"
          "bne 1b"
          : [xp] "+r"(xp), [p0] "+r"(p0), [p1] "+r"(p1), [p2] "+r"(p2), [p3] "+r"(p3), [n] "+r"(steps),
            [a0] "+t"(s0), [a1] "+t"(s1), [a2] "+t"(s2), [a3] "+t"(s3)
          :
          : MICROATTN_ARMV7EM_F16_CLOBBERS);
    else
      asm("1:\n\t"
          "vldmia %[xp]!, {s0-s7}\n\t" MICROATTN_ARMV7EM_F16_ROW8("p0", "a0")
          "subs %[n], %[n], #1\n\t"
          "bne 1b"
          : [xp] "+r"(xp), [p0] "+r"(p0), [n] "+r"(steps), [a0] "+t"(s0)
          :
          : MICROATTN_ARMV7EM_F16_CLOBBERS);
  }
  if (left % 8 != 0) {
    s0 = f16_cols(xp, p0, left % 8, s0);
    if constexpr (G > 1) {
      s1 = f16_cols(xp, p1, left % 8, s1);
      s2 = f16_cols(xp, p2, left % 8, s2);
      s3 = f16_cols(xp, p3, left % 8, s3);
    }
  }
}

// One row's sum (the 1-row tiles, and the rows of a 4-row tile when k is odd: its rows alternate in alignment).
__attribute__((noinline, optimize("Os"))) float f16_row(const float* x, const std::uint16_t* w,
                                                        std::size_t k) noexcept {
  float s = 0.0f;
  f16_group<1>(x, w, k, s, s, s, s);
  return s;
}

// Rows [r, r + R) of y for one x row.
template <int R>
MICROATTN_ARMV7EM_INLINE void f16_row_block(const float* x, const std::uint16_t* w, std::size_t k, const float* bias,
                                            float* y) noexcept {
  static_assert(R == 1 || R == 4, "f16_row_tiles drives tiles of 4 and 1 rows");
  if (R == 1 || k % 2 != 0) {
    for (std::size_t i = 0; i < R; ++i) y[i] = bias_of(bias, i) + f16_row(x, w + i * k, k);
    return;
  }
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  f16_group<4>(x, w, k, s0, s1, s2, s3);
  y[0] = bias_of(bias, 0) + s0;
  y[1] = bias_of(bias, 1) + s1;
  y[2] = bias_of(bias, 2) + s2;
  y[3] = bias_of(bias, 3) + s3;
}

#undef MICROATTN_ARMV7EM_F16_ROW8
#undef MICROATTN_ARMV7EM_F16_CLOBBERS

}  // namespace

__attribute__((optimize("Os"))) void linear_f16_1x4_armv7em(const LinearArgs& a) noexcept {
  const auto* w = static_cast<const std::uint16_t*>(a.w);
  f16_row_tiles(a, [w, k = a.k, bias = a.bias](auto rows, const float* x, float* y, std::size_t r) {
    f16_row_block<decltype(rows)::value>(x, w + r * k, k, bias != nullptr ? bias + r : nullptr, y + r);
  });
}

namespace {

// ---- q8 -------------------------------------------------------------------------------------------------------

// One |x_i| against the largest doubled bits m (sign shifted out: the doubled bits compare as unsigned in the order
// of |x|): compare, and keep b << 1 where it is larger.
#define MICROATTN_ARMV7EM_MAX(r) "cmp %[m], " r ", lsl #1\n\tit lo\n\tlsllo %[m], " r ", #1\n\t"

std::uint32_t linear_absmax_bits_armv7em(const float* x, std::size_t n) noexcept {
  std::uint32_t m = 0;
  const float* p = x;
  for (std::size_t i = n / 8; i != 0; --i)
    asm("ldmia %[p]!, {r4, r5, r6, r7, r8, r9, r10, r11}\n\t" MICROATTN_ARMV7EM_MAX("r4") MICROATTN_ARMV7EM_MAX("r5")
            MICROATTN_ARMV7EM_MAX("r6") MICROATTN_ARMV7EM_MAX("r7") MICROATTN_ARMV7EM_MAX("r8")
                MICROATTN_ARMV7EM_MAX("r9") MICROATTN_ARMV7EM_MAX("r10") MICROATTN_ARMV7EM_MAX("r11")
        : [m] "+r"(m), [p] "+r"(p)
        :
        : "cc", "memory", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11");
  for (std::size_t i = 0; i < n % 8; ++i) {
    const std::uint32_t b = float_bits(p[i]) << 1;
    m = b > m ? b : m;
  }
  return m >> 1;
}

// round-half-away(x / s), four at a time. FPv5 (Cortex-M7 with double precision) rounds so itself (VCVTA); FPv4
// converts 2t to fixed point with one fraction bit, T = trunc(2t) (2t is exact: |t| <= 127 and a hair), and then
// round-half-away(t) = T − trunc(t) = T − trunc(T / 2), two integer instructions.
void linear_quantize_armv7em(const float* x, std::size_t n, float s, std::int8_t* q) noexcept {
#if defined(__ARM_FP) && (__ARM_FP & 8)
#define MICROATTN_ARMV7EM_ROUND(r) "vcvta.s32.f32 " r ", " r "\n\t"
#else
#define MICROATTN_ARMV7EM_ROUND(r) "vcvt.s32.f32 " r ", " r ", #1\n\t"
#endif
  for (std::size_t i = n / 4; i != 0; --i) {
    std::int32_t v0, v1, v2, v3;
    asm("vldmia %[x]!, {s8-s11}\n\t"
        "vdiv.f32 s8, s8, %[s]\n\t"
        "vdiv.f32 s9, s9, %[s]\n\t"
        "vdiv.f32 s10, s10, %[s]\n\t"
        "vdiv.f32 s11, s11, %[s]\n\t" MICROATTN_ARMV7EM_ROUND("s8") MICROATTN_ARMV7EM_ROUND("s9")
            MICROATTN_ARMV7EM_ROUND("s10") MICROATTN_ARMV7EM_ROUND("s11")
        "vmov %[v0], %[v1], s8, s9\n\t"
        "vmov %[v2], %[v3], s10, s11"
        : [x] "+r"(x), [v0] "=r"(v0), [v1] "=r"(v1), [v2] "=r"(v2), [v3] "=r"(v3)
        : [s] "t"(s)
        : "s8", "s9", "s10", "s11", "memory");
#if !(defined(__ARM_FP) && (__ARM_FP & 8))
    const auto half = [](std::int32_t t) noexcept {  // trunc(t / 2): t + 1 before the shift where t < 0
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(t) + (static_cast<std::uint32_t>(t) >> 31)) >> 1;
    };
    v0 -= half(v0);
    v1 -= half(v1);
    v2 -= half(v2);
    v3 -= half(v3);
#endif
    asm("strb %[v0], [%[q]], #1\n\t"
        "strb %[v1], [%[q]], #1\n\t"
        "strb %[v2], [%[q]], #1\n\t"
        "strb %[v3], [%[q]], #1"
        : [q] "+r"(q)
        : [v0] "r"(v0), [v1] "r"(v1), [v2] "r"(v2), [v3] "r"(v3)
        : "memory");
  }
#undef MICROATTN_ARMV7EM_ROUND
  for (std::size_t i = 0; i < n % 4; ++i) {
    float t = x[i] / s;
#if defined(__ARM_FP) && (__ARM_FP & 8)
    asm("vcvta.s32.f32 %0, %0" : "+t"(t));
    q[i] = static_cast<std::int8_t>(static_cast<std::int32_t>(float_bits(t)));
#else
    float whole;
    asm("vcvt.s32.f32 %0, %1" : "=t"(whole) : "t"(t));
    asm("vcvt.s32.f32 %0, %0, #1" : "+t"(t));
    q[i] = static_cast<std::int8_t>(static_cast<std::int32_t>(float_bits(t) - float_bits(whole)));
#endif
  }
}

// clang-format off
// Eight columns of one row (asm text): an LDRD of the row's weights p, per word two SXTB16 and two SMLAD into a
// against the expanded x in x0–x3.
#define MICROATTN_ARMV7EM_DOT8(p, a)            \
  "ldrd %[wa], %[wb], [%[" p "]], #8\n\t"      \
  "sxtb16 %[t], %[wa], ror #8\n\t"             \
  "sxtb16 %[wa], %[wa]\n\t"                    \
  "smlad %[" a "], %[wa], %[x0], %[" a "]\n\t" \
  "smlad %[" a "], %[t], %[x1], %[" a "]\n\t"  \
  "sxtb16 %[t], %[wb], ror #8\n\t"             \
  "sxtb16 %[wb], %[wb]\n\t"                    \
  "smlad %[" a "], %[wb], %[x2], %[" a "]\n\t" \
  "smlad %[" a "], %[t], %[x3], %[" a "]\n\t"
// Eight columns of both rows: one LDM of x for the two.
#define MICROATTN_ARMV7EM_DOT8_X2                  \
  "ldmia %[xp]!, {%[x0], %[x1], %[x2], %[x3]}\n\t" \
  MICROATTN_ARMV7EM_DOT8("p0", "a0") MICROATTN_ARMV7EM_DOT8("p1", "a1")
#define MICROATTN_ARMV7EM_DOT16_X2 MICROATTN_ARMV7EM_DOT8_X2 MICROATTN_ARMV7EM_DOT8_X2
// clang-format on

// The int32 sums of `pairs` row pairs over `cols` columns (a multiple of 16; rows word-aligned) against the
// expanded x xx: rows (p, p + ldw), (p + 2·ldw, p + 3·ldw), ..., each pair's two sums stored at sums[0], sums[1],
// sums += 2 (ldw 0: one row twice). The whole loop in asm, 32 columns a step (an odd 16 enter at the step's second
// half): per pair 10 instructions besides the dot products (11 with an odd 16). It has no core register left for
// what it reloads per pair: those stay in s0–s5.
__attribute__((noinline)) void q8_pairs(const std::int8_t* p0, std::size_t ldw, const std::uint32_t* xx,
                                        std::size_t cols, std::int32_t* sums, std::size_t pairs) noexcept {
  // LDM fills its registers in ascending order: x0–x3 are pinned to ascending ones.
  register std::uint32_t x0 asm("r8"), x1 asm("r9"), x2 asm("r10"), x3 asm("r11");
  const std::int8_t* p1 = p0 + ldw;
  const std::uint32_t* xe = xx + cols / 2;
  // From a pair's end to the next pair, doubled, and under it whether cols / 16 is odd.
  std::uintptr_t t = ((2 * ldw - cols) << 1) | ((cols / 16) & 1);
  auto wa = reinterpret_cast<std::uintptr_t>(sums + 2 * pairs);
  auto wb = reinterpret_cast<std::uintptr_t>(xx);
  std::uint32_t a0, a1;
  const std::uint32_t* xp;
  asm volatile(
      "vmov s0, s1, %[t], %[wa]\n\t"
      "vmov s2, %[wb]\n\t"
      "movs %[a0], #0\n\t"
      "movs %[a1], #0\n\t"
      "vmov s4, s5, %[a0], %[a1]\n\t"  // zeros, to clear a0 and a1 without touching the flags
      "mov %[xp], %[wb]\n\t"
      "lsrs %[t], %[t], #1\n\t"  // C: enter at the second half
      "bcc 1f\n\t"
      "b 3f\n\t"
      "1:\n\t" MICROATTN_ARMV7EM_DOT16_X2 "3:\n\t" MICROATTN_ARMV7EM_DOT16_X2
      "cmp %[xp], %[xe]\n\t"
      "bne 1b\n\t"
      "strd %[a0], %[a1], [%[sums]], #8\n\t"
      "vmov %[t], %[wa], s0, s1\n\t"
      "lsrs %[t], %[t], #1\n\t"
      "add %[p0], %[p0], %[t]\n\t"
      "add %[p1], %[p1], %[t]\n\t"
      "teq %[sums], %[wa]\n\t"  // leaves C
      "beq 9f\n\t"
      "vmov %[xp], s2\n\t"
      "vmov %[a0], %[a1], s4, s5\n\t"
      "bcc 1b\n\t"
      "b 3b\n\t"
      "9:"
      : [a0] "=&r"(a0), [a1] "=&r"(a1), [p0] "+r"(p0), [p1] "+r"(p1), [xp] "=&r"(xp), [xe] "+r"(xe), [sums] "+r"(sums),
        [x0] "=&r"(x0), [x1] "=&r"(x1), [x2] "=&r"(x2), [x3] "=&r"(x3), [wa] "+r"(wa), [wb] "+r"(wb), [t] "+r"(t)
      :
      : "cc", "memory", "s0", "s1", "s2", "s4", "s5");
}

// Four columns of one row against the expanded pair (xe, xo).
MICROATTN_ARMV7EM_INLINE std::int32_t dot4(std::uint32_t w, std::uint32_t xe, std::uint32_t xo,
                                           std::int32_t acc) noexcept {
  return __smlad(static_cast<std::int32_t>(__sxtb16(ror8(w))), static_cast<std::int32_t>(xo),
                 __smlad(static_cast<std::int32_t>(__sxtb16(w)), static_cast<std::int32_t>(xe), acc));
}

// sums[i] = the int32 sum of row i (from p, stride ldw) over one segment, for i < rows: its first `main` columns
// (a multiple of 16, rows word-aligned) through q8_pairs, the words after them and the bytes of its last seg % 4
// columns in C (xq: those columns of x), two rows at a time. An odd last row is summed twice, into sums[rows] too.
// This and the drivers below are compiled -Os (inside the file's -O2): they run per block and segment, not per
// MAC, and -O2 made them 360 B larger.
__attribute__((optimize("Os"))) void q8_row_sums(const std::int8_t* p, std::size_t ldw, std::size_t rows,
                                                 std::size_t main, std::size_t seg, const std::uint32_t* xs,
                                                 const std::int8_t* xq, std::int32_t* sums) noexcept {
  if (main != 0) {
    if (rows >= 2) q8_pairs(p, ldw, xs, main, sums, rows / 2);
    if (rows % 2 != 0) q8_pairs(p + (rows - 1) * ldw, 0, xs, main, sums + rows - 1, 1);
    if (main == seg) return;
  }
  const std::size_t words = (seg - main) / 4, tail = seg % 4;
  for (std::size_t r = 0; r < rows; r += 2) {
    const std::size_t r1 = r + 1 < rows ? r + 1 : r;  // the last row twice: its second sum is the same
    const std::int8_t* w0 = p + r * ldw + main;
    const std::int8_t* w1 = p + r1 * ldw + main;
    std::int32_t a0 = main != 0 ? sums[r] : 0, a1 = main != 0 ? sums[r1] : 0;
    const std::uint32_t* xp = xs + main / 2;
    for (std::size_t left = words; left != 0; --left) {
      const std::uint32_t xe = xp[0], xo = xp[1];
      xp += 2;
      a0 = dot4(load_word(w0), xe, xo, a0);
      a1 = dot4(load_word(w1), xe, xo, a1);
      w0 += 4;
      w1 += 4;
    }
    for (std::size_t c = 0; c < tail; ++c) {
      const std::int32_t xc = xq[c];
      a0 += xc * w0[c];
      a1 += xc * w1[c];
    }
    sums[r] = a0;
    sums[r1] = a1;
  }
}

// out[i] = fma(float(sums[i])·sw[i·st], sx, in_i) (`fused`), else in_i + (float(sums[i])·sw[i·st])·sx, for i < n;
// in_i = in[i], or in[0] for every i when not `step`. Four rows a step in asm where fused with consecutive scales.
void q8_scale_rows(const std::int32_t* sums, const float* sw, std::size_t st, const float* in, bool step, float* out,
                   std::size_t n, float sx, bool fused) noexcept {
  if (fused && st == 1 && n >= 4) {
    const float* const end = out + (n & ~std::size_t{3});
    const std::size_t in_inc = step ? 16 : 0;
    asm volatile(
        "1:\n\t"
        "vldmia %[s]!, {s0-s3}\n\t"
        "vcvt.f32.s32 s0, s0\n\t"
        "vcvt.f32.s32 s1, s1\n\t"
        "vcvt.f32.s32 s2, s2\n\t"
        "vcvt.f32.s32 s3, s3\n\t"
        "vldmia %[sw]!, {s4-s7}\n\t"
        "vmul.f32 s0, s0, s4\n\t"
        "vmul.f32 s1, s1, s5\n\t"
        "vmul.f32 s2, s2, s6\n\t"
        "vmul.f32 s3, s3, s7\n\t"
        "vldmia %[in], {s8-s11}\n\t"
        "add %[in], %[in], %[ii]\n\t"
        "vfma.f32 s8, s0, %[x]\n\t"
        "vfma.f32 s9, s1, %[x]\n\t"
        "vfma.f32 s10, s2, %[x]\n\t"
        "vfma.f32 s11, s3, %[x]\n\t"
        "vstmia %[out]!, {s8-s11}\n\t"
        "cmp %[out], %[e]\n\t"
        "bne 1b"
        : [s] "+r"(sums), [sw] "+r"(sw), [in] "+r"(in), [out] "+r"(out)
        : [e] "r"(end), [ii] "r"(in_inc), [x] "t"(sx)
        : "cc", "memory", "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11");
    n %= 4;
  }
  const auto sum = [&sums](std::size_t i) noexcept {  // sums as advanced by the asm
    std::int32_t s;
    std::memcpy(&s, sums + i, sizeof s);  // sums may be y's floats (q8_row_block)
    return static_cast<float>(s);
  };
  if (fused) {
    for (std::size_t i = 0; i < n; ++i, sw += st) out[i] = fmadd(sum(i) * *sw, sx, in[step ? i : 0]);
  } else {
    if (n >= 2 && in == out) {  // the block's sums of rounded terms: two rows a step, any stride
      const float* const end = out + (n & ~std::size_t{1});
      asm volatile(
          "1:\n\t"
          "vldmia %[s]!, {s0-s1}\n\t"
          "vcvt.f32.s32 s0, s0\n\t"
          "vcvt.f32.s32 s1, s1\n\t"
          "vldr s2, [%[sw]]\n\t"
          "add %[sw], %[sw], %[st]\n\t"
          "vldr s3, [%[sw]]\n\t"
          "add %[sw], %[sw], %[st]\n\t"
          "vmul.f32 s0, s0, s2\n\t"
          "vmul.f32 s1, s1, s3\n\t"
          "vmul.f32 s0, s0, %[x]\n\t"
          "vmul.f32 s1, s1, %[x]\n\t"
          "vldmia %[out], {s2-s3}\n\t"
          "vadd.f32 s2, s2, s0\n\t"
          "vadd.f32 s3, s3, s1\n\t"
          "vstmia %[out]!, {s2-s3}\n\t"
          "cmp %[out], %[e]\n\t"
          "bne 1b"
          : [s] "+r"(sums), [sw] "+r"(sw), [out] "+r"(out)
          : [e] "r"(end), [st] "r"(st * sizeof(float)), [x] "t"(sx)
          : "cc", "memory", "s0", "s1", "s2", "s3");
      in = out;
      n %= 2;
    }
    for (std::size_t i = 0; i < n; ++i, sw += st) {
      float v = sum(i) * *sw * sx;
      asm("" : "+t"(v));  // rounded on its own, not fused into the sum
      out[i] = in[i] + v;
    }
  }
}

// The chunk's rows in blocks of 16 (their int32 sums on the stack), segment after segment, scaled as the kernel
// always has (the tests' exact cases pin it): with one segment and one scale per row (`direct`),
// y = fma(sum·sw, sx, base); else per row f = Σ_s (sum·sw)·sx (`main` == seg: every segment through q8_pairs) or
// f = Σ_s fma(sum·sw, sx, f) (the others), then y = base + f. Where y starts from the bias, the direct case needs
// no block: y itself holds the sums until they are scaled.
__attribute__((optimize("Os"))) void q8_row_block(const std::int8_t* w, std::size_t ldw, std::size_t n,
                                                  const Q8Chunk& ch, const std::uint32_t* xx,
                                                  std::size_t main) noexcept {
  static constexpr float zeros[4] = {};
  const std::size_t seg = ch.seg, segs = ch.len / seg, words = seg / 4 * 2, st = ch.sw_stride;
  const std::size_t rps = ch.rows_per_scale;
  const bool direct = main == seg && segs == 1 && rps == 1, fused = direct || main != seg;
  const float* const bias = ch.bias != nullptr ? ch.bias : zeros;
  if (direct && ch.first) {
    auto* sums = reinterpret_cast<std::int32_t*>(ch.y);
    const float sx = ch.sx[0];
    q8_row_sums(w, ldw, n & ~std::size_t{1}, main, seg, xx, ch.q, sums);
    if (n % 2 != 0) {  // the last row's second sum would land past y
      std::int32_t last[2];
      q8_pairs(w + (n - 1) * ldw, 0, xx, main, last, 1);
      std::memcpy(sums + n - 1, last, sizeof last[0]);
    }
    q8_scale_rows(sums, ch.sw, st, bias, ch.bias != nullptr, ch.y, n, sx, true);
    return;
  }
  constexpr std::size_t block = 16;  // stack: 128 B of sums and floats
  for (std::size_t r0 = 0; r0 < n; r0 += block) {
    const std::size_t rows = n - r0 < block ? n - r0 : block;
    std::int32_t sums[block + 1];
    // f from −0 where it sums rounded terms (−0 + v is v, bit for bit), from +0 where it is the fma's addend
    float f[block];
    for (std::size_t i = 0; i < rows; ++i) f[i] = main != seg ? 0.0f : -0.0f;
    float* const acc = direct ? ch.y + r0 : f;  // direct: not the first chunk, y accumulates
    for (std::size_t s = 0; s < segs; ++s) {
      q8_row_sums(w + r0 * ldw + s * seg, ldw, rows, main, seg, xx + s * words, ch.q + s * seg + seg / 4 * 4, sums);
      // Rows with a scale each at stride st, or runs of rows sharing one (groups spanning rows: one segment).
      for (std::size_t i = 0; i < rows;) {
        const std::size_t r = r0 + i, run = rps == 1 ? rows : rps - r % rps < rows - i ? rps - r % rps : rows - i;
        q8_scale_rows(sums + i, row_scales(ch, r) + s, rps == 1 ? st : 0, acc + i, true, acc + i, run, ch.sx[s], fused);
        i += run;
      }
    }
    if (direct) continue;
    for (std::size_t i = 0; i < rows; ++i) {
      float* const y = ch.y + r0 + i;
      *y = (ch.first ? bias[ch.bias != nullptr ? r0 + i : 0] : *y) + f[i];
    }
  }
}

__attribute__((optimize("Os"))) void linear_q8_1x2_armv7em(const std::int8_t* w, std::size_t ldw, std::size_t n,
                                                           const Q8Chunk& ch) noexcept {
  assert(ch.rows == 1);
  const std::size_t seg = ch.seg, segs = ch.len / seg, quads = seg / 4;
  // x as SXTB16 pairs, segment after segment (each segment's last seg % 4 columns stay in ch.q).
  alignas(8) std::uint32_t xx[linear_q8_chunk_bytes / 2];
  if (seg % 16 == 0 && reinterpret_cast<std::uintptr_t>(ch.q) % 4 == 0) {
    // 16 columns a step (LDM wants the words aligned; stored pairwise so that STM takes them in order)
    const std::int8_t* in = ch.q;
    std::uint32_t* out = xx;
    std::size_t steps = ch.len / 16;
    asm volatile(
        "1:\n\t"
        "ldmia %[in]!, {r4, r6, r8, r10}\n\t"
        "sxtb16 r5, r4, ror #8\n\t"
        "sxtb16 r4, r4\n\t"
        "sxtb16 r7, r6, ror #8\n\t"
        "sxtb16 r6, r6\n\t"
        "sxtb16 r9, r8, ror #8\n\t"
        "sxtb16 r8, r8\n\t"
        "sxtb16 r11, r10, ror #8\n\t"
        "sxtb16 r10, r10\n\t"
        "stmia %[out]!, {r4, r5, r6, r7, r8, r9, r10, r11}\n\t"
        "subs %[n], %[n], #1\n\t"
        "bne 1b"
        : [in] "+r"(in), [out] "+r"(out), [n] "+r"(steps)
        :
        : "cc", "memory", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11");
  } else {
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
  q8_row_block(w, ldw, n, ch, xx, aligned ? seg / 16 * 16 : 0);
}

}  // namespace

MICROATTN_LINEAR_CORTEX_M_TABLES("armv7em", "linear_f32_gemm_armv7em", "linear_f16_1x4_armv7em",
                                 "linear_q8_1x2_armv7em", linear_f16_1x4_armv7em, linear_q8_1x2_armv7em,
                                 linear_absmax_bits_armv7em, linear_quantize_armv7em)

}  // namespace detail
}  // namespace microattn

#endif
