// The fused attention driver, shared by attention() and the layers (which call it per head and query
// tile with arguments they already validated).
#pragma once

#include <cstddef>

#include "kernels/kernels.hpp"
#include "microattn/attention.hpp"

namespace microattn {
namespace detail {

// The causal offset clamped to [−n_q, n_kv]: beyond, every key is hidden (or visible) alike, and a tile's
// offset (this plus its first row) then cannot overflow.
inline std::ptrdiff_t clamp_causal_offset(std::ptrdiff_t off, std::size_t n_q, std::size_t n_kv) noexcept {
  const std::ptrdiff_t lo = -static_cast<std::ptrdiff_t>(n_q), hi = static_cast<std::ptrdiff_t>(n_kv);
  return off < lo ? lo : (off > hi ? hi : off);
}

// Arguments valid and non-overlapping; workspace holds attention_workspace_floats(d_k, d_v) floats.
void attention_run(const Kernels& kernels, MatrixView<const float> q, MatrixView<const float> k,
                   MatrixView<const float> v, MatrixView<float> out, float* workspace,
                   const AttentionOptions& options) noexcept;

// Argument checks of attention(), in its documented order: null pointers, alignment (of the views, the mask
// and the workspace when given) and shapes (attention_check_shapes), then — after the workspace size, which
// attention() checks — out overlapping an input.
Status attention_check_shapes(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                              MatrixView<float> out, const AttentionOptions& options,
                              const float* workspace = nullptr) noexcept;
bool attention_out_overlaps(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                            MatrixView<float> out, const AttentionOptions& options) noexcept;
// Both (shapes, then out overlaps), for callers that bring no workspace of their own.
Status attention_check(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                       MatrixView<float> out, const AttentionOptions& options) noexcept;

}  // namespace detail
}  // namespace microattn
