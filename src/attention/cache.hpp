// Attention over an f16 / q8 K/V cache: the few-query path's loop with each key block converted to float in the
// workspace first (RAM constant in the sequence length), for every number of queries; the exact path for the
// rows it may get wrong, reading converted rows one at a time.
#pragma once

#include <cassert>

#include "attention/few_query.hpp"
#include "kernels/cache_kernels.hpp"

namespace microattn {
namespace detail {

namespace {

struct CacheRun {
  const Kernels& kern;
  const CacheKernels& ck;
  Format format;
  const QueryHeads& qh;
  const KvSource& k;
  const KvSource& v;
  const AttentionOptions& options;
  float q_factor;
  float* space;       // the workspace, aligned
  std::size_t avail;  // its floats
  // The workspace of a pass of nr rows: qs nr × d_k, o nr × d_v (at least 2·d_v: the exact path's scratch), m, l,
  // alpha and ones nr each, then the scores of a key block, nr × bw, and a chunk of it converted to float, K ch ×
  // d_k and V ch × d_v. bw as the few-query path takes it (fewer rows, wider blocks: fewer softmax steps), ch as
  // many rows as fit, at least a quarter block (the layers' layer_cache_block_floats).
  mutable float *qs, *o, *m, *ones, *s, *kb, *vb;
  mutable std::size_t nr_max, bw, ch;
  float* l() const noexcept { return m + nr_max; }
  float* alpha() const noexcept { return m + 2 * nr_max; }
  void layout(std::size_t nr) const noexcept {
    const std::size_t d_k = qh.q.cols, d_v = v.cols, kv = d_k + d_v;
    constexpr std::size_t bc = attention_block_kv, quarter = (bc + 3) / 4;
    nr_max = nr;
    qs = space;
    o = qs + nr * d_k;
    m = o + (nr < 2 ? 2 : nr) * d_v;
    ones = m + 3 * nr;
    for (std::size_t r = 0; r < nr; ++r) ones[r] = 1.0f;
    s = ones + nr;
    const std::size_t rest = avail - nr * (d_k + d_v + 4) - (nr < 2 ? d_v : 0);
    bw = target_is_mcu ? bc : attention_block_q * bc / nr / bc * bc;
    if (nr * bw + quarter * kv > rest) bw = rest > quarter * kv ? (rest - quarter * kv) / nr : 1;
    ch = (rest - nr * bw) / kv;
    if (ch > bw) ch = bw;
    assert(bw >= 1 && ch >= 1);
    kb = s + nr * bw;
    vb = kb + ch * d_k;
  }
  // Rows [j0, j0 + n) of src into dst (n × src.cols, dense).
  void convert(const KvSource& src, std::size_t j0, std::size_t n, float* dst) const noexcept {
    if (format == Format::f16)
      ck.f16_rows(static_cast<const std::uint16_t*>(src.data) + j0 * src.stride, src.stride, n, src.cols, dst);
    else
      ck.q8_rows(static_cast<const std::int8_t*>(src.data) + j0 * src.stride, src.stride, n, src.cols,
                 src.scales + j0 * src.scale_stride, src.scale_stride, dst);
  }

  void run_rows(std::size_t r0, std::size_t nr) const noexcept {
    const std::size_t n_kv = k.rows, d_k = qh.q.cols, d_v = v.cols;
    const KeyRange any = pass_start(qh, options, n_kv, d_v, q_factor, r0, nr, qs, o, m, l());
    for (std::size_t j0 = any.lo; j0 < any.hi; j0 += bw) {
      const std::size_t bk = min_size(bw, any.hi - j0);
      for (std::size_t c0 = 0; c0 < bk; c0 += ch) {
        const std::size_t cn = min_size(ch, bk - c0);
        convert(k, j0 + c0, cn, kb);
        kern.rows_dot(qs, d_k, nr, d_k, kb, d_k, cn, s + c0, bw);
      }
      pass_hide(qh, options, n_kv, r0, nr, j0, bk, s, bw);
      kern.rows_softmax(s, bw, nr, bk, m, l(), alpha());
      for (std::size_t c0 = 0; c0 < bk; c0 += ch) {  // the block's rescale with the first chunk only
        const std::size_t cn = min_size(ch, bk - c0);
        convert(v, j0 + c0, cn, vb);
        kern.rows_axpy(s + c0, bw, nr, cn, vb, d_v, d_v, c0 == 0 ? alpha() : ones, o, d_v);
      }
    }
  }

  void exact_row(std::size_t r, float scale) const noexcept {
    const std::size_t i = r % qh.q.rows;
    const MatrixView<const float>& mask = options.mask;
    attention_row_exact_rows(
        pass_q_row(qh, r), qh.q.cols, v.cols,
        [&](std::size_t j) {
          convert(k, j, 1, kb);
          return static_cast<const float*>(kb);
        },
        [&](std::size_t j) {
          convert(v, j, 1, vb);
          return static_cast<const float*>(vb);
        },
        mask.data != nullptr ? mask.data + i * mask.stride : nullptr, visible_keys(i, k.rows, options),
        split_scale(scale), pass_out_row(qh, r), o);
  }
};

}  // namespace

void attention_run_cache(const Kernels& kern, const CacheKernels& ck, Format format, const QueryHeads& qh,
                         const KvSource& k, const KvSource& v, float* workspace, std::size_t workspace_floats,
                         const AttentionOptions& options) noexcept {
  const std::size_t d_v = v.cols, rows = qh.heads * qh.q.rows;
  const float scale = attention_scale(options, qh.q.cols);
  // attention_workspace_floats reserves 16 floats for the alignment; what is left, with the layers' addition,
  // has room for a key block of at least a quarter block, every pass.
  const CacheRun run{kern,
                     ck,
                     format,
                     qh,
                     k,
                     v,
                     options,
                     fused_q_factor(scale),
                     aligned_workspace(workspace),
                     workspace_floats - 16,
                     nullptr,
                     nullptr,
                     nullptr,
                     nullptr,
                     nullptr,
                     nullptr,
                     nullptr,
                     0,
                     0,
                     0};
  run_passes(run, rows, d_v, scale);
}

}  // namespace detail
}  // namespace microattn
