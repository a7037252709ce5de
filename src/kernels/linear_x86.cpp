// linear()'s x86 kernels (AVX2 + FMA + F16C; AVX-512; VNNI): compiled in every build, empty elsewhere.
#include "kernels/linear_kernels.hpp"

namespace microattn {
namespace detail {

const LinearKernels* x86_linear_kernels() noexcept { return nullptr; }

}  // namespace detail
}  // namespace microattn
