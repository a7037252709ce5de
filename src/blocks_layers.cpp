// The encoder and decoder blocks (blocks.hpp): the attention as MultiHeadAttention runs it (layer_run, from
// LayerWeightMatrices), linear()'s kernels after the checks made here, and the row functions of blocks.cpp.
#include <cfloat>
#include <cstdint>

#include "blocks_math.hpp"
#include "blocks_rows.hpp"
#include "check.hpp"
#include "linear.hpp"
#include "microattn/blocks.hpp"

namespace microattn {
namespace detail {
namespace {

// y on a vector of n floats (a norm's weight or bias): aliasing.
bool y_on(const MatrixView<float>& y, const float* v, std::size_t n) noexcept {
  return v != nullptr && views_overlap(y, MatrixView<const float>{v, 1, n, n});
}

// The checks shared by both blocks, in the library's order (null pointers, alignment, shapes, overlaps); `p` holds
// every weight matrix's problems, `vec` the ModelDim vectors (norm weights and biases, nullptr allowed).
// scratch: the floats of the block's whole scratch, which neither x nor y may touch.
Status block_check(const BlockParts& b, MatrixView<const float> x, MatrixView<float> y, unsigned p,
                   const float* const* vec, std::size_t n_vec, float eps, bool activation_ok,
                   std::size_t scratch) noexcept {
  const std::size_t d = b.attention.shape.model_dim;
  if (x.data == nullptr || y.data == nullptr || (p & weight_null) != 0) return Status::null_pointer;
  bool aligned_all = all_aligned(x, y) && (p & weight_misaligned) == 0;
  for (std::size_t i = 0; i < n_vec; ++i) aligned_all = aligned_all && aligned(vec[i]);
  if (!aligned_all) return Status::misaligned;
  if (!shape_ok(x) || !shape_ok(y) || x.cols != d || y.cols != d || y.rows != x.rows ||
      x.rows > b.attention.shape.max_seq || (p & weight_shape) != 0)
    return Status::invalid_shape;
  if ((float_bits(eps) & 0x7fffffffu) > 0x7f7fffffu || eps < 0.0f || !activation_ok) return Status::invalid_shape;
  const bool in_place = x.data == y.data && x.stride == y.stride;
  if ((!in_place && views_overlap(y, x)) || (p & weight_aliasing) != 0) return Status::aliasing;
  for (std::size_t i = 0; i < n_vec; ++i)
    if (y_on(y, vec[i], d)) return Status::aliasing;
  if (ranges_overlap(x.data, extent(x), b.attention.scratch, scratch) ||
      ranges_overlap(y.data, extent(y), b.attention.scratch, scratch))
    return Status::aliasing;
  return Status::ok;
}

// q8 weights quantize x into a workspace: the attention's part of the scratch, free while the feed-forward runs,
// and large enough for every layer shape (it grows with the model and head dims).
static_assert(layer_scratch_floats(1, 1) * sizeof(float) >= linear_q8_workspace_bytes,
              "a block's attention scratch cannot hold linear()'s q8 chunk");
float* linear_workspace(const BlockParts& b) noexcept { return b.attention.scratch; }

}  // namespace

Status block_attention_f32(const BlockParts& b, LayerOp op, const BlockRows& rows,
                           const AttentionOptions& options) noexcept {
  return layer_run_rows(b.attention, op, rows, options);
}
Status block_attention_cache(const BlockParts& b, LayerOp op, const BlockRows& rows,
                             const AttentionOptions& options) noexcept {
  return layer_run_rows_cache(b.attention, b.cache, op, rows, options);
}

Status encoder_run(const BlockParts& b, const EncoderLayerWeights& w, const EncoderLayerConfig& c,
                   MatrixView<const float> x, MatrixView<float> y, const AttentionOptions& options) noexcept {
  const LayerShape& s = b.attention.shape;
  const std::size_t d = s.model_dim, ff = b.ffn;
  const unsigned p = layer_matrices_problems(w.self_attn, d, s.kv_heads * s.head_dim, y) |
                     weight_problems(w.linear1, w.linear1_bias, ff, d, y) |
                     weight_problems(w.linear2, w.linear2_bias, d, ff, y);
  const float* const vec[] = {w.norm1_weight, w.norm1_bias, w.norm2_weight, w.norm2_bias};
  const bool act_ok = static_cast<std::uint8_t>(c.activation) <= static_cast<std::uint8_t>(Activation::silu);
  Status st =
      block_check(b, x, y, p, vec, 4, c.layer_norm_eps, act_ok, b.attention_scratch + block_ffn_rows * (d + ff));
  if (st != Status::ok) return st;

  const std::size_t n = x.rows;
  float* const ar = b.attention.scratch + b.attention_scratch;  // block_ffn_rows × d: attention in and out
  float* const f = ar + block_ffn_rows * d;                     // block_ffn_rows × ff
  const float eps = c.layer_norm_eps;
  // Self-attention block, with its residual (and norm1 after it): y is written only once the attention has passed
  // its own checks.
  const BlockRows rows =
      c.norm_first ? BlockRows{x, y, RowNorm::layer, w.norm1_weight, w.norm1_bias, false, nullptr, nullptr, eps, ar}
                   : BlockRows{x, y, RowNorm::none, nullptr, nullptr, true, w.norm1_weight, w.norm1_bias, eps, ar};
  st = layer_run_rows(b.attention, LayerOp::forward, rows, options);
  if (st != Status::ok) return st;
  // Feed-forward block, block_ffn_rows rows at a time, in ar.
  float* const ws = linear_workspace(b);
  for (std::size_t r0 = 0; r0 < n; r0 += block_ffn_rows) {
    const std::size_t m = n - r0 < block_ffn_rows ? n - r0 : block_ffn_rows;
    float* const yr = y.data + r0 * y.stride;
    const float* in = yr;
    std::size_t ld_in = y.stride;
    if (c.norm_first) {
      for (std::size_t r = 0; r < m; ++r)
        layer_norm_row(yr + r * y.stride, d, w.norm2_weight, w.norm2_bias, eps, ar + r * d);
      in = ar;
      ld_in = d;
    }
    b.ffn_linear(in, ld_in, m, w.linear1, w.linear1_bias, f, ff, ws);
    (void)activate_rows(MatrixView<float>{f, m, ff, ff}, c.activation);
    b.ffn_linear(f, ff, m, w.linear2, w.linear2_bias, ar, d, ws);
    for (std::size_t r = 0; r < m; ++r) {
      float* const row = yr + r * y.stride;
      for (std::size_t j = 0; j < d; ++j) ar[r * d + j] += row[j];
      if (c.norm_first) {
        for (std::size_t j = 0; j < d; ++j) row[j] = ar[r * d + j];
      } else {
        layer_norm_row(ar + r * d, d, w.norm2_weight, w.norm2_bias, eps, row);
      }
    }
  }
  return Status::ok;
}

Status decoder_run(const BlockParts& b, LayerOp op, const DecoderLayerWeights& w, float eps, MatrixView<const float> x,
                   MatrixView<float> y, const AttentionOptions& options) noexcept {
  const LayerShape& s = b.attention.shape;
  const std::size_t d = s.model_dim, hidden = b.ffn;
  const LayerWeightMatrices& aw = *static_cast<const LayerWeightMatrices*>(b.attention.weights);
  const unsigned p = layer_matrices_problems(aw, d, s.kv_heads * s.head_dim, y) |
                     weight_problems(w.w1, nullptr, hidden, d, y) | weight_problems(w.w3, nullptr, hidden, d, y) |
                     weight_problems(w.w2, nullptr, d, hidden, y);
  const float* const vec[] = {w.attention_norm, w.ffn_norm};
  Status st = block_check(b, x, y, p, vec, 2, eps, true, b.attention_scratch + block_ffn_rows * (d + 2 * hidden));
  if (st != Status::ok) return st;

  const std::size_t n = x.rows;
  float* const ar = b.attention.scratch + b.attention_scratch;  // block_ffn_rows × d
  float* const gate = ar + block_ffn_rows * d;                  // block_ffn_rows × hidden each
  float* const up = gate + block_ffn_rows * hidden;
  AttentionOptions o = options;
  if (op == LayerOp::forward) o.causal = true;  // a prompt: each token sees itself and those before
  const BlockRows rows{x, y, RowNorm::rms, w.attention_norm, nullptr, false, nullptr, nullptr, eps, ar};
  st = b.attend(b, op, rows, o);
  if (st != Status::ok) return st;
  float* const ws = linear_workspace(b);
  for (std::size_t r0 = 0; r0 < n; r0 += block_ffn_rows) {
    const std::size_t m = n - r0 < block_ffn_rows ? n - r0 : block_ffn_rows;
    float* const yr = y.data + r0 * y.stride;
    for (std::size_t r = 0; r < m; ++r) rms_norm_row(yr + r * y.stride, d, w.ffn_norm, eps, ar + r * d);
    b.ffn_linear(ar, d, m, w.w1, nullptr, gate, hidden, ws);
    b.ffn_linear(ar, d, m, w.w3, nullptr, up, hidden, ws);
    for (std::size_t i = 0; i < m * hidden; ++i) gate[i] = silu_float(gate[i]) * up[i];
    b.ffn_linear(gate, hidden, m, w.w2, nullptr, ar, d, ws);
    for (std::size_t r = 0; r < m; ++r)
      for (std::size_t j = 0; j < d; ++j) yr[r * y.stride + j] += ar[r * d + j];
  }
  return Status::ok;
}

}  // namespace detail
}  // namespace microattn
