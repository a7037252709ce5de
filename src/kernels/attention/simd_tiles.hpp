// The query-tile primitives of attention (queries in the lanes, layout in kernels/attention.hpp): Q packed and
// transposed in, scores and P·V on the gemm tiles, the online softmax with its 2^x, the output transposed out.
#pragma once

#include "kernels/attention/simd_gemm.hpp"

namespace microattn {
namespace detail {
namespace {

// --- transposes ------------------------------------------------------------------------------------------
// rows[r] lane c ⟶ rows[c] lane r, in registers. Attention moves each query tile in and out of its
// queries-in-lanes layout once; a float at a time, that was a measurable share of every call and most of a tiny one.
// xsimd 8.1 has no transpose (and its zip_lo/zip_hi interleave within 128-bit lanes), hence intrinsics.

// Always inlined: a call would send the whole block through memory twice.
#define MICROATTN_TRANSPOSE inline __attribute__((always_inline)) void transpose_block

#if XSIMD_WITH_AVX512F
#define MICROATTN_HAVE_TRANSPOSE 1
MICROATTN_TRANSPOSE(vfloat* rows) noexcept {  // 16 × 16
  __m512 t[16], u[16];
  for (int k = 0; k < 8; ++k) {  // 32-bit interleave of row pairs, within 128-bit lanes
    t[2 * k] = _mm512_unpacklo_ps(rows[2 * k], rows[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(rows[2 * k], rows[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {  // u[4k + j], lane L = column 4L + j of rows 4k .. 4k + 3
    u[4 * k + 0] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {  // gather lane L of u[j], u[4 + j], u[8 + j], u[12 + j] into row 4L + j
    const __m512 x0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44), x1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xee);
    const __m512 y0 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44);
    const __m512 y1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xee);
    rows[j] = _mm512_shuffle_f32x4(x0, y0, 0x88);
    rows[4 + j] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
    rows[8 + j] = _mm512_shuffle_f32x4(x1, y1, 0x88);
    rows[12 + j] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
  }
}
#elif XSIMD_WITH_AVX
#define MICROATTN_HAVE_TRANSPOSE 1
MICROATTN_TRANSPOSE(vfloat* rows) noexcept {  // 8 × 8
  __m256 t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(rows[2 * k], rows[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(rows[2 * k], rows[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    u[4 * k + 0] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    rows[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    rows[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}
#elif XSIMD_WITH_SSE2
#define MICROATTN_HAVE_TRANSPOSE 1
MICROATTN_TRANSPOSE(vfloat* rows) noexcept {  // 4 × 4
  const __m128 t0 = _mm_unpacklo_ps(rows[0], rows[1]), t1 = _mm_unpackhi_ps(rows[0], rows[1]);
  const __m128 t2 = _mm_unpacklo_ps(rows[2], rows[3]), t3 = _mm_unpackhi_ps(rows[2], rows[3]);
  rows[0] = _mm_movelh_ps(t0, t2);
  rows[1] = _mm_movehl_ps(t2, t0);
  rows[2] = _mm_movelh_ps(t1, t3);
  rows[3] = _mm_movehl_ps(t3, t1);
}
#elif XSIMD_WITH_NEON
#define MICROATTN_HAVE_TRANSPOSE 1
MICROATTN_TRANSPOSE(vfloat* rows) noexcept {  // 4 × 4
  const float32x4x2_t a = vtrnq_f32(rows[0], rows[1]), b = vtrnq_f32(rows[2], rows[3]);
  rows[0] = vcombine_f32(vget_low_f32(a.val[0]), vget_low_f32(b.val[0]));
  rows[1] = vcombine_f32(vget_low_f32(a.val[1]), vget_low_f32(b.val[1]));
  rows[2] = vcombine_f32(vget_high_f32(a.val[0]), vget_high_f32(b.val[0]));
  rows[3] = vcombine_f32(vget_high_f32(a.val[1]), vget_high_f32(b.val[1]));
}
#else
#define MICROATTN_HAVE_TRANSPOSE 0
#endif

// --- attention primitives (layout in kernels/attention.hpp) ---------------------------------------------------------

constexpr std::size_t br = attention_block_q;
static_assert(br % gemm_nr == 0, "attention_block_q must be a multiple of the gemm tile width");

// 2^x for x <= 0 or NaN; algorithm and constants in exp/constants.hpp.
#if XSIMD_WITH_AVX512F
// AVX-512 rounds and scales in one instruction each (vrndscaleps, vscalefps): 10 operations instead of 13.
// n is taken from the unclamped x, so 2^−inf = 0 and anything below 2^−149 is 0 exactly; r uses x clamped
// at −127, so it is never inf − inf. Results between 2^−149 and 2^−126 are subnormal here (the portable
// version flushes them): no probability is that small and still matters.
inline vfloat exp2_nonpositive_vec(vfloat x) noexcept {
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const vfloat xc = xsimd::max(vfloat(exp2_constants::x_min), x);  // NaN passes (see exp_vec)
  const vfloat r = xc - vfloat(_mm512_roundscale_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return _mm512_scalef_ps(horner6(r, exp2_constants::poly), n);
}
#else
inline vfloat exp2_nonpositive_vec(vfloat x) noexcept {
  using namespace exp2_constants;
  x = xsimd::max(vfloat(x_min), x);  // NaN passes (see exp_vec)
  const vfloat t = x + vfloat(round_magic);
  const vfloat r = x - (t - vfloat(round_magic));
  const vint e = (bits_as_int(t) - vint(static_cast<std::int32_t>(float_bits(round_magic)) - 127)) << 23;
  return horner6(r, exp2_constants::poly) * bits_as_float(e);
}
#endif

void exp2_nonpositive_simd(const float* x, float* y, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) exp2_nonpositive_vec(vfloat::load_unaligned(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = exp2_nonpositive_float(x[i]);
}

// Lanes [0, nq) rounded up to whole vectors: full-width panels first, then single vectors.
inline std::size_t lanes_in_use(std::size_t nq) noexcept { return (nq + lanes - 1) / lanes * lanes; }

void attn_scores_simd(const float* qt, std::size_t d_k, const float* k, std::size_t ldk, std::size_t bk, float* s,
                      std::size_t nq) noexcept {
  // s (bk × nq) = k (bk × d_k) · qt (d_k × nq): keys are the tile rows (broadcast from k in place), queries
  // the vector columns.
  const std::size_t width = lanes_in_use(nq);
  std::size_t iq = 0;
  for (; iq + gemm_nr <= width; iq += gemm_nr)
    for (std::size_t j = 0; j < bk; j += attn_mr) {
      const std::size_t mr = bk - j < attn_mr ? bk - j : attn_mr;
      attn_tiles_qk.fn[mr - 1](k + j * ldk, ldk, qt + iq, br, d_k, s + j * br + iq, br, nullptr);
    }
  for (; iq < width; iq += lanes)
    for (std::size_t j = 0; j < bk; j += attn_mr_1v) {
      const std::size_t mr = bk - j < attn_mr_1v ? bk - j : attn_mr_1v;
      attn_tiles_qk_1v.fn[mr - 1](k + j * ldk, ldk, qt + iq, br, d_k, s + j * br + iq, br, nullptr);
    }
}

void attn_softmax_simd(float* s, std::size_t bk, float* m, float* l, float* alpha, std::size_t nq) noexcept {
  // The block max and the block sum run as four independent chains each: one chain would wait out the
  // max/add latency on every key and make this step latency-bound instead of throughput-bound.
  const std::size_t width = lanes_in_use(nq);
  const std::size_t bk4 = bk - bk % 4;
  for (std::size_t iq = 0; iq < width; iq += lanes) {
    float* sq = s + iq;
    const vfloat m_old = vfloat::load_aligned(m + iq);
    vfloat mx[4] = {m_old, m_old, m_old, m_old};
    std::size_t j = 0;
    for (; j < bk4; j += 4)
      for (std::size_t u = 0; u < 4; ++u) mx[u] = xsimd::max(mx[u], vfloat::load_aligned(sq + (j + u) * br));
    for (; j < bk; ++j) mx[0] = xsimd::max(mx[0], vfloat::load_aligned(sq + j * br));
    const vfloat mb = xsimd::max(xsimd::max(mx[0], mx[1]), xsimd::max(mx[2], mx[3]));
    // NaN: if max dropped it, its own 2^(NaN − m) below is NaN and poisons the sum of that lane only.
    const vfloat m_use = xsimd::select(mb == vfloat(-INFINITY), vfloat(0.0f), mb);
    const vfloat a = exp2_nonpositive_vec(m_old - m_use);
    vfloat sum[4] = {vfloat(0.0f), vfloat(0.0f), vfloat(0.0f), vfloat(0.0f)};
    for (j = 0; j < bk4; j += 4)
      for (std::size_t u = 0; u < 4; ++u) {
        const vfloat p = exp2_nonpositive_vec(vfloat::load_aligned(sq + (j + u) * br) - m_use);
        p.store_aligned(sq + (j + u) * br);
        sum[u] += p;
      }
    for (; j < bk; ++j) {
      const vfloat p = exp2_nonpositive_vec(vfloat::load_aligned(sq + j * br) - m_use);
      p.store_aligned(sq + j * br);
      sum[0] += p;
    }
    a.store_aligned(alpha + iq);
    xsimd::fma(vfloat::load_aligned(l + iq), a, (sum[0] + sum[1]) + (sum[2] + sum[3])).store_aligned(l + iq);
    mb.store_aligned(m + iq);
  }
}

void attn_pv_simd(const float* p, std::size_t bk, const float* v, std::size_t ldv, std::size_t d_v, const float* alpha,
                  float* ot, std::size_t nq) noexcept {
  // ot (d_v × nq) = ot·alpha + vᵀ (d_v × bk) · p (bk × nq): a column-major view of v, so the MR values a
  // step broadcasts are adjacent floats of one row of v.
  const std::size_t width = lanes_in_use(nq);
  std::size_t iq = 0;
  for (; iq + gemm_nr <= width; iq += gemm_nr)
    for (std::size_t c = 0; c < d_v; c += attn_mr) {
      const std::size_t mr = d_v - c < attn_mr ? d_v - c : attn_mr;
      attn_tiles_pv.fn[mr - 1](v + c, ldv, p + iq, br, bk, ot + c * br + iq, br, alpha + iq);
    }
  for (; iq < width; iq += lanes)
    for (std::size_t c = 0; c < d_v; c += attn_mr_1v) {
      const std::size_t mr = d_v - c < attn_mr_1v ? d_v - c : attn_mr_1v;
      attn_tiles_pv_1v.fn[mr - 1](v + c, ldv, p + iq, br, bk, ot + c * br + iq, br, alpha + iq);
    }
}

void attn_pack_q_simd(const float* q, std::size_t ldq, std::size_t bq, std::size_t d_k, float factor,
                      float* qt) noexcept {
  const vfloat f(factor);
  const std::size_t width = (bq + lanes - 1) / lanes * lanes;
  for (std::size_t i0 = 0; i0 < width; i0 += lanes) {
    const std::size_t rows = bq - i0 < lanes ? bq - i0 : lanes;
    std::size_t p0 = 0;
#if MICROATTN_HAVE_TRANSPOSE
    if (rows == lanes)
      for (; p0 + lanes <= d_k; p0 += lanes) {  // whole lanes × lanes blocks in registers
        vfloat blk[lanes];
        for (std::size_t r = 0; r < lanes; ++r) blk[r] = vfloat::load_unaligned(q + (i0 + r) * ldq + p0) * f;
        transpose_block(blk);
        for (std::size_t c = 0; c < lanes; ++c) blk[c].store_aligned(qt + (p0 + c) * br + i0);
      }
#endif
    for (std::size_t p = p0; p < d_k; ++p)  // the ragged rest, idle lanes zeroed
      for (std::size_t r = 0; r < lanes; ++r) qt[p * br + i0 + r] = r < rows ? q[(i0 + r) * ldq + p] * factor : 0.0f;
  }
}

void attn_store_out_simd(const float* ot, const float* l, std::size_t bq, std::size_t d_v, float* out,
                         std::size_t ldo) noexcept {
  for (std::size_t i0 = 0; i0 < bq; i0 += lanes) {
    const std::size_t rows = bq - i0 < lanes ? bq - i0 : lanes;
    const vfloat li = vfloat::load_aligned(l + i0);
    const auto none = li == vfloat(0.0f);
    const vfloat inv = xsimd::select(none, vfloat(0.0f), vfloat(1.0f) / li);
    std::size_t c0 = 0;
#if MICROATTN_HAVE_TRANSPOSE
    if (rows == lanes)
      for (; c0 + lanes <= d_v; c0 += lanes) {
        vfloat blk[lanes];
        for (std::size_t c = 0; c < lanes; ++c)
          blk[c] = xsimd::select(none, vfloat(0.0f), vfloat::load_aligned(ot + (c0 + c) * br + i0) * inv);
        transpose_block(blk);
        for (std::size_t r = 0; r < lanes; ++r) blk[r].store_unaligned(out + (i0 + r) * ldo + c0);
      }
#endif
    alignas(64) float invs[lanes];
    inv.store_aligned(invs);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = c0; c < d_v; ++c)
        out[(i0 + r) * ldo + c] = l[i0 + r] == 0.0f ? 0.0f : ot[c * br + i0 + r] * invs[r];
  }
}

}  // namespace
}  // namespace detail
}  // namespace microattn
