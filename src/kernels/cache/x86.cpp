// The K/V cache's x86 table: F16C conversions, AVX2 (AVX-512 where the target has it) fused products.
#include "kernels/cache.hpp"

#if MICROATTN_CACHE_X86
#include "kernels/avx512_warnings.hpp"

#include <immintrin.h>

#include "kernels/cache/rows_scalar.hpp"

namespace microattn {
namespace detail {
namespace {

#if defined(__AVX512F__)
constexpr const char* x86_name = "avx512";
#else
constexpr const char* x86_name = "avx2";
#endif
void cache_f16_convert_x86(const std::uint16_t* s, float* d, std::size_t c, std::size_t cols) noexcept {
#if defined(__AVX512F__)
  for (; c + 16 <= cols; c += 16)
    _mm512_storeu_ps(d + c, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + c))));
#endif
  for (; c + 8 <= cols; c += 8)
    _mm256_storeu_ps(d + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + c))));
  cache_f16_convert_scalar(s, d, c, cols);
}
void cache_q8_convert_x86(const std::int8_t* s, float* d, std::size_t c, std::size_t cols, float sc) noexcept {
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
  cache_q8_convert_scalar(s, d, c, cols, sc);
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
void cache_rows_dot_x86(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const typename F::T* k,
                        std::size_t ldk, const float* scales, std::size_t scale_stride, std::size_t bk, float* s,
                        std::size_t lds) noexcept {
  // The gathers' 32-bit offsets span a tile's keys (and scales); beyond them, or with fewer columns than a
  // gather reads, the scalar rows.
  const std::size_t span = 8 * L * (ldk * sizeof(typename F::T) + scale_stride * sizeof(float));
  if (d < static_cast<std::size_t>(F::per) || span > 0x7fffffffu) {
    cache_rows_dot_scalar(F::f16, q, ldq, nr, d, k, ldk, scales, scale_stride, bk, s, lds);
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
  if (c < d_v) cache_rows_axpy_scalar(F::f16, p, ldp, R, bk, v, ldv, scales, scale_stride, c, d_v, alpha, o, ldo);
}

template <class F>
void cache_rows_axpy_x86(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const typename F::T* v,
                         std::size_t ldv, const float* scales, std::size_t scale_stride, std::size_t d_v,
                         const float* alpha, float* o, std::size_t ldo) noexcept {
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

using X86Fused = FusedEntries<cache_rows_dot_x86<F16Fmt>, cache_rows_dot_x86<Q8Fmt>, cache_rows_axpy_x86<F16Fmt>,
                              cache_rows_axpy_x86<Q8Fmt>>;
constexpr CacheKernels vector_table =
    cache_table<X86Fused, f16_convert_rows<cache_f16_convert_x86>, q8_convert_rows<cache_q8_convert_x86>>(x86_name);

}  // namespace

const CacheKernels* vector_cache_kernels() noexcept { return &vector_table; }

}  // namespace detail
}  // namespace microattn
#endif
