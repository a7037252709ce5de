// microattn — fixed-size self-/multi-head attention layers that own every buffer they need.
//
//   static const float wq[64 * 64] = {...}, wk[...], wv[...];            // may live in flash
//   static microattn::MultiHeadAttention<64, 64, 4> layer{{wq, wk, wv}};  // lands in .bss, no heap
//   layer.forward(x, y);                                                   // y may be x (in place)
//
// The template only holds storage and state; all logic is one non-template function (detail::layer_run) shared
// by every size, so flash does not grow with each instantiation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "microattn/attention.hpp"
#include "microattn/config.hpp"
#include "microattn/detail/layer_parts.hpp"
#include "microattn/matrix_view.hpp"
#include "microattn/status.hpp"
#include "microattn/weights.hpp"

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

// Per-layer options beyond the weights. Defaults: no rotary embedding, no window.
struct LayerConfig {
  float rope_theta = 0.0f;    // rotary position embedding base, e.g. 10000, from 1 to FLT_MAX; 0: none
  std::size_t rope_dims = 0;  // leading dims of each head that rotate (even); 0: all of HeadDim
  bool rope_interleaved =
      false;  // false: pairs (i, i + rope_dims/2), HF Llama's rotate_half; true: pairs (2i, 2i+1), GPT-J / llama2.c
  std::size_t window = 0;  // the layer's sliding window (used where options.window is 0); enables the ring cache
};

// The size functions: a size that would exceed SIZE_MAX is SIZE_MAX: no buffer is that large (the templates
// reject such shapes at compile time).
//
// Floats of per-call scratch a layer of this shape uses: one query tile of Q and of the concatenated heads,
// and the attention workspace. Layers that run one after another may share one such block (see
// MultiHeadAttentionSharedScratch); size it for the largest layer.
//   2·attention_block_q·model_dim + attention_workspace_floats(model_dim / heads, model_dim / heads)
constexpr std::size_t layer_scratch_floats(std::size_t model_dim, std::size_t heads) noexcept {
  return detail::size_add(detail::size_mul(2 * detail::layer_block_q, model_dim),
                          attention_workspace_floats(model_dim / heads, model_dim / heads));
}
// Floats of a layer's K/V cache: 2·max_seq·kv_heads·(model_dim / heads).
constexpr std::size_t layer_cache_floats(std::size_t max_seq, std::size_t model_dim, std::size_t heads,
                                         std::size_t kv_heads) noexcept {
  return detail::size_mul(detail::size_mul(2, max_seq), detail::size_mul(kv_heads, model_dim / heads));
}
// The scratch of a layer whose cache has format `cache`. An f16 or q8 cache converts key blocks of K and V to float
// in the attention workspace (its score rows shrink to make room) and adds a quarter key block of K and V to it,
// 2·ceil(attention_block_kv / 4)·head_dim floats: constant in max_seq. An invalid format: 0.
constexpr std::size_t layer_cache_block_floats(std::size_t head_dim) noexcept {
  return detail::size_mul(2 * ((attention_block_kv + 3) / 4), head_dim);
}
constexpr std::size_t layer_scratch_floats(std::size_t model_dim, std::size_t heads, Format cache) noexcept {
  return !detail::cache_format_ok(cache) ? 0
         : cache == Format::f32
             ? layer_scratch_floats(model_dim, heads)
             : detail::size_add(layer_scratch_floats(model_dim, heads), layer_cache_block_floats(model_dim / heads));
}
// Bytes of a layer's K/V cache in format `cache` (e = 2·max_seq·kv_heads·head_dim elements):
//   f32 4·e,  f16 2·e (binary16),  q8 e + 4·2·max_seq·kv_heads (int8 and one float scale per row and K/V head).
// An invalid format: 0.
constexpr std::size_t layer_cache_bytes(std::size_t max_seq, std::size_t model_dim, std::size_t heads,
                                        std::size_t kv_heads, Format cache) noexcept {
  return cache == Format::f32   ? detail::size_mul(4, layer_cache_floats(max_seq, model_dim, heads, kv_heads))
         : cache == Format::f16 ? detail::size_mul(2, layer_cache_floats(max_seq, model_dim, heads, kv_heads))
         : cache == Format::q8
             ? detail::size_add(layer_cache_floats(max_seq, model_dim, heads, kv_heads),
                                detail::size_mul(sizeof(float) * 2, detail::size_mul(max_seq, kv_heads)))
             : 0;
}

// A scratch block for layers that share one (declare it static: it lands in .bss). Floats: at least
// layer_scratch_floats of every layer that uses it. One call at a time: layers sharing a scratch must not run
// concurrently (from two threads, or from an interrupt and the code it interrupts).
template <std::size_t Floats>
struct LayerScratch {
  static_assert(Floats > 0, "LayerScratch needs at least one float");
  float data[Floats];
};

// Multi-head attention over at most MaxSeq tokens of ModelDim features, Heads query heads and KvHeads
// key/value heads (grouped-query attention: query head h uses key/value head h / (Heads / KvHeads), as
// PyTorch's enable_gqa), with a K/V cache for token-by-token decoding. The scale defaults to 1/sqrt(HeadDim),
// as nn.MultiheadAttention.
//
// OwnsScratch = true (MultiHeadAttention): the object holds its K/V cache and its per-call scratch.
// OwnsScratch = false (MultiHeadAttentionSharedScratch): it holds only the K/V cache and borrows the scratch
// from a LayerScratch given to its constructor, so the N layers of a model pay for one scratch.
//
// Weights: LayerWeights (fp32), or LayerWeightMatrices, each projection in its own format (f32, f16, q8; see
// weights.hpp), through linear()'s kernels and within its accuracy bounds (README "Numerical contract"): f16 is
// converted exactly (the fp32 bounds of the layer hold for the f16 values); q8 quantizes the projection's input
// rows per group as linear() does (absmax/127, round half away from zero), whose error bound per projected element
// is linear()'s. A firmware that builds its layers only from LayerWeights links none of the f16/q8 code.
//
// RAM held by the object: ram_bytes, plus the weights given to the constructor (a LayerWeightMatrices' worth:
// 112 bytes on 32-bit targets), the LayerConfig, the cache state (2 words), a scratch pointer and a reader pointer:
//   4 · [ 2·MaxSeq·KvHeads·HeadDim                      K and V of every cached row (layer_cache_floats)
//       + 2·attention_block_q·ModelDim                  Q and the concatenated heads of one query tile  } owned
//       + attention_workspace_floats(HeadDim, HeadDim) ]                                                 } scratch
// e.g. MultiHeadAttention<64, 64, 4>: 32 KiB of K/V + 16 KiB of tiles + 12.4 KiB workspace on x86/ARM-A;
// 32 KiB + 2 KiB + 0.9 KiB on Cortex-M (4-query tiles). Nothing else is allocated, anywhere;
// forward() uses at most entry_point_stack_bytes (16 KiB) of stack on SIMD builds, 1 KiB on Cortex-M, in every
// weight format: q8 projections quantize their input in the scratch's attention workspace, not on the stack.
//
// Decoding. The cache holds the K/V of rows at positions [position() − cached(), position()):
//   forward(x, y) / forward(query, context, y) refill it with x (or context): cached() == position() == rows.
//   append(x, y) adds x's rows as the next tokens and attends them causally (each row sees the cache and the
//     rows of x up to itself): appending t tokens one by one or in any chunks gives the rows of one causal
//     forward over the t tokens (within the accuracy bound).
//   attend(query, y) attends to the cache without changing it (cross-attention decoding after
//     forward(query, context, y) filled it with the encoder output).
// Rotary embeddings (config.rope_theta != 0) rotate each head of Q and K after projection and bias, pair p of
// the rope_dims leading dims by the angle position · rope_theta^(−2p/rope_dims); the cache stores rotated K.
// A row's position: append, position() + its row; forward, its row (query and context alike); attend, its row.
// Angles are float products, as PyTorch's and llama.cpp's fp32 paths: their rounding grows with the position
// (about position · (ln θ + 4) · 2⁻²⁴ radians). sin/cos of every float angle within 2e−7: a Cody–Waite
// reduction below 6434 rad, an exact one beyond (Payne–Hanek: integer products with 28 bytes of 2/π in flash),
// then polynomials, per row and pair; no RAM, no libm. With θ >= 1 every frequency is at most 1, so every
// angle is finite at every position.
// A configuration with an odd or too large rope_dims, or a rope_theta other than 0 outside [1, FLT_MAX]
// (negative, NaN, infinite, or below 1: frequencies up to 1/θ, whose angles can overflow) makes every call
// return invalid_shape.
// Window: options.window, or config.window where that is 0, applies to forward, append and attend
// (AttentionOptions::window). config.window = W also makes the cache a ring: when an append would run past
// MaxSeq, the newest W − 1 rows move to the front and older ones are dropped (one move every MaxSeq − W + 1
// tokens: make MaxSeq about 2W and it costs about one row copy per token), so an append of r rows succeeds
// whenever W − 1 + r <= MaxSeq, position() keeps counting and memory stays fixed.
//
// Cache = Format::f16 or Format::q8 stores K and V in that format (RAM: cache_bytes instead of 4·cache_floats),
// rounded once when a row is stored; attention then runs over the stored values, with the fp32 bound of those
// values (README "Numerical contract"), converting one key block at a time into the scratch (which grows by
// layer_cache_block_floats(HeadDim) floats, whatever MaxSeq):
//   f16  each element rounded to the nearest binary16, ties to even; |x| >= 65520 becomes ±inf (IEEE overflow,
//        as F16C and ARM's converters do: never a silently finite value), 65504 < |x| < 65520 becomes ±65504;
//        subnormals kept; NaN stays NaN.
//   q8   per stored row and K/V head (head_dim values): s = max|x| / 127 (a float division),
//        q = round-half-away-from-zero(x / s) clamped to ±127 (runq.c's rule), stored value fl(s·q). A row of
//        zeros gets s = 0. A row holding NaN or ±inf gets s = NaN and reads back NaN in every element: attention
//        through it gives NaN where fp32 would give NaN or inf, never a finite result.
template <std::size_t MaxSeq, std::size_t ModelDim, std::size_t Heads = 1, std::size_t KvHeads = Heads,
          bool OwnsScratch = true, Format Cache = Format::f32>
class MultiHeadAttention {
  static_assert(detail::cache_format_ok(Cache), "Cache must be Format::f32, Format::f16 or Format::q8");
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
  static constexpr Format cache_format = Cache;
  static constexpr std::size_t cache_floats = layer_cache_floats(MaxSeq, ModelDim, Heads, KvHeads);  // elements
  static constexpr std::size_t cache_bytes = layer_cache_bytes(MaxSeq, ModelDim, Heads, KvHeads, Cache);
  // The layout ends where layer_cache_bytes says (its V as long as its K).
  static_assert(Cache == Format::f32 || 2 * detail::cache_layout(Cache, MaxSeq, KvHeads, HeadDim).v -
                                                detail::cache_layout(Cache, MaxSeq, KvHeads, HeadDim).k ==
                                            cache_bytes);
  static constexpr std::size_t scratch_floats = layer_scratch_floats(ModelDim, Heads, Cache);
  // f16/q8: the buffer holds the scratch (when owned), the q8 scales, then K and V (cache_bytes in all).
  static constexpr std::size_t buffer_floats =
      (Cache == Format::f32 ? cache_floats : (cache_bytes + sizeof(float) - 1) / sizeof(float)) +
      (OwnsScratch ? scratch_floats : 0);
  static constexpr std::size_t ram_bytes = buffer_floats * sizeof(float);

  // Not constexpr on purpose: a static layer is then zero-initialised (.bss) and only the weight pointers
  // and the configuration are stored at start-up, instead of its whole buffer going to .data (and flash).
  explicit MultiHeadAttention(const Weights& weights, const LayerConfig& config = {}) noexcept
      : weights_(weights), reader_(&detail::layer_weights_f32), config_(config), state_{0, 0}, scratch_(nullptr) {
    static_assert(OwnsScratch, "MultiHeadAttentionSharedScratch needs a LayerScratch: (weights, scratch, config)");
  }
  // A layer that borrows its per-call scratch: `scratch` must outlive it and hold at least scratch_floats.
  template <std::size_t Floats>
  MultiHeadAttention(const Weights& weights, LayerScratch<Floats>& scratch, const LayerConfig& config = {}) noexcept
      : weights_(weights), reader_(&detail::layer_weights_f32), config_(config), state_{0, 0}, scratch_(scratch.data) {
    static_assert(!OwnsScratch, "a MultiHeadAttention owns its scratch: use MultiHeadAttentionSharedScratch");
    static_assert(
        Floats >= scratch_floats,
        "LayerScratch too small: use layer_scratch_floats(ModelDim, Heads) (with the cache format for f16/q8)");
  }
  // Weights in any formats (LayerWeightMatrices: the matrices and their data borrowed, the struct copied):
  //   q: (Heads·HeadDim) × ModelDim   k, v: (KvHeads·HeadDim) × ModelDim   out: ModelDim × ModelDim, or
  //   out.data == nullptr: no out projection (y is the concatenated heads)
  //   q_bias: Heads·HeadDim floats, k_bias, v_bias: KvHeads·HeadDim, out_bias: ModelDim (nullptr: no bias)
  // The weights are checked at every call, as the LayerWeights ones, with the statuses of linear() (nothing is
  // written, the cache unchanged, on error):
  //   null_pointer   q, k or v data null; a q8 matrix's scales null; out_bias without out.data
  //   misaligned     f32 data, q8 scales or a bias not 4-byte aligned; f16 data not 2-byte aligned (q8 data: any)
  //   invalid_shape  a format outside Format; a matrix whose rows × cols differ from the above; q8 group 0 or not
  //                  dividing rows·cols
  //   aliasing       y sharing a byte with any weight data, scales or bias
  // each in its place in the order of the calls' checks (null pointers, alignment, shapes, overlaps).
  [[gnu::always_inline]] explicit MultiHeadAttention(const LayerWeightMatrices& weights,
                                                     const LayerConfig& config = {}) noexcept
      : weights_(weights), reader_(detail::matrices_reader(weights)), config_(config), state_{0, 0}, scratch_(nullptr) {
    static_assert(OwnsScratch, "MultiHeadAttentionSharedScratch needs a LayerScratch: (weights, scratch, config)");
  }
  template <std::size_t Floats>
  [[gnu::always_inline]] MultiHeadAttention(const LayerWeightMatrices& weights, LayerScratch<Floats>& scratch,
                                            const LayerConfig& config = {}) noexcept
      : weights_(weights),
        reader_(detail::matrices_reader(weights)),
        config_(config),
        state_{0, 0},
        scratch_(scratch.data) {
    static_assert(!OwnsScratch, "a MultiHeadAttention owns its scratch: use MultiHeadAttentionSharedScratch");
    static_assert(
        Floats >= scratch_floats,
        "LayerScratch too small: use layer_scratch_floats(ModelDim, Heads) (with the cache format for f16/q8)");
  }

  // Self-attention over x (rows ≤ MaxSeq, cols == ModelDim). y (x.rows × ModelDim) may be the same memory
  // as x (same data and stride: in place); any other overlap, with x or a weight, is Status::aliasing.
  // Errors as attention(), plus invalid_shape for rows > MaxSeq or cols != ModelDim, null_pointer for a
  // missing q/k/v weight or an out_bias without out_weight, misaligned for any weight, bias, input, output or
  // mask pointer that is not 4-byte aligned. Nothing is written to y, and the cache is unchanged, on error.
  // Stack: entry_point_stack_bytes. Afterwards the cache holds x's K/V: cached() == position() == x.rows.
  Status forward(MatrixView<const float> x, MatrixView<float> y, const AttentionOptions& options = {}) noexcept {
    return run(detail::LayerOp::forward, x, x, y, options);
  }
  // Cross-attention: queries from `query`, keys and values from `context` (rows ≤ MaxSeq each). y
  // (query.rows × ModelDim) may be exactly `query` or exactly `context` (in place). The cache then holds the
  // context's K/V.
  Status forward(MatrixView<const float> query, MatrixView<const float> context, MatrixView<float> y,
                 const AttentionOptions& options = {}) noexcept {
    return run(detail::LayerOp::forward, query, context, y, options);
  }
  // x's rows are the next tokens (positions position() … position() + x.rows − 1): their K/V are stored after
  // the cached ones, and each row attends to every cached key and to the rows of x up to itself (causal,
  // bottom-right; options.causal and causal_offset are ignored), within the window if any. options.mask, when
  // given, is x.rows × (cached() + x.rows), key columns in position order; a layer with config.window takes
  // no mask here. y may be exactly x. Errors as forward, plus invalid_shape when the rows do not fit (without
  // config.window: cached() + x.rows > MaxSeq; with it: config.window − 1 + x.rows > MaxSeq), for
  // options.window > config.window on a ring layer (the ring keeps only config.window − 1 rows), or for a mask
  // on a ring layer; on error nothing changes (cache, position, y).
  Status append(MatrixView<const float> x, MatrixView<float> y, const AttentionOptions& options = {}) noexcept {
    return run(detail::LayerOp::append, x, x, y, options);
  }
  // Queries (any number of rows; rotary positions 0 …) attend to the cached K/V (cached() keys), which stay as they
  // are. options as attention() over the cached keys (mask query.rows × cached()). An empty cache is
  // invalid_shape. y may be exactly query.
  Status attend(MatrixView<const float> query, MatrixView<float> y, const AttentionOptions& options = {}) noexcept {
    return run(detail::LayerOp::attend, query, query, y, options);
  }

  std::size_t cached() const noexcept { return state_.cached; }      // rows held in the cache (<= MaxSeq)
  std::size_t position() const noexcept { return state_.position; }  // the position of the next appended row
  void reset() noexcept { state_ = {0, 0}; }                         // empty cache, position 0

  // The weights given to the constructor: weights() for a layer made from LayerWeights, weight_matrices() for
  // one made from LayerWeightMatrices (the other is not the stored one).
  const Weights& weights() const noexcept { return weights_.f32; }
  const LayerWeightMatrices& weight_matrices() const noexcept { return weights_.matrices; }
  const LayerConfig& config() const noexcept { return config_; }

 private:
  detail::LayerParts parts() noexcept {
    return {{MaxSeq, ModelDim, Heads, KvHeads, HeadDim},
            &weights_,
            reader_,
            &config_,
            &state_,
            buffer_,
            buffer_ + cache_floats / 2,
            OwnsScratch ? buffer_ + cache_floats : scratch_};
  }
  // f16/q8: buffer_ = [scratch (owned)] [the cache (detail::cache_layout)].
  static constexpr std::size_t own_scratch = Cache != Format::f32 && OwnsScratch ? scratch_floats : 0;
  detail::LayerParts cache_parts() noexcept {
    return {{MaxSeq, ModelDim, Heads, KvHeads, HeadDim},
            &weights_,
            reader_,
            &config_,
            &state_,
            nullptr,
            nullptr,
            OwnsScratch ? buffer_ : scratch_};
  }
  detail::LayerCache cache() noexcept {
    return detail::cache_in(Cache, buffer_ + own_scratch, MaxSeq, KvHeads, HeadDim);
  }
  // Forced inline, views by reference: the caller's frame then holds each view once, as when the methods called
  // layer_run themselves.
  __attribute__((always_inline)) Status run(detail::LayerOp op, const MatrixView<const float>& query,
                                            const MatrixView<const float>& context, const MatrixView<float>& y,
                                            const AttentionOptions& options) noexcept {
    if constexpr (Cache == Format::f32)
      return detail::layer_run(parts(), op, query, context, y, options);
    else
      return detail::layer_run_cache(cache_parts(), cache(), op, query, context, y, options);
  }

  // What a layer stores of its weights: those given to its constructor, read by the matching reader.
  union WeightStore {
    LayerWeights f32;
    LayerWeightMatrices matrices;
    explicit WeightStore(const LayerWeights& w) noexcept : f32(w) {}
    explicit WeightStore(const LayerWeightMatrices& w) noexcept : matrices(w) {}
  };
  WeightStore weights_;
  const detail::LayerWeightReader* reader_;
  LayerConfig config_;
  detail::LayerState state_;
  float* scratch_;               // the borrowed scratch (nullptr when owned)
  float buffer_[buffer_floats];  // deliberately not initialised: every call writes before it reads
};

template <std::size_t MaxSeq, std::size_t ModelDim, std::size_t Heads = 1, std::size_t KvHeads = Heads,
          Format Cache = Format::f32>
using MultiHeadAttentionSharedScratch = MultiHeadAttention<MaxSeq, ModelDim, Heads, KvHeads, false, Cache>;

template <std::size_t MaxSeq, std::size_t ModelDim>
using SelfAttention = MultiHeadAttention<MaxSeq, ModelDim, 1>;

}  // namespace microattn
