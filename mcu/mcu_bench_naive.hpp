// The yardsticks of mcu/mcu_bench.cpp: the plain loops a firmware would write without a library, compiled
// -O2 (mcu/meson.build) with newlib's expf. Also the reference its results are checked against.
#pragma once

#include <cstddef>

namespace mcu_bench {

// c (m×n) = a (m×k) · b (k×n), row-major, three loops.
void naive_matmul(const float* a, const float* b, float* c, std::size_t m, std::size_t k, std::size_t n);

// out = softmax(q·kᵀ/√d)·v for n queries and n keys of head size d (row-major n×d each); causal: query i
// sees keys j <= i. scores: n floats of scratch (one row).
void naive_attention(const float* q, const float* k, const float* v, float* out, float* scores, std::size_t n,
                     std::size_t d, bool causal);

// A llama2.c decoder (rms norm, rope on interleaved pairs with theta 10000, grouped-query attention, SwiGLU, shared
// classifier) written as its run.c reads: one token at position pos, its K/V appended to the caches.
struct NaiveLlama {
  std::size_t dim, layers, heads, kv_heads, hidden, vocab, seq;
  const float* emb;      // vocab × dim: the embedding and the classifier
  const float* weights;  // per layer, layer_floats apart: wq, wk, wv, wo, w1, w2, w3 (row-major, out × in)
  std::size_t layer_floats;
  const float* norms;  // per layer attention_norm, ffn_norm (dim each), then the final norm
  float* key_cache;    // layers × seq × kv_dim
  float* value_cache;
  float* scratch;  // 4·dim + 2·hidden + seq floats
};
void naive_llama_token(const NaiveLlama& m, std::size_t token, std::size_t pos, float* logits);

}  // namespace mcu_bench
