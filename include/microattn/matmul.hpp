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
// Stack: at most entry_point_stack_bytes on SIMD builds (b is packed block by block into a buffer on the stack:
// docs/design.md "Register tiles and blocking"); Cortex-M packs nothing (docs/cortex-m.md "Footprint").
//
// Accuracy: each element is a float sum of k products accumulated with FMA in blocks of the inner dimension;
// |error| <= 2·(k + 2)·2⁻²⁴·Σ_p|a_ip·b_pj| (the usual dot-product bound, with a factor 2 of margin), the bound
// the tests check (docs/numerical-contract.md "matmul").
Status matmul(MatrixView<const float> a, MatrixView<const float> b, MatrixView<float> c,
              bool transpose_b = false) noexcept;

}  // namespace microattn
