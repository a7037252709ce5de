#include "microattn/matmul.hpp"

#include "check.hpp"
#include "kernels/attention.hpp"

namespace microattn {

Status matmul(MatrixView<const float> a, MatrixView<const float> b, MatrixView<float> c, bool transpose_b) noexcept {
  if (a.data == nullptr || b.data == nullptr || c.data == nullptr) return Status::null_pointer;
  if (!detail::all_aligned(a, b, c)) return Status::misaligned;
  if (!detail::shape_ok(a) || !detail::shape_ok(b) || !detail::shape_ok(c)) return Status::invalid_shape;
  const std::size_t m = a.rows, k = a.cols;
  const std::size_t b_inner = transpose_b ? b.cols : b.rows;
  const std::size_t n = transpose_b ? b.rows : b.cols;
  if (b_inner != k || c.rows != m || c.cols != n) return Status::invalid_shape;
  if (detail::views_overlap(c, a) || detail::views_overlap(c, b)) return Status::aliasing;

  // A one-row view's stride addresses nothing and may be any value >= cols, but the kernels step their row
  // pointers by it after the last row too: a huge stride would wrap the pointer (UB). Its rows are dense anyway.
  const auto step = [](const auto& v) { return v.rows == 1 ? v.cols : v.stride; };
  const detail::GemmArgs args{a.data, step(a), b.data, step(b), transpose_b, c.data, step(c), m, n, k};
  detail::selected_kernels().gemm(args);
  return Status::ok;
}

}  // namespace microattn
