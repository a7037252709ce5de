// microattn — version and build information.
#pragma once

#define MICROATTN_VERSION_MAJOR 0
#define MICROATTN_VERSION_MINOR 1
#define MICROATTN_VERSION_PATCH 0

namespace microattn {

// Instruction set the library's kernels were built for: "avx512bw", "fma3+avx2", "sse2", "neon64", "neon",
// "helium" (Cortex-M55) or "scalar" (Cortex-M4/M7, or -Dsimd=scalar).
const char* simd_arch() noexcept;
// The matmul micro-kernel in use, by tile and arch, e.g. "gemm_8x32_avx512" or "gemm_4x4_scalar".
const char* matmul_kernel_name() noexcept;

}  // namespace microattn
