#include "microattn/version.hpp"

#include "kernels/kernels.hpp"

namespace microattn {

const char* simd_arch() noexcept { return detail::selected_kernels().name; }
const char* matmul_kernel_name() noexcept { return detail::selected_kernels().gemm_name; }

}  // namespace microattn
