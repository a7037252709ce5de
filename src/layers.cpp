// The one implementation behind every MultiHeadAttention<...> instantiation: forward, append and attend are
// one function (one frame on the deepest stack path, one copy in flash), switched by the operation.
#include "microattn/layers.hpp"

#include <cmath>

#include "attention_run.hpp"
#include "blocks_rows.hpp"
#include "check.hpp"
#include "kernels/attention.hpp"
#include "kernels/cache.hpp"
#include "kernels/scalar_math.hpp"
#include "linear.hpp"
#include "sin_cos.hpp"

namespace microattn {
namespace detail {
namespace {

// dst (rows × n, stride ldd) = src (rows × in, stride lds) · wᵀ (w: n × in, row-major) + bias.
void linear(const Kernels& kern, const float* src, std::size_t lds, std::size_t rows, std::size_t in, const float* w,
            const float* bias, std::size_t n, float* dst, std::size_t ldd) noexcept {
  const GemmArgs g{src, lds, w, in, true, dst, ldd, rows, n, in};
  kern.gemm(g);
  if (bias != nullptr)
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < n; ++c) dst[r * ldd + c] += bias[c];
}

// y may be exactly `input` (same first element and stride: in place), or disjoint from it.
template <class T, class U>
bool bad_overlap(const MatrixView<T>& y, const MatrixView<U>& input) noexcept {
  const bool identical =
      static_cast<const void*>(y.data) == static_cast<const void*>(input.data) && y.stride == input.stride;
  return !identical && views_overlap(y, input);
}

template <class T>
bool overlaps_array(const MatrixView<T>& y, const float* a, std::size_t floats) noexcept {
  return a != nullptr && ranges_overlap(y.data, extent(y), a, floats);
}

}  // namespace

// ---- weights ----------------------------------------------------------------------------------------------

enum class Projection { q, k, v, out };
constexpr unsigned weight_out = 16;  // with weight_problems' bits: the layer has an out projection

// How a layer's calls read its weights (LayerParts::reader). Through function pointers so that what a firmware
// links follows the constructor it calls: LayerWeights' reader references no f16/q8 code.
struct LayerWeightReader {
  // The weight_problems bits of the weights for a call writing y (weight_aliasing read only for a y of valid shape),
  // plus weight_out when there is an out projection.
  unsigned (*check)(const LayerParts& layer, const MatrixView<float>& y) noexcept;
  // dst (rows × the projection's outputs, stride ldd) = src (rows × model_dim, stride lds)·Wᵀ + bias.
  void (*project)(const LayerParts& layer, Projection p, const float* src, std::size_t lds, std::size_t rows,
                  float* dst, std::size_t ldd) noexcept;
  // What project runs for weight matrices: a reader per format links that format's kernels only.
  LinearChecked linear;
};

namespace {

unsigned check_f32(const LayerParts& layer, const MatrixView<float>& y) noexcept {
  const LayerWeights& w = *static_cast<const LayerWeights*>(layer.weights);
  const std::size_t d = layer.shape.model_dim, kv_dim = layer.shape.kv_heads * layer.shape.head_dim;
  unsigned p = w.out_weight != nullptr ? weight_out : 0;
  if (w.q_weight == nullptr || w.k_weight == nullptr || w.v_weight == nullptr) p |= weight_null;
  if (w.out_bias != nullptr && w.out_weight == nullptr) p |= weight_null;  // a bias needs its projection
  if (!all_aligned(w.q_weight, w.k_weight, w.v_weight, w.q_bias, w.k_bias, w.v_bias, w.out_weight, w.out_bias))
    p |= weight_misaligned;
  // The overlaps whatever y is (integer arithmetic only): the caller reports a y of invalid shape before it looks
  // at weight_aliasing. No shape test here, which would take shape_ok out of line: flash.
  const struct {
    const float* data;
    std::size_t floats;
  } arrays[] = {{w.q_weight, d * d}, {w.k_weight, kv_dim * d}, {w.v_weight, kv_dim * d}, {w.q_bias, d},
                {w.k_bias, kv_dim},  {w.v_bias, kv_dim},       {w.out_weight, d * d},    {w.out_bias, d}};
  for (const auto& a : arrays)  // a loop, not 8 inlined calls: this runs once per call, and flash is scarce
    if (overlaps_array(y, a.data, a.floats)) return p | weight_aliasing;
  return p;
}

void project_f32(const LayerParts& layer, Projection p, const float* src, std::size_t lds, std::size_t rows, float* dst,
                 std::size_t ldd) noexcept {
  const LayerWeights& w = *static_cast<const LayerWeights*>(layer.weights);
  const std::size_t d = layer.shape.model_dim;
  const std::size_t n = p == Projection::k || p == Projection::v ? layer.shape.kv_heads * layer.shape.head_dim : d;
  const float* m = p == Projection::q   ? w.q_weight
                   : p == Projection::k ? w.k_weight
                   : p == Projection::v ? w.v_weight
                                        : w.out_weight;
  const float* b = p == Projection::q   ? w.q_bias
                   : p == Projection::k ? w.k_bias
                   : p == Projection::v ? w.v_bias
                                        : w.out_bias;
  linear(selected_kernels(), src, lds, rows, d, m, b, n, dst, ldd);
}

unsigned check_matrices(const LayerParts& layer, const MatrixView<float>& y) noexcept {
  return layer_matrices_problems(*static_cast<const LayerWeightMatrices*>(layer.weights), layer.shape.model_dim,
                                 layer.shape.kv_heads * layer.shape.head_dim, y);
}

void project_matrices(const LayerParts& layer, Projection p, const float* src, std::size_t lds, std::size_t rows,
                      float* dst, std::size_t ldd) noexcept {
  const LayerWeightMatrices& w = *static_cast<const LayerWeightMatrices*>(layer.weights);
  const WeightMatrix& m = p == Projection::q ? w.q : p == Projection::k ? w.k : p == Projection::v ? w.v : w.out;
  const float* b = p == Projection::q   ? w.q_bias
                   : p == Projection::k ? w.k_bias
                   : p == Projection::v ? w.v_bias
                                        : w.out_bias;
  // q8 quantizes src into the attention workspace, which no projection's input or output uses: the chunk stays
  // off the stack of the deepest path (1 KiB on Cortex-M).
  layer.reader->linear(src, lds, rows, m, b, dst, ldd, layer.scratch + 2 * layer_block_q * layer.shape.model_dim);
}

// The workspace holds q8's chunk for every head size (attention_workspace_floats grows with it).
static_assert(attention_workspace_floats(1, 1) * sizeof(float) >= linear_q8_workspace_bytes,
              "the attention workspace cannot hold linear()'s q8 chunk");

void project(const LayerParts& layer, Projection p, const float* src, std::size_t lds, std::size_t rows, float* dst,
             std::size_t ldd) noexcept {
  layer.reader->project(layer, p, src, lds, rows, dst, ldd);
}

// ---- rotary embeddings -------------------------------------------------------------------------------------

float exp_one(const Kernels& kern, float x) noexcept {
  kern.exp(&x, &x, 1);
  return x;
}

// ln(x) for a finite x > 0: Newton's method on e^y = x (y ← y − 1 + x·e^−y) from the exponent field, with the
// library's own exp (no libm log in the Cortex-M image). Once per call.
float log_positive(const Kernels& kern, float x) noexcept {
  const std::uint32_t bits = float_bits(x);
  const float mantissa = bits_float((bits & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  float y = static_cast<float>(static_cast<int>(bits >> 23) - 127) * 0.693147181f + (mantissa - 1.0f);
  for (int i = 0; i < 6; ++i) y = y - 1.0f + x * exp_one(kern, -y);  // quadratic: |error| 0.31 → 0.05 → 1e−3 → …
  return y;
}

// Rotates every head of rows [0, rows) of m (stride ld, `heads` heads of head_dim) by the positions first,
// first + 1, …: pair p of the rope_dims leading dims of a head turns by position · θ^(−2p/rope_dims).
void rotate(const Kernels& kern, const LayerConfig& config, std::size_t head_dim, std::size_t heads, float* m,
            std::size_t ld, std::size_t rows, std::size_t first) noexcept {
  if (config.rope_theta == 0.0f) return;
  const std::size_t dims = config.rope_dims == 0 ? head_dim : config.rope_dims, half = dims / 2;
  const float ln_theta = log_positive(kern, config.rope_theta);
  for (std::size_t p = 0; p < half; ++p) {
    const float freq = exp_one(kern, -static_cast<float>(2 * p) * ln_theta / static_cast<float>(dims));
    const std::size_t a = config.rope_interleaved ? 2 * p : p, b = config.rope_interleaved ? 2 * p + 1 : p + half;
    for (std::size_t r = 0; r < rows; ++r) {
      float s, c;
      sin_cos(static_cast<float>(first + r) * freq, s, c);
      // Pointers and a count tested at the bottom (heads >= 1): few registers and instructions per head, so
      // the large-angle branch of sin_cos spills nothing out of this loop.
      float* pa = m + r * ld + a;
      float* pb = m + r * ld + b;
      std::size_t h = heads;
      do {
        const float x = *pa, z = *pb;
        *pa = x * c - z * s;
        *pb = fmadd(x, s, z * c);
        pa += head_dim;
        pb += head_dim;
      } while (--h != 0);
    }
  }
}

// Where a call reads its input rows (context rows to store, then query rows, from the same view: forward's
// query and context are one view, append's too) and writes its output rows, a chunk at a time (passed by value:
// the views' source is empty, no frame grows for it):
//   rows(view, r0, n, ld)  input rows [r0, r0 + n), n <= chunk (row stride in ld)
//   out(y, r0, ld)         where the output rows from r0 go (the layer writes a query tile there)
//   done(r0, n)            after the layer has written output rows [r0, r0 + n)
// ViewSource: the call's views (MultiHeadAttention), the whole call at once. BlockSource: a block's rows
// (BlockRows, whose x and y the call's views are), normalized a query tile at a time into its buffer, so that a
// block's scratch holds one tile of rows whatever MaxSeq is.
struct ViewSource {
  static constexpr std::size_t chunk = size_max;
  static const float* rows(const MatrixView<const float>& view, std::size_t r0, std::size_t, std::size_t& ld) noexcept {
    ld = view.stride;
    return view.data + r0 * view.stride;
  }
  static float* out(const MatrixView<float>& y, std::size_t r0, std::size_t& ld) noexcept {
    ld = y.stride;
    return y.data + r0 * y.stride;
  }
  static void done(std::size_t, std::size_t) noexcept {}
};

struct BlockSource {
  const BlockRows* b;
  std::size_t d;
  static constexpr std::size_t chunk = layer_block_q;
  // The rows the buffer holds normalized are not normalized again: a call of at most one tile (decoding) stores its
  // K/V and projects its Q from the same rows.
  const float* rows(const MatrixView<const float>&, std::size_t r0, std::size_t n, std::size_t& ld) const noexcept {
    const float* x = b->x.data + r0 * b->x.stride;
    if (b->norm == RowNorm::none) {
      ld = b->x.stride;
      return x;
    }
    ld = d;
    if (b->held_first == r0 && b->held_rows == n) return b->buffer;
    for (std::size_t r = 0; r < n; ++r) {
      if (b->norm == RowNorm::rms) {
        rms_norm_row(x + r * b->x.stride, d, b->norm_weight, b->eps, b->buffer + r * d);
      } else {
        layer_norm_row(x + r * b->x.stride, d, b->norm_weight, b->norm_bias, b->eps, b->buffer + r * d);
      }
    }
    b->held_first = r0;
    b->held_rows = n;
    return b->buffer;
  }
  float* out(const MatrixView<float>&, std::size_t, std::size_t& ld) const noexcept {
    ld = d;
    b->held_rows = 0;  // the tile's Q is projected: its output overwrites the rows
    return b->buffer;
  }
  // y = x + attention, or layer_norm(x + attention): the rows of x it reads are this tile's, read by nothing after.
  void done(std::size_t r0, std::size_t n) const noexcept {
    for (std::size_t r = 0; r < n; ++r) {
      const float* x = b->x.data + (r0 + r) * b->x.stride;
      float* const y = b->y.data + (r0 + r) * b->y.stride;
      float* const o = b->buffer + r * d;
      if (b->post_norm) {
        for (std::size_t j = 0; j < d; ++j) o[j] += x[j];
        layer_norm_row(o, d, b->post_weight, b->post_bias, b->eps, y);
      } else {
        for (std::size_t j = 0; j < d; ++j) y[j] = x[j] + o[j];
      }
    }
  }
};

// What the checks of a call established, for its attention part.
struct LayerPlan {
  std::size_t n_kv, first_kv;  // keys [0, n_kv) once the call has stored its rows [first_kv, n_kv)
  std::size_t q_position;      // the position of the call's first query row
  std::size_t window;
  bool project_out;  // the layer has an out projection
};

// Rows [first, first + rows) of an f16 / q8 cache from float K and V rows (stride ld).
void store_cache_rows(const LayerCache& c, const LayerShape& shape, std::size_t first, const float* k, const float* v,
                      std::size_t ld, std::size_t rows) noexcept {
  const std::size_t hd = shape.head_dim, kv_dim = shape.kv_heads * hd;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t g = 0; g < shape.kv_heads; ++g) {
      const std::size_t at = (first + r) * kv_dim + g * hd, scale_at = (first + r) * shape.kv_heads + g;
      const float* kr = k + r * ld + g * hd;
      const float* vr = v + r * ld + g * hd;
      if (c.format == Format::f16) {
        f16_store_row(kr, hd, static_cast<std::uint16_t*>(c.k) + at);
        f16_store_row(vr, hd, static_cast<std::uint16_t*>(c.v) + at);
      } else {
        q8_store_row(kr, hd, static_cast<std::int8_t*>(c.k) + at, c.k_scales + scale_at);
        q8_store_row(vr, hd, static_cast<std::int8_t*>(c.v) + at, c.v_scales + scale_at);
      }
    }
}

// K and V of the call's new rows into an f16 / q8 cache: the ring move in the cache's bytes, then the rows
// projected layer_block_q at a time into the scratch's two tiles and rounded into the cache (the scratch is free
// until the attention starts; y is written only after).
template <class Source>
void store_cache_new_rows(const LayerParts& layer, const LayerCache& cache, LayerOp op,
                          const MatrixView<const float>& context, std::size_t n_kv, std::size_t first_kv,
                          std::size_t q_position, Source source) noexcept {
  const LayerShape& shape = layer.shape;
  LayerState& state = *layer.state;
  const std::size_t d = shape.model_dim, hd = shape.head_dim;
  const std::size_t kv_dim = shape.kv_heads * hd;
  const Kernels& kern = selected_kernels();
  if (op == LayerOp::append && first_kv < state.cached) {  // the ring's move, front to back
    const std::size_t es = cache.format == Format::f16 ? 2 : 1;
    const std::size_t from = (state.cached - first_kv) * kv_dim * es;
    unsigned char* const k = static_cast<unsigned char*>(cache.k);
    unsigned char* const v = static_cast<unsigned char*>(cache.v);
    for (std::size_t i = 0; i < first_kv * kv_dim * es; ++i) {
      k[i] = k[from + i];
      v[i] = v[from + i];
    }
    if (cache.format == Format::q8) {
      const std::size_t sfrom = (state.cached - first_kv) * shape.kv_heads;
      for (std::size_t i = 0; i < first_kv * shape.kv_heads; ++i) {
        cache.k_scales[i] = cache.k_scales[sfrom + i];
        cache.v_scales[i] = cache.v_scales[sfrom + i];
      }
    }
  }
  float* const k_tile = layer.scratch;
  float* const v_tile = k_tile + layer_block_q * d;
  const std::size_t rows = n_kv - first_kv;
  for (std::size_t r0 = 0; r0 < rows; r0 += layer_block_q) {
    const std::size_t n = rows - r0 < layer_block_q ? rows - r0 : layer_block_q;
    std::size_t ld;
    const float* src = source.rows(context, r0, n, ld);
    project(layer, Projection::k, src, ld, n, k_tile, kv_dim);
    project(layer, Projection::v, src, ld, n, v_tile, kv_dim);
    rotate(kern, *layer.config, hd, shape.kv_heads, k_tile, kv_dim, n, q_position + r0);
    store_cache_rows(cache, shape, first_kv + r0, k_tile, v_tile, kv_dim, n);
  }
  state.cached = n_kv;
  state.position = q_position + rows;
}

// The checks, in the documented order (null pointers, shapes (the configuration's too), capacity, the mask,
// overlaps), then K and V of the call's new rows. Out of line: its frame is not on the attention path's stack.
// Quantized: an f16 / q8 cache (store_cache_new_rows), with its larger scratch.
// Source: where the rows checked as query and context are read from (ViewSource, BlockSource).
template <bool Quantized, class Source>
__attribute__((noinline)) Status layer_prepare(const LayerParts& layer, LayerOp op,
                                               const MatrixView<const float>& query,
                                               const MatrixView<const float>& context, const MatrixView<float>& y,
                                               const AttentionOptions& options, LayerPlan& plan,
                                               const LayerCache* cache, Source source) noexcept {
  const LayerShape& shape = layer.shape;
  const LayerConfig& config = *layer.config;
  LayerState& state = *layer.state;
  const std::size_t d = shape.model_dim, hd = shape.head_dim;
  const std::size_t kv_dim = shape.kv_heads * hd;
  const unsigned weights = layer.reader->check(layer, y);
  if ((weights & weight_null) != 0) return Status::null_pointer;
  if (query.data == nullptr || context.data == nullptr || y.data == nullptr) return Status::null_pointer;
  if ((weights & weight_misaligned) != 0 || !all_aligned(query, context, y, options.mask)) return Status::misaligned;
  if ((weights & weight_shape) != 0) return Status::invalid_shape;
  if (!shape_ok(query) || !shape_ok(context) || !shape_ok(y)) return Status::invalid_shape;
  if (query.cols != d || context.cols != d || y.cols != d || y.rows != query.rows) return Status::invalid_shape;
  if (!config_ok(config, hd)) return Status::invalid_shape;
  const bool ring = config.window != 0;
  const std::size_t window = options.window != 0 ? options.window : config.window;
  const std::size_t n_q = query.rows;
  std::size_t n_kv = 0, first_kv = 0;
  if (op == LayerOp::forward) {
    if (query.rows > shape.max_seq || context.rows > shape.max_seq) return Status::invalid_shape;
    n_kv = context.rows;
  } else if (op == LayerOp::append) {
    if (n_q > shape.max_seq) return Status::invalid_shape;
    if (ring ? window > config.window || config.window - 1 > shape.max_seq - n_q : state.cached > shape.max_seq - n_q)
      return Status::invalid_shape;
    // A ring keeps the newest W − 1 rows when it has to make room.
    first_kv = ring && state.cached > shape.max_seq - n_q ? config.window - 1 : state.cached;
    if (first_kv > state.cached) first_kv = state.cached;
    n_kv = first_kv + n_q;
  } else {
    if (state.cached == 0) return Status::invalid_shape;
    n_kv = state.cached;
  }
  const MatrixView<const float>& mask = options.mask;
  if (mask.data != nullptr &&
      ((op == LayerOp::append && ring) || !shape_ok(mask) || mask.rows != n_q || mask.cols != n_kv))
    return Status::invalid_shape;
  if (bad_overlap(y, query) || (op == LayerOp::forward && bad_overlap(y, context)) ||
      (mask.data != nullptr && views_overlap(y, mask)))
    return Status::aliasing;
  // y against every array the call reads (weights) or writes (the scratch), and the inputs against the scratch.
  const std::size_t scratch =
      Quantized ? layer_scratch_floats(d, shape.heads, cache->format) : layer_scratch_floats(d, shape.heads);
  if ((weights & weight_aliasing) != 0 || overlaps_array(y, layer.scratch, scratch)) return Status::aliasing;
  if (overlaps_array(query, layer.scratch, scratch) || overlaps_array(context, layer.scratch, scratch) ||
      (mask.data != nullptr && overlaps_array(mask, layer.scratch, scratch)))
    return Status::aliasing;

  const Kernels& kern = selected_kernels();
  plan.project_out = (weights & weight_out) != 0;
  // The position of the call's first query row, and of its first new key row.
  const std::size_t q_position = op == LayerOp::append ? state.position : 0;
  if (Quantized) {
    if (op != LayerOp::attend) store_cache_new_rows(layer, *cache, op, context, n_kv, first_kv, q_position, source);
  } else if (op != LayerOp::attend) {
    // Room in a ring: the newest first_kv rows move to the front (front to back: the copy never overtakes).
    if (op == LayerOp::append && first_kv < state.cached) {
      const std::size_t from = (state.cached - first_kv) * kv_dim;
      for (std::size_t i = 0; i < first_kv * kv_dim; ++i) {
        layer.k[i] = layer.k[from + i];
        layer.v[i] = layer.v[from + i];
      }
    }
    // K and V of the new rows, before anything is written to y (which may be the context itself).
    float* const k_new = layer.k + first_kv * kv_dim;
    float* const v_new = layer.v + first_kv * kv_dim;
    const std::size_t rows = n_kv - first_kv;
    for (std::size_t r0 = 0; r0 < rows; r0 += Source::chunk) {
      const std::size_t n = rows - r0 < Source::chunk ? rows - r0 : Source::chunk;
      std::size_t ld;
      const float* src = source.rows(context, r0, n, ld);
      project(layer, Projection::k, src, ld, n, k_new + r0 * kv_dim, kv_dim);
      project(layer, Projection::v, src, ld, n, v_new + r0 * kv_dim, kv_dim);
    }
    rotate(kern, config, hd, shape.kv_heads, k_new, kv_dim, rows, q_position);
    state.cached = n_kv;
    state.position = q_position + rows;
  }
  plan.n_kv = n_kv;
  plan.first_kv = first_kv;
  plan.q_position = q_position;
  plan.window = window;
  return Status::ok;
}

// One query tile at a time: Q of its rows (projected, rotated), attention per head (or per K/V head and its
// group of query heads, when decoding), the output projection. Its rows of `query` are read (into Q) before
// its rows of y are written, which is what makes y == query safe. Out of line, with only what the tile loop
// needs in its frame: it is on the deepest stack path of every layer call.
// Cache: nullptr for an f32 cache (layer.k, layer.v), else the f16 / q8 cache (attention_run_cache).
template <bool Quantized, class Source>
__attribute__((noinline)) void layer_attend_tiles(const LayerParts& layer, LayerOp op,
                                                  const MatrixView<const float>& query, const MatrixView<float>& y,
                                                  const AttentionOptions& options, const LayerPlan& plan,
                                                  const LayerCache* cache, Source source) noexcept {
  const LayerShape& shape = layer.shape;
  const std::size_t d = shape.model_dim, hd = shape.head_dim;
  const std::size_t kv_dim = shape.kv_heads * hd;
  const std::size_t n_q = query.rows, n_kv = plan.n_kv;
  const MatrixView<const float>& mask = options.mask;
  const Kernels& kern = selected_kernels();
  float* const q_tile = layer.scratch;
  float* const heads_tile = q_tile + layer_block_q * d;
  float* const workspace = heads_tile + layer_block_q * d;

  // The options of the current query tile (advanced by each tile's rows).
  AttentionOptions tile = options;
  tile.window = plan.window;
  if (op == LayerOp::append) {  // bottom-right causal: row t of x is key first_kv + t
    tile.causal = true;
    tile.causal_offset = static_cast<std::ptrdiff_t>(plan.first_kv);
  }
  const std::size_t group = shape.heads / shape.kv_heads;
  const bool project_out = plan.project_out;
  QueryHeads heads{{}, hd, {}, hd, 1};  // query heads sharing a K/V head, offset by hd within a row
  MatrixView<const float> kh{layer.k, n_kv, hd, kv_dim}, vh{layer.v, n_kv, hd, kv_dim};

  for (std::size_t i0 = 0; i0 < n_q; i0 += layer_block_q) {
    const std::size_t bq = n_q - i0 < layer_block_q ? n_q - i0 : layer_block_q;
    std::size_t ldq, ldy;
    const float* const q_rows = source.rows(query, i0, bq, ldq);
    project(layer, Projection::q, q_rows, ldq, bq, q_tile, d);
    float* const y_rows = source.out(y, i0, ldy);
    rotate(kern, *layer.config, hd, shape.heads, q_tile, d, bq, plan.q_position + i0);
    if (mask.data != nullptr) tile.mask = {mask.data + i0 * mask.stride, bq, n_kv, mask.stride};
    // The views of a head (one set, built in place: this frame is on the deepest stack path).
    heads.q = {q_tile, bq, hd, d};
    heads.out = {project_out ? heads_tile : y_rows, bq, hd, project_out ? d : ldy};
    if (Quantized) {
      // Every query tile on the converting row path, the query heads of a K/V head in one pass over it.
      const std::size_t es = cache->format == Format::f16 ? 2 : 1;
      heads.heads = group;
      for (std::size_t g = 0; g < shape.kv_heads; ++g) {
        const KvSource ks{static_cast<const unsigned char*>(cache->k) + g * hd * es,
                          kv_dim,
                          cache->k_scales + g,
                          shape.kv_heads,
                          n_kv,
                          hd};
        const KvSource vs{static_cast<const unsigned char*>(cache->v) + g * hd * es,
                          kv_dim,
                          cache->v_scales + g,
                          shape.kv_heads,
                          n_kv,
                          hd};
        attention_run_cache(kern, selected_cache_kernels(), cache->format, heads, ks, vs, workspace,
                            attention_workspace_floats(hd, hd) + layer_cache_block_floats(hd), tile);
        heads.q.data += group * hd;
        heads.out.data += group * hd;
      }
    } else if (group > 1 && bq <= kern.few_query_max) {
      // Decoding with grouped-query attention: the query heads that share a K/V head, in one pass over it.
      heads.heads = group;
      for (std::size_t g = 0; g < shape.kv_heads; ++g) {
        kh.data = layer.k + g * hd;
        vh.data = layer.v + g * hd;
        attention_run_heads(kern, heads, kh, vh, workspace, tile);
        heads.q.data += group * hd;
        heads.out.data += group * hd;
      }
    } else {
      for (std::size_t h = 0; h < shape.heads; ++h) {
        kh.data = layer.k + h / group * hd;
        vh.data = layer.v + h / group * hd;
        attention_run(kern, heads.q, kh, vh, heads.out, workspace, tile);
        heads.q.data += hd;
        heads.out.data += hd;
      }
    }
    if (project_out) project(layer, Projection::out, heads_tile, d, bq, y_rows, ldy);
    source.done(i0, bq);
    advance_rows(tile, bq);
  }
}

}  // namespace

unsigned layer_matrices_problems(const LayerWeightMatrices& w, std::size_t d, std::size_t kv_dim,
                                 const MatrixView<float>& y) noexcept {
  unsigned p = weight_problems(w.q, w.q_bias, d, d, y) | weight_problems(w.k, w.k_bias, kv_dim, d, y) |
               weight_problems(w.v, w.v_bias, kv_dim, d, y);
  if (w.out.data != nullptr) {
    p |= weight_out | weight_problems(w.out, w.out_bias, d, d, y);
  } else if (w.out_bias != nullptr) {
    p |= weight_null;  // a bias needs its projection
  }
  // weight_problems tests a matrix's overlaps only when it has no other problem: another's problem hides none.
  return p;
}

const LayerWeightReader layer_weights_f32{check_f32, project_f32, nullptr};
const LayerWeightReader layer_weight_matrices{check_matrices, project_matrices, linear_checked_mixed};
const LayerWeightReader layer_weight_matrices_f32{check_matrices, project_matrices, linear_checked<f32_format>};
const LayerWeightReader layer_weight_matrices_f16{check_matrices, project_matrices, linear_checked<f16_format>};
const LayerWeightReader layer_weight_matrices_q8{check_matrices, project_matrices, linear_checked<q8_format>};

bool config_ok(const LayerConfig& c, std::size_t head_dim) noexcept {
  // On θ's bits (one load): ±0 is no rope; [1, FLT_MAX] is one range, negative, NaN and inf lie outside it.
  // θ >= 1: no frequency θ^(−2p/dims) exceeds 1, so every angle (at most the position) is finite. Below 1 they
  // reach 1/θ, where position · frequency overflows for small θ (and subnormal θ defeats log_positive).
  const std::uint32_t bits = float_bits(c.rope_theta);
  if (bits << 1 == 0) return true;
  const std::size_t dims = c.rope_dims == 0 ? head_dim : c.rope_dims;
  return bits - 0x3f800000u <= 0x7f7fffffu - 0x3f800000u && dims % 2 == 0 && dims <= head_dim;
}

Status layer_run(const LayerParts& layer, LayerOp op, MatrixView<const float> query, MatrixView<const float> context,
                 MatrixView<float> y, const AttentionOptions& options) noexcept {
  LayerPlan plan;
  const Status st = layer_prepare<false>(layer, op, query, context, y, options, plan, nullptr, ViewSource{});
  if (st == Status::ok) layer_attend_tiles<false>(layer, op, query, y, options, plan, nullptr, ViewSource{});
  return st;
}

Status layer_run_cache(const LayerParts& layer, const LayerCache& cache, LayerOp op, MatrixView<const float> query,
                       MatrixView<const float> context, MatrixView<float> y, const AttentionOptions& options) noexcept {
  LayerPlan plan;
  const Status st = layer_prepare<true>(layer, op, query, context, y, options, plan, &cache, ViewSource{});
  if (st == Status::ok) layer_attend_tiles<true>(layer, op, query, y, options, plan, &cache, ViewSource{});
  return st;
}

Status layer_run_rows(const LayerParts& layer, LayerOp op, const BlockRows& rows,
                      const AttentionOptions& options) noexcept {
  LayerPlan plan;
  const BlockSource source{&rows, layer.shape.model_dim};
  const Status st = layer_prepare<false>(layer, op, rows.x, rows.x, rows.y, options, plan, nullptr, source);
  if (st == Status::ok) layer_attend_tiles<false>(layer, op, rows.x, rows.y, options, plan, nullptr, source);
  return st;
}

Status layer_run_rows_cache(const LayerParts& layer, const LayerCache& cache, LayerOp op, const BlockRows& rows,
                            const AttentionOptions& options) noexcept {
  LayerPlan plan;
  const BlockSource source{&rows, layer.shape.model_dim};
  const Status st = layer_prepare<true>(layer, op, rows.x, rows.x, rows.y, options, plan, &cache, source);
  if (st == Status::ok) layer_attend_tiles<true>(layer, op, rows.x, rows.y, options, plan, &cache, source);
  return st;
}

}  // namespace detail
}  // namespace microattn
