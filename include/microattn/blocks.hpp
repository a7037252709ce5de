// microattn — transformer blocks: row norms (nn.LayerNorm, RMSNorm), the feed-forward activations (ReLU, GELU,
// GELU tanh, SiLU), nn.TransformerEncoderLayer and the llama decoder layer, with PyTorch's semantics.
//
// The row functions work row by row on a MatrixView (the norms read each row two or three times) with no
// workspace and no libm call but sqrtf (exp and erfc are the library's own): a firmware that does not call them
// links none of this code. Accuracy bounds below are in units of u = 2⁻²⁴ and hold on every target (FMA or not); the
// tests check them against double-precision references over row lengths 1…70, 255…257, odd strides and extreme values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "microattn/attention.hpp"
#include "microattn/config.hpp"
#include "microattn/detail/block_parts.hpp"
#include "microattn/layers.hpp"
#include "microattn/matrix_view.hpp"
#include "microattn/status.hpp"
#include "microattn/weights.hpp"

namespace microattn {

// y_i = (x_i − μ) / sqrt(σ² + eps) · weight_i + bias_i for every row of x (nn.LayerNorm over the last dimension):
// μ and σ² are the row's mean and biased variance (divided by n = x.cols). weight nullptr: 1; bias nullptr: 0.
// Both are x.cols floats. y may be exactly x (same data and stride: in place); any other overlap of y with x,
// weight or bias is aliasing.
// eps: finite and >= 0 (else invalid_shape). eps = 0 is allowed, as in PyTorch: a constant row then gives NaN.
// Range: every finite input. Where the sums of the statistics would overflow or underflow in float (|x| beyond
// about 1e19 or below 1e-19), the row is rescaled by a power of two first, so no finite row gives inf or NaN (but
// a constant row with eps = 0), and a constant row with eps > 0 gives exactly the bias, at every magnitude.
// Non-finite inputs: a row with a NaN or ±inf gives NaN in every entry of that row (as PyTorch), other rows
// are unaffected.
// Accuracy, with z*_i = (x_i − μ)/sqrt(σ² + eps) the exact value from the float inputs and σ_ε = sqrt(σ² + eps):
//   |y_i − (z*_i·w_i + b_i)| <= |w_i|·(layer_norm_error_factor(n)·u·(|z*_i| + 1) + 4u·|μ|/σ_ε) + 2u·|b_i|
// plus, where the result is subnormal, (|w_i| + 1)·2⁻¹⁴⁹ absolute, and layer_norm_error_factor(n) = n + 8
// (statistics in float). The mean is refined by the corrected two-pass formula (Σ(x − mean) taken out again), so
// a mean large against the spread costs 4u·|μ|/σ_ε, not n·u·|μ|/σ_ε: rows like 1000 ± 1 keep their precision.
// Errors, in this order (y untouched): null_pointer (x.data or y.data); misaligned (any float pointer);
// invalid_shape (a dimension 0, stride < cols, extent overflow, y's shape differs from x's, eps negative or not
// finite); aliasing.
Status layer_norm_rows(MatrixView<const float> x, const float* weight, const float* bias, float eps,
                       MatrixView<float> y) noexcept;

// y_i = x_i / sqrt(mean_j(x_j²) + eps) · weight_i for every row (llama2.c's rmsnorm, HF LlamaRMSNorm).
// weight nullptr: 1. In place (y exactly x) allowed, other overlaps are aliasing; eps as layer_norm_rows.
// Range: every finite input (rescaled by a power of two where the sum of squares would overflow or underflow).
// Non-finite inputs, as PyTorch's formula: a NaN gives NaN in every entry of its row; ±inf (and no NaN) makes
// mean(x²) infinite, so the ±inf entries give NaN and the finite ones 0 (±0).
// Accuracy: |y_i − y*_i| <= rms_norm_error_factor(n)·u·|y*_i|, rms_norm_error_factor(n) = n/2 + 6, plus, where
// y*_i is subnormal, (|weight_i| + 1)·2⁻¹⁴⁹ absolute.
// Errors: as layer_norm_rows.
Status rms_norm_rows(MatrixView<const float> x, const float* weight, float eps, MatrixView<float> y) noexcept;

constexpr double layer_norm_error_factor(std::size_t n) noexcept { return static_cast<double>(n) + 8.0; }
constexpr double rms_norm_error_factor(std::size_t n) noexcept { return static_cast<double>(n) / 2.0 + 6.0; }

// The activations of a feed-forward block. The values are part of the C API (MICROATTN_ACTIVATION_*).
//   relu:      max(x, 0)                                  (NaN stays NaN)
//   gelu:      x·Φ(x) = x/2·(1 + erf(x/√2))               (F.gelu, approximate='none')
//   gelu_tanh: x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³)))   (F.gelu, approximate='tanh'; GPT-2's "gelu_new")
//   silu:      x·sigmoid(x) = x/(1 + e^−x)                 (F.silu, llama's FFN gate)
// Computed without cancellation at large negative x (Φ through the library's own erfc, 1 + tanh(v) as
// 2·sigmoid(2v)) and without an exp overflow: large |x| saturates to x or to (−)0, never NaN. As PyTorch's
// formulas (−∞·0): gelu, gelu_tanh and silu of −inf are NaN; of +inf, +inf; NaN stays NaN everywhere.
enum class Activation : std::uint8_t { relu = 0, gelu = 1, gelu_tanh = 2, silu = 3 };

// Every element of x becomes a(x), in place. Accuracy (exact value y* of the float input, u = 2⁻²⁴):
//   relu exact; silu |y − y*| <= 8u·|y*|; gelu <= (16 + 1.5·x²)·u·|y*|; gelu_tanh <= (12 + 4·|v|)·u·|y*| with
//   v = 1.5958·(x + 0.044715·x³). The terms in x² and v are the rounding of the tail's exponent (x²/2 or v in
//   float), which the result amplifies by that exponent: the functions' own condition number at large negative
//   x, not cancellation (PyTorch's float formulas return 0 there, beyond x ≈ −9); plus, where y* is below FLT_MIN
//   (subnormal),
//   (|x| + 1)·2⁻¹⁴⁹ absolute.
// Errors (x untouched): null_pointer; misaligned; invalid_shape (a dimension 0, stride < cols, extent overflow,
// or an Activation outside the enum).
Status activate_rows(MatrixView<float> x, Activation a) noexcept;

// ---- transformer blocks -----------------------------------------------------------------------------------------
// Both blocks hold their attention's K/V cache and, unless they share one, a per-call scratch. The logic is one
// non-template function each (blocks_layers.cpp): the attention as MultiHeadAttention runs it from
// LayerWeightMatrices (detail::layer_run), linear() for the feed-forward, and the row functions above. The
// feed-forward runs block_ffn_rows rows at a time, so its hidden activations cost block_ffn_rows·FeedForward
// floats of scratch, not MaxSeq·FeedForward.
constexpr std::size_t block_ffn_rows = attention_block_q;

// Floats of per-call scratch: the attention's layer_scratch_floats, block_ffn_rows × ModelDim (one query tile of
// the attention's input and output, normalized a tile at a time), and the feed-forward rows (encoder:
// block_ffn_rows × FeedForward; decoder: gate and up, 2 × block_ffn_rows × Hidden). None of it grows with MaxSeq
// (max_seq is not read: the blocks' sizes all take it). Layers that run one after another may share one
// LayerScratch of the largest of these (the …SharedScratch aliases below); one call at a time. A size that would
// exceed SIZE_MAX is SIZE_MAX: no buffer is that large.
constexpr std::size_t encoder_layer_scratch_floats(std::size_t max_seq, std::size_t model_dim, std::size_t heads,
                                                   std::size_t feed_forward) noexcept {
  return (void)max_seq, detail::size_add(layer_scratch_floats(model_dim, heads),
                                         detail::size_mul(block_ffn_rows, detail::size_add(model_dim, feed_forward)));
}
// cache: the decoder's K/V cache format (an f16 or q8 cache adds the attention's conversion block,
// layer_scratch_floats(model_dim, heads, cache)); a format outside the enum: 0.
constexpr std::size_t decoder_layer_scratch_floats(std::size_t max_seq, std::size_t model_dim, std::size_t heads,
                                                   std::size_t hidden, Format cache = Format::f32) noexcept {
  return !detail::cache_format_ok(cache)
             ? 0
             : ((void)max_seq,
                detail::size_add(
                    layer_scratch_floats(model_dim, heads, cache),
                    detail::size_mul(block_ffn_rows, detail::size_add(model_dim, detail::size_mul(2, hidden)))));
}

// nn.TransformerEncoderLayer's state_dict (eval: no dropout). Borrowed: the data must outlive the layer.
struct EncoderLayerWeights {
  LayerWeightMatrices self_attn;  // in_proj (q, k, v rows of in_proj_weight / in_proj_bias) / out_proj
  WeightMatrix linear1;           // FeedForward × ModelDim
  const float* linear1_bias;      // FeedForward floats or nullptr
  WeightMatrix linear2;           // ModelDim × FeedForward
  const float* linear2_bias;      // ModelDim floats or nullptr
  const float* norm1_weight;      // ModelDim floats each; nullptr: 1 (weights) / 0 (biases)
  const float* norm1_bias;
  const float* norm2_weight;
  const float* norm2_bias;
};
struct EncoderLayerConfig {
  bool norm_first = false;
  Activation activation = Activation::relu;
  float layer_norm_eps = 1e-5f;
};

// llama2.c's model.py / HF Llama's decoder layer: no biases.
struct DecoderLayerWeights {
  WeightMatrix wq, wk, wv,
      wo;  // q_proj (Heads·HeadDim × ModelDim), k_proj, v_proj (KvHeads·HeadDim × ModelDim), o_proj
  WeightMatrix w1, w2, w3;      // gate_proj (Hidden × ModelDim), down_proj (ModelDim × Hidden), up_proj (as w1)
  const float* attention_norm;  // input_layernorm.weight (ModelDim; nullptr: 1): h = x + attn(rms_norm(x))
  const float* ffn_norm;  // post_attention_layernorm.weight: y = h + w2(silu(w1·h') ⊙ w3·h'), h' = rms_norm(h)
};
struct DecoderLayerConfig {
  LayerConfig attention;  // rope (theta, dims, interleaved: llama2.c true, HF false), window, as MultiHeadAttention
  float rms_norm_eps = 1e-5f;
};

// nn.TransformerEncoderLayer (batch_first, eval), on x of at most MaxSeq rows × ModelDim:
//   norm_first false: x = norm1(x + sa(x)); x = norm2(x + ff(x))   true: x += sa(norm1(x)); x += ff(norm2(x))
// with ff(x) = linear2(activation(linear1(x))), the norms nn.LayerNorm(eps). forward's options go to the
// self-attention (a mask as src_mask, causal as is_causal). y (x.rows × ModelDim) may be exactly x.
// Errors (y untouched): those of MultiHeadAttention::forward for the self-attention weights, the same rules for
// linear1 / linear2 and the norms' vectors (null_pointer, misaligned, invalid_shape for shapes or formats,
// aliasing for y on any weight), invalid_shape for an eps outside [0, FLT_MAX] or an activation outside the enum.
// Accuracy: each step within its own bound (attention, linear, layer_norm_rows, activate_rows); tested against a
// float64 reference of PyTorch's semantics at 1e-4 of the output rows' magnitude.
// RAM: ram_bytes (K/V of the self-attention, which forward refills, and the owned scratch) plus the weights struct.
template <std::size_t MaxSeq, std::size_t ModelDim, std::size_t Heads, std::size_t FeedForward, bool OwnsScratch = true>
class TransformerEncoderLayer {
  static_assert(detail::block_sizes_ok<MaxSeq, ModelDim, Heads, Heads, FeedForward>(),
                "sizes: non-zero, ModelDim a multiple of Heads, a head dim attention takes, buffers that fit");

 public:
  static constexpr std::size_t head_dim = ModelDim / Heads;
  static constexpr std::size_t cache_floats = layer_cache_floats(MaxSeq, ModelDim, Heads, Heads);
  static constexpr std::size_t scratch_floats = encoder_layer_scratch_floats(MaxSeq, ModelDim, Heads, FeedForward);
  static constexpr std::size_t buffer_floats = cache_floats + (OwnsScratch ? scratch_floats : 0);
  static constexpr std::size_t ram_bytes = buffer_floats * sizeof(float);

  [[gnu::always_inline]] explicit TransformerEncoderLayer(const EncoderLayerWeights& w,
                                                          const EncoderLayerConfig& c = {}) noexcept
      : TransformerEncoderLayer(Init{}, w, c, nullptr) {
    static_assert(OwnsScratch, "TransformerEncoderLayerSharedScratch needs a LayerScratch: (weights, scratch, config)");
  }
  template <std::size_t Floats>
  [[gnu::always_inline]] TransformerEncoderLayer(const EncoderLayerWeights& w, LayerScratch<Floats>& scratch,
                                                 const EncoderLayerConfig& c = {}) noexcept
      : TransformerEncoderLayer(Init{}, w, c, scratch.data) {
    static_assert(!OwnsScratch, "a TransformerEncoderLayer owns its scratch: use TransformerEncoderLayerSharedScratch");
    static_assert(Floats >= scratch_floats, "LayerScratch too small: use encoder_layer_scratch_floats");
  }

  Status forward(MatrixView<const float> x, MatrixView<float> y, const AttentionOptions& options = {}) noexcept {
    return detail::encoder_run(parts(), weights_, config_, x, y, options);
  }
  const EncoderLayerWeights& weights() const noexcept { return weights_; }
  const EncoderLayerConfig& config() const noexcept { return config_; }

 private:
  // The entries that read the weights, chosen once from their formats: where the weights are constants only that
  // format's kernels are linked (a mix, or formats read at run time, link every format's).
  [[gnu::always_inline]] static detail::LinearChecked ffn_linear(const EncoderLayerWeights& w) noexcept {
    return detail::linear_for(detail::shared_format(w.linear1.format, w.linear2.format));
  }
  struct Init {};  // the constructors' shared part; scratch: nullptr when owned
  [[gnu::always_inline]] TransformerEncoderLayer(Init, const EncoderLayerWeights& w, const EncoderLayerConfig& c,
                                                 float* scratch) noexcept
      : weights_(w),
        reader_(detail::matrices_reader(w.self_attn)),
        ffn_linear_(ffn_linear(w)),
        config_(c),
        state_{0, 0},
        scratch_(scratch) {}
  detail::BlockParts parts() noexcept {
    return {{{MaxSeq, ModelDim, Heads, Heads, head_dim},
             &weights_.self_attn,
             reader_,
             &attention_config_,
             &state_,
             buffer_,
             buffer_ + cache_floats / 2,
             OwnsScratch ? buffer_ + cache_floats : scratch_},
            FeedForward,
            layer_scratch_floats(ModelDim, Heads),
            {Format::f32, nullptr, nullptr, nullptr, nullptr},
            &detail::block_attention_f32,
            ffn_linear_};
  }
  EncoderLayerWeights weights_;
  const detail::LayerWeightReader* reader_;
  detail::LinearChecked ffn_linear_;
  EncoderLayerConfig config_;
  LayerConfig attention_config_{};  // nn.TransformerEncoderLayer: no rope, no window
  detail::LayerState state_;
  float* scratch_;
  float buffer_[buffer_floats];  // deliberately not initialised: every call writes before it reads
};
template <std::size_t MaxSeq, std::size_t ModelDim, std::size_t Heads, std::size_t FeedForward>
using TransformerEncoderLayerSharedScratch = TransformerEncoderLayer<MaxSeq, ModelDim, Heads, FeedForward, false>;

// A llama2.c / HF Llama decoder layer over at most MaxSeq cached positions:
//   h = x + attn(rms_norm(x, attention_norm)); y = h + w2(silu(w1·h') ⊙ w3·h'), h' = rms_norm(h, ffn_norm)
// attn: Heads query heads, KvHeads K/V heads (grouped-query), no biases, rope from config.attention.
//   forward(x, y): a prompt, causal; the cache then holds x (cached() == position() == x.rows).
//   append(x, y): the next tokens, as MultiHeadAttention::append (causal over cache + x).
// y may be exactly x. Errors as TransformerEncoderLayer's (the rms_norm_eps as layer_norm_eps), and those of
// MultiHeadAttention::forward / append; on error y, the cache and position are unchanged.
// Cache: the K/V cache's format, as MultiHeadAttention's (f16 / q8 rounded when stored).
// RAM: ram_bytes = K/V cache (layer_cache_bytes) + the owned scratch (decoder_layer_scratch_floats with Cache).
template <std::size_t MaxSeq, std::size_t ModelDim, std::size_t Heads, std::size_t KvHeads, std::size_t Hidden,
          Format Cache = Format::f32, bool OwnsScratch = true>
class DecoderLayer {
  static_assert(detail::block_sizes_ok<MaxSeq, ModelDim, Heads, KvHeads, Hidden>(),
                "sizes: non-zero, ModelDim a multiple of Heads, Heads of KvHeads, a head dim attention takes, buffers "
                "that fit");
  static_assert(detail::cache_format_ok(Cache), "Cache must be Format::f32, Format::f16 or Format::q8");

 public:
  static constexpr std::size_t head_dim = ModelDim / Heads;
  static constexpr std::size_t cache_floats = layer_cache_floats(MaxSeq, ModelDim, Heads, KvHeads);
  static constexpr std::size_t cache_bytes = layer_cache_bytes(MaxSeq, ModelDim, Heads, KvHeads, Cache);
  static constexpr std::size_t scratch_floats = decoder_layer_scratch_floats(MaxSeq, ModelDim, Heads, Hidden, Cache);
  // f16/q8: the buffer holds the scratch (when owned), the q8 scales, then K and V, as MultiHeadAttention's.
  static constexpr std::size_t buffer_floats =
      (Cache == Format::f32 ? cache_floats : (cache_bytes + sizeof(float) - 1) / sizeof(float)) +
      (OwnsScratch ? scratch_floats : 0);
  static constexpr std::size_t ram_bytes = buffer_floats * sizeof(float);

  [[gnu::always_inline]] explicit DecoderLayer(const DecoderLayerWeights& w, const DecoderLayerConfig& c = {}) noexcept
      : DecoderLayer(Init{}, w, c, nullptr) {
    static_assert(OwnsScratch, "DecoderLayerSharedScratch needs a LayerScratch: (weights, scratch, config)");
  }
  template <std::size_t Floats>
  [[gnu::always_inline]] DecoderLayer(const DecoderLayerWeights& w, LayerScratch<Floats>& scratch,
                                      const DecoderLayerConfig& c = {}) noexcept
      : DecoderLayer(Init{}, w, c, scratch.data) {
    static_assert(!OwnsScratch, "a DecoderLayer owns its scratch: use DecoderLayerSharedScratch");
    static_assert(Floats >= scratch_floats, "LayerScratch too small: use decoder_layer_scratch_floats");
  }

  Status forward(MatrixView<const float> x, MatrixView<float> y, const AttentionOptions& options = {}) noexcept {
    return detail::decoder_run(parts(), detail::LayerOp::forward, weights_, config_.rms_norm_eps, x, y, options);
  }
  Status append(MatrixView<const float> x, MatrixView<float> y, const AttentionOptions& options = {}) noexcept {
    return detail::decoder_run(parts(), detail::LayerOp::append, weights_, config_.rms_norm_eps, x, y, options);
  }
  std::size_t cached() const noexcept { return state_.cached; }
  std::size_t position() const noexcept { return state_.position; }
  void reset() noexcept { state_ = {0, 0}; }
  const DecoderLayerWeights& weights() const noexcept { return weights_; }
  const DecoderLayerConfig& config() const noexcept { return config_; }

 private:
  // The attention's projections: a decoder's have no biases.
  [[gnu::always_inline]] static LayerWeightMatrices attention_weights(const DecoderLayerWeights& w) noexcept {
    return {w.wq, w.wk, w.wv, nullptr, nullptr, nullptr, w.wo, nullptr};
  }
  // As TransformerEncoderLayer's: one entry for the feed-forward's matrices, chosen from their formats.
  [[gnu::always_inline]] static detail::LinearChecked ffn_linear(const DecoderLayerWeights& w) noexcept {
    return detail::linear_for(detail::shared_format(w.w1.format, w.w2.format, w.w3.format));
  }
  struct Init {};  // as TransformerEncoderLayer's
  [[gnu::always_inline]] DecoderLayer(Init, const DecoderLayerWeights& w, const DecoderLayerConfig& c,
                                      float* scratch) noexcept
      : weights_(w),
        attention_weights_(attention_weights(w)),
        reader_(detail::matrices_reader(attention_weights(w))),
        ffn_linear_(ffn_linear(w)),
        config_(c),
        state_{0, 0},
        scratch_(scratch) {}
  detail::BlockParts parts() noexcept {
    constexpr bool f32 = Cache == Format::f32;
    return {{{MaxSeq, ModelDim, Heads, KvHeads, head_dim},
             &attention_weights_,
             reader_,
             &config_.attention,
             &state_,
             f32 ? buffer_ : nullptr,
             f32 ? buffer_ + cache_floats / 2 : nullptr,
             OwnsScratch ? (f32 ? buffer_ + cache_floats : buffer_) : scratch_},
            Hidden,
            layer_scratch_floats(ModelDim, Heads, Cache),
            detail::cache_in(Cache, buffer_ + own_scratch, MaxSeq, KvHeads, head_dim),
            f32 ? &detail::block_attention_f32 : &detail::block_attention_cache,
            ffn_linear_};
  }
  // f16/q8: buffer_ = [scratch (owned)] [the cache (detail::cache_layout)].
  static constexpr std::size_t own_scratch = Cache != Format::f32 && OwnsScratch ? scratch_floats : 0;
  DecoderLayerWeights weights_;
  LayerWeightMatrices attention_weights_;
  const detail::LayerWeightReader* reader_;
  detail::LinearChecked ffn_linear_;
  DecoderLayerConfig config_;
  detail::LayerState state_;
  float* scratch_;
  float buffer_[buffer_floats];  // deliberately not initialised: every call writes before it reads
};
template <std::size_t MaxSeq, std::size_t ModelDim, std::size_t Heads, std::size_t KvHeads, std::size_t Hidden,
          Format Cache = Format::f32>
using DecoderLayerSharedScratch = DecoderLayer<MaxSeq, ModelDim, Heads, KvHeads, Hidden, Cache, false>;

}  // namespace microattn
