// The fused attention driver, shared by attention() and the layers (which call it per head and query
// tile with arguments they already validated).
#pragma once

#include <cstddef>
#include <cstdint>

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

constexpr std::ptrdiff_t visibility_saturation = PTRDIFF_MAX / 2;

inline std::ptrdiff_t saturate(std::ptrdiff_t a) noexcept {
  return a < -visibility_saturation ? -visibility_saturation : (a > visibility_saturation ? visibility_saturation : a);
}

// a + w and a − w, saturated to [−visibility_saturation, visibility_saturation], without overflow.
inline std::ptrdiff_t saturated_plus(std::ptrdiff_t a, std::size_t w) noexcept {
  constexpr std::size_t big = static_cast<std::size_t>(PTRDIFF_MAX);
  if (w <= big)
    return a > PTRDIFF_MAX - static_cast<std::ptrdiff_t>(w) ? visibility_saturation
                                                            : saturate(a + static_cast<std::ptrdiff_t>(w));
  if (a >= 0) return visibility_saturation;
  const std::size_t r = w - static_cast<std::size_t>(-(a + 1)) - 1;  // a + w >= 0 here
  return r > static_cast<std::size_t>(visibility_saturation) ? visibility_saturation : static_cast<std::ptrdiff_t>(r);
}
inline std::ptrdiff_t saturated_minus(std::ptrdiff_t a, std::size_t w) noexcept {
  constexpr std::size_t big = static_cast<std::size_t>(PTRDIFF_MAX);
  if (w <= big)
    return a < PTRDIFF_MIN + static_cast<std::ptrdiff_t>(w) ? -visibility_saturation
                                                            : saturate(a - static_cast<std::ptrdiff_t>(w));
  if (a < 0) return -visibility_saturation;
  const std::size_t r = w - static_cast<std::size_t>(a);  // a − w < 0 here
  return r > static_cast<std::size_t>(visibility_saturation) ? -visibility_saturation : -static_cast<std::ptrdiff_t>(r);
}

// i + t clamped to [0, n_kv]; |t| <= visibility_saturation and i <= PTRDIFF_MAX / 4, so nothing overflows.
inline std::size_t key_bound(std::size_t i, std::ptrdiff_t t, std::size_t n_kv) noexcept {
  const std::ptrdiff_t j = static_cast<std::ptrdiff_t>(i) + t;
  if (j <= 0) return 0;
  return static_cast<std::size_t>(j) < n_kv ? static_cast<std::size_t>(j) : n_kv;
}

inline KeyRange visible_keys(std::size_t i, std::size_t n_kv, const AttentionOptions& options) noexcept {
  const std::ptrdiff_t off = options.causal_offset;
  const std::size_t w = options.window;
  // Keys j with t_lo <= j − i < t_hi.
  const std::ptrdiff_t t_lo = w == 0 ? -visibility_saturation : saturated_plus(saturated_minus(off, w), 1);
  const std::ptrdiff_t t_hi =
      options.causal ? saturated_plus(off, 1) : (w == 0 ? visibility_saturation : saturated_plus(off, w));
  return {key_bound(i, t_lo, n_kv), key_bound(i, t_hi, n_kv)};
}

// The options for the queries from row `first` on of a call made with `options` (the layers run attention one
// query tile at a time): the same visibility, exactly, for any offset and window.
inline AttentionOptions options_from_row(const AttentionOptions& options, std::size_t first) noexcept {
  AttentionOptions o = options;
  if (options.causal_offset <= PTRDIFF_MAX - static_cast<std::ptrdiff_t>(first)) {
    o.causal_offset = options.causal_offset + static_cast<std::ptrdiff_t>(first);
  } else if (options.window != 0) {
    // The upper bound is beyond every key either way; the lower bound off + first − W + 1 is kept by
    // shrinking the window instead (W <= first: the lower bound is beyond every key too).
    o.window = options.window > first ? options.window - first : 1;
  }
  return o;
}

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
