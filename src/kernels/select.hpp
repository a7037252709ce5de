// The one selection rule of the kernel families (attention.hpp, linear.hpp, cache.hpp): the build's vector table
// when it has one, else the scalar table (asked for only then).
#pragma once

namespace microattn {
namespace detail {

template <class Table>
inline __attribute__((always_inline)) const Table& selected_table(const Table* vector,
                                                                  const Table& (*scalar)() noexcept) noexcept {
  return vector != nullptr ? *vector : scalar();
}

}  // namespace detail
}  // namespace microattn
