#include "check.hpp"

namespace microattn {
namespace detail {

bool ranges_overlap(const void* a, std::size_t a_floats, const void* b, std::size_t b_floats) noexcept {
  // Compare as integers: relational operators on pointers into different objects are unspecified.
  const std::uintptr_t a0 = reinterpret_cast<std::uintptr_t>(a);
  const std::uintptr_t b0 = reinterpret_cast<std::uintptr_t>(b);
  return a0 < b0 + b_floats * sizeof(float) && b0 < a0 + a_floats * sizeof(float);
}

bool views_overlap(const void* a_data, std::size_t a_rows, std::size_t a_cols, std::size_t a_stride, const void* b_data,
                   std::size_t b_rows, std::size_t b_cols, std::size_t b_stride) noexcept {
  if (!ranges_overlap(a_data, (a_rows - 1) * a_stride + a_cols, b_data, (b_rows - 1) * b_stride + b_cols)) return false;
  std::uintptr_t a0 = reinterpret_cast<std::uintptr_t>(a_data);
  std::uintptr_t b0 = reinterpret_cast<std::uintptr_t>(b_data);
  if (a_stride != b_stride || (a0 > b0 ? a0 - b0 : b0 - a0) % sizeof(float) != 0) return true;
  if (a0 > b0) {  // make a the view that starts first
    const std::uintptr_t t0 = a0;
    a0 = b0;
    b0 = t0;
    const std::size_t tr = a_rows, tc = a_cols;
    a_rows = b_rows;
    a_cols = b_cols;
    b_rows = tr;
    b_cols = tc;
  }
  // b's element (r', c') sits d + r'·s + c' floats after a's first: row q + r', column t + c' of a when
  // t + c' < s, else row q + r' + 1, column t + c' − s.
  const std::size_t s = a_stride;
  const std::size_t d = (b0 - a0) / sizeof(float);
  const std::size_t q = d / s, t = d % s;
  const bool same_row_hit = t < a_cols && q < a_rows;
  const bool next_row_hit = b_cols > s - t && q + 1 < a_rows;
  return same_row_hit || next_row_hit;
}

}  // namespace detail
}  // namespace microattn
