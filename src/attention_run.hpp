// The fused attention driver, shared by attention() and the layers (which call it per head and query
// tile with arguments they already validated).
#pragma once

#include <cstddef>

#include "kernels/kernels.hpp"
#include "microattn/attention.hpp"

namespace microattn {
namespace detail {

// The causal offset clamped to [−n_q, n_kv]: beyond, every key is hidden (or visible) alike, and a tile's
// offset (this plus its first row) then cannot overflow.
inline std::ptrdiff_t clamp_causal_offset(std::ptrdiff_t off, std::size_t n_q, std::size_t n_kv) noexcept {
  const std::ptrdiff_t lo = -static_cast<std::ptrdiff_t>(n_q), hi = static_cast<std::ptrdiff_t>(n_kv);
  return off < lo ? lo : (off > hi ? hi : off);
}

// The keys [lo, hi) that query i sees (causal rule, causal_offset and window of `options`; the mask aside), clamped
// to [0, n_kv]; lo == hi when it sees none. Exact for every offset and window: the bounds i + offset − window + 1,
// i + offset + 1 and i + offset + window are formed in an integer wide enough that nothing overflows.
struct KeyRange {
  std::size_t lo, hi;
};
inline KeyRange visible_keys(std::size_t i, std::size_t n_kv, const AttentionOptions& options) noexcept {
  if (!options.causal && options.window == 0) return {0, n_kv};
#if defined(__SIZEOF_INT128__)
  __extension__ typedef __int128 wide;  // size_t and ptrdiff_t are 64 bits: their sums need 66
#else
  using wide = long long;  // 32-bit targets: 64 bits hold every sum of three 32-bit terms
  static_assert(sizeof(std::size_t) <= 4 && sizeof(long long) >= 8, "visible_keys needs a wider integer here");
#endif
  const wide centre = static_cast<wide>(i) + static_cast<wide>(options.causal_offset);
  const wide window = static_cast<wide>(options.window);
  wide lo = 0, hi = static_cast<wide>(n_kv);
  if (options.causal) {
    hi = centre + 1;
    if (options.window != 0) lo = centre - window + 1;
  } else {
    lo = centre - window + 1;
    hi = centre + window;
  }
  const wide n = static_cast<wide>(n_kv);
  lo = lo < 0 ? 0 : (lo > n ? n : lo);
  hi = hi < lo ? lo : (hi > n ? n : hi);
  return {static_cast<std::size_t>(lo), static_cast<std::size_t>(hi)};
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

// Arguments valid and non-overlapping; workspace holds attention_workspace_floats(d_k, d_v) floats.
void attention_run(const Kernels& kernels, MatrixView<const float> q, MatrixView<const float> k,
                   MatrixView<const float> v, MatrixView<float> out, float* workspace,
                   const AttentionOptions& options) noexcept;

// Argument checks of attention(), in its documented order: null pointers and shapes (attention_check_shapes),
// then — after the workspace size, which attention() checks — out overlapping an input.
Status attention_check_shapes(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                              MatrixView<float> out, const AttentionOptions& options) noexcept;
bool attention_out_overlaps(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                            MatrixView<float> out, const AttentionOptions& options) noexcept;
// Both (shapes, then out overlaps), for callers that bring no workspace of their own.
Status attention_check(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                       MatrixView<float> out, const AttentionOptions& options) noexcept;

}  // namespace detail
}  // namespace microattn
