// microattn — weight matrices in low-precision storage formats, and the linear layer (nn.Linear) that reads them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "microattn/config.hpp"
#include "microattn/matrix_view.hpp"
#include "microattn/parallel.hpp"
#include "microattn/status.hpp"

namespace microattn {

// How a weight matrix is stored. The values are part of the C API (MICROATTN_FORMAT_*) and of exported files.
enum class Format : std::uint8_t { f32 = 0, f16 = 1, q8 = 2 };

// A read-only rows × cols matrix, row-major and dense (stride = cols), in nn.Linear layout (out × in) when it is
// a weight. Borrowed, never copied: the data must outlive every call (const arrays in flash are the intended case).
//   f32: data is const float* (4-byte aligned);
//   f16: const std::uint16_t* holding IEEE-754 binary16 bit patterns (2-byte aligned; no compiler extension
//        is needed to declare them);
//   q8:  const std::int8_t* (any alignment) with one float scale (4-byte aligned) per group of `group`
//        consecutive elements in row-major order: element (r, c) = scales[(r·cols + c) / group] · data[r·cols + c],
//        group divides rows·cols. group = cols: one scale per row. This is llama2.c's version-2 (runq.c) layout,
//        whose groups may straddle rows (hidden 172, group 64). Every int8 value is allowed, −128 included.
// scales and group are read for q8 only.
struct WeightMatrix {
  Format format;
  const void* data;
  std::size_t rows, cols;
  const float* scales;
  std::size_t group;
};

constexpr WeightMatrix weights_f32(const float* data, std::size_t rows, std::size_t cols) noexcept {
  return WeightMatrix{Format::f32, data, rows, cols, nullptr, 0};
}
constexpr WeightMatrix weights_f16(const std::uint16_t* data, std::size_t rows, std::size_t cols) noexcept {
  return WeightMatrix{Format::f16, data, rows, cols, nullptr, 0};
}
constexpr WeightMatrix weights_q8(const std::int8_t* data, const float* scales, std::size_t rows, std::size_t cols,
                                  std::size_t group) noexcept {
  return WeightMatrix{Format::q8, data, rows, cols, scales, group};
}

// Conversions to the storage formats, for weights prepared at run time (loaded from a file, received over the air)
// or by a tool; scripts/export_weights.py writes the same bits.
//   f16_from_float  IEEE binary16, round to nearest, ties to even (subnormals included); |x| >= 65520 gives ±inf,
//                   NaN a quiet NaN (its sign and top payload bits kept).
//   float_from_f16  exact for every bit pattern (the value linear() and the f16 K/V cache compute with).
std::uint16_t f16_from_float(float x) noexcept;
float float_from_f16(std::uint16_t h) noexcept;

// w (rows × cols, any stride) as q8 with one scale per group of `group` consecutive elements in row-major order
// (weights_q8's layout; group = cols: one scale per row; a group may straddle rows): data gets rows·cols int8
// values (dense), scales rows·cols / group floats. The rules of llama2.c's export.py and scripts/export_weights.py:
// s = max|w| / 127 over the group (a float division), q = round(w / s) (a float division) with ties to even,
// clamped to ±127, so |w − s·q| <= s/2 for a normal s; an all-zero group (or one whose s underflows to 0) has s = 0
// and q = 0; a group holding NaN or ±inf gets s = NaN and q = 0 (it reads back NaN: refuse such weights first).
// Errors (nothing written):
//   null_pointer   w.data, data or scales null
//   misaligned     w.data or scales not 4-byte aligned
//   invalid_shape  a zero dimension, stride < cols or an extent past ptrdiff_t bytes (as matmul); group 0 or not
//                  dividing rows·cols
//   aliasing       data, scales and w's extent not disjoint
Status quantize_q8(MatrixView<const float> w, std::size_t group, std::int8_t* data, float* scales) noexcept;

// The four projections of a layer, each in its own format, with fp32 biases (nullptr: no bias);
// out.data == nullptr: no out projection (y is the concatenated heads).
struct LayerWeightMatrices {
  WeightMatrix q, k, v;
  const float* q_bias;
  const float* k_bias;
  const float* v_bias;
  WeightMatrix out;
  const float* out_bias;
};

// y = x·wᵀ + bias (nn.Linear): x is m × w.cols, y is m × w.rows and overwritten, bias is w.rows floats or nullptr.
//
// Errors, checked in this order (nothing is written to y):
//   null_pointer   x.data, y.data or w.data null; q8 with w.scales null
//   misaligned     x.data, y.data, bias, f32 data or q8 scales not 4-byte aligned; f16 data not 2-byte aligned
//   invalid_shape  w.format not a Format; a zero dimension; x.cols != w.cols, y.cols != w.rows, y.rows != x.rows;
//                  a stride < cols or a view whose extent overflows (as matmul); w.rows·w.cols elements overflow
//                  ptrdiff_t bytes; q8 with group 0 or group not dividing rows·cols
//   aliasing       y shares a byte with x, the weight data, the scales or the bias
//
// Accuracy (docs/numerical-contract.md "Low-precision weights"; u = 2⁻²⁴, k = w.cols,
// Σ|x·w| = Σ_c |x_c·w_rc| + |bias_r| over the weights as stored, dequantized exactly):
//   f32, f16  |y − exact| <= 2·(k + 3)·u·Σ|x·w|: matmul's bound with the bias as one more term. f16 values are
//             converted exactly (subnormals, ±0, ±inf, NaN included).
//   q8        where the groups tile every row alike (group divides cols, or cols divides group), x is quantized per
//             group as llama2.c's runq.c does: s = max|x_c| / 127 over the group's columns (a float division),
//             q_c = round-half-away-from-zero(x_c / s) (roundf of a float division), and each group's integer dot
//             product is exact (int32); |y − exact| <= ½·(1 + 2⁻¹⁶)·Σ_g s_g·Σ_{c∈g}|w_rc| + 2·(k + 3)·u·(Σ|x·w|
//             + Σ_g s_g·Σ_{c∈g}|w_rc|). A row of x with a group whose max|x| is not finite or below 127·FLT_MIN
//             (s would be subnormal), and every row when the groups straddle rows unevenly, is computed instead in
//             float from the dequantized weights (each s·q rounded once to float): the f32 bound, and the rules of
//             fp32 matmul for NaN, ±inf and zeros (a non-finite x never gives a finite row). Scales are meant to be
//             finite: a non-finite scale makes the rows it covers non-finite.
//
// Memory: none but the stack (linear has no workspace argument): q8 quantizes x there a chunk of rows and columns
// at a time, a group longer than the chunk in pieces with the scale of the whole group. Stack: at most
// entry_point_stack_bytes on SIMD builds, every format; Cortex-M: docs/cortex-m.md "Footprint" ("stack, linear").
//
// What a firmware links: linear() is inline and picks the format's entry point, so that where the format is known
// where it is called (weights_f32(...) at the call, or a constexpr WeightMatrix) only that format's kernels are
// reached, and --gc-sections drops the others (footprint.py checks an f32 caller links no f16/q8 code). A format
// read at run time links all three.
namespace detail {
// The formats as types: each format's entry point is one instantiation, named by its format.
struct f32_format {
  static constexpr Format value = Format::f32;
};
struct f16_format {
  static constexpr Format value = Format::f16;
};
struct q8_format {
  static constexpr Format value = Format::q8;
};
template <class F>  // f32_format, f16_format or q8_format (instantiated in the library)
Status linear_entry(const MatrixView<const float>& x, const WeightMatrix& w, const float* bias,
                    const MatrixView<float>& y) noexcept;
Status linear_checks(const MatrixView<const float>& x, const WeightMatrix& w, const float* bias,
                     const MatrixView<float>& y) noexcept;  // a format outside Format: only the error to report
}  // namespace detail
[[gnu::always_inline]] inline Status linear(MatrixView<const float> x, const WeightMatrix& w, const float* bias,
                                            MatrixView<float> y) noexcept {
  switch (w.format) {
    case Format::f32:
      return detail::linear_entry<detail::f32_format>(x, w, bias, y);
    case Format::f16:
      return detail::linear_entry<detail::f16_format>(x, w, bias, y);
    case Format::q8:
      return detail::linear_entry<detail::q8_format>(x, w, bias, y);
  }
  return detail::linear_checks(x, w, bias, y);
}

// linear() with its work on the caller's workers (microattn/parallel.hpp): the rows of w in items of
// linear_parallel_rows (32: a multiple of every kernel's tile, so an item's rows are computed as linear() computes
// them), the last item the rest; one item when the product is small (m·rows·cols below linear_parallel_min_macs,
// 2^16, for q8 twice that), when w has fewer than 64 rows, or when q8's groups would start inside an item. y gets
// linear()'s floats, bit for bit, for every worker count; the same errors, checked before any work (nothing is
// written). Each worker needs linear()'s stack. q8 quantizes x on the calling thread (on Cortex-M on each worker's
// stack, again for every range of items it runs). Reaches every format's kernels.
constexpr std::size_t linear_parallel_rows = 32;
constexpr std::size_t linear_parallel_min_macs = std::size_t{1} << 16;
Status linear(MatrixView<const float> x, const WeightMatrix& w, const float* bias, MatrixView<float> y,
              const Parallel& parallel) noexcept;

// Name of the kernel linear() runs for a format, e.g. "linear_q8_2x4_avx512vnni"; "" for a value outside Format.
const char* linear_kernel_name(Format format) noexcept;

}  // namespace microattn
