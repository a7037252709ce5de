// The few-query path: each query a row (head dim in the lanes) on the row kernels, all query heads of a K/V
// head in one pass over K and V; rows it may get wrong go to the exact path, as on the tile path.
#pragma once

#include "attention/exact.hpp"

namespace microattn {
namespace detail {

namespace {

// What the few-query path's passes share with the cache path's (attention/cache.hpp): rows of a pass are query
// heads' rows, r → head r / n_q, query r % n_q.
inline __attribute__((always_inline)) const float* pass_q_row(const QueryHeads& qh, std::size_t r) noexcept {
  return qh.q.data + (r / qh.q.rows) * qh.q_head_offset + (r % qh.q.rows) * qh.q.stride;
}
inline __attribute__((always_inline)) float* pass_out_row(const QueryHeads& qh, std::size_t r) noexcept {
  return qh.out.data + (r / qh.q.rows) * qh.out_head_offset + (r % qh.q.rows) * qh.out.stride;
}

// Rows [r0, r0 + nr) start a pass: queries times q_factor into qs (nr × d_k), o (nr × d_v) zero, m −inf, l 0.
// Returns the keys any of them sees ([n_kv, 0) when none does).
inline __attribute__((always_inline)) KeyRange pass_start(const QueryHeads& qh, const AttentionOptions& options,
                                                          std::size_t n_kv, std::size_t d_v, float q_factor,
                                                          std::size_t r0, std::size_t nr, float* qs, float* o, float* m,
                                                          float* l) noexcept {
  const std::size_t d_k = qh.q.cols;
  KeyRange any{n_kv, 0};
  for (std::size_t r = 0; r < nr; ++r) {
    const float* src = pass_q_row(qh, r0 + r);
    for (std::size_t p = 0; p < d_k; ++p) qs[r * d_k + p] = src[p] * q_factor;
    for (std::size_t c = 0; c < d_v; ++c) o[r * d_v + c] = 0.0f;
    m[r] = -INFINITY;
    l[r] = 0.0f;
    const KeyRange seen = visible_keys((r0 + r) % qh.q.rows, n_kv, options);
    if (seen.lo < seen.hi) {
      any.lo = min_size(any.lo, seen.lo);
      any.hi = seen.hi > any.hi ? seen.hi : any.hi;
    }
  }
  return any;
}

// The scores of keys [j0, j0 + bk) for rows [r0, r0 + nr) (s, row stride bw): the mask added, keys outside each
// row's [lo, hi) hidden (−inf).
inline __attribute__((always_inline)) void pass_hide(const QueryHeads& qh, const AttentionOptions& options,
                                                     std::size_t n_kv, std::size_t r0, std::size_t nr, std::size_t j0,
                                                     std::size_t bk, float* s, std::size_t bw) noexcept {
  const MatrixView<const float>& mask = options.mask;
  for (std::size_t r = 0; r < nr; ++r) {
    float* sr = s + r * bw;
    const std::size_t i = (r0 + r) % qh.q.rows;
    if (mask.data != nullptr) {
      const float* mrow = mask.data + i * mask.stride + j0;
      for (std::size_t j = 0; j < bk; ++j) sr[j] = masked_score(sr[j], mrow[j]);
    }
    const KeyRange seen = visible_keys(i, n_kv, options);
    if (seen.lo > j0 || seen.hi < j0 + bk)
      for (std::size_t j = 0; j < bk; ++j)
        if (j0 + j < seen.lo || j0 + j >= seen.hi) sr[j] = -INFINITY;
  }
}

// Normalise a row's un-normalised output o (sum l) into dst; a query that saw no key (l == 0) gets zeros, not 0/0.
inline __attribute__((always_inline)) void pass_store(float* dst, const float* o, float l, std::size_t d_v) noexcept {
  const float inv = l == 0.0f ? 0.0f : 1.0f / l;
  for (std::size_t c = 0; c < d_v; ++c) dst[c] = l == 0.0f ? 0.0f : o[c] * inv;
}

// The passes over rows_max rows at a time: run.run_rows, then each row stored or sent to the exact path. The exact
// path takes a row whose sum is not a positive finite number (a NaN or +inf score, or no key seen) or whose output
// is not finite (Σ p·v overflowed, a non-finite value, or a hidden key's 0·NaN): d_v floats checked per row,
// instead of a scan of all of V per call.
template <class Run>
inline __attribute__((always_inline)) void run_passes(const Run& run, std::size_t rows, std::size_t d_v,
                                                      float scale) noexcept {
  constexpr std::size_t rows_max = attention_block_q;
  const bool exact_rows_only = !fused_q_factor_ok(run.q_factor);
  for (std::size_t r0 = 0; r0 < rows; r0 += rows_max) {
    const std::size_t nr = min_size(rows_max, rows - r0);
    run.layout(nr);
    if (!exact_rows_only) run.run_rows(r0, nr);
    for (std::size_t r = 0; r < nr; ++r) {
      bool exact = exact_rows_only || !(run.l()[r] > 0.0f && run.l()[r] <= float_max);
      if (!exact) {
        float* dst = pass_out_row(run.qh, r0 + r);
        pass_store(dst, run.o + r * d_v, run.l()[r], d_v);
        exact = !row_finite(dst, d_v);
      }
      run.alpha()[r] = exact ? 1.0f : 0.0f;
    }
    for (std::size_t r = 0; r < nr; ++r)  // after every store: the row buffers are scratch now
      if (run.alpha()[r] != 0.0f) run.exact_row(r0 + r, scale);
  }
}

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
  void layout(std::size_t) const noexcept {}  // fixed: rows_max rows' room whatever the pass

  // Rows [r0, r0 + nr) over the keys they see: scores, mask, hiding outside each row's [lo, hi), online softmax,
  // P·V. Rows this may get wrong (finite extremes, non-finite values) are flagged afterwards, as on the tile path.
  void run_rows(std::size_t r0, std::size_t nr) const noexcept {
    const std::size_t n_kv = k.rows, d_k = qh.q.cols, d_v = v.cols;
    const KeyRange any = pass_start(qh, options, n_kv, d_v, q_factor, r0, nr, qs, o, m, l());
    // The score buffer holds rows_max × bc floats: fewer rows take wider key blocks (1 row: rows_max·bc keys), so
    // the per-block costs (a softmax step's reductions and rescale, the calls) are paid less often; K and V are
    // streamed once either way.
    const std::size_t bw = attention_block_q * bc / nr / bc * bc;
    for (std::size_t j0 = any.lo; j0 < any.hi; j0 += bw) {
      const std::size_t bk = min_size(bw, any.hi - j0);
      kern.rows_dot(qs, d_k, nr, d_k, k.data + j0 * k.stride, k.stride, bk, s, bw);
      pass_hide(qh, options, n_kv, r0, nr, j0, bk, s, bw);
      kern.rows_softmax(s, bw, nr, bk, m, l(), alpha());
      kern.rows_axpy(s, bw, nr, bk, v.data + j0 * v.stride, v.stride, d_v, alpha(), o, d_v);
    }
  }

  // Row r (head r / n_q, query r % n_q) through the exact path, with o as its scratch (2·d_v <= rows_max·d_v).
  void exact_row(std::size_t r, float scale) const noexcept {
    const std::size_t i = r % qh.q.rows;
    const MatrixView<const float>& mask = options.mask;
    attention_row_exact(pass_q_row(qh, r), qh.q.cols, k, v,
                        mask.data != nullptr ? mask.data + i * mask.stride : nullptr, visible_keys(i, k.rows, options),
                        split_scale(scale), pass_out_row(qh, r), o);
  }
};

// Inlined into attention_run_heads (attention_run's one head calls that too): one frame less on the stack path.
inline __attribute__((always_inline)) void run_heads(const Kernels& kern, const QueryHeads& qh,
                                                     const MatrixView<const float>& k, const MatrixView<const float>& v,
                                                     float* workspace, const AttentionOptions& options) noexcept {
  constexpr std::size_t rows_max = attention_block_q;  // rows per pass over K and V
  const std::size_t d_k = qh.q.cols, d_v = v.cols;
  // The workspace, by rows: rows_max × (d_k + d_v + bc + 3) floats.
  float* ws = aligned_workspace(workspace);
  const float scale = attention_scale(options, d_k);
  const FewQueryRun run{kern,
                        qh,
                        k,
                        v,
                        options,
                        ws,
                        ws + rows_max * d_k,
                        ws + rows_max * (d_k + d_v),
                        ws + rows_max * (d_k + d_v + FewQueryRun::bc),
                        fused_q_factor(scale)};
  run_passes(run, qh.heads * qh.q.rows, d_v, scale);
}

}  // namespace

void attention_run_heads(const Kernels& kern, const QueryHeads& qh, const MatrixView<const float>& k,
                         const MatrixView<const float>& v, float* workspace, const AttentionOptions& options) noexcept {
  run_heads(kern, qh, k, v, workspace, options);
}

namespace {

// One head on the few-query path (one copy of it in flash: attention_run_heads); its QueryHeads lives here, off the
// tile path's stack.
__attribute__((noinline)) void attention_run_one_head(const Kernels& kern, const MatrixView<const float>& q,
                                                      const MatrixView<const float>& k,
                                                      const MatrixView<const float>& v, const MatrixView<float>& out,
                                                      float* workspace, const AttentionOptions& options) noexcept {
  attention_run_heads(kern, {q, 0, out, 0, 1}, k, v, workspace, options);
}

}  // namespace

}  // namespace detail
}  // namespace microattn
