// f16: float → binary16 rounding, the public conversions and the K/V cache's row store.
#include "formats/f16.hpp"

#include <cstring>

namespace microattn {

std::uint16_t f16_from_float(float x) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t mag = bits & 0x7fffffffu;
  if (mag > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((mag >> 13) & 0x3ffu));  // NaN, quiet
  if (mag >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65536 (and inf): inf
  if (mag >= 0x38800000u) {                                                   // normal in binary16 (>= 2^−14)
    // Rebias, then round the 13 dropped bits to nearest even; a carry moves into the exponent, up to inf
    // (65520 and above), as IEEE's overflow rule says.
    const std::uint32_t h = (mag - 0x38000000u) >> 13;
    const std::uint32_t rest = mag & 0x1fffu;
    const std::uint32_t up = rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0) ? 1u : 0u;
    return static_cast<std::uint16_t>(sign | (h + up));
  }
  // Subnormal or zero in binary16: the value in units of 2^−24, rounded to nearest even.
  if (mag < 0x33000000u) return sign;  // below 2^−25: rounds to ±0 (2^−25 itself is a tie to even 0)
  const std::uint32_t exp = mag >> 23, mant = (mag & 0x7fffffu) | 0x800000u;
  const unsigned shift = 126u - exp;  // mant · 2^(exp − 150) / 2^−24 = mant >> (126 − exp), shift in [14, 24]
  const std::uint32_t h = mant >> shift, rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  const std::uint32_t up = rest > half || (rest == half && (h & 1u) != 0) ? 1u : 0u;
  return static_cast<std::uint16_t>(sign | (h + up));
}

float float_from_f16(std::uint16_t h) noexcept { return detail::f16_decode(h); }

namespace detail {

void f16_store_row(const float* x, std::size_t n, std::uint16_t* dst) noexcept {
  for (std::size_t i = 0; i < n; ++i) dst[i] = f16_from_float(x[i]);
}

}  // namespace detail
}  // namespace microattn
