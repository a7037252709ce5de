// The NEON row kernels (rows_dot and rows_axpy of the AArch64 and ARMv7 tables): one row of q or four
// probabilities in registers, multiply by lane.
#pragma once

#include "kernels/attention/simd_common.hpp"

namespace microattn {
namespace detail {
namespace {

#if XSIMD_WITH_NEON
// --- row kernels on NEON (the table's rows_dot and rows_axpy on AArch64 and ARMv7; rows_softmax is the portable one) -
// The portable kernels above reduce each key's dot product with xsimd's haddp and broadcast each probability on
// its own; with 4 lanes that is most of the work.
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
void rows_dot_1xn_chunk_neon(const float* q, const float* k, std::size_t ldk, std::size_t bk, float* s,
                             bool add) noexcept {
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
using rows_dot_1xn_chunk_fn = void (*)(const float*, const float*, std::size_t, std::size_t, float*, bool) noexcept;
template <std::size_t... I>
constexpr std::array<rows_dot_1xn_chunk_fn, sizeof...(I)> make_dot_chunks(std::index_sequence<I...>) {
  return {{&rows_dot_1xn_chunk_neon<I + 1>...}};
}
constexpr auto rows_dot_1xn_chunk_tiles = make_dot_chunks(std::make_index_sequence<neon_dot_chunk>{});

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
      rows_dot_1xn_chunk_tiles[nv - 1](qr + 4 * v0, k + 4 * v0, ldk, bk, sr, v0 > 0);
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
void rows_axpy_1xc_neon(const float* p, std::size_t bk, const float* v, std::size_t ldv, const float* alpha,
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
using rows_axpy_1xc_fn = void (*)(const float*, std::size_t, const float*, std::size_t, const float*, float*) noexcept;
template <std::size_t... I>
constexpr std::array<rows_axpy_1xc_fn, sizeof...(I)> make_axpy_tiles(std::index_sequence<I...>) {
  return {{&rows_axpy_1xc_neon<I + 1>...}};
}
constexpr auto rows_axpy_1xc_tiles = make_axpy_tiles(std::make_index_sequence<neon_axpy_vectors>{});

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
      rows_axpy_1xc_tiles[w - 1](pr, bk, v + 4 * v0, ldv, ar, orow + 4 * v0);
    }
    for (std::size_t c = 4 * nv; c < d_v; ++c) {
      float acc = 0.0f;
      for (std::size_t j = 0; j < bk; ++j) acc = fmadd(pr[j], v[j * ldv + c], acc);
      orow[c] = ar != nullptr ? fmadd(orow[c], *ar, acc) : acc;
    }
  }
}
#endif  // XSIMD_WITH_NEON

}  // namespace
}  // namespace detail
}  // namespace microattn
