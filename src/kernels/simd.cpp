// xsimd kernels, compiled for the one architecture the build targets (xsimd::default_arch: the best the
// compiler flags enable). Tile shapes are chosen per architecture from its register count and width.
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 flags the deliberately undefined pass-through operand of _mm512_undefined_ps() inside AVX-512
// intrinsics (max, min, …) as "(may be) used uninitialized" once inlined here: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <xsimd/xsimd.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/exp_constants.hpp"
#include "kernels/kernels.hpp"
#include "kernels/scalar_math.hpp"
#include "microattn/config.hpp"

namespace microattn {
namespace detail {
namespace {

using arch = xsimd::default_arch;
using vfloat = xsimd::batch<float, arch>;
using vint = xsimd::batch<std::int32_t, arch>;
constexpr std::size_t lanes = vfloat::size;
constexpr std::size_t line_floats = 64 / sizeof(float);  // floats per cache line (prefetch steps, line alignment)

// Reinterpreting casts. xsimd 8.1's bitwise_cast on NEON calls vreinterpretq_* through a function-pointer table
// that GCC 12 does not inline: a call per cast inside the exp loops, which spills every live vector register.
#if XSIMD_WITH_NEON
inline vint bits_as_int(vfloat x) noexcept { return vreinterpretq_s32_f32(x); }
inline vfloat bits_as_float(vint x) noexcept { return vreinterpretq_f32_s32(x); }
#else
inline vint bits_as_int(vfloat x) noexcept { return xsimd::bitwise_cast<vint>(x); }
inline vfloat bits_as_float(vint x) noexcept { return xsimd::bitwise_cast<vfloat>(x); }
#endif

// --- exp -------------------------------------------------------------------------------------------------

// e^x per lane; algorithm and constants in exp_constants.hpp, identical to exp_scalar().
inline vfloat exp_vec(vfloat x) noexcept {
  using namespace exp_constants;
  // On x86, max/min return their SECOND operand when either is NaN, and NEON's propagate NaN: a NaN x
  // passes both clamps and comes out as NaN (tested).
  x = xsimd::max(vfloat(x_min), x);
  x = xsimd::min(vfloat(x_max), x);
  const vfloat t = xsimd::fma(x, vfloat(log2e), vfloat(round_magic));
  const vfloat n = t - vfloat(round_magic);
  vfloat r = xsimd::fma(n, vfloat(-ln2_hi), x);
  r = xsimd::fma(n, vfloat(-ln2_lo), r);
  vfloat p = xsimd::fma(vfloat(c6), r, vfloat(c5));
  p = xsimd::fma(p, r, vfloat(c4));
  p = xsimd::fma(p, r, vfloat(c3));
  p = xsimd::fma(p, r, vfloat(c2));
  p = xsimd::fma(p, r, vfloat(c1));
  p = xsimd::fma(p, r, vfloat(c0));
  const vint ni = bits_as_int(t) - vint(static_cast<std::int32_t>(float_bits(round_magic)));
  const vint e1 = ni >> 1;
  const vint e2 = ni - e1;
  const vfloat s1 = bits_as_float((e1 + vint(127)) << 23);
  const vfloat s2 = bits_as_float((e2 + vint(127)) << 23);
  return (p * s1) * s2;
}

void exp_simd(const float* x, float* y, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) exp_vec(vfloat::load_unaligned(x + i)).store_unaligned(y + i);
  if (i < n) {
    alignas(64) float tail[lanes] = {};
    for (std::size_t j = i; j < n; ++j) tail[j - i] = x[j];
    exp_vec(vfloat::load_aligned(tail)).store_aligned(tail);
    for (std::size_t j = i; j < n; ++j) y[j] = tail[j - i];
  }
}

// --- softmax ---------------------------------------------------------------------------------------------

inline float horizontal_max(vfloat v) noexcept {  // xsimd 8.1 has no reduce_max
#if XSIMD_WITH_AVX512F
  return _mm512_reduce_max_ps(v);  // a tree of 4 shuffles and maxes instead of 15 dependent scalar compares
#endif
  alignas(64) float l[lanes];
  v.store_aligned(l);
  float m = l[0];
  for (std::size_t i = 1; i < lanes; ++i) m = l[i] > m ? l[i] : m;
  return m;
}

void softmax_row_simd(float* x, std::size_t n) noexcept {
  // The tail (n % lanes) goes through a padded copy so every element sees the same vector exp.
  const std::size_t body = n - n % lanes;
  const std::size_t tail = n - body;
  alignas(64) float pad[lanes];
  for (std::size_t j = 0; j < lanes; ++j) pad[j] = j < tail ? x[body + j] : -INFINITY;

  vfloat vmax = vfloat::load_aligned(pad);
  for (std::size_t i = 0; i < body; i += lanes) vmax = xsimd::max(vmax, vfloat::load_unaligned(x + i));
  const float m = horizontal_max(vmax);
  if (m == -INFINITY) {  // all −inf, possibly with NaNs that max dropped: zeros, or NaN if a NaN is there
    bool has_nan = false;
    for (std::size_t i = 0; i < n; ++i) has_nan = has_nan || x[i] != x[i];
    for (std::size_t i = 0; i < n; ++i) x[i] = has_nan ? NAN : 0.0f;
    return;
  }
  // A NaN (or +inf, where inf − inf is NaN) anywhere makes its exp NaN, hence the sum, hence the whole row.
  const vfloat vm(m);
  vfloat vsum(0.0f);
  for (std::size_t i = 0; i < body; i += lanes) {
    const vfloat e = exp_vec(vfloat::load_unaligned(x + i) - vm);
    e.store_unaligned(x + i);
    vsum += e;
  }
  const vfloat etail = exp_vec(vfloat::load_aligned(pad) - vm);  // padding: exp(−inf) = 0
  vsum += etail;
  const vfloat inv(1.0f / xsimd::hadd(vsum));
  for (std::size_t i = 0; i < body; i += lanes) (vfloat::load_unaligned(x + i) * inv).store_unaligned(x + i);
  (etail * inv).store_aligned(pad);
  for (std::size_t j = 0; j < tail; ++j) x[body + j] = pad[j];
}

// --- gemm ------------------------------------------------------------------------------------------------
// GotoBLAS/BLIS loop nest without packing A (as XNNPACK): rows of a are broadcast straight from memory (the
// broadcast folds into the FMA's memory operand), b is packed kc × NR panel by panel into a stack buffer, so
// the micro-kernel reads b contiguously whatever its stride or transposition. Loop order: jc (nc columns of
// b, the packed block stays in L2) → pc (kc of the inner dimension) → ic (MR rows of a: MR·kc floats stay in
// L1 across the jr loop) → jr (one NR-wide panel, streamed from L2).

#if XSIMD_WITH_AVX512F
constexpr std::size_t gemm_mr = 8, gemm_nv = 2;  // 16 of 32 zmm accumulate, 8×32 tile
#define MICROATTN_GEMM_NAME "gemm_8x32_avx512"
#elif XSIMD_WITH_AVX
constexpr std::size_t gemm_mr = 6, gemm_nv = 2;  // 12 of 16 ymm, 6×16
#define MICROATTN_GEMM_NAME "gemm_6x16_avx2"
#elif XSIMD_WITH_NEON64
// NEON tiles (gemm_tile_neon below): MR·NV accumulators, MR vectors of a (four k-steps of a row each, used by
// lane), one or two vectors of b: 16 + 8 + 2 of 32 registers.
constexpr std::size_t gemm_mr = 8, gemm_nv = 2;
#define MICROATTN_GEMM_NAME "gemm_8x8_neon64"
#elif XSIMD_WITH_NEON
// ARMv7: 16 q registers: 8 accumulators + 4 of a + 2 of b (a lane operand must sit in d0–d15, i.e. q0–q7).
constexpr std::size_t gemm_mr = 4, gemm_nv = 2;
#define MICROATTN_GEMM_NAME "gemm_4x8_neon"
#else  // sse2: 16 registers of 4 floats
constexpr std::size_t gemm_mr = 6, gemm_nv = 2;  // 12 of 16, 6×8
#define MICROATTN_GEMM_NAME "gemm_6x8_sse2_neon"
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
void gemm_tile(const float* a, std::size_t lda, const float* b, std::size_t ldb, std::size_t kc, float* c,
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
// NEON micro-kernel (AArch64 and ARMv7), used in place of gemm_tile. Same contract; what differs is how a reaches
// the FMAs: xsimd can only broadcast one float per register (a load-and-duplicate per row and k-step, and GCC 12
// then keeps acc[][] on the stack), whereas NEON multiplies by a lane: one vector load brings four floats of a,
// used by the four lane-indexed FMAs (AArch64 FMLA by element; ARMv7 has no fused multiply-add by scalar, so
// VMLA by scalar, which rounds the product once more — as SSE2, within the matmul and attention bounds).
// Row-major a: one load holds four k-steps of one row. Column-major a (P·V): one load holds four rows of one k-step.
// Raw float32x4_t arrays with constant indices only, loops fully unrolled: GCC keeps them in registers
// (scripts/arm_bench.sh reads the disassembly and fails on any stack access inside a tile's loops).
#define MICROATTN_NEON_INLINE inline __attribute__((always_inline))
// Loops over rows and vectors unrolled before GCC decides what lives in registers (else acc[][] goes to the stack).
#define MICROATTN_NEON_UNROLL _Pragma("GCC unroll 16")

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
void gemm_tile_neon(const float* a, std::size_t lda, const float* b, std::size_t /*ldb == LDB*/, std::size_t kc,
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
  return TileTable<sizeof...(I)>{{&gemm_tile_neon<I + 1, NV, AColMajor, E, LDB>...}};
#else
  return TileTable<sizeof...(I)>{{&gemm_tile<I + 1, NV, AColMajor, E>...}};
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

void gemm_packed(const GemmArgs& g) noexcept {
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

// --- transposes ------------------------------------------------------------------------------------------
// rows[r] lane c ⟶ rows[c] lane r, in registers. Attention moves each query tile in and out of its
// queries-in-lanes layout once; done a float at a time that cost ~6 % at n = 256 and most of a tiny call.
// xsimd 8.1 has no transpose (and its zip_lo/zip_hi interleave within 128-bit lanes), hence intrinsics.

// Always inlined: a call would send the whole block through memory twice.
#define MICROATTN_TRANSPOSE inline __attribute__((always_inline)) void transpose_block

#if XSIMD_WITH_AVX512F
#define MICROATTN_HAVE_TRANSPOSE 1
MICROATTN_TRANSPOSE(vfloat* rows) noexcept {  // 16 × 16
  __m512 t[16], u[16];
  for (int k = 0; k < 8; ++k) {  // 32-bit interleave of row pairs, within 128-bit lanes
    t[2 * k] = _mm512_unpacklo_ps(rows[2 * k], rows[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(rows[2 * k], rows[2 * k + 1]);
  }
  for (int k = 0; k < 4; ++k) {  // u[4k + j], lane L = column 4L + j of rows 4k .. 4k + 3
    u[4 * k + 0] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {  // gather lane L of u[j], u[4 + j], u[8 + j], u[12 + j] into row 4L + j
    const __m512 x0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44), x1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xee);
    const __m512 y0 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44);
    const __m512 y1 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xee);
    rows[j] = _mm512_shuffle_f32x4(x0, y0, 0x88);
    rows[4 + j] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
    rows[8 + j] = _mm512_shuffle_f32x4(x1, y1, 0x88);
    rows[12 + j] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
  }
}
#elif XSIMD_WITH_AVX
#define MICROATTN_HAVE_TRANSPOSE 1
MICROATTN_TRANSPOSE(vfloat* rows) noexcept {  // 8 × 8
  __m256 t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(rows[2 * k], rows[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(rows[2 * k], rows[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    u[4 * k + 0] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    rows[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    rows[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}
#elif XSIMD_WITH_SSE2
#define MICROATTN_HAVE_TRANSPOSE 1
MICROATTN_TRANSPOSE(vfloat* rows) noexcept {  // 4 × 4
  const __m128 t0 = _mm_unpacklo_ps(rows[0], rows[1]), t1 = _mm_unpackhi_ps(rows[0], rows[1]);
  const __m128 t2 = _mm_unpacklo_ps(rows[2], rows[3]), t3 = _mm_unpackhi_ps(rows[2], rows[3]);
  rows[0] = _mm_movelh_ps(t0, t2);
  rows[1] = _mm_movehl_ps(t2, t0);
  rows[2] = _mm_movelh_ps(t1, t3);
  rows[3] = _mm_movehl_ps(t3, t1);
}
#elif XSIMD_WITH_NEON
#define MICROATTN_HAVE_TRANSPOSE 1
MICROATTN_TRANSPOSE(vfloat* rows) noexcept {  // 4 × 4
  const float32x4x2_t a = vtrnq_f32(rows[0], rows[1]), b = vtrnq_f32(rows[2], rows[3]);
  rows[0] = vcombine_f32(vget_low_f32(a.val[0]), vget_low_f32(b.val[0]));
  rows[1] = vcombine_f32(vget_low_f32(a.val[1]), vget_low_f32(b.val[1]));
  rows[2] = vcombine_f32(vget_high_f32(a.val[0]), vget_high_f32(b.val[0]));
  rows[3] = vcombine_f32(vget_high_f32(a.val[1]), vget_high_f32(b.val[1]));
}
#else
#define MICROATTN_HAVE_TRANSPOSE 0
#endif

// --- attention primitives (layout in kernels.hpp) ---------------------------------------------------------

constexpr std::size_t br = attention_block_q;
static_assert(br % gemm_nr == 0, "attention_block_q must be a multiple of the gemm tile width");

// 2^x for x <= 0 or NaN; algorithm and constants in exp_constants.hpp.
inline vfloat exp2_poly(vfloat r) noexcept {
  using namespace exp2_constants;
  vfloat p = xsimd::fma(vfloat(c6), r, vfloat(c5));
  p = xsimd::fma(p, r, vfloat(c4));
  p = xsimd::fma(p, r, vfloat(c3));
  p = xsimd::fma(p, r, vfloat(c2));
  p = xsimd::fma(p, r, vfloat(c1));
  return xsimd::fma(p, r, vfloat(c0));
}

#if XSIMD_WITH_AVX512F
// AVX-512 rounds and scales in one instruction each (vrndscaleps, vscalefps): 10 operations instead of 13.
// n is taken from the unclamped x, so 2^−inf = 0 and anything below 2^−149 is 0 exactly; r uses x clamped
// at −127, so it is never inf − inf. Results between 2^−149 and 2^−126 are subnormal here (the portable
// version flushes them): no probability is that small and still matters.
inline vfloat exp2_nonpositive_vec(vfloat x) noexcept {
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const vfloat xc = xsimd::max(vfloat(exp2_constants::x_min), x);  // NaN passes (see exp_vec)
  const vfloat r = xc - vfloat(_mm512_roundscale_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  return _mm512_scalef_ps(exp2_poly(r), n);
}
#else
inline vfloat exp2_nonpositive_vec(vfloat x) noexcept {
  using namespace exp2_constants;
  x = xsimd::max(vfloat(x_min), x);  // NaN passes (see exp_vec)
  const vfloat t = x + vfloat(round_magic);
  const vfloat r = x - (t - vfloat(round_magic));
  const vint e = (bits_as_int(t) - vint(static_cast<std::int32_t>(float_bits(round_magic)) - 127)) << 23;
  return exp2_poly(r) * bits_as_float(e);
}
#endif

void exp2_nonpositive_simd(const float* x, float* y, std::size_t n) noexcept {
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) exp2_nonpositive_vec(vfloat::load_unaligned(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] = exp2_nonpositive_scalar(x[i]);
}

// Lanes [0, nq) rounded up to whole vectors: full-width panels first, then single vectors.
inline std::size_t lanes_in_use(std::size_t nq) noexcept { return (nq + lanes - 1) / lanes * lanes; }

void attn_scores_simd(const float* qt, std::size_t d_k, const float* k, std::size_t ldk, std::size_t bk, float* s,
                      std::size_t nq) noexcept {
  // s (bk × nq) = k (bk × d_k) · qt (d_k × nq): keys are the tile rows (broadcast from k in place), queries
  // the vector columns.
  const std::size_t width = lanes_in_use(nq);
  std::size_t iq = 0;
  for (; iq + gemm_nr <= width; iq += gemm_nr)
    for (std::size_t j = 0; j < bk; j += attn_mr) {
      const std::size_t mr = bk - j < attn_mr ? bk - j : attn_mr;
      attn_tiles_qk.fn[mr - 1](k + j * ldk, ldk, qt + iq, br, d_k, s + j * br + iq, br, nullptr);
    }
  for (; iq < width; iq += lanes)
    for (std::size_t j = 0; j < bk; j += attn_mr_1v) {
      const std::size_t mr = bk - j < attn_mr_1v ? bk - j : attn_mr_1v;
      attn_tiles_qk_1v.fn[mr - 1](k + j * ldk, ldk, qt + iq, br, d_k, s + j * br + iq, br, nullptr);
    }
}

void attn_softmax_simd(float* s, std::size_t bk, float* m, float* l, float* alpha, std::size_t nq) noexcept {
  // The block max and the block sum run as four independent chains each: one chain would wait out the
  // max/add latency on every key and make this step latency-bound instead of throughput-bound.
  const std::size_t width = lanes_in_use(nq);
  const std::size_t bk4 = bk - bk % 4;
  for (std::size_t iq = 0; iq < width; iq += lanes) {
    float* sq = s + iq;
    const vfloat m_old = vfloat::load_aligned(m + iq);
    vfloat mx[4] = {m_old, m_old, m_old, m_old};
    std::size_t j = 0;
    for (; j < bk4; j += 4)
      for (std::size_t u = 0; u < 4; ++u) mx[u] = xsimd::max(mx[u], vfloat::load_aligned(sq + (j + u) * br));
    for (; j < bk; ++j) mx[0] = xsimd::max(mx[0], vfloat::load_aligned(sq + j * br));
    const vfloat mb = xsimd::max(xsimd::max(mx[0], mx[1]), xsimd::max(mx[2], mx[3]));
    // NaN: if max dropped it, its own 2^(NaN − m) below is NaN and poisons the sum of that lane only.
    const vfloat m_use = xsimd::select(mb == vfloat(-INFINITY), vfloat(0.0f), mb);
    const vfloat a = exp2_nonpositive_vec(m_old - m_use);
    vfloat sum[4] = {vfloat(0.0f), vfloat(0.0f), vfloat(0.0f), vfloat(0.0f)};
    for (j = 0; j < bk4; j += 4)
      for (std::size_t u = 0; u < 4; ++u) {
        const vfloat p = exp2_nonpositive_vec(vfloat::load_aligned(sq + (j + u) * br) - m_use);
        p.store_aligned(sq + (j + u) * br);
        sum[u] += p;
      }
    for (; j < bk; ++j) {
      const vfloat p = exp2_nonpositive_vec(vfloat::load_aligned(sq + j * br) - m_use);
      p.store_aligned(sq + j * br);
      sum[0] += p;
    }
    a.store_aligned(alpha + iq);
    xsimd::fma(vfloat::load_aligned(l + iq), a, (sum[0] + sum[1]) + (sum[2] + sum[3])).store_aligned(l + iq);
    mb.store_aligned(m + iq);
  }
}

void attn_pv_simd(const float* p, std::size_t bk, const float* v, std::size_t ldv, std::size_t d_v, const float* alpha,
                  float* ot, std::size_t nq) noexcept {
  // ot (d_v × nq) = ot·alpha + vᵀ (d_v × bk) · p (bk × nq): a column-major view of v, so the MR values a
  // step broadcasts are adjacent floats of one row of v.
  const std::size_t width = lanes_in_use(nq);
  std::size_t iq = 0;
  for (; iq + gemm_nr <= width; iq += gemm_nr)
    for (std::size_t c = 0; c < d_v; c += attn_mr) {
      const std::size_t mr = d_v - c < attn_mr ? d_v - c : attn_mr;
      attn_tiles_pv.fn[mr - 1](v + c, ldv, p + iq, br, bk, ot + c * br + iq, br, alpha + iq);
    }
  for (; iq < width; iq += lanes)
    for (std::size_t c = 0; c < d_v; c += attn_mr_1v) {
      const std::size_t mr = d_v - c < attn_mr_1v ? d_v - c : attn_mr_1v;
      attn_tiles_pv_1v.fn[mr - 1](v + c, ldv, p + iq, br, bk, ot + c * br + iq, br, alpha + iq);
    }
}

void attn_pack_q_simd(const float* q, std::size_t ldq, std::size_t bq, std::size_t d_k, float factor,
                      float* qt) noexcept {
  const vfloat f(factor);
  const std::size_t width = (bq + lanes - 1) / lanes * lanes;
  for (std::size_t i0 = 0; i0 < width; i0 += lanes) {
    const std::size_t rows = bq - i0 < lanes ? bq - i0 : lanes;
    std::size_t p0 = 0;
#if MICROATTN_HAVE_TRANSPOSE
    if (rows == lanes)
      for (; p0 + lanes <= d_k; p0 += lanes) {  // whole lanes × lanes blocks in registers
        vfloat blk[lanes];
        for (std::size_t r = 0; r < lanes; ++r) blk[r] = vfloat::load_unaligned(q + (i0 + r) * ldq + p0) * f;
        transpose_block(blk);
        for (std::size_t c = 0; c < lanes; ++c) blk[c].store_aligned(qt + (p0 + c) * br + i0);
      }
#endif
    for (std::size_t p = p0; p < d_k; ++p)  // the ragged rest, idle lanes zeroed
      for (std::size_t r = 0; r < lanes; ++r) qt[p * br + i0 + r] = r < rows ? q[(i0 + r) * ldq + p] * factor : 0.0f;
  }
}

void attn_store_out_simd(const float* ot, const float* l, std::size_t bq, std::size_t d_v, float* out,
                         std::size_t ldo) noexcept {
  for (std::size_t i0 = 0; i0 < bq; i0 += lanes) {
    const std::size_t rows = bq - i0 < lanes ? bq - i0 : lanes;
    const vfloat li = vfloat::load_aligned(l + i0);
    const auto none = li == vfloat(0.0f);
    const vfloat inv = xsimd::select(none, vfloat(0.0f), vfloat(1.0f) / li);
    std::size_t c0 = 0;
#if MICROATTN_HAVE_TRANSPOSE
    if (rows == lanes)
      for (; c0 + lanes <= d_v; c0 += lanes) {
        vfloat blk[lanes];
        for (std::size_t c = 0; c < lanes; ++c)
          blk[c] = xsimd::select(none, vfloat(0.0f), vfloat::load_aligned(ot + (c0 + c) * br + i0) * inv);
        transpose_block(blk);
        for (std::size_t r = 0; r < lanes; ++r) blk[r].store_unaligned(out + (i0 + r) * ldo + c0);
      }
#endif
    alignas(64) float invs[lanes];
    inv.store_aligned(invs);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = c0; c < d_v; ++c)
        out[(i0 + r) * ldo + c] = l[i0 + r] == 0.0f ? 0.0f : ot[c * br + i0 + r] * invs[r];
  }
}

// --- few rows (layout in kernels.hpp) ----------------------------------------------------------------------
// Decoding attends one query (or a few) to a long K/V, and a decoding step's projections are matmuls with m = 1.
// Queries in the lanes would fill one lane per query; here the head dim (or matmul's k) is in the lanes instead.

// Lane i of the result = the sum of the lanes of rows[i]. xsimd 8.1's AVX-512 haddp returns lanes 2–3 and 4–5 of
// each quarter swapped (found by this kernel's tests), hence a tree of our own there: pairs of rows interleaved
// and added, then quads, then the four 128-bit quarters transposed and added (30 shuffles, 15 adds).
#if XSIMD_WITH_AVX512F
inline vfloat sum_lanes_of_rows(const vfloat* rows) noexcept {
  __m512 t[8], u[4];
  for (int i = 0; i < 8; ++i)  // quarter k of t[i]: row 2i's lanes 4k+0/1 + 4k+2/3, row 2i+1's, interleaved
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(rows[2 * i], rows[2 * i + 1]),
                         _mm512_unpackhi_ps(rows[2 * i], rows[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // quarter k of u[i]: the sums of quarter k of rows 4i … 4i+3
    u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 v01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x44), _mm512_shuffle_f32x4(u[0], u[1], 0xee));
  const __m512 v23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x44), _mm512_shuffle_f32x4(u[2], u[3], 0xee));
  return _mm512_add_ps(_mm512_shuffle_f32x4(v01, v23, 0x88), _mm512_shuffle_f32x4(v01, v23, 0xdd));
}
#else
inline vfloat sum_lanes_of_rows(const vfloat* rows) noexcept { return xsimd::haddp(rows); }
#endif

// GCC folds a load into every FMA that uses it (x86 takes a memory operand), so a vector meant to be loaded once
// and used by several FMAs is loaded by each: this pins it in a register. (ARM has no memory operands.)
inline void in_register(vfloat& x) noexcept {
#if defined(__x86_64__) || defined(__i386__)
  auto& reg = x.data;
  __asm__("" : "+v"(reg));
#else
  (void)x;
#endif
}

// Dot products: a tile of RK rows × KK keys keeps U partial accumulators per pair, each gathering products across
// the inner dimension lane-wise; at the end one sum_lanes_of_rows turns the RK·KK accumulators into one vector of
// dot products (no horizontal sum per pair). RK·KK·U = lanes: with several rows each key load feeds RK FMAs
// (attention with a few queries, matmul with small m); long rows (matmul) take fewer keys and unroll the inner
// dimension instead, so fewer rows of b stream at once. Tiles missing rows or keys re-read the first one.
template <std::size_t RK, std::size_t KK, std::size_t U>
void rows_dot_tile(const float* q, std::size_t ldq, std::size_t nr, const float* k, std::size_t ldk, std::size_t nk,
                   std::size_t d, float* s, std::size_t lds) noexcept {
  static_assert(RK * KK * U <= lanes, "one vector of dot products per tile");
  const float* qr[RK];
  const float* kj[KK];
  for (std::size_t r = 0; r < RK; ++r) qr[r] = q + (r < nr ? r : 0) * ldq;
  for (std::size_t j = 0; j < KK; ++j) kj[j] = k + (j < nk ? j : 0) * ldk;
  // acc[(r·KK + j)·U + u]: after the loop the U partials fold into acc[r·KK + j], the rows of the lane sum.
  vfloat acc[lanes];
  for (std::size_t i = 0; i < lanes; ++i) acc[i] = vfloat(0.0f);
  const std::size_t dv = d - d % lanes;
  std::size_t p = 0;
  // Each vector of q and of k is loaded once per step and used KK (RK) times from a register.
  auto step = [&](std::size_t p, std::size_t u) __attribute__((always_inline)) {
    vfloat qv[RK];
    for (std::size_t r = 0; r < RK; ++r) {
      qv[r] = vfloat::load_unaligned(qr[r] + p);
      if (KK > 1) in_register(qv[r]);
    }
    for (std::size_t j = 0; j < KK; ++j) {
      vfloat kv = vfloat::load_unaligned(kj[j] + p);
      if (RK > 1) in_register(kv);
      for (std::size_t r = 0; r < RK; ++r) acc[(r * KK + j) * U + u] = xsimd::fma(qv[r], kv, acc[(r * KK + j) * U + u]);
    }
  };
  for (; p + U * lanes <= dv; p += U * lanes)
    for (std::size_t u = 0; u < U; ++u) step(p + u * lanes, u);
  for (; p < dv; p += lanes) step(p, 0);
  if (U > 1)
    for (std::size_t i = 0; i < RK * KK; ++i) {
      vfloat sum = acc[i * U];
      for (std::size_t u = 1; u < U; ++u) sum += acc[i * U + u];
      acc[i] = sum;
    }
  for (std::size_t i = RK * KK; i < lanes; ++i) acc[i] = vfloat(0.0f);
  alignas(64) float dots[lanes];
  sum_lanes_of_rows(acc).store_aligned(dots);
  if (nr >= RK && nk == KK && dv == d) {  // a whole tile: KK dots per row, one short copy each
    for (std::size_t r = 0; r < RK; ++r) std::memcpy(s + r * lds, dots + r * KK, KK * sizeof(float));
    return;
  }
  for (std::size_t r = 0; r < RK && r < nr; ++r)
    for (std::size_t j = 0; j < KK && j < nk; ++j) {
      float dot = dots[r * KK + j];
      for (std::size_t t = dv; t < d; ++t) dot = fmadd(qr[r][t], kj[j][t], dot);  // the inner dimension's tail
      s[r * lds + j] = dot;
    }
}

// One row against `lanes` keys with a head dim of NQV whole vectors (attention while decoding, d = 64: 4 on
// AVX-512): q sits in registers and each key is one short chain of NQV FMAs, so a single pointer walks the keys.
template <std::size_t NQV>
void rows_dot_row_tile(const float* q, const float* k, std::size_t ldk, std::size_t nk, std::size_t d,
                       float* s) noexcept {
  vfloat qv[NQV];
  for (std::size_t v = 0; v < NQV; ++v) qv[v] = vfloat::load_unaligned(q + v * lanes);
  vfloat rows[lanes];
  for (std::size_t j = 0; j < lanes; ++j) {
    const float* kj = k + (j < nk ? j : 0) * ldk;
    vfloat acc = qv[0] * vfloat::load_unaligned(kj);
    for (std::size_t v = 1; v < NQV; ++v) acc = xsimd::fma(qv[v], vfloat::load_unaligned(kj + v * lanes), acc);
    rows[j] = acc;
  }
  const vfloat dots = sum_lanes_of_rows(rows);
  if (nk == lanes && d == NQV * lanes) {
    dots.store_unaligned(s);
    return;
  }
  alignas(64) float ds[lanes];
  dots.store_aligned(ds);
  for (std::size_t j = 0; j < nk; ++j) {
    float dot = ds[j];
    for (std::size_t t = NQV * lanes; t < d; ++t) dot = fmadd(q[t], k[j * ldk + t], dot);
    s[j] = dot;
  }
}
using rows_dot_row_fn = void (*)(const float*, const float*, std::size_t, std::size_t, std::size_t, float*) noexcept;
constexpr std::size_t row_tile_vectors_max = 8;  // head dims up to 8 vectors (128 floats on AVX-512)
template <std::size_t... I>
constexpr std::array<rows_dot_row_fn, sizeof...(I)> make_row_tiles(std::index_sequence<I...>) {
  return {{&rows_dot_row_tile<I + 1>...}};
}
constexpr auto rows_dot_row_tiles = make_row_tiles(std::make_index_sequence<row_tile_vectors_max>{});

#if !XSIMD_WITH_NEON
// A few rows (RK = 1 … 8) against keys with a short head dim of NQV whole vectors (attention while decoding, d = 64:
// 4 on AVX-512): one call walks all bk keys, KK = lanes / RK of them per tile, the head dim unrolled. The generic
// tile above spends more on its setup, zeroing and spills than on 4 steps of FMAs at d = 64; here a tile is its
// NQV steps of RK + KK loads and RK·KK FMAs, one sum_lanes_of_rows, and RK short stores. A key tile short of KK
// keys re-reads its last key. (NEON has its own row kernels.)
// One tile with the head dim outer: rows q[r·ldq …] × keys kp[j·ldk …] for r < RK, j < KK, into lane r·KK + j of
// the result; each step loads RK vectors of q and one of each key.
template <std::size_t RK, std::size_t NQV>
inline __attribute__((always_inline)) vfloat rows_dot_short_tile(const float* q, std::size_t ldq, const float* kp,
                                                                 std::size_t ldk) noexcept {
  constexpr std::size_t KK = lanes / RK;
  vfloat acc[lanes];  // acc[r·KK + j]: row r, key j
#pragma GCC unroll 8
  for (std::size_t v = 0; v < NQV; ++v) {
    vfloat qv[RK];
#pragma GCC unroll 8
    for (std::size_t r = 0; r < RK; ++r) {
      qv[r] = vfloat::load_unaligned(q + r * ldq + v * lanes);
      if (KK > 1) in_register(qv[r]);
    }
#pragma GCC unroll 16
    for (std::size_t j = 0; j < KK; ++j) {
      vfloat kv = vfloat::load_unaligned(kp + j * ldk + v * lanes);
      if (RK > 1) in_register(kv);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < RK; ++r)
        acc[r * KK + j] = v == 0 ? qv[r] * kv : xsimd::fma(qv[r], kv, acc[r * KK + j]);
    }
  }
  return sum_lanes_of_rows(acc);
}

// One row, and rows whose RK·NQV vectors fit in registers beside the tile's accumulators (two at d = 64 on AVX-512),
// are loaded once per call (what does not fit stays in L1), and a tile takes its keys one after another, in address
// order, through one pointer that steps by ldk. The tile above names KK rows of k at once, and GCC kept their KK·NQV
// addresses (and the prefetch's) in registers and on the stack: 1 × 256 attention spent 0.70 µs in the dot
// products, against 0.45 µs for just reading K from L2; key by key it is at that bandwidth.
constexpr std::size_t vector_registers = XSIMD_WITH_AVX512F ? 32 : 16;
template <std::size_t RK, std::size_t NQV>
constexpr bool rows_dot_keywise = RK == 1 || RK* NQV + lanes <= vector_registers - 4;

template <std::size_t RK, std::size_t NQV>
void rows_dot_short(const float* q, std::size_t ldq, const float* k, std::size_t ldk, std::size_t bk, float* s,
                    std::size_t lds) noexcept {
  constexpr std::size_t KK = lanes / RK;
  static_assert(KK >= 1 && RK * KK == lanes, "one vector of dot products per tile");
  alignas(64) float dots[lanes];
  std::size_t j0 = 0;
  if constexpr (rows_dot_keywise<RK, NQV>) {
    constexpr std::size_t PFD = 2;  // one row: prefetch the keys two tiles ahead (K streams from L2 or beyond)
    vfloat qv[RK * NQV];
#pragma GCC unroll 8
    for (std::size_t r = 0; r < RK; ++r)
#pragma GCC unroll 8
      for (std::size_t v = 0; v < NQV; ++v) qv[r * NQV + v] = vfloat::load_unaligned(q + r * ldq + v * lanes);
    const std::uintptr_t ahead = PFD * KK * ldk * sizeof(float);
    for (; j0 + KK <= bk; j0 += KK) {
      const bool prefetch = RK == 1 && j0 + PFD * KK < bk;
      const float* kj = k + j0 * ldk;
      vfloat acc[lanes];  // acc[r·KK + j]: row r, key j
#pragma GCC unroll 16
      for (std::size_t j = 0; j < KK; ++j) {
        if (prefetch)  // the integer sum: a key row past k's end is never formed as a pointer
#pragma GCC unroll 8
          for (std::size_t c = 0; c < NQV * lanes; c += line_floats)
            __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(kj + c) + ahead), 0, 3);
#pragma GCC unroll 8
        for (std::size_t v = 0; v < NQV; ++v) {
          vfloat kv = vfloat::load_unaligned(kj + v * lanes);
          if (RK > 1) in_register(kv);
#pragma GCC unroll 8
          for (std::size_t r = 0; r < RK; ++r)
            acc[r * KK + j] = v == 0 ? qv[r * NQV] * kv : xsimd::fma(qv[r * NQV + v], kv, acc[r * KK + j]);
        }
        kj += ldk;
        __asm__("" : "+r"(kj));  // one pointer stepping, not KK addresses computed up front
      }
      sum_lanes_of_rows(acc).store_aligned(dots);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < RK; ++r) std::memcpy(s + r * lds + j0, dots + r * KK, KK * sizeof(float));
    }
  } else {
    for (; j0 + KK <= bk; j0 += KK) {
      rows_dot_short_tile<RK, NQV>(q, ldq, k + j0 * ldk, ldk).store_aligned(dots);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < RK; ++r) std::memcpy(s + r * lds + j0, dots + r * KK, KK * sizeof(float));
    }
  }
  if (j0 < bk) {  // the last bk − j0 < KK keys: a tile with the last key repeated, computed through a copy of them
    alignas(64) float kpad[KK * NQV * lanes];
    const std::size_t nk = bk - j0;
    for (std::size_t j = 0; j < KK; ++j)
      std::memcpy(kpad + j * NQV * lanes, k + (j0 + (j < nk ? j : nk - 1)) * ldk, NQV * lanes * sizeof(float));
    rows_dot_short_tile<RK, NQV>(q, ldq, kpad, NQV * lanes).store_aligned(dots);
    for (std::size_t r = 0; r < RK; ++r) std::memcpy(s + r * lds + j0, dots + r * KK, nk * sizeof(float));
  }
}
using rows_dot_short_fn = void (*)(const float*, std::size_t, const float*, std::size_t, std::size_t, float*,
                                   std::size_t) noexcept;
constexpr std::size_t short_rows_max = lanes < 8 ? lanes : 8;  // RK = 1, 2, 4, 8 (as the lanes allow)
template <std::size_t RK, std::size_t... I>
constexpr std::array<rows_dot_short_fn, sizeof...(I)> make_short_tiles(std::index_sequence<I...>) {
  return {{&rows_dot_short<RK, I + 1>...}};
}
// [log2(RK)][NQV − 1]; rows beyond short_rows_max are never asked for (the table repeats its widest tile)
constexpr std::array<rows_dot_short_fn, row_tile_vectors_max> rows_dot_short_tiles[4] = {
    make_short_tiles<1>(std::make_index_sequence<row_tile_vectors_max>{}),
    make_short_tiles<2>(std::make_index_sequence<row_tile_vectors_max>{}),
    make_short_tiles<(4 < short_rows_max ? 4 : short_rows_max)>(std::make_index_sequence<row_tile_vectors_max>{}),
    make_short_tiles<short_rows_max>(std::make_index_sequence<row_tile_vectors_max>{})};
#if !XSIMD_WITH_AVX512F
// One row with a long inner dimension (x·Wᵀ with m = 1 and k up to 256: above 64 on AVX2, 32 on SSE2): KK keys per
// tile, one accumulator each (KK chains hide the FMA latency), q loaded once per step for the KK FMAs; no zeroing
// or spilling of a whole-vector array per tile.
template <std::size_t KK>
void rows_dot_one_long(const float* q, std::size_t d, const float* k, std::size_t ldk, std::size_t bk,
                       float* s) noexcept {
  static_assert(KK <= lanes, "one vector of dot products per tile");
  const std::size_t dv = d - d % lanes;
  alignas(64) float dots[lanes];
  for (std::size_t j0 = 0; j0 < bk; j0 += KK) {
    const std::size_t nk = bk - j0 < KK ? bk - j0 : KK;
    const float* kp = k + j0 * ldk;
    std::size_t step[KK];  // offset of key j (the last key repeated in a short tile)
    for (std::size_t j = 0; j < KK; ++j) step[j] = (j < nk ? j : nk - 1) * ldk;
    vfloat acc[lanes];
    for (std::size_t j = 0; j < lanes; ++j) acc[j] = vfloat(0.0f);
    for (std::size_t p = 0; p < dv; p += lanes) {
      vfloat qv = vfloat::load_unaligned(q + p);
      in_register(qv);
#pragma GCC unroll 16
      for (std::size_t j = 0; j < KK; ++j) acc[j] = xsimd::fma(qv, vfloat::load_unaligned(kp + step[j] + p), acc[j]);
    }
    sum_lanes_of_rows(acc).store_aligned(dots);
    for (std::size_t j = 0; j < nk; ++j) {
      float dot = dots[j];
      for (std::size_t t = dv; t < d; ++t) dot = fmadd(q[t], kp[j * ldk + t], dot);
      s[j0 + j] = dot;
    }
  }
}
#endif

#if XSIMD_WITH_AVX512F
// One row with a long inner dimension (x·Wᵀ with m = 1, 128 < k <= 256 on AVX-512): a tile of 16 keys gives one
// vector of dot products. q is held 8 vectors at a time; for each such chunk the tile's keys are walked one after
// another through one pointer stepping by ldk, each key's part of the chunk read in order. rows_dot_one_long (16
// keys × 16 vectors at k = 256) names 16 rows at once, and GCC kept their addresses in vector registers and on
// the stack. Each line of a key's chunk is prefetched just before its loads: measured, not derived (W is in L2
// at 256²; a prefetch of the next tile was slower, and none at all left the kernel at Eigen's speed). x·Wᵀ with
// m = 1 at 256², paired runs: rows_dot_one_long 2.6–2.8 µs (0.97–1.06 of Eigen), this without the prefetch
// 2.8, with it 2.1 (1.26–1.32). AVX2 keeps rows_dot_one_long: 4-vector chunks there were no faster.
constexpr std::size_t row_chunk = 8;  // vectors of q in registers, beside 16 accumulators
void rows_dot_one_chunks(const float* q, std::size_t d, const float* k, std::size_t ldk, std::size_t bk,
                         float* s) noexcept {
  const std::size_t dv = d - d % lanes, dc = dv - dv % (row_chunk * lanes);
  alignas(64) float dots[lanes];
  for (std::size_t j0 = 0; j0 < bk; j0 += lanes) {
    const std::size_t nk = bk - j0 < lanes ? bk - j0 : lanes;
    vfloat acc[lanes];
    for (std::size_t j = 0; j < lanes; ++j) acc[j] = vfloat(0.0f);
    for (std::size_t c0 = 0; c0 < dc; c0 += row_chunk * lanes) {
      vfloat qv[row_chunk];
#pragma GCC unroll 16
      for (std::size_t v = 0; v < row_chunk; ++v) qv[v] = vfloat::load_unaligned(q + c0 + v * lanes);
      const float* kj = k + j0 * ldk + c0;
#pragma GCC unroll 16
      for (std::size_t j = 0; j < lanes; ++j) {
        if (j < nk) {  // keys past bk keep 0
#pragma GCC unroll 16
          for (std::size_t c = 0; c < row_chunk * lanes; c += line_floats) __builtin_prefetch(kj + c, 0, 3);
          vfloat a = acc[j];
#pragma GCC unroll 16
          for (std::size_t v = 0; v < row_chunk; ++v) a = xsimd::fma(qv[v], vfloat::load_unaligned(kj + v * lanes), a);
          acc[j] = a;
        }
        kj += ldk;
        __asm__("" : "+r"(kj));  // one pointer stepping, not lanes addresses computed up front
      }
    }
    for (std::size_t j = 0; j < nk; ++j)  // whole vectors short of a chunk
      for (std::size_t p = dc; p < dv; p += lanes)
        acc[j] = xsimd::fma(vfloat::load_unaligned(q + p), vfloat::load_unaligned(k + (j0 + j) * ldk + p), acc[j]);
    sum_lanes_of_rows(acc).store_aligned(dots);
    for (std::size_t j = 0; j < nk; ++j) {  // elements short of a vector
      float dot = dots[j];
      for (std::size_t t = dv; t < d; ++t) dot = fmadd(q[t], k[(j0 + j) * ldk + t], dot);
      s[j0 + j] = dot;
    }
  }
}
#endif

// One row with a long inner dimension (x·Wᵀ with m = 1, k > 256): S keys at a time, each walked whole with U
// accumulators from its first vector-aligned element (no load of b splits a cache line; q, in L1, takes the
// misalignment), with a software prefetch 256 bytes ahead in every stream (it runs on into the key's next row).
// The elements before the first aligned vector and after the last whole one are one vector each, the products
// outside them selected away. S = 4 streams beat both 8 × 2 vectors (8 streams 4 KiB apart at k = 1024, in the
// same L1 sets: 0.93–0.96 of Eigen) and one stream (0.95); README "Decoding: few queries, small-m matmul". The S
// keys of a group share their alignment only when ldk is a whole number of vectors; otherwise one at a time.
template <std::size_t U, std::size_t S>
inline __attribute__((always_inline)) void rows_dot_stream_group(const float* q, std::size_t d, const float* k,
                                                                 std::size_t ldk, vfloat index, vfloat* sums) noexcept {
  constexpr std::size_t prefetch_bytes = 256;
  constexpr std::size_t vector_bytes = lanes * sizeof(float);
  // d > dot_long >= lanes: the head and tail vectors lie within each key
  const std::size_t head = (vector_bytes - reinterpret_cast<std::uintptr_t>(k) % vector_bytes) % vector_bytes /
                           sizeof(float);  // elements before the first aligned vector of the keys
  const vfloat zero(0.0f);
  vfloat acc[S][U];
  const vfloat q_head = vfloat::load_unaligned(q);
  for (std::size_t r = 0; r < S; ++r) {
    // the product is selected, not an operand: 0·inf would be NaN
    acc[r][0] =
        xsimd::select(index < vfloat(static_cast<float>(head)), q_head * vfloat::load_unaligned(k + r * ldk), zero);
    for (std::size_t u = 1; u < U; ++u) acc[r][u] = zero;
  }
  const std::size_t body = d - head;
  const std::size_t du = head + (body - body % (U * lanes)), dv = head + (body - body % lanes);
  std::size_t p = head;
  for (; p < du; p += U * lanes) {
    // an address past b's end is never dereferenced: the prefetch does not fault, and the integer sum keeps the
    // pointer arithmetic within b
#pragma GCC unroll 8
    for (std::size_t r = 0; r < S; ++r)
#pragma GCC unroll 8
      for (std::size_t c = 0; c < U * lanes; c += line_floats)
        __builtin_prefetch(
            reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(k + r * ldk + p + c) + prefetch_bytes), 0,
            3);
#pragma GCC unroll 8
    for (std::size_t u = 0; u < U; ++u) {
      const vfloat qv = vfloat::load_unaligned(q + p + u * lanes);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < S; ++r)
        acc[r][u] = xsimd::fma(qv, vfloat::load_aligned(k + r * ldk + p + u * lanes), acc[r][u]);
    }
  }
  for (; p < dv; p += lanes) {
    const vfloat qv = vfloat::load_unaligned(q + p);
    for (std::size_t r = 0; r < S; ++r) acc[r][0] = xsimd::fma(qv, vfloat::load_aligned(k + r * ldk + p), acc[r][0]);
  }
  const vfloat q_tail = vfloat::load_unaligned(q + d - lanes);
  for (std::size_t r = 0; r < S; ++r) {
    if (dv < d)  // the last d − dv elements: the lanes of the vector ending at d that come after dv
      acc[r][0] += xsimd::select(index >= vfloat(static_cast<float>(lanes - (d - dv))),
                                 q_tail * vfloat::load_unaligned(k + r * ldk + d - lanes), zero);
#pragma GCC unroll 8
    for (std::size_t u = 1; u < U; ++u) acc[r][0] += acc[r][u];
    sums[r] = acc[r][0];
  }
}

void rows_dot_one_stream(const float* q, std::size_t d, const float* k, std::size_t ldk, std::size_t bk,
                         float* s) noexcept {
  constexpr std::size_t S = 4;
  constexpr std::size_t U = lanes >= 16 ? 4 : 2;  // S·U accumulators: 16 of AVX-512's 32 registers, 8 of 16 else
  static_assert(lanes <= 16 && lanes % S == 0, "the lane indices below; whole groups in a vector of keys");
  alignas(64) static constexpr float lane_index[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const vfloat index = vfloat::load_aligned(lane_index);
  const bool groups = ldk % lanes == 0;
  for (std::size_t j0 = 0; j0 < bk; j0 += lanes) {
    const std::size_t nk = bk - j0 < lanes ? bk - j0 : lanes;
    vfloat rows[lanes];
    for (std::size_t j = 0; j < lanes; ++j) rows[j] = vfloat(0.0f);
    std::size_t j = 0;
    if (groups)
      for (; j + S <= nk; j += S) rows_dot_stream_group<U, S>(q, d, k + (j0 + j) * ldk, ldk, index, rows + j);
    for (; j < nk; ++j) rows_dot_stream_group<U, 1>(q, d, k + (j0 + j) * ldk, ldk, index, rows + j);
    alignas(64) float dots[lanes];
    sum_lanes_of_rows(rows).store_aligned(dots);
    std::memcpy(s + j0, dots, nk * sizeof(float));
  }
}

constexpr std::size_t short_keys = 64;  // keys per pass of the row groups: their rows of k stay in L1
#endif

using rows_dot_fn = void (*)(const float*, std::size_t, std::size_t, const float*, std::size_t, std::size_t,
                             std::size_t, float*, std::size_t) noexcept;
// [rows: 1, 2, 4][short, long inner dimension]
constexpr std::size_t dot_long = 256;  // longer rows than this unroll the inner dimension (matmul)
constexpr rows_dot_fn rows_dot_tiles[3][2] = {
    {&rows_dot_tile<1, lanes, 1>, &rows_dot_tile<1, lanes / 2, 2>},
    {&rows_dot_tile<2, lanes / 2, 1>, &rows_dot_tile<2, lanes / 4 < 1 ? 1 : lanes / 4, lanes / 4 < 1 ? 1 : 2>},
    {&rows_dot_tile<4, lanes / 4, 1>, &rows_dot_tile<4, lanes / 4, 1>}};
constexpr std::size_t rows_dot_keys[3][2] = {
    {lanes, lanes / 2}, {lanes / 2, lanes / 4 < 1 ? 1 : lanes / 4}, {lanes / 4, lanes / 4}};

// Tiles of 1 or 2 rows as narrow in keys as a group of more rows (kk = lanes / 2 or lanes / 4), which unroll the
// inner dimension instead: the last rows of an odd nr (m = 3, 5, 7) used their own, wider tiles for kk keys and
// re-read the first key in the rest (m = 7 at 256²: 0.81–1.22 of Eigen, against m = 8's 1.7–2.1).
constexpr std::size_t quarter_lanes = lanes / 4 < 1 ? 1 : lanes / 4;
rows_dot_fn rows_dot_narrow_tile(std::size_t rk, std::size_t kk) noexcept {
  if (rk == 2) return &rows_dot_tile<2, quarter_lanes, lanes / (2 * quarter_lanes)>;
  return kk == quarter_lanes ? &rows_dot_tile<1, quarter_lanes, lanes / quarter_lanes>
                             : &rows_dot_tile<1, lanes / 2, 2>;
}

void rows_dot_simd(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const float* k, std::size_t ldk,
                   std::size_t bk, float* s, std::size_t lds) noexcept {
  const std::size_t nqv = d / lanes;
#if !XSIMD_WITH_NEON
  if (nqv >= 1 && nqv <= row_tile_vectors_max && nqv * lanes == d) {
    if (nr == 1) {  // one row: all keys in one call, q held in registers
      rows_dot_short_tiles[0][nqv - 1](q, ldq, k, ldk, bk, s, lds);
      return;
    }
    // Keys outer, row groups of 8, 4, 2 (as the lanes allow), then 1, inner.
    for (std::size_t j0 = 0; j0 < bk; j0 += short_keys) {
      const std::size_t nk = bk - j0 < short_keys ? bk - j0 : short_keys;
      for (std::size_t r0 = 0; r0 < nr;) {
        const std::size_t left = nr - r0;
        const std::size_t t = left >= 8 && short_rows_max >= 8 ? 3 : left >= 4 && short_rows_max >= 4 ? 2 : left >= 2;
        rows_dot_short_tiles[t][nqv - 1](q + r0 * ldq, ldq, k + j0 * ldk, ldk, nk, s + r0 * lds + j0, lds);
        r0 += std::size_t{1} << t;
      }
    }
    return;
  }
#endif
#if !XSIMD_WITH_NEON
  if (nr == 1 && nqv > row_tile_vectors_max) {  // longer rows: fewer streams
    if (d <= dot_long)
#if XSIMD_WITH_AVX512F
      rows_dot_one_chunks(q, d, k, ldk, bk, s);
#else
      rows_dot_one_long<lanes>(q, d, k, ldk, bk, s);
#endif
    else
      rows_dot_one_stream(q, d, k, ldk, bk, s);
    return;
  }
#endif
  if (nr == 1 && nqv >= 1 && nqv <= row_tile_vectors_max) {
    for (std::size_t j0 = 0; j0 < bk; j0 += lanes)
      rows_dot_row_tiles[nqv - 1](q, k + j0 * ldk, ldk, bk - j0 < lanes ? bk - j0 : lanes, d, s + j0);
    return;
  }
  const std::size_t lng = d > dot_long ? 1 : 0;
  // Keys outer, rows inner: a tile's keys (KK rows of k) stay in L1 while every group of rows uses them.
  const std::size_t tile_rows = nr >= 4 ? 2 : nr >= 2 ? 1 : 0;
  const std::size_t kk = rows_dot_keys[tile_rows][lng];
  for (std::size_t j0 = 0; j0 < bk; j0 += kk) {
    const std::size_t nk = bk - j0 < kk ? bk - j0 : kk;
    for (std::size_t r0 = 0; r0 < nr;) {
      const std::size_t left = nr - r0;
      // the same key tile width for every row group, so a group of fewer rows uses the tile of its width
      const std::size_t t = left >= 4 && tile_rows == 2 ? 2 : left >= 2 && tile_rows >= 1 ? 1 : 0;
      const std::size_t rk = t == 2 ? 4 : t == 1 ? 2 : 1;
      if (rows_dot_keys[t][lng] == kk) {
        rows_dot_tiles[t][lng](q + r0 * ldq, ldq, rk, k + j0 * ldk, ldk, nk, d, s + r0 * lds + j0, lds);
      } else {  // the last 1 or 2 rows of nr: a tile of theirs with the group's key width, so no key is re-read
        rows_dot_narrow_tile(rk, kk)(q + r0 * ldq, ldq, rk, k + j0 * ldk, ldk, nk, d, s + r0 * lds + j0, lds);
      }
      r0 += rk;
    }
  }
}

void rows_softmax_simd(float* s, std::size_t lds, std::size_t nr, std::size_t bk, float* m, float* l,
                       float* alpha) noexcept {
  // A vector of rows at a time: the per-row scalars (block max, rescale factor, row sum) are lanes of one vector,
  // so alpha is one vector exp and the row sums one sum_lanes_of_rows, instead of a chain of scalar steps per row
  // (which made this latency-bound with the few rows of decoding).
  const std::size_t bv = bk - bk % lanes;
  for (std::size_t r0 = 0; r0 < nr; r0 += lanes) {
    const std::size_t rn = nr - r0 < lanes ? nr - r0 : lanes;
    alignas(64) float mb[lanes] = {}, mo[lanes] = {}, mu[lanes], tail[lanes] = {};
    for (std::size_t r = 0; r < rn; ++r) {
      const float* sr = s + (r0 + r) * lds;
      vfloat vmax0(m[r0 + r]), vmax1(m[r0 + r]);  // two chains
      std::size_t j = 0;
      for (; j + 2 * lanes <= bv; j += 2 * lanes) {
        vmax0 = xsimd::max(vmax0, vfloat::load_unaligned(sr + j));
        vmax1 = xsimd::max(vmax1, vfloat::load_unaligned(sr + j + lanes));
      }
      if (j < bv) vmax0 = xsimd::max(vmax0, vfloat::load_unaligned(sr + j));
      float mx = horizontal_max(xsimd::max(vmax0, vmax1));
      for (j = bv; j < bk; ++j) mx = sr[j] > mx ? sr[j] : mx;
      mb[r] = mx;
      mo[r] = m[r0 + r];
    }
    // A NaN that max dropped shows in its own 2^(NaN − m), hence in l: the row comes out NaN.
    const vfloat vmb = vfloat::load_aligned(mb);
    const vfloat m_use = xsimd::select(vmb == vfloat(-INFINITY), vfloat(0.0f), vmb);
    const vfloat a = exp2_nonpositive_vec(vfloat::load_aligned(mo) - m_use);
    m_use.store_aligned(mu);
    vfloat sums[lanes];
    for (std::size_t r = 0; r < lanes; ++r) sums[r] = vfloat(0.0f);
    for (std::size_t r = 0; r < rn; ++r) {
      float* sr = s + (r0 + r) * lds;
      const vfloat vm(mu[r]);
      vfloat sum0(0.0f), sum1(0.0f);
      std::size_t j = 0;
      for (; j + 2 * lanes <= bv; j += 2 * lanes) {
        const vfloat p0 = exp2_nonpositive_vec(vfloat::load_unaligned(sr + j) - vm);
        const vfloat p1 = exp2_nonpositive_vec(vfloat::load_unaligned(sr + j + lanes) - vm);
        p0.store_unaligned(sr + j);
        p1.store_unaligned(sr + j + lanes);
        sum0 += p0;
        sum1 += p1;
      }
      if (j < bv) {
        const vfloat p0 = exp2_nonpositive_vec(vfloat::load_unaligned(sr + j) - vm);
        p0.store_unaligned(sr + j);
        sum0 += p0;
      }
      sums[r] = sum0 + sum1;
      float t = 0.0f;
      for (j = bv; j < bk; ++j) {
        sr[j] = exp2_nonpositive_scalar(sr[j] - mu[r]);
        t += sr[j];
      }
      tail[r] = t;
    }
    vfloat total;
    if (rn <= 2) {  // one or two rows: their own sums are cheaper than a tree over mostly empty rows
      for (std::size_t r = 0; r < rn; ++r) tail[r] += xsimd::hadd(sums[r]);
      total = vfloat::load_aligned(tail);
    } else {
      total = sum_lanes_of_rows(sums) + vfloat::load_aligned(tail);
    }
    alignas(64) float lo[lanes] = {}, ln[lanes], an[lanes];
    for (std::size_t r = 0; r < rn; ++r) lo[r] = l[r0 + r];
    xsimd::fma(vfloat::load_aligned(lo), a, total).store_aligned(ln);
    a.store_aligned(an);
    for (std::size_t r = 0; r < rn; ++r) {
      l[r0 + r] = ln[r];
      alpha[r0 + r] = an[r];
      m[r0 + r] = mb[r];
    }
  }
}

// P·V (and matmul with small m, b not transposed) as AXPYs over the rows of v: a tile of RR rows × CV vectors
// of columns accumulates in registers while each row of v is loaded once for all RR rows. CH independent chains
// (alternate keys) hide the FMA latency when the tile is small. Sized to the register file: at most 16
// accumulators with 32 registers (AVX-512, NEON64), 8 with 16.
constexpr std::size_t axpy_acc_budget = (XSIMD_WITH_AVX512F || XSIMD_WITH_NEON64) ? 16 : 8;
constexpr std::size_t axpy_rows_max = 8;
// One row on x86-64 (x·W with m = 1, P·V of one query): as many vectors as the budget (16 on AVX-512, 8 on AVX2), one
// chain (each accumulator waits one FMA latency per key while the others issue), so a row of w is read whole and in
// order (x·W at 256²: 3.3 → 1.9 µs, AVX-512; AVX2's 2 passes of 4 vectors over d_v = 64 left one-query attention
// at 0.90 of Eigen at 4096 keys, 8 vectors read 1.12). Not i686, whose 8 vector registers the budget fills.
constexpr bool axpy_one_row_wide = !XSIMD_WITH_NEON && (axpy_acc_budget >= 16 || sizeof(void*) == 8);
constexpr std::size_t axpy_vectors(std::size_t rr) {
  return rr == 1 && axpy_one_row_wide    ? axpy_acc_budget
         : rr * 8 * 2 <= axpy_acc_budget ? 8
         : rr * 4 <= axpy_acc_budget     ? 4
         : rr * 2 <= axpy_acc_budget     ? 2
                                         : 1;
}
constexpr std::size_t axpy_chains(std::size_t rr, std::size_t cv) { return rr * cv * 2 <= axpy_acc_budget ? 2 : 1; }

template <std::size_t RR, std::size_t CV, std::size_t CH>
void rows_axpy_tile(const float* p, std::size_t ldp, std::size_t bk, const float* v, std::size_t ldv,
                    const float* alpha, float* o, std::size_t ldo) noexcept {
  vfloat acc[CH][RR][CV];
  for (std::size_t h = 0; h < CH; ++h)
    for (std::size_t r = 0; r < RR; ++r)
      for (std::size_t c = 0; c < CV; ++c) acc[h][r][c] = vfloat(0.0f);
  std::size_t j = 0;
  for (; j + CH <= bk; j += CH)
    for (std::size_t h = 0; h < CH; ++h) {
      vfloat vj[CV];
      for (std::size_t c = 0; c < CV; ++c) {
        vj[c] = vfloat::load_unaligned(v + (j + h) * ldv + c * lanes);
        if (RR > 1) in_register(vj[c]);  // one load of v per RR FMAs, not one per FMA
      }
      for (std::size_t r = 0; r < RR; ++r) {
        const vfloat pr(p[r * ldp + j + h]);
        for (std::size_t c = 0; c < CV; ++c) acc[h][r][c] = xsimd::fma(pr, vj[c], acc[h][r][c]);
      }
    }
  for (; j < bk; ++j)
    for (std::size_t r = 0; r < RR; ++r) {
      const vfloat pr(p[r * ldp + j]);
      for (std::size_t c = 0; c < CV; ++c)
        acc[0][r][c] = xsimd::fma(pr, vfloat::load_unaligned(v + j * ldv + c * lanes), acc[0][r][c]);
    }
  for (std::size_t r = 0; r < RR; ++r)
    for (std::size_t c = 0; c < CV; ++c) {
      vfloat sum = acc[0][r][c];
      for (std::size_t h = 1; h < CH; ++h) sum += acc[h][r][c];
      float* op = o + r * ldo + c * lanes;
      if (alpha != nullptr) sum = xsimd::fma(vfloat::load_unaligned(op), vfloat(alpha[r]), sum);
      sum.store_unaligned(op);
    }
}

template <std::size_t RR>
void rows_axpy_group(const float* p, std::size_t ldp, std::size_t bk, const float* v, std::size_t ldv, std::size_t d_v,
                     const float* alpha, float* o, std::size_t ldo) noexcept {
  constexpr std::size_t cv = axpy_vectors(RR);
  constexpr std::size_t width = cv * lanes;
  std::size_t c = 0;
  for (; c + width <= d_v; c += width)
    rows_axpy_tile<RR, cv, axpy_chains(RR, cv)>(p, ldp, bk, v + c, ldv, alpha, o + c, ldo);
  if constexpr (cv > 4)  // e.g. d_v = 64 under an 8-vector tile
    for (; c + 4 * lanes <= d_v; c += 4 * lanes)
      rows_axpy_tile<RR, 4, axpy_chains(RR, 4)>(p, ldp, bk, v + c, ldv, alpha, o + c, ldo);
  for (; c + lanes <= d_v; c += lanes)
    rows_axpy_tile<RR, 1, axpy_chains(RR, 1)>(p, ldp, bk, v + c, ldv, alpha, o + c, ldo);
  for (; c < d_v; ++c)  // columns short of a vector
    for (std::size_t r = 0; r < RR; ++r) {
      float acc = 0.0f;
      for (std::size_t j = 0; j < bk; ++j) acc = fmadd(p[r * ldp + j], v[j * ldv + c], acc);
      float& out = o[r * ldo + c];
      out = alpha != nullptr ? fmadd(out, alpha[r], acc) : acc;
    }
}

using rows_axpy_fn = void (*)(const float*, std::size_t, std::size_t, const float*, std::size_t, std::size_t,
                              const float*, float*, std::size_t) noexcept;
template <std::size_t... I>
constexpr std::array<rows_axpy_fn, sizeof...(I)> make_axpy_table(std::index_sequence<I...>) {
  return {{&rows_axpy_group<I + 1>...}};
}
constexpr auto rows_axpy_groups = make_axpy_table(std::make_index_sequence<axpy_rows_max>{});

// Keys in blocks of axpy_keys: a block's rows of v (all columns) stay in L1/L2 while the column tiles sweep them,
// instead of every tile streaming a column strip through all of v (matmul with a long k). o takes the block sums.
// Long rows (matmul, d_v > 256) take 8 keys per block: 8 sequential streams through v, which the prefetchers
// follow, where 64 rows 4 KiB apart each touched for a column strip would leave every load waiting on memory.
// One row whose tile is narrower than v (AVX2: 64 columns) takes blocks of axpy_block_floats (32 KiB) of v, so the
// block is still in L1 when the next tile sweeps it: x·W with m = 1 at 256² on AVX2, paired runs, 64 keys (64 KiB)
// 3.1–3.6 µs (0.88–0.90 of Eigen), 32 keys 2.5–3.4 (0.97–1.00); 16 keys 2.9, 48 2.8. More rows (m = 5…8) were
// slower with the smaller block, and AVX-512's one-row tile spans 256 columns, so both keep 64.
constexpr std::size_t axpy_keys = 64, axpy_keys_long = 8, axpy_block_floats = 8192;
constexpr float axpy_ones[axpy_rows_max] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};

// One row against long rows of v (x·W with m = 1, n > 256): o += Σ_j p[j]·v[j·ldv …], 8 rows of v at a time, each
// walked whole and in order, o (in L1) loaded and stored once per 8 rows, as Eigen's GEMV walks 4. The column tiles
// of rows_axpy_group (8 rows × 256 columns, then the next 256 columns of the same rows) took 71–72 µs at 1024² (W,
// 4 MiB, from L3) where this took 60–61, switched at run time in one binary (4 rows: 62, 2: 68–70). The vectors
// of v start at the rows' first cache-line boundary when ldv is whole lines (the columns before it and after the
// last whole vector go one by one; o takes the misalignment): a std::vector W sits 16 bytes past a line, and every
// load then split two lines. 1024², W at that offset, one binary: 58 → 53 µs and 65 → 59 (W aligned: 48–52);
// bench_decode_peers 47.6–49.1 µs against Eigen's 57.5–58.9. One row at a time (o loaded and stored per row) was
// no faster there (faster only in a loop alternating kernels) and 15–75 % slower at 8–16 MiB. alpha as in
// rows_axpy_simd.
constexpr std::size_t axpy_long_rows = 8;
void rows_axpy_one_long(const float* p, std::size_t bk, const float* v, std::size_t ldv, std::size_t d_v,
                        const float* alpha, float* o) noexcept {
  const std::size_t head =  // columns before the rows' first line boundary, when all rows share it
      ldv % line_floats == 0
          ? (line_floats - reinterpret_cast<std::uintptr_t>(v) / sizeof(float) % line_floats) % line_floats
          : 0;
  const std::size_t body_end = head + (d_v - head) / lanes * lanes;
  for (std::size_t j = 0; j < bk; j += axpy_long_rows) {
    const std::size_t g = bk - j < axpy_long_rows ? bk - j : axpy_long_rows;
    const float* vj = v + j * ldv;
    const auto column = [&](std::size_t c) {
      float a = j > 0 ? o[c] : alpha != nullptr ? o[c] * alpha[0] : 0.0f;
      for (std::size_t h = 0; h < g; ++h) a = fmadd(p[j + h], vj[h * ldv + c], a);
      o[c] = a;
    };
    for (std::size_t c = 0; c < head; ++c) column(c);
    for (std::size_t c = head; c < body_end; c += lanes) {
      vfloat a = j > 0              ? vfloat::load_unaligned(o + c)
                 : alpha != nullptr ? vfloat::load_unaligned(o + c) * vfloat(alpha[0])
                                    : vfloat(0.0f);
      if (g == axpy_long_rows) {
#pragma GCC unroll 8
        for (std::size_t h = 0; h < axpy_long_rows; ++h)
          a = xsimd::fma(vfloat(p[j + h]), vfloat::load_unaligned(vj + h * ldv + c), a);
      } else {
        for (std::size_t h = 0; h < g; ++h)
          a = xsimd::fma(vfloat(p[j + h]), vfloat::load_unaligned(vj + h * ldv + c), a);
      }
      a.store_unaligned(o + c);
    }
    for (std::size_t c = body_end; c < d_v; ++c) column(c);
  }
}

void rows_axpy_simd(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const float* v, std::size_t ldv,
                    std::size_t d_v, const float* alpha, float* o, std::size_t ldo) noexcept {
  if (!XSIMD_WITH_NEON && nr == 1 && d_v > 256) {  // (measured on x86 only)
    rows_axpy_one_long(p, bk, v, ldv, d_v, alpha, o);
    return;
  }
  std::size_t kb = d_v > 256 ? axpy_keys_long : axpy_keys;
  if (nr == 1 && d_v > axpy_vectors(1) * lanes && axpy_block_floats / d_v < kb) kb = axpy_block_floats / d_v;
  for (std::size_t j0 = 0; j0 < bk; j0 += kb) {
    const std::size_t nk = bk - j0 < kb ? bk - j0 : kb;
    for (std::size_t r0 = 0; r0 < nr; r0 += axpy_rows_max) {
      const std::size_t rr = nr - r0 < axpy_rows_max ? nr - r0 : axpy_rows_max;
      const float* a = j0 > 0 ? axpy_ones : alpha != nullptr ? alpha + r0 : nullptr;
      rows_axpy_groups[rr - 1](p + r0 * ldp + j0, ldp, nk, v + j0 * ldv, ldv, d_v, a, o + r0 * ldo, ldo);
    }
  }
}

#if XSIMD_WITH_NEON
// --- few rows on NEON (the table's rows_dot and rows_axpy on AArch64 and ARMv7; rows_softmax is the portable one) -
// The portable kernels above reduce each key's dot product with xsimd's haddp and broadcast each probability on
// its own; with 4 lanes that is most of the work (decoding 1 × 1024 × 64 ran 1.4× Eigen's instructions on AArch64).
// Here one row of q sits in registers (a chunk of up to 16 vectors on AArch64, 8 on ARMv7) while the keys stream
// past it, four keys' sums come out of two rounds of pairwise adds, and P·V multiplies four probabilities held in
// one register by lane. Every FMA is fused (ARMv7 with VFPv4: VDUP + VFMA, as its Advanced SIMD has no fused
// multiply-add by scalar), so the rounding is that of the portable kernels.

// acc + b·c, fused where the FPU has it (as xsimd::fma).
MICROATTN_NEON_INLINE float32x4_t neon_fmadd(float32x4_t acc, float32x4_t b, float32x4_t c) noexcept {
#if XSIMD_WITH_NEON64 || defined(__ARM_FEATURE_FMA)
  return vfmaq_f32(acc, b, c);
#else
  return vmlaq_f32(acc, b, c);
#endif
}

// acc + b·(lane L of c).
template <int L>
MICROATTN_NEON_INLINE float32x4_t neon_fmadd_lane(float32x4_t acc, float32x4_t b, float32x4_t c) noexcept {
#if XSIMD_WITH_NEON64
  return vfmaq_laneq_f32(acc, b, c, L);
#else
  return neon_fmadd(acc, b, vdupq_lane_f32(L < 2 ? vget_low_f32(c) : vget_high_f32(c), L & 1));
#endif
}

// Lane i = the sum of the lanes of a_i.
MICROATTN_NEON_INLINE float32x4_t neon_sum_lanes4(float32x4_t a0, float32x4_t a1, float32x4_t a2,
                                                  float32x4_t a3) noexcept {
#if XSIMD_WITH_NEON64
  return vpaddq_f32(vpaddq_f32(a0, a1), vpaddq_f32(a2, a3));
#else
  const float32x2_t s0 = vadd_f32(vget_low_f32(a0), vget_high_f32(a0));
  const float32x2_t s1 = vadd_f32(vget_low_f32(a1), vget_high_f32(a1));
  const float32x2_t s2 = vadd_f32(vget_low_f32(a2), vget_high_f32(a2));
  const float32x2_t s3 = vadd_f32(vget_low_f32(a3), vget_high_f32(a3));
  return vcombine_f32(vpadd_f32(s0, s1), vpadd_f32(s2, s3));
#endif
}

MICROATTN_NEON_INLINE float neon_sum_lanes(float32x4_t a) noexcept {
#if XSIMD_WITH_NEON64
  return vaddvq_f32(a);
#else
  const float32x2_t s = vadd_f32(vget_low_f32(a), vget_high_f32(a));
  return vget_lane_f32(vpadd_f32(s, s), 0);
#endif
}

// A compiler barrier between keys (and every 8 vectors of one): GCC's scheduler would otherwise hoist the loads of
// the next keys into the FMAs of this one, run out of registers and spill, and leave loads unpaired (LDP).
MICROATTN_NEON_INLINE void neon_one_key_at_a_time() noexcept { asm volatile("" ::: "memory"); }

// Vector c of a row, read in order c = 0, 1, …: AArch64 loads take an immediate offset (and pair into LDP); ARMv7's
// VLD1 has none, only post-increment, so the pointer walks the row (else each load needs an address of its own).
MICROATTN_NEON_INLINE float32x4_t neon_load_next(const float*& row, std::size_t c) noexcept {
#if XSIMD_WITH_NEON64
  return vld1q_f32(row + 4 * c);
#else
  (void)c;
  const float32x4_t x = vld1q_f32(row);
  row += 4;
  asm("" : "+r"(row));  // hides base + constant from GCC, which would fold the walk back into offsets
  return x;
#endif
}

// Dot products of one row chunk q[0, 4·NV) (in registers) with the same columns of bk keys: s[j] = the dot
// (add: s[j] += it, a later chunk of a long row).
template <std::size_t NV>
void rows_dot_neon_chunk(const float* q, const float* k, std::size_t ldk, std::size_t bk, float* s, bool add) noexcept {
  float32x4_t qv[NV];
  MICROATTN_NEON_UNROLL
  for (std::size_t v = 0; v < NV; ++v) qv[v] = vld1q_f32(q + 4 * v);
  auto dot = [&](const float* kj) __attribute__((always_inline)) {
    neon_one_key_at_a_time();
    float32x4_t acc = vmulq_f32(qv[0], neon_load_next(kj, 0));
    MICROATTN_NEON_UNROLL
    for (std::size_t v = 1; v < NV; ++v) {
      if (v % 8 == 0) neon_one_key_at_a_time();
      acc = neon_fmadd(acc, qv[v], neon_load_next(kj, v));
    }
    return acc;
  };
  std::size_t j = 0;
  for (; j + 4 <= bk; j += 4, k += 4 * ldk) {
    float32x4_t dots = neon_sum_lanes4(dot(k), dot(k + ldk), dot(k + 2 * ldk), dot(k + 3 * ldk));
    if (add) dots = vaddq_f32(dots, vld1q_f32(s + j));
    vst1q_f32(s + j, dots);
  }
  for (; j < bk; ++j, k += ldk) s[j] = (add ? s[j] : 0.0f) + neon_sum_lanes(dot(k));
}

#if XSIMD_WITH_NEON64
constexpr std::size_t neon_dot_chunk = 16;  // 16 of q + 4 accumulators + loads, of 32 registers
constexpr std::size_t neon_axpy_vectors = 16;
#else
constexpr std::size_t neon_dot_chunk = 8;  // 8 + 4 + loads, of 16
constexpr std::size_t neon_axpy_vectors = 8;
#endif
using rows_dot_neon_fn = void (*)(const float*, const float*, std::size_t, std::size_t, float*, bool) noexcept;
template <std::size_t... I>
constexpr std::array<rows_dot_neon_fn, sizeof...(I)> make_dot_chunks(std::index_sequence<I...>) {
  return {{&rows_dot_neon_chunk<I + 1>...}};
}
constexpr auto rows_dot_neon_chunks = make_dot_chunks(std::make_index_sequence<neon_dot_chunk>{});

// Rows one at a time (the keys of a block stay in L1 for the next row), the head dim in chunks of whole vectors,
// then its tail (d % 4) per key.
void rows_dot_neon(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const float* k, std::size_t ldk,
                   std::size_t bk, float* s, std::size_t lds) noexcept {
  const std::size_t nqv = d / 4;
  for (std::size_t r = 0; r < nr; ++r) {
    const float* qr = q + r * ldq;
    float* sr = s + r * lds;
    for (std::size_t v0 = 0; v0 < nqv; v0 += neon_dot_chunk) {
      const std::size_t nv = nqv - v0 < neon_dot_chunk ? nqv - v0 : neon_dot_chunk;
      rows_dot_neon_chunks[nv - 1](qr + 4 * v0, k + 4 * v0, ldk, bk, sr, v0 > 0);
    }
    if (d % 4 != 0)
      for (std::size_t j = 0; j < bk; ++j) {
        float dot = nqv > 0 ? sr[j] : 0.0f;
        for (std::size_t t = 4 * nqv; t < d; ++t) dot = fmadd(qr[t], k[j * ldk + t], dot);
        sr[j] = dot;
      }
  }
}

// One row's columns [0, 4·CV) of Σ_j p[j]·v[j]: CV accumulators, four probabilities per register used by lane.
template <int L, std::size_t CV>
MICROATTN_NEON_INLINE void neon_axpy_key(float32x4_t (&acc)[CV], const float* vj, float32x4_t p4) noexcept {
  MICROATTN_NEON_UNROLL
  for (std::size_t c = 0; c < CV; ++c) {
    if (c % 8 == 0) neon_one_key_at_a_time();
    acc[c] = neon_fmadd_lane<L>(acc[c], neon_load_next(vj, c), p4);
  }
}

template <std::size_t CV>
void rows_axpy_neon_tile(const float* p, std::size_t bk, const float* v, std::size_t ldv, const float* alpha,
                         float* o) noexcept {
  float32x4_t acc[CV];
  MICROATTN_NEON_UNROLL
  for (std::size_t c = 0; c < CV; ++c) acc[c] = vdupq_n_f32(0.0f);
  std::size_t j = 0;
  for (; j + 4 <= bk; j += 4, v += 4 * ldv) {
    const float32x4_t p4 = vld1q_f32(p + j);
    neon_axpy_key<0>(acc, v, p4);
    neon_axpy_key<1>(acc, v + ldv, p4);
    neon_axpy_key<2>(acc, v + 2 * ldv, p4);
    neon_axpy_key<3>(acc, v + 3 * ldv, p4);
  }
  for (; j < bk; ++j, v += ldv) neon_axpy_key<0>(acc, v, vld1q_dup_f32(p + j));
  MICROATTN_NEON_UNROLL
  for (std::size_t c = 0; c < CV; ++c) {
    float32x4_t out = acc[c];
    if (alpha != nullptr) out = neon_fmadd(out, vld1q_f32(o + 4 * c), vdupq_n_f32(*alpha));
    vst1q_f32(o + 4 * c, out);
  }
}
using rows_axpy_neon_fn = void (*)(const float*, std::size_t, const float*, std::size_t, const float*, float*) noexcept;
template <std::size_t... I>
constexpr std::array<rows_axpy_neon_fn, sizeof...(I)> make_axpy_tiles(std::index_sequence<I...>) {
  return {{&rows_axpy_neon_tile<I + 1>...}};
}
constexpr auto rows_axpy_neon_tiles = make_axpy_tiles(std::make_index_sequence<neon_axpy_vectors>{});

// Rows one at a time, columns in tiles of up to neon_axpy_vectors vectors (all of d_v = 64 on AArch64, half on
// ARMv7), each tile's accumulators in registers over all bk keys; then the columns short of a vector.
void rows_axpy_neon(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const float* v, std::size_t ldv,
                    std::size_t d_v, const float* alpha, float* o, std::size_t ldo) noexcept {
  const std::size_t nv = d_v / 4;
  for (std::size_t r = 0; r < nr; ++r) {
    const float* pr = p + r * ldp;
    float* orow = o + r * ldo;
    const float* ar = alpha != nullptr ? alpha + r : nullptr;
    for (std::size_t v0 = 0; v0 < nv; v0 += neon_axpy_vectors) {
      const std::size_t w = nv - v0 < neon_axpy_vectors ? nv - v0 : neon_axpy_vectors;
      rows_axpy_neon_tiles[w - 1](pr, bk, v + 4 * v0, ldv, ar, orow + 4 * v0);
    }
    for (std::size_t c = 4 * nv; c < d_v; ++c) {
      float acc = 0.0f;
      for (std::size_t j = 0; j < bk; ++j) acc = fmadd(pr[j], v[j * ldv + c], acc);
      orow[c] = ar != nullptr ? fmadd(orow[c], *ar, acc) : acc;
    }
  }
}
#endif  // XSIMD_WITH_NEON

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
  gemm_packed(g);
}

// Attention takes the few-query path up to half a vector of queries: the tile path costs a vector of queries
// whatever the tile holds, the row path one query at a time. AVX-512, n_kv = 1024 (bench_decode_peers BM_few_path,
// bench/results/decode_peers_avx512.txt): 1 query 5.9 µs against 33.9, 8 queries 26.8 against 33.8, 10 queries
// 41.4 against 34.4.
#if XSIMD_WITH_NEON
// NEON (4 lanes): a tile costs a whole vector of 4 queries, 5 to 8 queries cost two. Counted under qemu (decode
// n_q × 1024 × 64, scripts/arm_bench.sh): the row path costs 72 k instructions per query on AArch64 against 343 k for
// a tile of 1–4 queries and 515 k for 5–8, so up to 7 queries; ARMv7 107 k against 437 k and 705 k, up to 6.
constexpr std::size_t few_query_max = XSIMD_WITH_NEON64 ? 7 : 6;
#else
constexpr std::size_t few_query_max = lanes / 2;
#endif

// The few-row kernels of the table: NEON has its own (above).
#if XSIMD_WITH_NEON
constexpr auto few_rows_dot = &rows_dot_neon;
constexpr auto few_rows_softmax = &rows_softmax_simd;  // as fast as a NEON one: the exp is most of it
constexpr auto few_rows_axpy = &rows_axpy_neon;
#else
constexpr auto few_rows_dot = &rows_dot_simd;
constexpr auto few_rows_softmax = &rows_softmax_simd;
constexpr auto few_rows_axpy = &rows_axpy_simd;
#endif

// AArch32 Advanced SIMD has no subnormals: it flushes them to zero whatever FPSCR says.
constexpr bool flushes_subnormals = XSIMD_WITH_NEON && !XSIMD_WITH_NEON64;

const Kernels simd_table{arch::name(),
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
                         few_rows_dot,
                         few_rows_softmax,
                         few_rows_axpy};

}  // namespace

const Kernels* simd_kernels() noexcept { return &simd_table; }

}  // namespace detail
}  // namespace microattn
