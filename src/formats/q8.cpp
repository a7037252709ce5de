// q8: the K/V cache's row store and the public weight quantizer (scripts/export_weights.py's rules).
#include "formats/q8.hpp"

#include "check.hpp"
#include "microattn/weights.hpp"

namespace microattn {
namespace detail {

void q8_store_row(const float* x, std::size_t n, std::int8_t* dst, float* scale) noexcept {
  q8_store_group<false>([x](std::size_t i) { return x[i]; }, n, dst, scale);
}

}  // namespace detail

Status quantize_q8(MatrixView<const float> w, std::size_t group, std::int8_t* data, float* scales) noexcept {
  if (w.data == nullptr || data == nullptr || scales == nullptr) return Status::null_pointer;
  if (!detail::aligned(w.data) || !detail::aligned(scales)) return Status::misaligned;
  // shape_ok bounds w's extent, so rows·cols (no more than it) does not overflow.
  if (!detail::shape_ok(w) || group == 0 || (w.rows * w.cols) % group != 0) return Status::invalid_shape;
  const std::size_t n = w.rows * w.cols, groups = n / group;
  // Byte ranges [a, a + a_bytes) and [b, b + b_bytes) share a byte; w's range is its extent (its gaps included).
  const auto overlap = [](const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
    const std::uintptr_t a0 = reinterpret_cast<std::uintptr_t>(a), b0 = reinterpret_cast<std::uintptr_t>(b);
    return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
  };
  const std::size_t w_bytes = detail::extent(w) * sizeof(float), s_bytes = groups * sizeof(float);
  if (overlap(data, n, w.data, w_bytes) || overlap(scales, s_bytes, w.data, w_bytes) ||
      overlap(data, n, scales, s_bytes))
    return Status::aliasing;
  // Group by group in row-major order (a group may straddle rows).
  for (std::size_t g = 0; g < groups; ++g) {
    const std::size_t e0 = g * group;
    const auto at = [&](std::size_t i) {
      const std::size_t e = e0 + i;
      return w.data[e / w.cols * w.stride + e % w.cols];
    };
    detail::q8_store_group<true>(at, group, data + e0, scales + g);
  }
  return Status::ok;
}

}  // namespace microattn
