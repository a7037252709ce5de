// Internal kernel interface. One table per compiled instruction set: the scalar table always exists (it is
// the only one on Cortex-M), the xsimd table exists when the build targets an xsimd architecture. Entry
// points validate arguments and then call selected_kernels(); the test harness calls every table.
#pragma once

#include <cstddef>

#include "kernels/select.hpp"
#include "microattn/config.hpp"

// matmul blocking on SIMD builds: b is packed MATMUL_BLOCK_K × MATMUL_BLOCK_N floats at a time, in a stack buffer
// (4·K·N bytes: 12 KiB by default, one 32-wide panel of AVX-512, two of AVX2), which stays in L1 while every row of
// a streams past it; bounded so that matmul fits entry_point_stack_bytes. The scalar build packs nothing. Tuning of
// the library's build alone (-D on its compilation): no figure of the public headers depends on it.
#ifndef MICROATTN_MATMUL_BLOCK_K
#define MICROATTN_MATMUL_BLOCK_K 96
#endif
#ifndef MICROATTN_MATMUL_BLOCK_N
#define MICROATTN_MATMUL_BLOCK_N 32
#endif

namespace microattn {
namespace detail {

constexpr std::size_t matmul_block_k = MICROATTN_MATMUL_BLOCK_K;
constexpr std::size_t matmul_block_n = MICROATTN_MATMUL_BLOCK_N;
// Upper bound of matmul's stack use on SIMD builds: the packed block of b plus the frames (the micro-kernel's
// ragged-edge tile, up to 8×32 floats, and a few hundred bytes).
constexpr std::size_t matmul_stack_bytes = matmul_block_k * matmul_block_n * sizeof(float) + 2048;
static_assert(target_is_mcu || matmul_stack_bytes <= entry_point_stack_bytes - 2048,
              "MICROATTN_MATMUL_BLOCK_K·N: the packed block must leave room for the rest of the stack");

// c (m×n, row stride ldc) = a (m×k, lda) · b, where b is k×n (ldb) or, with transpose_b, n×k (ldb).
// Strides in elements. A one-row operand's stride is its column count (matmul() passes that whatever the view
// says): the kernels step row pointers past the last row, which a huge stride would wrap.
struct GemmArgs {
  const float* a;
  std::size_t lda;
  const float* b;
  std::size_t ldb;
  bool transpose_b;
  float* c;
  std::size_t ldc;
  std::size_t m, n, k;
};

// Fused attention works on one query tile of Br = attention_block_q queries at a time, with the queries in
// the vector lanes ("transposed" layout: element (row, query i) at buf[row * Br + i]). That makes every
// softmax reduction over keys vertical (lane-wise max and sum, no horizontal shuffles) and lets the
// scores and the P·V product both run on the gemm micro-kernel.
//   qt: d_k × Br, Q of the tile transposed and pre-multiplied by scale·log2(e) (scores come out in log2 units)
//   s:  bk × Br, scores of key block, overwritten by the probabilities 2^(s − m)
//   ot: d_v × Br, the un-normalised output accumulator
//   m, l, alpha: Br each — running max, running sum, and the factor 2^(m_old − m_new) of the last update
// The primitives compute lanes [0, nq) of the tile (nq <= Br queries present) and may compute more, up to
// nq rounded up to vector_floats: the driver zero-fills qt there, so those lanes stay finite and unused.
// A short tile (tiny n_q, or the end of the sequence) thus costs what it holds, not a full Br.
struct Kernels {
  const char* arch;           // by the naming rule of docs/design.md: "scalar", "avx512", "avx2", "sse2", "neon64", ...
  std::size_t vector_floats;  // lanes per vector register (1 for scalar)
  const char* gemm_name;      // micro-kernel by tile and arch, e.g. "gemm_8x32_avx512"
  bool flushes_subnormals;    // ARMv7 Advanced SIMD: subnormal inputs and results are 0 (architectural)
  void (*gemm)(const GemmArgs& args) noexcept;
  void (*softmax_row)(float* x, std::size_t n) noexcept;          // in place, n >= 1
  void (*exp)(const float* x, float* y, std::size_t n) noexcept;  // x == y allowed
  // s[j][i] = Σ_p qt[p][i] · k[j·ldk + p] for j < bk.
  void (*attn_scores)(const float* qt, std::size_t d_k, const float* k, std::size_t ldk, std::size_t bk, float* s,
                      std::size_t nq) noexcept;
  // Online-softmax update of a block: m_new = max(m, max_j s[j]); alpha = 2^(m − m_new); s[j] = 2^(s[j] − m_new);
  // l = l·alpha + Σ_j s[j]; m = m_new. A lane whose m_new is −inf (nothing visible yet) uses 0 in place of
  // m_new, so it keeps l = 0 and never computes −inf − (−inf).
  void (*attn_softmax)(float* s, std::size_t bk, float* m, float* l, float* alpha, std::size_t nq) noexcept;
  // ot[c][i] = ot[c][i]·alpha[i] + Σ_j p[j][i] · v[j·ldv + c] for c < d_v.
  void (*attn_pv)(const float* p, std::size_t bk, const float* v, std::size_t ldv, std::size_t d_v, const float* alpha,
                  float* ot, std::size_t nq) noexcept;
  // qt[p][i] = q[i·ldq + p]·factor for i < bq, p < d_k, and 0 for the lanes from bq up to a whole vector.
  void (*attn_pack_q)(const float* q, std::size_t ldq, std::size_t bq, std::size_t d_k, float factor,
                      float* qt) noexcept;
  // out[i·ldo + c] = ot[c][i] / l[i] for i < bq, c < d_v; 0 where l[i] == 0 (the query saw no key).
  void (*attn_store_out)(const float* ot, const float* l, std::size_t bq, std::size_t d_v, float* out,
                         std::size_t ldo) noexcept;
  // 2^x for x <= 0 or NaN: the exp attn_softmax uses (exposed for the accuracy test).
  void (*exp2_nonpositive)(const float* x, float* y, std::size_t n) noexcept;

  // --- Row kernels: one query (or one row of a) per row, keys along it; only the head dim is in the lanes. ---
  // Attention with few queries (decoding) and matmul with small m run on these: a query tile would fill 1 lane of
  // 16 per query, and packing all of b for a handful of rows costs more than the product.
  // attention_run takes the few-query path for n_q <= few_query_max (chosen by measurement: bench_decode_peers
  // BM_few_path).
  std::size_t few_query_max;
  // s[r·lds + j] = Σ_p q[r·ldq + p]·k[j·ldk + p] for r < nr, j < bk (matmul with small m and b transposed, too).
  void (*rows_dot)(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const float* k, std::size_t ldk,
                   std::size_t bk, float* s, std::size_t lds) noexcept;
  // Online-softmax update of row r < nr over s[r·lds + j], j < bk, with the rule of attn_softmax (m, l, alpha
  // per row).
  void (*rows_softmax)(float* s, std::size_t lds, std::size_t nr, std::size_t bk, float* m, float* l,
                       float* alpha) noexcept;
  // o[r·ldo + c] = o[r·ldo + c]·alpha[r] + Σ_j p[r·ldp + j]·v[j·ldv + c] for r < nr, c < d_v: AXPYs over the rows
  // of v, each row read once for all nr rows. alpha == nullptr: o = Σ_j … (o's old contents are not read; this is
  // matmul with small m).
  void (*rows_axpy)(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const float* v, std::size_t ldv,
                    std::size_t d_v, const float* alpha, float* o, std::size_t ldo) noexcept;
};

// The scalar row kernels and threshold (attention/scalar.cpp), shared with vector tables that have none of their own.
// Up to 3 queries take the few-query path: with the scalar kernels it measured faster than a tile for up to three
// queries and slower from four (bench_decode_peers BM_few_path; on Cortex-M a tile is 4 queries, which four fill).
constexpr std::size_t few_query_max_scalar = 3;
void rows_dot_scalar(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const float* k, std::size_t ldk,
                     std::size_t bk, float* s, std::size_t lds) noexcept;
void rows_softmax_scalar(float* s, std::size_t lds, std::size_t nr, std::size_t bk, float* m, float* l,
                         float* alpha) noexcept;
void rows_axpy_scalar(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const float* v, std::size_t ldv,
                      std::size_t d_v, const float* alpha, float* o, std::size_t ldo) noexcept;

// 2^x for x <= 0 or NaN (scalar_math.hpp's exp2_nonpositive_float), out of line (attention/scalar.cpp): for cold
// callers.
float exp2_nonpositive_call(float x) noexcept;

const Kernels& scalar_kernels() noexcept;
// nullptr when the build has no xsimd architecture (Cortex-M, -Dsimd=scalar).
const Kernels* vector_kernels() noexcept;
// What simd_arch() reports: xsimd's name of the architecture the vector table was compiled for ("avx512bw",
// "fma3+avx2", ...; public since the first release, so not the naming rule's arch), "helium" or "scalar".
const char* simd_arch_name() noexcept;
// What the entry points use: the xsimd table when there is one, else the scalar table.
inline const Kernels& selected_kernels() noexcept { return selected_table(vector_kernels(), scalar_kernels); }

}  // namespace detail
}  // namespace microattn
