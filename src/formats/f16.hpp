// IEEE binary16, the f16 storage format of weights and of the K/V cache: the conversions every table shares.
#pragma once

#include <cstddef>
#include <cstdint>

#include "microattn/weights.hpp"  // f16_from_float, float_from_f16

namespace microattn {
namespace detail {

// binary16 → float, exact for every bit pattern (float_from_f16 inline: the vector kernels' tails convert one
// element at a time, and at -Os GCC would call it per element).
inline __attribute__((always_inline)) float f16_decode(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t mag = h & 0x7fffu;
  std::uint32_t bits;
  if (mag >= 0x0400u && mag < 0x7c00u) {
    bits = (mag << 13) + 0x38000000u;  // normal: rebias the exponent by 127 − 15
  } else if (mag >= 0x7c00u) {
    bits = (mag << 13) | 0x7f800000u;  // inf, NaN (its payload shifted along, so it stays a NaN)
  } else {
    const float f = static_cast<float>(mag) * 0x1p-24f;  // zero, subnormal: mag·2⁻²⁴, exact in float
    __builtin_memcpy(&bits, &f, sizeof bits);
  }
  bits |= sign;
  float r;
  __builtin_memcpy(&r, &bits, sizeof r);
  return r;
}

// n floats stored as binary16 (f16_from_float each).
void f16_store_row(const float* x, std::size_t n, std::uint16_t* dst) noexcept;

}  // namespace detail
}  // namespace microattn
