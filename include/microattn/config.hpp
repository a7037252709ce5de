// microattn — build-time configuration visible to users.
//
// Every figure here is a function of the target alone (never of compiler flags that differ between the
// library and the code that uses it), so a constexpr computed in user code, such as a workspace size, always
// matches the library it links against. Override a figure with -D on both (the Meson dependency forwards
// the project's options).
#pragma once

#include <cstddef>

#include "microattn/config.h"  // MICROATTN_TARGET_MCU and the attention tiles, shared with the C API

namespace microattn {

constexpr bool target_is_mcu = MICROATTN_TARGET_MCU != 0;
// The stack every entry point (matmul, softmax_rows, exp_elements, attention, linear, a layer's or block's forward)
// needs at most on SIMD builds (test SmallStack checks it on a thread with a 64 KiB stack): a thread with a small
// stack (musl's 128 KiB default, or less) does not overflow. Cortex-M: docs/cortex-m.md "Footprint" (a budget per
// entry point, checked by scripts/footprint.py).
constexpr std::size_t entry_point_stack_bytes = 16 * 1024;
constexpr std::size_t attention_block_q = MICROATTN_ATTENTION_BLOCK_Q;
constexpr std::size_t attention_block_kv = MICROATTN_ATTENTION_BLOCK_KV;
static_assert(attention_block_q > 0,
              "MICROATTN_ATTENTION_BLOCK_Q must be positive (SIMD builds: a multiple of the "
              "vector width, checked where the kernels are compiled)");
static_assert(attention_block_kv > 0, "MICROATTN_ATTENTION_BLOCK_KV must be positive");

}  // namespace microattn
