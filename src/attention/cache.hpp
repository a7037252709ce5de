// Attention over an f16 / q8 K/V cache: the few-query path's loop, for every number of queries, with the cache
// table's fused products reading the stored rows (no converted copy of a block); the exact path for the rows it
// may get wrong, reading converted rows one at a time.
#pragma once

#include <cassert>

#include "attention/few_query.hpp"
#include "kernels/cache.hpp"

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
  // The workspace of a pass of nr rows: qs nr × d_k, o nr × d_v (at least 2·d_v: the exact path's scratch), m, l
  // and alpha nr each (and nr spare), then the scores of a key block, nr × bw, and converted rows, K ch × d_k and
  // V ch × d_v (the exact path converts one at a time). bw as the few-query path takes it (fewer rows, wider
  // blocks: fewer softmax steps); the sizes keep the layers' workspace (layer_cache_block_floats) sufficient.
  mutable float *qs, *o, *m, *s, *kb, *vb;
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
    s = m + 4 * nr;
    const std::size_t rest = avail - nr * (d_k + d_v + 4) - (nr < 2 ? d_v : 0);
    bw = attention_block_q * bc / nr / bc * bc;
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
      ck.f16_convert(static_cast<const std::uint16_t*>(src.data) + j0 * src.stride, src.stride, n, src.cols, dst);
    else
      ck.q8_convert(static_cast<const std::int8_t*>(src.data) + j0 * src.stride, src.stride, n, src.cols,
                    src.scales + j0 * src.scale_stride, src.scale_stride, dst);
  }

  // Scores of keys [j0, j0 + bk) into s (row stride bw) and P·V of them into o, straight from the stored rows.
  void fused_dot(std::size_t nr, std::size_t j0, std::size_t bk) const noexcept {
    const std::size_t d_k = qh.q.cols;
    if (format == Format::f16)
      ck.f16_rows_dot(qs, d_k, nr, d_k, static_cast<const std::uint16_t*>(k.data) + j0 * k.stride, k.stride, bk, s, bw);
    else
      ck.q8_rows_dot(qs, d_k, nr, d_k, static_cast<const std::int8_t*>(k.data) + j0 * k.stride, k.stride,
                     k.scales + j0 * k.scale_stride, k.scale_stride, bk, s, bw);
  }
  void fused_axpy(std::size_t nr, std::size_t j0, std::size_t bk) const noexcept {
    const std::size_t d_v = v.cols;
    if (format == Format::f16)
      ck.f16_rows_axpy(s, bw, nr, bk, static_cast<const std::uint16_t*>(v.data) + j0 * v.stride, v.stride, d_v, alpha(),
                       o, d_v);
    else
      ck.q8_rows_axpy(s, bw, nr, bk, static_cast<const std::int8_t*>(v.data) + j0 * v.stride, v.stride,
                      v.scales + j0 * v.scale_stride, v.scale_stride, d_v, alpha(), o, d_v);
  }

  void run_rows(std::size_t r0, std::size_t nr) const noexcept {
    const std::size_t n_kv = k.rows, d_v = v.cols;
    const KeyRange any = pass_start(qh, options, n_kv, d_v, q_factor, r0, nr, qs, o, m, l());
    for (std::size_t j0 = any.lo; j0 < any.hi; j0 += bw) {
      const std::size_t bk = min_size(bw, any.hi - j0);
      fused_dot(nr, j0, bk);
      pass_hide(qh, options, n_kv, r0, nr, j0, bk, s, bw);
      kern.rows_softmax(s, bw, nr, bk, m, l(), alpha());
      fused_axpy(nr, j0, bk);  // the block's rescale by alpha
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
                     0,
                     0,
                     0};
  run_passes(run, rows, d_v, scale);
}

}  // namespace detail
}  // namespace microattn
