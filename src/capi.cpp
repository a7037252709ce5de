// The C API (microattn.h): thin wrappers over the C++ entry points, plus the layer over caller memory.
#include "microattn/microattn.h"

#include <climits>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "capi_convert.hpp"
#include "check.hpp"
#include "microattn/microattn.hpp"

namespace ma = microattn;
using ma::capi::c;
using ma::capi::cpp;

// The C enum mirrors the C++ one value for value.
static_assert(static_cast<int>(ma::Status::ok) == MICROATTN_OK, "status values differ");
static_assert(static_cast<int>(ma::Status::null_pointer) == MICROATTN_NULL_POINTER, "status values differ");
static_assert(static_cast<int>(ma::Status::invalid_shape) == MICROATTN_INVALID_SHAPE, "status values differ");
static_assert(static_cast<int>(ma::Status::workspace_too_small) == MICROATTN_WORKSPACE_TOO_SMALL,
              "status values differ");
static_assert(static_cast<int>(ma::Status::aliasing) == MICROATTN_ALIASING, "status values differ");
static_assert(static_cast<int>(ma::Status::misaligned) == MICROATTN_MISALIGNED, "status values differ");
static_assert(static_cast<int>(ma::Format::f32) == MICROATTN_FORMAT_F32, "format values differ");
static_assert(static_cast<int>(ma::Format::f16) == MICROATTN_FORMAT_F16, "format values differ");
static_assert(static_cast<int>(ma::Format::q8) == MICROATTN_FORMAT_Q8, "format values differ");

// The C macros and the C++ constants of the same figures, from their one source (config.h) or a formula each.
static_assert(MICROATTN_ATTENTION_BLOCK_Q == ma::attention_block_q, "C and C++ attention tiles differ");
static_assert(MICROATTN_ATTENTION_BLOCK_KV == ma::attention_block_kv, "C and C++ attention tiles differ");
static_assert(MICROATTN_ATTENTION_MAX_HEAD_DIM == ma::attention_max_head_dim, "C and C++ head limits differ");
static_assert(MICROATTN_EXP_MAX_ULP == ma::exp_max_ulp, "C and C++ exp bounds differ");
static_assert(MICROATTN_ATTENTION_WORKSPACE_FLOATS(64, 48) == ma::attention_workspace_floats(64, 48),
              "C and C++ workspace formulas differ");
static_assert(MICROATTN_LAYER_CACHE_FLOATS(64, 64, 4, 2) == ma::layer_cache_floats(64, 64, 4, 2),
              "C and C++ layer cache formulas differ");
static_assert(MICROATTN_LAYER_SCRATCH_FLOATS(48, 6) == ma::layer_scratch_floats(48, 6),
              "C and C++ layer scratch formulas differ");
static_assert(MICROATTN_LAYER_BUFFER_FLOATS(64, 64, 4, 2) == ma::MultiHeadAttention<64, 64, 4, 2>::buffer_floats,
              "C and C++ layer buffer formulas differ");
static_assert(MICROATTN_LAYER_BUFFER_FLOATS(5, 12, 3, 1) == ma::MultiHeadAttention<5, 12, 3, 1>::buffer_floats,
              "C and C++ layer buffer formulas differ");
static_assert(MICROATTN_LAYER_BUFFER_FLOATS(64, 64, 4, 2) ==
                  ma::layer_cache_floats(64, 64, 4, 2) + ma::layer_scratch_floats(64, 4),
              "C and C++ layer buffer formulas differ");

namespace {

// The most floats a block may hold: its bytes must fit a ptrdiff_t (the largest object, as detail::layer_bytes_fit
// requires of a C++ layer), not merely a size_t. The blocks need float alignment only, so no padding adds bytes.
constexpr std::size_t max_floats = static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(float);

// A valid layer shape: non-zero sizes, model_dim % heads == 0, heads % kv_heads == 0, a head dim attention takes.
bool layer_shape_ok(std::size_t model_dim, std::size_t heads, std::size_t kv_heads) noexcept {
  if (model_dim == 0 || heads == 0 || kv_heads == 0) return false;
  if (model_dim % heads != 0 || heads % kv_heads != 0) return false;
  return model_dim / heads <= ma::attention_max_head_dim;
}

// layer_cache_floats and layer_scratch_floats, 0 for an invalid shape or past max_floats. Each bound is checked
// by one division before the product is formed, so nothing wraps.
std::size_t cache_floats(std::size_t max_seq, std::size_t model_dim, std::size_t heads, std::size_t kv_heads) noexcept {
  if (max_seq == 0 || !layer_shape_ok(model_dim, heads, kv_heads)) return 0;
  const std::size_t kv_dim = kv_heads * (model_dim / heads);  // >= 1, <= model_dim
  return max_seq <= max_floats / 2 / kv_dim ? 2 * max_seq * kv_dim : 0;
}
std::size_t scratch_floats(std::size_t model_dim, std::size_t heads) noexcept {
  if (!layer_shape_ok(model_dim, heads, 1)) return 0;
  const std::size_t hd = model_dim / heads;
  const std::size_t ws = ma::attention_workspace_floats(hd, hd);  // hd <= attention_max_head_dim: far below the limit
  constexpr std::size_t per_row = 2 * ma::detail::layer_block_q;  // Q and the heads of one query tile
  return model_dim <= (max_floats - ws) / per_row ? per_row * model_dim + ws : 0;
}
std::size_t buffer_floats(std::size_t max_seq, std::size_t model_dim, std::size_t heads,
                          std::size_t kv_heads) noexcept {
  const std::size_t kv = cache_floats(max_seq, model_dim, heads, kv_heads);
  const std::size_t scratch = kv == 0 ? 0 : scratch_floats(model_dim, heads);
  return scratch != 0 && kv <= max_floats - scratch ? kv + scratch : 0;
}

bool overlaps_weights(const float* buffer, std::size_t floats, const microattn_layer_weights& w, std::size_t d,
                      std::size_t kv_dim) noexcept {
  const struct {
    const float* p;
    std::size_t n;
  } arrays[] = {{w.q_weight, d * d}, {w.k_weight, kv_dim * d}, {w.v_weight, kv_dim * d}, {w.q_bias, d},
                {w.k_bias, kv_dim},  {w.v_bias, kv_dim},       {w.out_weight, d * d},    {w.out_bias, d}};
  for (const auto& a : arrays)
    if (a.p != nullptr && ma::detail::ranges_overlap(buffer, floats, a.p, a.n)) return true;
  return false;
}

std::uintptr_t bits(const float* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }

// What every init sets: shapes, config, the cache and scratch blocks, an empty cache (its weights it sets itself).
microattn_layer layer_fields(std::size_t max_seq, std::size_t model_dim, std::size_t heads, std::size_t kv_heads,
                             std::size_t head_dim, const microattn_layer_config& config, float* cache,
                             std::size_t cache_size, float* scratch, std::size_t scratch_size) noexcept {
  microattn_layer l = ma::capi::layer_blocks<microattn_layer>(max_seq, model_dim, heads, head_dim, cache, cache_size,
                                                              scratch, scratch_size);
  l.kv_heads = kv_heads;
  l.config = config;
  return l;
}

// The checks of every init, in the documented order; `blocks` are the caller's memory (cache, scratch).
microattn_status layer_init(microattn_layer* layer, std::size_t max_seq, std::size_t model_dim, std::size_t heads,
                            std::size_t kv_heads, const microattn_layer_weights* weights,
                            const microattn_layer_config* config, float* cache, std::size_t cache_given, float* scratch,
                            std::size_t scratch_given, bool shared) noexcept {
  if (layer == nullptr || weights == nullptr || cache == nullptr || scratch == nullptr) return MICROATTN_NULL_POINTER;
  const microattn_layer_weights& w = *weights;
  // The weight checks of layer_prepare, with its statuses, made once here: a layer init accepted never fails on them.
  if (w.q_weight == nullptr || w.k_weight == nullptr || w.v_weight == nullptr ||
      (w.out_bias != nullptr && w.out_weight == nullptr))
    return MICROATTN_NULL_POINTER;
  const std::size_t cache_needed = cache_floats(max_seq, model_dim, heads, kv_heads);
  const std::size_t scratch_needed = scratch_floats(model_dim, heads);
  const std::size_t buffer_needed = buffer_floats(max_seq, model_dim, heads, kv_heads);
  if (buffer_needed == 0) return MICROATTN_INVALID_SHAPE;
  microattn_layer_config c{};
  if (config != nullptr) c = *config;
  const std::size_t hd = model_dim / heads;
  // The configurations layer_run rejects on every call (its config_ok), rejected once at init instead.
  if (!ma::detail::config_ok(cpp(c), hd)) return MICROATTN_INVALID_SHAPE;
  if (shared ? cache_given < cache_needed || scratch_given < scratch_needed : cache_given < buffer_needed)
    return MICROATTN_WORKSPACE_TOO_SMALL;
  // Every block, weight and bias pointer in one test of their ORed addresses (less flash than ten tests; null
  // counts as aligned, as in layer_prepare).
  const std::uintptr_t any = bits(cache) | bits(scratch) | bits(w.q_weight) | bits(w.k_weight) | bits(w.v_weight) |
                             bits(w.q_bias) | bits(w.k_bias) | bits(w.v_bias) | bits(w.out_weight) | bits(w.out_bias);
  if (any % alignof(float) != 0) return MICROATTN_MISALIGNED;
  const std::size_t kv_dim = kv_heads * hd;
  if (overlaps_weights(cache, shared ? cache_needed : buffer_needed, w, model_dim, kv_dim) ||
      (shared && (overlaps_weights(scratch, scratch_needed, w, model_dim, kv_dim) ||
                  ma::detail::ranges_overlap(cache, cache_needed, scratch, scratch_needed))))
    return MICROATTN_ALIASING;
  // MultiHeadAttention::parts(): an owned scratch follows K and V.
  microattn_layer l = layer_fields(max_seq, model_dim, heads, kv_heads, hd, c, cache, cache_needed,
                                   shared ? scratch : cache + cache_needed, scratch_needed);
  l.weights = w;
  l.weight_reader = &ma::detail::layer_weights_f32;
  *layer = l;
  return MICROATTN_OK;
}

// What microattn_layer::cache_runner points at (an object, not a function: C's void* may hold only those).
struct CacheRunner {
  ma::Status (*run)(const ma::detail::LayerParts&, const ma::detail::LayerCache&, ma::detail::LayerOp,
                    ma::MatrixView<const float>, ma::MatrixView<const float>, ma::MatrixView<float>,
                    const ma::AttentionOptions&) noexcept;
};
constexpr CacheRunner cache_runner{&ma::detail::layer_run_cache};

// microattn_layer_init_matrices: the checks of layer_matrices_problems (a layer's every call) with the cache and
// the scratch in y's place, once, in the documented order.
microattn_status layer_init_matrices(microattn_layer* layer, std::size_t max_seq, std::size_t model_dim,
                                     std::size_t heads, std::size_t kv_heads,
                                     const microattn_layer_weight_matrices* weights,
                                     const microattn_layer_config* config, const microattn_format& cache_format,
                                     void* cache, std::size_t cache_bytes, float* scratch,
                                     std::size_t scratch_given) noexcept {
  if (layer == nullptr || weights == nullptr || cache == nullptr || scratch == nullptr) return MICROATTN_NULL_POINTER;
  const ma::LayerWeightMatrices w = cpp(*weights);
  const ma::Format format = cpp(cache_format);
  const bool format_ok = ma::detail::cache_format_ok(format);
  // The cache block in floats (rounded up): K and V for F32, scales and the K/V bytes for F16 / Q8.
  const std::size_t elements = cache_floats(max_seq, model_dim, heads, kv_heads);
  const std::size_t cache_needed_bytes =
      elements == 0 || !format_ok ? 0 : ma::layer_cache_bytes(max_seq, model_dim, heads, kv_heads, format);
  const std::size_t cache_needed = (cache_needed_bytes + sizeof(float) - 1) / sizeof(float);
  const std::size_t scratch_needed = cache_needed == 0 ? 0 : ma::layer_scratch_floats(model_dim, heads, format);
  const std::size_t hd = scratch_needed == 0 ? 0 : model_dim / heads;
  // Views of the blocks, for the overlap tests (made only for valid sizes: an empty view tests nothing).
  auto* const k = static_cast<float*>(cache);
  const ma::MatrixView<float> cache_view{k, 1, cache_needed, cache_needed},
      scratch_view{scratch, 1, scratch_needed, scratch_needed};
  const unsigned p = ma::detail::layer_matrices_problems(w, model_dim, kv_heads * hd, cache_view) |
                     ma::detail::layer_matrices_problems(w, model_dim, kv_heads * hd, scratch_view);
  if ((p & ma::detail::weight_null) != 0) return MICROATTN_NULL_POINTER;
  if (scratch_needed == 0 || (p & ma::detail::weight_shape) != 0) return MICROATTN_INVALID_SHAPE;
  microattn_layer_config c{};
  if (config != nullptr) c = *config;
  if (!ma::detail::config_ok(cpp(c), hd)) return MICROATTN_INVALID_SHAPE;
  if (cache_bytes < cache_needed_bytes || scratch_given < scratch_needed) return MICROATTN_WORKSPACE_TOO_SMALL;
  if (((bits(k) | bits(scratch)) % alignof(float)) != 0 || (p & ma::detail::weight_misaligned) != 0)
    return MICROATTN_MISALIGNED;
  if ((p & ma::detail::weight_aliasing) != 0 || ma::detail::ranges_overlap(k, cache_needed, scratch, scratch_needed))
    return MICROATTN_ALIASING;
  microattn_layer l =
      layer_fields(max_seq, model_dim, heads, kv_heads, hd, c, k, cache_needed, scratch, scratch_needed);
  l.weight_matrices = *weights;
  l.weight_reader = &ma::detail::layer_weight_matrices;
  l.cache_format = cache_format;
  // Only this init takes the F16 / Q8 caches: a firmware that never calls it links none of their code.
  l.cache_runner = format == ma::Format::f32 ? nullptr : &cache_runner;
  *layer = l;
  return MICROATTN_OK;
}

bool initialised(const microattn_layer* layer) noexcept {
  return layer != nullptr && layer->cache != nullptr && layer->scratch != nullptr && layer->weight_reader != nullptr &&
         (layer->weights.q_weight != nullptr || layer->weight_matrices.q.data != nullptr);
}

template <class T>
bool overlaps_cache(const microattn_layer& l, const ma::MatrixView<T>& v) noexcept {
  return v.data != nullptr && ma::detail::shape_ok(v) &&
         ma::detail::ranges_overlap(l.cache, l.cache_floats, v.data, ma::detail::extent(v));
}

// Every layer call: the C struct lends its fields to detail::layer_run as MultiHeadAttention::parts() does, and
// takes the cache state back.
microattn_status layer_call(microattn_layer* layer, ma::detail::LayerOp op, const microattn_cview& query,
                            const microattn_cview& context, const microattn_view& y,
                            const microattn_attention_options* options) noexcept {
  if (!initialised(layer)) return MICROATTN_NULL_POINTER;
  microattn_layer& l = *layer;
  const ma::AttentionOptions o = cpp(options);
  const ma::MatrixView<const float> q = cpp(query), ctx = cpp(context);
  const ma::MatrixView<float> out = cpp(y);
  const microattn_layer_weights& cw = l.weights;
  ma::LayerWeights w{cw.q_weight, cw.k_weight, cw.v_weight};
  w.q_bias = cw.q_bias;
  w.k_bias = cw.k_bias;
  w.v_bias = cw.v_bias;
  w.out_weight = cw.out_weight;
  w.out_bias = cw.out_bias;
  // A layer from weight matrices (its fp32 weights are null): those, read by the reader init stored.
  const ma::LayerWeightMatrices m = cw.q_weight == nullptr ? cpp(l.weight_matrices) : ma::LayerWeightMatrices{};
  const ma::LayerConfig config = cpp(l.config);
  ma::detail::LayerState state{l.cached, l.position};
  ma::detail::LayerParts parts{{l.max_seq, l.model_dim, l.heads, l.kv_heads, l.head_dim},
                               cw.q_weight != nullptr ? static_cast<const void*>(&w) : &m,
                               static_cast<const ma::detail::LayerWeightReader*>(l.weight_reader),
                               &config,
                               &state,
                               l.cache,
                               l.cache + l.cache_floats / 2,
                               l.scratch};
  // A C caller can point a view into the cache, which a C++ layer keeps private. layer_run checks every view
  // against its scratch, after all its other checks: lending it the offending view's own memory as the scratch
  // makes it report that overlap as ALIASING in the documented order (null pointers, alignment, shapes,
  // capacity, mask, overlaps) and return before it writes anything.
  float* offending = nullptr;
  if (overlaps_cache(l, out))
    offending = out.data;
  else if (overlaps_cache(l, q))
    offending = const_cast<float*>(q.data);
  else if (overlaps_cache(l, ctx))
    offending = const_cast<float*>(ctx.data);
  else if (overlaps_cache(l, o.mask))
    offending = const_cast<float*>(o.mask.data);
  if (offending != nullptr) parts.scratch = offending;
  ma::Status s;
  if (l.cache_runner == nullptr) {
    s = ma::detail::layer_run(parts, op, q, ctx, out, o);
  } else {
    // The C++ layer's layout (detail::cache_layout).
    const ma::detail::LayerCache cache =
        ma::detail::cache_in(cpp(l.cache_format), l.cache, l.max_seq, l.kv_heads, l.head_dim);
    parts.k = nullptr;
    parts.v = nullptr;
    s = static_cast<const CacheRunner*>(l.cache_runner)->run(parts, cache, op, q, ctx, out, o);
  }
  if (offending != nullptr)
    return s == ma::Status::ok ? MICROATTN_ALIASING : c(s);  // never ok: the scratch overlap always fires
  l.cached = state.cached;
  l.position = state.position;
  return c(s);
}

}  // namespace

extern "C" {

// Any int a C caller passes, read as its bytes (raw_enum): a value no enumerator has gets to_string's "unknown".
const char* microattn_status_string(microattn_status s) {
  return ma::to_string(static_cast<ma::Status>(static_cast<int>(ma::capi::raw_enum(s, INT_MAX))));
}

const char* microattn_version(void) {
#define MICROATTN_STR_(x) #x
#define MICROATTN_STR(x) MICROATTN_STR_(x)
  return MICROATTN_STR(MICROATTN_VERSION_MAJOR) "." MICROATTN_STR(MICROATTN_VERSION_MINOR) "." MICROATTN_STR(
      MICROATTN_VERSION_PATCH);
#undef MICROATTN_STR
#undef MICROATTN_STR_
}

const char* microattn_simd_arch(void) { return ma::simd_arch(); }
const char* microattn_matmul_kernel_name(void) { return ma::matmul_kernel_name(); }

microattn_status microattn_matmul(microattn_cview a, microattn_cview b, microattn_view c_, int transpose_b) {
  return c(ma::matmul(cpp(a), cpp(b), cpp(c_), transpose_b != 0));
}

microattn_status microattn_softmax_rows(microattn_view x) { return c(ma::softmax_rows(cpp(x))); }

microattn_status microattn_linear(microattn_cview x, const microattn_weight_matrix* w, const float* bias,
                                  microattn_view y) {
  if (w == nullptr) return MICROATTN_NULL_POINTER;
  return c(ma::linear(cpp(x), cpp(*w), bias, cpp(y)));
}

namespace {
// The C hook behind a C++ Parallel: pool is the microattn_parallel.
bool c_parallel_run(void* pool, ma::ParallelTask task, void* ctx, std::size_t count) noexcept {
  const auto& p = *static_cast<const microattn_parallel*>(pool);
  return p.run(p.pool, task, ctx, count) != 0;
}
}  // namespace

microattn_status microattn_linear_parallel(microattn_cview x, const microattn_weight_matrix* w, const float* bias,
                                           microattn_view y, const microattn_parallel* parallel) {
  if (w == nullptr) return MICROATTN_NULL_POINTER;
  const bool hook = parallel != nullptr && parallel->run != nullptr;
  const ma::Parallel p{hook ? &c_parallel_run : nullptr, const_cast<microattn_parallel*>(parallel),
                       hook ? parallel->workers : 1};
  return c(ma::linear(cpp(x), cpp(*w), bias, cpp(y), p));
}

uint16_t microattn_f16_from_float(float x) { return ma::f16_from_float(x); }
float microattn_float_from_f16(uint16_t h) { return ma::float_from_f16(h); }
microattn_status microattn_quantize_q8(microattn_cview w, size_t group, int8_t* data, float* scales) {
  return c(ma::quantize_q8(cpp(w), group, data, scales));
}

microattn_status microattn_exp_elements(const float* x, float* y, size_t n) { return c(ma::exp_elements(x, y, n)); }

size_t microattn_attention_workspace_floats(size_t d_k, size_t d_v) {
  const std::size_t n = ma::attention_workspace_floats(d_k, d_v);  // SIZE_MAX where the formula passes it
  return n <= max_floats ? n : 0;  // 0, as the layer functions, for a block no object can be
}

microattn_status microattn_attention(microattn_cview q, microattn_cview k, microattn_cview v, microattn_view out,
                                     float* workspace, size_t workspace_floats,
                                     const microattn_attention_options* options) {
  return c(ma::attention(cpp(q), cpp(k), cpp(v), cpp(out), workspace, workspace_floats, cpp(options)));
}

size_t microattn_layer_cache_floats(size_t max_seq, size_t model_dim, size_t heads, size_t kv_heads) {
  return cache_floats(max_seq, model_dim, heads, kv_heads);
}
size_t microattn_layer_scratch_floats(size_t model_dim, size_t heads) { return scratch_floats(model_dim, heads); }
size_t microattn_layer_buffer_floats(size_t max_seq, size_t model_dim, size_t heads, size_t kv_heads) {
  return buffer_floats(max_seq, model_dim, heads, kv_heads);
}

microattn_status microattn_layer_init(microattn_layer* layer, size_t max_seq, size_t model_dim, size_t heads,
                                      size_t kv_heads, const microattn_layer_weights* weights, float* buffer,
                                      size_t buffer_floats) {
  return layer_init(layer, max_seq, model_dim, heads, kv_heads, weights, nullptr, buffer, buffer_floats, buffer, 0,
                    false);
}

microattn_status microattn_layer_init_config(microattn_layer* layer, size_t max_seq, size_t model_dim, size_t heads,
                                             size_t kv_heads, const microattn_layer_weights* weights,
                                             const microattn_layer_config* config, float* buffer,
                                             size_t buffer_floats) {
  return layer_init(layer, max_seq, model_dim, heads, kv_heads, weights, config, buffer, buffer_floats, buffer, 0,
                    false);
}

microattn_status microattn_layer_init_shared(microattn_layer* layer, size_t max_seq, size_t model_dim, size_t heads,
                                             size_t kv_heads, const microattn_layer_weights* weights,
                                             const microattn_layer_config* config, float* cache, size_t cache_floats,
                                             float* scratch, size_t scratch_floats) {
  return layer_init(layer, max_seq, model_dim, heads, kv_heads, weights, config, cache, cache_floats, scratch,
                    scratch_floats, true);
}

size_t microattn_layer_cache_bytes(size_t max_seq, size_t model_dim, size_t heads, size_t kv_heads,
                                   microattn_format cache) {
  // cache_floats is at most PTRDIFF_MAX / 4: its bytes fit in every format.
  return cache_floats(max_seq, model_dim, heads, kv_heads) == 0 || !ma::detail::cache_format_ok(cpp(cache))
             ? 0
             : ma::layer_cache_bytes(max_seq, model_dim, heads, kv_heads, cpp(cache));
}

size_t microattn_layer_cache_scratch_floats(size_t model_dim, size_t heads, microattn_format cache) {
  return scratch_floats(model_dim, heads) == 0 ? 0 : ma::layer_scratch_floats(model_dim, heads, cpp(cache));
}

microattn_status microattn_layer_init_matrices(microattn_layer* layer, size_t max_seq, size_t model_dim, size_t heads,
                                               size_t kv_heads, const microattn_layer_weight_matrices* weights,
                                               const microattn_layer_config* config, microattn_format cache_format,
                                               void* cache, size_t cache_bytes, float* scratch, size_t scratch_floats) {
  return layer_init_matrices(layer, max_seq, model_dim, heads, kv_heads, weights, config, cache_format, cache,
                             cache_bytes, scratch, scratch_floats);
}

microattn_status microattn_layer_forward(microattn_layer* layer, microattn_cview x, microattn_view y,
                                         const microattn_attention_options* options) {
  return layer_call(layer, ma::detail::LayerOp::forward, x, x, y, options);
}

microattn_status microattn_layer_forward_cross(microattn_layer* layer, microattn_cview query, microattn_cview context,
                                               microattn_view y, const microattn_attention_options* options) {
  return layer_call(layer, ma::detail::LayerOp::forward, query, context, y, options);
}

microattn_status microattn_layer_append(microattn_layer* layer, microattn_cview x, microattn_view y,
                                        const microattn_attention_options* options) {
  return layer_call(layer, ma::detail::LayerOp::append, x, x, y, options);
}

microattn_status microattn_layer_attend(microattn_layer* layer, microattn_cview query, microattn_view y,
                                        const microattn_attention_options* options) {
  return layer_call(layer, ma::detail::LayerOp::attend, query, query, y, options);
}

microattn_status microattn_layer_reset(microattn_layer* layer) {
  if (!initialised(layer)) return MICROATTN_NULL_POINTER;
  layer->cached = 0;
  layer->position = 0;
  return MICROATTN_OK;
}

size_t microattn_layer_cached(const microattn_layer* layer) { return layer != nullptr ? layer->cached : 0; }
size_t microattn_layer_position(const microattn_layer* layer) { return layer != nullptr ? layer->position : 0; }

}  // extern "C"
