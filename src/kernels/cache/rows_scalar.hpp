// The f16 / q8 K/V cache's scalar rows and fused products, which every cache table starts from: the scalar table
// is them, and the vector tables finish each row with them from where their vectors stop. Included by the table
// files of kernels/cache/ alone, each its own translation unit: the file-local (anonymous-namespace) functions keep
// the calling conventions and inlining they had in one file (the Cortex-M builds compile only cache/scalar.cpp's).
#pragma once

#include <cstring>
#include <type_traits>

#include "kernels/cache.hpp"
#include "kernels/linear.hpp"
#include "kernels/scalar_math.hpp"

namespace microattn {
namespace detail {
namespace {

// A table's converters: a block's rows one at a time through the table's row function, which converts from
// column c on (each table vectorizes the front and finishes with the scalar row from where it stopped).
template <void (*Row)(const std::uint16_t*, float*, std::size_t, std::size_t) noexcept>
void f16_convert_rows(const std::uint16_t* src, std::size_t ld, std::size_t rows, std::size_t cols,
                      float* dst) noexcept {
  for (std::size_t r = 0; r < rows; ++r) Row(src + r * ld, dst + r * cols, 0, cols);
}
template <void (*Row)(const std::int8_t*, float*, std::size_t, std::size_t, float) noexcept>
void q8_convert_rows(const std::int8_t* src, std::size_t ld, std::size_t rows, std::size_t cols, const float* scales,
                     std::size_t scale_stride, float* dst) noexcept {
  for (std::size_t r = 0; r < rows; ++r) Row(src + r * ld, dst + r * cols, 0, cols, scales[r * scale_stride]);
}

inline void cache_f16_convert_scalar(const std::uint16_t* s, float* d, std::size_t c, std::size_t cols) noexcept {
  for (; c < cols; ++c) d[c] = f16_decode(s[c]);
}
inline void cache_q8_convert_scalar(const std::int8_t* s, float* d, std::size_t c, std::size_t cols,
                                    float sc) noexcept {
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
// A head dim of 8 on Cortex-M, as the f32 row kernels in attention/scalar_rows_asm.hpp: the two rows of q, or of o,
// stay in s0–s15 for a whole block; each stored row is 8 LDRSB, 4 VMOV (two core registers to two floats), 8 VCVT and 8
// multiplies by its scale, then one fused multiply-add per term: 3.2 instructions per multiply-add where the 2x4
// kernels below take 4.4. The operations of the C kernels in their order: the same floats. Of the callee-saved
// registers only s16–s20 are used (24 bytes of stack). A single row passes itself as both rows.
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
  asm volatile(MICROATTN_D8_DOT_LOOP("vldr s16, [%[sc]]\n\t"
                                     "add %[sc], %[sc], %[sc_step]\n\t" MICROATTN_Q8_DOT2("vmul", 0, 1, 8, 9)
                                         MICROATTN_Q8_DOT2("vfma", 2, 3, 10, 11) MICROATTN_Q8_DOT2("vfma", 4, 5, 12, 13)
                                             MICROATTN_Q8_DOT2("vfma", 6, 7, 14, 15),
                                     "s19", "s20")
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
      MICROATTN_D8_AXPY_LOOP("%[t0]", "%[t1]", "s19", "s20", MICROATTN_Q8_PV_ROW("vmul"), MICROATTN_Q8_PV_ROW("vfma"))
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
void cache_q8_rows_dot_2xn_scalar(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const std::int8_t* k,
                                  std::size_t ldk, const float* scales, std::size_t scale_stride, std::size_t bk,
                                  float* s, std::size_t lds) noexcept {
  row_pairs(q, ldq, s, lds, nr, [&](const float* q0, const float* q1, float* s0, float* s1) MICROATTN_SCALAR_LAMBDA {
#if MICROATTN_Q8_ROWS_D8_ASM
    if (d == q8_rows_d8 && bk != 0) return rows_dot_q8_2xn_d8(q0, q1, k, ldk, scales, scale_stride, bk, s0, s1);
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
  });
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
void cache_q8_rows_axpy_2xn_scalar(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk,
                                   const std::int8_t* v, std::size_t ldv, const float* scales, std::size_t scale_stride,
                                   std::size_t c0, std::size_t d_v, const float* alpha, float* o,
                                   std::size_t ldo) noexcept {
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

// (maybe_unused: the NEON table finishes its scores without it.)
[[maybe_unused]] void cache_rows_dot_scalar(bool f16, const float* q, std::size_t ldq, std::size_t nr, std::size_t d,
                                            const void* k, std::size_t ldk, const float* scales,
                                            std::size_t scale_stride, std::size_t bk, float* s,
                                            std::size_t lds) noexcept {
  if (!f16)
    return cache_q8_rows_dot_2xn_scalar(q, ldq, nr, d, static_cast<const std::int8_t*>(k), ldk, scales, scale_stride,
                                        bk, s, lds);
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
void cache_rows_axpy_scalar(bool f16, const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const void* v,
                            std::size_t ldv, const float* scales, std::size_t scale_stride, std::size_t c0,
                            std::size_t d_v, const float* alpha, float* o, std::size_t ldo) noexcept {
  if (!f16)
    return cache_q8_rows_axpy_2xn_scalar(p, ldp, nr, bk, static_cast<const std::int8_t*>(v), ldv, scales, scale_stride,
                                         c0, d_v, alpha, o, ldo);
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
constexpr CacheKernels cache_table(const char* arch) noexcept {
  return {arch, F16Rows, Q8Rows, Fused::f16_dot, Fused::q8_dot, Fused::f16_axpy, Fused::q8_axpy};
}

template <bool F16, class T>
void scalar_dot_entry(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const T* k, std::size_t ldk,
                      const float* scales, std::size_t scale_stride, std::size_t bk, float* s,
                      std::size_t lds) noexcept {
  cache_rows_dot_scalar(F16, q, ldq, nr, d, k, ldk, scales, scale_stride, bk, s, lds);
}
template <bool F16, class T>
void scalar_axpy_entry(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const T* v, std::size_t ldv,
                       const float* scales, std::size_t scale_stride, std::size_t d_v, const float* alpha, float* o,
                       std::size_t ldo) noexcept {
  cache_rows_axpy_scalar(F16, p, ldp, nr, bk, v, ldv, scales, scale_stride, 0, d_v, alpha, o, ldo);
}

}  // namespace
}  // namespace detail
}  // namespace microattn
