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

// Number of keys query i may see under the causal rule j <= i + off, clamped to [0, n_kv]. off has been
// clamped to [−n_q, n_kv] beforehand, so nothing overflows.
inline std::size_t causal_visible(std::size_t i, std::ptrdiff_t off, std::size_t n_kv) noexcept {
  const std::ptrdiff_t end = static_cast<std::ptrdiff_t>(i) + off + 1;
  if (end <= 0) return 0;
  return min_size(static_cast<std::size_t>(end), n_kv);
}

// Few-query path: row r's P·V where some visible row of V holds NaN or ±inf may have picked up 0·NaN from a
// key the row does not see (probability exactly 0). The fast pass cannot tell, so the driver checks each output
// row at the end (d_v floats, instead of a scan of all of V per call) and recomputes a non-finite one with this
// P·V: same scores and softmax, V applied in runs of nonzero probabilities only.
void rows_pv_skipping_zeros(const Kernels& kern, const float* p, std::size_t bk, const float* v, std::size_t ldv,
                            std::size_t d_v, float alpha, float* o) noexcept {
  for (std::size_t c = 0; c < d_v; ++c) o[c] *= alpha;
  static constexpr float one = 1.0f;
  for (std::size_t j = 0; j < bk;) {
    if (p[j] == 0.0f) {  // a NaN probability (the query saw a NaN score) still contributes, as it must
      ++j;
      continue;
    }
    std::size_t run = 1;
    while (j + run < bk && p[j + run] != 0.0f) ++run;
    kern.rows_axpy(p + j, 0, 1, run, v + j * ldv, ldv, d_v, &one, o, 0);
    j += run;
  }
}

}  // namespace

namespace {

// The few-query path's state, held once (a lambda capturing it by reference would copy every address into its
// closure, on the stack path of every layer call).
struct FewQueryRun {
  const Kernels& kern;
  const QueryHeads& qh;
  const MatrixView<const float>& k;
  const MatrixView<const float>& v;
  const AttentionOptions& options;
  float* qs;  // rows_max × d_k: queries pre-multiplied by scale·log2(e)
  float* o;   // rows_max × d_v: un-normalised outputs
  float* s;   // rows_max × bc: scores of a key block, then probabilities
  float* m;   // rows_max each: running max, running sum, rescale factor
  float q_factor;

  static constexpr std::size_t bc = attention_block_kv;
  float* l() const noexcept { return m + attention_block_q; }
  float* alpha() const noexcept { return m + 2 * attention_block_q; }
  // Row r: head r / n_q, query r % n_q.
  const float* q_row(std::size_t r) const noexcept {
    return qh.q.data + (r / qh.q.rows) * qh.q_head_offset + (r % qh.q.rows) * qh.q.stride;
  }
  float* out_row(std::size_t r) const noexcept {
    return qh.out.data + (r / qh.q.rows) * qh.out_head_offset + (r % qh.q.rows) * qh.out.stride;
  }

  // Rows [r0, r0 + nr) over the keys they see: scores, mask, hiding outside each row's [lo, hi), online softmax,
  // P·V (guarded: only runs of nonzero probabilities, for the recompute of a non-finite row).
  void run_rows(std::size_t r0, std::size_t nr, bool guarded) const noexcept {
    const std::size_t n_kv = k.rows, d_k = qh.q.cols, d_v = v.cols;
    std::size_t first = n_kv, last = 0;
    for (std::size_t r = 0; r < nr; ++r) {
      const float* src = q_row(r0 + r);
      for (std::size_t p = 0; p < d_k; ++p) qs[r * d_k + p] = src[p] * q_factor;
      for (std::size_t c = 0; c < d_v; ++c) o[r * d_v + c] = 0.0f;
      m[r] = -INFINITY;
      l()[r] = 0.0f;
      const KeyRange seen = visible_keys((r0 + r) % qh.q.rows, n_kv, options);
      if (seen.lo < seen.hi) {
        first = min_size(first, seen.lo);
        last = seen.hi > last ? seen.hi : last;
      }
    }
    const MatrixView<const float>& mask = options.mask;
    for (std::size_t j0 = first; j0 < last; j0 += bc) {
      const std::size_t bk = min_size(bc, last - j0);
      kern.rows_dot(qs, d_k, nr, d_k, k.data + j0 * k.stride, k.stride, bk, s, bc);
      for (std::size_t r = 0; r < nr; ++r) {
        float* sr = s + r * bc;
        const std::size_t i = (r0 + r) % qh.q.rows;
        if (mask.data != nullptr) {
          const float* mrow = mask.data + i * mask.stride + j0;
          // −inf hides the key outright (assigned, not added: a NaN score of a hidden key must not show)
          for (std::size_t j = 0; j < bk; ++j) sr[j] = mrow[j] == -INFINITY ? -INFINITY : sr[j] + mrow[j] * log2e;
        }
        const KeyRange seen = visible_keys(i, n_kv, options);
        if (seen.lo > j0 || seen.hi < j0 + bk)
          for (std::size_t j = 0; j < bk; ++j)
            if (j0 + j < seen.lo || j0 + j >= seen.hi) sr[j] = -INFINITY;
      }
      kern.rows_softmax(s, bc, nr, bk, m, l(), alpha());
      if (!guarded)
        kern.rows_axpy(s, bc, nr, bk, v.data + j0 * v.stride, v.stride, d_v, alpha(), o, d_v);
      else
        rows_pv_skipping_zeros(kern, s, bk, v.data + j0 * v.stride, v.stride, d_v, alpha()[0], o);
    }
  }

  // Normalise row index (in the buffers) into out row r; a query that saw no key (l == 0) gets zeros, not 0/0.
  void store_row(std::size_t r, std::size_t index) const noexcept {
    float* dst = out_row(r);
    const float lr = l()[index];
    const float inv = lr == 0.0f ? 0.0f : 1.0f / lr;
    for (std::size_t c = 0; c < v.cols; ++c) dst[c] = lr == 0.0f ? 0.0f : o[index * v.cols + c] * inv;
  }
};

// Inlined into both callers (attention_run's one head, and attention_run_heads): one frame less on the stack path.
inline __attribute__((always_inline)) void run_heads(const Kernels& kern, const QueryHeads& qh,
                                                     const MatrixView<const float>& k, const MatrixView<const float>& v,
                                                     float* workspace, const AttentionOptions& options) noexcept {
  constexpr std::size_t rows_max = attention_block_q;  // rows per pass over K and V
  const std::size_t d_k = qh.q.cols, d_v = v.cols, rows = qh.heads * qh.q.rows;
  // The workspace of the tile path, carved by rows instead of lanes: rows_max × (d_k + d_v + bc + 3) floats.
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(workspace);
  float* ws = workspace + ((64 - addr % 64) % 64) / sizeof(float);
  const float scale = options.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(d_k)) : options.scale;
  const FewQueryRun run{kern,
                        qh,
                        k,
                        v,
                        options,
                        ws,
                        ws + rows_max * d_k,
                        ws + rows_max * (d_k + d_v),
                        ws + rows_max * (d_k + d_v + FewQueryRun::bc),
                        scale * log2e};
  for (std::size_t r0 = 0; r0 < rows; r0 += rows_max) {
    const std::size_t nr = min_size(rows_max, rows - r0);
    run.run_rows(r0, nr, false);
    for (std::size_t r = 0; r < nr; ++r) run.store_row(r0 + r, r);
    // A non-finite output row may hold a hidden key's 0·NaN: recompute it guarded (it may stay non-finite, rightly).
    for (std::size_t r = 0; r < nr; ++r)
      if (!row_finite(run.out_row(r0 + r), d_v)) {
        run.run_rows(r0 + r, 1, true);
        run.store_row(r0 + r, 0);
      }
  }
}

}  // namespace

void attention_run_heads(const Kernels& kern, const QueryHeads& qh, const MatrixView<const float>& k,
                         const MatrixView<const float>& v, float* workspace, const AttentionOptions& options) noexcept {
  run_heads(kern, qh, k, v, workspace, options);
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

namespace {

// The query-tile path. Its own function (not inlined into attention_run), so the stack of a call is the larger of
// the two paths, not their sum.
// Views by reference: copies of them would sit in attention_run's frame, on every layer call's stack path.
__attribute__((noinline)) void attention_run_tiles(const Kernels& kern, const MatrixView<const float>& q,
                                                   const MatrixView<const float>& k, const MatrixView<const float>& v,
                                                   const MatrixView<float>& out, float* workspace,
                                                   const AttentionOptions& options) noexcept {
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
  // Clamp the offset to [−n_q, n_kv]: beyond, every key is hidden or visible alike.
  const std::ptrdiff_t off = clamp_causal_offset(options.causal_offset, n_q, n_kv);
  // One pass over v (n_kv·d_v reads, against n_q·n_kv·d_v FMAs) decides whether the guarded P·V is needed.
  const bool v_finite = all_finite(v);

  // Lane groups of the causal staircase: one vector wide (4 lanes for the scalar kernels).
  const std::size_t group = kern.vector_floats > 1 ? kern.vector_floats : 4;

  for (std::size_t i0 = 0; i0 < n_q; i0 += br) {
    const std::size_t bq = min_size(br, n_q - i0);
    // One key block [j0, j0 + bk) for lanes [a, a + nl) of the tile: scores, mask, causal hiding (only
    // where a lane's limit falls inside the block), online-softmax update, P·V.
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
      if (options.causal && causal_visible(i0 + a, off, n_kv) < j0 + bk)
        for (std::size_t j = 0; j < bk; ++j) {  // key j0 + j is hidden from lanes before first_seeing
          const std::ptrdiff_t first_seeing =
              static_cast<std::ptrdiff_t>(j0 + j) - off - static_cast<std::ptrdiff_t>(i0);
          const std::size_t hidden = first_seeing <= 0 ? 0 : min_size(static_cast<std::size_t>(first_seeing), a + nl);
          for (std::size_t i = a; i < hidden; ++i) s[j * br + i] = -INFINITY;
        }
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

    // Causal: a staircase over lane groups of one vector. Group g's last query sees keys [0, vis_g); lanes from
    // group g on all need keys [vis_(g−1), vis_g), so that segment runs once for lanes [g·group, bq) — full
    // width as far as possible, one vector on the last step. Keys no lane of the tile sees are never
    // computed, and the wasted triangle is one vector wide. (The per-lane online softmax does not care that
    // lanes consumed different keys.) Dense: one segment, all keys, all lanes.
    std::size_t seg_start = 0;
    for (std::size_t g0 = 0; g0 < bq; g0 += group) {
      const std::size_t g_end = options.causal ? min_size(g0 + group, bq) : bq;
      const std::size_t seg_end = options.causal ? causal_visible(i0 + g_end - 1, off, n_kv) : n_kv;
      for (std::size_t j0 = seg_start; j0 < seg_end; j0 += bc) run_block(g0, bq - g0, j0, min_size(bc, seg_end - j0));
      seg_start = seg_end > seg_start ? seg_end : seg_start;
      if (!options.causal) break;
    }

    // Normalise and transpose back. A query that saw no key (l == 0) gets zeros, not 0/0.
    kern.attn_store_out(ot, l, bq, d_v, out.data + i0 * out.stride, out.stride);
  }
}

// One head on the few-query path; its QueryHeads lives here, off the tile path's stack.
__attribute__((noinline)) void attention_run_one_head(const Kernels& kern, const MatrixView<const float>& q,
                                                      const MatrixView<const float>& k,
                                                      const MatrixView<const float>& v, const MatrixView<float>& out,
                                                      float* workspace, const AttentionOptions& options) noexcept {
  run_heads(kern, {q, 0, out, 0, 1}, k, v, workspace, options);
}

}  // namespace

void attention_run(const Kernels& kern, MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                   MatrixView<float> out, float* workspace, const AttentionOptions& options) noexcept {
  // Few queries: one query per row instead of per lane (a tile would fill one lane of a vector per query). The
  // window is honoured on that path only so far, so a windowed call takes it whatever n_q is.
  if (q.rows <= kern.few_query_max || options.window != 0)
    attention_run_one_head(kern, q, k, v, out, workspace, options);
  else
    attention_run_tiles(kern, q, k, v, out, workspace, options);
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
