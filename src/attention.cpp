#include "microattn/attention.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "attention_run.hpp"
#include "check.hpp"

namespace microattn {
namespace detail {
namespace {

constexpr float log2e = 1.44269504088896341f;

inline std::size_t min_size(std::size_t a, std::size_t b) noexcept { return a < b ? a : b; }

// No NaN or ±inf among x[0..n): an all-ones exponent field marks both. Integer ORs, no dependency on a
// floating-point chain, so the compiler vectorizes it (the check runs over all of v on every call).
inline bool row_finite(const float* x, std::size_t n) noexcept {
  std::uint32_t nonfinite = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    nonfinite |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return nonfinite == 0;
}

bool all_finite(MatrixView<const float> m) noexcept {
  for (std::size_t r = 0; r < m.rows; ++r)
    if (!row_finite(m.data + r * m.stride, m.cols)) return false;
  return true;
}

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

}  // namespace

KeyBand visible_band(const AttentionOptions& options) noexcept {
  // In an integer twice as wide as ptrdiff_t nothing overflows; then saturate.
#if PTRDIFF_MAX > 0x7fffffffL
  __extension__ typedef __int128 wide;
#else
  typedef long long wide;
#endif
  const wide off = options.causal_offset, w = static_cast<wide>(options.window), sat = visibility_saturation;
  const wide lo = w == 0 ? -sat : off - w + 1;
  const wide hi = options.causal ? off + 1 : (w == 0 ? sat : off + w);
  return {static_cast<std::ptrdiff_t>(lo < -sat ? -sat : (lo > sat ? sat : lo)),
          static_cast<std::ptrdiff_t>(hi < -sat ? -sat : (hi > sat ? sat : hi))};
}

Status attention_check_shapes(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                              MatrixView<float> out, const AttentionOptions& options) noexcept {
  if (q.data == nullptr || k.data == nullptr || v.data == nullptr || out.data == nullptr) return Status::null_pointer;
  if (!shape_ok(q) || !shape_ok(k) || !shape_ok(v) || !shape_ok(out)) return Status::invalid_shape;
  if (k.cols != q.cols || v.rows != k.rows || out.rows != q.rows || out.cols != v.cols) return Status::invalid_shape;
  if (q.cols > attention_max_head_dim || v.cols > attention_max_head_dim) return Status::invalid_shape;
  const MatrixView<const float>& mask = options.mask;
  if (mask.data != nullptr && (!shape_ok(mask) || mask.rows != q.rows || mask.cols != k.rows))
    return Status::invalid_shape;
  return Status::ok;
}

bool attention_out_overlaps(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                            MatrixView<float> out, const AttentionOptions& options) noexcept {
  return views_overlap(out, q) || views_overlap(out, k) || views_overlap(out, v) ||
         (options.mask.data != nullptr && views_overlap(out, options.mask));
}

Status attention_check(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                       MatrixView<float> out, const AttentionOptions& options) noexcept {
  const Status st = attention_check_shapes(q, k, v, out, options);
  if (st != Status::ok) return st;
  return attention_out_overlaps(q, k, v, out, options) ? Status::aliasing : Status::ok;
}

void attention_run(const Kernels& kern, MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                   MatrixView<float> out, float* workspace, const AttentionOptions& options) noexcept {
  constexpr std::size_t br = attention_block_q;
  constexpr std::size_t bc = attention_block_kv;
  const std::size_t n_q = q.rows, n_kv = k.rows, d_k = q.cols, d_v = v.cols;

  // Carve the workspace, 64-byte aligned (the formula reserves 16 floats for this).
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(workspace);
  float* ws = workspace + ((64 - addr % 64) % 64) / sizeof(float);
  float* qt = ws;             // d_k × br
  float* ot = qt + d_k * br;  // d_v × br
  float* s = ot + d_v * br;   // bc × br
  float* m = s + bc * br;     // br
  float* l = m + br;          // br
  float* alpha = l + br;      // br

  const float scale = options.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(d_k)) : options.scale;
  const float q_factor = scale * log2e;  // scores in log2 units: the exp becomes a bare 2^x
  const MatrixView<const float>& mask = options.mask;
  // One pass over v (n_kv·d_v reads, against n_q·n_kv·d_v FMAs) decides whether the guarded P·V is needed.
  const bool v_finite = all_finite(v);
  const KeyBand band = visible_band(options);
  const bool banded = options.causal || options.window != 0;

  // Lane groups of the staircase: one vector wide (4 lanes for the scalar kernels).
  const std::size_t group = kern.vector_floats > 1 ? kern.vector_floats : 4;

  for (std::size_t i0 = 0; i0 < n_q; i0 += br) {
    const std::size_t bq = min_size(br, n_q - i0);
    // One key block [j0, j0 + bk) for lanes [a, a + nl) of the tile: scores, mask, hiding (only where a
    // lane's visible range ends or starts inside the block), online-softmax update, P·V.
    // Inlined (one call site): its own frame would sit on every layer call's deepest stack path.
    auto run_block = [&](std::size_t a, std::size_t nl, std::size_t j0, std::size_t bk) __attribute__((always_inline)) {
      kern.attn_scores(qt + a, d_k, k.data + j0 * k.stride, k.stride, bk, s + a, nl);
      if (mask.data != nullptr)
        for (std::size_t i = a; i < a + nl; ++i) {
          const float* mrow = mask.data + (i0 + i) * mask.stride + j0;
          // −inf hides the key outright (assigned, not added: a NaN score of a hidden key must not show)
          for (std::size_t j = 0; j < bk; ++j)
            s[j * br + i] = mrow[j] == -INFINITY ? -INFINITY : s[j * br + i] + mrow[j] * log2e;
        }
      // Only where a lane's visible range ends or starts inside the block (the first lane has the smallest end,
      // the last the largest start).
      if (banded) hide_outside_band(s + a, nl, i0 + a, j0, bk, band, n_kv);
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

    // Normalise and transpose back. A query that saw no key (l == 0) gets zeros, not 0/0.
    kern.attn_store_out(ot, l, bq, d_v, out.data + i0 * out.stride, out.stride);
  }
}

}  // namespace detail

Status attention(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v, MatrixView<float> out,
                 float* workspace, std::size_t workspace_floats, const AttentionOptions& options) noexcept {
  // The documented order: null pointers, shapes, workspace size, then overlaps.
  if (workspace == nullptr) return Status::null_pointer;
  const Status st = detail::attention_check_shapes(q, k, v, out, options);
  if (st != Status::ok) return st;
  const std::size_t needed = attention_workspace_floats(q.cols, v.cols);
  if (workspace_floats < needed) return Status::workspace_too_small;
  if (detail::attention_out_overlaps(q, k, v, out, options)) return Status::aliasing;
  // Only the first `needed` floats are used, so only they must not overlap anything.
  const MatrixView<const float> ws{workspace, 1, needed, needed};
  if (detail::views_overlap(ws, q) || detail::views_overlap(ws, k) || detail::views_overlap(ws, v) ||
      detail::views_overlap(ws, out) || (options.mask.data != nullptr && detail::views_overlap(ws, options.mask)))
    return Status::aliasing;
  detail::attention_run(detail::selected_kernels(), q, k, v, out, workspace, options);
  return Status::ok;
}

}  // namespace microattn
