// Portable scalar kernels: the only path on Cortex-M (where xsimd has no architecture) and the one that
// -Dsimd=scalar selects. No xsimd include here (xsimd.hpp does not even compile against newlib).
// Nothing is packed: the stack stays at a few hundred bytes, which is what an MCU can spare.
#include <cstdint>
#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/exp/constants.hpp"
#include "kernels/scalar_math.hpp"
#include "microattn/config.hpp"

namespace microattn {
namespace detail {

// One 2^x out of line (kernels/attention.hpp), for the cold uses (alpha once per block, short tiles, the test hook, the
// exact path of attention): each inlined copy costs ~90 bytes of flash.
__attribute__((noinline)) float exp2_nonpositive_call(float x) noexcept { return exp2_nonpositive_float(x); }

namespace {

constexpr std::size_t gemm_mr = 4;
constexpr std::size_t gemm_nr = 4;

// Cortex-M with a single-precision FPU: four adjacent floats in one VLDM instead of four VLDR (GCC never
// merges them). One instruction instead of four, and no more cycles (Cortex-M4 TRM: VLDM 1 + N, VLDR 2). The
// registers are fixed by the asm: the tiles below use two disjoint sets, so both operands of a step can be
// live at once. Elsewhere: four plain loads.
// name##_four<Next>: y0..y3 = p[0..3], then with Next p += 4 (VLDM's write-back: no add).
#if defined(__arm__) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M' && defined(__ARM_FP) && (__ARM_FP & 4)
#define MICROATTN_DEFINE_LOAD4_FOUR(name, r0, r1, r2, r3)                                                          \
  template <bool Next>                                                                                             \
  MICROATTN_SCALAR_INLINE void name##_four(const float*& p, float& y0, float& y1, float& y2, float& y3) noexcept { \
    register float x0 asm(r0);                                                                                     \
    register float x1 asm(r1);                                                                                     \
    register float x2 asm(r2);                                                                                     \
    register float x3 asm(r3);                                                                                     \
    if constexpr (Next)                                                                                            \
      asm("vldmia %4!, {" r0 "-" r3 "}"                                                                            \
          : "=t"(x0), "=t"(x1), "=t"(x2), "=t"(x3), "+r"(p)                                                        \
          : "m"(*reinterpret_cast<const float(*)[4]>(p)));                                                         \
    else                                                                                                           \
      asm("vldmia %4, {" r0 "-" r3 "}"                                                                             \
          : "=t"(x0), "=t"(x1), "=t"(x2), "=t"(x3)                                                                 \
          : "r"(p), "m"(*reinterpret_cast<const float(*)[4]>(p)));                                                 \
    y0 = x0, y1 = x1, y2 = x2, y3 = x3;                                                                            \
  }
#else
#define MICROATTN_DEFINE_LOAD4_FOUR(name, r0, r1, r2, r3)                                                          \
  template <bool Next>                                                                                             \
  MICROATTN_SCALAR_INLINE void name##_four(const float*& p, float& y0, float& y1, float& y2, float& y3) noexcept { \
    y0 = p[0], y1 = p[1], y2 = p[2], y3 = p[3];                                                                    \
    if constexpr (Next) p += 4;                                                                                    \
  }
#endif
// name(p, …) loads four floats at p; name##_next(p, …) loads them and advances p past them.
#define MICROATTN_DEFINE_LOAD4(name, r0, r1, r2, r3)                                                          \
  MICROATTN_DEFINE_LOAD4_FOUR(name, r0, r1, r2, r3)                                                           \
  [[maybe_unused]] MICROATTN_SCALAR_INLINE void name(const float* p, float& y0, float& y1, float& y2,         \
                                                     float& y3) noexcept {                                    \
    name##_four<false>(p, y0, y1, y2, y3);                                                                    \
  }                                                                                                           \
  [[maybe_unused]] MICROATTN_SCALAR_INLINE void name##_next(const float*& p, float& y0, float& y1, float& y2, \
                                                            float& y3) noexcept {                             \
    name##_four<true>(p, y0, y1, y2, y3);                                                                     \
  }
MICROATTN_DEFINE_LOAD4(load4_a, "s24", "s25", "s26", "s27")
MICROATTN_DEFINE_LOAD4(load4_b, "s28", "s29", "s30", "s31")
#undef MICROATTN_DEFINE_LOAD4
#undef MICROATTN_DEFINE_LOAD4_FOUR

// Register tiles written out: every accumulator and operand is a named local, so they live in registers at
// any optimization level (at -Os GCC unrolls nothing, and arrays such as acc[4][4] would stay on the stack:
// 7 instructions per multiply-add instead of 1.6). 4×4: 16 accumulators + 8 operands fit the 32
// single-precision registers of a Cortex-M4F/M7. Each element is summed over p in order, one fused
// multiply-add at a time, whichever tile computes it (so edge and full tiles round alike).
//
// B operand of a tile: four columns j0..j0+3 of b. Not transposed: one row of b per step (four adjacent
// floats, then + ldb: one pointer); transposed (b stored n×k): four rows of b read along p (four pointers,
// each load post-increments).
template <bool TransposeB>
struct BColumns;

template <>
struct BColumns<false> {
  const float* __restrict b;
  std::size_t ldb;
  BColumns(const GemmArgs& g, std::size_t j0) noexcept : b(g.b + j0), ldb(g.ldb) {}
  // Loads b(p, j0..j0+3) into y0..y3 and advances to p + 1.
  __attribute__((always_inline)) void next(float& y0, float& y1, float& y2, float& y3) noexcept {
    load4_b(b, y0, y1, y2, y3);
    b += ldb;
  }
};

template <>
struct BColumns<true> {
  const float* __restrict b0;
  const float* __restrict b1;
  const float* __restrict b2;
  const float* __restrict b3;
  BColumns(const GemmArgs& g, std::size_t j0) noexcept
      : b0(g.b + j0 * g.ldb), b1(b0 + g.ldb), b2(b1 + g.ldb), b3(b2 + g.ldb) {}
  __attribute__((always_inline)) void next(float& y0, float& y1, float& y2, float& y3) noexcept {
    y0 = *b0++;
    y1 = *b1++;
    y2 = *b2++;
    y3 = *b3++;
  }
};

// The 16 accumulators of a 4×4 tile, named (a struct of scalars, which GCC keeps in registers like the locals
// they replace). fma adds the outer product of a0..a3 (rows) and b0..b3 (columns), one fused multiply-add per
// element, in row order.
struct Tile4x4 {
  float c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33;
  MICROATTN_SCALAR_INLINE void fma(float a0, float a1, float a2, float a3, float b0, float b1, float b2,
                                   float b3) noexcept {
    c00 = fmadd(a0, b0, c00);
    c01 = fmadd(a0, b1, c01);
    c02 = fmadd(a0, b2, c02);
    c03 = fmadd(a0, b3, c03);
    c10 = fmadd(a1, b0, c10);
    c11 = fmadd(a1, b1, c11);
    c12 = fmadd(a1, b2, c12);
    c13 = fmadd(a1, b3, c13);
    c20 = fmadd(a2, b0, c20);
    c21 = fmadd(a2, b1, c21);
    c22 = fmadd(a2, b2, c22);
    c23 = fmadd(a2, b3, c23);
    c30 = fmadd(a3, b0, c30);
    c31 = fmadd(a3, b1, c31);
    c32 = fmadd(a3, b2, c32);
    c33 = fmadd(a3, b3, c33);
  }
};

// The tiles are out of line: inlined into the loops over tiles, their pointers would compete with the loop
// variables for the 13 general registers and spill.
template <bool TransposeB>
__attribute__((noinline)) void gemm_4x4_scalar(const GemmArgs& g, std::size_t i0, std::size_t j0) noexcept {
  const float* __restrict a0 = g.a + i0 * g.lda;
  const float* __restrict a1 = a0 + g.lda;
  const float* __restrict a2 = a1 + g.lda;
  const float* __restrict a3 = a2 + g.lda;
  BColumns<TransposeB> b(g, j0);
  Tile4x4 t{};
  // Tested at the bottom: one branch a step, not two. k >= 1: every caller's inner dimension is a view's
  // column count (matmul, attention's d_k, a layer's model_dim), which the entry points check non-zero.
  std::size_t p = g.k;
  do {
    const float x0 = *a0++, x1 = *a1++, x2 = *a2++, x3 = *a3++;
    float y0, y1, y2, y3;
    b.next(y0, y1, y2, y3);
    t.fma(x0, x1, x2, x3, y0, y1, y2, y3);
  } while (--p != 0);
  float* __restrict c = g.c + i0 * g.ldc + j0;
  c[0] = t.c00, c[1] = t.c01, c[2] = t.c02, c[3] = t.c03;
  c += g.ldc;
  c[0] = t.c10, c[1] = t.c11, c[2] = t.c12, c[3] = t.c13;
  c += g.ldc;
  c[0] = t.c20, c[1] = t.c21, c[2] = t.c22, c[3] = t.c23;
  c += g.ldc;
  c[0] = t.c30, c[1] = t.c31, c[2] = t.c32, c[3] = t.c33;
}

// One row against four columns (the rows left below the last 4-row tile). Transposed: four contiguous rows of b
// (linear()'s weights for one row of x, the decoding case), pointers that only step by one element, which Armv7-M
// loads with writeback (a run-time step costs twice the instructions at -Os); otherwise b's columns, ldb apart.
// Each sum runs over p in order.
template <bool Transposed>
inline __attribute__((always_inline)) void gemm_1x4_dots(const GemmArgs& g, std::size_t i, std::size_t j0) noexcept {
  const float* __restrict a = g.a + i * g.lda;
  const std::size_t step = Transposed ? 1 : g.ldb, next_col = Transposed ? g.ldb : 1;
  const float* __restrict b0 = Transposed ? g.b + j0 * g.ldb : g.b + j0;
  const float* __restrict b1 = b0 + next_col;
  const float* __restrict b2 = b1 + next_col;
  const float* __restrict b3 = b2 + next_col;
  float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
  for (std::size_t p = g.k; p != 0; --p, b0 += step, b1 += step, b2 += step, b3 += step) {
    const float x = *a++;
    c0 = fmadd(x, *b0, c0);
    c1 = fmadd(x, *b1, c1);
    c2 = fmadd(x, *b2, c2);
    c3 = fmadd(x, *b3, c3);
  }
  float* __restrict c = g.c + i * g.ldc + j0;
  c[0] = c0, c[1] = c1, c[2] = c2, c[3] = c3;
}

__attribute__((noinline)) void gemm_1x4_scalar(const GemmArgs& g, std::size_t i, std::size_t j0) noexcept {
  if (g.transpose_b)
    gemm_1x4_dots<true>(g, i, j0);
  else
    gemm_1x4_dots<false>(g, i, j0);
}

// One row against eight contiguous rows of b (transpose_b: linear()'s one row of x): x loaded once per eight
// products, where gemm_1x4_scalar loads it per four (Armv7-M has the registers for the eight pointers and sums).
__attribute__((noinline)) void gemm_1x8t_scalar(const GemmArgs& g, std::size_t i, std::size_t j0) noexcept {
  const float* __restrict a = g.a + i * g.lda;
  const float* __restrict b[8];
  for (std::size_t r = 0; r < 8; ++r) b[r] = g.b + (j0 + r) * g.ldb;
  const float* __restrict b0 = b[0];
  const float* __restrict b1 = b[1];
  const float* __restrict b2 = b[2];
  const float* __restrict b3 = b[3];
  const float* __restrict b4 = b[4];
  const float* __restrict b5 = b[5];
  const float* __restrict b6 = b[6];
  const float* __restrict b7 = b[7];
  float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f, c4 = 0.0f, c5 = 0.0f, c6 = 0.0f, c7 = 0.0f;
  for (std::size_t p = g.k; p != 0; --p) {
    const float x = *a++;
    c0 = fmadd(x, *b0++, c0);
    c1 = fmadd(x, *b1++, c1);
    c2 = fmadd(x, *b2++, c2);
    c3 = fmadd(x, *b3++, c3);
    c4 = fmadd(x, *b4++, c4);
    c5 = fmadd(x, *b5++, c5);
    c6 = fmadd(x, *b6++, c6);
    c7 = fmadd(x, *b7++, c7);
  }
  float* __restrict c = g.c + i * g.ldc + j0;
  c[0] = c0, c[1] = c1, c[2] = c2, c[3] = c3, c[4] = c4, c[5] = c5, c[6] = c6, c[7] = c7;
}

// Four rows against one column (the columns left right of the last 4-column tile), and one element.
__attribute__((noinline)) void gemm_4x1_scalar(const GemmArgs& g, std::size_t i0, std::size_t j) noexcept {
  const float* __restrict a0 = g.a + i0 * g.lda;
  const float* __restrict a1 = a0 + g.lda;
  const float* __restrict a2 = a1 + g.lda;
  const float* __restrict a3 = a2 + g.lda;
  const float* __restrict b = g.transpose_b ? g.b + j * g.ldb : g.b + j;
  const std::size_t step = g.transpose_b ? 1 : g.ldb;
  float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
  for (std::size_t p = g.k; p != 0; --p) {
    const float y = *b;
    b += step;
    c0 = fmadd(*a0++, y, c0);
    c1 = fmadd(*a1++, y, c1);
    c2 = fmadd(*a2++, y, c2);
    c3 = fmadd(*a3++, y, c3);
  }
  float* __restrict c = g.c + i0 * g.ldc + j;
  c[0] = c0;
  c[g.ldc] = c1;
  c[2 * g.ldc] = c2;
  c[3 * g.ldc] = c3;
}

__attribute__((noinline)) void gemm_1x1_scalar(const GemmArgs& g, std::size_t i, std::size_t j) noexcept {
  const float* __restrict a = g.a + i * g.lda;
  const float* __restrict b = g.transpose_b ? g.b + j * g.ldb : g.b + j;
  const std::size_t step = g.transpose_b ? 1 : g.ldb;
  float acc = 0.0f;
  for (std::size_t p = g.k; p != 0; --p, b += step) acc = fmadd(*a++, *b, acc);
  g.c[i * g.ldc + j] = acc;
}

template <bool TransposeB>
void gemm_tiles_scalar(const GemmArgs& g) noexcept {
  const std::size_t m4 = g.m - g.m % gemm_mr, n4 = g.n - g.n % gemm_nr;
  for (std::size_t i0 = 0; i0 < m4; i0 += gemm_mr) {
    for (std::size_t j0 = 0; j0 < n4; j0 += gemm_nr) gemm_4x4_scalar<TransposeB>(g, i0, j0);
    for (std::size_t j = n4; j < g.n; ++j) gemm_4x1_scalar(g, i0, j);
  }
  for (std::size_t i = m4; i < g.m; ++i) {
    std::size_t j0 = 0;
    if (TransposeB)
      for (; j0 + 2 * gemm_nr <= n4; j0 += 2 * gemm_nr) gemm_1x8t_scalar(g, i, j0);
    for (; j0 < n4; j0 += gemm_nr) gemm_1x4_scalar(g, i, j0);
    for (std::size_t j = n4; j < g.n; ++j) gemm_1x1_scalar(g, i, j);
  }
}

void gemm_scalar(const GemmArgs& g) noexcept {
  if (g.transpose_b) {
    gemm_tiles_scalar<true>(g);
  } else {
    gemm_tiles_scalar<false>(g);
  }
}

__attribute__((noinline)) void exp_scalar(const float* x, float* y, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) y[i] = exp_float(x[i]);
}

void softmax_row_scalar(float* x, std::size_t n) noexcept {
  float m = x[0];
  for (std::size_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;  // a NaN is caught by the sum below
  if (m == -INFINITY) {
    // All −inf (or −inf and NaN): zeros, unless a NaN is there, which must still show.
    bool has_nan = false;
    for (std::size_t i = 0; i < n; ++i) has_nan = has_nan || x[i] != x[i];
    for (std::size_t i = 0; i < n; ++i) x[i] = has_nan ? NAN : 0.0f;
    return;
  }
  // x − m in place, then the exp kernel over the row (one inlined exp in the library, not two), then the sum.
  // NaN − m is NaN, exp(NaN) is NaN, so the sum turns NaN.
  for (std::size_t i = 0; i < n; ++i) x[i] -= m;
  exp_scalar(x, x, n);
  float sum = 0.0f;
  for (std::size_t i = 0; i < n; ++i) sum += x[i];
  const float inv = 1.0f / sum;
  for (std::size_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace
}  // namespace detail
}  // namespace microattn

// The attention primitives, then the row kernels' asm loops: parts of this translation unit (in this order, where
// they stood: GCC's register allocation follows the order of the definitions), in files of their own.
// clang-format off
#include "kernels/attention/scalar_tiles.hpp"
#include "kernels/attention/scalar_rows_asm.hpp"
// clang-format on

namespace microattn {
namespace detail {

// ---- row kernels (one query or one row of a per row, see kernels/attention.hpp) ----
// Outside the anonymous namespace: the Helium table uses them too (it has no row kernels of its own yet).

namespace {

// Scores of query rows a and b against the four keys k, k + ldk, k + 2·ldk, k + 3·ldk (d elements each): b's to
// sb[0..3], then a's to sa[0..3] (sb may be sa: a's land last). Out of line so that its loop's six pointers stay in
// registers: inlined in the key loop, GCC at -Os spilled them (12 loads and stores per element).
__attribute__((noinline)) void rows_dot_2x4(const float* a, const float* b, const float* k, std::size_t ldk,
                                            std::size_t d, float* sa, float* sb) noexcept {
  const float* k0 = k;
  const float* k1 = k + ldk;
  const float* k2 = k1 + ldk;
  const float* k3 = k2 + ldk;
  Sums2x4 sums;
  for (std::size_t p = d; p != 0; --p) {
    const float x = *a++, y = *b++;
    const float w0 = *k0++, w1 = *k1++, w2 = *k2++, w3 = *k3++;
    sums.add(x, y, w0, w1, w2, w3);
  }
  sums.store(sa, sb);
}
}  // namespace

// Two query rows at a time (decoding: the rows of one K/V head's query group) against four keys at a time: each
// element of q loaded once for four keys, eight sums in registers, pointers that step by one (Cortex-M loads with
// writeback). Each sum over p in order, as for one key: the same floats whatever the blocking.
void rows_dot_scalar(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const float* k, std::size_t ldk,
                     std::size_t bk, float* s, std::size_t lds) noexcept {
  row_pairs(q, ldq, s, lds, nr, [&](const float* q0, const float* q1, float* s0, float* s1) MICROATTN_SCALAR_LAMBDA {
#if MICROATTN_ROWS_ASM
    if (d == rows_d8 && bk != 0) return rows_dot_2xn_d8(q0, q1, k, ldk, bk, s0, s1);
#endif
    const float* kj = k;
    std::size_t j = bk;
    for (; j >= 4; j -= 4, kj += 4 * ldk, s0 += 4, s1 += 4) rows_dot_2x4(q0, q1, kj, ldk, d, s0, s1);
    for (; j != 0; --j, kj += ldk) {
      const float* a = q0;
      const float* b = q1;
      const float* kp = kj;
      float acc0 = 0.0f, acc1 = 0.0f;
      for (std::size_t p = d; p != 0; --p) {
        const float x = *kp++;
        acc0 = fmadd(*a++, x, acc0);
        acc1 = fmadd(*b++, x, acc1);
      }
      *s1++ = acc1;  // s1 is s0 for a last single row: acc0 (the same sum) lands last
      *s0++ = acc0;
    }
  });
}

namespace {

// The asm loops over scores two at a time: %[pairs] = n / 2 passes of label 1 (none: straight to 2), then for n odd
// the last score in s0 (even: on to label 3, past it).
// clang-format off
#define MICROATTN_PAIRS_HEAD \
  "lsrs %[pairs], %[n], #1\n\t" \
  "beq 2f\n" \
  "1:\n\t"
#define MICROATTN_PAIRS_TAIL \
  "subs %[pairs], %[pairs], #1\n\t" \
  "bne 1b\n" \
  "2:\n\t" \
  "lsls %[pairs], %[n], #31\n\t" \
  "beq 3f\n\t" \
  "vldr s0, [%[s]]\n\t"
// clang-format on

// mb = max(mb, s[0..n)); a NaN is passed over (it shows in its own 2^(s − m)). VMAXNM on FPv5 (the only M-profile
// FPU with double precision): what the comparison below does, one instruction instead of three; two scores a loop.
MICROATTN_SCALAR_INLINE float rows_max(const float* s, std::size_t n, float mb) noexcept {
#if MICROATTN_ROWS_ASM && (__ARM_FP & 8)
  std::size_t pairs;
  asm(MICROATTN_PAIRS_HEAD
      "vldmia %[s]!, {s0-s1}\n\t"
      "vmaxnm.f32 %[mb], %[mb], s0\n\t"
      "vmaxnm.f32 %[mb], %[mb], s1\n\t" MICROATTN_PAIRS_TAIL
      "vmaxnm.f32 %[mb], %[mb], s0\n"
      "3:"
      : [mb] "+t"(mb), [s] "+r"(s), [pairs] "=&r"(pairs)
      : [n] "r"(n)
      : "s0", "s1", "cc", "memory");
#else
  for (std::size_t j = 0; j < n; ++j) mb = s[j] > mb ? s[j] : mb;
#endif
  return mb;
}

// s[j] = 2^(s[j] − m) for j < n (exp2_nonpositive_float, the same operations in asm on Cortex-M); returns their
// sum, added in order. Two scores a loop: their Horner addends interleaved (exp2_addends) and reloaded by one VLDM,
// their exponents moved by one VMOV each way, their results stored by one VSTM.
MICROATTN_SCALAR_INLINE float rows_exp2_sum(float* s, std::size_t n, float m) noexcept {
  float sum = 0.0f;
#if MICROATTN_ROWS_ASM
  using namespace exp2_constants;
// x = x_min > x ? x_min : x, or x = x < x_min ? x_min : x without VSEL (a NaN stays)
// clang-format off
#if __ARM_FP & 8
#define MICROATTN_EXP2_CLAMP(x) \
  "vcmp.f32 %[x_min], " x "\n\t" \
  "vmrs APSR_nzcv, fpscr\n\t" \
  "vselgt.f32 " x ", %[x_min], " x "\n\t"
#else
#define MICROATTN_EXP2_CLAMP(x) \
  "vcmp.f32 " x ", %[x_min]\n\t" \
  "vmrs APSR_nzcv, fpscr\n\t" \
  "it mi\n\t" \
  "vmovmi.f32 " x ", %[x_min]\n\t"
#endif
  // clang-format on
  std::uint32_t e0, e1;
  std::size_t pairs;
  asm(MICROATTN_PAIRS_HEAD
      "vldmia %[s], {s0-s1}\n\t"
      "vsub.f32 s0, s0, %[m]\n\t"
      "vsub.f32 s1, s1, %[m]\n\t"
      MICROATTN_EXP2_CLAMP("s0")
      MICROATTN_EXP2_CLAMP("s1")
      "vadd.f32 s2, s0, %[magic]\n\t"  // t
      "vadd.f32 s3, s1, %[magic]\n\t"
      "vmov %[e0], %[e1], s2, s3\n\t"
      "vsub.f32 s2, s2, %[magic]\n\t"
      "vsub.f32 s3, s3, %[magic]\n\t"
      "vsub.f32 s0, s0, s2\n\t"  // r
      "vsub.f32 s1, s1, s3\n\t"
      "vldmia %[c], {s4-s15}\n\t"  // c5, c5, … c0, c0: each step's multiply-add overwrites its addend
      "add %[e0], %[bias], %[e0], lsl #23\n\t"  // 2^n's bits
      "add %[e1], %[bias], %[e1], lsl #23\n\t"
      "vfma.f32 s4, %[c6], s0\n\t"
      "vfma.f32 s5, %[c6], s1\n\t"
      "vfma.f32 s6, s4, s0\n\t"
      "vfma.f32 s7, s5, s1\n\t"
      "vfma.f32 s8, s6, s0\n\t"
      "vfma.f32 s9, s7, s1\n\t"
      "vfma.f32 s10, s8, s0\n\t"
      "vfma.f32 s11, s9, s1\n\t"
      "vfma.f32 s12, s10, s0\n\t"
      "vfma.f32 s13, s11, s1\n\t"
      "vfma.f32 s14, s12, s0\n\t"
      "vfma.f32 s15, s13, s1\n\t"
      "vmov s2, s3, %[e0], %[e1]\n\t"
      "vmul.f32 s14, s14, s2\n\t"
      "vmul.f32 s15, s15, s3\n\t"
      "vadd.f32 %[sum], %[sum], s14\n\t"
      "vadd.f32 %[sum], %[sum], s15\n\t"
      "vstmia %[s]!, {s14-s15}\n\t"
      MICROATTN_PAIRS_TAIL
      "vsub.f32 s0, s0, %[m]\n\t"
      MICROATTN_EXP2_CLAMP("s0")
      "vadd.f32 s2, s0, %[magic]\n\t"
      "vmov %[e0], s2\n\t"
      "vsub.f32 s2, s2, %[magic]\n\t"
      "vsub.f32 s0, s0, s2\n\t"
      "vldmia %[c], {s4-s15}\n\t"
      "add %[e0], %[bias], %[e0], lsl #23\n\t"
      "vfma.f32 s4, %[c6], s0\n\t"
      "vfma.f32 s6, s4, s0\n\t"
      "vfma.f32 s8, s6, s0\n\t"
      "vfma.f32 s10, s8, s0\n\t"
      "vfma.f32 s12, s10, s0\n\t"
      "vfma.f32 s14, s12, s0\n\t"
      "vmov s2, %[e0]\n\t"
      "vmul.f32 s14, s14, s2\n\t"
      "vadd.f32 %[sum], %[sum], s14\n\t"
      "vstr s14, [%[s]]\n"
      "3:"
      : [sum] "+t"(sum), [s] "+r"(s), [pairs] "=&r"(pairs), [e0] "=&r"(e0), [e1] "=&r"(e1)
      : [n] "r"(n), [m] "t"(m), [x_min] "t"(x_min), [magic] "t"(round_magic), [c6] "t"(poly.c6),
        [c] "r"(exp2_addends), [bias] "r"((127u - float_bits(round_magic)) << 23), "m"(exp2_addends)
      : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13", "s14", "s15", "cc",
        "memory");
#undef MICROATTN_EXP2_CLAMP
#undef MICROATTN_PAIRS_HEAD
#undef MICROATTN_PAIRS_TAIL
#else
  for (std::size_t j = 0; j < n; ++j) {
    s[j] = exp2_nonpositive_float(s[j] - m);
    sum += s[j];
  }
#endif
  return sum;
}

}  // namespace

void rows_softmax_scalar(float* s, std::size_t lds, std::size_t nr, std::size_t bk, float* m, float* l,
                         float* alpha) noexcept {
  for (std::size_t r = 0; r < nr; ++r) {
    float* sr = s + r * lds;
    const float mb = rows_max(sr, bk, m[r]);
    const float m_use = mb == -INFINITY ? 0.0f : mb;
    alpha[r] = exp2_nonpositive_call(m[r] - m_use);  // once per row and block: the out-of-line copy
    const float sum = rows_exp2_sum(sr, bk, m_use);
    l[r] = fmadd(l[r], alpha[r], sum);
    m[r] = mb;
  }
}

namespace {

// Four output columns of rows a and b: oa[0..3] = oa[0..3]·al (or 0 without alpha), then + pa[j]·v[j·ldv + c] for
// j < bk in key order (the same for b; ob may be oa: a's land last). Out of line for the reason of rows_dot_2x4.
__attribute__((noinline)) void rows_axpy_2x4(const float* pa, const float* pb, std::size_t bk, const float* v,
                                             std::size_t ldv, bool with_alpha, float al0, float al1, float* oa,
                                             float* ob) noexcept {
  Sums2x4 sums;
  if (with_alpha) sums.scaled(oa, al0, ob, al1);
  for (std::size_t j = bk; j != 0; --j, v += ldv) {
    const float x = *pa++, y = *pb++;
    const float w0 = v[0], w1 = v[1], w2 = v[2], w3 = v[3];
    sums.add(x, y, w0, w1, w2, w3);
  }
  sums.store(oa, ob);
}
}  // namespace

// Two rows and four output columns at a time over the block's keys (one load of p per key for four columns, eight
// sums in registers), then the last columns one at a time: o[r][c]·alpha[r] (or 0), then + p[r][j]·v[j][c] in key
// order, each element's sequence the same whatever the blocking.
void rows_axpy_scalar(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const float* v, std::size_t ldv,
                      std::size_t d_v, const float* alpha, float* o, std::size_t ldo) noexcept {
  for (std::size_t r0 = 0; r0 < nr; r0 += 2) {
    const std::size_t r1 = nr - r0 >= 2 ? r0 + 1 : r0;
    float* const o0 = o + r0 * ldo;
    float* const o1 = o + r1 * ldo;
    const float* const p0 = p + r0 * ldp;
    const float* const p1 = p + r1 * ldp;
    const float al0 = alpha != nullptr ? alpha[r0] : 0.0f, al1 = alpha != nullptr ? alpha[r1] : 0.0f;
#if MICROATTN_ROWS_ASM
    if (d_v == rows_d8 && bk != 0) {
      rows_axpy_2xn_d8(p0, p1, bk, v, ldv, alpha != nullptr ? alpha + r0 : nullptr,
                       alpha != nullptr ? alpha + r1 : nullptr, o0, o1);
      continue;
    }
#endif
    std::size_t c = 0;
    for (; c + 4 <= d_v; c += 4) rows_axpy_2x4(p0, p1, bk, v + c, ldv, alpha != nullptr, al0, al1, o0 + c, o1 + c);
    for (; c < d_v; ++c) {
      float acc0 = alpha != nullptr ? o0[c] * al0 : 0.0f;
      float acc1 = alpha != nullptr ? o1[c] * al1 : 0.0f;
      const float* vp = v + c;
      const float* a = p0;
      const float* b = p1;
      for (std::size_t j = bk; j != 0; --j, vp += ldv) {
        const float x = *vp;
        acc0 = fmadd(*a++, x, acc0);
        acc1 = fmadd(*b++, x, acc1);
      }
      o1[c] = acc1;
      o0[c] = acc0;
    }
  }
}

namespace {

constexpr Kernels scalar_table{"scalar",
                               1,
                               "gemm_4x4_scalar",
                               false,
                               gemm_scalar,
                               softmax_row_scalar,
                               exp_scalar,
                               attn_scores_scalar,
                               attn_softmax_scalar,
                               attn_pv_scalar,
                               attn_pack_q_scalar,
                               attn_store_out_scalar,
                               exp2_nonpositive_scalar,
                               few_query_max_scalar,
                               rows_dot_scalar,
                               rows_softmax_scalar,
                               rows_axpy_scalar};

}  // namespace

const Kernels& scalar_kernels() noexcept { return scalar_table; }

}  // namespace detail
}  // namespace microattn
