// linear()'s internal interface past its checks (linear.cpp): the run over a kernel table, and the workspace its q8
// path takes where a caller lends one. The kernels themselves are declared in kernels/linear.hpp.
#pragma once

#include <cstddef>

#include "kernels/linear.hpp"

namespace microattn {
namespace detail {

// linear() after its checks, with the kernels of table t (the tests run every table through it).
void linear_run(const LinearKernels& t, Format format, const LinearArgs& a) noexcept;

// linear_checked<F> and linear_checked_mixed (detail/layer_parts.hpp) are linear() after its checks, for entry points
// that check the weights themselves (weight_problems). q8 quantizes x into the `workspace` the caller lends (a layer
// lends its scratch, keeping the chunk off its deep stack) instead of on the stack as linear() does.
constexpr std::size_t linear_q8_workspace_bytes =
    64 + linear_q8_rows * linear_q8_chunk_bytes + linear_q8_rows * linear_q8_chunk_groups * sizeof(float);
// The workspace a format's plan takes: q8's chunk, nothing for f32 and f16.
constexpr std::size_t linear_workspace_bytes(Format f) noexcept {
  return f == Format::q8 ? linear_q8_workspace_bytes : 0;
}

}  // namespace detail
}  // namespace microattn
