// Argument checks shared by the entry points. Only entry points check (kernels assert, as CMSIS-NN).
#pragma once

#include <cstddef>
#include <cstdint>

#include "microattn/matrix_view.hpp"
#include "microattn/status.hpp"
#include "microattn/weights.hpp"

namespace microattn {
struct LayerConfig;
namespace detail {

// Whether p may be read or written as a float: alignof(float) (4 bytes on every target), nothing more. A null
// pointer counts as aligned (null is checked, and reported, first). One call per pointer an entry point takes:
//   if (!aligned(a.data) || !aligned(weights.q_bias)) return Status::misaligned;
inline bool aligned(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p) % alignof(float) == 0; }
template <class T>
inline bool aligned(const MatrixView<T>& v) noexcept {
  return aligned(static_cast<const void*>(v.data));
}
// All of them aligned (any mix of pointers and views).
template <class First, class... Rest>
inline bool all_aligned(const First& first, const Rest&... rest) noexcept {
  if (!aligned(first)) return false;
  if constexpr (sizeof...(rest) > 0) {
    return all_aligned(rest...);
  } else {
    return true;
  }
}

// A view's shape is usable: non-zero dims, stride >= cols, its extent in bytes fits in a ptrdiff_t, and so does
// its stride in bytes (kernels step a row pointer by the stride past the last row without reading there: with one
// row and a stride of 2^62 floats that step wrapped the address, which UBSan reports; fuzz_attention found it).
template <class T>
constexpr bool shape_ok(const MatrixView<T>& v) noexcept {
  constexpr std::size_t max_elems = static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(float);
  return v.rows != 0 && v.cols != 0 && v.stride >= v.cols && v.stride <= max_elems &&
         v.rows - 1 <= (max_elems - v.cols) / v.stride;
}

// Elements spanned by a view: (rows − 1)·stride + cols. Only for views that passed shape_ok.
template <class T>
constexpr std::size_t extent(const MatrixView<T>& v) noexcept {
  return (v.rows - 1) * v.stride + v.cols;
}

// Whether two memory ranges of floats share a byte.
bool ranges_overlap(const void* a, std::size_t a_floats, const void* b, std::size_t b_floats) noexcept;

// Whether two views (that passed shape_ok) share an element. Exact for equal strides (so heads interleaved
// in one packed matrix are told apart), conservative (any overlap of their spans) otherwise.
bool views_overlap(const void* a_data, std::size_t a_rows, std::size_t a_cols, std::size_t a_stride, const void* b_data,
                   std::size_t b_rows, std::size_t b_cols, std::size_t b_stride) noexcept;

template <class T, class U>
bool views_overlap(const MatrixView<T>& a, const MatrixView<U>& b) noexcept {
  return views_overlap(a.data, a.rows, a.cols, a.stride, b.data, b.rows, b.cols, b.stride);
}

// What is wrong with a weight matrix an entry point takes, as bits named by the Status each maps to, so that the
// entry point reports them in its own order among its other checks (null pointers, alignment, shapes, overlaps):
//   weight_null        data null, q8 scales null
//   weight_misaligned  bias, f32 data or q8 scales not 4-byte aligned, f16 data not 2-byte aligned
//   weight_shape       a format outside Format, w.rows != rows or w.cols != cols, a zero size, rows·cols elements
//                      past ptrdiff_t bytes, q8 group 0 or not dividing rows·cols
//   weight_aliasing    y (when its shape is valid) shares a byte with the data, the scales or the bias; tested
//                      only when no other bit is set
// linear() passes w's own rows and cols; a layer those of its projection.
enum : unsigned { weight_null = 1, weight_misaligned = 2, weight_shape = 4, weight_aliasing = 8 };
unsigned weight_problems(const WeightMatrix& w, const float* bias, std::size_t rows, std::size_t cols,
                         const MatrixView<float>& y) noexcept;

// Whether a layer configuration is usable with heads of head_dim (rotary embeddings: theta in [1, FLT_MAX], an
// even number of dims <= head_dim): the layer's every call and the C API's init (layers.cpp).
bool config_ok(const LayerConfig& c, std::size_t head_dim) noexcept;

}  // namespace detail
}  // namespace microattn
