// Internal interface of linear()'s kernels: a table per instruction set, separate from detail::Kernels so that a
// firmware that never calls linear() links none of them (--gc-sections). Entry points check, kernels assert.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "formats/bias.hpp"
#include "formats/f16.hpp"
#include "formats/q8.hpp"
#include "kernels/select.hpp"
#include "microattn/detail/layer_parts.hpp"
#include "microattn/weights.hpp"

namespace microattn {
namespace detail {

// q8 quantizes x on the stack, linear_q8_rows rows × linear_q8_chunk_bytes columns at a time (with at most
// linear_q8_chunk_groups activation scales per row); a group longer than the chunk in pieces, with the scale of the
// whole group. Cortex-M: one row of 256 bytes (the stack budgets of docs/cortex-m.md).
constexpr std::size_t linear_q8_chunk_bytes = target_is_mcu ? 256 : 1024;
constexpr std::size_t linear_q8_chunk_groups = target_is_mcu ? 16 : 64;
constexpr std::size_t linear_q8_rows = target_is_mcu ? 1 : 4;

// y (m × n, row stride ldy) = x (m × k, ldx) · wᵀ + bias, w dense n × k in the kernel's format. A one-row view's
// stride is its column count (as for matmul: kernels step row pointers past the last row).
struct LinearArgs {
  const void* w;        // in the kernel's format
  const float* scales;  // q8
  std::size_t group;    // q8
  const float* x;
  std::size_t ldx;
  const float* bias;  // n floats or nullptr
  float* y;
  std::size_t ldy;
  std::size_t m, n, k;
};

// One column chunk of q8 activations for the rows of an x tile, quantized by linear.cpp: columns [c0, c0 + len)
// in segments of seg columns (len is a multiple of seg), each segment within one weight group of every row.
//   q:  rows × len int8 (row stride ldq), in [−127, 127]
//   sx: rows × (len / seg) activation scales (row stride ldsx); 0 for a segment of zeros
//   sw: the weight scale of row r, segment s is sw[(r / rows_per_scale)·sw_stride + s]
// The kernel adds Σ_s (Σ_{c∈s} q_c·w_rc · sw) · sx to y[i·ldy + r] for the tile's rows i and every weight row
// r < n, starting from the bias (or 0) when first is set.
struct Q8Chunk {
  const std::int8_t* q;
  std::size_t ldq;
  const float* sx;
  std::size_t ldsx;
  std::size_t rows;
  std::size_t len, seg;
  const float* sw;
  std::size_t sw_stride, rows_per_scale;
  const float* bias;
  bool first;
  float* y;
  std::size_t ldy;
};

// f32 in every table: y = x·wᵀ on the build's matmul kernels (selected_kernels().gemm), then the bias.
void linear_f32_gemm(const LinearArgs& a) noexcept;

struct LinearKernels {
  const char* arch;  // "scalar", "avx512", "avx2", "neon64", "neon", "armv7em", "helium"
  const char* f32_name;
  const char* f16_name;
  const char* q8_name;
  void (*f32)(const LinearArgs& a) noexcept;
  void (*f16)(const LinearArgs& a) noexcept;
  // w points at column c0 of row 0 (row stride ldw); n weight rows.
  void (*q8_chunk)(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& c) noexcept;
  std::size_t q8_chunk_rows;  // x rows per q8_chunk call that the kernel takes best (<= linear_q8_rows)
  // Largest |x_i| over i < n as the bits of a float (sign cleared): NaN and ±inf compare above every finite value
  // as integers, so the result tells them apart (>= 0x7f800000) without a floating-point max that drops NaNs.
  std::uint32_t (*absmax_bits)(const float* x, std::size_t n) noexcept;
  // q[i] = round-half-away-from-zero(x[i] / s) for i < n, s > 0 normal, every |x[i]| <= 127·s (runq.c's rule).
  void (*quantize)(const float* x, std::size_t n, float s, std::int8_t* q) noexcept;
};

// The vector table a build has, from the target's macros: x86 with AVX2, FMA and F16C (linear/x86.cpp), NEON
// (linear/neon.cpp), and on Cortex-M, chosen at compile time so that a firmware links only the one it runs (not the
// scalar one), Helium where the core has MVE-F (Cortex-M55, linear/helium.cpp), else Armv7E-M's DSP extension and
// FPU (Cortex-M4/M7, linear/armv7em.cpp).
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define MICROATTN_LINEAR_X86 1
#else
#define MICROATTN_LINEAR_X86 0
#endif
#if defined(__ARM_NEON)
#define MICROATTN_LINEAR_NEON 1
#else
#define MICROATTN_LINEAR_NEON 0
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 2)
#define MICROATTN_LINEAR_HELIUM 1
#else
#define MICROATTN_LINEAR_HELIUM 0
#endif
#if !MICROATTN_LINEAR_HELIUM && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M' && \
    defined(__ARM_FEATURE_DSP) && defined(__ARM_FP) && (__ARM_FP & 4)
#define MICROATTN_LINEAR_ARMV7EM 1
#else
#define MICROATTN_LINEAR_ARMV7EM 0
#endif

const LinearKernels& scalar_linear_kernels() noexcept;
// The vector table of the build (above); nullptr when it has none.
const LinearKernels* vector_linear_kernels() noexcept;
#if MICROATTN_LINEAR_ARMV7EM || MICROATTN_LINEAR_HELIUM
// f16 on the scalar FPU's half-precision conversion (VCVTB/VCVTT), 4 weight rows per x row: both Cortex-M tables.
void linear_f16_1x4_armv7em(const LinearArgs& a) noexcept;
#endif
// The f16 kernel, and a table for q8 (its q8 fields are the selected table's): what linear()'s per-format entry
// points reach. On Cortex-M each is its own object (the q8 table without the f16 kernel), so that a firmware links
// only the formats it calls linear() with; elsewhere the run-time table.
using LinearF16Kernel = void (*)(const LinearArgs& a) noexcept;
#if MICROATTN_LINEAR_HELIUM
LinearF16Kernel vector_linear_f16() noexcept;
#endif
#if MICROATTN_LINEAR_ARMV7EM || MICROATTN_LINEAR_HELIUM
const LinearKernels& vector_linear_q8_kernels() noexcept;
// A table as linear()'s q8 entry point takes it: without the f16 kernel, so that a firmware links that only if it
// calls linear() with f16 weights.
constexpr LinearKernels linear_q8_only(LinearKernels t) noexcept {
  t.f16_name = "";
  t.f16 = nullptr;
  return t;
}
// A Cortex-M table file's (linear/armv7em.cpp, linear/helium.cpp) table, its q8-only form and their accessors, in
// namespace detail (the tables have internal linkage, as constexpr variables do); f32 runs matmul's gemm.
#define MICROATTN_LINEAR_CORTEX_M_TABLES(arch, f32_name, f16_name, q8_name, f16, q8, absmax_bits, quantize) \
  constexpr LinearKernels cortex_m_linear_table{arch, f32_name, f16_name, q8_name,     linear_f32_gemm,     \
                                                f16,  q8,       1,        absmax_bits, quantize};           \
  constexpr LinearKernels cortex_m_linear_q8_table = linear_q8_only(cortex_m_linear_table);                 \
  const LinearKernels* vector_linear_kernels() noexcept { return &cortex_m_linear_table; }                  \
  const LinearKernels& vector_linear_q8_kernels() noexcept { return cortex_m_linear_q8_table; }
#endif
inline const LinearKernels& selected_linear_kernels() noexcept;
inline LinearF16Kernel selected_linear_f16() noexcept {
#if MICROATTN_LINEAR_HELIUM
  return vector_linear_f16();
#elif MICROATTN_LINEAR_ARMV7EM
  return linear_f16_1x4_armv7em;
#else
  return selected_linear_kernels().f16;
#endif
}
inline const LinearKernels& selected_linear_q8_kernels() noexcept {
#if MICROATTN_LINEAR_ARMV7EM || MICROATTN_LINEAR_HELIUM
  return vector_linear_q8_kernels();
#else
  return selected_linear_kernels();
#endif
}
inline const LinearKernels& selected_linear_kernels() noexcept {
#if MICROATTN_LINEAR_ARMV7EM || MICROATTN_LINEAR_HELIUM
  return *vector_linear_kernels();  // never null there: no test, and no reference to the scalar table
#else
  return selected_table(vector_linear_kernels(), scalar_linear_kernels);
#endif
}

// Row i of y from q8 weights in float, without quantizing x (linear.cpp takes it where the groups straddle rows
// unevenly, or x's row is not finite or too small to quantize): y_ir = bias_r + Σ_c fl(s·q_rc)·x_ic.
void linear_q8_float_row(const LinearArgs& a, std::size_t i) noexcept;

// The weight scales of row r in a chunk (segment s at [s]).
inline __attribute__((always_inline)) const float* row_scales(const Q8Chunk& c, std::size_t r) noexcept {
  return c.sw + (c.rows_per_scale == 1 ? r : r / c.rows_per_scale) * c.sw_stride;
}

// Where the q8 tile at x row i0 and weight row r0 of a chunk reads: its quantized x rows (row stride c.ldq), their
// scales (c.ldsx), its NR weight rows (row j at wt + j·ldw: one pointer and the stride; GCC would keep NR pointers,
// too many registers) and each weight row's scales.
template <int NR>
struct Q8TileSource {
  const std::int8_t* xq;
  const float* sx;
  const std::int8_t* wt;
  const float* sw[NR];
};
template <int NR>
inline __attribute__((always_inline)) Q8TileSource<NR> q8_tile_source(const std::int8_t* w, std::size_t ldw,
                                                                      const Q8Chunk& c, std::size_t i0,
                                                                      std::size_t r0) noexcept {
  Q8TileSource<NR> t{c.q + i0 * c.ldq, c.sx + i0 * c.ldsx, w + r0 * ldw, {}};
  for (int j = 0; j < NR; ++j) t.sw[j] = row_scales(c, r0 + j);
  return t;
}

// What an f16 tile driver reads for the x rows from i0: the binary16 weights, x and y at row i0, and bias_at(j), the
// bias from weight row j on (nullptr: none).
struct F16Rows {
  const std::uint16_t* w;
  const float* x;
  float* y;
  const float* bias;
  F16Rows(const LinearArgs& a, std::size_t i0) noexcept
      : w(static_cast<const std::uint16_t*>(a.w)), x(a.x + i0 * a.ldx), y(a.y + i0 * a.ldy), bias(a.bias) {}
  const float* bias_at(std::size_t j) const noexcept { return bias != nullptr ? bias + j : nullptr; }
};

// The f16 kernels' tiles: each row of x against four weight rows at a time, then the rest one by one, as
// tile(std::integral_constant<int, R>, x's row, y's row, r) for weight rows [r, r + R).
template <typename Tile>
inline __attribute__((always_inline)) void f16_row_tiles(const LinearArgs& a, Tile tile) noexcept {
  for (std::size_t i = 0; i < a.m; ++i) {
    const float* x = a.x + i * a.ldx;
    float* y = a.y + i * a.ldy;
    std::size_t r = 0;
    for (; r + 4 <= a.n; r += 4) tile(std::integral_constant<int, 4>{}, x, y, r);
    for (; r < a.n; ++r) tile(std::integral_constant<int, 1>{}, x, y, r);
  }
}

}  // namespace detail
}  // namespace microattn
