// The instruction-set features a build of the library can require, and the run-time check against them
// (cpu_supported() in microattn/version.hpp).
//
// MICROATTN_CPU_FEATURES(X) lists the target's features as X(name, macro, where...): name is what cpu_missing()
// reports, macro the compiler's predefined macro for it, where the run-time test (x86: CPUID leaf, subleaf, register,
// bit and the register state XGETBV must show; ARM Linux: the auxiliary vector's word, hwcap or hwcap2, and bit).
// Bit i of a feature mask is entry i. The list is read three ways: src/version.cpp, compiled with the library's arch
// flags, records which macros were on (compiled_cpu_features); src/cpu_check.cpp, compiled without them, tests the
// CPU; meson.build and CMakeLists.txt expand it under the arch flags for the installed simd_features variable.
//
// Listed: the features that let the compiler generate other instructions from plain C++ (vector and bit
// manipulation extensions, 16-byte compare-and-swap, ...) and those whose intrinsics the kernels call. Features
// reachable only through their own intrinsics (AES, SHA, RDRAND, TSX, AMX, ...), which the library does not call,
// are left out: virtual machines often hide them, and the check would refuse CPUs that run the library fine.
// The order is the order of report (the first missing feature): on x86 the x86-64 levels' features, v2, v3
// (AVX2), v4 (AVX-512), then the extensions beyond them, so that a CPU short of a level is told which.
#pragma once

#include <cstdint>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define MICROATTN_CPU_CHECK_X86 1
// LAHF/SAHF exist in 32-bit mode on every x86; CPUID's bit is about 64-bit mode. (An undefined macro: never on.)
#if defined(__x86_64__)
#define MICROATTN_CPU_SAHF __LAHF_SAHF__
#else
#define MICROATTN_CPU_SAHF __x86_64__
#endif
// X(name, macro, leaf, subleaf, register, bit, state): state ymm needs the OS to save the AVX registers, zmm the
// AVX-512 ones as well.
#define MICROATTN_CPU_FEATURES(X)                                     \
  X("sse", __SSE__, 1, 0, edx, 25, none)                              \
  X("sse2", __SSE2__, 1, 0, edx, 26, none)                            \
  X("sse3", __SSE3__, 1, 0, ecx, 0, none)                             \
  X("ssse3", __SSSE3__, 1, 0, ecx, 9, none)                           \
  X("sse4.1", __SSE4_1__, 1, 0, ecx, 19, none)                        \
  X("sse4.2", __SSE4_2__, 1, 0, ecx, 20, none)                        \
  X("popcnt", __POPCNT__, 1, 0, ecx, 23, none)                        \
  X("cx16", __GCC_HAVE_SYNC_COMPARE_AND_SWAP_16, 1, 0, ecx, 13, none) \
  X("sahf", MICROATTN_CPU_SAHF, 0x80000001, 0, ecx, 0, none)          \
  X("avx", __AVX__, 1, 0, ecx, 28, ymm)                               \
  X("f16c", __F16C__, 1, 0, ecx, 29, ymm)                             \
  X("fma", __FMA__, 1, 0, ecx, 12, ymm)                               \
  X("avx2", __AVX2__, 7, 0, ebx, 5, ymm)                              \
  X("bmi", __BMI__, 7, 0, ebx, 3, none)                               \
  X("bmi2", __BMI2__, 7, 0, ebx, 8, none)                             \
  X("lzcnt", __LZCNT__, 0x80000001, 0, ecx, 5, none)                  \
  X("movbe", __MOVBE__, 1, 0, ecx, 22, none)                          \
  X("avx512f", __AVX512F__, 7, 0, ebx, 16, zmm)                       \
  X("avx512cd", __AVX512CD__, 7, 0, ebx, 28, zmm)                     \
  X("avx512bw", __AVX512BW__, 7, 0, ebx, 30, zmm)                     \
  X("avx512dq", __AVX512DQ__, 7, 0, ebx, 17, zmm)                     \
  X("avx512vl", __AVX512VL__, 7, 0, ebx, 31, zmm)                     \
  X("prfchw", __PRFCHW__, 0x80000001, 0, ecx, 8, none)                \
  X("gfni", __GFNI__, 7, 0, ecx, 8, none)                             \
  X("avxvnni", __AVXVNNI__, 7, 1, eax, 4, ymm)                        \
  X("avx512vnni", __AVX512VNNI__, 7, 0, ecx, 11, zmm)                 \
  X("avx512ifma", __AVX512IFMA__, 7, 0, ebx, 21, zmm)                 \
  X("avx512vbmi", __AVX512VBMI__, 7, 0, ecx, 1, zmm)                  \
  X("avx512vbmi2", __AVX512VBMI2__, 7, 0, ecx, 6, zmm)                \
  X("avx512bitalg", __AVX512BITALG__, 7, 0, ecx, 12, zmm)             \
  X("avx512vpopcntdq", __AVX512VPOPCNTDQ__, 7, 0, ecx, 14, zmm)       \
  X("avx512bf16", __AVX512BF16__, 7, 1, eax, 5, zmm)                  \
  X("avx512fp16", __AVX512FP16__, 7, 0, edx, 23, zmm)                 \
  X("avx512vp2intersect", __AVX512VP2INTERSECT__, 7, 0, edx, 8, zmm)  \
  X("avxifma", __AVXIFMA__, 7, 1, eax, 23, ymm)                       \
  X("avxvnniint8", __AVXVNNIINT8__, 7, 1, edx, 4, ymm)                \
  X("avxneconvert", __AVXNECONVERT__, 7, 1, edx, 5, ymm)              \
  X("avxvnniint16", __AVXVNNIINT16__, 7, 1, edx, 10, ymm)             \
  X("tbm", __TBM__, 0x80000001, 0, ecx, 21, none)                     \
  X("fma4", __FMA4__, 0x80000001, 0, ecx, 16, ymm)                    \
  X("xop", __XOP__, 0x80000001, 0, ecx, 11, ymm)                      \
  X("avx512er", __AVX512ER__, 7, 0, ebx, 27, zmm)                     \
  X("avx512pf", __AVX512PF__, 7, 0, ebx, 26, zmm)
#elif (defined(__aarch64__) || defined(__arm__)) && defined(__linux__)
#define MICROATTN_CPU_CHECK_HWCAP 1
#if defined(__aarch64__)
// AArch64's base NEON is architectural (always present); the extensions -march / -mcpu add are not.
#define MICROATTN_CPU_FEATURES(X)                               \
  X("asimd", __ARM_NEON, hwcap, 1)                              \
  X("crc32", __ARM_FEATURE_CRC32, hwcap, 7)                     \
  X("atomics", __ARM_FEATURE_ATOMICS, hwcap, 8)                 \
  X("fphp", __ARM_FEATURE_FP16_SCALAR_ARITHMETIC, hwcap, 9)     \
  X("asimdhp", __ARM_FEATURE_FP16_VECTOR_ARITHMETIC, hwcap, 10) \
  X("asimdrdm", __ARM_FEATURE_QRDMX, hwcap, 12)                 \
  X("fcma", __ARM_FEATURE_COMPLEX, hwcap, 14)                   \
  X("lrcpc", __ARM_FEATURE_RCPC, hwcap, 15)                     \
  X("asimddp", __ARM_FEATURE_DOTPROD, hwcap, 20)                \
  X("asimdfhm", __ARM_FEATURE_FP16_FML, hwcap, 23)              \
  X("sve", __ARM_FEATURE_SVE, hwcap, 22)                        \
  X("sve2", __ARM_FEATURE_SVE2, hwcap2, 1)                      \
  X("frint", __ARM_FEATURE_FRINT, hwcap2, 8)                    \
  X("i8mm", __ARM_FEATURE_MATMUL_INT8, hwcap2, 13)              \
  X("bf16", __ARM_FEATURE_BF16_VECTOR_ARITHMETIC, hwcap2, 14)
#else
// NEON is optional on ARMv7-A (Cortex-A9 without it, Tegra 2): the neon builds need it.
#define MICROATTN_CPU_FEATURES(X)           \
  X("neon", __ARM_NEON, hwcap, 12)          \
  X("vfpv4", __ARM_FEATURE_FMA, hwcap, 16)  \
  X("idiva", __ARM_FEATURE_IDIV, hwcap, 17) \
  X("crc32", __ARM_FEATURE_CRC32, hwcap2, 4)
#endif
#else
// Bare metal (Cortex-M: the build is for one core, which nothing can check at run time) and other targets.
#define MICROATTN_CPU_FEATURES(X)
#endif

// Whether the compiler had macro on: expanded, a feature macro is its value ("1"), not its own name.
#define MICROATTN_CPU_STR_(x) #x
#define MICROATTN_CPU_STR(x) MICROATTN_CPU_STR_(x)
#define MICROATTN_CPU_MACRO_ON(macro) (MICROATTN_CPU_STR(macro)[0] != '_')

namespace microattn {
namespace detail {

// Bit i set: feature i of MICROATTN_CPU_FEATURES was on for the library's kernels (src/version.cpp). Data only,
// so that the check, in another translation unit, reads it without running code compiled for those features.
extern const std::uint64_t compiled_cpu_features;

// The features of this CPU and OS (cpu_check.cpp; compiled without the arch flags, like everything below).
std::uint64_t cpu_present_features() noexcept;
// The name of the first feature of required missing from present, "" when none is.
const char* cpu_missing_from(std::uint64_t required, std::uint64_t present) noexcept;
// Entry bit's name ("" past the table), the entry named name (-1 if none), the number of entries.
const char* cpu_feature_name(unsigned bit) noexcept;
int cpu_feature_bit(const char* name) noexcept;
unsigned cpu_feature_count() noexcept;

}  // namespace detail
}  // namespace microattn
