// Internal interface of the f16 / q8 K/V cache: storing rows (rounding once) and converting key blocks back to
// float for the attention. A table of its own, outside detail::Kernels: a firmware whose layers keep an f32 cache
// links none of it (--gc-sections).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/select.hpp"

// The vector table a build has (kernels/cache/x86.cpp, neon.cpp), from the target's macros.
#if defined(__AVX2__) && defined(__F16C__)
#define MICROATTN_CACHE_X86 1
#else
#define MICROATTN_CACHE_X86 0
#endif
#if defined(__ARM_NEON) && defined(__aarch64__)
#define MICROATTN_CACHE_NEON 1
#else
#define MICROATTN_CACHE_NEON 0
#endif

namespace microattn {
namespace detail {

// dst (rows × cols, dense) = the stored rows src[r·ld …], converted exactly: binary16 → float for f16,
// fl(scales[r·scale_stride] · q) for q8 (one rounding, the same in every table).
struct CacheKernels {
  const char* arch;  // "scalar", "avx512", "avx2", "neon64"
  void (*f16_convert)(const std::uint16_t* src, std::size_t ld, std::size_t rows, std::size_t cols,
                      float* dst) noexcept;
  void (*q8_convert)(const std::int8_t* src, std::size_t ld, std::size_t rows, std::size_t cols, const float* scales,
                     std::size_t scale_stride, float* dst) noexcept;
  // The attention's two products straight from the stored rows, each row read once for all nr query rows, on the
  // values the converters give (k̂, v̂: the same floats), in fp32:
  //   *_rows_dot:  s[r·lds + j] = Σ_p q[r·ldq + p]·k̂[j][p] for r < nr, j < bk, p < d (as Kernels::rows_dot);
  //   *_rows_axpy: o[r·ldo + c] = o[r·ldo + c]·alpha[r] + Σ_j p[r·ldp + j]·v̂[j][c] for r < nr, c < d_v
  //                (as Kernels::rows_axpy; alpha == nullptr: o's old contents are not read).
  // q8: row j's scale is scales[j·scale_stride].
  void (*f16_rows_dot)(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const std::uint16_t* k,
                       std::size_t ldk, std::size_t bk, float* s, std::size_t lds) noexcept;
  void (*q8_rows_dot)(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const std::int8_t* k,
                      std::size_t ldk, const float* scales, std::size_t scale_stride, std::size_t bk, float* s,
                      std::size_t lds) noexcept;
  void (*f16_rows_axpy)(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const std::uint16_t* v,
                        std::size_t ldv, std::size_t d_v, const float* alpha, float* o, std::size_t ldo) noexcept;
  void (*q8_rows_axpy)(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const std::int8_t* v,
                       std::size_t ldv, const float* scales, std::size_t scale_stride, std::size_t d_v,
                       const float* alpha, float* o, std::size_t ldo) noexcept;
};

const CacheKernels& scalar_cache_kernels() noexcept;
// nullptr unless the build targets AVX2 + F16C, or NEON with its half-precision conversions.
const CacheKernels* vector_cache_kernels() noexcept;
inline const CacheKernels& selected_cache_kernels() noexcept {
  return selected_table(vector_cache_kernels(), scalar_cache_kernels);
}

}  // namespace detail
}  // namespace microattn
