// The f16 / q8 K/V cache's kernels: scalar, x86 (F16C; AVX-512 where the target has it) and NEON.
#include "kernels/cache_kernels.hpp"

#include <cstring>

#include "kernels/linear_kernels.hpp"

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

std::uint16_t float_to_half(float x) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t mag = bits & 0x7fffffffu;
  if (mag > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((mag >> 13) & 0x3ffu));  // NaN, quiet
  if (mag >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65536 (and inf): inf
  if (mag >= 0x38800000u) {                                                   // normal in binary16 (>= 2^−14)
    // Rebias, then round the 13 dropped bits to nearest even; a carry moves into the exponent, up to inf
    // (65520 and above), as IEEE's overflow rule says.
    const std::uint32_t h = (mag - 0x38000000u) >> 13;
    const std::uint32_t rest = mag & 0x1fffu;
    const std::uint32_t up = rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0) ? 1u : 0u;
    return static_cast<std::uint16_t>(sign | (h + up));
  }
  // Subnormal or zero in binary16: the value in units of 2^−24, rounded to nearest even.
  if (mag < 0x33000000u) return sign;  // below 2^−25: rounds to ±0 (2^−25 itself is a tie to even 0)
  const std::uint32_t exp = mag >> 23, mant = (mag & 0x7fffffu) | 0x800000u;
  const unsigned shift = 126u - exp;  // mant · 2^(exp − 150) / 2^−24 = mant >> (126 − exp), shift in [14, 24]
  const std::uint32_t h = mant >> shift, rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  const std::uint32_t up = rest > half || (rest == half && (h & 1u) != 0) ? 1u : 0u;
  return static_cast<std::uint16_t>(sign | (h + up));
}

void store_f16_row(const float* x, std::size_t n, std::uint16_t* dst) noexcept {
  for (std::size_t i = 0; i < n; ++i) dst[i] = float_to_half(x[i]);
}

void store_q8_row(const float* x, std::size_t n, std::int8_t* dst, float* scale) noexcept {
  std::uint32_t top = 0;  // the largest magnitude's bits: NaN and inf compare above every finite value
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t b;
    std::memcpy(&b, x + i, sizeof b);
    b &= 0x7fffffffu;
    top = b > top ? b : top;
  }
  float absmax;
  std::memcpy(&absmax, &top, sizeof absmax);
  if (top >= 0x7f800000u || top == 0) {
    *scale = top == 0 ? 0.0f : __builtin_nanf("");
    for (std::size_t i = 0; i < n; ++i) dst[i] = 0;
    return;
  }
  const float s = absmax / 127.0f;
  if (s == 0.0f) {  // absmax below 127·2^−150: every x/s would be inf; those values round to 0 at this scale
    *scale = 0.0f;
    for (std::size_t i = 0; i < n; ++i) dst[i] = 0;
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    // quantize_one's rule; a subnormal s carries few bits, so x / s may pass 127.5: clamped.
    const float t = x[i] / s;
    const float c = t > 127.0f ? 127.0f : (t < -127.0f ? -127.0f : t);
    dst[i] = quantize_one(c, 1.0f);
  }
  *scale = s;
}

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
  for (; c < cols; ++c) d[c] = half_to_float(s[c]);
}
inline void q8_row_scalar(const std::int8_t* s, float* d, std::size_t c, std::size_t cols, float sc) noexcept {
  for (; c < cols; ++c) d[c] = sc * static_cast<float>(s[c]);
}

constexpr CacheKernels scalar_table{"scalar", f16_rows<f16_row_scalar>, q8_rows<q8_row_scalar>};

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
constexpr CacheKernels vector_table{x86_name, f16_rows<f16_row_x86>, q8_rows<q8_row_x86>};
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
constexpr CacheKernels vector_table{"neon", f16_rows<f16_row_neon>, q8_rows<q8_row_neon>};
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
