// The row kernels (rows_dot, rows_softmax, rows_axpy: head dim in the lanes) in xsimd for every arch, with the
// kernels measured faster on x86 alone; NEON has its own dot and AXPY kernels (simd_rows_neon.hpp).
#pragma once

#include "kernels/attention/simd_tiles.hpp"
#include "kernels/exp/simd.hpp"

namespace microattn {
namespace detail {
namespace {

// --- row kernels (layout in kernels/attention.hpp)
// ---------------------------------------------------------------------- Decoding attends one query (or a few) to a
// long K/V, and a decoding step's projections are matmuls with m = 1. Queries in the lanes would fill one lane per
// query; here the head dim (or matmul's k) is in the lanes instead.

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
void rows_dot_rxk_simd(const float* q, std::size_t ldq, std::size_t nr, const float* k, std::size_t ldk, std::size_t nk,
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
void rows_dot_1xlanes_simd(const float* q, const float* k, std::size_t ldk, std::size_t nk, std::size_t d,
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
using rows_dot_1xlanes_fn = void (*)(const float*, const float*, std::size_t, std::size_t, std::size_t,
                                     float*) noexcept;
constexpr std::size_t row_tile_vectors_max = 8;  // head dims up to 8 vectors (128 floats on AVX-512)
template <std::size_t... I>
constexpr std::array<rows_dot_1xlanes_fn, sizeof...(I)> make_1xlanes_tiles(std::index_sequence<I...>) {
  return {{&rows_dot_1xlanes_simd<I + 1>...}};
}
constexpr auto rows_dot_1xlanes_tiles = make_1xlanes_tiles(std::make_index_sequence<row_tile_vectors_max>{});

#if !XSIMD_WITH_NEON
// A few rows (RK = 1 … 8) against keys with a short head dim of NQV whole vectors (attention while decoding, d = 64:
// 4 on AVX-512): one call walks all bk keys, KK = lanes / RK of them per tile, the head dim unrolled. The generic
// tile above spends more on its setup, zeroing and spills than on 4 steps of FMAs at d = 64; here a tile is its
// NQV steps of RK + KK loads and RK·KK FMAs, one sum_lanes_of_rows, and RK short stores. A key tile short of KK
// keys re-reads its last key. (NEON has its own row kernels.)
// One tile with the head dim outer: rows q[r·ldq …] × keys kp[j·ldk …] for r < RK, j < KK, into lane r·KK + j of
// the result; each step loads RK vectors of q and one of each key.
template <std::size_t RK, std::size_t NQV>
inline __attribute__((always_inline)) vfloat rows_dot_rxk_short_x86(const float* q, std::size_t ldq, const float* kp,
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
// addresses (and the prefetch's) in registers and on the stack, well below the bandwidth of reading K; key by key
// the dot products run at it.
constexpr std::size_t vector_registers = XSIMD_WITH_AVX512F ? 32 : 16;
template <std::size_t RK, std::size_t NQV>
constexpr bool rows_dot_keywise = RK == 1 || RK* NQV + lanes <= vector_registers - 4;

template <std::size_t RK, std::size_t NQV>
void rows_dot_rxn_short_x86(const float* q, std::size_t ldq, const float* k, std::size_t ldk, std::size_t bk, float* s,
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
      rows_dot_rxk_short_x86<RK, NQV>(q, ldq, k + j0 * ldk, ldk).store_aligned(dots);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < RK; ++r) std::memcpy(s + r * lds + j0, dots + r * KK, KK * sizeof(float));
    }
  }
  if (j0 < bk) {  // the last bk − j0 < KK keys: a tile with the last key repeated, computed through a copy of them
    alignas(64) float kpad[KK * NQV * lanes];
    const std::size_t nk = bk - j0;
    for (std::size_t j = 0; j < KK; ++j)
      std::memcpy(kpad + j * NQV * lanes, k + (j0 + (j < nk ? j : nk - 1)) * ldk, NQV * lanes * sizeof(float));
    rows_dot_rxk_short_x86<RK, NQV>(q, ldq, kpad, NQV * lanes).store_aligned(dots);
    for (std::size_t r = 0; r < RK; ++r) std::memcpy(s + r * lds + j0, dots + r * KK, nk * sizeof(float));
  }
}
using rows_dot_rxn_short_fn = void (*)(const float*, std::size_t, const float*, std::size_t, std::size_t, float*,
                                       std::size_t) noexcept;
constexpr std::size_t short_rows_max = lanes < 8 ? lanes : 8;  // RK = 1, 2, 4, 8 (as the lanes allow)
template <std::size_t RK, std::size_t... I>
constexpr std::array<rows_dot_rxn_short_fn, sizeof...(I)> make_short_tiles(std::index_sequence<I...>) {
  return {{&rows_dot_rxn_short_x86<RK, I + 1>...}};
}
// [log2(RK)][NQV − 1]; rows beyond short_rows_max are never asked for (the table repeats its widest tile)
constexpr std::array<rows_dot_rxn_short_fn, row_tile_vectors_max> rows_dot_rxn_short_tiles[4] = {
    make_short_tiles<1>(std::make_index_sequence<row_tile_vectors_max>{}),
    make_short_tiles<2>(std::make_index_sequence<row_tile_vectors_max>{}),
    make_short_tiles<(4 < short_rows_max ? 4 : short_rows_max)>(std::make_index_sequence<row_tile_vectors_max>{}),
    make_short_tiles<short_rows_max>(std::make_index_sequence<row_tile_vectors_max>{})};
#if !XSIMD_WITH_AVX512F
// One row with a long inner dimension (x·Wᵀ with m = 1 and k up to 256: above 64 on AVX2, 32 on SSE2): KK keys per
// tile, one accumulator each (KK chains hide the FMA latency), q loaded once per step for the KK FMAs; no zeroing
// or spilling of a whole-vector array per tile.
template <std::size_t KK>
void rows_dot_1xn_long_x86(const float* q, std::size_t d, const float* k, std::size_t ldk, std::size_t bk,
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
// another through one pointer stepping by ldk, each key's part of the chunk read in order. rows_dot_1xn_long_x86 (16
// keys × 16 vectors at k = 256) names 16 rows at once, and GCC kept their addresses in vector registers and on
// the stack. Each line of a key's chunk is prefetched just before its loads: measured faster than prefetching the
// next tile or nothing (W in L2), not derived. AVX2 keeps rows_dot_1xn_long_x86: chunks were no faster there.
constexpr std::size_t row_chunk = 8;  // vectors of q in registers, beside 16 accumulators
void rows_dot_1xn_chunk_avx512(const float* q, std::size_t d, const float* k, std::size_t ldk, std::size_t bk,
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
// misalignment); AVX2 adds a software prefetch 256 bytes ahead in every stream (it runs on into the key's next row).
// With AVX-512, where the rows stream from DRAM (a model's classifier, 32000 × 288), that prefetch and a fourth
// vector per row only cost load slots: two vectors per row and none reach the read bandwidth, and tie at 1024².
// The elements before the first aligned vector and after the last whole one are one vector each, the products
// outside them selected away. AVX2: four streams measured faster than eight (rows 4 KiB apart share L1 sets) and
// than one. AVX-512 reads one key after another, so that W is a single sequential stream: on a Zen 4 whose
// prefetchers train per stream, four keys side by side (18 lines each at k = 288) read DRAM at under half the
// bandwidth of one (docs/benchmarks.md). The S keys of a group share their alignment only when ldk is a whole
// number of vectors; otherwise one at a time. Each key's sums are the same whatever S is.
template <std::size_t U, std::size_t S>
inline __attribute__((always_inline)) void rows_dot_1xk_stream_x86(const float* q, std::size_t d, const float* k,
                                                                   std::size_t ldk, vfloat index,
                                                                   vfloat* sums) noexcept {
  constexpr std::size_t prefetch_bytes = 256;
  constexpr bool prefetch = lanes < 16;
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
    for (std::size_t r = 0; r < (prefetch ? S : 0); ++r)
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

void rows_dot_1xn_stream_x86(const float* q, std::size_t d, const float* k, std::size_t ldk, std::size_t bk,
                             float* s) noexcept {
  constexpr std::size_t S = XSIMD_WITH_AVX512F ? 1 : 4;
  constexpr std::size_t U = 2;  // S·U accumulators
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
      for (; j + S <= nk; j += S) rows_dot_1xk_stream_x86<U, S>(q, d, k + (j0 + j) * ldk, ldk, index, rows + j);
    for (; j < nk; ++j) rows_dot_1xk_stream_x86<U, 1>(q, d, k + (j0 + j) * ldk, ldk, index, rows + j);
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
constexpr rows_dot_fn rows_dot_rxk_tiles[3][2] = {
    {&rows_dot_rxk_simd<1, lanes, 1>, &rows_dot_rxk_simd<1, lanes / 2, 2>},
    {&rows_dot_rxk_simd<2, lanes / 2, 1>, &rows_dot_rxk_simd<2, lanes / 4 < 1 ? 1 : lanes / 4, lanes / 4 < 1 ? 1 : 2>},
    {&rows_dot_rxk_simd<4, lanes / 4, 1>, &rows_dot_rxk_simd<4, lanes / 4, 1>}};
constexpr std::size_t rows_dot_keys[3][2] = {
    {lanes, lanes / 2}, {lanes / 2, lanes / 4 < 1 ? 1 : lanes / 4}, {lanes / 4, lanes / 4}};

// Tiles of 1 or 2 rows as narrow in keys as a group of more rows (kk = lanes / 2 or lanes / 4), which unroll the
// inner dimension instead: with their own, wider tiles the last rows of an odd nr (m = 3, 5, 7) re-read the first
// key in the rest of each kk-key tile, which made m = 7 far slower than m = 8.
constexpr std::size_t quarter_lanes = lanes / 4 < 1 ? 1 : lanes / 4;
rows_dot_fn narrow_rows_dot_rxk(std::size_t rk, std::size_t kk) noexcept {
  if (rk == 2) return &rows_dot_rxk_simd<2, quarter_lanes, lanes / (2 * quarter_lanes)>;
  return kk == quarter_lanes ? &rows_dot_rxk_simd<1, quarter_lanes, lanes / quarter_lanes>
                             : &rows_dot_rxk_simd<1, lanes / 2, 2>;
}

void rows_dot_simd(const float* q, std::size_t ldq, std::size_t nr, std::size_t d, const float* k, std::size_t ldk,
                   std::size_t bk, float* s, std::size_t lds) noexcept {
  const std::size_t nqv = d / lanes;
#if !XSIMD_WITH_NEON
  if (nqv >= 1 && nqv <= row_tile_vectors_max && nqv * lanes == d) {
    if (nr == 1) {  // one row: all keys in one call, q held in registers
      rows_dot_rxn_short_tiles[0][nqv - 1](q, ldq, k, ldk, bk, s, lds);
      return;
    }
    // Keys outer, row groups of 8, 4, 2 (as the lanes allow), then 1, inner.
    for (std::size_t j0 = 0; j0 < bk; j0 += short_keys) {
      const std::size_t nk = bk - j0 < short_keys ? bk - j0 : short_keys;
      for (std::size_t r0 = 0; r0 < nr;) {
        const std::size_t left = nr - r0;
        const std::size_t t = left >= 8 && short_rows_max >= 8 ? 3 : left >= 4 && short_rows_max >= 4 ? 2 : left >= 2;
        rows_dot_rxn_short_tiles[t][nqv - 1](q + r0 * ldq, ldq, k + j0 * ldk, ldk, nk, s + r0 * lds + j0, lds);
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
      rows_dot_1xn_chunk_avx512(q, d, k, ldk, bk, s);
#else
      rows_dot_1xn_long_x86<lanes>(q, d, k, ldk, bk, s);
#endif
    else
      rows_dot_1xn_stream_x86(q, d, k, ldk, bk, s);
    return;
  }
#endif
  if (nr == 1 && nqv >= 1 && nqv <= row_tile_vectors_max) {
    for (std::size_t j0 = 0; j0 < bk; j0 += lanes)
      rows_dot_1xlanes_tiles[nqv - 1](q, k + j0 * ldk, ldk, bk - j0 < lanes ? bk - j0 : lanes, d, s + j0);
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
        rows_dot_rxk_tiles[t][lng](q + r0 * ldq, ldq, rk, k + j0 * ldk, ldk, nk, d, s + r0 * lds + j0, lds);
      } else {  // the last 1 or 2 rows of nr: a tile of theirs with the group's key width, so no key is re-read
        narrow_rows_dot_rxk(rk, kk)(q + r0 * ldq, ldq, rk, k + j0 * ldk, ldk, nk, d, s + r0 * lds + j0, lds);
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
        sr[j] = exp2_nonpositive_float(sr[j] - mu[r]);
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
// order (on AVX2, one pass of 8 vectors over d_v = 64 measured faster than two of 4). Not i686, whose 8 vector
// registers the budget fills.
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
void rows_axpy_rxc_simd(const float* p, std::size_t ldp, std::size_t bk, const float* v, std::size_t ldv,
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
void rows_axpy_rxn_simd(const float* p, std::size_t ldp, std::size_t bk, const float* v, std::size_t ldv,
                        std::size_t d_v, const float* alpha, float* o, std::size_t ldo) noexcept {
  constexpr std::size_t cv = axpy_vectors(RR);
  constexpr std::size_t width = cv * lanes;
  std::size_t c = 0;
  for (; c + width <= d_v; c += width)
    rows_axpy_rxc_simd<RR, cv, axpy_chains(RR, cv)>(p, ldp, bk, v + c, ldv, alpha, o + c, ldo);
  if constexpr (cv > 4)  // e.g. d_v = 64 under an 8-vector tile
    for (; c + 4 * lanes <= d_v; c += 4 * lanes)
      rows_axpy_rxc_simd<RR, 4, axpy_chains(RR, 4)>(p, ldp, bk, v + c, ldv, alpha, o + c, ldo);
  for (; c + lanes <= d_v; c += lanes)
    rows_axpy_rxc_simd<RR, 1, axpy_chains(RR, 1)>(p, ldp, bk, v + c, ldv, alpha, o + c, ldo);
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
  return {{&rows_axpy_rxn_simd<I + 1>...}};
}
constexpr auto rows_axpy_rxn_tiles = make_axpy_table(std::make_index_sequence<axpy_rows_max>{});

// Keys in blocks of axpy_keys: a block's rows of v (all columns) stay in L1/L2 while the column tiles sweep them,
// instead of every tile streaming a column strip through all of v (matmul with a long k). o takes the block sums.
// Long rows (matmul, d_v > 256) take 8 keys per block: 8 sequential streams through v, which the prefetchers
// follow, where 64 rows 4 KiB apart each touched for a column strip would leave every load waiting on memory.
// One row whose tile is narrower than v (AVX2: 64 columns) takes blocks of axpy_block_floats (32 KiB) of v, so the
// block is still in L1 when the next tile sweeps it (the best block measured). More rows were slower with the
// smaller block, and AVX-512's one-row tile spans 256 columns, so both keep 64.
constexpr std::size_t axpy_keys = 64, axpy_keys_long = 8, axpy_block_floats = 8192;
constexpr float axpy_ones[axpy_rows_max] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};

// One row against long rows of v (x·W with m = 1, n > 256): o += Σ_j p[j]·v[j·ldv …], 8 rows of v at a time, each
// walked whole and in order, o (in L1) loaded and stored once per 8 rows, as Eigen's GEMV walks 4: faster than the
// column tiles of rows_axpy_rxn_simd (8 rows × 256 columns, then the next 256 columns of the same rows) when W
// streams from L3, and than 2 or 4 rows at a time. The vectors of v start at the rows' first cache-line boundary
// when ldv is whole lines (the columns before it and after the last whole vector go one by one; o takes the
// misalignment): a std::vector W sits 16 bytes past a line, and every load then split two lines. One row of v at a
// time (o loaded and stored per row) was no faster, and slower for a W of several MiB. alpha as in rows_axpy_simd.
constexpr std::size_t axpy_long_rows = 8;
void rows_axpy_1xn_long_x86(const float* p, std::size_t bk, const float* v, std::size_t ldv, std::size_t d_v,
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
    rows_axpy_1xn_long_x86(p, bk, v, ldv, d_v, alpha, o);
    return;
  }
  std::size_t kb = d_v > 256 ? axpy_keys_long : axpy_keys;
  if (nr == 1 && d_v > axpy_vectors(1) * lanes && axpy_block_floats / d_v < kb) kb = axpy_block_floats / d_v;
  for (std::size_t j0 = 0; j0 < bk; j0 += kb) {
    const std::size_t nk = bk - j0 < kb ? bk - j0 : kb;
    for (std::size_t r0 = 0; r0 < nr; r0 += axpy_rows_max) {
      const std::size_t rr = nr - r0 < axpy_rows_max ? nr - r0 : axpy_rows_max;
      const float* a = j0 > 0 ? axpy_ones : alpha != nullptr ? alpha + r0 : nullptr;
      rows_axpy_rxn_tiles[rr - 1](p + r0 * ldp + j0, ldp, nk, v + j0 * ldv, ldv, d_v, a, o + r0 * ldo, ldo);
    }
  }
}

}  // namespace
}  // namespace detail
}  // namespace microattn
