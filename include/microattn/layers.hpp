// microattn — fixed-size self-/multi-head attention layers that own every buffer they need.
//
//   static const float wq[64 * 64] = {...}, wk[...], wv[...];            // may live in flash
//   static microattn::MultiHeadAttention<64, 64, 4> layer{{wq, wk, wv}};  // lands in .bss, no heap
//   layer.forward(x, y);                                                   // y may be x (in place)
//
// The template only holds storage; all logic is one non-template function (detail::layer_forward) shared
// by every size, so flash does not grow with each instantiation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "microattn/attention.hpp"
#include "microattn/config.hpp"
#include "microattn/matrix_view.hpp"
#include "microattn/status.hpp"

namespace microattn {

// Weights in PyTorch nn.Linear layout: (out_features × in_features), row-major, y = x·Wᵀ + b. Borrowed, not
// copied: they must outlive the layer (const arrays in flash are the intended case).
//   q_weight: (Heads·HeadDim) × ModelDim        k_weight, v_weight: (KvHeads·HeadDim) × ModelDim
//   q_bias: Heads·HeadDim   k_bias, v_bias: KvHeads·HeadDim   (nullptr: no bias)
//   out_weight: ModelDim × ModelDim, out_bias: ModelDim  (out_weight nullptr: y is the concatenated heads)
// For PyTorch's nn.MultiheadAttention, q/k/v_weight are the three row blocks of in_proj_weight, q/k/v_bias
// those of in_proj_bias, out_weight/out_bias are out_proj.weight/bias.
struct LayerWeights {
  const float* q_weight;
  const float* k_weight;
  const float* v_weight;
  const float* q_bias = nullptr;
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  const float* out_weight = nullptr;
  const float* out_bias = nullptr;
};

namespace detail {

struct LayerShape {
  std::size_t max_seq, model_dim, heads, kv_heads, head_dim;
};
// Storage a layer lends to layer_forward: K and V for max_seq rows, one query tile of Q and of the
// concatenated heads, and the attention workspace.
struct LayerBuffers {
  float* k;           // max_seq × kv_heads·head_dim
  float* v;           // max_seq × kv_heads·head_dim
  float* q_tile;      // layer_block_q × model_dim
  float* heads_tile;  // layer_block_q × model_dim
  float* workspace;   // attention_workspace_floats(head_dim, head_dim)
};

constexpr std::size_t layer_block_q = attention_block_q;

constexpr std::size_t layer_buffer_floats(std::size_t max_seq, std::size_t model_dim, std::size_t heads,
                                          std::size_t kv_heads) noexcept {
  return 2 * max_seq * (kv_heads * (model_dim / heads)) + 2 * layer_block_q * model_dim +
         attention_workspace_floats(model_dim / heads, model_dim / heads);
}

// Size arithmetic of a layer, each step checked against std::size_t (the static_asserts of the template):
// K/V floats 2·max_seq·kv_heads·head_dim, tile floats 2·layer_block_q·model_dim, and the whole buffer in
// bytes, which must also fit a ptrdiff_t (the largest object). Parameters that passed the other asserts.
constexpr std::size_t size_max = static_cast<std::size_t>(-1);
constexpr bool layer_kv_fits(std::size_t max_seq, std::size_t model_dim, std::size_t heads,
                             std::size_t kv_heads) noexcept {
  const std::size_t kv_dim = kv_heads * (model_dim / heads);  // <= model_dim: cannot overflow
  return kv_dim == 0 || max_seq <= size_max / 2 / kv_dim;
}
constexpr bool layer_tiles_fit(std::size_t model_dim) noexcept { return model_dim <= size_max / 2 / layer_block_q; }
constexpr bool layer_bytes_fit(std::size_t max_seq, std::size_t model_dim, std::size_t heads,
                               std::size_t kv_heads) noexcept {
  const std::size_t max_floats = static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(float);
  const std::size_t kv = 2 * max_seq * (kv_heads * (model_dim / heads));
  const std::size_t tiles = 2 * layer_block_q * model_dim;
  const std::size_t ws = attention_workspace_floats(model_dim / heads, model_dim / heads);
  return kv <= max_floats && tiles <= max_floats - kv && ws <= max_floats - kv - tiles;
}

// The whole forward pass; `query` and `context` are the same view for self-attention.
Status layer_forward(const LayerShape& shape, const LayerWeights& weights, const LayerBuffers& buffers,
                     MatrixView<const float> query, MatrixView<const float> context, MatrixView<float> y,
                     const AttentionOptions& options) noexcept;

}  // namespace detail

// Multi-head attention over at most MaxSeq tokens of ModelDim features, Heads query heads and KvHeads
// key/value heads (grouped-query attention: query head h uses key/value head h / (Heads / KvHeads), as
// PyTorch's enable_gqa). The scale defaults to 1/sqrt(HeadDim), as nn.MultiheadAttention.
//
// RAM held by the object (ram_bytes, plus the 8 weight pointers):
//   4 · [ 2·MaxSeq·KvHeads·HeadDim                     K and V of every context row
//       + 2·attention_block_q·ModelDim                 Q and the concatenated heads of one query tile
//       + attention_workspace_floats(HeadDim, HeadDim) ]
// e.g. MultiHeadAttention<64, 64, 4>: 32 KiB of K/V + 16 KiB of tiles + 12.4 KiB workspace on x86/ARM-A;
// 32 KiB + 2 KiB + 0.9 KiB on Cortex-M (4-query tiles). Nothing else is allocated, anywhere;
// forward() uses at most entry_point_stack_bytes (16 KiB) of stack on SIMD builds, 1 KiB on Cortex-M.
template <std::size_t MaxSeq, std::size_t ModelDim, std::size_t Heads = 1, std::size_t KvHeads = Heads>
class MultiHeadAttention {
  static_assert(MaxSeq > 0, "MaxSeq must be at least 1");
  static_assert(ModelDim > 0, "ModelDim must be at least 1");
  static_assert(Heads > 0, "Heads must be at least 1");
  static_assert(KvHeads > 0, "KvHeads must be at least 1");
  static_assert(ModelDim % Heads == 0, "ModelDim must be a multiple of Heads (HeadDim = ModelDim / Heads)");
  static_assert(Heads % KvHeads == 0, "Heads must be a multiple of KvHeads (grouped-query attention)");
  static_assert(ModelDim / Heads <= attention_max_head_dim, "HeadDim exceeds attention_max_head_dim");
  // Every size below is checked before it is computed: nothing wraps, on 32-bit targets either.
  static_assert(Heads == 0 || detail::layer_kv_fits(MaxSeq, ModelDim, Heads, KvHeads),
                "MaxSeq·KvHeads·HeadDim overflows std::size_t (the K/V buffers)");
  static_assert(detail::layer_tiles_fit(ModelDim), "ModelDim overflows std::size_t (the query tiles)");
  static_assert(Heads == 0 || !detail::layer_kv_fits(MaxSeq, ModelDim, Heads, KvHeads) ||
                    !detail::layer_tiles_fit(ModelDim) || detail::layer_bytes_fit(MaxSeq, ModelDim, Heads, KvHeads),
                "the layer's buffer exceeds the largest object (ram_bytes overflows)");

 public:
  using Weights = LayerWeights;
  static constexpr std::size_t HeadDim = ModelDim / Heads;
  static constexpr std::size_t max_seq = MaxSeq;
  static constexpr std::size_t buffer_floats = detail::layer_buffer_floats(MaxSeq, ModelDim, Heads, KvHeads);
  static constexpr std::size_t ram_bytes = buffer_floats * sizeof(float);

  // Not constexpr on purpose: a static layer is then zero-initialised (.bss) and only the weight pointers
  // are stored at start-up, instead of its whole buffer going to .data (and flash).
  explicit MultiHeadAttention(const Weights& weights) noexcept : weights_(weights) {}

  // Self-attention over x (rows ≤ MaxSeq, cols == ModelDim). y (x.rows × ModelDim) may be the same memory
  // as x (same data and stride: in place); any other overlap, with x or a weight, is Status::aliasing.
  // Errors as attention(), plus invalid_shape for rows > MaxSeq or cols != ModelDim, null_pointer for a
  // missing q/k/v weight or an out_bias without out_weight, misaligned for any weight, bias, input, output or
  // mask pointer that is not 4-byte aligned. Nothing is written to y on error. Stack: entry_point_stack_bytes.
  Status forward(MatrixView<const float> x, MatrixView<float> y, const AttentionOptions& options = {}) noexcept {
    return detail::layer_forward(shape(), weights_, buffers(), x, x, y, options);
  }
  // Cross-attention: queries from `query`, keys and values from `context` (rows ≤ MaxSeq each). y
  // (query.rows × ModelDim) may be exactly `query` or exactly `context` (in place).
  Status forward(MatrixView<const float> query, MatrixView<const float> context, MatrixView<float> y,
                 const AttentionOptions& options = {}) noexcept {
    return detail::layer_forward(shape(), weights_, buffers(), query, context, y, options);
  }

  const Weights& weights() const noexcept { return weights_; }

 private:
  static constexpr std::size_t kv_floats = MaxSeq * KvHeads * HeadDim;
  static constexpr std::size_t tile_floats = detail::layer_block_q * ModelDim;
  static constexpr detail::LayerShape shape() noexcept { return {MaxSeq, ModelDim, Heads, KvHeads, HeadDim}; }
  detail::LayerBuffers buffers() noexcept {
    return {buffer_, buffer_ + kv_floats, buffer_ + 2 * kv_floats, buffer_ + 2 * kv_floats + tile_floats,
            buffer_ + 2 * kv_floats + 2 * tile_floats};
  }

  Weights weights_;
  float buffer_[buffer_floats];  // deliberately not initialised: forward writes before it reads
};

template <std::size_t MaxSeq, std::size_t ModelDim>
using SelfAttention = MultiHeadAttention<MaxSeq, ModelDim, 1>;

}  // namespace microattn
