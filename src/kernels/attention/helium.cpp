// Helium (M-profile Vector Extension with floating point, MVE-F) kernels: the vector table of Cortex-M55 and
// any core with __ARM_FEATURE_MVE & 2, written with arm_mve.h intrinsics. Meson compiles this file instead of
// no_simd.cpp when the target has MVE-F (xsimd has no Helium backend).
//
// Vectors are 4 floats (128 bits) and there are only 8 vector registers (q0–q7), so the register tiles are
// one vector wide: up to 6 vector accumulators, one vector operand, and the other operand broadcast from a
// general register (VFMA.F32 Qd, Qn, Rm), which is what MVE offers instead of a by-element multiply-add.
// Column and element tails use tail predication (VCTP): predicated loads read zeros and predicated stores
// write nothing past the end, so a tail costs one more iteration instead of a scalar loop.
// The attention tile is attention_block_q = 4 queries: exactly one vector, the lanes of every primitive.
#include "kernels/attention.hpp"

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)

#include <arm_mve.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/exp/constants.hpp"
#include "kernels/scalar_math.hpp"
#include "microattn/config.hpp"

namespace microattn {
namespace detail {
namespace {

constexpr std::size_t lanes = 4;
constexpr std::size_t br = attention_block_q;
static_assert(br == lanes, "the Helium attention primitives hold one tile of queries in one vector");

#define MICROATTN_HELIUM_INLINE inline __attribute__((always_inline))

// Two adjacent floats into two general registers (the broadcast operands of VFMA.F32 Qd, Qn, Rm) with one
// LDRD: GCC 12 issues two LDRs for them, and at -Os a spill or two besides.
template <int Offset = 0>
MICROATTN_HELIUM_INLINE void load_pair(const float* p, float& x, float& y) noexcept {
  asm("ldrd %0, %1, [%2, %3]"
      : "=r"(x), "=r"(y)
      : "r"(p), "I"(Offset * 4), "m"(*reinterpret_cast<const float(*)[2]>(p + Offset)));
}
// The same, advancing p by the two floats read (post-indexed).
MICROATTN_HELIUM_INLINE void load_pair_next(const float*& p, float& x, float& y) noexcept {
  asm("ldrd %0, %1, [%2], #8" : "=r"(x), "=r"(y), "+r"(p) : "m"(*reinterpret_cast<const float(*)[2]>(p)));
}

// store(dst + r·ld, c_r) for r < N: the accumulators of a tile of N rows (or columns), from c0 on.
template <int N, class Store>
MICROATTN_HELIUM_INLINE void store_first(Store store, float* dst, std::size_t ld, float32x4_t c0, float32x4_t c1,
                                         float32x4_t c2, float32x4_t c3, float32x4_t c4, float32x4_t c5) noexcept {
  store(dst, c0);
  if constexpr (N > 1) store(dst + ld, c1);
  if constexpr (N > 2) store(dst + 2 * ld, c2);
  if constexpr (N > 3) store(dst + 3 * ld, c3);
  if constexpr (N > 4) store(dst + 4 * ld, c4);
  if constexpr (N > 5) store(dst + 5 * ld, c5);
}

// ---- gemm -------------------------------------------------------------------------------------------------
// b not transposed: R rows of a (R <= 6) × 4 columns of b, acc_r += b(p, j0..j0+3) · a(r, p). Full: all 4
// columns exist; otherwise the column tail is predicated (VPST before each load and store). Each element is
// summed over p in order with fused multiply-adds, as in the scalar path.
template <int R, bool Full>
__attribute__((noinline)) void gemm_rx4_helium(const float* __restrict a, std::size_t lda, const float* __restrict b,
                                               std::size_t ldb, std::size_t k, float* __restrict c, std::size_t ldc,
                                               mve_pred16_t cols) noexcept {
  const float* __restrict a0 = a;
  const float* __restrict a1 = a0 + (R > 1 ? lda : 0);
  const float* __restrict a2 = a1 + (R > 2 ? lda : 0);
  const float* __restrict a3 = a2 + (R > 3 ? lda : 0);
  const float* __restrict a4 = a3 + (R > 4 ? lda : 0);
  const float* __restrict a5 = a4 + (R > 5 ? lda : 0);
  float32x4_t c0 = vdupq_n_f32(0.0f), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  // Two p per iteration: one LDRD per row gives both of its operands.
  for (std::size_t p = k / 2; p != 0; --p) {
    const float32x4_t u = Full ? vldrwq_f32(b) : vldrwq_z_f32(b, cols);
    const float32x4_t w = Full ? vldrwq_f32(b + ldb) : vldrwq_z_f32(b + ldb, cols);
    b += 2 * ldb;
    float x, y;
    load_pair_next(a0, x, y);
    c0 = vfmaq_n_f32(vfmaq_n_f32(c0, u, x), w, y);
    if constexpr (R > 1) load_pair_next(a1, x, y), c1 = vfmaq_n_f32(vfmaq_n_f32(c1, u, x), w, y);
    if constexpr (R > 2) load_pair_next(a2, x, y), c2 = vfmaq_n_f32(vfmaq_n_f32(c2, u, x), w, y);
    if constexpr (R > 3) load_pair_next(a3, x, y), c3 = vfmaq_n_f32(vfmaq_n_f32(c3, u, x), w, y);
    if constexpr (R > 4) load_pair_next(a4, x, y), c4 = vfmaq_n_f32(vfmaq_n_f32(c4, u, x), w, y);
    if constexpr (R > 5) load_pair_next(a5, x, y), c5 = vfmaq_n_f32(vfmaq_n_f32(c5, u, x), w, y);
  }
  if (k % 2 != 0) {
    const float32x4_t u = Full ? vldrwq_f32(b) : vldrwq_z_f32(b, cols);
    c0 = vfmaq_n_f32(c0, u, *a0);
    if constexpr (R > 1) c1 = vfmaq_n_f32(c1, u, *a1);
    if constexpr (R > 2) c2 = vfmaq_n_f32(c2, u, *a2);
    if constexpr (R > 3) c3 = vfmaq_n_f32(c3, u, *a3);
    if constexpr (R > 4) c4 = vfmaq_n_f32(c4, u, *a4);
    if constexpr (R > 5) c5 = vfmaq_n_f32(c5, u, *a5);
  }
  auto store = [&](float* dst, float32x4_t v) __attribute__((always_inline)) {
    if (Full)
      vstrwq_f32(dst, v);
    else
      vstrwq_p_f32(dst, v, cols);
  };
  store_first<R>(store, c, ldc, c0, c1, c2, c3, c4, c5);
}

// f(std::integral_constant<std::size_t, n>{}) when 1 <= n <= sizeof...(I): a run-time count (the rows or columns
// left after the widest tiles) as the template argument of a tile, whose registers are fixed at compile time.
// GCC compiles the tests to one jump table.
template <class F, std::size_t... I>
MICROATTN_HELIUM_INLINE void with_count(std::size_t n, F&& f, std::index_sequence<I...>) noexcept {
  constexpr std::size_t max = sizeof...(I);
  (void)((n == max - I && (f(std::integral_constant<std::size_t, max - I>{}), true)) || ...);
}

template <bool Full>  // inlined: one frame less on the deepest stack path (layer forward, scores)
__attribute__((always_inline)) inline void gemm_nx4_helium(const float* a, std::size_t lda, const float* b,
                                                           std::size_t ldb, std::size_t k, float* c, std::size_t ldc,
                                                           std::size_t m, mve_pred16_t cols) noexcept {
  std::size_t i = 0;
  for (; i + 6 <= m; i += 6) gemm_rx4_helium<6, Full>(a + i * lda, lda, b, ldb, k, c + i * ldc, ldc, cols);
  with_count(
      m - i,
      [&](auto rows) __attribute__((always_inline)) {
        gemm_rx4_helium<decltype(rows)::value, Full>(a + i * lda, lda, b, ldb, k, c + i * ldc, ldc, cols);
      },
      std::make_index_sequence<5>{});
}

// Rows [0, m) of c against 4 columns of b (n_cols <= 4 of them exist): tiles of 6 rows, then one of the rest.
void gemm_nxc_helium(const float* a, std::size_t lda, const float* b, std::size_t ldb, std::size_t k, float* c,
                     std::size_t ldc, std::size_t m, std::size_t n_cols) noexcept {
  const mve_pred16_t cols = vctp32q(static_cast<std::uint32_t>(n_cols));
  if (n_cols == lanes)
    gemm_nx4_helium<true>(a, lda, b, ldb, k, c, ldc, m, cols);
  else
    gemm_nx4_helium<false>(a, lda, b, ldb, k, c, ldc, m, cols);
}

MICROATTN_HELIUM_INLINE float horizontal_sum(float32x4_t v) noexcept {
  return (vgetq_lane_f32(v, 0) + vgetq_lane_f32(v, 1)) + (vgetq_lane_f32(v, 2) + vgetq_lane_f32(v, 3));
}

// b transposed (b stored n×k, the nn.Linear layout): R rows of a × C rows of b as dot products along p, four
// p at a time (predicated tail), then one horizontal sum per element. 2×2: 4 accumulators + 4 operands.
template <int R, int C>
__attribute__((noinline)) void gemm_rxc_dot_helium(const float* __restrict a, std::size_t lda,
                                                   const float* __restrict b, std::size_t ldb, std::size_t k,
                                                   float* __restrict c, std::size_t ldc) noexcept {
  const float* __restrict a0 = a;
  const float* __restrict a1 = a + (R > 1 ? lda : 0);
  const float* __restrict b0 = b;
  const float* __restrict b1 = b + (C > 1 ? ldb : 0);
  float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c10 = c00, c11 = c00;
  // Whole vectors unpredicated (a predicated load costs a VPST each), then the tail of k under VCTP.
  auto step = [&](std::size_t p, auto load) __attribute__((always_inline)) {
    const float32x4_t x0 = load(a0 + p), y0 = load(b0 + p);
    c00 = vfmaq_f32(c00, x0, y0);
    if constexpr (C > 1) {
      const float32x4_t y1 = load(b1 + p);
      c01 = vfmaq_f32(c01, x0, y1);
      if constexpr (R > 1) {
        const float32x4_t x1 = load(a1 + p);
        c10 = vfmaq_f32(c10, x1, y0);
        c11 = vfmaq_f32(c11, x1, y1);
      }
    } else if constexpr (R > 1) {
      c10 = vfmaq_f32(c10, load(a1 + p), y0);
    }
  };
  const std::size_t whole = k - k % lanes;
  for (std::size_t p = 0; p < whole; p += lanes) step(p, [](const float* q) { return vldrwq_f32(q); });
  if (whole < k) {
    const mve_pred16_t live = vctp32q(static_cast<std::uint32_t>(k - whole));
    step(whole, [live](const float* q) { return vldrwq_z_f32(q, live); });
  }
  c[0] = horizontal_sum(c00);
  if constexpr (C > 1) c[1] = horizontal_sum(c01);
  if constexpr (R > 1) c[ldc] = horizontal_sum(c10);
  if constexpr (R > 1 && C > 1) c[ldc + 1] = horizontal_sum(c11);
}

void gemm_helium(const GemmArgs& g) noexcept {
  if (!g.transpose_b) {
    for (std::size_t j = 0; j < g.n; j += lanes) {
      const std::size_t nc = g.n - j < lanes ? g.n - j : lanes;
      gemm_nxc_helium(g.a, g.lda, g.b + j, g.ldb, g.k, g.c + j, g.ldc, g.m, nc);
    }
    return;
  }
  const std::size_t m2 = g.m & ~std::size_t{1}, n2 = g.n & ~std::size_t{1};
  for (std::size_t i = 0; i < m2; i += 2) {
    for (std::size_t j = 0; j < n2; j += 2)
      gemm_rxc_dot_helium<2, 2>(g.a + i * g.lda, g.lda, g.b + j * g.ldb, g.ldb, g.k, g.c + i * g.ldc + j, g.ldc);
    if (n2 < g.n)
      gemm_rxc_dot_helium<2, 1>(g.a + i * g.lda, g.lda, g.b + n2 * g.ldb, g.ldb, g.k, g.c + i * g.ldc + n2, g.ldc);
  }
  if (m2 < g.m) {
    for (std::size_t j = 0; j < n2; j += 2)
      gemm_rxc_dot_helium<1, 2>(g.a + m2 * g.lda, g.lda, g.b + j * g.ldb, g.ldb, g.k, g.c + m2 * g.ldc + j, g.ldc);
    if (n2 < g.n)
      gemm_rxc_dot_helium<1, 1>(g.a + m2 * g.lda, g.lda, g.b + n2 * g.ldb, g.ldb, g.k, g.c + m2 * g.ldc + n2, g.ldc);
  }
}

// max(x, lo) that lets a NaN through (the scalar "x < lo ? lo : x"): VCMP then VPSEL. Compared as lo > x:
// the condition LT holds for unordered operands (N != V), GT does not, so a NaN x is kept. Written out because
// GCC 12 routes the predicate through a general register (VMRS, SXTH, VMSR) between the two. P0 is saved
// and restored around them (GCC has no clobber for it), so a tail-predicated caller keeps its predicate.
template <bool KeepP0>
MICROATTN_HELIUM_INLINE float32x4_t clamp_below(float32x4_t x, float32x4_t lo_v) noexcept {
  float32x4_t r;
  if constexpr (KeepP0) {
    std::uint32_t saved;
    asm("vmrs %1, p0\n\tvcmp.f32 gt, %q3, %q2\n\tvpsel %q0, %q3, %q2\n\tvmsr p0, %1"
        : "=w"(r), "=&r"(saved)
        : "w"(x), "w"(lo_v));
  } else {  // only where no predicate is live (no predicated intrinsic in the function)
    asm("vcmp.f32 gt, %q2, %q1\n\tvpsel %q0, %q2, %q1" : "=w"(r) : "w"(x), "w"(lo_v));
  }
  return r;
}

// ---- exp --------------------------------------------------------------------------------------------------
// The algorithms of scalar_math.hpp (exp/constants.hpp), four lanes at a time, in the same operation order.
// The clamps are compare-and-select, not VMAXNM/VMINNM, so that a NaN passes through as in the scalar code.

// c.c0 + c.c1·r + … + c.c6·r⁶, in the order of scalar_math.hpp's horner6.
MICROATTN_HELIUM_INLINE float32x4_t horner6(float32x4_t r, const Poly6& c) noexcept {
  float32x4_t p = vfmasq_n_f32(vdupq_n_f32(c.c6), r, c.c5);
  p = vfmasq_n_f32(p, r, c.c4);
  p = vfmasq_n_f32(p, r, c.c3);
  p = vfmasq_n_f32(p, r, c.c2);
  p = vfmasq_n_f32(p, r, c.c1);
  return vfmasq_n_f32(p, r, c.c0);
}

MICROATTN_HELIUM_INLINE float32x4_t exp_vec(float32x4_t x) noexcept {  // (used in predicated loops)
  using namespace exp_constants;
  x = clamp_below<true>(x, vdupq_n_f32(x_min));
  x = vpselq_f32(vdupq_n_f32(x_max), x, vcmpgtq_n_f32(x, x_max));
  const float32x4_t t = vfmaq_n_f32(vdupq_n_f32(round_magic), x, log2e);
  const float32x4_t n = vsubq_n_f32(t, round_magic);
  float32x4_t r = vfmaq_n_f32(x, n, -ln2_hi);
  r = vfmaq_n_f32(r, n, -ln2_lo);
  const float32x4_t p = horner6(r, poly);
  const int32x4_t ni = vsubq_s32(vreinterpretq_s32_f32(t), vdupq_n_s32(static_cast<std::int32_t>(0x4b400000)));
  const int32x4_t e1 = vshrq_n_s32(ni, 1);  // arithmetic shift: both halves keep 2^e normal
  const int32x4_t e2 = vsubq_s32(ni, e1);
  const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_n_s32(e1, 127), 23));
  const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_n_s32(e2, 127), 23));
  return vmulq_f32(vmulq_f32(p, s1), s2);
}

// 2^x for x <= 0 or NaN (exp2_constants): x clamped at −127, where the exponent field becomes 0.
// KeepP0: called where a tail predicate is live (see clamp_below).
template <bool KeepP0>
MICROATTN_HELIUM_INLINE float32x4_t exp2_nonpositive_vec(float32x4_t x) noexcept {
  using namespace exp2_constants;
  x = clamp_below<KeepP0>(x, vdupq_n_f32(x_min));
  const float32x4_t t = vaddq_n_f32(x, round_magic);
  const float32x4_t r = vsubq_f32(x, vsubq_n_f32(t, round_magic));
  const float32x4_t p = horner6(r, poly);
  // (bits(t) − bits(magic) + 127) << 23, as one add of a constant
  const uint32x4_t e =
      vshlq_n_u32(vaddq_n_u32(vreinterpretq_u32_f32(t), 127u - static_cast<std::uint32_t>(0x4b400000)), 23);
  return vmulq_f32(p, vreinterpretq_f32_u32(e));
}

void exp_helium(const float* x, float* y, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; i += lanes) {
    const mve_pred16_t live = vctp32q(static_cast<std::uint32_t>(n - i));
    vstrwq_p_f32(y + i, exp_vec(vldrwq_z_f32(x + i, live)), live);
  }
}

void exp2_nonpositive_helium(const float* x, float* y, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; i += lanes) {
    const mve_pred16_t live = vctp32q(static_cast<std::uint32_t>(n - i));
    vstrwq_p_f32(y + i, exp2_nonpositive_vec<true>(vldrwq_z_f32(x + i, live)), live);
  }
}

// ---- softmax ----------------------------------------------------------------------------------------------
void softmax_row_helium(float* x, std::size_t n) noexcept {
  // Max: VMAXNM ignores a NaN, as the scalar "x > m ? x : m" does (the NaN shows in the sum below).
  float32x4_t mv = vdupq_n_f32(-INFINITY);
  for (std::size_t i = 0; i < n; i += lanes) {
    const mve_pred16_t live = vctp32q(static_cast<std::uint32_t>(n - i));
    mv = vmaxnmq_m_f32(mv, mv, vldrwq_z_f32(x + i, live), live);
  }
  const float m = vmaxnmvq_f32(-INFINITY, mv);
  if (m == -INFINITY) {  // all −inf (or −inf and NaN): zeros, unless a NaN is there
    bool has_nan = false;
    for (std::size_t i = 0; i < n; ++i) has_nan = has_nan || x[i] != x[i];
    for (std::size_t i = 0; i < n; ++i) x[i] = has_nan ? NAN : 0.0f;
    return;
  }
  float32x4_t sum = vdupq_n_f32(0.0f);
  for (std::size_t i = 0; i < n; i += lanes) {
    const mve_pred16_t live = vctp32q(static_cast<std::uint32_t>(n - i));
    const float32x4_t e = exp_vec(vsubq_n_f32(vldrwq_z_f32(x + i, live), m));
    vstrwq_p_f32(x + i, e, live);
    sum = vaddq_m_f32(sum, sum, e, live);
  }
  const float inv = 1.0f / horizontal_sum(sum);
  for (std::size_t i = 0; i < n; i += lanes) {
    const mve_pred16_t live = vctp32q(static_cast<std::uint32_t>(n - i));
    vstrwq_p_f32(x + i, vmulq_n_f32(vldrwq_z_f32(x + i, live), inv), live);
  }
}

// ---- attention primitives (one vector = the tile's 4 query lanes, see kernels/attention.hpp) ------------------------
// Scores: keys in rows, the tile's queries in the lanes: s[j] = Σ_p qt[p] · k[j][p], R keys per tile.
void attn_scores_helium(const float* qt, std::size_t d_k, const float* k, std::size_t ldk, std::size_t bk, float* s,
                        std::size_t nq) noexcept {
  (void)nq;  // all four lanes are computed (qt is zero beyond nq)
  gemm_nxc_helium(k, ldk, qt, br, d_k, s, br, bk, lanes);
}

void attn_softmax_helium(float* s, std::size_t bk, float* m, float* l, float* alpha, std::size_t nq) noexcept {
  (void)nq;
  const float32x4_t m_old = vldrwq_f32(m);
  float32x4_t mb = m_old;
  const float* sj = s;
  std::size_t j = bk;
  do mb = vmaxnmq_f32(mb, vldrwq_f32(sj)), sj += br;
  while (--j != 0);  // bk >= 1; do-whiles become low-overhead loops (LE)
  // A lane that has seen nothing (−inf) uses 0, so it never computes −inf − (−inf).
  const float32x4_t m_use = vpselq_f32(vdupq_n_f32(0.0f), mb, vcmpeqq_n_f32(mb, -INFINITY));
  const float32x4_t a = exp2_nonpositive_vec<false>(vsubq_f32(m_old, m_use));
  float32x4_t sum = vdupq_n_f32(0.0f);
  float* x = s;
  j = bk;
  do {
    const float32x4_t p = exp2_nonpositive_vec<false>(vsubq_f32(vldrwq_f32(x), m_use));
    vstrwq_f32(x, p);
    x += br;
    sum = vaddq_f32(sum, p);
  } while (--j != 0);
  vstrwq_f32(alpha, a);
  vstrwq_f32(l, vfmaq_f32(sum, vldrwq_f32(l), a));
  vstrwq_f32(m, mb);
}

// P·V: ot[c] (4 lanes) = ot[c]·alpha + Σ_j p[j] · v[j][c]; C columns at a time in registers across all keys.
template <int C>
__attribute__((noinline)) void attn_pv_cx4_helium(const float* __restrict p, std::size_t bk, const float* __restrict v,
                                                  std::size_t ldv, float32x4_t a, float* __restrict ot) noexcept {
  float32x4_t c0 = vmulq_f32(vldrwq_f32(ot), a), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  if constexpr (C > 1) c1 = vmulq_f32(vldrwq_f32(ot + br), a);
  if constexpr (C > 2) c2 = vmulq_f32(vldrwq_f32(ot + 2 * br), a);
  if constexpr (C > 3) c3 = vmulq_f32(vldrwq_f32(ot + 3 * br), a);
  if constexpr (C > 4) c4 = vmulq_f32(vldrwq_f32(ot + 4 * br), a);
  if constexpr (C > 5) c5 = vmulq_f32(vldrwq_f32(ot + 5 * br), a);
  std::size_t j = bk;
  do {  // bk >= 1; a do-while becomes a low-overhead loop (LE)
    const float32x4_t pj = vldrwq_f32(p);
    p += br;
    float x, y;
    load_pair(v, x, y);
    c0 = vfmaq_n_f32(c0, pj, x);
    if constexpr (C > 1) c1 = vfmaq_n_f32(c1, pj, y);
    if constexpr (C > 3) load_pair<2>(v, x, y);
    if constexpr (C == 3) x = v[2];
    if constexpr (C > 2) c2 = vfmaq_n_f32(c2, pj, x);
    if constexpr (C > 3) c3 = vfmaq_n_f32(c3, pj, y);
    if constexpr (C > 5) load_pair<4>(v, x, y);
    if constexpr (C == 5) x = v[4];
    if constexpr (C > 4) c4 = vfmaq_n_f32(c4, pj, x);
    if constexpr (C > 5) c5 = vfmaq_n_f32(c5, pj, y);
    v += ldv;
  } while (--j != 0);
  store_first<C>(
      [](float* dst, float32x4_t x) __attribute__((always_inline)) { vstrwq_f32(dst, x); }, ot, br, c0, c1, c2, c3, c4,
      c5);
}

void attn_pv_helium(const float* p, std::size_t bk, const float* v, std::size_t ldv, std::size_t d_v,
                    const float* alpha, float* ot, std::size_t nq) noexcept {
  (void)nq;
  const float32x4_t a = vldrwq_f32(alpha);
  std::size_t c = 0;
  for (; c + 6 <= d_v; c += 6) attn_pv_cx4_helium<6>(p, bk, v + c, ldv, a, ot + c * br);
  with_count(
      d_v - c,
      [&](auto cols) __attribute__((always_inline)) {
        attn_pv_cx4_helium<decltype(cols)::value>(p, bk, v + c, ldv, a, ot + c * br);
      },
      std::make_index_sequence<5>{});
}

// qt[p][i] = q[i][p]·factor: four rows of q, four p at a time, transposed on the way out by VST4 (which
// interleaves four vectors: element p of vector i lands at 4·p + i). Lanes from bq on are zero.
void attn_pack_q_helium(const float* q, std::size_t ldq, std::size_t bq, std::size_t d_k, float factor,
                        float* qt) noexcept {
  std::size_t p = 0;
  if (bq == lanes) {
    for (; p + lanes <= d_k; p += lanes) {
      float32x4x4_t t;
      t.val[0] = vmulq_n_f32(vldrwq_f32(q + p), factor);
      t.val[1] = vmulq_n_f32(vldrwq_f32(q + ldq + p), factor);
      t.val[2] = vmulq_n_f32(vldrwq_f32(q + 2 * ldq + p), factor);
      t.val[3] = vmulq_n_f32(vldrwq_f32(q + 3 * ldq + p), factor);
      vst4q_f32(qt + p * br, t);
    }
  }
  for (; p < d_k; ++p)
    for (std::size_t i = 0; i < lanes; ++i) qt[p * br + i] = i < bq ? q[i * ldq + p] * factor : 0.0f;
}

// out[i][c] = ot[c][i] / l[i]: VLD4 de-interleaves four columns of ot into one vector per query (the
// transpose), then one multiply per vector. A query with l == 0 saw no key and gets zeros.
void attn_store_out_helium(const float* ot, const float* l, std::size_t bq, std::size_t d_v, float* out,
                           std::size_t ldo) noexcept {
  std::size_t c = 0;
  if (bq == lanes && d_v >= lanes && l[0] != 0.0f && l[1] != 0.0f && l[2] != 0.0f && l[3] != 0.0f) {
    const float inv0 = 1.0f / l[0], inv1 = 1.0f / l[1], inv2 = 1.0f / l[2], inv3 = 1.0f / l[3];
    float* y0 = out;
    float* y1 = out + ldo;
    float* y2 = out + 2 * ldo;
    float* y3 = out + 3 * ldo;
    const float* t = ot;
    std::size_t n = d_v / lanes;
    do {
      const float32x4x4_t v = vld4q_f32(t);
      t += lanes * br;
      vstrwq_f32(y0, vmulq_n_f32(v.val[0], inv0));
      vstrwq_f32(y1, vmulq_n_f32(v.val[1], inv1));
      vstrwq_f32(y2, vmulq_n_f32(v.val[2], inv2));
      vstrwq_f32(y3, vmulq_n_f32(v.val[3], inv3));
      y0 += lanes, y1 += lanes, y2 += lanes, y3 += lanes;
    } while (--n != 0);
    c = d_v - d_v % lanes;
    if (c == d_v) return;
  }
  for (std::size_t i = 0; i < bq; ++i) {
    const float inv = l[i] == 0.0f ? 0.0f : 1.0f / l[i];
    for (std::size_t cc = c; cc < d_v; ++cc) out[i * ldo + cc] = l[i] == 0.0f ? 0.0f : ot[cc * br + i] * inv;
  }
}

// Designated order of struct Kernels (kernels/attention.hpp): add new members here in the same order.
constexpr Kernels helium_table{
    /* arch */ "helium",
    /* vector_floats */ lanes,
    /* gemm_name */ "gemm_6x4_helium",
    /* flushes_subnormals */ true,  // MVE floating point flushes subnormal inputs and results (as QEMU runs it)
    /* gemm */ gemm_helium,
    /* softmax_row */ softmax_row_helium,
    /* exp */ exp_helium,
    /* attn_scores */ attn_scores_helium,
    /* attn_softmax */ attn_softmax_helium,
    /* attn_pv */ attn_pv_helium,
    /* attn_pack_q */ attn_pack_q_helium,
    /* attn_store_out */ attn_store_out_helium,
    /* exp2_nonpositive */ exp2_nonpositive_helium,
    // Row kernels: the scalar ones and their threshold for now (no Helium versions yet).
    /* few_query_max */ few_query_max_scalar,
    /* rows_dot */ rows_dot_scalar,
    /* rows_softmax */ rows_softmax_scalar,
    /* rows_axpy */ rows_axpy_scalar,
};

}  // namespace

const Kernels* vector_kernels() noexcept { return &helium_table; }
const char* simd_arch_name() noexcept { return "helium"; }

}  // namespace detail
}  // namespace microattn

#else
#error "attention/helium.cpp is the table of cores with MVE-F: sources.txt compiles it only for them"
#endif
