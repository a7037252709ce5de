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

namespace {
void rms_norm(float* o, const float* x, const float* w, std::size_t n) {
  float ss = 0.0f;
  for (std::size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / static_cast<float>(n) + 1e-5f);
  for (std::size_t i = 0; i < n; ++i) o[i] = w[i] * (r * x[i]);
}
void mat_vec(float* o, const float* x, const float* w, std::size_t n, std::size_t d) {  // o (d) = w (d × n) · x
  for (std::size_t i = 0; i < d; ++i) {
    float acc = 0.0f;
    for (std::size_t j = 0; j < n; ++j) acc += w[i * n + j] * x[j];
    o[i] = acc;
  }
}
}  // namespace

void naive_llama_token(const NaiveLlama& m, std::size_t token, std::size_t pos, float* logits) {
  const std::size_t dim = m.dim, hd = dim / m.heads, kv_dim = hd * m.kv_heads, hidden = m.hidden;
  float* x = m.scratch;
  float* xb = x + dim;
  float* q = xb + dim;
  float* att_out = q + dim;
  float* hb = att_out + dim;
  float* hb2 = hb + hidden;
  float* att = hb2 + hidden;
  for (std::size_t i = 0; i < dim; ++i) x[i] = m.emb[token * dim + i];
  for (std::size_t l = 0; l < m.layers; ++l) {
    const float* wq = m.weights + l * m.layer_floats;
    const float* wk = wq + dim * dim;
    const float* wv = wk + kv_dim * dim;
    const float* wo = wv + kv_dim * dim;
    const float* w1 = wo + dim * dim;
    const float* w2 = w1 + hidden * dim;
    const float* w3 = w2 + dim * hidden;
    float* kc = m.key_cache + l * m.seq * kv_dim;
    float* vc = m.value_cache + l * m.seq * kv_dim;
    rms_norm(xb, x, m.norms + 2 * l * dim, dim);
    mat_vec(q, xb, wq, dim, dim);
    mat_vec(kc + pos * kv_dim, xb, wk, dim, kv_dim);
    mat_vec(vc + pos * kv_dim, xb, wv, dim, kv_dim);
    for (std::size_t i = 0; i < dim; i += 2) {  // rope: pairs (2i, 2i + 1) of each head
      const float freq = 1.0f / std::pow(10000.0f, static_cast<float>(i % hd) / static_cast<float>(hd));
      const float a = static_cast<float>(pos) * freq, c = std::cos(a), s = std::sin(a);
      float* vecs[2] = {q, kc + pos * kv_dim};
      for (std::size_t t = 0; t < (i < kv_dim ? 2u : 1u); ++t) {
        const float v0 = vecs[t][i], v1 = vecs[t][i + 1];
        vecs[t][i] = v0 * c - v1 * s;
        vecs[t][i + 1] = v0 * s + v1 * c;
      }
    }
    for (std::size_t h = 0; h < m.heads; ++h) {
      const std::size_t kvh = h / (m.heads / m.kv_heads);
      float mx = -INFINITY;
      for (std::size_t t = 0; t <= pos; ++t) {
        float s = 0.0f;
        for (std::size_t i = 0; i < hd; ++i) s += q[h * hd + i] * kc[t * kv_dim + kvh * hd + i];
        att[t] = s / std::sqrt(static_cast<float>(hd));
        mx = att[t] > mx ? att[t] : mx;
      }
      float sum = 0.0f;
      for (std::size_t t = 0; t <= pos; ++t) {
        att[t] = std::exp(att[t] - mx);
        sum += att[t];
      }
      for (std::size_t i = 0; i < hd; ++i) {
        float acc = 0.0f;
        for (std::size_t t = 0; t <= pos; ++t) acc += att[t] * vc[t * kv_dim + kvh * hd + i];
        att_out[h * hd + i] = acc / sum;
      }
    }
    mat_vec(xb, att_out, wo, dim, dim);
    for (std::size_t i = 0; i < dim; ++i) x[i] += xb[i];
    rms_norm(xb, x, m.norms + (2 * l + 1) * dim, dim);
    mat_vec(hb, xb, w1, dim, hidden);
    mat_vec(hb2, xb, w3, dim, hidden);
    for (std::size_t i = 0; i < hidden; ++i) hb[i] = hb[i] / (1.0f + std::exp(-hb[i])) * hb2[i];
    mat_vec(xb, hb, w2, hidden, dim);
    for (std::size_t i = 0; i < dim; ++i) x[i] += xb[i];
  }
  rms_norm(x, x, m.norms + 2 * m.layers * dim, dim);
  mat_vec(logits, x, m.emb, dim, m.vocab);
}

}  // namespace mcu_bench
