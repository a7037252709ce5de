// The K/V cache's NEON table (AArch64: its half-precision conversions and fused products).
#include "kernels/cache.hpp"

#if MICROATTN_CACHE_NEON
#include <arm_neon.h>

#include "kernels/cache/rows_scalar.hpp"

namespace microattn {
namespace detail {
namespace {

void cache_f16_convert_neon64(const std::uint16_t* s, float* d, std::size_t c, std::size_t cols) noexcept {
  for (; c + 4 <= cols; c += 4) vst1q_f32(d + c, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(s + c))));
  cache_f16_convert_scalar(s, d, c, cols);
}
void cache_q8_convert_neon64(const std::int8_t* s, float* d, std::size_t c, std::size_t cols, float sc) noexcept {
  for (; c + 8 <= cols; c += 8) {
    const int16x8_t q = vmovl_s8(vld1_s8(s + c));
    vst1q_f32(d + c, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(q))), sc));
    vst1q_f32(d + c + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_high_s16(q))), sc));
  }
  cache_q8_convert_scalar(s, d, c, cols, sc);
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
void cache_rows_dot_neon64(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const typename F::T* k,
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
void cache_rows_axpy_neon64(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const typename F::T* v,
                            std::size_t ldv, const float* scales, std::size_t scale_stride, std::size_t d_v,
                            const float* alpha, float* o, std::size_t ldo) noexcept {
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
    if (body < d_v)
      cache_rows_axpy_scalar(F::f16, pr, ldp, rr, bk, v, ldv, scales, scale_stride, body, d_v, ar, orow, ldo);
    r0 += rr;
  }
}

using NeonFused = FusedEntries<cache_rows_dot_neon64<F16Neon>, cache_rows_dot_neon64<Q8Neon>,
                               cache_rows_axpy_neon64<F16Neon>, cache_rows_axpy_neon64<Q8Neon>>;
constexpr CacheKernels vector_table =
    cache_table<NeonFused, f16_convert_rows<cache_f16_convert_neon64>, q8_convert_rows<cache_q8_convert_neon64>>(
        "neon64");

}  // namespace

const CacheKernels* vector_cache_kernels() noexcept { return &vector_table; }

}  // namespace detail
}  // namespace microattn
#endif
