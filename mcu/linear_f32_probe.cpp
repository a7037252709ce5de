// For scripts/footprint.py: a firmware that calls linear() with f32 weights only. The format is known where
// linear() is called, so the firmware must link none of the f16 and q8 kernels (footprint.py checks its symbols).
#include <cstdio>

#include "microattn/microattn.hpp"

namespace ma = microattn;

namespace {
constexpr std::size_t rows = 8, cols = 16;
float w[rows * cols], bias[rows], x[2 * cols], y[2 * rows];
}  // namespace

int main() {
  for (std::size_t i = 0; i < rows * cols; ++i) w[i] = 0.01f * static_cast<float>(i % 9);
  for (std::size_t i = 0; i < 2 * cols; ++i) x[i] = 0.5f - 0.1f * static_cast<float>(i % 7);
  const ma::Status st = ma::linear(ma::make_view<const float>(x, 2, cols), ma::weights_f32(w, rows, cols), bias,
                                   ma::make_view(y, 2, rows));
  std::printf("linear f32: status %d, y[0] %g\n", static_cast<int>(st), static_cast<double>(y[0]));
  return st == ma::Status::ok ? 0 : 1;
}
