// The llama2.c forward pass for one token: embedding, the decoder layers, final rms norm, classifier. Every
// projection and the classifier go through microattn::linear (any weight format); the rest of a decoder layer is
// decoder_layer_forward_reference below, to be replaced by the library's DecoderLayer.
#pragma once

#include <cstddef>
#include <vector>

#include "llama_model.hpp"

namespace llama {

// Activations and the K/V cache of one sequence of at most `capacity` tokens.
struct RunState {
  std::size_t capacity = 0;
  std::vector<float> x, xb, xb2, hb, hb2, q, k, v, att, logits;
  std::vector<float> key_cache, value_cache;  // layer × kv head × capacity × head_dim
  std::vector<float> rope_cos, rope_sin;      // head_dim / 2 angles of the current position
};

// Sizes the buffers for `capacity` positions (1 <= capacity <= seq_len). False if memory runs out.
bool init_state(const Model& m, std::size_t capacity, RunState& s);

// One decoder layer at position pos over x (dim floats, updated in place), with its K/V cache (kv head ×
// capacity × head_dim each): x += wo·attention(rope(wq·n), rope(wk·n), wv·n), n = rms_norm(x); then
// x += w2·(silu(w1·n) ⊙ w3·n), n = rms_norm(x). Temporary: the library's DecoderLayer takes its place.
void decoder_layer_forward_reference(const Config& p, const LayerWeights& w, std::size_t pos, float* key_cache,
                                     float* value_cache, RunState& s);

// Logits (vocab_size floats, in s.logits) for `token` at position `pos` < s.capacity.
const float* forward(const Model& m, RunState& s, int token, std::size_t pos);

// run.c's rms norm: o = weight · (x / sqrt(mean(x²) + 1e-5)); o may be x.
void rms_norm(float* o, const float* x, const float* weight, std::size_t n) noexcept;

}  // namespace llama
