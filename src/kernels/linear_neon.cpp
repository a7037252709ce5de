// linear()'s NEON kernels (AArch64, ARMv7 NEON): compiled in every build, empty elsewhere.
#include "kernels/linear_kernels.hpp"

namespace microattn {
namespace detail {

const LinearKernels* neon_linear_kernels() noexcept { return nullptr; }

}  // namespace detail
}  // namespace microattn
