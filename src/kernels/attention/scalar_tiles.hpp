// The scalar table's attention primitives (Br = attention_block_q lanes, see kernels/attention.hpp): part of
// scalar.cpp's translation unit, included there alone, where these definitions stood (the same order, so GCC inlines as
// before).
#pragma once

#include <cstddef>

#include "kernels/attention.hpp"
#include "kernels/exp/constants.hpp"
#include "kernels/scalar_math.hpp"

namespace microattn {
namespace detail {
namespace {

constexpr std::size_t br = attention_block_q;

void attn_scores_scalar(const float* qt, std::size_t d_k, const float* k, std::size_t ldk, std::size_t bk, float* s,
                        std::size_t nq) noexcept {
  const GemmArgs g{k, ldk, qt, br, false, s, br, bk, nq, d_k};
  gemm_scalar(g);
}

// Lanes i and i + 1 of a key block (x = s + i): x[j][0..1] = 2^(x[j][0..1] − u0..1), their sums. Two lanes per
// pass keep two inlined 2^x in flash instead of four.
// Each Horner step's multiply-add overwrites its addend (VFMA accumulates into its destination), so every 2^x
// needs fresh copies of c5 … c0: on Cortex-M one VLDM per pair reloads all twelve (instead of twelve moves
// or literal loads).
#if defined(__arm__) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M' && defined(__ARM_FP) && (__ARM_FP & 4)
constexpr Poly6 exp2_poly = exp2_constants::poly;
constexpr float exp2_addends[12] = {exp2_poly.c5, exp2_poly.c5, exp2_poly.c4, exp2_poly.c4, exp2_poly.c3, exp2_poly.c3,
                                    exp2_poly.c2, exp2_poly.c2, exp2_poly.c1, exp2_poly.c1, exp2_poly.c0, exp2_poly.c0};
#endif

__attribute__((noinline)) void attn_softmax_nx2_scalar(float* __restrict x, std::size_t bk, float u0, float u1,
                                                       float& sum0, float& sum1) noexcept {
  float s0 = 0.0f, s1 = 0.0f;
  if (std::size_t j = bk) do {  // tested at the bottom
#if defined(__arm__) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M' && defined(__ARM_FP) && (__ARM_FP & 4)
      register float a5 asm("s16"), a4 asm("s18"), a3 asm("s20"), a2 asm("s22"), a1 asm("s24"), a0 asm("s26");
      register float b5 asm("s17"), b4 asm("s19"), b3 asm("s21"), b2 asm("s23"), b1 asm("s25"), b0 asm("s27");
      // volatile: reloaded every pair, not hoisted out of the loop (that would bring the copies back)
      asm volatile("vldmia %12, {s16-s27}"  // interleaved: a5, b5, a4, b4, …
                   : "=t"(a5), "=t"(b5), "=t"(a4), "=t"(b4), "=t"(a3), "=t"(b3), "=t"(a2), "=t"(b2), "=t"(a1), "=t"(b1),
                     "=t"(a0), "=t"(b0)
                   : "r"(exp2_addends), "m"(exp2_addends));
      const float p0 = exp2_nonpositive_float_with(x[0] - u0, a5, a4, a3, a2, a1, a0);
      const float p1 = exp2_nonpositive_float_with(x[1] - u1, b5, b4, b3, b2, b1, b0);
#else
      const float p0 = exp2_nonpositive_float(x[0] - u0), p1 = exp2_nonpositive_float(x[1] - u1);
#endif
      x[0] = p0, x[1] = p1;
      s0 += p0, s1 += p1;
      x += br;
    } while (--j != 0);
  sum0 = s0, sum1 = s1;
}

// A full tile (4 lanes): one pass reads each key's four scores together (contiguous, no lane loop), the
// running values of all lanes stay in registers. Per lane the same operations in the same order as below.
__attribute__((noinline)) void attn_softmax_nx4_scalar(float* __restrict s, std::size_t bk, float* __restrict m,
                                                       float* __restrict l, float* __restrict alpha) noexcept {
  float m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3];
  const float* __restrict sj = s;
  for (std::size_t j = bk; j != 0; --j, sj += br) {
    m0 = sj[0] > m0 ? sj[0] : m0;
    m1 = sj[1] > m1 ? sj[1] : m1;
    m2 = sj[2] > m2 ? sj[2] : m2;
    m3 = sj[3] > m3 ? sj[3] : m3;
  }
  const float u0 = m0 == -INFINITY ? 0.0f : m0, u1 = m1 == -INFINITY ? 0.0f : m1;
  const float u2 = m2 == -INFINITY ? 0.0f : m2, u3 = m3 == -INFINITY ? 0.0f : m3;
  float sums[4];
  attn_softmax_nx2_scalar(s, bk, u0, u1, sums[0], sums[1]);
  attn_softmax_nx2_scalar(s + 2, bk, u2, u3, sums[2], sums[3]);
  alpha[0] = u0, alpha[1] = u1, alpha[2] = u2, alpha[3] = u3;  // once per block: a loop, not four copies
  for (std::size_t i = 0; i < 4; ++i) {
    const float a = exp2_nonpositive_call(m[i] - alpha[i]);
    alpha[i] = a;
    l[i] = fmadd(l[i], a, sums[i]);
  }
  m[0] = m0, m[1] = m1, m[2] = m2, m[3] = m3;
}

void attn_softmax_scalar(float* s, std::size_t bk, float* m, float* l, float* alpha, std::size_t nq) noexcept {
  if (br == 4 && nq == 4) {
    attn_softmax_nx4_scalar(s, bk, m, l, alpha);
    return;
  }
  for (std::size_t i = 0; i < nq; ++i) {
    float mb = m[i];
    for (std::size_t j = 0; j < bk; ++j) mb = s[j * br + i] > mb ? s[j * br + i] : mb;
    const float m_use = mb == -INFINITY ? 0.0f : mb;
    alpha[i] = exp2_nonpositive_call(m[i] - m_use);
    float sum = 0.0f;
    for (std::size_t j = 0; j < bk; ++j) {
      const float p = exp2_nonpositive_call(s[j * br + i] - m_use);
      s[j * br + i] = p;
      sum += p;
    }
    l[i] = fmadd(l[i], alpha[i], sum);
    m[i] = mb;
  }
}

// P·V of a full tile (br = 4 lanes) for columns [c0, c0 + 4): the 16 accumulators ot[c][i] stay in registers
// across the whole key block (loaded, rescaled by alpha once, stored once), and each key costs 4 loads of p,
// 4 of v and 16 multiply-adds. Same order as the plain loop: ot·alpha, then + p[j]·v[j][c] for j in order.
__attribute__((noinline)) void attn_pv_4x4_scalar(const float* p, std::size_t bk, const float* __restrict v,
                                                  std::size_t ldv, const float* __restrict alpha,
                                                  float* __restrict ot) noexcept {
  const float al0 = alpha[0], al1 = alpha[1], al2 = alpha[2], al3 = alpha[3];
  float* __restrict o0 = ot;
  float* __restrict o1 = ot + br;
  float* __restrict o2 = ot + 2 * br;
  float* __restrict o3 = ot + 3 * br;
  // t.cCI: column c0 + C, lane I
  Tile4x4 t{o0[0] * al0, o0[1] * al1, o0[2] * al2, o0[3] * al3, o1[0] * al0, o1[1] * al1, o1[2] * al2, o1[3] * al3,
            o2[0] * al0, o2[1] * al1, o2[2] * al2, o2[3] * al3, o3[0] * al0, o3[1] * al1, o3[2] * al2, o3[3] * al3};
  if (std::size_t j = bk) do {  // tested at the bottom: one branch a key, not two
      float p0, p1, p2, p3, v0, v1, v2, v3;
      load4_a_next(p, p0, p1, p2, p3);  // p += br
      load4_b(v, v0, v1, v2, v3);
      v += ldv;
      t.fma(v0, v1, v2, v3, p0, p1, p2, p3);
    } while (--j != 0);
  o0[0] = t.c00, o0[1] = t.c01, o0[2] = t.c02, o0[3] = t.c03;
  o1[0] = t.c10, o1[1] = t.c11, o1[2] = t.c12, o1[3] = t.c13;
  o2[0] = t.c20, o2[1] = t.c21, o2[2] = t.c22, o2[3] = t.c23;
  o3[0] = t.c30, o3[1] = t.c31, o3[2] = t.c32, o3[3] = t.c33;
}

// One column, four lanes (the columns left after the 4-column tiles).
void attn_pv_1x4_scalar(const float* __restrict p, std::size_t bk, const float* __restrict v, std::size_t ldv,
                        const float* __restrict alpha, float* __restrict ot) noexcept {
  float c0 = ot[0] * alpha[0], c1 = ot[1] * alpha[1], c2 = ot[2] * alpha[2], c3 = ot[3] * alpha[3];
  for (std::size_t j = bk; j != 0; --j) {
    const float vj = *v;
    c0 = fmadd(vj, p[0], c0);
    c1 = fmadd(vj, p[1], c1);
    c2 = fmadd(vj, p[2], c2);
    c3 = fmadd(vj, p[3], c3);
    p += br;
    v += ldv;
  }
  ot[0] = c0, ot[1] = c1, ot[2] = c2, ot[3] = c3;
}

void attn_pv_scalar(const float* p, std::size_t bk, const float* v, std::size_t ldv, std::size_t d_v,
                    const float* alpha, float* ot, std::size_t nq) noexcept {
  if (br == 4 && nq == 4) {
    std::size_t c = 0;
    for (; c + 4 <= d_v; c += 4) attn_pv_4x4_scalar(p, bk, v + c, ldv, alpha, ot + c * br);
    for (; c < d_v; ++c) attn_pv_1x4_scalar(p, bk, v + c, ldv, alpha, ot + c * br);
    return;
  }
  // Short tiles (and builds with another Br): one lane at a time, the same order per element.
  for (std::size_t c = 0; c < d_v; ++c) {
    float* __restrict oc = ot + c * br;
    for (std::size_t i = 0; i < nq; ++i) {
      float acc = oc[i] * alpha[i];
      const float* __restrict pj = p + i;
      const float* __restrict vj = v + c;
      for (std::size_t j = bk; j != 0; --j, pj += br, vj += ldv) acc = fmadd(*vj, *pj, acc);
      oc[i] = acc;
    }
  }
}

void attn_pack_q_scalar(const float* q, std::size_t ldq, std::size_t bq, std::size_t d_k, float factor,
                        float* qt) noexcept {
  if (br == 4 && bq == 4) {  // four rows of q read side by side, qt written in order
    const float* __restrict q0 = q;
    const float* __restrict q1 = q + ldq;
    const float* __restrict q2 = q + 2 * ldq;
    const float* __restrict q3 = q + 3 * ldq;
    float* __restrict t = qt;
    for (std::size_t p = d_k; p != 0; --p, t += br) {
      t[0] = *q0++ * factor;
      t[1] = *q1++ * factor;
      t[2] = *q2++ * factor;
      t[3] = *q3++ * factor;
    }
    return;
  }
  for (std::size_t i = 0; i < bq; ++i)
    for (std::size_t p = 0; p < d_k; ++p) qt[p * br + i] = q[i * ldq + p] * factor;
}

void attn_store_out_scalar(const float* ot, const float* l, std::size_t bq, std::size_t d_v, float* out,
                           std::size_t ldo) noexcept {
  if (br == 4 && bq == 4 && l[0] != 0.0f && l[1] != 0.0f && l[2] != 0.0f && l[3] != 0.0f) {
    const float inv0 = 1.0f / l[0], inv1 = 1.0f / l[1], inv2 = 1.0f / l[2], inv3 = 1.0f / l[3];
    float* __restrict y0 = out;
    float* __restrict y1 = out + ldo;
    float* __restrict y2 = out + 2 * ldo;
    float* __restrict y3 = out + 3 * ldo;
    const float* __restrict t = ot;
    for (std::size_t c = d_v; c != 0; --c, t += br) {
      *y0++ = t[0] * inv0;
      *y1++ = t[1] * inv1;
      *y2++ = t[2] * inv2;
      *y3++ = t[3] * inv3;
    }
    return;
  }
  for (std::size_t i = 0; i < bq; ++i) {
    const float inv = l[i] == 0.0f ? 0.0f : 1.0f / l[i];
    for (std::size_t c = 0; c < d_v; ++c) out[i * ldo + c] = l[i] == 0.0f ? 0.0f : ot[c * br + i] * inv;
  }
}

void exp2_nonpositive_scalar(const float* x, float* y, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) y[i] = exp2_nonpositive_call(x[i]);
}

}  // namespace
}  // namespace detail
}  // namespace microattn
