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

// Whether the CPU running the program can execute the library: it has every instruction-set feature the library
// was compiled for (-Dsimd / MICROATTN_SIMD; -march=native turns on all the build machine has, the compiler may
// use any of them anywhere), and the OS enables their registers. On a CPU without them the first kernel call dies
// of SIGILL, so a program calls this before anything else of the library (simd_arch() included) and refuses with
// cpu_missing() in its message. These two functions are compiled
// without the library's arch flags: they run on any CPU of the target (flags the whole build gets, such as a
// machine file's cpp_args, reach them and the program's own code alike). What is checked, by target:
//  - x86 (GCC, Clang): CPUID and XGETBV, for every feature whose predefined macro (__AVX512F__, __AVX2__, __FMA__,
//    __BMI2__, ...) the library's compilation had on and which the compiler can generate code with; features
//    reachable only through their own intrinsics (AES, SHA, RDRAND, TSX, ...), which the library does not use, are
//    not checked. The list: the installed microattn.pc's simd_features (docs/c-api.md "Build information").
//  - ARM Linux: getauxval(AT_HWCAP): NEON (optional on ARMv7-A, required by the neon builds), VFPv4, integer
//    division; on AArch64, whose NEON is architectural, the extensions the build turned on (dotprod, SVE, fp16, ...).
//  - Cortex-M and other bare-metal targets, other compilers: true. A bare-metal build is for one core, which nothing
//    can check at run time.
bool cpu_supported() noexcept;
// The first feature the CPU lacks, "" when cpu_supported(): named as GCC's -m options ("avx512f", "avx2", "fma";
// "neon", "asimddp" as in /proc/cpuinfo), on x86 in the order of the x86-64 levels (v2, v3, v4, then the rest), so
// a CPU short of a level is told which. Never null, static storage. Each call asks the CPU anew (a few CPUID
// instructions): no state, safe from any thread.
const char* cpu_missing() noexcept;

}  // namespace microattn
