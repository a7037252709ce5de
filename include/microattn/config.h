/* microattn — the build-time figures the C and C++ APIs share (C99; included by config.hpp and microattn.h).
 *
 * Every figure is a function of the target alone (never of compiler flags that differ between the library and
 * the code that uses it), so a size computed in user code always matches the library it links against.
 * Override a figure with -D for the library and its users alike (the Meson dependency forwards the project's
 * options). */
#ifndef MICROATTN_CONFIG_H
#define MICROATTN_CONFIG_H

/* Cortex-M (ARMv6-M/7-M/8-M/8.1-M): small tiles, no packing buffers. */
#if defined(__ARM_ARCH_PROFILE) && (__ARM_ARCH_PROFILE == 'M')
#define MICROATTN_TARGET_MCU 1
#else
#define MICROATTN_TARGET_MCU 0
#endif

/* Fused attention tiling: queries are processed ATTENTION_BLOCK_Q at a time (they sit in the vector lanes, so it
 * is a multiple of every vector width: 32 = 2 AVX-512, 4 AVX2, 8 SSE/NEON vectors), keys ATTENTION_BLOCK_KV at a
 * time. Cortex-M (RAM-bound) uses 4 × 16. */
#ifndef MICROATTN_ATTENTION_BLOCK_Q
#if MICROATTN_TARGET_MCU
#define MICROATTN_ATTENTION_BLOCK_Q 4
#else
#define MICROATTN_ATTENTION_BLOCK_Q 32
#endif
#endif
#ifndef MICROATTN_ATTENTION_BLOCK_KV
#if MICROATTN_TARGET_MCU
#define MICROATTN_ATTENTION_BLOCK_KV 16
#else
#define MICROATTN_ATTENTION_BLOCK_KV 64
#endif
#endif

#endif /* MICROATTN_CONFIG_H */
