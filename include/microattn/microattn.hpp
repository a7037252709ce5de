// microattn — allocation-free self-attention for microcontroller and edge firmware.
//
// The one header to include. Conventions shared by every entry point:
//  - matrices are MatrixView<T> (row-major, stride in elements); every float pointer must be 4-byte aligned
//    (alignof(float)) and nothing more, else Status::misaligned;
//  - every entry point returns a Status, checks its arguments first, and writes nothing on error;
//  - no entry point needs more than entry_point_stack_bytes (16 KiB) of stack on SIMD builds, 1 KiB on Cortex-M;
//  - nothing allocates, throws or needs RTTI; scratch memory is the caller's, sized by constexpr functions.
#pragma once

#include "microattn/attention.hpp"
#include "microattn/blocks.hpp"
#include "microattn/config.hpp"
#include "microattn/layers.hpp"
#include "microattn/matmul.hpp"
#include "microattn/matrix_view.hpp"
#include "microattn/softmax.hpp"
#include "microattn/status.hpp"
#include "microattn/version.hpp"
#include "microattn/weights.hpp"
