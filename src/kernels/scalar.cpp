// Portable scalar kernels: the only path on Cortex-M (where xsimd has no architecture) and the one that
// -Dsimd=scalar selects. No xsimd include here (xsimd.hpp does not even compile against newlib).
// Nothing is packed: the stack stays at a few hundred bytes, which is what an MCU can spare.
#include <cstdint>
#include <cstring>

#include "kernels/exp_constants.hpp"
#include "kernels/kernels.hpp"
#include "kernels/scalar_math.hpp"
#include "microattn/config.hpp"

namespace microattn {
namespace detail {
namespace {

// 4×4 register tile: 16 accumulators + 8 operands fit the 32 single-precision registers of a Cortex-M4F/M7.
constexpr std::size_t gemm_mr = 4;
constexpr std::size_t gemm_nr = 4;

template <bool TransposeB>
inline float b_at(const GemmArgs& g, std::size_t p, std::size_t j) noexcept {
  return TransposeB ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j];
}

template <bool TransposeB>
void gemm_tile_4x4_scalar(const GemmArgs& g, std::size_t i0, std::size_t j0) noexcept {
  float acc[gemm_mr][gemm_nr] = {};
  const float* a0 = g.a + i0 * g.lda;
  for (std::size_t p = 0; p < g.k; ++p) {
    float av[gemm_mr], bv[gemm_nr];
    for (std::size_t r = 0; r < gemm_mr; ++r) av[r] = a0[r * g.lda + p];
    for (std::size_t c = 0; c < gemm_nr; ++c) bv[c] = b_at<TransposeB>(g, p, j0 + c);
    for (std::size_t r = 0; r < gemm_mr; ++r)
      for (std::size_t c = 0; c < gemm_nr; ++c) acc[r][c] = fmadd(av[r], bv[c], acc[r][c]);
  }
  for (std::size_t r = 0; r < gemm_mr; ++r)
    for (std::size_t c = 0; c < gemm_nr; ++c) g.c[(i0 + r) * g.ldc + j0 + c] = acc[r][c];
}

// Edge tiles (fewer than 4 rows or columns left): same summation order, one element at a time.
template <bool TransposeB>
void gemm_edge_scalar(const GemmArgs& g, std::size_t i0, std::size_t mr, std::size_t j0, std::size_t nr) noexcept {
  for (std::size_t r = 0; r < mr; ++r) {
    const float* ar = g.a + (i0 + r) * g.lda;
    for (std::size_t c = 0; c < nr; ++c) {
      float acc = 0.0f;
      for (std::size_t p = 0; p < g.k; ++p) acc = fmadd(ar[p], b_at<TransposeB>(g, p, j0 + c), acc);
      g.c[(i0 + r) * g.ldc + j0 + c] = acc;
    }
  }
}

template <bool TransposeB>
void gemm_scalar_impl(const GemmArgs& g) noexcept {
  for (std::size_t i0 = 0; i0 < g.m; i0 += gemm_mr) {
    const std::size_t mr = g.m - i0 < gemm_mr ? g.m - i0 : gemm_mr;
    for (std::size_t j0 = 0; j0 < g.n; j0 += gemm_nr) {
      const std::size_t nr = g.n - j0 < gemm_nr ? g.n - j0 : gemm_nr;
      if (mr == gemm_mr && nr == gemm_nr) {
        gemm_tile_4x4_scalar<TransposeB>(g, i0, j0);
      } else {
        gemm_edge_scalar<TransposeB>(g, i0, mr, j0, nr);
      }
    }
  }
}

void gemm_scalar(const GemmArgs& g) noexcept {
  if (g.transpose_b) {
    gemm_scalar_impl<true>(g);
  } else {
    gemm_scalar_impl<false>(g);
  }
}

void exp_scalar_n(const float* x, float* y, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) y[i] = exp_scalar(x[i]);
}

void softmax_row_scalar(float* x, std::size_t n) noexcept {
  float m = x[0];
  for (std::size_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;  // a NaN is caught by the sum below
  if (m == -INFINITY) {
    // All −inf (or −inf and NaN): zeros, unless a NaN is there, which must still show.
    bool has_nan = false;
    for (std::size_t i = 0; i < n; ++i) has_nan = has_nan || x[i] != x[i];
    for (std::size_t i = 0; i < n; ++i) x[i] = has_nan ? NAN : 0.0f;
    return;
  }
  float sum = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = exp_scalar(x[i] - m);  // NaN − m is NaN, exp(NaN) is NaN, so the sum turns NaN
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (std::size_t i = 0; i < n; ++i) x[i] *= inv;
}

// ---- attention primitives (Br = attention_block_q lanes, see kernels.hpp) ----
constexpr std::size_t br = attention_block_q;

void attn_scores_scalar(const float* qt, std::size_t d_k, const float* k, std::size_t ldk, std::size_t bk, float* s,
                        std::size_t nq) noexcept {
  const GemmArgs g{k, ldk, qt, br, false, s, br, bk, nq, d_k};
  gemm_scalar(g);
}

void attn_softmax_scalar(float* s, std::size_t bk, float* m, float* l, float* alpha, std::size_t nq) noexcept {
  for (std::size_t i = 0; i < nq; ++i) {
    float mb = m[i];
    for (std::size_t j = 0; j < bk; ++j) mb = s[j * br + i] > mb ? s[j * br + i] : mb;
    const float m_use = mb == -INFINITY ? 0.0f : mb;
    alpha[i] = exp2_nonpositive_scalar(m[i] - m_use);
    float sum = 0.0f;
    for (std::size_t j = 0; j < bk; ++j) {
      const float p = exp2_nonpositive_scalar(s[j * br + i] - m_use);
      s[j * br + i] = p;
      sum += p;
    }
    l[i] = fmadd(l[i], alpha[i], sum);
    m[i] = mb;
  }
}

// Lanes [0, width): Width is the tile's full Br (a constant, so the lane loop unrolls — 4 lanes on Cortex-M)
// or 0 for a run-time width (short tiles, causal steps).
template <std::size_t Width>
void attn_pv_lanes(const float* p, std::size_t bk, const float* v, std::size_t ldv, std::size_t d_v, const float* alpha,
                   float* ot, std::size_t nq) noexcept {
  const std::size_t w = Width != 0 ? Width : nq;
  for (std::size_t c = 0; c < d_v; ++c)
    for (std::size_t i = 0; i < w; ++i) ot[c * br + i] *= alpha[i];
  for (std::size_t j = 0; j < bk; ++j) {
    const float* pj = p + j * br;
    const float* vj = v + j * ldv;
    for (std::size_t c = 0; c < d_v; ++c) {
      const float vjc = vj[c];
      float* oc = ot + c * br;
      for (std::size_t i = 0; i < w; ++i) oc[i] = fmadd(vjc, pj[i], oc[i]);
    }
  }
}

void attn_pv_scalar(const float* p, std::size_t bk, const float* v, std::size_t ldv, std::size_t d_v,
                    const float* alpha, float* ot, std::size_t nq) noexcept {
  if (nq == br) {
    attn_pv_lanes<br>(p, bk, v, ldv, d_v, alpha, ot, nq);
  } else {
    attn_pv_lanes<0>(p, bk, v, ldv, d_v, alpha, ot, nq);
  }
}

void attn_pack_q_scalar(const float* q, std::size_t ldq, std::size_t bq, std::size_t d_k, float factor,
                        float* qt) noexcept {
  for (std::size_t i = 0; i < bq; ++i)
    for (std::size_t p = 0; p < d_k; ++p) qt[p * br + i] = q[i * ldq + p] * factor;
}

void attn_store_out_scalar(const float* ot, const float* l, std::size_t bq, std::size_t d_v, float* out,
                           std::size_t ldo) noexcept {
  for (std::size_t i = 0; i < bq; ++i) {
    const float inv = l[i] == 0.0f ? 0.0f : 1.0f / l[i];
    for (std::size_t c = 0; c < d_v; ++c) out[i * ldo + c] = l[i] == 0.0f ? 0.0f : ot[c * br + i] * inv;
  }
}

void exp2_nonpositive_scalar_n(const float* x, float* y, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) y[i] = exp2_nonpositive_scalar(x[i]);
}

// ---- few rows (one query or one row of a per row, see kernels.hpp) ----

// Up to 3 queries take the row path: measured on x86 (bench_decode_peers BM_few_path, n_kv = 256) 2.9× faster for
// one query, 1.6× for three, slower from four (on Cortex-M a tile is 4 queries: four fill it).
constexpr std::size_t few_query_max_scalar = 3;

void rows_dot_scalar(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const float* k, std::size_t ldk,
                     std::size_t bk, float* s, std::size_t lds) noexcept {
  for (std::size_t r = 0; r < nr; ++r)
    for (std::size_t j = 0; j < bk; ++j) {
      const float* qr = q + r * ldq;
      const float* kj = k + j * ldk;
      float acc = 0.0f;
      for (std::size_t p = 0; p < d; ++p) acc = fmadd(qr[p], kj[p], acc);
      s[r * lds + j] = acc;
    }
}

void rows_softmax_scalar(float* s, std::size_t lds, std::size_t nr, std::size_t bk, float* m, float* l,
                         float* alpha) noexcept {
  for (std::size_t r = 0; r < nr; ++r) {
    float* sr = s + r * lds;
    float mb = m[r];
    for (std::size_t j = 0; j < bk; ++j) mb = sr[j] > mb ? sr[j] : mb;  // a NaN shows in its own 2^(s − m)
    const float m_use = mb == -INFINITY ? 0.0f : mb;
    alpha[r] = exp2_nonpositive_scalar(m[r] - m_use);
    float sum = 0.0f;
    for (std::size_t j = 0; j < bk; ++j) {
      sr[j] = exp2_nonpositive_scalar(sr[j] - m_use);
      sum += sr[j];
    }
    l[r] = fmadd(l[r], alpha[r], sum);
    m[r] = mb;
  }
}

void rows_axpy_scalar(const float* p, std::size_t ldp, std::size_t nr, std::size_t bk, const float* v, std::size_t ldv,
                      std::size_t d_v, const float* alpha, float* o, std::size_t ldo) noexcept {
  for (std::size_t r = 0; r < nr; ++r) {
    float* orow = o + r * ldo;
    for (std::size_t c = 0; c < d_v; ++c) orow[c] = alpha != nullptr ? orow[c] * alpha[r] : 0.0f;
    for (std::size_t j = 0; j < bk; ++j) {
      const float pj = p[r * ldp + j];
      const float* vj = v + j * ldv;
      for (std::size_t c = 0; c < d_v; ++c) orow[c] = fmadd(pj, vj[c], orow[c]);
    }
  }
}

constexpr Kernels scalar_table{"scalar",
                               1,
                               "gemm_4x4_scalar",
                               false,
                               gemm_scalar,
                               softmax_row_scalar,
                               exp_scalar_n,
                               attn_scores_scalar,
                               attn_softmax_scalar,
                               attn_pv_scalar,
                               attn_pack_q_scalar,
                               attn_store_out_scalar,
                               exp2_nonpositive_scalar_n,
                               few_query_max_scalar,
                               rows_dot_scalar,
                               rows_softmax_scalar,
                               rows_axpy_scalar};

}  // namespace

const Kernels& scalar_kernels() noexcept { return scalar_table; }

}  // namespace detail
}  // namespace microattn
