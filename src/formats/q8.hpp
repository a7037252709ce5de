// int8 with float scales, the q8 storage format of weights and of the K/V cache, and of linear()'s quantized
// activations: magnitudes, rounding and the edge rules every table shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace microattn {
namespace detail {

constexpr std::uint32_t q8_inf_bits = 0x7f800000u;

// m with |v| folded in, as the bits of a float with the sign cleared: NaN and ±inf compare above every finite
// value as integers (>= q8_inf_bits), so they are told apart without a float max that drops NaNs.
inline std::uint32_t q8_absmax_bits_fold(std::uint32_t m, float v) noexcept {
  std::uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  b &= 0x7fffffffu;
  return b > m ? b : m;
}
// The largest |x_i| over i in [i, n) folded into m (q8_absmax_bits_fold): the vector tables finish with it.
inline std::uint32_t q8_absmax_bits_from(const float* x, std::size_t i, std::size_t n, std::uint32_t m) noexcept {
  for (; i < n; ++i) m = q8_absmax_bits_fold(m, x[i]);
  return m;
}

// round(x / s) with |x / s| <= 127.5, without libm (Cortex-M would link roundf or rintf): half away from zero
// (runq.c's activations, the K/V cache) or, with TiesToEven, to even (llama2.c's export.py, torch.round: weights).
template <bool TiesToEven = false>
inline __attribute__((always_inline)) std::int8_t q8_round(float x, float s) noexcept {
  const float t = x / s;
  int i = static_cast<int>(t);                   // toward zero
  const float frac = t - static_cast<float>(i);  // exact
  if (TiesToEven) {
    if (frac > 0.5f || (frac == 0.5f && (i & 1) != 0)) ++i;
    if (frac < -0.5f || (frac == -0.5f && (i & 1) != 0)) --i;
  } else {
    if (frac >= 0.5f) ++i;
    if (frac <= -0.5f) --i;
  }
  return static_cast<std::int8_t>(i);
}

// n floats at(0) … at(n − 1) as int8 with one scale, the rules of every stored q8 group: s = max|x| / 127 (a float
// division), q = round(x / s) clamped to ±127 (a subnormal s carries few bits, so x / s may pass 127.5); all zeros, or
// a max so small that s is 0: s = 0 and q = 0; any NaN or ±inf: s = NaN and q = 0 (the group reads back NaN).
template <bool TiesToEven, class At>
inline void q8_store_group(At at, std::size_t n, std::int8_t* dst, float* scale) noexcept {
  std::uint32_t top = 0;
  for (std::size_t i = 0; i < n; ++i) top = q8_absmax_bits_fold(top, at(i));
  float absmax;
  std::memcpy(&absmax, &top, sizeof absmax);
  const float s = top >= q8_inf_bits ? __builtin_nanf("") : absmax / 127.0f;
  *scale = s;
  if (top >= q8_inf_bits || s == 0.0f) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = 0;
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const float t = at(i) / s;
    const float c = t > 127.0f ? 127.0f : (t < -127.0f ? -127.0f : t);
    dst[i] = q8_round<TiesToEven>(c, 1.0f);
  }
}

// A K/V cache row: q8_store_group with runq.c's rounding.
void q8_store_row(const float* x, std::size_t n, std::int8_t* dst, float* scale) noexcept;

}  // namespace detail
}  // namespace microattn
