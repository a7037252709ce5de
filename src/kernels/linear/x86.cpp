// linear()'s x86 kernels: AVX2 + FMA + F16C, AVX-512 (F, BW, VL) and the VNNI dot products where the target has them
// (__AVX512VNNI__, __AVXVNNI__). Compiled in every build; empty unless the build targets at least x86-64-v3.
//
// f16: each weight vector is converted once (vcvtph2ps) and used by every x row of the tile; MR x rows × NR weight
// rows of accumulators, reduced once per output. q8: x arrives quantized (linear.cpp); AVX-512 VNNI takes
// vpdpbusd (u8 × s8) on x + 128 and subtracts 128·Σw per lane (a second vpdpbusd of the weights, shared by the x
// rows), so every lane holds an exact int32 sum; AVX2 (and AVX-VNNI) take |w| × sign(x, w), exact for every int8
// weight, −128 included (the sign goes to x, which is at most 127 in magnitude). Each group's lanes are scaled in
// float, lane by lane, and reduced once per output and chunk; where every weight row is one group of 64 (AVX-512
// VNNI), each row's lanes are reduced as integers and scaled once.
#include "kernels/linear.hpp"

#if MICROATTN_LINEAR_X86
#include "kernels/avx512_warnings.hpp"

#include <immintrin.h>

#include <cassert>
#include <cstring>
#include <type_traits>

#include "kernels/attention.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define MICROATTN_LINEAR_AVX512 1
#else
#define MICROATTN_LINEAR_AVX512 0
#endif
#if MICROATTN_LINEAR_AVX512 && defined(__AVX512VNNI__)
#define MICROATTN_LINEAR_ZMM_VNNI 1
#else
#define MICROATTN_LINEAR_ZMM_VNNI 0
#endif

namespace microattn {
namespace detail {
namespace {

[[maybe_unused]] float hsum(__m256 v) noexcept {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// Weight rows [0, n) by tiles: tile(r, NR, prefetch) as integral constants, NR rows at a time (those with a next
// tile prefetch it), then the rest one by one.
template <int NR, class Tile>
inline __attribute__((always_inline)) void tile_rows(std::size_t n, Tile tile) noexcept {
  std::size_t r = 0;
  for (; r + 2 * NR <= n; r += NR) tile(r, std::integral_constant<int, NR>{}, std::true_type{});
  for (; r + NR <= n; r += NR) tile(r, std::integral_constant<int, NR>{}, std::false_type{});
  for (; r < n; ++r) tile(r, std::integral_constant<int, 1>{}, std::false_type{});
}

// Prefetch of the line `ahead` bytes past p, as an integer sum: past the weights' end the address is never formed
// as a pointer (and a prefetch never faults).
inline void prefetch_ahead(const void* p, std::size_t ahead) noexcept {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(p) + ahead), _MM_HINT_T0);
}

// The lane sums of N <= 16 (AVX2: 8) accumulators at once, out[l] = Σ lanes of v[l], by a tree of unpacks,
// shuffles and adds (45 operations for 16 sums, against about 12 for each sum alone): at k = 256 each output is only
// 16 vector multiply-adds, and one reduction per output cost as much again.
#if MICROATTN_LINEAR_AVX512
template <int N>
inline void lane_sums(const __m512* v, float* out) noexcept {
  static_assert(N >= 1 && N <= 16, "at most 16 accumulators");
  const auto at = [&](int l) { return l < N ? v[l] : _mm512_setzero_ps(); };
  __m512 u[8], t[4], h[2];
  for (int p = 0; p < 8; ++p)  // blocks of 128 bits: [a0 + a2, b0 + b2, a1 + a3, b1 + b3]
    u[p] = _mm512_add_ps(_mm512_unpacklo_ps(at(2 * p), at(2 * p + 1)), _mm512_unpackhi_ps(at(2 * p), at(2 * p + 1)));
  for (int q = 0; q < 4; ++q)  // each block: the block sums of 4 accumulators
    t[q] =
        _mm512_add_ps(_mm512_shuffle_ps(u[2 * q], u[2 * q + 1], 0x44), _mm512_shuffle_ps(u[2 * q], u[2 * q + 1], 0xee));
  for (int r = 0; r < 2; ++r)  // pairs of blocks added
    h[r] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], 0x88),
                         _mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], 0xdd));
  const __m512 all = _mm512_add_ps(_mm512_shuffle_f32x4(h[0], h[1], 0x88), _mm512_shuffle_f32x4(h[0], h[1], 0xdd));
  _mm512_storeu_ps(out, all);
}
#endif
template <int N>
inline void lane_sums(const __m256* v, float* out) noexcept {
  static_assert(N >= 1 && N <= 8, "at most 8 accumulators");
  const auto at = [&](int l) { return l < N ? v[l] : _mm256_setzero_ps(); };
  __m256 u[4], t[2];
  for (int p = 0; p < 4; ++p)
    u[p] = _mm256_add_ps(_mm256_unpacklo_ps(at(2 * p), at(2 * p + 1)), _mm256_unpackhi_ps(at(2 * p), at(2 * p + 1)));
  for (int q = 0; q < 2; ++q)
    t[q] =
        _mm256_add_ps(_mm256_shuffle_ps(u[2 * q], u[2 * q + 1], 0x44), _mm256_shuffle_ps(u[2 * q], u[2 * q + 1], 0xee));
  _mm256_storeu_ps(out,
                   _mm256_add_ps(_mm256_permute2f128_ps(t[0], t[1], 0x20), _mm256_permute2f128_ps(t[0], t[1], 0x31)));
}

// A q8 tile's end: the lane sums of its MR × NR accumulators (row-major, one vector each) added to y's rows from i0,
// columns from r0, starting from the bias (or 0) on the chunk's first pass.
template <int MR, int NR, class V>
inline void q8_tile_store(const V* f, const Q8Chunk& ch, std::size_t i0, std::size_t r0) noexcept {
  alignas(sizeof(V)) float sums[sizeof(V) / sizeof(float)];
  lane_sums<MR * NR>(f, sums);
  for (int i = 0; i < MR; ++i) {
    float* y = ch.y + (i0 + i) * ch.ldy + r0;
    for (int j = 0; j < NR; ++j) y[j] = (ch.first ? bias_of(ch.bias, r0 + j) : y[j]) + sums[i * NR + j];
  }
}

// ---- f16 ------------------------------------------------------------------------------------------------------

// The build's vector width, AVX-512's 16 lanes or AVX2's 8: the intrinsics differ only in their prefix, so the
// operations are written once.
#if MICROATTN_LINEAR_AVX512
#define MICROATTN_F16_OP(name) _mm512_##name
using F16Acc = __m512;
using F16Half = __m256i;  // f16_lanes binary16 values
#define MICROATTN_F16_ARCH "avx512"
constexpr int f16_tile_rows = 4;  // 4 × 4 accumulators (and 2 × 8, 1 × 8): 16 of the 32 registers
#else
#define MICROATTN_F16_OP(name) _mm256_##name
using F16Acc = __m256;
using F16Half = __m128i;
#define MICROATTN_F16_ARCH "avx2"
constexpr int f16_tile_rows = 2;  // 2 × 4 accumulators (1 × 8): 8 of the 16 registers, beside x and w
#endif
constexpr std::size_t f16_lanes = sizeof(F16Acc) / sizeof(float);
inline F16Acc f16_zero() noexcept { return MICROATTN_F16_OP(setzero_ps)(); }
inline F16Acc f16_load_w(const std::uint16_t* p) noexcept {
  F16Half h;
  std::memcpy(&h, p, sizeof h);  // an unaligned vector load
  return MICROATTN_F16_OP(cvtph_ps)(h);
}
inline F16Acc f16_load_x(const float* p) noexcept { return MICROATTN_F16_OP(loadu_ps)(p); }
inline F16Acc f16_fma(F16Acc a, F16Acc b, F16Acc c) noexcept { return MICROATTN_F16_OP(fmadd_ps)(a, b, c); }
// The last rem < f16_lanes columns, through zero-padded copies: nothing is read past the end.
struct F16Tail {
  std::size_t rem;
  explicit F16Tail(std::size_t r) noexcept : rem(r) {}
  F16Acc w(const std::uint16_t* p) const noexcept {
    std::uint16_t t[f16_lanes] = {};
    std::memcpy(t, p, rem * sizeof(std::uint16_t));
    return f16_load_w(t);
  }
  F16Acc x(const float* p) const noexcept {
    float t[f16_lanes] = {};
    std::memcpy(t, p, rem * sizeof(float));
    return f16_load_x(t);
  }
};

// MR rows of x (from x, stride ldx) × NR weight rows (from w, dense k): y[i·ldy + j] = bias_j + Σ_c x_ic·w_jc.
// With prefetch, each line of the next tile's rows is prefetched as this tile reaches it: rows of 2 KiB (k = 1024)
// are too short for the hardware prefetcher to ramp up.
// Sequential (one x row): each weight row walked whole before the next, the same sums in the same order, so that
// W is read as one stream (the hardware prefetcher follows it; no software prefetch).
template <int MR, int NR, bool Prefetch, bool Sequential = false>
void f16_tile(const float* x, std::size_t ldx, const std::uint16_t* w, std::size_t k, const float* bias, float* y,
              std::size_t ldy) noexcept {
  static_assert(!Sequential || MR == 1, "one x row");
  F16Acc acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = f16_zero();
  std::size_t c = 0;
  if constexpr (Sequential) {
    const F16Tail tail(k % f16_lanes);
    for (int j = 0; j < NR; ++j) {
      const std::uint16_t* wj = w + j * k;
      std::size_t cj = 0;
      for (; cj + f16_lanes <= k; cj += f16_lanes)
        acc[0][j] = f16_fma(f16_load_x(x + cj), f16_load_w(wj + cj), acc[0][j]);
      if (cj < k) acc[0][j] = f16_fma(tail.x(x + cj), tail.w(wj + cj), acc[0][j]);
    }
    c = k;
  }
  for (; c + f16_lanes <= k; c += f16_lanes) {
    F16Acc xv[MR];
    for (int i = 0; i < MR; ++i) {
      xv[i] = f16_load_x(x + i * ldx + c);
      // In a register: GCC folds the load into each of the NR multiply-adds instead, NR times the loads (one
      // 512-bit load per cycle on Zen 4/5: 2 rows at 256² took 2.6× one row's time).
      if (MR > 1) asm("" : "+v"(xv[i]));
    }
    for (int j = 0; j < NR; ++j) {
      const F16Acc wv = f16_load_w(w + j * k + c);
      for (int i = 0; i < MR; ++i) acc[i][j] = f16_fma(xv[i], wv, acc[i][j]);
    }
    if (Prefetch && c % 32 == 0)
      for (int j = 0; j < NR; ++j) prefetch_ahead(w + j * k + c, NR * k * sizeof(std::uint16_t));
  }
  if (c < k) {
    const F16Tail tail(k - c);
    F16Acc xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = tail.x(x + i * ldx + c);
    for (int j = 0; j < NR; ++j) {
      const F16Acc wv = tail.w(w + j * k + c);
      for (int i = 0; i < MR; ++i) acc[i][j] = f16_fma(xv[i], wv, acc[i][j]);
    }
  }
  alignas(64) float sums[16];
  lane_sums<MR * NR>(&acc[0][0], sums);
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) y[i * ldy + j] = bias_of(bias, static_cast<std::size_t>(j)) + sums[i * NR + j];
}

// One tile of MR x rows over all weight rows: NR at a time, the rest one by one.
template <int MR, int NR, bool Sequential = false>
void f16_row_block(const LinearArgs& a, std::size_t i0) noexcept {
  const F16Rows t(a, i0);
  tile_rows<NR>(a.n, [&](std::size_t r, auto nr, auto prefetch) {
    f16_tile<MR, decltype(nr)::value, decltype(prefetch)::value && !Sequential, Sequential>(
        t.x, a.ldx, t.w + r * a.k, a.k, t.bias_at(r), t.y + r, a.ldy);
  });
}

// One x row over weights this large (a model's classifier; larger than most L3 slices hold for long) reads them as
// one sequential stream: from DRAM, rows side by side (one stream each, 18 lines per row at k = 288) read at about
// half the bandwidth of one stream on Zen 4, while from L2 and L3 (1024²) the side-by-side tile is faster.
// Measured, not derived.
constexpr std::size_t f16_sequential_bytes = std::size_t{4} << 20;

void linear_f16_rx4_x86(const LinearArgs& a) noexcept {
  std::size_t i = 0;
#if MICROATTN_LINEAR_AVX512
  for (; i + 8 <= a.m; i += 8) f16_row_block<8, 2>(a, i);
  for (; i + 4 <= a.m; i += 4) f16_row_block<4, 4>(a, i);
  if (a.m - i == 3) {
    f16_row_block<3, 4>(a, i);
    return;
  }
#endif
  for (; i + 2 <= a.m; i += 2) f16_row_block<2, 4>(a, i);
  if (i < a.m) {
    if (a.n * a.k >= f16_sequential_bytes / sizeof(std::uint16_t))
      f16_row_block<1, 8, true>(a, i);
    else
      f16_row_block<1, 8>(a, i);
  }
}

// ---- q8 -------------------------------------------------------------------------------------------------------

// Largest |x| as float bits: an unsigned integer max of the bits with the sign cleared (NaN above inf above
// every finite value).
std::uint32_t linear_absmax_bits_x86(const float* x, std::size_t n) noexcept {
  std::size_t i = 0;
  std::uint32_t m = 0;
#if MICROATTN_LINEAR_AVX512
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  __m512i v = _mm512_setzero_si512();
  for (; i + 16 <= n; i += 16) v = _mm512_max_epu32(v, _mm512_and_si512(_mm512_loadu_si512(x + i), abs_mask));
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    v = _mm512_max_epu32(v, _mm512_and_si512(_mm512_maskz_loadu_epi32(mask, x + i), abs_mask));
    i = n;
  }
  m = _mm512_reduce_max_epu32(v);
#else
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  __m256i v = _mm256_setzero_si256();
  for (; i + 8 <= n; i += 8)
    v = _mm256_max_epu32(v, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), abs_mask));
  __m128i h = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xb1));
  m = static_cast<std::uint32_t>(_mm_cvtsi128_si32(h));
#endif
  return q8_absmax_bits_from(x, i, n, m);
}

// q = round-half-away-from-zero(x / s), as q8_round: the same division, truncation and correction by ±1 where
// the discarded fraction is at least ½, so every table quantizes x to the same bytes.
void linear_quantize_x86(const float* x, std::size_t n, float s, std::int8_t* q) noexcept {
  std::size_t i = 0;
#if MICROATTN_LINEAR_AVX512
  const __m512 sv = _mm512_set1_ps(s), half = _mm512_set1_ps(0.5f), minus_half = _mm512_set1_ps(-0.5f);
  const __m512i one = _mm512_set1_epi32(1);
  const auto one_vector = [&](__m512 xv) noexcept {
    const __m512 t = _mm512_div_ps(xv, sv);
    __m512i r = _mm512_cvttps_epi32(t);
    const __m512 frac = _mm512_sub_ps(t, _mm512_cvtepi32_ps(r));
    r = _mm512_mask_add_epi32(r, _mm512_cmp_ps_mask(frac, half, _CMP_GE_OQ), r, one);
    return _mm512_mask_sub_epi32(r, _mm512_cmp_ps_mask(frac, minus_half, _CMP_LE_OQ), r, one);
  };
  for (; i + 16 <= n; i += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtsepi32_epi8(one_vector(_mm512_loadu_ps(x + i))));
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_cvtsepi32_storeu_epi8(q + i, mask, one_vector(_mm512_maskz_loadu_ps(mask, x + i)));
  }
#else
  const __m256 sv = _mm256_set1_ps(s), half = _mm256_set1_ps(0.5f), minus_half = _mm256_set1_ps(-0.5f);
  const auto one_vector = [&](const float* p) noexcept {
    const __m256 t = _mm256_div_ps(_mm256_loadu_ps(p), sv);
    const __m256i r = _mm256_cvttps_epi32(t);
    const __m256 frac = _mm256_sub_ps(t, _mm256_cvtepi32_ps(r));
    // The comparisons give all-ones (−1) lanes: subtracting the first adds 1, adding the second subtracts 1.
    const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(frac, half, _CMP_GE_OQ));
    const __m256i down = _mm256_castps_si256(_mm256_cmp_ps(frac, minus_half, _CMP_LE_OQ));
    return _mm256_add_epi32(_mm256_sub_epi32(r, up), down);
  };
  for (; i + 32 <= n; i += 32) {
    const __m256i ab = _mm256_packs_epi32(one_vector(x + i), one_vector(x + i + 8));
    const __m256i cd = _mm256_packs_epi32(one_vector(x + i + 16), one_vector(x + i + 24));
    // packs work within 128-bit lanes: dwords 0, 4, 1, 5, … put the 32 bytes back in order.
    const __m256i bytes =
        _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), bytes);
  }
#endif
  for (; i < n; ++i) q[i] = q8_round(x[i], s);
}

#if MICROATTN_LINEAR_ZMM_VNNI
// acc += Σ u8 × s8 per lane, in place. GCC 12 treats the intrinsic's accumulator as a fresh value and copies every
// loop-carried accumulator twice per iteration (24 register moves per 12 vpdpbusd at 2 × 4): the instruction itself
// (1024² m = 1, group = cols: 12.0 → 9.2 µs; 256² m = 8: 0.87 → 1.18 of fp32 matmul's speed).
inline void dpbusd_into(__m512i& acc, __m512i u8, __m512i s8) noexcept {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
}

// MR x rows × NR weight rows over one chunk. Per group and pair: acc = Σ (x + 128)·w and corr = Σ 128·w lane by
// lane (vpdpbusd), so acc − corr is the exact int32 Σ x·w of each lane; then f += (lanes·sw)·sx in float.
// Registers: MR·NR + NR int accumulators and MR·NR float ones: 24 of 32 at 2 × 4, 24 + 2 at 1 × 8. Rows of 1 KiB
// (q8 at k = 1024) are too short for the hardware prefetcher to ramp up: each line of the next tile's rows is
// prefetched as the same line of this tile is loaded (1024² m = 1, group = cols: 19 → 13 µs, min of repeated runs).
template <int MR, int NR, bool Prefetch>
void q8_tile(const std::int8_t* w, std::size_t ldw, const Q8Chunk& ch, std::size_t i0, std::size_t r0) noexcept {
  const std::size_t seg = ch.seg, segs = ch.len / seg, full = seg / 64, rem = seg % 64;
  const __mmask64 tail_mask = rem == 0 ? 0 : ~__mmask64{0} >> (64 - rem);
  const __m512i bias128 = _mm512_set1_epi8(static_cast<char>(0x80));
  const auto [xq, sx, wt, sw] = q8_tile_source<NR>(w, ldw, ch, i0, r0);
  const std::uintptr_t ahead = NR * ldw;
  __m512 f[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) f[i][j] = _mm512_setzero_ps();
  std::size_t off = 0;
  // Declared once, zeroed per group: declared inside the loop, GCC copied every accumulator twice per vector.
  __m512i acc[MR][NR], corr[NR];
  for (std::size_t s = 0; s < segs; ++s) {
    for (int j = 0; j < NR; ++j) {
      corr[j] = _mm512_setzero_si512();
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_setzero_si512();
    }
    // Each weight vector is loaded once, corrected once and used by the MR rows of x.
    for (std::size_t v = 0; v < full; ++v, off += 64) {
      __m512i xu[MR];
      for (int i = 0; i < MR; ++i) xu[i] = _mm512_xor_si512(_mm512_loadu_si512(xq + i * ch.ldq + off), bias128);
      for (int j = 0; j < NR; ++j) {
        const __m512i wv = _mm512_loadu_si512(wt + j * ldw + off);
        dpbusd_into(corr[j], bias128, wv);
        for (int i = 0; i < MR; ++i) dpbusd_into(acc[i][j], xu[i], wv);
      }
      if (Prefetch)
        for (int j = 0; j < NR; ++j) prefetch_ahead(wt + j * ldw + off, ahead);
    }
    if (rem != 0) {
      // Masked loads: w is 0 past the group (so is its product with the 128 that x + 128 leaves there).
      __m512i xu[MR];
      for (int i = 0; i < MR; ++i)
        xu[i] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail_mask, xq + i * ch.ldq + off), bias128);
      for (int j = 0; j < NR; ++j) {
        const __m512i wv = _mm512_maskz_loadu_epi8(tail_mask, wt + j * ldw + off);
        dpbusd_into(corr[j], bias128, wv);
        for (int i = 0; i < MR; ++i) dpbusd_into(acc[i][j], xu[i], wv);
      }
      if (Prefetch)
        for (int j = 0; j < NR; ++j) prefetch_ahead(wt + j * ldw + off, ahead);
      off += rem;
    }
    for (int j = 0; j < NR; ++j) {
      const __m512 swv = _mm512_set1_ps(sw[j][s]);
      for (int i = 0; i < MR; ++i) {
        const __m512 lanes = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][j], corr[j]));
        f[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(lanes, swv), _mm512_set1_ps(sx[i * ch.ldsx + s]), f[i][j]);
      }
    }
  }
  q8_tile_store<MR, NR>(&f[0][0], ch, i0, r0);
}

// Groups of 4, 8, 16 or 32 bytes (seg divides 64 and is a multiple of a lane's 4 bytes): one vector holds 64 / seg
// whole groups, lane l in group l / (seg / 4). Per vector, the lanes' scales come from one masked load of the
// vector's group scales and a permutation, so a group of 32 costs what one of 64 does (instead of a half-empty
// masked vector per group: 1024² m = 1 at group 32 54 → 26 µs, min of repeated runs).
// OneGroup: seg = 64, each vector one group (its scales broadcast); else the lanes' scales are permuted from a
// masked load of the vector's group scales. Both and Prefetch are template parameters so that the loop has no
// branches: GCC neither unswitched nor hoisted them.
template <int MR, int NR, bool OneGroup, bool Prefetch>
void q8_tile_packed(const std::int8_t* w, std::size_t ldw, const Q8Chunk& ch, const __m512i* const* ncorr,
                    std::size_t i0, std::size_t r0) noexcept {
  const std::size_t seg = ch.seg, groups_per_vector = 64 / seg, full = ch.len / 64, rem = ch.len % 64;
  const __m512i bias128 = _mm512_set1_epi8(static_cast<char>(0x80));
  const unsigned shift = seg == 4 ? 0 : seg == 8 ? 1 : seg == 16 ? 2 : seg == 32 ? 3 : 4;
  const __m512i lane_group = _mm512_srl_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                              _mm_cvtsi32_si128(shift));
  const std::size_t ahead = NR * ldw;
  // A struct, not a structured binding: the lambdas below use it (C++17 lambdas cannot capture bindings).
  const Q8TileSource<NR> t = q8_tile_source<NR>(w, ldw, ch, i0, r0);
  __m512 f[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) f[i][j] = _mm512_setzero_ps();
  const auto scales = [&](const float* p, __mmask16 groups) noexcept {
    return OneGroup ? _mm512_set1_ps(*p) : _mm512_permutexvar_ps(lane_group, _mm512_maskz_loadu_ps(groups, p));
  };
  const auto step = [&](std::size_t v, std::size_t g0, __mmask64 bytes, __mmask16 groups, bool masked) noexcept {
    const std::size_t off = v * 64;
    __m512i xv[MR];
    __m512 sxv[MR];
    for (int i = 0; i < MR; ++i) {
      const std::int8_t* p = t.xq + i * ch.ldq + off;
      xv[i] = masked ? _mm512_maskz_loadu_epi8(bytes, p) : _mm512_loadu_si512(p);
      sxv[i] = scales(t.sx + i * ch.ldsx + g0, groups);
    }
    for (int j = 0; j < NR; ++j) {
      const std::int8_t* p = t.wt + j * ldw + off;
      const __m512i wu = _mm512_xor_si512(masked ? _mm512_maskz_loadu_epi8(bytes, p) : _mm512_loadu_si512(p), bias128);
      if (Prefetch) prefetch_ahead(p, ahead);
      const __m512 swv = scales(t.sw[j] + g0, groups);
      for (int i = 0; i < MR; ++i) {
        const __m512i d = _mm512_dpbusd_epi32(ncorr[i][v], wu, xv[i]);
        f[i][j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(d), swv), sxv[i], f[i][j]);
      }
    }
  };
  const __mmask16 all_groups = static_cast<__mmask16>((1u << groups_per_vector) - 1);
  std::size_t g0 = 0;
  for (std::size_t v = 0; v < full; ++v, g0 += groups_per_vector) step(v, g0, 0, all_groups, false);
  if (rem != 0) step(full, g0, ~__mmask64{0} >> (64 - rem), static_cast<__mmask16>((1u << (rem / seg)) - 1), true);
  q8_tile_store<MR, NR>(&f[0][0], ch, i0, r0);
}

template <int MR, int NR, bool OneGroup>
void q8_rows_packed(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch,
                    const __m512i* const* ncorr, std::size_t i0) noexcept {
  tile_rows<NR>(n, [&](std::size_t r, auto nr, auto prefetch) {
    q8_tile_packed<MR, decltype(nr)::value, OneGroup, decltype(prefetch)::value>(w, ldw, ch, ncorr, i0, r);
  });
}

// Packed groups, MR x rows from row i0 of the chunk: −128·Σ x of every lane of every vector of x, once per chunk for
// all weight rows (with w + 128 as the unsigned operand, vpdpbusd from there leaves the exact Σ x·w of the lane),
// then the weight rows NR at a time.
template <int MR, int NR>
void q8_packed_rows(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch, std::size_t i0) noexcept {
  alignas(64) __m512i corr[MR][linear_q8_chunk_bytes / 64];
  const __m512i* ncorr[MR];
  const __m512i bias128 = _mm512_set1_epi8(static_cast<char>(0x80));
  const std::size_t vectors = (ch.len + 63) / 64;
  for (int i = 0; i < MR; ++i) {
    const std::int8_t* xq = ch.q + (i0 + i) * ch.ldq;
    for (std::size_t v = 0; v < vectors; ++v) {
      const std::size_t left = ch.len - v * 64;
      const __m512i xv =
          _mm512_maskz_loadu_epi8(left >= 64 ? ~__mmask64{0} : ~__mmask64{0} >> (64 - left), xq + v * 64);
      corr[i][v] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias128, xv));
    }
    ncorr[i] = corr[i];
  }
  if (ch.seg == 64) {
    q8_rows_packed<MR, NR, true>(w, ldw, n, ch, ncorr, i0);
  } else {
    q8_rows_packed<MR, NR, false>(w, ldw, n, ch, ncorr, i0);
  }
}

// The lane sums of 16 int32 accumulators, out lane l = Σ lanes of v[l]: lane_sums' tree on integers (exact in any
// order).
inline __m512i lane_sums_epi32(const __m512i* v) noexcept {
  __m512i u[8], t[4], h[2];
  for (int p = 0; p < 8; ++p)
    u[p] =
        _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * p], v[2 * p + 1]), _mm512_unpackhi_epi32(v[2 * p], v[2 * p + 1]));
  for (int q = 0; q < 4; ++q)
    t[q] =
        _mm512_add_epi32(_mm512_unpacklo_epi64(u[2 * q], u[2 * q + 1]), _mm512_unpackhi_epi64(u[2 * q], u[2 * q + 1]));
  for (int r = 0; r < 2; ++r)
    h[r] = _mm512_add_epi32(_mm512_shuffle_i32x4(t[2 * r], t[2 * r + 1], 0x88),
                            _mm512_shuffle_i32x4(t[2 * r], t[2 * r + 1], 0xdd));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(h[0], h[1], 0x88), _mm512_shuffle_i32x4(h[0], h[1], 0xdd));
}

// Weight rows that are one whole group of 64 each (k = group = 64: every projection of a dim-64 model), one x row at
// a time: each row's exact int32 Σ x·w, 16 rows reduced together by an integer tree, then scaled once per row,
// y = bias + (float)Σ · s_w · s_x (runq.c's arithmetic for a group). The packed tile scales every lane in float and
// reduces the lanes in float: at one vector per row that was most of its work.
void q8_rows_one_group(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch) noexcept {
  const __m512i bias128 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (std::size_t i = 0; i < ch.rows; ++i) {
    const __m512i xv = _mm512_loadu_si512(ch.q + i * ch.ldq);
    // (w + 128)·x summed, less 128·Σx: the exact Σ w·x
    const __m512i corr =
        _mm512_set1_epi32(-_mm512_reduce_add_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), bias128, xv)));
    const __m512 sx = _mm512_set1_ps(ch.sx[i * ch.ldsx]);
    float* y = ch.y + i * ch.ldy;
    const auto tile = [&](std::size_t r0, std::size_t nr, auto full) noexcept {
      const __mmask16 m = static_cast<__mmask16>((1u << nr) - 1u);
      const std::int8_t* wr = w + r0 * ldw;
      __m512i acc[16];
      for (std::size_t j = 0; j < 16; ++j) {
        acc[j] = _mm512_setzero_si512();
        if (decltype(full)::value || j < nr) {
          dpbusd_into(acc[j], _mm512_xor_si512(_mm512_loadu_si512(wr), bias128), xv);
          wr += ldw;
        }
      }
      const __m512 dots = _mm512_cvtepi32_ps(_mm512_add_epi32(lane_sums_epi32(acc), corr));
      const __m512 v = _mm512_mul_ps(_mm512_mul_ps(dots, _mm512_maskz_loadu_ps(m, ch.sw + r0)), sx);
      const __m512 base = !ch.first            ? _mm512_maskz_loadu_ps(m, y + r0)
                          : ch.bias != nullptr ? _mm512_maskz_loadu_ps(m, ch.bias + r0)
                                               : _mm512_setzero_ps();
      _mm512_mask_storeu_ps(y + r0, m, _mm512_add_ps(base, v));
    };
    std::size_t r = 0;
    for (; r + 16 <= n; r += 16) tile(r, 16, std::true_type{});
    if (r < n) tile(r, n - r, std::false_type{});
  }
}

// Longer (or odd) groups: int and float accumulators per pair, MR·NR + NR + MR·NR registers (4 weight rows for one
// x row: 8 spilled).
template <int MR, int NR>
void q8_segment_rows(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch, std::size_t i0) noexcept {
  tile_rows<NR>(n, [&](std::size_t r, auto nr, auto prefetch) {
    q8_tile<MR, decltype(nr)::value, decltype(prefetch)::value>(w, ldw, ch, i0, r);
  });
}

#define MICROATTN_Q8_NAME "linear_q8_2x4_avx512vnni"
#else
// 256-bit: |w| × sign(x, w) summed per lane, through vpmaddubsw + vpmaddwd (AVX2: each pair of products is at most
// 2·128·127 = 32512, no saturation) or one vpdpbusd (AVX-VNNI, or AVX-512 VNNI on 256-bit vectors).
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) noexcept {
  // vpdpbusd through asm, in place: GCC 12 copies the intrinsic's loop-carried accumulators (see dpbusd_into).
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
  return acc;
#elif defined(__AVXVNNI__)
  asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));  // %{ %}: literal braces
  return acc;
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
inline __m256i load_tail(const std::int8_t* p, std::size_t rem) noexcept {
  alignas(32) std::int8_t t[32] = {};
  std::memcpy(t, p, rem);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(t));
}

template <int MR, int NR, bool Prefetch>
void q8_tile(const std::int8_t* w, std::size_t ldw, const Q8Chunk& ch, std::size_t i0, std::size_t r0) noexcept {
  const std::size_t seg = ch.seg, segs = ch.len / seg, full = seg / 32, rem = seg % 32;
  const std::size_t ahead = NR * ldw;
  const std::int8_t* xq[MR];
  const float* sx[MR];
  for (int i = 0; i < MR; ++i) {
    xq[i] = ch.q + (i0 + i) * ch.ldq;
    sx[i] = ch.sx + (i0 + i) * ch.ldsx;
  }
  const std::int8_t* wr[NR];
  const float* sw[NR];
  for (int j = 0; j < NR; ++j) {
    wr[j] = w + (r0 + j) * ldw;
    sw[j] = row_scales(ch, r0 + j);
  }
  __m256 f[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) f[i][j] = _mm256_setzero_ps();
  std::size_t off = 0;
  __m256i acc[MR][NR];  // declared once: inside the group loop GCC copies the accumulators every vector
  for (std::size_t s = 0; s < segs; ++s) {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_si256();
    const auto step = [&](const __m256i* xv, auto load_w) noexcept {
      for (int j = 0; j < NR; ++j) {
        const __m256i wv = load_w(wr[j] + off);
        const __m256i aw = _mm256_abs_epi8(wv);  // −128 becomes 0x80: 128 as unsigned
        for (int i = 0; i < MR; ++i) acc[i][j] = dot_u8s8(acc[i][j], aw, _mm256_sign_epi8(xv[i], wv));
      }
    };
    for (std::size_t v = 0; v < full; ++v, off += 32) {
      __m256i xv[MR];
      for (int i = 0; i < MR; ++i) xv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[i] + off));
      step(xv, [](const std::int8_t* p) noexcept { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); });
      if (Prefetch && off % 64 == 0)
        for (int j = 0; j < NR; ++j) prefetch_ahead(wr[j] + off, ahead);
    }
    if (rem != 0) {
      __m256i xv[MR];
      for (int i = 0; i < MR; ++i) xv[i] = load_tail(xq[i] + off, rem);
      step(xv, [rem](const std::int8_t* p) noexcept { return load_tail(p, rem); });
      off += rem;
    }
    for (int j = 0; j < NR; ++j) {
      const __m256 swv = _mm256_set1_ps(sw[j][s]);
      for (int i = 0; i < MR; ++i)
        f[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[i][j]), swv), _mm256_set1_ps(sx[i][s]), f[i][j]);
    }
  }
  q8_tile_store<MR, NR>(&f[0][0], ch, i0, r0);
}

// Segments of whole vectors (seg % 32 == 0: groups of 32, 64, …, one scale per row, or one piece of a longer
// group), with the products of each pair's scales for the chunk's segments computed first (8 segments a multiply).
// V = 1 or 2 vectors per segment (groups of 32, 64): every vector's int32 lanes converted and multiply-added with
// the pair's product, float accumulators in registers (a loop over a run-time count of 1 or 2 vectors was 1.4×
// slower at 256²). V = 0 (longer segments): the lanes summed in int32 over the segment, then converted once; with
// 8 pairs the int32 sums take the registers (8 + x, |w|, w) and the float ones, touched once per segment, live in
// memory. The tile is given its weight rows' scale pointers: the generic tile computed them with a division per row
// (GCC folds `rps == 1 ? r : r / rps` into the division).
template <int MR, int NR, int V, bool Prefetch>
void q8_tile_vectors(const std::int8_t* wt, std::size_t ldw, const Q8Chunk& ch, const float* const* sw, std::size_t i0,
                     std::size_t r0) noexcept {
  constexpr int P = MR * NR;
  constexpr bool OneVector = V > 0;
  const std::size_t segs = ch.len / ch.seg, per_seg = ch.seg / 32;
  // Two tiles ahead: at 1024² m = 1 (1 × 4 tiles), groups of 64 took 21.9 µs with the next tile's lines, 19.5 with
  // the one after it, 22.0 four tiles ahead.
  const std::size_t ahead = 2 * NR * ldw;
  static_assert(linear_q8_chunk_groups % 8 == 0, "whole vectors of scales");
  alignas(32) float s[P][linear_q8_chunk_groups];
  for (std::size_t g = 0; g < segs; g += 8) {
    // Masked loads: no scale past the chunk's is read (the lanes past segs are never used).
    const __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(segs - g)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 swv[NR];
    for (int j = 0; j < NR; ++j) swv[j] = _mm256_maskload_ps(sw[j] + g, mask);
    for (int i = 0; i < MR; ++i) {
      const __m256 sxv = _mm256_maskload_ps(ch.sx + (i0 + i) * ch.ldsx + g, mask);
      for (int j = 0; j < NR; ++j) _mm256_store_ps(s[i * NR + j] + g, _mm256_mul_ps(swv[j], sxv));
    }
  }
  const std::int8_t* xq = ch.q + i0 * ch.ldq;
  const __m256i zero = _mm256_setzero_si256();
  __m256 f[P];
  for (int p = 0; p < P; ++p) f[p] = _mm256_setzero_ps();
  alignas(32) float fm[OneVector ? 1 : P][8] = {};
  __m256i acc[P];
  std::size_t off = 0;
  // One vector of every pair: use(pair, |w|, sign(x, w)), whose lane sums of products are the pair's (dot_u8s8).
  const auto step = [&](auto use) noexcept {
    __m256i xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + i * ch.ldq + off));
    for (int j = 0; j < NR; ++j) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wt + j * ldw + off));
      const __m256i aw = _mm256_abs_epi8(wv);
      for (int i = 0; i < MR; ++i) use(i * NR + j, aw, _mm256_sign_epi8(xv[i], wv));
    }
    if (Prefetch && off % 64 == 0)
      for (int j = 0; j < NR; ++j) prefetch_ahead(wt + j * ldw + off, ahead);
    off += 32;
  };
  for (std::size_t g = 0; g < segs; ++g) {
    if (OneVector) {
      for (int v = 0; v < V; ++v)
        step([&](int p, __m256i u, __m256i sg) noexcept {
          f[p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_u8s8(zero, u, sg)), _mm256_broadcast_ss(&s[p][g]), f[p]);
        });
    } else {
      step([&](int p, __m256i u, __m256i sg) noexcept { acc[p] = dot_u8s8(zero, u, sg); });
      for (std::size_t v = 1; v < per_seg; ++v)
        step([&](int p, __m256i u, __m256i sg) noexcept { acc[p] = dot_u8s8(acc[p], u, sg); });
      for (int p = 0; p < P; ++p) {
        float* fp = fm[OneVector ? 0 : p];
        _mm256_store_ps(fp,
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[p]), _mm256_broadcast_ss(&s[p][g]), _mm256_load_ps(fp)));
      }
    }
  }
  if (!OneVector)
    for (int p = 0; p < P; ++p) f[p] = _mm256_load_ps(fm[OneVector ? 0 : p]);
  q8_tile_store<MR, NR>(f, ch, i0, r0);
}

// Weight rows by tiles of NR for the MR x rows from i0; Shared: rows share their scales (a group longer than a row).
template <int MR, int NR, bool Shared>
void q8_rows_vectors(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch, std::size_t i0) noexcept {
  tile_rows<NR>(n, [&](std::size_t r, auto nr, auto prefetch) {
    constexpr int R = decltype(nr)::value;
    const float* sw[R];
    for (int j = 0; j < R; ++j) sw[j] = ch.sw + (Shared ? (r + j) / ch.rows_per_scale : r + j) * ch.sw_stride;
    if (ch.seg == 32) {
      q8_tile_vectors<MR, R, 1, decltype(prefetch)::value>(w + r * ldw, ldw, ch, sw, i0, r);
    } else if (ch.seg == 64) {
      q8_tile_vectors<MR, R, 2, decltype(prefetch)::value>(w + r * ldw, ldw, ch, sw, i0, r);
    } else {
      q8_tile_vectors<MR, R, 0, decltype(prefetch)::value>(w + r * ldw, ldw, ch, sw, i0, r);
    }
  });
}
template <int MR, int NR>
void q8_rows_vectors(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch, std::size_t i0) noexcept {
  if (ch.rows_per_scale == 1) {
    q8_rows_vectors<MR, NR, false>(w, ldw, n, ch, i0);
  } else {
    q8_rows_vectors<MR, NR, true>(w, ldw, n, ch, i0);
  }
}

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define MICROATTN_Q8_NAME "linear_q8_2x4_ymm_avx512vnni"
#elif defined(__AVXVNNI__)
#define MICROATTN_Q8_NAME "linear_q8_2x4_avxvnni"
#else
#define MICROATTN_Q8_NAME "linear_q8_2x4_avx2"
#endif
#endif

#if !MICROATTN_LINEAR_ZMM_VNNI
template <int MR, int NR>
void q8_row_block(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch, std::size_t i0) noexcept {
  tile_rows<NR>(n, [&](std::size_t r, auto nr, auto prefetch) {
    q8_tile<MR, decltype(nr)::value, decltype(prefetch)::value>(w, ldw, ch, i0, r);
  });
}
#endif

void linear_q8_2x4_x86(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch) noexcept {
#if MICROATTN_LINEAR_ZMM_VNNI
  assert(ch.rows <= 4);
  if (ch.len == 64 && ch.seg == 64 && ch.rows_per_scale == 1 && ch.sw_stride == 1) {
    q8_rows_one_group(w, ldw, n, ch);
  } else if (ch.seg <= 64 && 64 % ch.seg == 0 && ch.seg % 4 == 0) {
    // Packed groups hold only float accumulators: 4 x rows × 4 weight rows fit (16 + 4 of x + 4 of its scales), so
    // each weight vector and its scales serve four rows (m = 8 at 256², group 32: 0.86 → 1.30 of fp32 matmul's speed).
    std::size_t i = 0;
    for (; i + 4 <= ch.rows; i += 4) q8_packed_rows<4, 4>(w, ldw, n, ch, i);
    for (; i + 2 <= ch.rows; i += 2) q8_packed_rows<2, 4>(w, ldw, n, ch, i);
    if (i < ch.rows) q8_packed_rows<1, 8>(w, ldw, n, ch, i);
  } else {
    std::size_t i = 0;
    for (; i + 2 <= ch.rows; i += 2) q8_segment_rows<2, 4>(w, ldw, n, ch, i);
    if (i < ch.rows) q8_segment_rows<1, 4>(w, ldw, n, ch, i);
  }
#else
  assert(ch.rows <= 2);
  if (ch.seg % 32 == 0) {
    if (ch.rows == 2) {
      q8_rows_vectors<2, 4>(w, ldw, n, ch, 0);
    } else {
      q8_rows_vectors<1, 4>(w, ldw, n, ch, 0);  // 1024² m = 1, groups of 64: 1 × 8 25.1 µs, 1 × 4 21.9
    }
    return;
  }
  if (ch.rows == 2) {
    q8_row_block<2, 2>(w, ldw, n, ch, 0);
  } else {
    q8_row_block<1, 4>(w, ldw, n, ch, 0);
  }
#endif
}

constexpr LinearKernels table{MICROATTN_F16_ARCH,
                              "linear_f32_gemm_" MICROATTN_F16_ARCH,
                              f16_tile_rows == 4 ? "linear_f16_4x4_avx512" : "linear_f16_2x4_avx2",
                              MICROATTN_Q8_NAME,
                              linear_f32_gemm,
                              linear_f16_rx4_x86,
                              linear_q8_2x4_x86,
                              MICROATTN_LINEAR_ZMM_VNNI ? 4 : 2,
                              linear_absmax_bits_x86,
                              linear_quantize_x86};

}  // namespace

const LinearKernels* vector_linear_kernels() noexcept { return &table; }

}  // namespace detail
}  // namespace microattn

#endif
