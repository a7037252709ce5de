// The K/V cache's scalar table (every build), and no vector table where the build has none.
#include "kernels/cache/rows_scalar.hpp"

namespace microattn {
namespace detail {
namespace {

using ScalarFused = FusedEntries<rows_dot_scalar<true, std::uint16_t>, rows_dot_scalar<false, std::int8_t>,
                                 rows_axpy_scalar<true, std::uint16_t>, rows_axpy_scalar<false, std::int8_t>>;
constexpr CacheKernels scalar_table =
    cache_table<ScalarFused, f16_rows<f16_row_scalar>, q8_rows<q8_row_scalar>>("scalar");

}  // namespace

const CacheKernels& scalar_cache_kernels() noexcept { return scalar_table; }
#if !MICROATTN_CACHE_X86 && !MICROATTN_CACHE_NEON
const CacheKernels* vector_cache_kernels() noexcept { return nullptr; }
#endif

}  // namespace detail
}  // namespace microattn
