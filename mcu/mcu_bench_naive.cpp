// The plain three-loop attention and matmul (see mcu_bench_naive.hpp), written as a firmware engineer would.
#include "mcu_bench_naive.hpp"

#include <cmath>

namespace mcu_bench {

void naive_matmul(const float* a, const float* b, float* c, std::size_t m, std::size_t k, std::size_t n) {
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::size_t p = 0; p < k; ++p) acc += a[i * k + p] * b[p * n + j];
      c[i * n + j] = acc;
    }
}

void naive_attention(const float* q, const float* k, const float* v, float* out, float* scores, std::size_t n,
                     std::size_t d, bool causal) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t visible = causal ? i + 1 : n;
    float m = -INFINITY;
    for (std::size_t j = 0; j < visible; ++j) {
      float s = 0.0f;
      for (std::size_t p = 0; p < d; ++p) s += q[i * d + p] * k[j * d + p];
      scores[j] = s * scale;
      m = scores[j] > m ? scores[j] : m;
    }
    float sum = 0.0f;
    for (std::size_t j = 0; j < visible; ++j) {
      scores[j] = std::exp(scores[j] - m);
      sum += scores[j];
    }
    for (std::size_t c = 0; c < d; ++c) {
      float acc = 0.0f;
      for (std::size_t j = 0; j < visible; ++j) acc += scores[j] * v[j * d + c];
      out[i * d + c] = acc / sum;
    }
  }
}

}  // namespace mcu_bench
