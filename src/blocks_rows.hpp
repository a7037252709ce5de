// The norms' row functions (blocks.cpp), for the blocks that apply them row by row (blocks_layers.cpp). After the
// entry points' checks: n >= 1, w / b nullptr or n floats, y either x itself or disjoint from it.
#pragma once

#include <cstddef>

namespace microattn {
namespace detail {

void layer_norm_row(const float* x, std::size_t n, const float* w, const float* b, float eps, float* y) noexcept;
void rms_norm_row(const float* x, std::size_t n, const float* w, float eps, float* y) noexcept;

}  // namespace detail
}  // namespace microattn
