// The fused attention driver, shared by attention() and the layers (which call it per head and query
// tile with arguments they already validated).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention.hpp"
#include "microattn/attention.hpp"
#include "microattn/weights.hpp"

namespace microattn {
namespace detail {

// The causal offset clamped to [−n_q, n_kv]: beyond, every key is hidden (or visible) alike, and a tile's
// offset (this plus its first row) then cannot overflow.
inline std::ptrdiff_t clamp_causal_offset(std::ptrdiff_t off, std::size_t n_q, std::size_t n_kv) noexcept {
  const std::ptrdiff_t lo = -static_cast<std::ptrdiff_t>(n_q), hi = static_cast<std::ptrdiff_t>(n_kv);
  return off < lo ? lo : (off > hi ? hi : off);
}

// ---- which keys a query sees (the one visibility rule of every attention path) ----------------------------
// Query i sees keys [lo, hi) (none when lo >= hi), from options.causal, causal_offset and window (W):
//   causal:            i + causal_offset − W < j <= i + causal_offset   (W = 0: no lower bound)
//   not causal, W > 0: |j − (i + causal_offset)| < W                    (local attention)
//   not causal, W = 0: every key.
// Exact for any offset and window: the bounds of j − i are computed saturated to ±visibility_saturation,
// beyond which (rows are at most PTRDIFF_MAX / 4, as shape_ok guarantees) every key is hidden or visible alike.
struct KeyRange {
  std::size_t lo, hi;
};
// The same rule relative to the query: keys j with lo <= j − i < hi, saturated to ±visibility_saturation, beyond
// which (rows are at most PTRDIFF_MAX / 4, as shape_ok guarantees) every key is hidden or visible alike.
struct KeyBand {
  std::ptrdiff_t lo, hi;
};

constexpr std::ptrdiff_t visibility_saturation = PTRDIFF_MAX / 2;

// The band of `options`, computed without overflow for any offset and window (attention.cpp).
KeyBand visible_band(const AttentionOptions& options) noexcept;

// i + t clamped to [0, n_kv]; |t| <= visibility_saturation and i <= PTRDIFF_MAX / 4, so nothing overflows.
inline std::size_t key_bound(std::size_t i, std::ptrdiff_t t, std::size_t n_kv) noexcept {
  const std::ptrdiff_t j = static_cast<std::ptrdiff_t>(i) + t;
  if (j <= 0) return 0;
  return static_cast<std::size_t>(j) < n_kv ? static_cast<std::size_t>(j) : n_kv;
}

inline KeyRange visible_keys(std::size_t i, std::size_t n_kv, const KeyBand& band) noexcept {
  return {key_bound(i, band.lo, n_kv), key_bound(i, band.hi, n_kv)};
}
inline KeyRange visible_keys(std::size_t i, std::size_t n_kv, const AttentionOptions& options) noexcept {
  return visible_keys(i, n_kv, visible_band(options));
}

// Turns the options of a call into those of its queries from row `rows` on (the layers run attention one query
// tile at a time): the same visibility, exactly, for any offset and window. Applied repeatedly, it adds up.
inline void advance_rows(AttentionOptions& options, std::size_t rows) noexcept {
  if (options.causal_offset <= PTRDIFF_MAX - static_cast<std::ptrdiff_t>(rows)) {
    options.causal_offset += static_cast<std::ptrdiff_t>(rows);
  } else if (options.window != 0) {
    // The upper bound is beyond every key either way; the lower bound off + rows − W + 1 is kept by shrinking
    // the window instead (W <= rows: the lower bound is beyond every key too).
    options.window = options.window > rows ? options.window - rows : 1;
  }
}

// Several query heads that share one K/V head (grouped-query attention): head h's queries are the n_q × d_k view
// q shifted by h·q_head_offset floats, its output the n_q × d_v view out shifted by h·out_head_offset. Query i of
// every head has position i (causal_offset, window and mask row i apply alike).
struct QueryHeads {
  MatrixView<const float> q;
  std::size_t q_head_offset;
  MatrixView<float> out;
  std::size_t out_head_offset;
  std::size_t heads;
};

// The few-query path: all heads·n_q query rows against one K/V, attention_block_q rows per pass over K and V
// (one pass for a decoding step of a GQA group). Each query is a row (head dim in the lanes: dot products with
// the keys, AXPYs over the rows of V), so one query costs one query, not a vector of lanes. Same contract as
// attention_run (workspace: attention_workspace_floats(d_k, d_v)), valid for any n_q; attention_run sends
// n_q <= kernels.few_query_max here.
void attention_run_heads(const Kernels& kernels, const QueryHeads& queries, const MatrixView<const float>& k,
                         const MatrixView<const float>& v, float* workspace, const AttentionOptions& options) noexcept;

// The tile path alone (a tile of queries in the vector lanes), whatever n_q: attention_run takes it for
// n_q > kernels.few_query_max; the tests also call it directly, so both paths face the same cases.
void attention_run_tiles(const Kernels& kernels, const MatrixView<const float>& q, const MatrixView<const float>& k,
                         const MatrixView<const float>& v, const MatrixView<float>& out, float* workspace,
                         const AttentionOptions& options) noexcept;

// K or V stored in f16 or q8 (an f16 / q8 layer cache): rows × cols elements, element (j, c) at
// data[j·stride + c] (binary16 bits or int8), q8 row j scaled by scales[j·scale_stride].
struct KvSource {
  const void* data;
  std::size_t stride;
  const float* scales;
  std::size_t scale_stride;
  std::size_t rows, cols;
};
struct CacheKernels;
// attention_run_heads over K and V in `format` (f16 or q8), for any number of queries: each key block is
// converted to float (cache kernels, exactly) and run on the row kernels, rows the fused loop may get wrong go to
// the exact path (one converted row at a time): the result is that of attention over the stored values, with its
// bound. workspace: workspace_floats >= attention_workspace_floats(d_k, d_v) + layer_cache_block_floats(max(d_k,
// d_v)) floats; the key blocks are as long as they fit beside the scores.
void attention_run_cache(const Kernels& kernels, const CacheKernels& cache_kernels, Format format,
                         const QueryHeads& queries, const KvSource& k, const KvSource& v, float* workspace,
                         std::size_t workspace_floats, const AttentionOptions& options) noexcept;

// Arguments valid and non-overlapping; workspace holds attention_workspace_floats(d_k, d_v) floats. Views by
// reference: by value, the layers would build each one twice (a local, then the outgoing argument) in the frame
// that sits on their deepest stack path.
void attention_run(const Kernels& kernels, const MatrixView<const float>& q, const MatrixView<const float>& k,
                   const MatrixView<const float>& v, const MatrixView<float>& out, float* workspace,
                   const AttentionOptions& options) noexcept;

// Argument checks of attention(), in its documented order: null pointers, alignment (of the views, the mask
// and the workspace when given) and shapes (attention_check_shapes), then — after the workspace size, which
// attention() checks — out overlapping an input.
Status attention_check_shapes(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                              MatrixView<float> out, const AttentionOptions& options,
                              const float* workspace = nullptr) noexcept;
bool attention_out_overlaps(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                            MatrixView<float> out, const AttentionOptions& options) noexcept;
// Both (shapes, then out overlaps), for callers that bring no workspace of their own.
Status attention_check(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                       MatrixView<float> out, const AttentionOptions& options) noexcept;

}  // namespace detail
}  // namespace microattn
