// The fp32 bias every weight format's linear kernels add (nullptr: none).
#pragma once

#include <cstddef>

namespace microattn {
namespace detail {

// Internal linkage, as each kernel file had it: GCC then knows which registers it clobbers (IPA-RA) and the
// kernels around its calls stay as they were (-Os on Cortex-M keeps it out of line).
static inline float bias_of(const float* bias, std::size_t r) noexcept { return bias != nullptr ? bias[r] : 0.0f; }

}  // namespace detail
}  // namespace microattn
