// The one implementation behind every MultiHeadAttention<...> instantiation.
#include "microattn/layers.hpp"

#include "attention_run.hpp"
#include "check.hpp"
#include "kernels/kernels.hpp"

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

bool overlaps_array(const MatrixView<float>& y, const float* a, std::size_t floats) noexcept {
  return a != nullptr && ranges_overlap(y.data, extent(y), a, floats);
}

}  // namespace

Status layer_forward(const LayerShape& shape, const LayerWeights& w, const LayerBuffers& buf,
                     MatrixView<const float> query, MatrixView<const float> context, MatrixView<float> y,
                     const AttentionOptions& options) noexcept {
  const std::size_t d = shape.model_dim, hd = shape.head_dim;
  const std::size_t kv_dim = shape.kv_heads * hd;
  if (w.q_weight == nullptr || w.k_weight == nullptr || w.v_weight == nullptr) return Status::null_pointer;
  if (query.data == nullptr || context.data == nullptr || y.data == nullptr) return Status::null_pointer;
  if (w.out_bias != nullptr && w.out_weight == nullptr) return Status::null_pointer;  // a bias needs its projection
  if (!all_aligned(w.q_weight, w.k_weight, w.v_weight, w.q_bias, w.k_bias, w.v_bias, w.out_weight, w.out_bias, query,
                   context, y, options.mask))
    return Status::misaligned;
  if (!shape_ok(query) || !shape_ok(context) || !shape_ok(y)) return Status::invalid_shape;
  if (query.cols != d || context.cols != d || y.cols != d || y.rows != query.rows) return Status::invalid_shape;
  if (query.rows > shape.max_seq || context.rows > shape.max_seq) return Status::invalid_shape;
  const std::size_t n_q = query.rows, n_kv = context.rows;
  const MatrixView<const float>& mask = options.mask;
  if (mask.data != nullptr && (!shape_ok(mask) || mask.rows != n_q || mask.cols != n_kv)) return Status::invalid_shape;
  if (bad_overlap(y, query) || bad_overlap(y, context) || (mask.data != nullptr && views_overlap(y, mask)) ||
      overlaps_array(y, w.q_weight, d * d) || overlaps_array(y, w.k_weight, kv_dim * d) ||
      overlaps_array(y, w.v_weight, kv_dim * d) || overlaps_array(y, w.q_bias, d) ||
      overlaps_array(y, w.k_bias, kv_dim) || overlaps_array(y, w.v_bias, kv_dim) ||
      overlaps_array(y, w.out_weight, d * d) || overlaps_array(y, w.out_bias, d))
    return Status::aliasing;

  const Kernels& kern = selected_kernels();
  // K and V of every context row, before anything is written to y (which may be the context itself).
  linear(kern, context.data, context.stride, n_kv, d, w.k_weight, w.k_bias, kv_dim, buf.k, kv_dim);
  linear(kern, context.data, context.stride, n_kv, d, w.v_weight, w.v_bias, kv_dim, buf.v, kv_dim);

  // The tile's causal offset is the caller's plus i0; clamp first so the sum cannot overflow.
  const std::ptrdiff_t off = clamp_causal_offset(options.causal_offset, n_q, n_kv);
  const std::size_t group = shape.heads / shape.kv_heads;

  // One query tile at a time: its rows of `query` are read (into Q) before its rows of y are written, which
  // is what makes y == query safe.
  for (std::size_t i0 = 0; i0 < n_q; i0 += layer_block_q) {
    const std::size_t bq = n_q - i0 < layer_block_q ? n_q - i0 : layer_block_q;
    linear(kern, query.data + i0 * query.stride, query.stride, bq, d, w.q_weight, w.q_bias, d, buf.q_tile, d);
    AttentionOptions tile = options;
    tile.causal_offset = off + static_cast<std::ptrdiff_t>(i0);
    if (mask.data != nullptr) tile.mask = {mask.data + i0 * mask.stride, bq, n_kv, mask.stride};
    const bool project = w.out_weight != nullptr;
    float* heads = project ? buf.heads_tile : y.data + i0 * y.stride;
    const std::size_t ldh = project ? d : y.stride;
    for (std::size_t h = 0; h < shape.heads; ++h) {
      const std::size_t g = h / group;
      attention_run(kern, {buf.q_tile + h * hd, bq, hd, d}, {buf.k + g * hd, n_kv, hd, kv_dim},
                    {buf.v + g * hd, n_kv, hd, kv_dim}, {heads + h * hd, bq, hd, ldh}, buf.workspace, tile);
    }
    if (project) linear(kern, buf.heads_tile, d, bq, d, w.out_weight, w.out_bias, d, y.data + i0 * y.stride, y.stride);
  }
  return Status::ok;
}

}  // namespace detail
}  // namespace microattn
