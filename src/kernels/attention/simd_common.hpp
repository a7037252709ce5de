// What every part of simd.cpp shares: the build's xsimd architecture, its vector types and the casts between
// them. Only simd.cpp includes the files of this folder, in its order: one translation unit, so that GCC inlines
// across the kernel families as it did when they were one file.
#pragma once

#include <xsimd/xsimd.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/attention.hpp"
#include "kernels/exp/constants.hpp"
#include "kernels/scalar_math.hpp"
#include "microattn/config.hpp"

namespace microattn {
namespace detail {
namespace {

using arch = xsimd::default_arch;
using vfloat = xsimd::batch<float, arch>;
using vint = xsimd::batch<std::int32_t, arch>;
constexpr std::size_t lanes = vfloat::size;
constexpr std::size_t line_floats = 64 / sizeof(float);  // floats per cache line (prefetch steps, line alignment)

// Reinterpreting casts. xsimd 8.1's bitwise_cast on NEON calls vreinterpretq_* through a function-pointer table
// that GCC 12 does not inline: a call per cast inside the exp loops, which spills every live vector register.
#if XSIMD_WITH_NEON
inline vint bits_as_int(vfloat x) noexcept { return vreinterpretq_s32_f32(x); }
inline vfloat bits_as_float(vint x) noexcept { return vreinterpretq_f32_s32(x); }
#else
inline vint bits_as_int(vfloat x) noexcept { return xsimd::bitwise_cast<vint>(x); }
inline vfloat bits_as_float(vint x) noexcept { return xsimd::bitwise_cast<vfloat>(x); }
#endif

// The NEON intrinsics code (simd_gemm.hpp, simd_rows_neon.hpp): always inlined, so that its arrays of registers stay in
// registers.
#if XSIMD_WITH_NEON
#define MICROATTN_NEON_INLINE inline __attribute__((always_inline))
// Loops over rows and vectors unrolled before GCC decides what lives in registers (else acc[][] goes to the stack).
#define MICROATTN_NEON_UNROLL _Pragma("GCC unroll 16")
#endif

}  // namespace
}  // namespace detail
}  // namespace microattn
