// Builds without an xsimd architecture (Cortex-M, -Dsimd=scalar): there is no vector kernel table.
#include "kernels/kernels.hpp"

namespace microattn {
namespace detail {

const Kernels* simd_kernels() noexcept { return nullptr; }

}  // namespace detail
}  // namespace microattn
