// The fused attention driver, shared by attention() and the layers (which call it per head and query
// tile with arguments they already validated).
#pragma once

#include <cstddef>

#include "kernels/kernels.hpp"
#include "microattn/attention.hpp"

namespace microattn {
namespace detail {

// Arguments valid and non-overlapping; workspace holds attention_workspace_floats(d_k, d_v) floats.
void attention_run(const Kernels& kernels, MatrixView<const float> q, MatrixView<const float> k,
                   MatrixView<const float> v, MatrixView<float> out, float* workspace,
                   const AttentionOptions& options) noexcept;

// Argument checks of attention() (everything but the workspace size and overlaps with it).
Status attention_check(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                       MatrixView<float> out, const AttentionOptions& options) noexcept;

}  // namespace detail
}  // namespace microattn
