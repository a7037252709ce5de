// Internal interface of the f16 / q8 K/V cache: storing rows (rounding once) and converting key blocks back to
// float for the attention. A table of its own, outside detail::Kernels: a firmware whose layers keep an f32 cache
// links none of it (--gc-sections).
#pragma once

#include <cstddef>
#include <cstdint>

namespace microattn {
namespace detail {

// dst (rows × cols, dense) = the stored rows src[r·ld …], converted exactly: binary16 → float for f16,
// fl(scales[r·scale_stride] · q) for q8 (one rounding, the same in every table).
struct CacheKernels {
  const char* name;  // "scalar", "avx512", "avx2", "neon"
  void (*f16_rows)(const std::uint16_t* src, std::size_t ld, std::size_t rows, std::size_t cols, float* dst) noexcept;
  void (*q8_rows)(const std::int8_t* src, std::size_t ld, std::size_t rows, std::size_t cols, const float* scales,
                  std::size_t scale_stride, float* dst) noexcept;
};

const CacheKernels& scalar_cache_kernels() noexcept;
// nullptr unless the build targets AVX2 + F16C, or NEON with its half-precision conversions.
const CacheKernels* vector_cache_kernels() noexcept;
inline const CacheKernels& selected_cache_kernels() noexcept {
  const CacheKernels* t = vector_cache_kernels();
  return t != nullptr ? *t : scalar_cache_kernels();
}

// float → binary16, round to nearest, ties to even; overflow to ±inf (|x| >= 65520), NaN stays a (quiet) NaN.
std::uint16_t float_to_half(float x) noexcept;
// Stores n floats as binary16.
void store_f16_row(const float* x, std::size_t n, std::uint16_t* dst) noexcept;
// Stores n floats as int8 with one scale: s = max|x| / 127, q = round-half-away(x / s) clamped to ±127; zeros:
// s = 0; any NaN or ±inf: s = NaN and q = 0 (the row reads back NaN).
void store_q8_row(const float* x, std::size_t n, std::int8_t* dst, float* scale) noexcept;

}  // namespace detail
}  // namespace microattn
