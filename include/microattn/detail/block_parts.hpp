// microattn — internals of the transformer blocks (blocks.hpp): what a block lends to its non-template code and
// the size checks of its static_asserts. Not an interface: names here may change between versions.
#pragma once

#include <cstddef>

#include "microattn/attention.hpp"
#include "microattn/detail/layer_parts.hpp"
#include "microattn/matrix_view.hpp"
#include "microattn/status.hpp"

namespace microattn {

struct EncoderLayerWeights;
struct EncoderLayerConfig;
struct DecoderLayerWeights;

namespace detail {
// What a block lends to its non-template function: its attention's parts (scratch: the block's whole scratch,
// the attention's part first) and the feed-forward width.
struct BlockParts;
// The attention step of a block and its residual (blocks_layers.cpp's BlockRows), by cache format: two functions,
// so that a block with an f32 cache links none of the conversion code.
struct BlockRows;
using BlockAttention = Status (*)(const BlockParts& b, LayerOp op, const BlockRows& rows,
                                  const AttentionOptions& options) noexcept;
Status block_attention_f32(const BlockParts& b, LayerOp op, const BlockRows& rows,
                           const AttentionOptions& options) noexcept;
Status block_attention_cache(const BlockParts& b, LayerOp op, const BlockRows& rows,
                             const AttentionOptions& options) noexcept;
struct BlockParts {
  LayerParts attention;
  std::size_t ffn;
  std::size_t attention_scratch;  // floats of the scratch the attention uses (layer_scratch_floats with the format)
  LayerCache cache;               // f16/q8 cache (attention.k, .v unused); format f32: unused
  BlockAttention attend;
  LinearChecked ffn_linear;  // the feed-forward's matrices: their shared format's entry, else linear_checked_mixed
};
Status encoder_run(const BlockParts& b, const EncoderLayerWeights& w, const EncoderLayerConfig& c,
                   MatrixView<const float> x, MatrixView<float> y, const AttentionOptions& options) noexcept;
Status decoder_run(const BlockParts& b, LayerOp op, const DecoderLayerWeights& w, float eps, MatrixView<const float> x,
                   MatrixView<float> y, const AttentionOptions& options) noexcept;
// The size checks both blocks make (those of MultiHeadAttention, plus the feed-forward's): the templates'
// static_asserts and the C API's init (blocks_capi.cpp) call this one rule. Each test guards the next's division.
constexpr bool block_sizes_fit(std::size_t max_seq, std::size_t model_dim, std::size_t heads, std::size_t kv_heads,
                               std::size_t ffn) noexcept {
  return max_seq > 0 && model_dim > 0 && heads > 0 && kv_heads > 0 && ffn > 0 && model_dim % heads == 0 &&
         heads % kv_heads == 0 && model_dim / heads <= attention_max_head_dim &&
         layer_kv_fits(max_seq, model_dim, heads, kv_heads) && layer_tiles_fit(model_dim) &&
         layer_bytes_fit(max_seq, model_dim, heads, kv_heads) && max_seq <= size_max / 4 / model_dim &&
         ffn <= size_max / 8 / attention_block_q;  // block_ffn_rows (blocks.hpp)
}
template <std::size_t MaxSeq, std::size_t ModelDim, std::size_t Heads, std::size_t KvHeads, std::size_t Ffn>
constexpr bool block_sizes_ok() noexcept {
  return block_sizes_fit(MaxSeq, ModelDim, Heads, KvHeads, Ffn);
}
}  // namespace detail

}  // namespace microattn
