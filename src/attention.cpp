#include "microattn/attention.hpp"

#include "attention_run.hpp"
#include "check.hpp"

// The parts of one translation unit (file-local calls keep their own conventions and inlining; stack and flash
// are budgeted), in this order: each uses what the ones before it define, and in this order of the definitions
// GCC and Clang compile exactly what they did when this was one file (another order moves registers around).
// clang-format off
#include "attention/common.hpp"
#include "attention/exact.hpp"
#include "attention/few_query.hpp"
#include "attention/checks.hpp"
#include "attention/tiles.hpp"
#include "attention/cache.hpp"
// clang-format on

namespace microattn {
namespace detail {

void attention_run(const Kernels& kern, const MatrixView<const float>& q, const MatrixView<const float>& k,
                   const MatrixView<const float>& v, const MatrixView<float>& out, float* workspace,
                   const AttentionOptions& options) noexcept {
  // Few queries: one query per row instead of per lane (a tile would fill one lane of a vector per query).
  if (q.rows <= kern.few_query_max)
    attention_run_one_head(kern, q, k, v, out, workspace, options);
  else
    run_tiles(kern, q, k, v, out, workspace, options);
}

}  // namespace detail

Status attention(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v, MatrixView<float> out,
                 float* workspace, std::size_t workspace_floats, const AttentionOptions& options) noexcept {
  // The documented order: null pointers, alignment, shapes, workspace size, then overlaps.
  if (workspace == nullptr) return Status::null_pointer;
  const Status st = detail::attention_check_shapes(q, k, v, out, options, workspace);
  if (st != Status::ok) return st;
  const std::size_t needed = attention_workspace_floats(q.cols, v.cols);
  if (workspace_floats < needed) return Status::workspace_too_small;
  if (detail::attention_out_overlaps(q, k, v, out, options)) return Status::aliasing;
  // Only the first `needed` floats are used, so only they must not overlap anything (the same tests as for out).
  const MatrixView<float> ws{workspace, 1, needed, needed};
  if (detail::attention_out_overlaps(q, k, v, ws, options) || detail::views_overlap(ws, out)) return Status::aliasing;
  detail::attention_run(detail::selected_kernels(), q, k, v, out, workspace, options);
  return Status::ok;
}

}  // namespace microattn
