// The norms' row functions (blocks.cpp), for the blocks that apply them row by row (blocks_layers.cpp). After the
// entry points' checks: n >= 1, w / b nullptr or n floats, y either x itself or disjoint from it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "microattn/detail/layer_parts.hpp"
#include "microattn/matrix_view.hpp"

namespace microattn {
namespace detail {

void layer_norm_row(const float* x, std::size_t n, const float* w, const float* b, float eps, float* y) noexcept;
void rms_norm_row(const float* x, std::size_t n, const float* w, float eps, float* y) noexcept;

// A block's self-attention over its own rows (blocks_layers.cpp): query = context = norm(x) (RowNorm::none: x
// itself), and y = x + attention, or layer_norm(x + attention) with post_weight / post_bias when post_norm. The
// layer computes them a query tile at a time in `buffer` (layer_block_q × model_dim floats, outside the layer's
// scratch), so that the block's scratch does not grow with MaxSeq. y may be exactly x: a tile's rows of x are
// read for the last time when its rows of y are written.
enum class RowNorm : std::uint8_t { none, rms, layer };
struct BlockRows {
  MatrixView<const float> x;
  MatrixView<float> y;
  RowNorm norm;
  const float* norm_weight;
  const float* norm_bias;
  bool post_norm;
  const float* post_weight;
  const float* post_bias;
  float eps;
  float* buffer;
  // Which input rows the buffer holds normalized (layers.cpp's BlockSource; a tile's output voids them).
  mutable std::size_t held_first = 0, held_rows = 0;
};
// layer_run / layer_run_cache (forward or append) with a block's rows; the same checks, on x as query and context.
Status layer_run_rows(const LayerParts& layer, LayerOp op, const BlockRows& rows,
                      const AttentionOptions& options) noexcept;
Status layer_run_rows_cache(const LayerParts& layer, const LayerCache& cache, LayerOp op, const BlockRows& rows,
                            const AttentionOptions& options) noexcept;

}  // namespace detail
}  // namespace microattn
