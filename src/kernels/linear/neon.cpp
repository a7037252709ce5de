// linear()'s NEON kernels: AArch64 (fcvtl for f16; sdot where __ARM_FEATURE_DOTPROD, else smull + smlal + sadalp
// for q8) and ARMv7 NEON (vcvt.f32.f16 where the FPU has half precision, the same q8 product). Compiled in every
// build; empty without NEON (Cortex-M: the scalar kernels).
//
// f16: each weight vector is converted once and used by every x row of the tile; on ARMv7, whose Advanced SIMD
// flushes subnormal operands, a row of x with a subnormal element goes through the scalar kernel (VFP). q8: per 16
// bytes, eight int16 pairs of products (each pair at most 2·128·127 = 32512: no overflow, −128 included) accumulated
// into int32 lanes, or one sdot; each group's lanes are scaled in float, lane by lane, and reduced once per output and
// chunk.
#include "kernels/linear.hpp"

#if MICROATTN_LINEAR_NEON
#include <arm_neon.h>

#include <cassert>
#include <cstring>
#include <type_traits>

#include "kernels/attention.hpp"

namespace microattn {
namespace detail {
namespace {

#if defined(__aarch64__)
#define MICROATTN_LINEAR_F16 1
inline float32x4_t cvt_lo(uint16x8_t h) noexcept { return vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))); }
inline float32x4_t cvt_hi(uint16x8_t h) noexcept { return vcvt_high_f32_f16(vreinterpretq_f16_u16(h)); }
inline float lane_sum(float32x4_t v) noexcept { return vaddvq_f32(v); }
inline float32x4_t madd(float32x4_t acc, float32x4_t a, float32x4_t b) noexcept { return vfmaq_f32(acc, a, b); }
inline std::uint32_t lane_max(uint32x4_t v) noexcept { return vmaxvq_u32(v); }
#else
#if defined(__ARM_NEON_FP) && (__ARM_NEON_FP & 2)
// The FPU converts half precision (VFPv4, -mfpu=neon-vfpv4), but arm_neon.h offers it only with -mfp16-format:
// the instruction itself.
#define MICROATTN_LINEAR_F16 1
inline float32x4_t cvt4(uint16x4_t h) noexcept {
  float32x4_t r;
  asm("vcvt.f32.f16 %q0, %P1" : "=w"(r) : "w"(h));
  return r;
}
inline float32x4_t cvt_lo(uint16x8_t h) noexcept { return cvt4(vget_low_u16(h)); }
inline float32x4_t cvt_hi(uint16x8_t h) noexcept { return cvt4(vget_high_u16(h)); }
#else
#define MICROATTN_LINEAR_F16 0
#endif
inline float lane_sum(float32x4_t v) noexcept {
  const float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
  return vget_lane_f32(vpadd_f32(s, s), 0);
}
inline float32x4_t madd(float32x4_t acc, float32x4_t a, float32x4_t b) noexcept {
#if defined(__ARM_FEATURE_FMA)
  return vfmaq_f32(acc, a, b);
#else
  return vmlaq_f32(acc, a, b);
#endif
}
inline std::uint32_t lane_max(uint32x4_t v) noexcept {
  uint32x2_t m = vpmax_u32(vget_low_u32(v), vget_high_u32(v));
  m = vpmax_u32(m, m);
  return vget_lane_u32(m, 0);
}
#endif

// The lane sums of four accumulators, float or int32 (exact), as one vector (lane j: the sum of a_j): pairwise adds,
// no round trip through scalars.
template <class V>
inline V sum4(V a0, V a1, V a2, V a3) noexcept {
  constexpr bool is_float = std::is_same<V, float32x4_t>::value;
#if defined(__aarch64__)
  if constexpr (is_float) {
    return vpaddq_f32(vpaddq_f32(a0, a1), vpaddq_f32(a2, a3));
  } else {
    return vpaddq_s32(vpaddq_s32(a0, a1), vpaddq_s32(a2, a3));
  }
#else
  if constexpr (is_float) {
    const float32x2_t s0 = vadd_f32(vget_low_f32(a0), vget_high_f32(a0)),
                      s1 = vadd_f32(vget_low_f32(a1), vget_high_f32(a1));
    const float32x2_t s2 = vadd_f32(vget_low_f32(a2), vget_high_f32(a2)),
                      s3 = vadd_f32(vget_low_f32(a3), vget_high_f32(a3));
    return vcombine_f32(vpadd_f32(s0, s1), vpadd_f32(s2, s3));
  } else {
    const int32x2_t s01 =
        vpadd_s32(vadd_s32(vget_low_s32(a0), vget_high_s32(a0)), vadd_s32(vget_low_s32(a1), vget_high_s32(a1)));
    return vcombine_s32(
        s01, vpadd_s32(vadd_s32(vget_low_s32(a2), vget_high_s32(a2)), vadd_s32(vget_low_s32(a3), vget_high_s32(a3))));
  }
#endif
}

// y[0..4) = (bias or 0) + v.
inline void store4(float* y, const float* bias, float32x4_t v) noexcept {
  vst1q_f32(y, bias != nullptr ? vaddq_f32(vld1q_f32(bias), v) : vaddq_f32(vdupq_n_f32(0.0f), v));
}

// ---- f16 ------------------------------------------------------------------------------------------------------

#if MICROATTN_LINEAR_F16
// MR x rows × NR weight rows, 8 columns per step (two vectors of x per row, one of halves per weight row); the last
// k % 8 columns through zero-padded copies.
template <int MR, int NR>
void f16_tile(const float* x, std::size_t ldx, const std::uint16_t* w, std::size_t k, const float* bias, float* y,
              std::size_t ldy) noexcept {
  float32x4_t acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = vdupq_n_f32(0.0f);
  const auto step = [&](const float* const* xp, const std::uint16_t* const* wp) noexcept {
    float32x4_t xl[MR], xh[MR];
    for (int i = 0; i < MR; ++i) {
      xl[i] = vld1q_f32(xp[i]);
      xh[i] = vld1q_f32(xp[i] + 4);
    }
    for (int j = 0; j < NR; ++j) {
      const uint16x8_t h = vld1q_u16(wp[j]);
      const float32x4_t wl = cvt_lo(h), wh = cvt_hi(h);
      for (int i = 0; i < MR; ++i) acc[i][j] = madd(madd(acc[i][j], xl[i], wl), xh[i], wh);
    }
  };
  std::size_t c = 0;
  for (; c + 8 <= k; c += 8) {
    const float* xp[MR];
    const std::uint16_t* wp[NR];
    for (int i = 0; i < MR; ++i) xp[i] = x + i * ldx + c;
    for (int j = 0; j < NR; ++j) wp[j] = w + j * k + c;
    step(xp, wp);
  }
  if (c < k) {
    const std::size_t rem = k - c;
    float xt[MR][8] = {};
    std::uint16_t wt[NR][8] = {};
    const float* xp[MR];
    const std::uint16_t* wp[NR];
    for (int i = 0; i < MR; ++i) {
      std::memcpy(xt[i], x + i * ldx + c, rem * sizeof(float));
      xp[i] = xt[i];
    }
    for (int j = 0; j < NR; ++j) {
      std::memcpy(wt[j], w + j * k + c, rem * sizeof(std::uint16_t));
      wp[j] = wt[j];
    }
    step(xp, wp);
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = bias_of(bias, static_cast<std::size_t>(j)) + lane_sum(acc[i][j]);
}

// One x row × 4 weight rows with every accumulator named (GCC 12 kept f16_tile<1, 4>'s arrays on the ARMv7 stack).
void f16_1x4(const float* x, const std::uint16_t* w, std::size_t k, const float* bias, float* y) noexcept {
  const std::uint16_t* w0 = w;
  const std::uint16_t* w1 = w0 + k;
  const std::uint16_t* w2 = w1 + k;
  const std::uint16_t* w3 = w2 + k;
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
  const auto step = [&](const float* xp, const std::uint16_t* p0, const std::uint16_t* p1, const std::uint16_t* p2,
                        const std::uint16_t* p3) __attribute__((always_inline)) {
    const float32x4_t xl = vld1q_f32(xp), xh = vld1q_f32(xp + 4);
    uint16x8_t h = vld1q_u16(p0);
    a0 = madd(madd(a0, xl, cvt_lo(h)), xh, cvt_hi(h));
    h = vld1q_u16(p1);
    a1 = madd(madd(a1, xl, cvt_lo(h)), xh, cvt_hi(h));
    h = vld1q_u16(p2);
    a2 = madd(madd(a2, xl, cvt_lo(h)), xh, cvt_hi(h));
    h = vld1q_u16(p3);
    a3 = madd(madd(a3, xl, cvt_lo(h)), xh, cvt_hi(h));
  };
  std::size_t c = 0;
  for (; c + 8 <= k; c += 8) step(x + c, w0 + c, w1 + c, w2 + c, w3 + c);
  if (c < k) {
    const std::size_t rem = k - c;
    float xt[8] = {};
    std::uint16_t wt[4][8] = {};
    std::memcpy(xt, x + c, rem * sizeof(float));
    std::memcpy(wt[0], w0 + c, rem * sizeof(std::uint16_t));
    std::memcpy(wt[1], w1 + c, rem * sizeof(std::uint16_t));
    std::memcpy(wt[2], w2 + c, rem * sizeof(std::uint16_t));
    std::memcpy(wt[3], w3 + c, rem * sizeof(std::uint16_t));
    step(xt, wt[0], wt[1], wt[2], wt[3]);
  }
  store4(y, bias, sum4(a0, a1, a2, a3));
}

template <int MR, int NR>
void f16_row_block(const LinearArgs& a, std::size_t i0) noexcept {
  const F16Rows t(a, i0);
  std::size_t r = 0;
  if constexpr (MR == 1 && NR == 4) {
    for (; r + 4 <= a.n; r += 4) f16_1x4(t.x, t.w + r * a.k, a.k, t.bias_at(r), t.y + r);
  }
  for (; r + NR <= a.n; r += NR) f16_tile<MR, NR>(t.x, a.ldx, t.w + r * a.k, a.k, t.bias_at(r), t.y + r, a.ldy);
  for (; r < a.n; ++r) f16_tile<MR, 1>(t.x, a.ldx, t.w + r * a.k, a.k, t.bias_at(r), t.y + r, a.ldy);
}

#if defined(__aarch64__)
void linear_f16_rx4_neon(const LinearArgs& a) noexcept {
  std::size_t i = 0;
  for (; i + 4 <= a.m; i += 4) f16_row_block<4, 4>(a, i);  // 16 accumulators, 8 of x, 2 of w: 26 of 32 registers
  for (; i + 2 <= a.m; i += 2) f16_row_block<2, 4>(a, i);
  if (i < a.m) f16_row_block<1, 4>(a, i);
}
#else
// Whether x_0..x_k−1 hold no subnormal, which ARMv7's Advanced SIMD flushes by architecture: as doubled bits u, the
// smallest u − 1 (which skips zeros) at least FLT_MIN's − 1. Eight elements a step in asm (GCC kept an index and a
// pointer: 14 instructions a step against 9).
bool x_row_plain(const float* x, std::size_t k) noexcept {
  uint32x4_t lo = vdupq_n_u32(0xffffffffu);
  const std::size_t k8 = k & ~static_cast<std::size_t>(7);
  const float* p = x;
  if (k8 != 0) {
    const float* const end = x + k8;
    uint32x4_t lo1 = lo;
    asm("1:\n\t"
        "vld1.32 {d16-d19}, [%[p]]!\n\t"
        "vshl.i32 q8, q8, #1\n\t"
        "vshl.i32 q9, q9, #1\n\t"
        "vadd.i32 q8, q8, %q[m1]\n\t"
        "vadd.i32 q9, q9, %q[m1]\n\t"
        "vmin.u32 %q[lo], %q[lo], q8\n\t"
        "vmin.u32 %q[lo1], %q[lo1], q9\n\t"
        "cmp %[p], %[end]\n\t"
        "bne 1b\n\t"
        : [lo] "+w"(lo), [lo1] "+w"(lo1), [p] "+r"(p)
        : [end] "r"(end), [m1] "w"(vdupq_n_u32(0xffffffffu))
        : "q8", "q9", "cc", "memory");
    lo = vminq_u32(lo, lo1);
  }
  const uint32x2_t m = vpmin_u32(vget_low_u32(lo), vget_high_u32(lo));
  std::uint32_t least = vget_lane_u32(vpmin_u32(m, m), 0);
  for (std::size_t c = k8; c < k; ++c) {
    std::uint32_t bits;
    std::memcpy(&bits, x + c, sizeof bits);
    const std::uint32_t u = 2 * bits - 1;
    least = u < least ? u : least;
  }
  return least >= 0x00ffffffu;
}

// Rows of x in pairs (8 accumulators + 4 of x + 2 of w: 14 of ARMv7's 16 quad registers); a row with a subnormal
// element through the scalar kernel, whose VFP arithmetic keeps subnormals (FPSCR.FZ is 0), each row checked once.
void linear_f16_rx4_neon(const LinearArgs& a) noexcept {
  const auto plain = [&](std::size_t i) noexcept { return i < a.m && x_row_plain(a.x + i * a.ldx, a.k); };
  bool plain_i = plain(0);
  for (std::size_t i = 0; i < a.m;) {
    if (!plain_i) {
      LinearArgs row = a;
      row.x = a.x + i * a.ldx;
      row.y = a.y + i * a.ldy;
      row.m = 1;
      scalar_linear_kernels().f16(row);
      plain_i = plain(++i);
    } else if (plain(i + 1)) {
      f16_row_block<2, 4>(a, i);
      i += 2;
      plain_i = plain(i);
    } else {
      f16_row_block<1, 4>(a, i);
      plain_i = false;  // row i + 1 (if any) has a subnormal
      ++i;
    }
  }
}
#endif
#if defined(__aarch64__)
#define MICROATTN_F16_NAME "linear_f16_4x4_neon64"
#else
#define MICROATTN_F16_NAME "linear_f16_2x4_neon"
#endif
#else
// No half-precision conversion in this FPU: the scalar kernel.
void linear_f16_rx4_neon(const LinearArgs& a) noexcept { scalar_linear_kernels().f16(a); }
#define MICROATTN_F16_NAME "linear_f16_1x4_scalar"
#endif

// ---- q8 -------------------------------------------------------------------------------------------------------

std::uint32_t linear_absmax_bits_neon(const float* x, std::size_t n) noexcept {
  const uint32x4_t abs_mask = vdupq_n_u32(0x7fffffffu);
  uint32x4_t v = vdupq_n_u32(0);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4)
    v = vmaxq_u32(v, vandq_u32(vld1q_u32(reinterpret_cast<const std::uint32_t*>(x + i)), abs_mask));
  return q8_absmax_bits_from(x, i, n, lane_max(v));
}

#if defined(__aarch64__)
// q = round-half-away-from-zero(x / s) as q8_round: the same division, truncation and ±1 where the discarded
// fraction is at least ½ (the comparisons give all-ones lanes, −1 as integers).
void linear_quantize_neon(const float* x, std::size_t n, float s, std::int8_t* q) noexcept {
  const float32x4_t sv = vdupq_n_f32(s), half = vdupq_n_f32(0.5f), minus_half = vdupq_n_f32(-0.5f);
  const auto one = [&](const float* p) noexcept {
    const float32x4_t t = vdivq_f32(vld1q_f32(p), sv);
    int32x4_t r = vcvtq_s32_f32(t);  // toward zero
    const float32x4_t frac = vsubq_f32(t, vcvtq_f32_s32(r));
    r = vsubq_s32(r, vreinterpretq_s32_u32(vcgeq_f32(frac, half)));
    return vaddq_s32(r, vreinterpretq_s32_u32(vcleq_f32(frac, minus_half)));
  };
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const int16x8_t lo = vcombine_s16(vqmovn_s32(one(x + i)), vqmovn_s32(one(x + i + 4)));
    const int16x8_t hi = vcombine_s16(vqmovn_s32(one(x + i + 8)), vqmovn_s32(one(x + i + 12)));
    vst1q_s8(q + i, vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi)));
  }
  for (; i < n; ++i) q[i] = q8_round(x[i], s);
}
#else
// ARMv7 NEON has no vector division (and its reciprocal estimate would round differently from runq.c): scalar.
void linear_quantize_neon(const float* x, std::size_t n, float s, std::int8_t* q) noexcept {
  for (std::size_t i = 0; i < n; ++i) q[i] = q8_round(x[i], s);
}
#endif

inline int32x4_t dot16(int32x4_t acc, int8x16_t x, int8x16_t w) noexcept {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, x, w);
#else
  int16x8_t p = vmull_s8(vget_low_s8(x), vget_low_s8(w));
  p = vmlal_s8(p, vget_high_s8(x), vget_high_s8(w));
  return vpadalq_s16(acc, p);
#endif
}

// MR x rows × NR weight rows over one chunk: per group, int32 lane sums; then f += (lanes·sw)·sx.
template <int MR, int NR>
void q8_tile(const std::int8_t* w, std::size_t ldw, const Q8Chunk& ch, std::size_t i0, std::size_t r0) noexcept {
  const std::size_t seg = ch.seg, segs = ch.len / seg, full = seg / 16, rem = seg % 16;
  const auto [xq, sx, wt, sw] = q8_tile_source<NR>(w, ldw, ch, i0, r0);
  float32x4_t f[MR][NR];
  int32x4_t acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) f[i][j] = vdupq_n_f32(0.0f);
  std::size_t off = 0;
  for (std::size_t s = 0; s < segs; ++s) {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] = vdupq_n_s32(0);
    for (std::size_t v = 0; v < full; ++v, off += 16) {
      int8x16_t xv[MR];
      for (int i = 0; i < MR; ++i) xv[i] = vld1q_s8(xq + i * ch.ldq + off);
      for (int j = 0; j < NR; ++j) {
        const int8x16_t wv = vld1q_s8(wt + j * ldw + off);
        for (int i = 0; i < MR; ++i) acc[i][j] = dot16(acc[i][j], xv[i], wv);
      }
    }
    if (rem != 0) {
      std::int8_t xt[MR][16] = {}, wtail[NR][16] = {};
      int8x16_t xv[MR];
      for (int i = 0; i < MR; ++i) {
        std::memcpy(xt[i], xq + i * ch.ldq + off, rem);
        xv[i] = vld1q_s8(xt[i]);
      }
      for (int j = 0; j < NR; ++j) {
        std::memcpy(wtail[j], wt + j * ldw + off, rem);
        const int8x16_t wv = vld1q_s8(wtail[j]);
        for (int i = 0; i < MR; ++i) acc[i][j] = dot16(acc[i][j], xv[i], wv);
      }
      off += rem;
    }
    for (int j = 0; j < NR; ++j)
      for (int i = 0; i < MR; ++i)
        f[i][j] = vmlaq_n_f32(f[i][j], vmulq_n_f32(vcvtq_f32_s32(acc[i][j]), sw[j][s]), sx[i * ch.ldsx + s]);
  }
  for (int i = 0; i < MR; ++i) {
    float* y = ch.y + (i0 + i) * ch.ldy + r0;
    for (int j = 0; j < NR; ++j) y[j] = (ch.first ? bias_of(ch.bias, r0 + j) : y[j]) + lane_sum(f[i][j]);
  }
}

// How q8_1x4 walks x and its four weight rows: AArch64 as base + one column offset c (GCC kept five stepping
// pointers in vector registers), ARMv7 by stepping each pointer (its vld1 has no offset form).
#if defined(__aarch64__)
#define MICROATTN_Q8_AT(p) ((p) + c)
#define MICROATTN_Q8_STEP(n) (c += (n))
#else
#define MICROATTN_Q8_AT(p) (p)
#define MICROATTN_Q8_STEP(n) (xq += (n), w0 += (n), w1 += (n), w2 += (n), w3 += (n))
#endif

// One x row × weight rows [r, r_end) four at a time (r_end − r a multiple of 4), every accumulator named
// (q8_tile<1, 4>'s arrays stayed on the ARMv7 stack). The chunk's fields are read once for all the tiles (at k = 64
// a tile is four 16-byte steps, and its setup cost as much); each segment's four int32 sums are reduced exactly
// and scaled as one vector.
__attribute__((noinline)) void q8_1x4(const std::int8_t* w, std::size_t ldw, const Q8Chunk& ch, std::size_t r,
                                      std::size_t r_end) noexcept {
  const std::size_t seg = ch.seg, segs = ch.len / seg, full = seg / 16, rem = seg % 16;
  const std::size_t sw_stride = ch.sw_stride;
  const bool own_scales = ch.rows_per_scale == 1;  // row j's scales at sw + j·sw_stride
  for (; r < r_end; r += 4) {
    const std::int8_t* xq = ch.q;
    const std::int8_t* w0 = w + r * ldw;
    const std::int8_t* w1 = w0 + ldw;
    const std::int8_t* w2 = w1 + ldw;
    const std::int8_t* w3 = w2 + ldw;
    const float* const sw0 = own_scales ? ch.sw + r * sw_stride : row_scales(ch, r);
    const float* const sw1 = own_scales ? sw0 + sw_stride : row_scales(ch, r + 1);
    const float* const sw2 = own_scales ? sw1 + sw_stride : row_scales(ch, r + 2);
    const float* const sw3 = own_scales ? sw2 + sw_stride : row_scales(ch, r + 3);
    float32x4_t f = vdupq_n_f32(0.0f);
    [[maybe_unused]] std::size_t c = 0;
    for (std::size_t s = 0; s < segs; ++s) {
      int32x4_t a0 = vdupq_n_s32(0), a1 = a0, a2 = a0, a3 = a0;
      for (std::size_t v = full; v != 0; --v) {
        const int8x16_t xv = vld1q_s8(MICROATTN_Q8_AT(xq));
        a0 = dot16(a0, xv, vld1q_s8(MICROATTN_Q8_AT(w0)));
        a1 = dot16(a1, xv, vld1q_s8(MICROATTN_Q8_AT(w1)));
        a2 = dot16(a2, xv, vld1q_s8(MICROATTN_Q8_AT(w2)));
        a3 = dot16(a3, xv, vld1q_s8(MICROATTN_Q8_AT(w3)));
        MICROATTN_Q8_STEP(16);
      }
      if (rem != 0) {
        std::int8_t t[5][16] = {};
        std::memcpy(t[0], MICROATTN_Q8_AT(xq), rem);
        std::memcpy(t[1], MICROATTN_Q8_AT(w0), rem);
        std::memcpy(t[2], MICROATTN_Q8_AT(w1), rem);
        std::memcpy(t[3], MICROATTN_Q8_AT(w2), rem);
        std::memcpy(t[4], MICROATTN_Q8_AT(w3), rem);
        const int8x16_t xv = vld1q_s8(t[0]);
        a0 = dot16(a0, xv, vld1q_s8(t[1]));
        a1 = dot16(a1, xv, vld1q_s8(t[2]));
        a2 = dot16(a2, xv, vld1q_s8(t[3]));
        a3 = dot16(a3, xv, vld1q_s8(t[4]));
        MICROATTN_Q8_STEP(rem);
      }
      float32x4_t sw = vdupq_n_f32(sw0[s]);
      sw = vsetq_lane_f32(sw1[s], sw, 1);
      sw = vsetq_lane_f32(sw2[s], sw, 2);
      sw = vsetq_lane_f32(sw3[s], sw, 3);
      f = vmlaq_n_f32(f, vmulq_f32(vcvtq_f32_s32(sum4(a0, a1, a2, a3)), sw), ch.sx[s]);
    }
    float* const y = ch.y + r;
    if (ch.first) {
      store4(y, ch.bias != nullptr ? ch.bias + r : nullptr, f);
    } else {
      vst1q_f32(y, vaddq_f32(vld1q_f32(y), f));
    }
  }
}

template <int MR, int NR>
void q8_row_block(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch, std::size_t i0) noexcept {
  std::size_t r = 0;
  if constexpr (MR == 1 && NR == 4) {
    if (i0 == 0) {
      r = n / 4 * 4;
      if (r != 0) q8_1x4(w, ldw, ch, 0, r);
    }
  }
  for (; r + NR <= n; r += NR) q8_tile<MR, NR>(w, ldw, ch, i0, r);
  for (; r < n; ++r) q8_tile<MR, 1>(w, ldw, ch, i0, r);
}

void linear_q8_2xc_neon(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch) noexcept {
  assert(ch.rows <= 2);
#if defined(__aarch64__)
  // 8 int and 8 float accumulators, 2 of x: 21 of 32 registers.
  if (ch.rows == 2) {
    q8_row_block<2, 4>(w, ldw, n, ch, 0);
  } else {
    q8_row_block<1, 4>(w, ldw, n, ch, 0);
  }
#else
  // 16 quad registers: 4 + 4 accumulators at 2 × 2.
  if (ch.rows == 2) {
    q8_row_block<2, 2>(w, ldw, n, ch, 0);
  } else {
    q8_row_block<1, 4>(w, ldw, n, ch, 0);
  }
#endif
}

#if defined(__aarch64__)
#if defined(__ARM_FEATURE_DOTPROD)
#define MICROATTN_Q8_NAME "linear_q8_2x4_neon64dot"
#else
#define MICROATTN_Q8_NAME "linear_q8_2x4_neon64"
#endif
#define MICROATTN_NEON_ARCH "neon64"
#else
#define MICROATTN_Q8_NAME "linear_q8_2x2_neon"
#define MICROATTN_NEON_ARCH "neon"
#endif

constexpr LinearKernels table{MICROATTN_NEON_ARCH,     "linear_f32_gemm_" MICROATTN_NEON_ARCH,
                              MICROATTN_F16_NAME,      MICROATTN_Q8_NAME,
                              linear_f32_gemm,         linear_f16_rx4_neon,
                              linear_q8_2xc_neon,      2,
                              linear_absmax_bits_neon, linear_quantize_neon};

}  // namespace

const LinearKernels* vector_linear_kernels() noexcept { return &table; }

}  // namespace detail
}  // namespace microattn

#endif
