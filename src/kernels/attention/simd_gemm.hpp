// The matmul micro-kernels (xsimd, and NEON's multiply-by-lane tiles), their tables (attention's tiles too),
// the packing of b and the packed loop nest that gemm runs for more than a few rows.
#pragma once

#include "kernels/attention/simd_common.hpp"

namespace microattn {
namespace detail {
namespace {

// --- gemm ------------------------------------------------------------------------------------------------
// GotoBLAS/BLIS loop nest without packing A (as XNNPACK): rows of a are broadcast straight from memory (the
// broadcast folds into the FMA's memory operand), b is packed kc × NR panel by panel into a stack buffer, so
// the micro-kernel reads b contiguously whatever its stride or transposition. Loop order: jc (nc columns of
// b, the packed block stays in L2) → pc (kc of the inner dimension) → ic (MR rows of a: MR·kc floats stay in
// L1 across the jr loop) → jr (one NR-wide panel, streamed from L2).

#if XSIMD_WITH_AVX512F
constexpr std::size_t gemm_mr = 8, gemm_nv = 2;  // 16 of 32 zmm accumulate, 8×32 tile
#define MICROATTN_SIMD_ARCH "avx512"
#define MICROATTN_GEMM_NAME "gemm_8x32_avx512"
#elif XSIMD_WITH_AVX
constexpr std::size_t gemm_mr = 6, gemm_nv = 2;  // 12 of 16 ymm, 6×16
#define MICROATTN_SIMD_ARCH "avx2"
#define MICROATTN_GEMM_NAME "gemm_6x16_avx2"
#elif XSIMD_WITH_NEON64
// NEON tiles (gemm_mrxnr_neon below): MR·NV accumulators, MR vectors of a (four k-steps of a row each, used by
// lane), one or two vectors of b: 16 + 8 + 2 of 32 registers.
constexpr std::size_t gemm_mr = 8, gemm_nv = 2;
#define MICROATTN_SIMD_ARCH "neon64"
#define MICROATTN_GEMM_NAME "gemm_8x8_neon64"
#elif XSIMD_WITH_NEON
// ARMv7: 16 q registers: 8 accumulators + 4 of a + 2 of b (a lane operand must sit in d0–d15, i.e. q0–q7).
constexpr std::size_t gemm_mr = 4, gemm_nv = 2;
#define MICROATTN_SIMD_ARCH "neon"
#define MICROATTN_GEMM_NAME "gemm_4x8_neon"
#else  // sse2: 16 registers of 4 floats
constexpr std::size_t gemm_mr = 6, gemm_nv = 2;  // 12 of 16, 6×8
#define MICROATTN_SIMD_ARCH "sse2"
#define MICROATTN_GEMM_NAME "gemm_6x8_sse2"
#endif
constexpr std::size_t gemm_nr = gemm_nv * lanes;
constexpr std::size_t gemm_kc = matmul_block_k;
constexpr std::size_t gemm_nc = matmul_block_n - matmul_block_n % gemm_nr;
static_assert(gemm_nc >= gemm_nr, "matmul_block_n must hold at least one register tile");

// What the micro-kernel does with its result: c = acc, c += acc, or c = c·scale[col] + acc (the rescale of
// the online softmax, fused into the P·V update so the accumulator is read and written once per key block).
enum class Epilogue { store, add, scale_add };

// c[0..MR)[0..NR) ⟵ a[0..MR)[0..kc) · b[0..kc)[0..NR), b rows ldb apart (a packed panel, or a transposed
// attention tile) and 64-byte aligned. a is row-major (element (r, p) at a[r·lda + p]) or, with AColMajor,
// column-major (a[r + p·lda]: the rows of V seen as columns, for P·V). The epilogue is a template argument:
// with a run-time choice GCC keeps the accumulators in memory across the three paths.
template <std::size_t MR, std::size_t NV, bool AColMajor, Epilogue E>
void gemm_mrxnr_simd(const float* a, std::size_t lda, const float* b, std::size_t ldb, std::size_t kc, float* c,
                     std::size_t ldc, const float* col_scale) noexcept {
  vfloat acc[MR][NV];
  for (std::size_t r = 0; r < MR; ++r)
    for (std::size_t v = 0; v < NV; ++v) acc[r][v] = vfloat(0.0f);
  for (std::size_t p = 0; p < kc; ++p) {
    vfloat bv[NV];
    for (std::size_t v = 0; v < NV; ++v) bv[v] = vfloat::load_aligned(b + p * ldb + v * lanes);
    for (std::size_t r = 0; r < MR; ++r) {
      const vfloat ar(AColMajor ? a[r + p * lda] : a[r * lda + p]);
      for (std::size_t v = 0; v < NV; ++v) acc[r][v] = xsimd::fma(ar, bv[v], acc[r][v]);
    }
  }
  for (std::size_t r = 0; r < MR; ++r)
    for (std::size_t v = 0; v < NV; ++v) {
      float* cp = c + r * ldc + v * lanes;
      vfloat out = acc[r][v];
      if (E == Epilogue::add) out += vfloat::load_unaligned(cp);
      if (E == Epilogue::scale_add)
        out = xsimd::fma(vfloat::load_unaligned(cp), vfloat::load_aligned(col_scale + v * lanes), out);
      out.store_unaligned(cp);
    }
}

#if XSIMD_WITH_NEON
// NEON micro-kernel (AArch64 and ARMv7), used in place of gemm_mrxnr_simd. Same contract; what differs is how a reaches
// the FMAs: xsimd can only broadcast one float per register (a load-and-duplicate per row and k-step, and GCC 12
// then keeps acc[][] on the stack), whereas NEON multiplies by a lane: one vector load brings four floats of a,
// used by the four lane-indexed FMAs (AArch64 FMLA by element; ARMv7 has no fused multiply-add by scalar, so
// VMLA by scalar, which rounds the product once more — as SSE2, within the matmul and attention bounds).
// Row-major a: one load holds four k-steps of one row. Column-major a (P·V): one load holds four rows of one k-step.
// Raw float32x4_t arrays with constant indices only, loops fully unrolled: GCC keeps them in registers
// (scripts/arm_bench.sh reads the disassembly and fails on any stack access inside a tile's loops).

template <int L>
MICROATTN_NEON_INLINE float32x4_t neon_fma_lane(float32x4_t acc, float32x4_t b, float32x4_t a) noexcept {
#if XSIMD_WITH_NEON64
  return vfmaq_laneq_f32(acc, b, a, L);
#else
  return vmlaq_lane_f32(acc, b, L < 2 ? vget_low_f32(a) : vget_high_f32(a), L & 1);
#endif
}

MICROATTN_NEON_INLINE float32x4_t neon_fma(float32x4_t acc, float32x4_t b, float32x4_t a) noexcept {
#if XSIMD_WITH_NEON64
  return vfmaq_f32(acc, b, a);
#else
  return vmlaq_f32(acc, b, a);
#endif
}

// Row-major a, k-step U of the four held in av[r]: acc[r][v] += b[U][v] · av[r][U].
template <int U, std::size_t MR, std::size_t NV>
MICROATTN_NEON_INLINE void neon_step_rows(float32x4_t (&acc)[MR][NV], const float32x4_t (&av)[MR],
                                          const float* b) noexcept {
#if !XSIMD_WITH_NEON64
  // ARMv7: GCC's scheduler would hoist the b loads of all four steps (8 more registers than 16 hold) and spill
  // accumulators; a compiler barrier keeps each step's loads with its FMAs.
  asm volatile("" ::: "memory");
#endif
  MICROATTN_NEON_UNROLL
  for (std::size_t v = 0; v < NV; ++v) {
    const float32x4_t bv = vld1q_f32(b + v * 4);
    MICROATTN_NEON_UNROLL
    for (std::size_t r = 0; r < MR; ++r) acc[r][v] = neon_fma_lane<U>(acc[r][v], bv, av[r]);
  }
}

// Column-major a, one k-step: row r's value is lane r % 4 of ag[r / 4] (whole groups of four rows), the last
// MR % 4 rows are broadcast one by one.
template <int L, std::size_t MR, std::size_t NV>
MICROATTN_NEON_INLINE void neon_step_group(float32x4_t (&acc)[MR][NV], std::size_t r, float32x4_t bv, std::size_t v,
                                           float32x4_t ag) noexcept {
  acc[r + L][v] = neon_fma_lane<L>(acc[r + L][v], bv, ag);
}

// Column-major a, one k-step: ap holds the MR rows' values, b the NV vectors.
template <std::size_t MR, std::size_t NV>
MICROATTN_NEON_INLINE void neon_step_cols(float32x4_t (&acc)[MR][NV], const float* ap, const float* b) noexcept {
  constexpr std::size_t groups = MR / 4;
  float32x4_t ag[groups > 0 ? groups : 1];
  MICROATTN_NEON_UNROLL
  for (std::size_t g = 0; g < groups; ++g) ag[g] = vld1q_f32(ap + 4 * g);
  MICROATTN_NEON_UNROLL
  for (std::size_t v = 0; v < NV; ++v) {
    const float32x4_t bv = vld1q_f32(b + v * 4);
    MICROATTN_NEON_UNROLL
    for (std::size_t g = 0; g < groups; ++g) {
      neon_step_group<0>(acc, 4 * g, bv, v, ag[g]);
      neon_step_group<1>(acc, 4 * g, bv, v, ag[g]);
      neon_step_group<2>(acc, 4 * g, bv, v, ag[g]);
      neon_step_group<3>(acc, 4 * g, bv, v, ag[g]);
    }
    MICROATTN_NEON_UNROLL
    for (std::size_t r = 4 * groups; r < MR; ++r) acc[r][v] = neon_fma(acc[r][v], bv, vld1q_dup_f32(ap + r));
  }
}

// LDB: the row stride of b, known per table (matmul's packed panels: gemm_nr; attention tiles: br), so the
// loads of b take immediate offsets (LDP pairs) instead of one register-offset load and add each.
template <std::size_t MR, std::size_t NV, bool AColMajor, Epilogue E, std::size_t LDB>
void gemm_mrxnr_neon(const float* a, std::size_t lda, const float* b, std::size_t /*ldb == LDB*/, std::size_t kc,
                     float* c, std::size_t ldc, const float* col_scale) noexcept {
  constexpr std::size_t ldb = LDB;
  float32x4_t acc[MR][NV];
  MICROATTN_NEON_UNROLL
  for (std::size_t r = 0; r < MR; ++r) MICROATTN_NEON_UNROLL
  for (std::size_t v = 0; v < NV; ++v) acc[r][v] = vdupq_n_f32(0.0f);
  std::size_t p = 0;
  if (!AColMajor) {
    for (; p + 4 <= kc; p += 4) {
      float32x4_t av[MR];
      MICROATTN_NEON_UNROLL
      for (std::size_t r = 0; r < MR; ++r) av[r] = vld1q_f32(a + r * lda + p);
      neon_step_rows<0>(acc, av, b + p * ldb);
      neon_step_rows<1>(acc, av, b + (p + 1) * ldb);
      neon_step_rows<2>(acc, av, b + (p + 2) * ldb);
      neon_step_rows<3>(acc, av, b + (p + 3) * ldb);
    }
    for (; p < kc; ++p)  // the last kc % 4 steps, one broadcast per row
      MICROATTN_NEON_UNROLL
    for (std::size_t v = 0; v < NV; ++v) {
      const float32x4_t bv = vld1q_f32(b + p * ldb + v * 4);
      MICROATTN_NEON_UNROLL
      for (std::size_t r = 0; r < MR; ++r) acc[r][v] = neon_fma(acc[r][v], bv, vld1q_dup_f32(a + r * lda + p));
    }
  } else {
    // Unrolled by four k-steps: the loop's own increments and branch are then a few percent of the FMAs.
    for (; p + 4 <= kc; p += 4) {
      neon_step_cols<MR, NV>(acc, a + p * lda, b + p * ldb);
      neon_step_cols<MR, NV>(acc, a + (p + 1) * lda, b + (p + 1) * ldb);
      neon_step_cols<MR, NV>(acc, a + (p + 2) * lda, b + (p + 2) * ldb);
      neon_step_cols<MR, NV>(acc, a + (p + 3) * lda, b + (p + 3) * ldb);
    }
    for (; p < kc; ++p) neon_step_cols<MR, NV>(acc, a + p * lda, b + p * ldb);
  }
  MICROATTN_NEON_UNROLL
  for (std::size_t r = 0; r < MR; ++r) MICROATTN_NEON_UNROLL
  for (std::size_t v = 0; v < NV; ++v) {
    float* cp = c + r * ldc + v * 4;
    float32x4_t out = acc[r][v];
    if (E == Epilogue::add) out = vaddq_f32(out, vld1q_f32(cp));
    if (E == Epilogue::scale_add) out = neon_fma(out, vld1q_f32(cp), vld1q_f32(col_scale + v * 4));
    vst1q_f32(cp, out);
  }
}
#endif

using gemm_tile_fn = void (*)(const float*, std::size_t, const float*, std::size_t, std::size_t, float*, std::size_t,
                              const float*) noexcept;

// One entry per row count 1..MR (the ragged bottom edge): [rows − 1].
// Attention's register tiles may be taller than matmul's (its loops are short, so fewer, bigger calls pay).
#ifndef MICROATTN_ATTN_MR
#define MICROATTN_ATTN_MR gemm_mr
#endif
constexpr std::size_t attn_mr = MICROATTN_ATTN_MR;
// One-vector tiles: the same height (tried twice as tall: no faster, as 16 broadcasts per 16 FMAs load-bound it).
constexpr std::size_t attn_mr_1v = attn_mr;

// One entry per row count 1..MR (the ragged bottom edge): [rows − 1].
template <std::size_t MR>
struct TileTable {
  gemm_tile_fn fn[MR];
};
// LDB: the b row stride the table's callers pass (the NEON tiles take it as a constant; the others ignore it).
template <std::size_t NV, bool AColMajor, Epilogue E, std::size_t LDB, std::size_t... I>
constexpr TileTable<sizeof...(I)> make_tile_table(std::index_sequence<I...>) {
#if XSIMD_WITH_NEON
  return TileTable<sizeof...(I)>{{&gemm_mrxnr_neon<I + 1, NV, AColMajor, E, LDB>...}};
#else
  return TileTable<sizeof...(I)>{{&gemm_mrxnr_simd<I + 1, NV, AColMajor, E>...}};
#endif
}
constexpr auto mr_rows = std::make_index_sequence<gemm_mr>{};
constexpr auto attn_rows = std::make_index_sequence<attn_mr>{};
constexpr auto attn_rows_1v = std::make_index_sequence<attn_mr_1v>{};
constexpr auto gemm_tiles_store = make_tile_table<gemm_nv, false, Epilogue::store, gemm_nr>(mr_rows);
constexpr auto gemm_tiles_add = make_tile_table<gemm_nv, false, Epilogue::add, gemm_nr>(mr_rows);
constexpr auto attn_tiles_qk = make_tile_table<gemm_nv, false, Epilogue::store, attention_block_q>(attn_rows);
constexpr auto attn_tiles_pv = make_tile_table<gemm_nv, true, Epilogue::scale_add, attention_block_q>(attn_rows);
// One vector wide: the last few queries of an attention tile (all of them when n_q is tiny).
constexpr auto attn_tiles_qk_1v = make_tile_table<1, false, Epilogue::store, attention_block_q>(attn_rows_1v);
constexpr auto attn_tiles_pv_1v = make_tile_table<1, true, Epilogue::scale_add, attention_block_q>(attn_rows_1v);

// Packs columns [j0, j0 + nc) × inner [p0, p0 + kc) of b into NR-wide panels, zero-padded on the right.
void pack_b(const GemmArgs& g, std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc, float* bp) noexcept {
  for (std::size_t jr = 0; jr < nc; jr += gemm_nr) {
    const std::size_t nr = nc - jr < gemm_nr ? nc - jr : gemm_nr;
    float* panel = bp + jr * kc;
    if (g.transpose_b) {
      // b is n × k: a column of the panel is a contiguous row of b.
      for (std::size_t j = 0; j < nr; ++j) {
        const float* src = g.b + (j0 + jr + j) * g.ldb + p0;
        for (std::size_t p = 0; p < kc; ++p) panel[p * gemm_nr + j] = src[p];
      }
    } else {
      for (std::size_t p = 0; p < kc; ++p) {
        const float* src = g.b + (p0 + p) * g.ldb + j0 + jr;
        for (std::size_t j = 0; j < nr; ++j) panel[p * gemm_nr + j] = src[j];
      }
    }
    if (nr < gemm_nr)
      for (std::size_t p = 0; p < kc; ++p)
        for (std::size_t j = nr; j < gemm_nr; ++j) panel[p * gemm_nr + j] = 0.0f;
  }
}

void gemm_packed_simd(const GemmArgs& g) noexcept {
  alignas(64) float bp[gemm_kc * gemm_nc];
  alignas(64) float edge[gemm_mr * gemm_nr];  // ragged right edge: computed whole here, then copied
  for (std::size_t jc = 0; jc < g.n; jc += gemm_nc) {
    const std::size_t nc = g.n - jc < gemm_nc ? g.n - jc : gemm_nc;
    for (std::size_t pc = 0; pc < g.k; pc += gemm_kc) {
      const std::size_t kc = g.k - pc < gemm_kc ? g.k - pc : gemm_kc;
      pack_b(g, pc, kc, jc, nc, bp);
      const bool first = pc == 0;
      for (std::size_t ic = 0; ic < g.m; ic += gemm_mr) {
        const std::size_t mr = g.m - ic < gemm_mr ? g.m - ic : gemm_mr;
        const float* a = g.a + ic * g.lda + pc;
        for (std::size_t jr = 0; jr < nc; jr += gemm_nr) {
          const std::size_t nr = nc - jr < gemm_nr ? nc - jr : gemm_nr;
          float* c = g.c + ic * g.ldc + jc + jr;
          if (nr == gemm_nr) {
            (first ? gemm_tiles_store : gemm_tiles_add)
                .fn[mr - 1](a, g.lda, bp + jr * kc, gemm_nr, kc, c, g.ldc, nullptr);
            continue;
          }
          gemm_tiles_store.fn[mr - 1](a, g.lda, bp + jr * kc, gemm_nr, kc, edge, gemm_nr, nullptr);
          for (std::size_t r = 0; r < mr; ++r)
            for (std::size_t j = 0; j < nr; ++j)
              c[r * g.ldc + j] = first ? edge[r * gemm_nr + j] : c[r * g.ldc + j] + edge[r * gemm_nr + j];
        }
      }
    }
  }
}

}  // namespace
}  // namespace detail
}  // namespace microattn
