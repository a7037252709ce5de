// The argument checks of attention(), in its documented order (declared in attention_run.hpp).
#pragma once

#include "attention/common.hpp"

namespace microattn {
namespace detail {

Status attention_check_shapes(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                              MatrixView<float> out, const AttentionOptions& options, const float* workspace) noexcept {
  if (q.data == nullptr || k.data == nullptr || v.data == nullptr || out.data == nullptr) return Status::null_pointer;
  if (!all_aligned(q, k, v, out, options.mask, workspace)) return Status::misaligned;
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

}  // namespace detail
}  // namespace microattn
