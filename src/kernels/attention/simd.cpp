// xsimd kernels, compiled for the one architecture the build targets (xsimd::default_arch: the best the
// compiler flags enable). Tile shapes are chosen per architecture from its register count and width.
#include "kernels/avx512_warnings.hpp"

// The kernel families, in this order: each uses what the ones before it define, and the translation unit stays
// the one file it was (the same definitions in the same order, so GCC inlines as before).
// clang-format off
#include "kernels/attention/simd_common.hpp"
#include "kernels/exp/simd.hpp"
#include "kernels/attention/simd_gemm.hpp"
#include "kernels/attention/simd_tiles.hpp"
#include "kernels/attention/simd_rows.hpp"
#include "kernels/attention/simd_rows_neon.hpp"
// clang-format on

namespace microattn {
namespace detail {
namespace {

// matmul: up to gemm_small_m rows of a go through the row kernels, which read b in place (b transposed: dot
// products with its rows; not transposed: AXPYs over them) instead of packing all of b for a handful of rows.
constexpr std::size_t gemm_small_m = 8;

void gemm_simd(const GemmArgs& g) noexcept {
  if (g.m <= gemm_small_m) {
    if (g.transpose_b)
      rows_dot_simd(g.a, g.lda, g.m, g.k, g.b, g.ldb, g.n, g.c, g.ldc);
    else
      rows_axpy_simd(g.a, g.lda, g.m, g.k, g.b, g.ldb, g.n, nullptr, g.c, g.ldc);
    return;
  }
  gemm_packed_simd(g);
}

// Attention takes the few-query path up to half a vector of queries: the tile path costs a vector of queries
// whatever the tile holds, the few-query path one query at a time (bench_decode_peers BM_few_path,
// bench/results/decode_peers_avx512.txt).
#if XSIMD_WITH_NEON
// NEON (4 lanes): a tile costs a whole vector of 4 queries, 5 to 8 queries cost two; by the instruction counts of
// decoding under qemu (scripts/arm_bench.sh) the few-query path is cheaper up to 7 queries on AArch64, 6 on ARMv7.
constexpr std::size_t few_query_max = XSIMD_WITH_NEON64 ? 7 : 6;
#else
constexpr std::size_t few_query_max = lanes / 2;
#endif

// The row kernels of the table: NEON has its own (above).
#if XSIMD_WITH_NEON
constexpr auto table_rows_dot = &rows_dot_neon;
constexpr auto table_rows_softmax = &rows_softmax_simd;  // as fast as a NEON one: the exp is most of it
constexpr auto table_rows_axpy = &rows_axpy_neon;
#else
constexpr auto table_rows_dot = &rows_dot_simd;
constexpr auto table_rows_softmax = &rows_softmax_simd;
constexpr auto table_rows_axpy = &rows_axpy_simd;
#endif

// AArch32 Advanced SIMD has no subnormals: it flushes them to zero whatever FPSCR says.
constexpr bool flushes_subnormals = XSIMD_WITH_NEON && !XSIMD_WITH_NEON64;

const Kernels simd_table{MICROATTN_SIMD_ARCH,
                         lanes,
                         MICROATTN_GEMM_NAME,
                         flushes_subnormals,
                         gemm_simd,
                         softmax_row_simd,
                         exp_simd,
                         attn_scores_simd,
                         attn_softmax_simd,
                         attn_pv_simd,
                         attn_pack_q_simd,
                         attn_store_out_simd,
                         exp2_nonpositive_simd,
                         few_query_max,
                         table_rows_dot,
                         table_rows_softmax,
                         table_rows_axpy};

}  // namespace

const Kernels* vector_kernels() noexcept { return &simd_table; }
const char* simd_arch_name() noexcept { return arch::name(); }

}  // namespace detail
}  // namespace microattn