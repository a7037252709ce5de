// microattn — build-time configuration visible to users.
//
// Every figure here is a function of the target alone (never of compiler flags that differ between the
// library and the code that uses it), so a constexpr computed in user code, such as a workspace size, always
// matches the library it links against. Override a figure with -D on both (the Meson dependency forwards
// the project's options).
#pragma once

#include <cstddef>

#include "microattn/config.h"  // MICROATTN_TARGET_MCU and the attention tiles, shared with the C API

// matmul blocking on SIMD builds: b is packed MATMUL_BLOCK_K × MATMUL_BLOCK_N floats at a time, in a stack
// buffer (4·K·N bytes: 12 KiB by default, one 32-wide panel of AVX-512, two of AVX2), which stays in L1 while
// every row of a streams past it. Bounded so that every entry point fits entry_point_stack_bytes (16 KiB) of
// stack: a thread with a small stack (musl's 128 KiB default, or less) must not overflow. The scalar build
// packs nothing.
#ifndef MICROATTN_MATMUL_BLOCK_K
#define MICROATTN_MATMUL_BLOCK_K 96
#endif
#ifndef MICROATTN_MATMUL_BLOCK_N
#define MICROATTN_MATMUL_BLOCK_N 32
#endif

namespace microattn {

constexpr bool target_is_mcu = MICROATTN_TARGET_MCU != 0;
constexpr std::size_t matmul_block_k = MICROATTN_MATMUL_BLOCK_K;
constexpr std::size_t matmul_block_n = MICROATTN_MATMUL_BLOCK_N;
// Upper bound of matmul's stack use on SIMD builds: the packed block of b plus the frames (the micro-kernel's
// ragged-edge tile, up to 8×32 floats, and a few hundred bytes). 12 KiB + 2 KiB by default.
constexpr std::size_t matmul_stack_bytes = matmul_block_k * matmul_block_n * sizeof(float) + 2048;
// The stack every entry point (matmul, softmax_rows, exp_elements, attention, a layer's forward) needs at most
// on SIMD builds, measured by test SmallStack (a thread with a 64 KiB stack). Cortex-M: scripts/footprint.py
// (its budgets: 1024 bytes on M4/M7, 1104 on M55; docs/cortex-m.md "Footprint").
constexpr std::size_t entry_point_stack_bytes = 16 * 1024;
constexpr std::size_t attention_block_q = MICROATTN_ATTENTION_BLOCK_Q;
constexpr std::size_t attention_block_kv = MICROATTN_ATTENTION_BLOCK_KV;
static_assert(target_is_mcu || matmul_stack_bytes <= entry_point_stack_bytes - 2048,
              "MICROATTN_MATMUL_BLOCK_K·N: the packed block must leave room for the rest of the stack");
static_assert(attention_block_q > 0,
              "MICROATTN_ATTENTION_BLOCK_Q must be positive (SIMD builds: a multiple of the "
              "vector width, checked where the kernels are compiled)");
static_assert(attention_block_kv > 0, "MICROATTN_ATTENTION_BLOCK_KV must be positive");

}  // namespace microattn
