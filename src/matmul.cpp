#include "microattn/matmul.hpp"

#include "check.hpp"
#include "kernels/kernels.hpp"

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

  const detail::GemmArgs args{a.data, a.stride, b.data, b.stride, transpose_b, c.data, c.stride, m, n, k};
  detail::selected_kernels().gemm(args);
  return Status::ok;
}

}  // namespace microattn
