// microattn — fused scaled dot-product attention with a workspace that does not grow with sequence length.
#pragma once

#include <cstddef>

#include "microattn/config.hpp"
#include "microattn/matrix_view.hpp"
#include "microattn/status.hpp"

namespace microattn {

struct AttentionOptions {
  float scale = 0.0f;                // 0 (+0.0f or −0.0f) means 1/sqrt(d_k); any other value is used as given
  bool causal = false;               // key j is visible to query i iff j <= i + causal_offset
  std::ptrdiff_t causal_offset = 0;  // 0: top-left, as PyTorch's is_causal; n_kv - n_q: bottom-right (decoding)
  MatrixView<const float> mask{};    // optional additive n_q × n_kv mask (-inf hides a key); data == nullptr: none
  std::size_t window = 0;            // 0: unlimited. causal: key j is visible to query i iff
                                     //   i + causal_offset − window < j <= i + causal_offset (Mistral's sliding
  //   window); not causal: iff |j − (i + causal_offset)| < window (local attention)
};

// Largest head size attention() takes (d_k and d_v); larger gives invalid_shape.
constexpr std::size_t attention_max_head_dim = 1u << 16;

namespace detail {
// The size functions' arithmetic (here, layers.hpp, blocks.hpp), one rule for all: a size that would exceed
// SIZE_MAX is SIZE_MAX, and stays so through every later sum, or product with a nonzero factor.
constexpr std::size_t size_max = static_cast<std::size_t>(-1);
constexpr std::size_t size_add(std::size_t a, std::size_t b) noexcept { return a > size_max - b ? size_max : a + b; }
constexpr std::size_t size_mul(std::size_t a, std::size_t b) noexcept {
  return b != 0 && a > size_max / b ? size_max : a * b;
}
}  // namespace detail

// Scratch floats that attention() needs. It depends on the head sizes only, never on n_q or n_kv:
//   attention_block_q · (d_k + d_v + attention_block_kv + 3) + 16
// i.e. one query tile of Q (transposed, pre-scaled) and of the output accumulator, one block of scores, the
// running max / sum / rescale factor per query, and 16 floats to align it all to 64 bytes. With the default
// tiles (32 × 64; 4 × 16 on Cortex-M) and d_k = d_v = 64: 6256 floats = 24.4 KiB (Cortex-M: 604 floats).
// The workspace pointer must be float-aligned (4 bytes), nothing more. A size that would exceed SIZE_MAX is
// SIZE_MAX: no buffer is that large (attention() rejects such head sizes anyway).
constexpr std::size_t attention_workspace_floats(std::size_t d_k, std::size_t d_v) noexcept {
  return detail::size_add(
      detail::size_mul(attention_block_q, detail::size_add(detail::size_add(d_k, d_v), attention_block_kv + 3)), 16);
}

// out (n_q × d_v) = softmax(q·kᵀ·scale + mask) · v ; q: n_q × d_k, k: n_kv × d_k, v: n_kv × d_v.
//
// FlashAttention-style: query tiles × key blocks with an online (running max / running sum) softmax; the
// n_q × n_kv score matrix never exists. Views may be strided (heads of a packed seq × heads·d matrix).
//  - causal: key j is visible to query i iff j <= i + causal_offset. Key blocks entirely hidden from a
//    query tile are skipped, not computed (causal costs about half of dense for n_q = n_kv).
//  - window W > 0: causal, key j is visible iff i + causal_offset − W < j <= i + causal_offset; not causal, iff
//    |j − (i + causal_offset)| < W. Every query then sees at most W (causal) or 2W − 1 keys, and only the key
//    blocks some query of a tile sees are computed: a causal window costs O(n_q·W), not O(n_q·n_kv).
//    Offsets and windows of any size are exact (no overflow).
//  - mask: added to the scaled scores; -inf hides a key. Must be n_q × n_kv when given.
//  - a handful of queries (decoding; how many, the build's kernels decide: docs/design.md "Kernel names")
//    run one query per row (dot products with the keys, AXPYs over the rows of v) instead of one per vector lane,
//    with the same results within the accuracy bound, the same workspace and the same non-finite rules.
//  - a query whose keys are all hidden (by mask, causal and/or window) gets a row of zeros, never NaN.
//  - NaN or +inf in a query's scores (from q, k or the mask) at a key it sees makes that query's output row
//    NaN; mask entries at keys the causal rule or the window hides are never read.
//  - NaN or ±inf in v[j][c] of a key j the query sees makes out[i][c] NaN, whatever the key's probability
//    (in every key order); hidden keys never leak.
//  - finite inputs give finite outputs: where the fused float loop would overflow or underflow (masks near
//    ±FLT_MAX, |q·scale| or scores beyond FLT_MAX/log2 e, Σ p·v beyond FLT_MAX, a subnormal scale), the row is
//    recomputed exactly with power-of-two rescaling. Scores (natural units) and score + mask saturate at
//    ±FLT_MAX. The ordinary path pays one pass over v (as for the finiteness check) and a test of each row sum.
// Accuracy: see docs/numerical-contract.md "attention" (scores are float dot products of length d_k;
// probabilities use a degree-6 exp2 within 1.5 ULP; the weighted sum of v accumulates n_kv terms in float).
//
// Errors, checked in this order (nothing is written to out or the workspace):
//   null_pointer         q, k, v, out or workspace data is null
//   misaligned           q, k, v, out, mask or workspace data is not 4-byte (float) aligned
//   invalid_shape        zero dimension, stride < cols, k.cols != q.cols, v.rows != k.rows,
//                        out not n_q × d_v, d_k or d_v > attention_max_head_dim, mask given but not n_q × n_kv
//   workspace_too_small  workspace_floats < attention_workspace_floats(d_k, d_v)
//   aliasing             out or the workspace overlaps q, k, v or the mask, or out overlaps the workspace (its
//                        first attention_workspace_floats(d_k, d_v) floats: only they are used, so an out placed
//                        after them inside a larger block is fine)
// Stack: at most entry_point_stack_bytes on SIMD builds (a few KiB in practice).
Status attention(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v, MatrixView<float> out,
                 float* workspace, std::size_t workspace_floats, const AttentionOptions& options = {}) noexcept;

}  // namespace microattn
