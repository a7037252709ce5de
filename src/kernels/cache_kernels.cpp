// The f16 / q8 K/V cache's kernels: scalar, x86 (F16C; AVX-512 where the target has it) and NEON.
#include "kernels/cache_kernels.hpp"

#include <cstring>
#include <type_traits>

#include "kernels/linear_kernels.hpp"
#include "kernels/scalar_math.hpp"

#if defined(__AVX2__) && defined(__F16C__)
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside its own AVX-512 intrinsics (the `__m512 __Y = __Y;` of _mm512_undefined_*): a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define MICROATTN_CACHE_X86 1
#else
#define MICROATTN_CACHE_X86 0
#endif
#if defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#define MICROATTN_CACHE_NEON 1
#else
#define MICROATTN_CACHE_NEON 0
#endif

namespace microattn {
namespace detail {

namespace {

// A table's converters: a block's rows one at a time through the table's row function, which converts from
// column c on (each table vectorizes the front and finishes with the scalar row from where it stopped).
template <void (*Row)(const std::uint16_t*, float*, std::size_t, std::size_t) noexcept>
void f16_rows(const std::uint16_t* src, std::size_t ld, std::size_t rows, std::size_t cols, float* dst) noexcept {
  for (std::size_t r = 0; r < rows; ++r) Row(src + r * ld, dst + r * cols, 0, cols);
}
template <void (*Row)(const std::int8_t*, float*, std::size_t, std::size_t, float) noexcept>
void q8_rows(const std::int8_t* src, std::size_t ld, std::size_t rows, std::size_t cols, const float* scales,
             std::size_t scale_stride, float* dst) noexcept {
  for (std::size_t r = 0; r < rows; ++r) Row(src + r * ld, dst + r * cols, 0, cols, scales[r * scale_stride]);
}

inline void f16_row_scalar(const std::uint16_t* s, float* d, std::size_t c, std::size_t cols) noexcept {
  for (; c < cols; ++c) d[c] = f16_decode(s[c]);
}
inline void q8_row_scalar(const std::int8_t* s, float* d, std::size_t c, std::size_t cols, float sc) noexcept {
  for (; c < cols; ++c) d[c] = sc * static_cast<float>(s[c]);
}

// Element c of a stored row (f16: the row is binary16; q8: int8 with the row's scale sc), as the converters give it.
MICROATTN_SCALAR_INLINE float stored_element(bool f16, const void* row, std::size_t c, float sc) noexcept {
  return f16 ? f16_decode(static_cast<const std::uint16_t*>(row)[c])
             : sc * static_cast<float>(static_cast<const std::int8_t*>(row)[c]);
}
MICROATTN_SCALAR_INLINE const void* stored_row(bool f16, const void* base, std::size_t j, std::size_t ld) noexcept {
  return f16 ? static_cast<const void*>(static_cast<const std::uint16_t*>(base) + j * ld)
             : static_cast<const void*>(static_cast<const std::int8_t*>(base) + j * ld);
}
inline float row_scale(const float* scales, std::size_t j, std::size_t stride) noexcept {
  return scales != nullptr ? scales[j * stride] : 0.0f;
}

// The fused products, scalar, one function per product for both formats (flash: the Cortex-M builds link these):
// each key's element converted once for up to four query rows; P·V over columns [c0, d_v) only, so the vector
// tables finish with it from where their vectors stopped.

#if defined(__arm__) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M' && defined(__ARM_FP) && \
    (__ARM_FP & 4) && defined(__FP_FAST_FMAF)
#define MICROATTN_Q8_ROWS_D8_ASM 1
// A head dim of 8 on Cortex-M, as the f32 row kernels in scalar.cpp: the two rows of q, or of o, stay in s0–s15 for
// a whole block; each stored row is 8 LDRSB, 4 VMOV (two core registers to two floats), 8 VCVT and 8 multiplies by
// its scale, then one fused multiply-add per term: 3.2 instructions per multiply-add where the 2x4 kernels below
// take 4.4. The operations of the C kernels in their order: the same floats. Of the callee-saved registers only
// s16–s20 are used (24 bytes of stack). A single row passes itself as both rows.
constexpr std::size_t q8_rows_d8 = 8;

// clang-format off
// Elements i and i + 1 of the stored row at %[row], times its scale (s16), into s17 and s18.
#define MICROATTN_Q8_PAIR(row, i, i1) \
  "ldrsb %[t0], [%[" row "], #" #i "]\n\t" \
  "ldrsb %[t1], [%[" row "], #" #i1 "]\n\t" \
  "vmov s17, s18, %[t0], %[t1]\n\t" \
  "vcvt.f32.s32 s17, s17\n\t" \
  "vcvt.f32.s32 s18, s18\n\t" \
  "vmul.f32 s17, s16, s17\n\t" \
  "vmul.f32 s18, s16, s18\n\t"
// Scores: key elements i, i + 1 times q_a's (s<i>, s<i1>) into s19 and q_b's (s<8 + i>…) into s20, the first
// instruction op0 (vmul for the key's first element), then vfma.
#define MICROATTN_Q8_DOT2(op0, i, i1, b, b1) \
  MICROATTN_Q8_PAIR("k", i, i1) \
  op0 ".f32 s19, s" #i ", s17\n\t" \
  op0 ".f32 s20, s" #b ", s17\n\t" \
  "vfma.f32 s19, s" #i1 ", s18\n\t" \
  "vfma.f32 s20, s" #b1 ", s18\n\t"
// P·V: value columns i, i + 1 times p_a (s19) into o_a's s<i>, s<i1> and p_b (s20) into o_b's.
#define MICROATTN_Q8_PV2(op, i, i1, b, b1) \
  MICROATTN_Q8_PAIR("v", i, i1) \
  op ".f32 s" #i ", s19, s17\n\t" \
  op ".f32 s" #b ", s20, s17\n\t" \
  op ".f32 s" #i1 ", s19, s18\n\t" \
  op ".f32 s" #b1 ", s20, s18\n\t"
// One stored value row (op vmul: the first, a product; vfma: the rest), then the count.
#define MICROATTN_Q8_PV_ROW(op) \
  "vldr s16, [%[sc]]\n\t" \
  "add %[sc], %[sc], %[sc_step]\n\t" \
  "vldmia %[pa]!, {s19}\n\t" \
  "vldmia %[pb]!, {s20}\n\t" \
  MICROATTN_Q8_PV2(op, 0, 1, 8, 9) \
  MICROATTN_Q8_PV2(op, 2, 3, 10, 11) \
  MICROATTN_Q8_PV2(op, 4, 5, 12, 13) \
  MICROATTN_Q8_PV2(op, 6, 7, 14, 15) \
  "add %[v], %[v], %[step]\n\t" \
  "subs %[n], %[n], #1\n\t"
// clang-format on

// s_a[j] = q_a·k̂_j and s_b[j] = q_b·k̂_j for n >= 1 keys (row j at k + j·ldk, scale sc[j·stride]; s_b may be s_a
// when q_b is q_a).
__attribute__((noinline)) void rows_dot_q8_2xn_d8(const float* qa, const float* qb, const std::int8_t* k,
                                                  std::size_t ldk, const float* sc, std::size_t stride, std::size_t n,
                                                  float* sa, float* sb) noexcept {
  const std::size_t sc_step = stride * sizeof(float);
  std::int32_t t0, t1;
  asm volatile(
      "vldmia %[qa], {s0-s7}\n\t"
      "vldmia %[qb], {s8-s15}\n"
      "1:\n\t"
      "vldr s16, [%[sc]]\n\t"
      "add %[sc], %[sc], %[sc_step]\n\t" MICROATTN_Q8_DOT2("vmul", 0, 1, 8, 9) MICROATTN_Q8_DOT2("vfma", 2, 3, 10, 11)
          MICROATTN_Q8_DOT2("vfma", 4, 5, 12, 13) MICROATTN_Q8_DOT2("vfma", 6, 7, 14, 15)
      "add %[k], %[k], %[step]\n\t"
      "vstmia %[sa]!, {s19}\n\t"
      "vstmia %[sb]!, {s20}\n\t"
      "subs %[n], %[n], #1\n\t"
      "bne 1b"
      : [k] "+r"(k), [sc] "+r"(sc), [sa] "+r"(sa), [sb] "+r"(sb), [n] "+r"(n), [t0] "=&r"(t0), [t1] "=&r"(t1)
      : [qa] "r"(qa), [qb] "r"(qb), [step] "r"(ldk), [sc_step] "r"(sc_step)
      : MICROATTN_D8_CLOBBERS, "s16", "s17", "s18", "s19", "s20", "cc", "memory");
}

// o_a = o_a·alpha_a + Σ_j p_a[j]·v̂_j over n >= 1 stored rows (row j at v + j·ldv, scale sc[j·stride]; alpha_a,
// alpha_b null: Σ_j alone, its first term a product), and the same for b (o_b may be o_a: a's sums land last).
__attribute__((noinline)) void rows_axpy_q8_2xn_d8(const float* pa, const float* pb, std::size_t n,
                                                   const std::int8_t* v, std::size_t ldv, const float* sc,
                                                   std::size_t stride, const float* alpha_a, const float* alpha_b,
                                                   float* oa, float* ob) noexcept {
  const std::size_t sc_step = stride * sizeof(float);
  // The alphas' addresses in the two registers that later take the stored values (thirteen would not fit).
  std::intptr_t t0 = reinterpret_cast<std::intptr_t>(alpha_a), t1 = reinterpret_cast<std::intptr_t>(alpha_b);
  asm volatile(
      "cmp %[t0], #0\n\t"
      "beq 3f\n\t"
      "vldmia %[oa], {s0-s7}\n\t"
      "vldmia %[ob], {s8-s15}\n\t"
      "vldr s19, [%[t0]]\n\t"
      "vldr s20, [%[t1]]\n\t"
      MICROATTN_D8_RESCALE("s19", "s20")
      "b 1f\n"
      "3:\n\t" MICROATTN_Q8_PV_ROW("vmul")
      "beq 2f\n"
      "1:\n\t" MICROATTN_Q8_PV_ROW("vfma")
      "bne 1b\n"
      "2:\n\t"
      "vstmia %[ob], {s8-s15}\n\t"
      "vstmia %[oa], {s0-s7}"
      : [v] "+r"(v), [sc] "+r"(sc), [pa] "+r"(pa), [pb] "+r"(pb), [n] "+r"(n), [t0] "+r"(t0), [t1] "+r"(t1)
      : [oa] "r"(oa), [ob] "r"(ob), [step] "r"(ldv), [sc_step] "r"(sc_step)
      : MICROATTN_D8_CLOBBERS, "s16", "s17", "s18", "s19", "s20", "cc", "memory");
}
#undef MICROATTN_Q8_PAIR
#undef MICROATTN_Q8_DOT2
#undef MICROATTN_Q8_PV2
#undef MICROATTN_Q8_PV_ROW
#endif

// Scores of query rows a and b against four stored q8 keys k, k + ldk, … with scales sc[0], sc[stride], …: b's to
// sb[0..3], then a's to sa[0..3] (sb may be sa). Out of line so that its loop's pointers stay in registers (inlined,
// GCC at -Os spilled them).
__attribute__((noinline)) void rows_dot_q8_2x4(const float* a, const float* b, const std::int8_t* k, std::size_t ldk,
                                               std::size_t d, const float* sc, std::size_t stride, float* sa,
                                               float* sb) noexcept {
  const float c0 = sc[0], c1 = sc[stride], c2 = sc[2 * stride], c3 = sc[3 * stride];
  const std::int8_t* k0 = k;
  const std::int8_t* k1 = k + ldk;
  const std::int8_t* k2 = k1 + ldk;
  const std::int8_t* k3 = k2 + ldk;
  Sums2x4 sums;
  for (std::size_t p = d; p != 0; --p) {
    const float x = *a++, y = *b++;
    const float w0 = c0 * static_cast<float>(*k0++), w1 = c1 * static_cast<float>(*k1++);
    const float w2 = c2 * static_cast<float>(*k2++), w3 = c3 * static_cast<float>(*k3++);
    sums.add(x, y, w0, w1, w2, w3);
  }
  sums.store(sa, sb);
}

// q8, two query rows at a time (decoding: the rows of one K/V head's query group): scalar sums in registers and
// pointers that step by one, where the shared loop below keeps four sums in memory and tests the format per element
// (a few times the instructions on Cortex-M). Same products in the same order: the same floats.
void rows_dot_q8_pairs(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const std::int8_t* k,
                       std::size_t ldk, const float* scales, std::size_t scale_stride, std::size_t bk, float* s,
                       std::size_t lds) noexcept {
  for (std::size_t r0 = 0; r0 < nr; r0 += 2) {
    const bool two = nr - r0 >= 2;
    const float* const q0 = q + r0 * ldq;
    const float* const q1 = two ? q0 + ldq : q0;
    float* s0 = s + r0 * lds;
    float* s1 = two ? s0 + lds : s0;
#if MICROATTN_Q8_ROWS_D8_ASM
    if (d == q8_rows_d8 && bk != 0) {
      rows_dot_q8_2xn_d8(q0, q1, k, ldk, scales, scale_stride, bk, s0, s1);
      continue;
    }
#endif
    const std::int8_t* kj = k;
    const float* sc = scales;
    std::size_t j = bk;
    // Four keys at a time: each element of q loaded once for four keys, eight sums in registers.
    for (; j >= 4; j -= 4, kj += 4 * ldk, sc += 4 * scale_stride, s0 += 4, s1 += 4)
      rows_dot_q8_2x4(q0, q1, kj, ldk, d, sc, scale_stride, s0, s1);
    for (; j != 0; --j, kj += ldk, sc += scale_stride) {
      const float scale = *sc;
      const float* a = q0;
      const float* b = q1;
      const std::int8_t* kp = kj;
      float acc0 = 0.0f, acc1 = 0.0f;
      for (std::size_t p = d; p != 0; --p) {
        const float x = scale * static_cast<float>(*kp++);
        acc0 = fmadd(*a++, x, acc0);
        acc1 = fmadd(*b++, x, acc1);
      }
      *s1++ = acc1;  // s1 is s0 for a last single row: acc0 (the same sum) lands last
      *s0++ = acc0;
    }
  }
}
// Four output columns of rows a and b over stored q8 values v (row j at v + j·ldv, scale sc[j·stride]):
// oa[0..3]·al (or 0 without alpha), then + pa[j]·v̂[j][c] in key order (the same for b; ob may be oa).
__attribute__((noinline)) void rows_axpy_q8_2x4(const float* pa, const float* pb, std::size_t bk, const std::int8_t* v,
                                                std::size_t ldv, const float* sc, std::size_t stride, bool with_alpha,
                                                float al0, float al1, float* oa, float* ob) noexcept {
  Sums2x4 sums;
  if (with_alpha) sums.scaled(oa, al0, ob, al1);
  for (std::size_t j = bk; j != 0; --j, v += ldv, sc += stride) {
    const float x = *pa++, y = *pb++, scale = *sc;
    const float w0 = scale * static_cast<float>(v[0]), w1 = scale * static_cast<float>(v[1]);
    const float w2 = scale * static_cast<float>(v[2]), w3 = scale * static_cast<float>(v[3]);
    sums.add(x, y, w0, w1, w2, w3);
  }
  sums.store(oa, ob);
}
// q8 P·V, two rows and four output columns at a time over the block's keys (the key's scale and p loaded once for
// four columns), then the last columns one at a time: o[r][c] = o[r][c]·alpha[r] (or 0), then + p[r][j]·v̂[j][c] in
// key order, as the shared loop's per-key order gives each element.
void rows_axpy_q8_pairs(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const std::int8_t* v,
                        std::size_t ldv, const float* scales, std::size_t scale_stride, std::size_t c0, std::size_t d_v,
                        const float* alpha, float* o, std::size_t ldo) noexcept {
  for (std::size_t r0 = 0; r0 < nr; r0 += 2) {
    const std::size_t r1 = nr - r0 >= 2 ? r0 + 1 : r0;
    const float* const p0 = p + r0 * ldp;
    const float* const p1 = p + r1 * ldp;
    float* const o0 = o + r0 * ldo;
    float* const o1 = o + r1 * ldo;
    const float al0 = alpha != nullptr ? alpha[r0] : 0.0f, al1 = alpha != nullptr ? alpha[r1] : 0.0f;
#if MICROATTN_Q8_ROWS_D8_ASM
    if (c0 == 0 && d_v == q8_rows_d8 && bk != 0) {
      rows_axpy_q8_2xn_d8(p0, p1, bk, v, ldv, scales, scale_stride, alpha != nullptr ? alpha + r0 : nullptr,
                          alpha != nullptr ? alpha + r1 : nullptr, o0, o1);
      continue;
    }
#endif
    std::size_t c = c0;
    for (; c + 4 <= d_v; c += 4)
      rows_axpy_q8_2x4(p0, p1, bk, v + c, ldv, scales, scale_stride, alpha != nullptr, al0, al1, o0 + c, o1 + c);
    for (; c < d_v; ++c) {
      float acc0 = alpha != nullptr ? o0[c] * al0 : 0.0f;
      float acc1 = alpha != nullptr ? o1[c] * al1 : 0.0f;
      const std::int8_t* vp = v + c;
      const float* sc = scales;
      const float* a = p0;
      const float* b = p1;
      for (std::size_t j = bk; j != 0; --j, vp += ldv, sc += scale_stride) {
        const float x = *sc * static_cast<float>(*vp);
        acc0 = fmadd(*a++, x, acc0);
        acc1 = fmadd(*b++, x, acc1);
      }
      o1[c] = acc1;
      o0[c] = acc0;
    }
  }
}

void rows_dot_stored(bool f16, const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const void* k,
                     std::size_t ldk, const float* scales, std::size_t scale_stride, std::size_t bk, float* s,
                     std::size_t lds) noexcept {
  if (!f16)
    return rows_dot_q8_pairs(q, ldq, nr, d, static_cast<const std::int8_t*>(k), ldk, scales, scale_stride, bk, s, lds);
  for (std::size_t j = 0; j < bk; ++j) {
    const void* kj = stored_row(f16, k, j, ldk);
    const float sc = row_scale(scales, j, scale_stride);
    for (std::size_t r0 = 0; r0 < nr; r0 += 4) {
      const std::size_t rr = nr - r0 < 4 ? nr - r0 : 4;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (std::size_t p = 0; p < d; ++p) {
        const float x = stored_element(f16, kj, p, sc);
        for (std::size_t r = 0; r < rr; ++r) acc[r] = fmadd(q[(r0 + r) * ldq + p], x, acc[r]);
      }
      for (std::size_t r = 0; r < rr; ++r) s[(r0 + r) * lds + j] = acc[r];
    }
  }
}
void rows_axpy_stored(bool f16, const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const void* v,
                      std::size_t ldv, const float* scales, std::size_t scale_stride, std::size_t c0, std::size_t d_v,
                      const float* alpha, float* o, std::size_t ldo) noexcept {
  if (!f16)
    return rows_axpy_q8_pairs(p, ldp, nr, bk, static_cast<const std::int8_t*>(v), ldv, scales, scale_stride, c0, d_v,
                              alpha, o, ldo);
  for (std::size_t r = 0; r < nr; ++r)
    for (std::size_t c = c0; c < d_v; ++c) o[r * ldo + c] = alpha != nullptr ? o[r * ldo + c] * alpha[r] : 0.0f;
  for (std::size_t j = 0; j < bk; ++j) {
    const void* vj = stored_row(f16, v, j, ldv);
    const float sc = row_scale(scales, j, scale_stride);
    for (std::size_t c = c0; c < d_v; ++c) {
      const float x = stored_element(f16, vj, c, sc);
      for (std::size_t r = 0; r < nr; ++r) o[r * ldo + c] = fmadd(p[r * ldp + j], x, o[r * ldo + c]);
    }
  }
}

// The table's four fused entries over one instruction set's row kernels: Dot(q, ldq, nr, d, k, ldk, scales,
// scale_stride, bk, s, lds) and Axpy(p, ldp, nr, bk, v, ldv, scales, scale_stride, d_v, alpha, o, ldo) for f16 and
// q8 (an f16 cache has no scales).
template <auto DotF16, auto DotQ8, auto AxpyF16, auto AxpyQ8>
struct FusedEntries {
  static void f16_dot(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const std::uint16_t* k,
                      std::size_t ldk, std::size_t bk, float* s, std::size_t lds) noexcept {
    DotF16(q, ldq, nr, d, k, ldk, nullptr, 0, bk, s, lds);
  }
  static void q8_dot(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const std::int8_t* k,
                     std::size_t ldk, const float* scales, std::size_t scale_stride, std::size_t bk, float* s,
                     std::size_t lds) noexcept {
    DotQ8(q, ldq, nr, d, k, ldk, scales, scale_stride, bk, s, lds);
  }
  static void f16_axpy(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const std::uint16_t* v,
                       std::size_t ldv, std::size_t d_v, const float* alpha, float* o, std::size_t ldo) noexcept {
    AxpyF16(p, ldp, nr, bk, v, ldv, nullptr, 0, d_v, alpha, o, ldo);
  }
  static void q8_axpy(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const std::int8_t* v,
                      std::size_t ldv, const float* scales, std::size_t scale_stride, std::size_t d_v,
                      const float* alpha, float* o, std::size_t ldo) noexcept {
    AxpyQ8(p, ldp, nr, bk, v, ldv, scales, scale_stride, d_v, alpha, o, ldo);
  }
};
// A table's entries: the converters, then the fused kernels.
template <class Fused, auto F16Rows, auto Q8Rows>
constexpr CacheKernels cache_table(const char* name) noexcept {
  return {name, F16Rows, Q8Rows, Fused::f16_dot, Fused::q8_dot, Fused::f16_axpy, Fused::q8_axpy};
}

template <bool F16, class T>
void rows_dot_scalar(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const T* k, std::size_t ldk,
                     const float* scales, std::size_t scale_stride, std::size_t bk, float* s,
                     std::size_t lds) noexcept {
  rows_dot_stored(F16, q, ldq, nr, d, k, ldk, scales, scale_stride, bk, s, lds);
}
template <bool F16, class T>
void rows_axpy_scalar(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const T* v, std::size_t ldv,
                      const float* scales, std::size_t scale_stride, std::size_t d_v, const float* alpha, float* o,
                      std::size_t ldo) noexcept {
  rows_axpy_stored(F16, p, ldp, nr, bk, v, ldv, scales, scale_stride, 0, d_v, alpha, o, ldo);
}
using ScalarFused = FusedEntries<rows_dot_scalar<true, std::uint16_t>, rows_dot_scalar<false, std::int8_t>,
                                 rows_axpy_scalar<true, std::uint16_t>, rows_axpy_scalar<false, std::int8_t>>;
constexpr CacheKernels scalar_table =
    cache_table<ScalarFused, f16_rows<f16_row_scalar>, q8_rows<q8_row_scalar>>("scalar");

#if MICROATTN_CACHE_X86
#if defined(__AVX512F__)
constexpr const char* x86_name = "avx512";
#else
constexpr const char* x86_name = "avx2";
#endif
void f16_row_x86(const std::uint16_t* s, float* d, std::size_t c, std::size_t cols) noexcept {
#if defined(__AVX512F__)
  for (; c + 16 <= cols; c += 16)
    _mm512_storeu_ps(d + c, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + c))));
#endif
  for (; c + 8 <= cols; c += 8)
    _mm256_storeu_ps(d + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + c))));
  f16_row_scalar(s, d, c, cols);
}
void q8_row_x86(const std::int8_t* s, float* d, std::size_t c, std::size_t cols, float sc) noexcept {
#if defined(__AVX512F__)
  const __m512 vs16 = _mm512_set1_ps(sc);
  for (; c + 16 <= cols; c += 16) {
    const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + c)));
    _mm512_storeu_ps(d + c, _mm512_mul_ps(vs16, _mm512_cvtepi32_ps(q)));
  }
#endif
  const __m256 vs = _mm256_set1_ps(sc);
  for (; c + 8 <= cols; c += 8) {
    const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + c)));
    _mm256_storeu_ps(d + c, _mm256_mul_ps(vs, _mm256_cvtepi32_ps(q)));
  }
  q8_row_scalar(s, d, c, cols, sc);
}
// The fused products on x86. Scores: keys in the lanes (one vector of scores per query row and key vector, no
// horizontal sums): a 32-bit gather takes the same 4 bytes (4 int8 or 2 binary16 columns) from L keys at once,
// each column is converted (and scaled: the converters' k̂, exactly) once and used by all R rows' FMAs, q[r][p]
// broadcast. P·V: rows of v along the lanes as rows_axpy, each converted vector used by R rows.
// The build's width, AVX-512's 16 lanes or AVX2's 8: most operations differ only in the intrinsics' prefix and are
// written once; the few that differ otherwise are under the #if.
#if defined(__AVX512F__)
#define MICROATTN_CACHE_OP(name) _mm512_##name
using CacheVf = __m512;
using CacheVi = __m512i;
using CacheHalf = __m256i;  // a vector's binary16 values
#else
#define MICROATTN_CACHE_OP(name) _mm256_##name
using CacheVf = __m256;
using CacheVi = __m256i;
using CacheHalf = __m128i;
#endif
struct VecX86 {
  using vf = CacheVf;
  using vi = CacheVi;
  static constexpr std::size_t lanes = sizeof(vf) / sizeof(float);
  static vf zero() noexcept { return MICROATTN_CACHE_OP(setzero_ps)(); }
  static vf set1(float x) noexcept { return MICROATTN_CACHE_OP(set1_ps)(x); }
  static vf fma(vf a, vf b, vf c) noexcept { return MICROATTN_CACHE_OP(fmadd_ps)(a, b, c); }
  static vf mul(vf a, vf b) noexcept { return MICROATTN_CACHE_OP(mul_ps)(a, b); }
  static vf loadf(const float* p) noexcept { return MICROATTN_CACHE_OP(loadu_ps)(p); }
  static void storef(float* p, vf x) noexcept { MICROATTN_CACHE_OP(storeu_ps)(p, x); }
  static vi lane_offsets(std::int32_t step) noexcept {
    static constexpr std::int32_t iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    vi v;
    std::memcpy(&v, iota, sizeof v);
    return muli(v, step);
  }
  static vi clamp(vi x, std::int32_t top) noexcept {
    return MICROATTN_CACHE_OP(min_epi32)(x, MICROATTN_CACHE_OP(set1_epi32)(top));
  }
  static vi addi(vi x, std::int32_t c) noexcept {
    return MICROATTN_CACHE_OP(add_epi32)(x, MICROATTN_CACHE_OP(set1_epi32)(c));
  }
  static vi muli(vi x, std::int32_t c) noexcept {
    return MICROATTN_CACHE_OP(mullo_epi32)(x, MICROATTN_CACHE_OP(set1_epi32)(c));
  }
  // int8 element b of each 32-bit lane, as float
  template <int B>
  static vf q8_lane(vi x) noexcept {
    return MICROATTN_CACHE_OP(cvtepi32_ps)(
        MICROATTN_CACHE_OP(srai_epi32)(B == 3 ? x : MICROATTN_CACHE_OP(slli_epi32)(x, 24 - 8 * B), 24));
  }
  static vf q8_load(const std::int8_t* p) noexcept {
    __m128i b = _mm_setzero_si128();
    std::memcpy(&b, p, lanes);  // a vector's bytes: one 16- or 8-byte load
    return MICROATTN_CACHE_OP(cvtepi32_ps)(MICROATTN_CACHE_OP(cvtepi8_epi32)(b));
  }
  static vf f16_load(const std::uint16_t* p) noexcept {
    CacheHalf h;
    std::memcpy(&h, p, sizeof h);
    return MICROATTN_CACHE_OP(cvtph_ps)(h);
  }
#if defined(__AVX512F__)
  static vi gather(const void* base, vi off) noexcept { return _mm512_i32gather_epi32(off, base, 1); }
  static vf gatherf(const float* base, vi off) noexcept { return _mm512_i32gather_ps(off, base, 1); }
  // binary16 element b of each 32-bit lane, as float
  template <int B>
  static vf f16_lane(vi x) noexcept {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(B == 0 ? x : _mm512_srli_epi32(x, 16)));
  }
#else
  static vi gather(const void* base, vi off) noexcept {
    return _mm256_i32gather_epi32(static_cast<const int*>(base), off, 1);
  }
  static vf gatherf(const float* base, vi off) noexcept { return _mm256_i32gather_ps(base, off, 1); }
  template <int B>
  static vf f16_lane(vi x) noexcept {
    const __m256i h = B == 0 ? _mm256_and_si256(x, _mm256_set1_epi32(0xffff)) : _mm256_srli_epi32(x, 16);
    return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
  }
#endif
};
using V = VecX86;
constexpr std::size_t L = V::lanes;

// The format's side of the fused kernels: PER 32-bit lane elements, the lane's element B converted (and scaled).
struct Q8Fmt {
  using T = std::int8_t;
  static constexpr int per = 4;
  static constexpr bool f16 = false;
  template <int B>
  static V::vf lane(V::vi x, V::vf sc) noexcept {
    return V::mul(sc, V::q8_lane<B>(x));
  }
  static V::vf load(const T* p, V::vf sc) noexcept { return V::mul(sc, V::q8_load(p)); }
};
struct F16Fmt {
  using T = std::uint16_t;
  static constexpr int per = 2;
  static constexpr bool f16 = true;
  template <int B>
  static V::vf lane(V::vi x, V::vf) noexcept {
    return V::f16_lane<B>(x);
  }
  static V::vf load(const T* p, V::vf) noexcept { return V::f16_load(p); }
};

#if defined(__AVX512F__)
// w[c][i] = the 32-bit word c of the 32 bytes at row + key·ld for the 16 keys first … first + 15 (past last: last),
// key i in lane i. Each register takes keys i and i + 8 (one per 256-bit half); an 8 × 8 transpose per half
// (words, then pairs), then the halves' 128-bit quarters put in key order.
inline __attribute__((always_inline)) void transpose_16x8(const char* row, std::size_t ld, std::size_t first,
                                                          std::size_t last, std::int32_t (*w)[16]) noexcept {
  __m512i z[8];
  for (std::size_t i = 0; i < 8; ++i) {
    const std::size_t a = first + i < last ? first + i : last, b = first + i + 8 < last ? first + i + 8 : last;
    z[i] =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + a * ld))),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + b * ld)), 1);
  }
  __m512i t[8], u[8];
  for (std::size_t h = 0; h < 8; h += 4) {
    t[h + 0] = _mm512_unpacklo_epi32(z[h + 0], z[h + 1]);
    t[h + 1] = _mm512_unpackhi_epi32(z[h + 0], z[h + 1]);
    t[h + 2] = _mm512_unpacklo_epi32(z[h + 2], z[h + 3]);
    t[h + 3] = _mm512_unpackhi_epi32(z[h + 2], z[h + 3]);
    u[h + 0] = _mm512_unpacklo_epi64(t[h + 0], t[h + 2]);  // words 0 and 4 of keys h … h + 3 (per half)
    u[h + 1] = _mm512_unpackhi_epi64(t[h + 0], t[h + 2]);  // 1, 5
    u[h + 2] = _mm512_unpacklo_epi64(t[h + 1], t[h + 3]);  // 2, 6
    u[h + 3] = _mm512_unpackhi_epi64(t[h + 1], t[h + 3]);  // 3, 7
  }
  const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  for (std::size_t c = 0; c < 4; ++c) {
    _mm512_store_si512(w[c], _mm512_permutex2var_epi64(u[c], lo, u[c + 4]));
    _mm512_store_si512(w[c + 4], _mm512_permutex2var_epi64(u[c], hi, u[c + 4]));
  }
}
#endif

// R rows × KV vectors of L keys: s[r][j0 + …] for the keys [j0, j0 + KV·L) (lanes past bk read the last key and
// are not stored). Columns: a gather per `per` columns; the last d % per take the gather ending at column d.
template <class F, std::size_t R, std::size_t KV>
inline __attribute__((always_inline)) void dot_tile(const float* q, std::size_t ldq, std::size_t d,
                                                    const typename F::T* k, std::size_t ldk, const float* scales,
                                                    std::size_t scale_stride, std::size_t j0, std::size_t bk, float* s,
                                                    std::size_t lds) noexcept {
  constexpr int per = F::per;
  const std::int32_t row_bytes = static_cast<std::int32_t>(ldk * sizeof(typename F::T));
  const std::int32_t last = static_cast<std::int32_t>(bk - 1 - j0);
  V::vi off[KV];
  V::vf sc[KV];
  for (std::size_t t = 0; t < KV; ++t) {
    const V::vi key =
        V::clamp(V::addi(V::lane_offsets(1), static_cast<std::int32_t>(t * L)), last);  // key index within the tile
    off[t] = V::muli(key, row_bytes);
    sc[t] = scales != nullptr ? V::gatherf(scales + j0 * scale_stride,
                                           V::muli(key, static_cast<std::int32_t>(scale_stride * sizeof(float))))
                              : V::zero();
  }
  const typename F::T* base = k + j0 * ldk;
  V::vf acc[R][KV];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t t = 0; t < KV; ++t) acc[r][t] = V::zero();
  const auto columns = [&](std::size_t p, auto first) {  // the lane elements [first, per) of the gather at p
    constexpr int b0 = decltype(first)::value;
    V::vi x[KV];
    for (std::size_t t = 0; t < KV; ++t) x[t] = V::gather(base + p, off[t]);
    const auto one = [&](auto bc) {
      constexpr int b = decltype(bc)::value;
      if constexpr (b >= b0 && b < per) {
        for (std::size_t t = 0; t < KV; ++t) {
          const V::vf kv = F::template lane<b>(x[t], sc[t]);
          for (std::size_t r = 0; r < R; ++r) acc[r][t] = V::fma(V::set1(q[r * ldq + p + b]), kv, acc[r][t]);
        }
      }
    };
    one(std::integral_constant<int, 0>{});
    one(std::integral_constant<int, 1>{});
    one(std::integral_constant<int, 2>{});
    one(std::integral_constant<int, 3>{});
  };
  std::size_t p = 0;
#if defined(__AVX512F__)
  // 32 bytes of each of 16 keys at a time: the 16 × 8 words transposed in registers (cheaper than 8 gathers).
  constexpr std::size_t chunk = 32 / sizeof(typename F::T);
  alignas(64) std::int32_t words[8][L];
  for (; p + chunk <= d; p += chunk)
    for (std::size_t t = 0; t < KV; ++t) {
      transpose_16x8(reinterpret_cast<const char*>(base + p), static_cast<std::size_t>(row_bytes), t * L,
                     static_cast<std::size_t>(last), words);
#pragma GCC unroll 1
      for (std::size_t c = 0; c < 8; ++c) {  // one word column at a time from L1: the registers hold the sums
        const V::vi x = _mm512_load_si512(words[c]);
        const float* qc = q + p + c * per;
        const auto one = [&](auto bc) {
          constexpr int b = decltype(bc)::value;
          if constexpr (b < per) {
            const V::vf kv = F::template lane<b>(x, sc[t]);
            for (std::size_t r = 0; r < R; ++r) acc[r][t] = V::fma(V::set1(qc[r * ldq + b]), kv, acc[r][t]);
          }
        };
        one(std::integral_constant<int, 0>{});
        one(std::integral_constant<int, 1>{});
        one(std::integral_constant<int, 2>{});
        one(std::integral_constant<int, 3>{});
      }
    }
#endif
  for (; p + per <= d; p += per) columns(p, std::integral_constant<int, 0>{});
  if (p < d) {  // d % per columns left, d >= per: the gather ending at d, its first lanes already done
    const std::size_t left = d - p, at = d - per;
    if constexpr (per == 4) {
      if (left == 1) columns(at, std::integral_constant<int, 3>{});
      if (left == 2) columns(at, std::integral_constant<int, 2>{});
      if (left == 3) columns(at, std::integral_constant<int, 1>{});
    } else {
      columns(at, std::integral_constant<int, 1>{});
    }
  }
  alignas(64) float out[L];
  for (std::size_t t = 0; t < KV; ++t) {
    const std::size_t jt = j0 + t * L;
    if (jt >= bk) break;
    const std::size_t n = bk - jt < L ? bk - jt : L;
    for (std::size_t r = 0; r < R; ++r) {
      if (n == L) {
        V::storef(s + r * lds + jt, acc[r][t]);
      } else {
        V::storef(out, acc[r][t]);
        std::memcpy(s + r * lds + jt, out, n * sizeof(float));
      }
    }
  }
}

template <class F, std::size_t R, std::size_t KV>
void dot_rows(const float* q, std::size_t ldq, std::size_t d, const typename F::T* k, std::size_t ldk,
              const float* scales, std::size_t scale_stride, std::size_t bk, float* s, std::size_t lds) noexcept {
  for (std::size_t j0 = 0; j0 < bk; j0 += KV * L)
    dot_tile<F, R, KV>(q, ldq, d, k, ldk, scales, scale_stride, j0, bk, s, lds);
}

template <class F>
void rows_dot_x86(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const typename F::T* k,
                  std::size_t ldk, const float* scales, std::size_t scale_stride, std::size_t bk, float* s,
                  std::size_t lds) noexcept {
  // The gathers' 32-bit offsets span a tile's keys (and scales); beyond them, or with fewer columns than a
  // gather reads, the scalar rows.
  const std::size_t span = 8 * L * (ldk * sizeof(typename F::T) + scale_stride * sizeof(float));
  if (d < static_cast<std::size_t>(F::per) || span > 0x7fffffffu) {
    rows_dot_stored(F::f16, q, ldq, nr, d, k, ldk, scales, scale_stride, bk, s, lds);
    return;
  }
  for (std::size_t r0 = 0; r0 < nr;) {
    const std::size_t left = nr - r0;
    const float* qr = q + r0 * ldq;
    float* sr = s + r0 * lds;
    if (left >= 8) {
      dot_rows<F, 8, 1>(qr, ldq, d, k, ldk, scales, scale_stride, bk, sr, lds);
      r0 += 8;
    } else if (left >= 4) {
      dot_rows<F, 4, 2>(qr, ldq, d, k, ldk, scales, scale_stride, bk, sr, lds);
      r0 += 4;
    } else if (left >= 2) {
      dot_rows<F, 2, 4>(qr, ldq, d, k, ldk, scales, scale_stride, bk, sr, lds);
      r0 += 2;
    } else {
      dot_rows<F, 1, 4>(qr, ldq, d, k, ldk, scales, scale_stride, bk, sr, lds);
      r0 += 1;
    }
  }
}

// R rows × CV vectors of columns [c, c + CV·L): o = o·alpha + Σ_j p[r][j]·v̂[j][…].
template <class F, std::size_t R, std::size_t CV>
void axpy_tile(const float* p, std::size_t ldp, std::size_t bk, const typename F::T* v, std::size_t ldv,
               const float* scales, std::size_t scale_stride, const float* alpha, float* o, std::size_t ldo) noexcept {
  V::vf acc[R][CV];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t c = 0; c < CV; ++c) acc[r][c] = V::zero();
  for (std::size_t j = 0; j < bk; ++j) {
    const V::vf sc = V::set1(row_scale(scales, j, scale_stride));
    V::vf x[CV];
    for (std::size_t c = 0; c < CV; ++c) x[c] = F::load(v + j * ldv + c * L, sc);
    for (std::size_t r = 0; r < R; ++r) {
      const V::vf pr = V::set1(p[r * ldp + j]);
      for (std::size_t c = 0; c < CV; ++c) acc[r][c] = V::fma(pr, x[c], acc[r][c]);
    }
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t c = 0; c < CV; ++c) {
      float* op = o + r * ldo + c * L;
      V::storef(op, alpha != nullptr ? V::fma(V::loadf(op), V::set1(alpha[r]), acc[r][c]) : acc[r][c]);
    }
}

template <class F, std::size_t R>
void axpy_rows(const float* p, std::size_t ldp, std::size_t bk, const typename F::T* v, std::size_t ldv,
               const float* scales, std::size_t scale_stride, std::size_t d_v, const float* alpha, float* o,
               std::size_t ldo) noexcept {
  std::size_t c = 0;
  for (; c + 2 * L <= d_v; c += 2 * L)
    axpy_tile<F, R, 2>(p, ldp, bk, v + c, ldv, scales, scale_stride, alpha, o + c, ldo);
  for (; c + L <= d_v; c += L) axpy_tile<F, R, 1>(p, ldp, bk, v + c, ldv, scales, scale_stride, alpha, o + c, ldo);
  if (c < d_v) rows_axpy_stored(F::f16, p, ldp, R, bk, v, ldv, scales, scale_stride, c, d_v, alpha, o, ldo);
}

template <class F>
void rows_axpy_x86(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const typename F::T* v,
                   std::size_t ldv, const float* scales, std::size_t scale_stride, std::size_t d_v, const float* alpha,
                   float* o, std::size_t ldo) noexcept {
  for (std::size_t r0 = 0; r0 < nr;) {
    const std::size_t left = nr - r0;
    const std::size_t rr = left >= 4 ? 4 : left >= 2 ? 2 : 1;
    const float* pr = p + r0 * ldp;
    const float* ar = alpha != nullptr ? alpha + r0 : nullptr;
    float* orow = o + r0 * ldo;
    if (rr == 4)
      axpy_rows<F, 4>(pr, ldp, bk, v, ldv, scales, scale_stride, d_v, ar, orow, ldo);
    else if (rr == 2)
      axpy_rows<F, 2>(pr, ldp, bk, v, ldv, scales, scale_stride, d_v, ar, orow, ldo);
    else
      axpy_rows<F, 1>(pr, ldp, bk, v, ldv, scales, scale_stride, d_v, ar, orow, ldo);
    r0 += rr;
  }
}

using X86Fused = FusedEntries<rows_dot_x86<F16Fmt>, rows_dot_x86<Q8Fmt>, rows_axpy_x86<F16Fmt>, rows_axpy_x86<Q8Fmt>>;
constexpr CacheKernels vector_table = cache_table<X86Fused, f16_rows<f16_row_x86>, q8_rows<q8_row_x86>>(x86_name);
#define MICROATTN_CACHE_VECTOR 1
#elif MICROATTN_CACHE_NEON
void f16_row_neon(const std::uint16_t* s, float* d, std::size_t c, std::size_t cols) noexcept {
  for (; c + 4 <= cols; c += 4) vst1q_f32(d + c, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(s + c))));
  f16_row_scalar(s, d, c, cols);
}
void q8_row_neon(const std::int8_t* s, float* d, std::size_t c, std::size_t cols, float sc) noexcept {
  for (; c + 8 <= cols; c += 8) {
    const int16x8_t q = vmovl_s8(vld1_s8(s + c));
    vst1q_f32(d + c, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(q))), sc));
    vst1q_f32(d + c + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(q))), sc));
  }
  q8_row_scalar(s, d, c, cols, sc);
}
// The fused products on NEON: per key, its row converted 4 columns at a time (once for up to 4 query rows, held in
// registers), each row's dot a vector of partial sums added across at the end; P·V as rows_axpy, each converted
// vector of a v row used by up to 4 rows. The columns short of a vector finish on the scalar loop.
struct Q8Neon {
  using T = std::int8_t;
  static constexpr bool f16 = false;
  // columns [c, c + 8) of a row, converted and scaled
  static void load8(const T* s, float sc, float32x4_t& lo, float32x4_t& hi) noexcept {
    const int16x8_t q = vmovl_s8(vld1_s8(s));
    lo = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(q))), sc);
    hi = vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(q))), sc);
  }
};
struct F16Neon {
  using T = std::uint16_t;
  static constexpr bool f16 = true;
  static void load8(const T* s, float, float32x4_t& lo, float32x4_t& hi) noexcept {
    const uint16x8_t h = vld1q_u16(s);
    lo = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h)));
    hi = vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h)));
  }
};

template <class F, std::size_t R>
inline void dot_key_neon(const float* q, std::size_t ldq, std::size_t d, const typename F::T* kj, float sc, float* s,
                         std::size_t lds, std::size_t j) noexcept {
  float32x4_t acc[R];
  for (std::size_t r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.0f);
  std::size_t c = 0;
  for (; c + 8 <= d; c += 8) {
    float32x4_t lo, hi;
    F::load8(kj + c, sc, lo, hi);
    for (std::size_t r = 0; r < R; ++r) {
      acc[r] = vfmaq_f32(acc[r], vld1q_f32(q + r * ldq + c), lo);
      acc[r] = vfmaq_f32(acc[r], vld1q_f32(q + r * ldq + c + 4), hi);
    }
  }
  for (std::size_t r = 0; r < R; ++r) {
    float t = vaddvq_f32(acc[r]);
    for (std::size_t p = c; p < d; ++p) t = fmadd(q[r * ldq + p], stored_element(F::f16, kj, p, sc), t);
    s[r * lds + j] = t;
  }
}

template <class F>
void rows_dot_neon(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const typename F::T* k,
                   std::size_t ldk, const float* scales, std::size_t scale_stride, std::size_t bk, float* s,
                   std::size_t lds) noexcept {
  for (std::size_t j = 0; j < bk; ++j) {
    const typename F::T* kj = k + j * ldk;
    const float sc = row_scale(scales, j, scale_stride);
    std::size_t r0 = 0;
    for (; r0 + 4 <= nr; r0 += 4) dot_key_neon<F, 4>(q + r0 * ldq, ldq, d, kj, sc, s + r0 * lds, lds, j);
    for (; r0 < nr; ++r0) dot_key_neon<F, 1>(q + r0 * ldq, ldq, d, kj, sc, s + r0 * lds, lds, j);
  }
}

// R rows × columns [c, c + 8): o = o·alpha + Σ_j p[r][j]·v̂[j][…].
template <class F, std::size_t R>
void axpy_tile_neon(const float* p, std::size_t ldp, std::size_t bk, const typename F::T* v, std::size_t ldv,
                    const float* scales, std::size_t scale_stride, const float* alpha, float* o,
                    std::size_t ldo) noexcept {
  float32x4_t lo_acc[R], hi_acc[R];
  for (std::size_t r = 0; r < R; ++r) lo_acc[r] = hi_acc[r] = vdupq_n_f32(0.0f);
  for (std::size_t j = 0; j < bk; ++j) {
    float32x4_t lo, hi;
    F::load8(v + j * ldv, row_scale(scales, j, scale_stride), lo, hi);
    for (std::size_t r = 0; r < R; ++r) {
      const float pr = p[r * ldp + j];
      lo_acc[r] = vfmaq_n_f32(lo_acc[r], lo, pr);
      hi_acc[r] = vfmaq_n_f32(hi_acc[r], hi, pr);
    }
  }
  for (std::size_t r = 0; r < R; ++r) {
    float* op = o + r * ldo;
    if (alpha != nullptr) {
      lo_acc[r] = vfmaq_n_f32(lo_acc[r], vld1q_f32(op), alpha[r]);
      hi_acc[r] = vfmaq_n_f32(hi_acc[r], vld1q_f32(op + 4), alpha[r]);
    }
    vst1q_f32(op, lo_acc[r]);
    vst1q_f32(op + 4, hi_acc[r]);
  }
}

template <class F>
void rows_axpy_neon(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const typename F::T* v,
                    std::size_t ldv, const float* scales, std::size_t scale_stride, std::size_t d_v, const float* alpha,
                    float* o, std::size_t ldo) noexcept {
  const std::size_t body = d_v / 8 * 8;
  for (std::size_t r0 = 0; r0 < nr;) {
    const std::size_t rr = nr - r0 >= 4 ? 4 : 1;
    const float* pr = p + r0 * ldp;
    const float* ar = alpha != nullptr ? alpha + r0 : nullptr;
    float* orow = o + r0 * ldo;
    for (std::size_t c = 0; c < body; c += 8) {
      if (rr == 4)
        axpy_tile_neon<F, 4>(pr, ldp, bk, v + c, ldv, scales, scale_stride, ar, orow + c, ldo);
      else
        axpy_tile_neon<F, 1>(pr, ldp, bk, v + c, ldv, scales, scale_stride, ar, orow + c, ldo);
    }
    if (body < d_v) rows_axpy_stored(F::f16, pr, ldp, rr, bk, v, ldv, scales, scale_stride, body, d_v, ar, orow, ldo);
    r0 += rr;
  }
}

using NeonFused =
    FusedEntries<rows_dot_neon<F16Neon>, rows_dot_neon<Q8Neon>, rows_axpy_neon<F16Neon>, rows_axpy_neon<Q8Neon>>;
constexpr CacheKernels vector_table = cache_table<NeonFused, f16_rows<f16_row_neon>, q8_rows<q8_row_neon>>("neon");
#define MICROATTN_CACHE_VECTOR 1
#endif

}  // namespace

const CacheKernels& scalar_cache_kernels() noexcept { return scalar_table; }
#if defined(MICROATTN_CACHE_VECTOR)
const CacheKernels* vector_cache_kernels() noexcept { return &vector_table; }
#else
const CacheKernels* vector_cache_kernels() noexcept { return nullptr; }
#endif

}  // namespace detail
}  // namespace microattn
