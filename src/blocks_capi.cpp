// The C API of the blocks (microattn.h): its own object, so that C++ firmware, and C firmware that calls none of
// these, links none of it.
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "capi_convert.hpp"
#include "check.hpp"
#include "microattn/blocks.hpp"
#include "microattn/microattn.h"

namespace ma = microattn;

static_assert(static_cast<int>(ma::Activation::relu) == MICROATTN_ACTIVATION_RELU, "activation values differ");
static_assert(static_cast<int>(ma::Activation::gelu) == MICROATTN_ACTIVATION_GELU, "activation values differ");
static_assert(static_cast<int>(ma::Activation::gelu_tanh) == MICROATTN_ACTIVATION_GELU_TANH,
              "activation values differ");
static_assert(static_cast<int>(ma::Activation::silu) == MICROATTN_ACTIVATION_SILU, "activation values differ");
static_assert(MICROATTN_ENCODER_LAYER_SCRATCH_FLOATS(64, 64, 4, 256) ==
                  ma::TransformerEncoderLayerSharedScratch<64, 64, 4, 256>::scratch_floats,
              "C and C++ encoder scratch formulas differ");
static_assert(MICROATTN_DECODER_LAYER_SCRATCH_FLOATS(40, 48, 6, 100) ==
                  ma::DecoderLayerSharedScratch<40, 48, 6, 2, 100>::scratch_floats,
              "C and C++ decoder scratch formulas differ");

namespace {
using ma::capi::c;
using ma::capi::cpp;
using ma::capi::raw_enum;
ma::Activation cpp(const microattn_activation& a) noexcept { return static_cast<ma::Activation>(raw_enum(a, 3)); }
ma::EncoderLayerWeights cpp(const microattn_encoder_layer_weights& w) noexcept {
  return {cpp(w.self_attn), cpp(w.linear1), w.linear1_bias, cpp(w.linear2), w.linear2_bias,
          w.norm1_weight,   w.norm1_bias,   w.norm2_weight, w.norm2_bias};
}
ma::DecoderLayerWeights cpp(const microattn_decoder_layer_weights& w) noexcept {
  return {cpp(w.wq), cpp(w.wk), cpp(w.wv), cpp(w.wo), cpp(w.w1), cpp(w.w2), cpp(w.w3), w.attention_norm, w.ffn_norm};
}
// DecoderLayer::attention_weights: a decoder's projections have no biases.
ma::LayerWeightMatrices attention_weights(const ma::DecoderLayerWeights& w) noexcept {
  return {w.wq, w.wk, w.wv, nullptr, nullptr, nullptr, w.wo, nullptr};
}

// The largest block: its bytes must fit a ptrdiff_t (as the C++ layers' layer_bytes_fit).
constexpr std::size_t max_floats = static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(float);

// encoder_ / decoder_layer_scratch_floats (ffn_rows · ffn floats of feed-forward rows), 0 for sizes the templates'
// static_asserts reject (the one rule, block_sizes_fit), a format outside the enum or a sum past max_floats.
std::size_t block_scratch(std::size_t max_seq, std::size_t d, std::size_t heads, std::size_t kv_heads, std::size_t ffn,
                          std::size_t ffn_rows, ma::Format cache) noexcept {
  if (!ma::detail::block_sizes_fit(max_seq, d, heads, kv_heads, ffn) || !ma::detail::cache_format_ok(cache)) return 0;
  // Each term fits a size_t (block_sizes_fit bounds max_seq·d and 8·block_ffn_rows·ffn); their sum is checked.
  const std::size_t terms[] = {ma::layer_scratch_floats(d, heads, cache), ma::block_ffn_rows * d, ffn_rows * ffn};
  std::size_t sum = 0;
  for (const std::size_t t : terms) {
    if (t > max_floats - sum) return 0;
    sum += t;
  }
  return sum;
}

std::uintptr_t bits(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }
bool eps_ok(float eps) noexcept { return eps >= 0.0f && eps <= FLT_MAX; }  // NaN fails both

// The checks of both inits after the null pointers of the arguments, in the documented order: `p` holds the
// problems of every weight matrix against the cache and the scratch (weight_problems bits), `vec` the model_dim
// vectors (norm weights and biases, nullptr allowed), `config_valid` the eps, activation and rope checks.
microattn_status block_init_checks(unsigned p, bool sizes_valid, bool config_valid, bool big_enough, const float* cache,
                                   std::size_t cache_floats, const float* scratch, std::size_t scratch_floats,
                                   const float* const* vec, std::size_t n_vec, std::size_t d) noexcept {
  namespace md = ma::detail;
  if ((p & md::weight_null) != 0) return MICROATTN_NULL_POINTER;
  if (!sizes_valid || (p & md::weight_shape) != 0 || !config_valid) return MICROATTN_INVALID_SHAPE;
  if (!big_enough) return MICROATTN_WORKSPACE_TOO_SMALL;
  std::uintptr_t any = bits(cache) | bits(scratch);
  for (std::size_t i = 0; i < n_vec; ++i) any |= bits(vec[i]);
  if (any % alignof(float) != 0 || (p & md::weight_misaligned) != 0) return MICROATTN_MISALIGNED;
  if ((p & md::weight_aliasing) != 0 || md::ranges_overlap(cache, cache_floats, scratch, scratch_floats))
    return MICROATTN_ALIASING;
  for (std::size_t i = 0; i < n_vec; ++i)
    if (vec[i] != nullptr &&
        (md::ranges_overlap(cache, cache_floats, vec[i], d) || md::ranges_overlap(scratch, scratch_floats, vec[i], d)))
      return MICROATTN_ALIASING;
  return MICROATTN_OK;
}

// The weight_problems bits of a matrix against both blocks.
unsigned problems2(const ma::WeightMatrix& w, const float* bias, std::size_t rows, std::size_t cols,
                   const ma::MatrixView<float>& cache, const ma::MatrixView<float>& scratch) noexcept {
  return ma::detail::weight_problems(w, bias, rows, cols, cache) |
         ma::detail::weight_problems(w, bias, rows, cols, scratch);
}

// A C caller can point x, y or the mask into the block's cache or scratch, which a C++ block keeps private: after
// the checks of x and y that the run makes first (null pointers, alignment, shapes), that is ALIASING, before the
// run writes anything.
template <class T>
bool on_blocks(const ma::MatrixView<T>& v, const float* cache, std::size_t cache_floats, const float* scratch,
               std::size_t scratch_floats) noexcept {
  namespace md = ma::detail;
  return v.data != nullptr && md::shape_ok(v) &&
         (md::ranges_overlap(cache, cache_floats, v.data, md::extent(v)) ||
          md::ranges_overlap(scratch, scratch_floats, v.data, md::extent(v)));
}
microattn_status views_on_blocks(const ma::MatrixView<const float>& x, const ma::MatrixView<float>& y,
                                 const ma::AttentionOptions& o, std::size_t max_seq, std::size_t d, const float* cache,
                                 std::size_t cache_floats, const float* scratch, std::size_t scratch_floats) noexcept {
  namespace md = ma::detail;
  if (!on_blocks(x, cache, cache_floats, scratch, scratch_floats) &&
      !on_blocks(y, cache, cache_floats, scratch, scratch_floats) &&
      !on_blocks(o.mask, cache, cache_floats, scratch, scratch_floats))
    return MICROATTN_OK;
  if (x.data == nullptr || y.data == nullptr) return MICROATTN_NULL_POINTER;
  if (!md::all_aligned(x, y)) return MICROATTN_MISALIGNED;
  if (!md::shape_ok(x) || !md::shape_ok(y) || x.cols != d || y.cols != d || y.rows != x.rows || x.rows > max_seq)
    return MICROATTN_INVALID_SHAPE;
  return MICROATTN_ALIASING;
}

const microattn_encoder_layer_config encoder_defaults{0, MICROATTN_ACTIVATION_RELU, 1e-5f};

microattn_status encoder_init(microattn_encoder_layer* layer, std::size_t max_seq, std::size_t d, std::size_t heads,
                              std::size_t ff, const microattn_encoder_layer_weights* weights,
                              const microattn_encoder_layer_config* config, float* cache, std::size_t cache_given,
                              float* scratch, std::size_t scratch_given) noexcept {
  if (layer == nullptr || weights == nullptr || cache == nullptr || scratch == nullptr) return MICROATTN_NULL_POINTER;
  const microattn_encoder_layer_config cfg = config != nullptr ? *config : encoder_defaults;
  const std::size_t scratch_needed = block_scratch(max_seq, d, heads, heads, ff, ma::block_ffn_rows, ma::Format::f32);
  const std::size_t cache_needed = scratch_needed == 0 ? 0 : ma::layer_cache_floats(max_seq, d, heads, heads);
  const ma::MatrixView<float> cv{cache, 1, cache_needed, cache_needed}, sv{scratch, 1, scratch_needed, scratch_needed};
  const ma::EncoderLayerWeights w = cpp(*weights);
  const unsigned p = ma::detail::layer_matrices_problems(w.self_attn, d, d, cv) |
                     ma::detail::layer_matrices_problems(w.self_attn, d, d, sv) |
                     problems2(w.linear1, w.linear1_bias, ff, d, cv, sv) |
                     problems2(w.linear2, w.linear2_bias, d, ff, cv, sv);
  const float* const vec[] = {w.norm1_weight, w.norm1_bias, w.norm2_weight, w.norm2_bias};
  const bool config_valid = eps_ok(cfg.layer_norm_eps) && raw_enum(cfg.activation, 3) <= 3;
  const microattn_status s = block_init_checks(p, scratch_needed != 0, config_valid,
                                               cache_given >= cache_needed && scratch_given >= scratch_needed, cache,
                                               cache_needed, scratch, scratch_needed, vec, 4, d);
  if (s != MICROATTN_OK) return s;
  microattn_encoder_layer l = ma::capi::layer_blocks<microattn_encoder_layer>(max_seq, d, heads, d / heads, cache,
                                                                              cache_needed, scratch, scratch_needed);
  l.feed_forward = ff;
  l.weights = *weights;
  l.config = cfg;
  *layer = l;
  return MICROATTN_OK;
}

const microattn_decoder_layer_config decoder_defaults{{0.0f, 0, 0, 0}, 1e-5f};

microattn_status decoder_init(microattn_decoder_layer* layer, std::size_t max_seq, std::size_t d, std::size_t heads,
                              std::size_t kv_heads, std::size_t hidden, const microattn_decoder_layer_weights* weights,
                              const microattn_decoder_layer_config* config, const microattn_format& cache_format,
                              void* cache, std::size_t cache_bytes, float* scratch,
                              std::size_t scratch_given) noexcept {
  if (layer == nullptr || weights == nullptr || cache == nullptr || scratch == nullptr) return MICROATTN_NULL_POINTER;
  const microattn_decoder_layer_config cfg = config != nullptr ? *config : decoder_defaults;
  const ma::Format format = cpp(cache_format);
  const std::size_t scratch_needed = block_scratch(max_seq, d, heads, kv_heads, hidden, 2 * ma::block_ffn_rows, format);
  const std::size_t bytes_needed = scratch_needed == 0 ? 0 : ma::layer_cache_bytes(max_seq, d, heads, kv_heads, format);
  const std::size_t cache_needed = (bytes_needed + sizeof(float) - 1) / sizeof(float);
  auto* const k = static_cast<float*>(cache);
  const ma::MatrixView<float> cv{k, 1, cache_needed, cache_needed}, sv{scratch, 1, scratch_needed, scratch_needed};
  const ma::DecoderLayerWeights w = cpp(*weights);
  const std::size_t hd = scratch_needed == 0 ? 0 : d / heads;
  const ma::LayerWeightMatrices aw = attention_weights(w);
  const unsigned p = ma::detail::layer_matrices_problems(aw, d, kv_heads * hd, cv) |
                     ma::detail::layer_matrices_problems(aw, d, kv_heads * hd, sv) |
                     problems2(w.w1, nullptr, hidden, d, cv, sv) | problems2(w.w3, nullptr, hidden, d, cv, sv) |
                     problems2(w.w2, nullptr, d, hidden, cv, sv);
  const float* const vec[] = {w.attention_norm, w.ffn_norm};
  const bool config_valid =
      eps_ok(cfg.rms_norm_eps) && (scratch_needed == 0 || ma::detail::config_ok(cpp(cfg.attention), hd));
  const microattn_status s = block_init_checks(p, scratch_needed != 0, config_valid,
                                               cache_bytes >= bytes_needed && scratch_given >= scratch_needed, k,
                                               cache_needed, scratch, scratch_needed, vec, 2, d);
  if (s != MICROATTN_OK) return s;
  microattn_decoder_layer l =
      ma::capi::layer_blocks<microattn_decoder_layer>(max_seq, d, heads, hd, k, cache_needed, scratch, scratch_needed);
  l.kv_heads = kv_heads;
  l.hidden = hidden;
  l.weights = *weights;
  l.config = cfg;
  l.cache_format = cache_format;
  *layer = l;
  return MICROATTN_OK;
}

bool initialised(const microattn_encoder_layer* l) noexcept {
  return l != nullptr && l->cache != nullptr && l->scratch != nullptr && l->weights.self_attn.q.data != nullptr;
}
bool initialised(const microattn_decoder_layer* l) noexcept {
  return l != nullptr && l->cache != nullptr && l->scratch != nullptr && l->weights.wq.data != nullptr;
}

// A call's views and options, or why it cannot run: a layer not initialised (null_pointer), or what
// views_on_blocks finds.
struct CallArgs {
  microattn_status status;
  ma::MatrixView<const float> x;
  ma::MatrixView<float> y;
  ma::AttentionOptions o;
};
template <class L>
CallArgs call_args(const L* layer, const microattn_cview& xc, const microattn_view& yc,
                   const microattn_attention_options* options) noexcept {
  CallArgs a{MICROATTN_NULL_POINTER, {}, {}, {}};
  if (!initialised(layer)) return a;
  a.x = cpp(xc);
  a.y = cpp(yc);
  a.o = cpp(options);
  const L& l = *layer;
  a.status =
      views_on_blocks(a.x, a.y, a.o, l.max_seq, l.model_dim, l.cache, l.cache_floats, l.scratch, l.scratch_floats);
  return a;
}

// TransformerEncoderLayer::forward: the C struct lends its fields as the template's parts() does.
microattn_status encoder_call(microattn_encoder_layer* layer, const microattn_cview& xc, const microattn_view& yc,
                              const microattn_attention_options* options) noexcept {
  const CallArgs a = call_args(layer, xc, yc, options);
  if (a.status != MICROATTN_OK) return a.status;
  const microattn_encoder_layer& l = *layer;
  const ma::MatrixView<const float>& x = a.x;
  const ma::MatrixView<float>& y = a.y;
  const ma::AttentionOptions& o = a.o;
  const ma::EncoderLayerWeights w = cpp(l.weights);
  ma::EncoderLayerConfig config;
  config.norm_first = l.config.norm_first != 0;
  config.activation = cpp(l.config.activation);
  config.layer_norm_eps = l.config.layer_norm_eps;
  const ma::LayerConfig attention_config{};  // nn.TransformerEncoderLayer: no rope, no window
  ma::detail::LayerState state{0, 0};        // forward refills the cache
  const ma::detail::BlockParts parts{{{l.max_seq, l.model_dim, l.heads, l.heads, l.head_dim},
                                      &w.self_attn,
                                      &ma::detail::layer_weight_matrices,
                                      &attention_config,
                                      &state,
                                      l.cache,
                                      l.cache + l.cache_floats / 2,
                                      l.scratch},
                                     l.feed_forward,
                                     ma::layer_scratch_floats(l.model_dim, l.heads),
                                     {ma::Format::f32, nullptr, nullptr, nullptr, nullptr},
                                     &ma::detail::block_attention_f32,
                                     &ma::detail::linear_checked_mixed};
  return c(ma::detail::encoder_run(parts, w, config, x, y, o));
}

// DecoderLayer::forward / append, with the cache laid out as DecoderLayer's (and microattn_layer's): F32 K then V;
// F16 / Q8 [K scales, V scales (Q8)] [K] [V].
microattn_status decoder_call(microattn_decoder_layer* layer, ma::detail::LayerOp op, const microattn_cview& xc,
                              const microattn_view& yc, const microattn_attention_options* options) noexcept {
  const CallArgs a = call_args(layer, xc, yc, options);
  if (a.status != MICROATTN_OK) return a.status;
  microattn_decoder_layer& l = *layer;
  const ma::MatrixView<const float>& x = a.x;
  const ma::MatrixView<float>& y = a.y;
  const ma::AttentionOptions& o = a.o;
  const ma::DecoderLayerWeights w = cpp(l.weights);
  const ma::LayerWeightMatrices aw = attention_weights(w);
  const ma::LayerConfig config = cpp(l.config.attention);
  const ma::Format f = cpp(l.cache_format);
  const bool f32 = f == ma::Format::f32;
  const std::size_t half = l.max_seq * l.kv_heads * l.head_dim;  // elements of K (and of V)
  ma::detail::LayerState state{l.cached, l.position};
  const ma::detail::BlockParts parts{{{l.max_seq, l.model_dim, l.heads, l.kv_heads, l.head_dim},
                                      &aw,
                                      &ma::detail::layer_weight_matrices,
                                      &config,
                                      &state,
                                      f32 ? l.cache : nullptr,
                                      f32 ? l.cache + half : nullptr,
                                      l.scratch},
                                     l.hidden,
                                     ma::layer_scratch_floats(l.model_dim, l.heads, f),
                                     ma::detail::cache_in(f, l.cache, l.max_seq, l.kv_heads, l.head_dim),
                                     f32 ? &ma::detail::block_attention_f32 : &ma::detail::block_attention_cache,
                                     &ma::detail::linear_checked_mixed};
  const ma::Status s = ma::detail::decoder_run(parts, op, w, l.config.rms_norm_eps, x, y, o);
  if (s == ma::Status::ok) {
    l.cached = state.cached;
    l.position = state.position;
  }
  return c(s);
}
}  // namespace

extern "C" {

microattn_status microattn_layer_norm_rows(microattn_cview x, const float* weight, const float* bias, float eps,
                                           microattn_view y) {
  return c(ma::layer_norm_rows(cpp(x), weight, bias, eps, cpp(y)));
}

microattn_status microattn_rms_norm_rows(microattn_cview x, const float* weight, float eps, microattn_view y) {
  return c(ma::rms_norm_rows(cpp(x), weight, eps, cpp(y)));
}

microattn_status microattn_activate_rows(microattn_view x, microattn_activation a) {
  // The C enum may hold any int: one outside the four becomes 0xff (raw_enum), which activate_rows rejects
  // (invalid_shape) after its pointer checks, as for a C++ caller; a plain narrowing could turn 256 into relu.
  return c(ma::activate_rows(cpp(x), cpp(a)));
}

size_t microattn_encoder_layer_scratch_floats(size_t max_seq, size_t model_dim, size_t heads, size_t feed_forward) {
  return block_scratch(max_seq, model_dim, heads, heads, feed_forward, ma::block_ffn_rows, ma::Format::f32);
}
size_t microattn_decoder_layer_scratch_floats(size_t max_seq, size_t model_dim, size_t heads, size_t hidden,
                                              microattn_format cache) {
  // kv_heads 1: the scratch does not depend on it (and 1 divides every heads).
  return block_scratch(max_seq, model_dim, heads, 1, hidden, 2 * ma::block_ffn_rows, cpp(cache));
}

microattn_status microattn_encoder_layer_init(microattn_encoder_layer* layer, size_t max_seq, size_t model_dim,
                                              size_t heads, size_t feed_forward,
                                              const microattn_encoder_layer_weights* weights,
                                              const microattn_encoder_layer_config* config, float* cache,
                                              size_t cache_floats, float* scratch, size_t scratch_floats) {
  return encoder_init(layer, max_seq, model_dim, heads, feed_forward, weights, config, cache, cache_floats, scratch,
                      scratch_floats);
}
microattn_status microattn_decoder_layer_init(microattn_decoder_layer* layer, size_t max_seq, size_t model_dim,
                                              size_t heads, size_t kv_heads, size_t hidden,
                                              const microattn_decoder_layer_weights* weights,
                                              const microattn_decoder_layer_config* config,
                                              microattn_format cache_format, void* cache, size_t cache_bytes,
                                              float* scratch, size_t scratch_floats) {
  return decoder_init(layer, max_seq, model_dim, heads, kv_heads, hidden, weights, config, cache_format, cache,
                      cache_bytes, scratch, scratch_floats);
}

microattn_status microattn_encoder_layer_forward(microattn_encoder_layer* layer, microattn_cview x, microattn_view y,
                                                 const microattn_attention_options* options) {
  return encoder_call(layer, x, y, options);
}
microattn_status microattn_decoder_layer_forward(microattn_decoder_layer* layer, microattn_cview x, microattn_view y,
                                                 const microattn_attention_options* options) {
  return decoder_call(layer, ma::detail::LayerOp::forward, x, y, options);
}
microattn_status microattn_decoder_layer_append(microattn_decoder_layer* layer, microattn_cview x, microattn_view y,
                                                const microattn_attention_options* options) {
  return decoder_call(layer, ma::detail::LayerOp::append, x, y, options);
}
microattn_status microattn_decoder_layer_reset(microattn_decoder_layer* layer) {
  if (!initialised(layer)) return MICROATTN_NULL_POINTER;
  layer->cached = 0;
  layer->position = 0;
  return MICROATTN_OK;
}
size_t microattn_decoder_layer_cached(const microattn_decoder_layer* layer) {
  return layer != nullptr ? layer->cached : 0;
}
size_t microattn_decoder_layer_position(const microattn_decoder_layer* layer) {
  return layer != nullptr ? layer->position : 0;
}

}  // extern "C"
