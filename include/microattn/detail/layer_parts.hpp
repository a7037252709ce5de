// microattn — internals of the layers (layers.hpp, blocks.hpp): what a layer lends to its non-template code, and the
// size arithmetic of its static_asserts. Not an interface: names here may change between versions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "microattn/attention.hpp"
#include "microattn/config.hpp"
#include "microattn/matrix_view.hpp"
#include "microattn/status.hpp"
#include "microattn/weights.hpp"

namespace microattn {

struct LayerConfig;

namespace detail {

struct LayerShape {
  std::size_t max_seq, model_dim, heads, kv_heads, head_dim;
};
// The cache's bookkeeping: rows [0, cached) of K and V hold positions [position − cached, position).
struct LayerState {
  std::size_t cached;
  std::size_t position;
};
// linear() after the checks its caller made (weight_problems): x m × w.cols (row stride ldx), y m × w.rows (ldy),
// bias w.rows floats or nullptr; q8 quantizes x in the `workspace` lent (linear_q8_workspace_bytes, float-aligned,
// never nullptr). linear_checked<F> takes format F only, reaching only its kernels; linear_checked_mixed every format.
using LinearChecked = void (*)(const float* x, std::size_t ldx, std::size_t m, const WeightMatrix& w, const float* bias,
                               float* y, std::size_t ldy, float* workspace) noexcept;
template <class F>  // f32_format, f16_format or q8_format (weights.hpp; instantiated in the library)
void linear_checked(const float* x, std::size_t ldx, std::size_t m, const WeightMatrix& w, const float* bias, float* y,
                    std::size_t ldy, float* workspace) noexcept;
void linear_checked_mixed(const float* x, std::size_t ldx, std::size_t m, const WeightMatrix& w, const float* bias,
                          float* y, std::size_t ldy, float* workspace) noexcept;

// The format all the given ones are (as unsigned), or mixed_formats when they differ (or one is not a Format).
// Inline and without a loop (-Os would not unroll one), so that where the weights are constants the layers' and
// blocks' constructors fold it, and reference one format's code only.
constexpr unsigned format_f32 = static_cast<unsigned>(Format::f32), format_f16 = static_cast<unsigned>(Format::f16),
                   format_q8 = static_cast<unsigned>(Format::q8), mixed_formats = format_q8 + 1;
template <class... Rest>
[[gnu::always_inline]] constexpr unsigned shared_format(Format first, Rest... rest) noexcept {
  return ((rest == first) && ...) && static_cast<unsigned>(first) <= format_q8 ? static_cast<unsigned>(first)
                                                                               : mixed_formats;
}
[[gnu::always_inline]] inline LinearChecked linear_for(unsigned format) noexcept {
  switch (format) {
    case format_f32:
      return linear_checked<f32_format>;
    case format_f16:
      return linear_checked<f16_format>;
    case format_q8:
      return linear_checked<q8_format>;
    default:
      return linear_checked_mixed;
  }
}

// How a layer reads its weights (layers.cpp): one reader for LayerWeights (fp32 only: a firmware that builds its
// layers from LayerWeights links no f16/q8 kernel); for LayerWeightMatrices one per format their projections share
// (each links that format's kernels only) and one for a mix (every format's).
struct LayerWeightReader;
extern const LayerWeightReader layer_weights_f32;
extern const LayerWeightReader layer_weight_matrices;
extern const LayerWeightReader layer_weight_matrices_f32;
extern const LayerWeightReader layer_weight_matrices_f16;
extern const LayerWeightReader layer_weight_matrices_q8;
[[gnu::always_inline]] inline const LayerWeightReader* matrices_reader(const LayerWeightMatrices& w) noexcept {
  switch (shared_format(w.q.format, w.k.format, w.v.format, w.out.data != nullptr ? w.out.format : w.q.format)) {
    case format_f32:
      return &layer_weight_matrices_f32;
    case format_f16:
      return &layer_weight_matrices_f16;
    case format_q8:
      return &layer_weight_matrices_q8;
    default:
      return &layer_weight_matrices;
  }
}
// The weight_problems bits (src/check.hpp) of a layer's weight matrices for a call writing y:
// its every call, and the C API's init (the cache and the scratch as y) run the same checks.
unsigned layer_matrices_problems(const LayerWeightMatrices& w, std::size_t model_dim, std::size_t kv_dim,
                                 const MatrixView<float>& y) noexcept;

// Everything a layer lends to the non-template functions: its shape, weights (a LayerWeights or a
// LayerWeightMatrices, as `reader` reads them), configuration, cache state, K and V (max_seq × kv_heads·head_dim
// each) and the per-call scratch (layer_scratch_floats).
struct LayerParts {
  LayerShape shape;
  const void* weights;
  const LayerWeightReader* reader;
  const LayerConfig* config;
  LayerState* state;
  float* k;
  float* v;
  float* scratch;
};

constexpr std::size_t layer_block_q = attention_block_q;

// Size arithmetic of a layer, each step checked against std::size_t (the static_asserts of the template):
// K/V floats 2·max_seq·kv_heads·head_dim, tile floats 2·layer_block_q·model_dim, and the whole buffer in
// bytes, which must also fit a ptrdiff_t (the largest object). Parameters that passed the other asserts.
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

// A K/V cache stored in f16 or q8 (layers.cpp, layer_run_cache): K and V of max_seq rows of kv_heads·head_dim
// elements each (int8 or binary16 bits), and for q8 one float scale per row and K/V head (row-major, kv_heads
// a row). The layer's scratch is then layer_scratch_floats(model_dim, heads, format).
struct LayerCache {
  Format format;
  void* k;
  void* v;
  float* k_scales;
  float* v_scales;
};

// The one layout of an f16 / q8 K/V cache in its buffer, for max_seq positions of kv_heads heads of head_dim:
// [K scales, V scales (q8: max_seq·kv_heads floats each)] [K] [V] (K and V max_seq·kv_heads·head_dim elements of
// 2 (f16) or 1 (q8) bytes). The templates and the C API place their caches by it.
struct CacheLayout {
  std::size_t v_scales;  // floats from the buffer's start (K's scales start it)
  std::size_t k;         // bytes from the buffer's start
  std::size_t v;         // bytes from the buffer's start
};
constexpr CacheLayout cache_layout(Format f, std::size_t max_seq, std::size_t kv_heads, std::size_t head_dim) noexcept {
  const std::size_t scales = f == Format::q8 ? max_seq * kv_heads : 0;
  const std::size_t k = 2 * scales * sizeof(float);
  return {scales, k, k + max_seq * kv_heads * head_dim * (f == Format::f16 ? 2 : 1)};
}
// The cache of that layout in `buffer`; f32 (whose K and V the layer holds as floats itself): no stored cache.
inline LayerCache cache_in(Format f, float* buffer, std::size_t max_seq, std::size_t kv_heads,
                           std::size_t head_dim) noexcept {
  if (f == Format::f32) return {f, nullptr, nullptr, nullptr, nullptr};
  const CacheLayout at = cache_layout(f, max_seq, kv_heads, head_dim);
  unsigned char* const bytes = reinterpret_cast<unsigned char*>(buffer);
  return {f, bytes + at.k, bytes + at.v, buffer, buffer + at.v_scales};
}

enum class LayerOp { forward, append, attend };
// The one implementation of forward (self-attention: `query` and `context` the same view; refills the cache from
// `context`), append (query == context == x) and attend (context unused: pass the query).
Status layer_run(const LayerParts& layer, LayerOp op, MatrixView<const float> query, MatrixView<const float> context,
                 MatrixView<float> y, const AttentionOptions& options) noexcept;
// The same over an f16 or q8 cache (layer.k and layer.v unused): its own function, so that a firmware whose
// layers all keep an f32 cache links none of the conversion code.
Status layer_run_cache(const LayerParts& layer, const LayerCache& cache, LayerOp op, MatrixView<const float> query,
                       MatrixView<const float> context, MatrixView<float> y, const AttentionOptions& options) noexcept;

constexpr bool cache_format_ok(Format f) noexcept { return f == Format::f32 || f == Format::f16 || f == Format::q8; }

}  // namespace detail

}  // namespace microattn
