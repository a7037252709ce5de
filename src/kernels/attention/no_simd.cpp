// Builds without an xsimd architecture (Cortex-M, -Dsimd=scalar): there is no vector kernel table.
#include "kernels/attention.hpp"

namespace microattn {
namespace detail {

const Kernels* vector_kernels() noexcept { return nullptr; }
const char* simd_arch_name() noexcept { return "scalar"; }

}  // namespace detail
}  // namespace microattn
