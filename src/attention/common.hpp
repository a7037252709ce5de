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

// ---- the rules of the fused loops, the same on the tile and the few-query path ----------------------------------
// Forced inline: each compiles at its uses as when both paths spelled it out (at -Os GCC would call
// attention_scale, which three places use).

// The workspace from its first 64-byte boundary (attention_workspace_floats reserves 16 floats for this), so that
// the kernels' vectors of it are aligned. The tile path carves it by lanes, the few-query path by rows.
MICROATTN_SCALAR_INLINE float* aligned_workspace(float* workspace) noexcept {
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(workspace);
  return workspace + ((64 - addr % 64) % 64) / sizeof(float);
}

// The scale of the scores: options.scale, or 1/sqrt(d_k) when that is 0 (either sign).
MICROATTN_SCALAR_INLINE float attention_scale(const AttentionOptions& options, std::size_t d_k) noexcept {
  return options.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(d_k)) : options.scale;
}

// What q is multiplied by: scores then come out in log2 units, and the softmax's exp is a bare 2^x.
MICROATTN_SCALAR_INLINE float fused_q_factor(float scale) noexcept { return scale * log2e; }

// A factor that is not a normal float (subnormal: rounded to a few bits; or overflowing, or not a number at all)
// would make the fused loop wrong: then every row takes the exact path.
MICROATTN_SCALAR_INLINE bool fused_q_factor_ok(float q_factor) noexcept {
  return std::fabs(q_factor) >= pow2(-126) && std::fabs(q_factor) <= float_max;
}

// A score (log2 units) with its mask entry added. −inf hides the key outright (assigned, not added: a NaN score of
// a hidden key must not show). A −inf sum from a finite entry (mask·log2 e or the sum overflowed, or the score was
// −inf) becomes NaN, which sends the row to the exact path instead of silently hiding the key.
MICROATTN_SCALAR_INLINE float masked_score(float score, float mask) noexcept {
  const float t = score + mask * log2e;
  return t > -INFINITY ? t : (mask == -INFINITY ? -INFINITY : (t == t ? NAN : t));
}

}  // namespace

}  // namespace detail
}  // namespace microattn
