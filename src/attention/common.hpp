// What the attention paths share: which keys a query sees (visible_band), the finiteness scans and the float
// helpers. The files of src/attention/ are parts of attention.cpp, included there only (in its order).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "attention_run.hpp"
#include "check.hpp"
#include "kernels/scalar_math.hpp"

namespace microattn {
namespace detail {

KeyBand visible_band(const AttentionOptions& options) noexcept {
  // In an integer twice as wide as ptrdiff_t nothing overflows; then saturate.
#if PTRDIFF_MAX > 0x7fffffffL
  __extension__ typedef __int128 wide;
#else
  typedef long long wide;
#endif
  const wide off = options.causal_offset, w = static_cast<wide>(options.window), sat = visibility_saturation;
  const wide lo = w == 0 ? -sat : off - w + 1;
  const wide hi = options.causal ? off + 1 : (w == 0 ? sat : off + w);
  return {static_cast<std::ptrdiff_t>(lo < -sat ? -sat : (lo > sat ? sat : lo)),
          static_cast<std::ptrdiff_t>(hi < -sat ? -sat : (hi > sat ? sat : hi))};
}

namespace {

constexpr float log2e = 1.44269504088896341f;

inline std::size_t min_size(std::size_t a, std::size_t b) noexcept { return a < b ? a : b; }

// No NaN or ±inf among x[0..n): an all-ones exponent field marks both. Integer ORs, no dependency on a
// floating-point chain, so the compiler vectorizes it (the check runs over all of v on every call).
inline bool row_finite(const float* x, std::size_t n) noexcept {
  std::uint32_t nonfinite = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    nonfinite |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return nonfinite == 0;
}

// Whether some element of m has |x| >= the float whose bits are `threshold` (positive, normal), or is NaN or
// ±inf (their magnitude bits are larger still). (threshold − 1) − |x|bits, both in [0, 2^31), is negative exactly
// when |x| >= threshold: the differences are ORed and the sign tested once per row — no dependency chain
// through a maximum, so the compiler vectorizes it like row_finite, and four elements a step (GCC does not
// unroll at -Os) make it about 5 instructions an element on Cortex-M: the pass over v that every call makes.
bool any_magnitude_at_least(MatrixView<const float> m, std::uint32_t threshold) noexcept {
  std::size_t rows = m.rows, cols = m.cols;
  if (m.stride == cols) {  // contiguous rows: one run (shape_ok: rows·cols fits)
    cols *= rows;
    rows = 1;
  }
  const std::int32_t below = static_cast<std::int32_t>(threshold - 1);
  auto magnitude = [](const float* x) {
    std::uint32_t bits;
    std::memcpy(&bits, x, sizeof bits);
    return static_cast<std::int32_t>(bits & 0x7fffffffu);
  };
  for (std::size_t r = 0; r < rows; ++r) {
    const float* x = m.data + r * m.stride;
    const float* const end = x + cols;
    std::int32_t hit = 0;
    for (std::size_t n = cols / 4; n != 0; --n, x += 4)
      hit |=
          (below - magnitude(x)) | (below - magnitude(x + 1)) | (below - magnitude(x + 2)) | (below - magnitude(x + 3));
    for (; x != end; ++x) hit |= below - magnitude(x);
    if (hit < 0) return true;
  }
  return false;
}

bool all_finite(MatrixView<const float> m) noexcept { return !any_magnitude_at_least(m, 0x7f800000u); }

constexpr float float_max = 3.40282347e38f;

inline bool is_finite(float x) noexcept { return (float_bits(x) & 0x7f800000u) != 0x7f800000u; }

// 2^e for e in [−149, 127], exactly.
inline float pow2(int e) noexcept {
  return e >= -126 ? bits_float(static_cast<std::uint32_t>(e + 127) << 23)
                   : bits_float(std::uint32_t{1} << static_cast<unsigned>(e + 149));
}

}  // namespace

}  // namespace detail
}  // namespace microattn
