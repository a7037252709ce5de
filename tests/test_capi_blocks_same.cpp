// The blocks' C API and the C++ templates give the same bits: TransformerEncoderLayerSharedScratch and
// DecoderLayerSharedScratch (f32, f16 and q8 caches, forward then append) against microattn_encoder_layer_* /
// microattn_decoder_layer_* over the same weights and inputs. A plain program (no GoogleTest), on every target.
#include <cstdio>
#include <cstring>

#include "microattn/microattn.h"
#include "microattn/microattn.hpp"

namespace ma = microattn;

namespace {

int failures = 0;
void check(bool ok, const char* what) {
  if (!ok) {
    ++failures;
    std::printf("FAIL: %s\n", what);
  }
}

unsigned rng = 2463534242u;
float uniform(float lo, float hi) {
  rng ^= rng << 13;
  rng ^= rng >> 17;
  rng ^= rng << 5;
  return lo + (hi - lo) * static_cast<float>((rng >> 8) * (1.0 / 16777216.0));
}
template <std::size_t N>
void fill(float (&a)[N], float lo, float hi) {
  for (float& v : a) v = uniform(lo, hi);
}

constexpr std::size_t seq = 37, dim = 16, heads = 4, kv_heads = 2, ffn = 24, kvd = kv_heads * dim / heads;
float wq[dim * dim], wk[dim * dim], wv[dim * dim], wo[dim * dim], bq[dim], bk[dim], bv[dim], bo[dim];
float w1[ffn * dim], w2[dim * ffn], w3[ffn * dim], b1[ffn], b2[dim], n1w[dim], n1b[dim], n2w[dim], n2b[dim];
std::int8_t w1_q8[ffn * dim];
float w1_scales[ffn * dim / 8];
float x[seq * dim], y_cpp[seq * dim], y_c[seq * dim];
ma::LayerScratch<ma::decoder_layer_scratch_floats(seq, dim, heads, ffn, ma::Format::q8) +
                 ma::encoder_layer_scratch_floats(seq, dim, heads, ffn)>
    scratch_cpp;
float scratch_c[sizeof scratch_cpp.data / sizeof(float)];
float cache_c[ma::layer_cache_floats(seq, dim, heads, heads)];

microattn_weight_matrix c_matrix(const ma::WeightMatrix& m) {
  microattn_weight_matrix r;
  r.format = static_cast<microattn_format>(static_cast<int>(m.format));
  r.data = m.data;
  r.rows = m.rows;
  r.cols = m.cols;
  r.scales = m.scales;
  r.group = m.group;
  return r;
}

void encoder(bool norm_first, ma::Activation act, bool causal) {
  ma::EncoderLayerWeights w{};
  w.self_attn = {ma::weights_f32(wq, dim, dim),
                 ma::weights_f32(wk, dim, dim),
                 ma::weights_f32(wv, dim, dim),
                 bq,
                 bk,
                 bv,
                 ma::weights_f32(wo, dim, dim),
                 bo};
  w.linear1 = ma::weights_q8(w1_q8, w1_scales, ffn, dim, 8);
  w.linear1_bias = b1;
  w.linear2 = ma::weights_f32(w2, dim, ffn);
  w.linear2_bias = b2;
  w.norm1_weight = n1w, w.norm1_bias = n1b, w.norm2_weight = n2w, w.norm2_bias = n2b;
  ma::EncoderLayerConfig c;
  c.norm_first = norm_first;
  c.activation = act;
  static ma::TransformerEncoderLayerSharedScratch<seq, dim, heads, ffn> layer{w, scratch_cpp, c};
  layer = ma::TransformerEncoderLayerSharedScratch<seq, dim, heads, ffn>{w, scratch_cpp, c};
  ma::AttentionOptions o;
  o.causal = causal;
  check(layer.forward({x, seq, dim, dim}, {y_cpp, seq, dim, dim}, o) == ma::Status::ok, "C++ encoder");

  microattn_encoder_layer_weights cw{};
  cw.self_attn.q = c_matrix(w.self_attn.q), cw.self_attn.k = c_matrix(w.self_attn.k);
  cw.self_attn.v = c_matrix(w.self_attn.v), cw.self_attn.out = c_matrix(w.self_attn.out);
  cw.self_attn.q_bias = bq, cw.self_attn.k_bias = bk, cw.self_attn.v_bias = bv, cw.self_attn.out_bias = bo;
  cw.linear1 = c_matrix(w.linear1), cw.linear1_bias = b1, cw.linear2 = c_matrix(w.linear2), cw.linear2_bias = b2;
  cw.norm1_weight = n1w, cw.norm1_bias = n1b, cw.norm2_weight = n2w, cw.norm2_bias = n2b;
  const microattn_encoder_layer_config cc{norm_first ? 1 : 0, static_cast<microattn_activation>(act), 1e-5f};
  microattn_encoder_layer l;
  check(microattn_encoder_layer_init(&l, seq, dim, heads, ffn, &cw, &cc, cache_c, sizeof cache_c / sizeof(float),
                                     scratch_c, sizeof scratch_c / sizeof(float)) == MICROATTN_OK,
        "C encoder init");
  microattn_attention_options co{};
  co.causal = causal;
  check(microattn_encoder_layer_forward(&l, {x, seq, dim, dim}, {y_c, seq, dim, dim}, &co) == MICROATTN_OK,
        "C encoder");
  check(std::memcmp(y_cpp, y_c, sizeof y_c) == 0, "encoder: C and C++ bits differ");
}

template <ma::Format Cache>
void decoder(std::size_t prompt) {
  ma::DecoderLayerWeights w{};
  w.wq = ma::weights_f32(wq, dim, dim), w.wk = ma::weights_f32(wk, kvd, dim), w.wv = ma::weights_f32(wv, kvd, dim);
  w.wo = ma::weights_f32(wo, dim, dim), w.w1 = ma::weights_q8(w1_q8, w1_scales, ffn, dim, 8);
  w.w2 = ma::weights_f32(w2, dim, ffn), w.w3 = ma::weights_f32(w3, ffn, dim);
  w.attention_norm = n1w, w.ffn_norm = n2w;
  ma::DecoderLayerConfig c;
  c.attention.rope_theta = 10000.0f;
  c.attention.rope_interleaved = true;
  static ma::DecoderLayerSharedScratch<seq, dim, heads, kv_heads, ffn, Cache> layer{w, scratch_cpp, c};
  layer.reset();
  static float cache[(ma::layer_cache_bytes(seq, dim, heads, kv_heads, Cache) + 3) / 4];
  microattn_decoder_layer_weights cw{};
  cw.wq = c_matrix(w.wq), cw.wk = c_matrix(w.wk), cw.wv = c_matrix(w.wv), cw.wo = c_matrix(w.wo);
  cw.w1 = c_matrix(w.w1), cw.w2 = c_matrix(w.w2), cw.w3 = c_matrix(w.w3);
  cw.attention_norm = n1w, cw.ffn_norm = n2w;
  const microattn_decoder_layer_config cc{{10000.0f, 0, 1, 0}, 1e-5f};
  microattn_decoder_layer l;
  check(microattn_decoder_layer_init(&l, seq, dim, heads, kv_heads, ffn, &cw, &cc,
                                     static_cast<microattn_format>(static_cast<int>(Cache)), cache, sizeof cache,
                                     scratch_c, sizeof scratch_c / sizeof(float)) == MICROATTN_OK,
        "C decoder init");
  check(layer.forward({x, prompt, dim, dim}, {y_cpp, prompt, dim, dim}) == ma::Status::ok, "C++ decoder forward");
  check(microattn_decoder_layer_forward(&l, {x, prompt, dim, dim}, {y_c, prompt, dim, dim}, nullptr) == MICROATTN_OK,
        "C decoder forward");
  for (std::size_t t = prompt; t < seq; ++t) {
    check(layer.append({x + t * dim, 1, dim, dim}, {y_cpp + t * dim, 1, dim, dim}) == ma::Status::ok, "C++ append");
    check(microattn_decoder_layer_append(&l, {x + t * dim, 1, dim, dim}, {y_c + t * dim, 1, dim, dim}, nullptr) ==
              MICROATTN_OK,
          "C append");
  }
  check(
      layer.cached() == microattn_decoder_layer_cached(&l) && layer.position() == microattn_decoder_layer_position(&l),
      "decoder state");
  check(std::memcmp(y_cpp, y_c, sizeof y_c) == 0, "decoder: C and C++ bits differ");
}

}  // namespace

int main() {
  fill(wq, -0.3f, 0.3f), fill(wk, -0.3f, 0.3f), fill(wv, -0.3f, 0.3f), fill(wo, -0.3f, 0.3f);
  fill(w1, -0.3f, 0.3f), fill(w2, -0.3f, 0.3f), fill(w3, -0.3f, 0.3f);
  fill(bq, -0.5f, 0.5f), fill(bk, -0.5f, 0.5f), fill(bv, -0.5f, 0.5f), fill(bo, -0.5f, 0.5f);
  fill(b1, -0.5f, 0.5f), fill(b2, -0.5f, 0.5f), fill(n1b, -0.5f, 0.5f), fill(n2b, -0.5f, 0.5f);
  fill(n1w, 0.5f, 1.5f);
  fill(n2w, 0.5f, 1.5f);
  fill(w1_scales, 0.001f, 0.004f);
  for (std::int8_t& q : w1_q8) q = static_cast<std::int8_t>(static_cast<int>(uniform(-127.0f, 127.0f)));
  fill(x, -1.0f, 1.0f);
  encoder(false, ma::Activation::gelu, false);
  encoder(true, ma::Activation::silu, true);
  encoder(true, ma::Activation::relu, false);
  decoder<ma::Format::f32>(5);
  decoder<ma::Format::f16>(seq - 2);
  decoder<ma::Format::q8>(1);
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
