// The tile path: attention_block_q queries in the vector lanes, key blocks of attention_block_kv with an online
// softmax on the attn_* kernels, the causal/window staircase, and the checks that send rows to the exact path.
#pragma once

#include "attention/exact.hpp"

namespace microattn {
namespace detail {

namespace {

// P·V of one key block when some rows of V hold NaN or ±inf. A hidden key has probability exactly 0, and
// 0·NaN would leak its NaN into queries that never see it: such rows are applied lane by lane, skipping the
// zeros, and the finite runs between them go through the kernel as usual.
void pv_with_nonfinite_rows(const Kernels& kern, float* p, std::size_t bk, const float* v, std::size_t ldv,
                            std::size_t d_v, float* alpha, float* ot, std::size_t nq) noexcept {
  constexpr std::size_t br = attention_block_q;
  bool alpha_pending = true;  // ot still needs its rescale by alpha (the kernel applies it on its first call)
  for (std::size_t j = 0; j < bk;) {
    if (row_finite(v + j * ldv, d_v)) {
      std::size_t run = 1;
      while (j + run < bk && row_finite(v + (j + run) * ldv, d_v)) ++run;
      kern.attn_pv(p + j * br, run, v + j * ldv, ldv, d_v, alpha, ot, nq);
      for (std::size_t i = 0; i < nq; ++i) alpha[i] = 1.0f;
      alpha_pending = false;
      j += run;
      continue;
    }
    if (alpha_pending) {
      for (std::size_t c = 0; c < d_v; ++c)
        for (std::size_t i = 0; i < nq; ++i) ot[c * br + i] *= alpha[i];
      for (std::size_t i = 0; i < nq; ++i) alpha[i] = 1.0f;
      alpha_pending = false;
    }
    const float* vj = v + j * ldv;
    for (std::size_t i = 0; i < nq; ++i) {
      const float pij = p[j * br + i];
      if (pij != 0.0f)  // a NaN probability (the query saw a NaN score) still contributes, as it must
        for (std::size_t c = 0; c < d_v; ++c) ot[c * br + i] += pij * vj[c];
    }
    ++j;
  }
}

// Lanes [a, a + nl) of the tile at query i0 that see (causal rule, window, mask) a key of [j0, j0 + bk) whose value row
// holds NaN or ±inf get a NaN in their accumulator (no rescaling removes it), which sends them to the exact path.
__attribute__((noinline, cold)) void mark_rows_seeing_nonfinite_v(const MatrixView<const float>& v, std::size_t j0,
                                                                  std::size_t bk, std::size_t i0, std::size_t a,
                                                                  std::size_t nl, const AttentionOptions& options,
                                                                  const KeyBand& band, float* ot) noexcept {
  for (std::size_t j = 0; j < bk; ++j) {
    if (row_finite(v.data + (j0 + j) * v.stride, v.cols)) continue;
    const MatrixView<const float>& mask = options.mask;
    for (std::size_t i = a; i < a + nl; ++i) {
      const KeyRange keys = visible_keys(i0 + i, v.rows, band);
      const bool band_hidden = j0 + j < keys.lo || j0 + j >= keys.hi;
      const bool mask_hidden = mask.data != nullptr && mask.data[(i0 + i) * mask.stride + j0 + j] == -INFINITY;
      if (!band_hidden && !mask_hidden) ot[i] = NAN;
    }
  }
}

// Scores of lanes [a, a + nl) (queries first_row + a …) for keys [j0, j0 + bk) that the band hides, set to −inf.
// Ranges only grow with the lane, so the lanes that do not see key j are a prefix (their range ended) and a
// suffix (theirs has not begun), both moving up with j: two pointers, and only hidden scores are touched.
// Out of line: its frame sits beside the kernels', not under them.
__attribute__((noinline)) void hide_outside_band(float* s, std::size_t nl, std::size_t first_query, std::size_t j0,
                                                 std::size_t bk, const KeyBand& band, std::size_t n_kv) noexcept {
  constexpr std::size_t br = attention_block_q;
  if (key_bound(first_query, band.hi, n_kv) >= j0 + bk && key_bound(first_query + nl - 1, band.lo, n_kv) <= j0)
    return;  // every lane sees the whole block
  const std::size_t a = 0, first_row = first_query;
  const std::size_t end_lane = a + nl;
  std::size_t ended = a, begun = a;  // lanes [a, ended) end at or before j; lanes [begun, end_lane) start after j
  std::size_t ended_hi = key_bound(first_row + a, band.hi, n_kv), begun_lo = key_bound(first_row + a, band.lo, n_kv);
  for (std::size_t j = j0; j < j0 + bk; ++j) {
    while (ended < end_lane && ended_hi <= j)
      if (++ended < end_lane) ended_hi = key_bound(first_row + ended, band.hi, n_kv);
    while (begun < end_lane && begun_lo <= j)
      if (++begun < end_lane) begun_lo = key_bound(first_row + begun, band.lo, n_kv);
    float* sj = s + (j - j0) * br;
    for (std::size_t i = a; i < ended; ++i) sj[i] = -INFINITY;
    for (std::size_t i = begun; i < end_lane; ++i) sj[i] = -INFINITY;
  }
}

// Whether v is finite, and whether Σ p·v may overflow: |ot| <= l·max|v| <= n_kv·max|v|, so with every |v| below
// 2^(125 − bits of n_kv) nothing can, and the accumulator need not be checked (only the row sums, which are
// cheap). One pass over v tells; only when some value is that large (or not finite) does a second one tell
// whether v is finite. Out of line: attention_run's frame is on the deepest stack path of the layers.
struct ValueScan {
  bool finite, sum_can_overflow;
};
__attribute__((noinline)) ValueScan scan_values(MatrixView<const float> v) noexcept {
  int kv_bits = 0;
  for (std::size_t n = v.rows; n != 0; n >>= 1) ++kv_bits;
  const bool big = any_magnitude_at_least(v, static_cast<std::uint32_t>(125 - kv_bits + 127) << 23);
  return {!big || all_finite(v), big};
}

// Flags (1.0f in flags[i]) the rows of a finished tile the fused loop may have got wrong: a row sum that is not
// a positive finite number (NaN from a NaN or +inf score, or 0: no key seen — the exact path tells "hidden"
// from "underflowed"), or a non-finite accumulator (Σ p·v overflowed, or a NaN/inf value was seen), which
// only a non-finite or huge v can cause (then one pass over it). Whether any is flagged.
__attribute__((noinline)) bool flag_rows_for_exact(const float* ot, const float* l, std::size_t bq, std::size_t d_v,
                                                   bool check_ot, float* flags) noexcept {
  constexpr std::size_t br = attention_block_q;
  const bool ot_finite = !check_ot || row_finite(ot, d_v * br);
  bool any = false;
  for (std::size_t i = 0; i < bq; ++i) {
    bool bad = !(l[i] > 0.0f && l[i] <= float_max);
    for (std::size_t c = 0; c < d_v && !ot_finite && !bad; ++c) bad = !is_finite(ot[c * br + i]);
    flags[i] = bad ? 1.0f : 0.0f;
    any = any || bad;
  }
  return any;
}

// Rows [i0, i0 + br) ∩ [0, n_q) whose flag (in alpha: flag_rows_for_exact) is nonzero, through the exact path, with the
// tile's accumulator as scratch. Called once the tile loop has returned (attention_run_tiles): the exact path's frames
// sit beside the fused loop's, not under them.
__attribute__((noinline, cold)) void exact_tile_rows(const MatrixView<const float>& q, const MatrixView<const float>& k,
                                                     const MatrixView<const float>& v, const MatrixView<float>& out,
                                                     float* workspace, const AttentionOptions& options,
                                                     std::size_t i0) noexcept {
  constexpr std::size_t br = attention_block_q;
  float* ot = aligned_workspace(workspace) + q.cols * br;
  const float* flags = ot + (v.cols + attention_block_kv + 2) * br;  // alpha
  const ExactScale sc = split_scale(attention_scale(options, q.cols));
  const KeyBand band = visible_band(options);
  const MatrixView<const float>& mask = options.mask;
  for (std::size_t i = i0; i < i0 + br && i < q.rows; ++i) {
    if (flags[i - i0] == 0.0f) continue;
    attention_row_exact(q.data + i * q.stride, q.cols, k, v,
                        mask.data != nullptr ? mask.data + i * mask.stride : nullptr, visible_keys(i, k.rows, band), sc,
                        out.data + i * out.stride, ot);
  }
}

static_assert(attention_block_q >= 2, "the exact path borrows 2·d_v floats of the tile's accumulator");

// The tile path from row i0_from on, until a tile has rows the fused loop may have got wrong: returns that
// tile's first row, with its rows flagged (1.0f) in the workspace's alpha (exact_tile_rows takes them over), or
// n_q when every tile is done. Its own function (not inlined into attention_run), so the stack of a call is the
// larger of the paths, not their sum.
// Views by reference: copies of them would sit in attention_run's frame, on every layer call's stack path.
__attribute__((noinline)) std::size_t run_tiles_from(const Kernels& kern, const MatrixView<const float>& q,
                                                     const MatrixView<const float>& k, const MatrixView<const float>& v,
                                                     const MatrixView<float>& out, float* workspace,
                                                     const AttentionOptions& options, std::size_t i0_from) noexcept {
  constexpr std::size_t br = attention_block_q;
  constexpr std::size_t bc = attention_block_kv;
  const std::size_t n_q = q.rows, n_kv = k.rows, d_k = q.cols, d_v = v.cols;

  // The workspace, by lanes:
  float* qt = aligned_workspace(workspace);  // d_k × br
  float* ot = qt + d_k * br;                 // d_v × br
  float* s = ot + d_v * br;                  // bc × br
  float* m = s + bc * br;                    // br
  float* l = m + br;                         // br
  float* alpha = l + br;                     // br

  const float q_factor = fused_q_factor(attention_scale(options, d_k));
  if (!fused_q_factor_ok(q_factor)) {
    for (std::size_t i = 0; i < br; ++i) alpha[i] = 1.0f;
    return i0_from;
  }
  const MatrixView<const float>& mask = options.mask;
  // One pass over v (n_kv·d_v reads, against n_q·n_kv·d_v FMAs) decides whether the guarded P·V is needed
  // and whether the accumulator must be checked.
  const ValueScan v_scan = scan_values(v);
  const bool v_finite = v_scan.finite, ot_can_overflow = v_scan.sum_can_overflow;
  const KeyBand band = visible_band(options);
  const bool banded = options.causal || options.window != 0;

  // Lane groups of the staircase: one vector wide (4 lanes for the scalar kernels).
  const std::size_t group = kern.vector_floats > 1 ? kern.vector_floats : 4;

  for (std::size_t i0 = i0_from; i0 < n_q; i0 += br) {
    const std::size_t bq = min_size(br, n_q - i0);
    // One key block [j0, j0 + bk) for lanes [a, a + nl) of the tile: scores, mask, hiding (only where a
    // lane's visible range ends or starts inside the block), online-softmax update, P·V.
    // Inlined (one call site): its own frame would sit on every layer call's deepest stack path.
    auto run_block = [&](std::size_t a, std::size_t nl, std::size_t j0, std::size_t bk) __attribute__((always_inline)) {
      kern.attn_scores(qt + a, d_k, k.data + j0 * k.stride, k.stride, bk, s + a, nl);
      if (mask.data != nullptr)
        for (std::size_t i = a; i < a + nl; ++i) {
          const float* mrow = mask.data + (i0 + i) * mask.stride + j0;
          for (std::size_t j = 0; j < bk; ++j) s[j * br + i] = masked_score(s[j * br + i], mrow[j]);
        }
      // Only where a lane's visible range ends or starts inside the block (the first lane has the smallest end,
      // the last the largest start).
      if (banded) hide_outside_band(s + a, nl, i0 + a, j0, bk, band, n_kv);
      // A visible key (not hidden by the causal rule, the window or a −inf mask entry) whose value row holds NaN or
      // ±inf sends the query to the exact path, whatever its probability (which may underflow to 0): marked by a NaN in
      // its accumulator, which no rescaling removes.
      if (!v_finite) mark_rows_seeing_nonfinite_v(v, j0, bk, i0, a, nl, options, band, ot);
      kern.attn_softmax(s + a, bk, m + a, l + a, alpha + a, nl);
      if (v_finite)
        kern.attn_pv(s + a, bk, v.data + j0 * v.stride, v.stride, d_v, alpha + a, ot + a, nl);
      else
        pv_with_nonfinite_rows(kern, s + a, bk, v.data + j0 * v.stride, v.stride, d_v, alpha + a, ot + a, nl);
    };
    kern.attn_pack_q(q.data + i0 * q.stride, q.stride, bq, d_k, q_factor, qt);
    for (std::size_t i = 0; i < d_v * br; ++i) ot[i] = 0.0f;
    for (std::size_t i = 0; i < br; ++i) {
      m[i] = -INFINITY;
      l[i] = 0.0f;
    }

    // A staircase over lane groups of one vector. Group g's last query's keys end at end(g), its first query's
    // start at first(g), and both only grow with g: lanes from group g on all need the keys from the larger of
    // first(g) and end(g − 1) up to end(g), so that segment runs once for lanes [g·group, bq) — full width as
    // far as possible, one vector on the last step. Keys no lane of the tile sees are never computed; the
    // waste is one vector-wide triangle at the end (causal) and at the start (window) of each group's keys.
    // (The per-lane online softmax does not care that lanes consumed different keys.) Dense: one segment, all
    // keys, all lanes.
    std::size_t seg_start = 0;
    for (std::size_t g0 = 0; g0 < bq; g0 += group) {
      const std::size_t g_end = banded ? min_size(g0 + group, bq) : bq;
      const std::size_t first = key_bound(i0 + g0, band.lo, n_kv);
      const std::size_t seg_end = key_bound(i0 + g_end - 1, band.hi, n_kv);
      seg_start = first > seg_start ? first : seg_start;
      for (std::size_t j0 = seg_start; j0 < seg_end; j0 += bc) run_block(g0, bq - g0, j0, min_size(bc, seg_end - j0));
      seg_start = seg_end > seg_start ? seg_end : seg_start;
      if (!banded) break;
    }

    // Rows the fused loop may have got wrong go to the exact path: a row sum that is not a positive finite
    // number (NaN from a NaN or +inf score, or 0: no key seen — the exact path tells "hidden" from
    // "underflowed"), or a non-finite accumulator (Σ p·v overflowed, or a NaN/inf value was seen), which only
    // a non-finite or huge v can cause (then one pass over it). Flags kept in alpha (free now).
    const bool any_exact = flag_rows_for_exact(ot, l, bq, d_v, ot_can_overflow, alpha);

    // Normalise and transpose back. A query that saw no key (l == 0) gets zeros, not 0/0.
    kern.attn_store_out(ot, l, bq, d_v, out.data + i0 * out.stride, out.stride);
    if (any_exact) return i0;
  }
  return n_q;
}

// The tiles, and after each tile that has some, its flagged rows through the exact path (outside
// run_tiles_from's frame). Inlined into attention_run: no frame of its own on the layers' stack path.
inline __attribute__((always_inline)) void run_tiles(const Kernels& kern, const MatrixView<const float>& q,
                                                     const MatrixView<const float>& k, const MatrixView<const float>& v,
                                                     const MatrixView<float>& out, float* workspace,
                                                     const AttentionOptions& options) noexcept {
  for (std::size_t i0 = 0; (i0 = run_tiles_from(kern, q, k, v, out, workspace, options, i0)) < q.rows;
       i0 += attention_block_q)
    exact_tile_rows(q, k, v, out, workspace, options, i0);
}

}  // namespace

__attribute__((noinline)) void attention_run_tiles(const Kernels& kern, const MatrixView<const float>& q,
                                                   const MatrixView<const float>& k, const MatrixView<const float>& v,
                                                   const MatrixView<float>& out, float* workspace,
                                                   const AttentionOptions& options) noexcept {
  run_tiles(kern, q, k, v, out, workspace, options);
}

}  // namespace detail
}  // namespace microattn
