#include "llama_forward.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <microattn/matmul.hpp>
#include <microattn/softmax.hpp>
#include <microattn/weights.hpp>

namespace llama {

namespace ma = microattn;

namespace {

// The shapes are the loader's, so an error from the library is a bug here: report and stop.
void check(ma::Status st, const char* what) {
  if (st != ma::Status::ok) {
    std::fprintf(stderr, "llama_run: %s failed: %s\n", what, ma::to_string(st));
    std::abort();
  }
}

// y (rows floats) = w·x (cols floats).
void project(const ma::WeightMatrix& w, const float* x, float* y) {
  check(ma::linear(ma::make_view(x, 1, w.cols), w, nullptr, ma::make_view(y, 1, w.rows)), "linear");
}

// As llama2.c: pairs (2i, 2i+1) of every head turn by pos · 10000^(-2i / head_dim).
void set_rope(const Config& p, std::size_t pos, RunState& s) {
  const int hd = p.head_dim();
  for (int i = 0; i < hd; i += 2) {
    const float freq = 1.0f / std::pow(10000.0f, static_cast<float>(i) / static_cast<float>(hd));
    const float angle = static_cast<float>(pos) * freq;
    s.rope_cos[static_cast<std::size_t>(i / 2)] = std::cos(angle);
    s.rope_sin[static_cast<std::size_t>(i / 2)] = std::sin(angle);
  }
}

void rotate(float* v, std::size_t n, std::size_t head_dim, const RunState& s) {
  for (std::size_t i = 0; i < n; i += 2) {
    const std::size_t k = (i % head_dim) / 2;
    const float c = s.rope_cos[k], sn = s.rope_sin[k], v0 = v[i], v1 = v[i + 1];
    v[i] = v0 * c - v1 * sn;
    v[i + 1] = v0 * sn + v1 * c;
  }
}

}  // namespace

void rms_norm(float* o, const float* x, const float* weight, std::size_t n) noexcept {
  float ss = 0.0f;
  for (std::size_t j = 0; j < n; ++j) ss += x[j] * x[j];
  ss /= static_cast<float>(n);
  ss += 1e-5f;
  ss = 1.0f / std::sqrt(ss);
  for (std::size_t j = 0; j < n; ++j) o[j] = weight[j] * (ss * x[j]);
}

bool init_state(const Model& m, std::size_t capacity, RunState& s) {
  const Config& p = m.config;
  const std::size_t dim = static_cast<std::size_t>(p.dim), hidden = static_cast<std::size_t>(p.hidden_dim),
                    kv = static_cast<std::size_t>(p.kv_dim()), layers = static_cast<std::size_t>(p.n_layers);
  if (capacity == 0 || capacity > static_cast<std::size_t>(p.seq_len)) return false;
  std::size_t cache = 0;
  if (__builtin_mul_overflow(layers, capacity, &cache) || __builtin_mul_overflow(cache, kv, &cache)) return false;
  try {
    s.capacity = capacity;
    s.x.assign(dim, 0.0f);
    s.xb.assign(dim, 0.0f);
    s.xb2.assign(dim, 0.0f);
    s.hb.assign(hidden, 0.0f);
    s.hb2.assign(hidden, 0.0f);
    s.q.assign(dim, 0.0f);
    s.k.assign(kv, 0.0f);
    s.v.assign(kv, 0.0f);
    s.att.assign(static_cast<std::size_t>(p.n_heads / p.n_kv_heads) * capacity, 0.0f);
    s.logits.assign(static_cast<std::size_t>(p.vocab_size), 0.0f);
    s.key_cache.assign(cache, 0.0f);
    s.value_cache.assign(cache, 0.0f);
    s.rope_cos.assign(static_cast<std::size_t>(p.head_dim() / 2), 0.0f);
    s.rope_sin.assign(static_cast<std::size_t>(p.head_dim() / 2), 0.0f);
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

void decoder_layer_forward_reference(const Config& p, const LayerWeights& w, std::size_t pos, float* key_cache,
                                     float* value_cache, RunState& s) {
  const std::size_t dim = static_cast<std::size_t>(p.dim), hd = static_cast<std::size_t>(p.head_dim()),
                    kv_heads = static_cast<std::size_t>(p.n_kv_heads), hidden = static_cast<std::size_t>(p.hidden_dim),
                    group = static_cast<std::size_t>(p.n_heads / p.n_kv_heads), cap = s.capacity, n = pos + 1;
  float* x = s.x.data();

  rms_norm(s.xb.data(), x, w.attention_norm, dim);
  project(w.wq, s.xb.data(), s.q.data());
  project(w.wk, s.xb.data(), s.k.data());
  project(w.wv, s.xb.data(), s.v.data());
  rotate(s.q.data(), dim, hd, s);
  rotate(s.k.data(), hd * kv_heads, hd, s);

  // The cache is head-major (kv head × position × head_dim), so each KV head's keys and values are dense matrices
  // and the `group` query heads that share them are one matrix product each.
  for (std::size_t g = 0; g < kv_heads; ++g) {
    float* kc = key_cache + g * cap * hd;
    float* vc = value_cache + g * cap * hd;
    std::memcpy(kc + pos * hd, s.k.data() + g * hd, hd * sizeof(float));
    std::memcpy(vc + pos * hd, s.v.data() + g * hd, hd * sizeof(float));
    const ma::MatrixView<float> scores{s.att.data(), group, n, n};
    check(ma::matmul(ma::MatrixView<const float>{s.q.data() + g * group * hd, group, hd, hd},
                     ma::MatrixView<const float>{kc, n, hd, hd}, scores, /*transpose_b=*/true),
          "scores");
    const float scale = std::sqrt(static_cast<float>(hd));
    for (std::size_t i = 0; i < group * n; ++i) s.att[i] /= scale;
    check(ma::softmax_rows(scores), "softmax");
    check(ma::matmul(scores, ma::MatrixView<const float>{vc, n, hd, hd},
                     ma::MatrixView<float>{s.xb.data() + g * group * hd, group, hd, hd}),
          "weighted values");
  }
  project(w.wo, s.xb.data(), s.xb2.data());
  for (std::size_t i = 0; i < dim; ++i) x[i] += s.xb2[i];

  rms_norm(s.xb.data(), x, w.ffn_norm, dim);
  project(w.w1, s.xb.data(), s.hb.data());
  project(w.w3, s.xb.data(), s.hb2.data());
  for (std::size_t i = 0; i < hidden; ++i) {
    const float g = s.hb[i];
    s.hb[i] = g * (1.0f / (1.0f + std::exp(-g))) * s.hb2[i];
  }
  project(w.w2, s.hb.data(), s.xb.data());
  for (std::size_t i = 0; i < dim; ++i) x[i] += s.xb[i];
}

const float* forward(const Model& m, RunState& s, int token, std::size_t pos) {
  const Config& p = m.config;
  const std::size_t per_layer = s.capacity * static_cast<std::size_t>(p.kv_dim());
  m.embedding_row(token, s.x.data());
  set_rope(p, pos, s);
  for (std::size_t l = 0; l < m.layers.size(); ++l)
    decoder_layer_forward_reference(p, m.layers[l], pos, s.key_cache.data() + l * per_layer,
                                    s.value_cache.data() + l * per_layer, s);
  rms_norm(s.x.data(), s.x.data(), m.final_norm, static_cast<std::size_t>(p.dim));
  project(m.classifier, s.x.data(), s.logits.data());
  return s.logits.data();
}

}  // namespace llama
