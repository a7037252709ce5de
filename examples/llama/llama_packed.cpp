#include "llama_packed.hpp"

#include <cstdlib>
#include <cstring>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#if !defined(__clang__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() (`__Y = __Y`), which -Wmaybe-uninitialized flags.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define LLAMA_PACKED_X86 1
#else
#define LLAMA_PACKED_X86 0
#endif

namespace llama {

namespace {

constexpr std::size_t tile_rows = 16, block_cols = 4, block_floats = tile_rows * block_cols;

std::size_t blocks_of(std::size_t cols) { return (cols + block_cols - 1) / block_cols; }

void gemv_plain(const PackedMatrix& w, const float* x, float* y) noexcept {
  const std::size_t blocks = blocks_of(w.cols);
  for (std::size_t row = 0; row < w.rows; ++row) {
    const std::size_t t = row / tile_rows, i = row % tile_rows / 4, g = row % 4;
    const float* p = w.data + t * blocks * block_floats + g * tile_rows + i * block_cols;
    float sum = 0.0f;
    for (std::size_t c = 0; c < w.cols; ++c) sum += p[c / block_cols * block_floats + c % block_cols] * x[c];
    y[row] = sum;
  }
}

#if LLAMA_PACKED_X86
// One block: its 4 vectors times x's 4 columns (xc) in every quarter, into the 4 accumulators.
__attribute__((target("avx512f,fma"), always_inline)) inline void block_avx512(const float* p, const float* xc,
                                                                               __m512 (&a)[4]) noexcept {
  const __m512 xb = _mm512_broadcast_f32x4(_mm_loadu_ps(xc));
  for (int g = 0; g < 4; ++g) a[g] = _mm512_fmadd_ps(_mm512_load_ps(p + 16 * g), xb, a[g]);
}

__attribute__((target("avx512f,fma"))) void gemv_avx512(const PackedMatrix& w, const float* x, float* y) noexcept {
  const std::size_t full = w.cols / block_cols, blocks = blocks_of(w.cols);
  alignas(16) float x_tail[block_cols] = {};  // the last cols % 4 columns, zero-padded: nothing read past x
  std::memcpy(x_tail, x + full * block_cols, (w.cols - full * block_cols) * sizeof(float));
  const float* p = w.data;
  for (std::size_t r0 = 0; r0 < w.rows; r0 += tile_rows) {
    __m512 a[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
#pragma GCC unroll 4
    for (std::size_t b = 0; b < full; ++b, p += block_floats) block_avx512(p, x + b * block_cols, a);
    if (full < blocks) {
      block_avx512(p, x_tail, a);
      p += block_floats;
    }
    // Per 128-bit quarter i: the 4 column sums of groups 0 … 3, so lane 4i + g is row r0 + 4i + g.
    const __m512 t01 = _mm512_add_ps(_mm512_unpacklo_ps(a[0], a[1]), _mm512_unpackhi_ps(a[0], a[1]));
    const __m512 t23 = _mm512_add_ps(_mm512_unpacklo_ps(a[2], a[3]), _mm512_unpackhi_ps(a[2], a[3]));
    const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(t01, t23, _MM_SHUFFLE(1, 0, 1, 0)),
                                      _mm512_shuffle_ps(t01, t23, _MM_SHUFFLE(3, 2, 3, 2)));
    const std::size_t left = w.rows - r0;
    if (left >= tile_rows)
      _mm512_storeu_ps(y + r0, sums);
    else
      _mm512_mask_storeu_ps(y + r0, static_cast<__mmask16>((1u << left) - 1), sums);
  }
}
#endif

}  // namespace

std::size_t packed_floats(std::size_t rows, std::size_t cols) noexcept {
  return (rows + tile_rows - 1) / tile_rows * blocks_of(cols) * block_floats;
}

void pack_rows(const microattn::WeightMatrix* parts, std::size_t count, float* out) noexcept {
  const std::size_t cols = parts[0].cols, blocks = blocks_of(cols);
  std::size_t rows = 0;
  for (std::size_t k = 0; k < count; ++k) rows += parts[k].rows;
  std::memset(out, 0, packed_floats(rows, cols) * sizeof(float));
  std::size_t row = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const auto* src = static_cast<const float*>(parts[k].data);
    for (std::size_t r = 0; r < parts[k].rows; ++r, ++row) {
      const std::size_t t = row / tile_rows, i = row % tile_rows / 4, g = row % 4;
      float* dst = out + t * blocks * block_floats + g * tile_rows + i * block_cols;
      for (std::size_t c = 0; c < cols; ++c) dst[c / block_cols * block_floats + c % block_cols] = src[r * cols + c];
    }
  }
}

bool avx512_loops() noexcept {
#if LLAMA_PACKED_X86
  static const bool avx512 =
      (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") &&
                                 std::getenv("LLAMA_RUN_SCALAR") == nullptr);
  return avx512;
#else
  return false;
#endif
}

void packed_gemv(const PackedMatrix& w, const float* x, float* y) noexcept {
#if LLAMA_PACKED_X86
  if (avx512_loops()) {
    gemv_avx512(w, x, y);
    return;
  }
#endif
  gemv_plain(w, x, y);
}

}  // namespace llama
