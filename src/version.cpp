#include "microattn/version.hpp"

#include <cstddef>
#include <cstdint>

#include "cpu_features.hpp"
#include "kernels/attention.hpp"

namespace microattn {

const char* simd_arch() noexcept { return detail::simd_arch_name(); }
const char* matmul_kernel_name() noexcept { return detail::selected_kernels().gemm_name; }

namespace detail {
namespace {

// Which features this translation unit, compiled with the library's arch flags, has on; the first entry is none
// (the array stays non-empty where the table is).
#define MICROATTN_CPU_ON_ENTRY(name, macro, ...) MICROATTN_CPU_MACRO_ON(macro),
constexpr bool compiled_on[] = {false, MICROATTN_CPU_FEATURES(MICROATTN_CPU_ON_ENTRY)};
#undef MICROATTN_CPU_ON_ENTRY
static_assert(sizeof compiled_on - 1 <= 64, "a feature mask has 64 bits");

constexpr std::uint64_t compiled_mask() noexcept {
  std::uint64_t mask = 0;
  for (std::size_t i = 1; i < sizeof compiled_on; ++i)
    if (compiled_on[i]) mask |= std::uint64_t{1} << (i - 1);
  return mask;
}

}  // namespace

// A constant, not code: the check (cpu_check.cpp) reads it on CPUs that cannot run this file's functions.
extern const std::uint64_t compiled_cpu_features = compiled_mask();

}  // namespace detail
}  // namespace microattn
