// microattn — single-precision matrix product.
#pragma once

#include <cstddef>

#include "microattn/matrix_view.hpp"
#include "microattn/status.hpp"

namespace microattn {

// c = a·b (a: m×k, b: k×n) or, with transpose_b, c = a·bᵀ (b: n×k, the PyTorch nn.Linear weight layout:
// y = x·Wᵀ is matmul(x, W, y, true)). c is m×n and is overwritten (not accumulated into).
//
// Errors, checked in this order (nothing is written to c):
//   null_pointer   a.data, b.data or c.data is null
//   misaligned     a.data, b.data or c.data is not 4-byte (float) aligned
//   invalid_shape  a zero dimension, a.cols != inner dimension of b, c not m×n, a stride smaller than cols,
//                  or a view whose extent overflows the address space
//   aliasing       c shares an element with a or b
//
// Blocking (SIMD builds): b is packed, kc × nc at a time (matmul_block_k × matmul_block_n floats), into a
// buffer on the stack (12 KiB by default) that stays in L1; rows of a are read in place by an MR×NR
// register-blocked micro-kernel (see docs/design.md "Register tiles and blocking"). Stack use is at most
// matmul_stack_bytes (14 KiB), within entry_point_stack_bytes. The scalar build (Cortex-M) packs nothing and
// uses a few hundred bytes of stack.
//
// Accuracy: each element is a float sum of k products accumulated with FMA in blocks of matmul_block_k;
// |error| <= 2·(k + 2)·2⁻²⁴·Σ_p|a_ip·b_pj| (the usual dot-product bound, with a factor 2 of margin), the bound
// the tests check (docs/numerical-contract.md "matmul").
Status matmul(MatrixView<const float> a, MatrixView<const float> b, MatrixView<float> c,
              bool transpose_b = false) noexcept;

}  // namespace microattn
