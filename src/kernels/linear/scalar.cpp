// linear()'s portable kernels: what Cortex-M runs, and the reference table the tests compare the vector ones with.
// No xsimd or intrinsics. Tiles are one row of x by four rows of w with every accumulator a named local, so GCC -Os
// keeps them in registers (arrays would live on the stack); q8 sums in int32.
#include <cassert>
#include <cstdint>

#include "kernels/attention.hpp"
#include "kernels/linear.hpp"
#include "kernels/scalar_math.hpp"

namespace microattn {
namespace detail {

// f32: matmul's kernels (y = x·wᵀ), then the bias. The build's matmul kernels, not the scalar ones: this table is
// also what builds without vector kernels of linear's own select (SSE2, i686, Cortex-M55 with Helium's gemm).
void linear_f32_gemm(const LinearArgs& a) noexcept {
  const GemmArgs g{a.x, a.ldx, static_cast<const float*>(a.w), a.k, true, a.y, a.ldy, a.m, a.n, a.k};
  selected_kernels().gemm(g);
  if (a.bias == nullptr) return;
  for (std::size_t i = 0; i < a.m; ++i)
    for (std::size_t r = 0; r < a.n; ++r) a.y[i * a.ldy + r] += a.bias[r];
}

namespace {

void linear_f16_1x4_scalar(const LinearArgs& a) noexcept {
  const auto* w = static_cast<const std::uint16_t*>(a.w);
  const std::size_t k = a.k;
  f16_row_tiles(a, [&a, w, k](auto rows, const float* x, float* y, std::size_t r) {
    if constexpr (decltype(rows)::value == 4) {
      const std::uint16_t* w0 = w + r * k;
      const std::uint16_t* w1 = w0 + k;
      const std::uint16_t* w2 = w1 + k;
      const std::uint16_t* w3 = w2 + k;
      float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
      for (std::size_t c = 0; c < k; ++c) {
        const float xc = x[c];
        s0 = fmadd(xc, f16_decode(w0[c]), s0);
        s1 = fmadd(xc, f16_decode(w1[c]), s1);
        s2 = fmadd(xc, f16_decode(w2[c]), s2);
        s3 = fmadd(xc, f16_decode(w3[c]), s3);
      }
      y[r] = bias_of(a.bias, r) + s0;
      y[r + 1] = bias_of(a.bias, r + 1) + s1;
      y[r + 2] = bias_of(a.bias, r + 2) + s2;
      y[r + 3] = bias_of(a.bias, r + 3) + s3;
    } else {
      const std::uint16_t* w0 = w + r * k;
      float s0 = 0.0f;
      for (std::size_t c = 0; c < k; ++c) s0 = fmadd(x[c], f16_decode(w0[c]), s0);
      y[r] = bias_of(a.bias, r) + s0;
    }
  });
}

// One x row of a chunk against four weight rows: per segment, four int32 sums, then (sum·sw)·sx as runq.c orders it.
void linear_q8_1x4_scalar(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch) noexcept {
  const std::size_t seg = ch.seg, segs = ch.len / seg;
  for (std::size_t i = 0; i < ch.rows; ++i) {
    const std::int8_t* xq = ch.q + i * ch.ldq;
    const float* sx = ch.sx + i * ch.ldsx;
    float* y = ch.y + i * ch.ldy;
    std::size_t r = 0;
    for (; r + 4 <= n; r += 4) {
      const float* sw0 = row_scales(ch, r);
      const float* sw1 = row_scales(ch, r + 1);
      const float* sw2 = row_scales(ch, r + 2);
      const float* sw3 = row_scales(ch, r + 3);
      float f0 = 0.0f, f1 = 0.0f, f2 = 0.0f, f3 = 0.0f;
      const std::int8_t* w0 = w + r * ldw;
      const std::int8_t* w1 = w0 + ldw;
      const std::int8_t* w2 = w1 + ldw;
      const std::int8_t* w3 = w2 + ldw;
      const std::int8_t* xs = xq;
      for (std::size_t s = 0; s < segs; ++s) {
        std::int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (std::size_t c = 0; c < seg; ++c) {
          const std::int32_t xc = xs[c];
          a0 += xc * w0[c];
          a1 += xc * w1[c];
          a2 += xc * w2[c];
          a3 += xc * w3[c];
        }
        const float sxs = sx[s];
        f0 += static_cast<float>(a0) * sw0[s] * sxs;
        f1 += static_cast<float>(a1) * sw1[s] * sxs;
        f2 += static_cast<float>(a2) * sw2[s] * sxs;
        f3 += static_cast<float>(a3) * sw3[s] * sxs;
        xs += seg;
        w0 += seg;
        w1 += seg;
        w2 += seg;
        w3 += seg;
      }
      y[r] = (ch.first ? bias_of(ch.bias, r) : y[r]) + f0;
      y[r + 1] = (ch.first ? bias_of(ch.bias, r + 1) : y[r + 1]) + f1;
      y[r + 2] = (ch.first ? bias_of(ch.bias, r + 2) : y[r + 2]) + f2;
      y[r + 3] = (ch.first ? bias_of(ch.bias, r + 3) : y[r + 3]) + f3;
    }
    for (; r < n; ++r) {
      const float* sw0 = row_scales(ch, r);
      const std::int8_t* w0 = w + r * ldw;
      const std::int8_t* xs = xq;
      float f0 = 0.0f;
      for (std::size_t s = 0; s < segs; ++s) {
        std::int32_t a0 = 0;
        for (std::size_t c = 0; c < seg; ++c) a0 += static_cast<std::int32_t>(xs[c]) * w0[c];
        f0 += static_cast<float>(a0) * sw0[s] * sx[s];
        xs += seg;
        w0 += seg;
      }
      y[r] = (ch.first ? bias_of(ch.bias, r) : y[r]) + f0;
    }
  }
}

std::uint32_t linear_absmax_bits_scalar(const float* x, std::size_t n) noexcept {
  return q8_absmax_bits_from(x, 0, n, 0);
}

void linear_quantize_scalar(const float* x, std::size_t n, float s, std::int8_t* q) noexcept {
  for (std::size_t i = 0; i < n; ++i) q[i] = q8_round(x[i], s);
}

constexpr LinearKernels table{"scalar",
                              "linear_f32_gemm_scalar",  // the gemm is matmul's: matmul_kernel_name()
                              "linear_f16_1x4_scalar",
                              "linear_q8_1x4_scalar",
                              linear_f32_gemm,
                              linear_f16_1x4_scalar,
                              linear_q8_1x4_scalar,
                              1,
                              linear_absmax_bits_scalar,
                              linear_quantize_scalar};

}  // namespace

const LinearKernels& scalar_linear_kernels() noexcept { return table; }
#if !MICROATTN_LINEAR_X86 && !MICROATTN_LINEAR_NEON && !MICROATTN_LINEAR_ARMV7EM && !MICROATTN_LINEAR_HELIUM
const LinearKernels* vector_linear_kernels() noexcept { return nullptr; }
#endif

void linear_q8_float_row(const LinearArgs& a, std::size_t i) noexcept {
  const auto* w = static_cast<const std::int8_t*>(a.w);
  const float* x = a.x + i * a.ldx;
  float* y = a.y + i * a.ldy;
  const std::size_t k = a.k, group = a.group;
  for (std::size_t r = 0; r < a.n; ++r) {
    const std::size_t flat = r * k;
    const std::int8_t* wr = w + flat;
    float acc = 0.0f;
    for (std::size_t c = 0; c < k;) {
      // The row's columns in this group: up to the group's end, or the row's.
      const std::size_t g = (flat + c) / group;
      const std::size_t end = (g + 1) * group - flat < k ? (g + 1) * group - flat : k;
      const float s = a.scales[g];
      for (; c < end; ++c) acc = fmadd(s * static_cast<float>(wr[c]), x[c], acc);
    }
    y[r] = bias_of(a.bias, r) + acc;
  }
}

}  // namespace detail
}  // namespace microattn
