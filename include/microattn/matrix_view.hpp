// microattn — the non-owning matrix view every entry point takes.
#pragma once

#include <cstddef>
#include <type_traits>

namespace microattn {

// Row-major, non-owning view: element (r, c) is data[r * stride + c], with stride >= cols.
// The stride unit is elements, not bytes (as ggml and CMSIS-NN dims). A view may point into a bigger matrix:
// head h of a (seq × heads·head_dim) matrix m is {m + h * head_dim, seq, head_dim, heads * head_dim}.
// data must be aligned for float (alignof(float), 4 bytes on every target) and nothing further: entry points
// return Status::misaligned for any float pointer that is not (a byte offset into a uint8_t blob).
template <class T>
struct MatrixView {
  T* data;
  std::size_t rows;
  std::size_t cols;
  std::size_t stride;

  // A view of T converts to a view of const T, so outputs can be passed on as inputs.
  template <class U, class = std::enable_if_t<std::is_same<U, const T>::value && !std::is_const<T>::value>>
  constexpr operator MatrixView<U>() const noexcept {
    return MatrixView<U>{data, rows, cols, stride};
  }
};

// A contiguous rows × cols view (stride == cols).
template <class T>
constexpr MatrixView<T> make_view(T* data, std::size_t rows, std::size_t cols) noexcept {
  return MatrixView<T>{data, rows, cols, cols};
}

}  // namespace microattn
