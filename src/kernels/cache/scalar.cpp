// The K/V cache's scalar table (every build), and no vector table where the build has none.
#include "kernels/cache/rows_scalar.hpp"

namespace microattn {
namespace detail {
namespace {

using ScalarFused = FusedEntries<scalar_dot_entry<true, std::uint16_t>, scalar_dot_entry<false, std::int8_t>,
                                 scalar_axpy_entry<true, std::uint16_t>, scalar_axpy_entry<false, std::int8_t>>;
constexpr CacheKernels scalar_table =
    cache_table<ScalarFused, f16_convert_rows<cache_f16_convert_scalar>, q8_convert_rows<cache_q8_convert_scalar>>(
        "scalar");

}  // namespace

const CacheKernels& scalar_cache_kernels() noexcept { return scalar_table; }
#if !MICROATTN_CACHE_X86 && !MICROATTN_CACHE_NEON
const CacheKernels* vector_cache_kernels() noexcept { return nullptr; }
#endif

}  // namespace detail
}  // namespace microattn
