#include "microattn/softmax.hpp"

#include "check.hpp"
#include "kernels/attention.hpp"

namespace microattn {

Status softmax_rows(MatrixView<float> x) noexcept {
  if (x.data == nullptr) return Status::null_pointer;
  if (!detail::aligned(x)) return Status::misaligned;
  if (!detail::shape_ok(x)) return Status::invalid_shape;
  const detail::Kernels& k = detail::selected_kernels();
  for (std::size_t r = 0; r < x.rows; ++r) k.softmax_row(x.data + r * x.stride, x.cols);
  return Status::ok;
}

Status exp_elements(const float* x, float* y, std::size_t n) noexcept {
  if (n == 0) return Status::ok;
  if (x == nullptr || y == nullptr) return Status::null_pointer;
  if (!detail::all_aligned(x, y)) return Status::misaligned;
  if (n > static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(float)) return Status::invalid_shape;
  if (x != y && detail::ranges_overlap(x, n, y, n)) return Status::aliasing;
  detail::selected_kernels().exp(x, y, n);
  return Status::ok;
}

}  // namespace microattn
