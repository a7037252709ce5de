// The C API (microattn.h): thin wrappers over the C++ entry points, plus the layer over caller memory.
#include "microattn/microattn.h"

#include <cstdint>

#include "check.hpp"
#include "microattn/microattn.hpp"

namespace ma = microattn;

// The C enum mirrors the C++ one value for value.
static_assert(static_cast<int>(ma::Status::ok) == MICROATTN_OK, "status values differ");
static_assert(static_cast<int>(ma::Status::null_pointer) == MICROATTN_NULL_POINTER, "status values differ");
static_assert(static_cast<int>(ma::Status::invalid_shape) == MICROATTN_INVALID_SHAPE, "status values differ");
static_assert(static_cast<int>(ma::Status::workspace_too_small) == MICROATTN_WORKSPACE_TOO_SMALL,
              "status values differ");
static_assert(static_cast<int>(ma::Status::aliasing) == MICROATTN_ALIASING, "status values differ");
// Status::misaligned is appended after aliasing.
static_assert(static_cast<int>(ma::Status::aliasing) + 1 == MICROATTN_MISALIGNED, "status values differ");

// The C macros repeat config.hpp's figures for C; whichever header came first defined them, so compare values.
static_assert(MICROATTN_ATTENTION_BLOCK_Q == ma::attention_block_q, "C and C++ attention tiles differ");
static_assert(MICROATTN_ATTENTION_BLOCK_KV == ma::attention_block_kv, "C and C++ attention tiles differ");
static_assert(MICROATTN_ATTENTION_MAX_HEAD_DIM == ma::attention_max_head_dim, "C and C++ head limits differ");
static_assert(MICROATTN_EXP_MAX_ULP == ma::exp_max_ulp, "C and C++ exp bounds differ");
static_assert(MICROATTN_ATTENTION_WORKSPACE_FLOATS(64, 48) == ma::attention_workspace_floats(64, 48),
              "C and C++ workspace formulas differ");
static_assert(MICROATTN_LAYER_BUFFER_FLOATS(64, 64, 4, 2) == ma::detail::layer_buffer_floats(64, 64, 4, 2),
              "C and C++ layer buffer formulas differ");

namespace {

ma::MatrixView<const float> cpp(microattn_cview v) noexcept { return {v.data, v.rows, v.cols, v.stride}; }
ma::MatrixView<float> cpp(microattn_view v) noexcept { return {v.data, v.rows, v.cols, v.stride}; }
microattn_status c(ma::Status s) noexcept { return static_cast<microattn_status>(static_cast<int>(s)); }

ma::AttentionOptions cpp(const microattn_attention_options* o) noexcept {
  ma::AttentionOptions r;
  if (o == nullptr) return r;
  r.scale = o->scale;
  r.causal = o->causal != 0;
  r.causal_offset = o->causal_offset;
  if (o->mask.data != nullptr) r.mask = cpp(o->mask);
  r.window = o->window;
  return r;
}

// a·b + c without wrapping; false on overflow.
bool mul_add(std::size_t a, std::size_t b, std::size_t c, std::size_t& out) noexcept {
  if (b != 0 && a > (SIZE_MAX - c) / b) return false;
  out = a * b + c;
  return true;
}

// microattn_layer_buffer_floats with overflow checks; 0 for an invalid shape.
std::size_t layer_floats(std::size_t max_seq, std::size_t model_dim, std::size_t heads, std::size_t kv_heads) noexcept {
  if (max_seq == 0 || model_dim == 0 || heads == 0 || kv_heads == 0) return 0;
  if (model_dim % heads != 0 || heads % kv_heads != 0) return 0;
  const std::size_t hd = model_dim / heads;
  if (hd > ma::attention_max_head_dim) return 0;
  std::size_t kv = 0, tiles = 0, total = 0;
  if (!mul_add(max_seq, kv_heads * hd, 0, kv) || !mul_add(kv, 2, 0, kv)) return 0;
  if (!mul_add(ma::detail::layer_block_q, model_dim, 0, tiles) || !mul_add(tiles, 2, 0, tiles)) return 0;
  if (!mul_add(kv, 1, tiles, total)) return 0;
  const std::size_t ws = ma::attention_workspace_floats(hd, hd);  // hd is bounded: no overflow
  if (!mul_add(total, 1, ws, total)) return 0;
  return total;
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

// The argument checks of detail::layer_forward up to (not including) its overlap checks, in its order, so that
// an overlap with the layer's buffer (which the C++ layer, owning its buffer, never sees) is reported in the
// documented place: after null pointers and shapes.
ma::Status layer_arguments(const microattn_layer& l, const ma::MatrixView<const float>& q,
                           const ma::MatrixView<const float>& ctx, const ma::MatrixView<float>& y,
                           const ma::AttentionOptions& o) noexcept {
  using ma::detail::shape_ok;
  if (q.data == nullptr || ctx.data == nullptr || y.data == nullptr) return ma::Status::null_pointer;
  if (!shape_ok(q) || !shape_ok(ctx) || !shape_ok(y)) return ma::Status::invalid_shape;
  const std::size_t d = l.model_dim;
  if (q.cols != d || ctx.cols != d || y.cols != d || y.rows != q.rows) return ma::Status::invalid_shape;
  if (q.rows > l.max_seq || ctx.rows > l.max_seq) return ma::Status::invalid_shape;
  if (o.mask.data != nullptr && (!shape_ok(o.mask) || o.mask.rows != q.rows || o.mask.cols != ctx.rows))
    return ma::Status::invalid_shape;
  return ma::Status::ok;
}

bool overlaps_buffer(const microattn_layer& l, const ma::MatrixView<const float>& v) noexcept {
  return v.data != nullptr && ma::detail::ranges_overlap(l.buffer, l.buffer_floats, v.data, ma::detail::extent(v));
}

microattn_status layer_forward(microattn_layer* layer, microattn_cview query, microattn_cview context, microattn_view y,
                               const microattn_attention_options* options) noexcept {
  if (layer == nullptr || layer->buffer == nullptr || layer->weights.q_weight == nullptr) return MICROATTN_NULL_POINTER;
  const microattn_layer& l = *layer;
  const ma::AttentionOptions o = cpp(options);
  const ma::MatrixView<const float> q = cpp(query), ctx = cpp(context);
  const ma::MatrixView<float> out = cpp(y);
  const ma::Status args = layer_arguments(l, q, ctx, out, o);
  if (args != ma::Status::ok) return c(args);
  if (overlaps_buffer(l, q) || overlaps_buffer(l, ctx) || overlaps_buffer(l, out) || overlaps_buffer(l, o.mask))
    return MICROATTN_ALIASING;

  const ma::detail::LayerShape shape{l.max_seq, l.model_dim, l.heads, l.kv_heads, l.head_dim};
  const microattn_layer_weights& cw = l.weights;
  ma::LayerWeights w{cw.q_weight, cw.k_weight, cw.v_weight};
  w.q_bias = cw.q_bias;
  w.k_bias = cw.k_bias;
  w.v_bias = cw.v_bias;
  w.out_weight = cw.out_weight;
  w.out_bias = cw.out_bias;
  // The same partition of the buffer as MultiHeadAttention<...>::buffers().
  const std::size_t kv_floats = l.max_seq * l.kv_heads * l.head_dim;
  const std::size_t tile_floats = ma::detail::layer_block_q * l.model_dim;
  float* b = l.buffer;
  const ma::detail::LayerBuffers buffers{b, b + kv_floats, b + 2 * kv_floats, b + 2 * kv_floats + tile_floats,
                                         b + 2 * kv_floats + 2 * tile_floats};
  return c(ma::detail::layer_forward(shape, w, buffers, q, ctx, out, o));
}

}  // namespace

extern "C" {

const char* microattn_status_string(microattn_status s) {
  if (s == MICROATTN_MISALIGNED) return "misaligned";  // also before the C++ Status names it
  return ma::to_string(static_cast<ma::Status>(s));
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

microattn_status microattn_exp_elements(const float* x, float* y, size_t n) { return c(ma::exp_elements(x, y, n)); }

size_t microattn_attention_workspace_floats(size_t d_k, size_t d_v) { return ma::attention_workspace_floats(d_k, d_v); }

microattn_status microattn_attention(microattn_cview q, microattn_cview k, microattn_cview v, microattn_view out,
                                     float* workspace, size_t workspace_floats,
                                     const microattn_attention_options* options) {
  return c(ma::attention(cpp(q), cpp(k), cpp(v), cpp(out), workspace, workspace_floats, cpp(options)));
}

size_t microattn_layer_buffer_floats(size_t max_seq, size_t model_dim, size_t heads, size_t kv_heads) {
  return layer_floats(max_seq, model_dim, heads, kv_heads);
}

microattn_status microattn_layer_init(microattn_layer* layer, size_t max_seq, size_t model_dim, size_t heads,
                                      size_t kv_heads, const microattn_layer_weights* weights, float* buffer,
                                      size_t buffer_floats) {
  if (layer == nullptr || weights == nullptr || buffer == nullptr) return MICROATTN_NULL_POINTER;
  if (weights->q_weight == nullptr || weights->k_weight == nullptr || weights->v_weight == nullptr)
    return MICROATTN_NULL_POINTER;
  const std::size_t needed = layer_floats(max_seq, model_dim, heads, kv_heads);
  if (needed == 0) return MICROATTN_INVALID_SHAPE;
  if (buffer_floats < needed) return MICROATTN_WORKSPACE_TOO_SMALL;
  if (reinterpret_cast<std::uintptr_t>(buffer) % alignof(float) != 0) return MICROATTN_MISALIGNED;
  const std::size_t hd = model_dim / heads;
  if (overlaps_weights(buffer, needed, *weights, model_dim, kv_heads * hd)) return MICROATTN_ALIASING;
  microattn_layer l{};
  l.max_seq = max_seq;
  l.model_dim = model_dim;
  l.heads = heads;
  l.kv_heads = kv_heads;
  l.head_dim = hd;
  l.weights = *weights;
  l.buffer = buffer;
  l.buffer_floats = needed;
  *layer = l;
  return MICROATTN_OK;
}

microattn_status microattn_layer_forward(microattn_layer* layer, microattn_cview x, microattn_view y,
                                         const microattn_attention_options* options) {
  return layer_forward(layer, x, x, y, options);
}

microattn_status microattn_layer_forward_cross(microattn_layer* layer, microattn_cview query, microattn_cview context,
                                               microattn_view y, const microattn_attention_options* options) {
  return layer_forward(layer, query, context, y, options);
}

}  // extern "C"
