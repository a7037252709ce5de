// For scripts/footprint.py: a firmware that runs an encoder and a decoder block with f32 weights only. The blocks
// pick their weight readers from the formats when they are constructed, and these weights are constants: the
// firmware must link none of the f16 and q8 kernels (footprint.py checks its symbols).
#include <cstdio>
#include <initializer_list>

#include "microattn/microattn.hpp"

namespace ma = microattn;

namespace {
constexpr std::size_t seq = 4, dim = 16, heads = 2, kv_heads = 1, hidden = 32, kv_dim = dim / heads * kv_heads;
float wq[dim * dim], wk[kv_dim * dim], wv[kv_dim * dim], wo[dim * dim], w1[hidden * dim], w2[dim * hidden],
    w3[hidden * dim], norm[dim], x[seq * dim], y[seq * dim];

const ma::DecoderLayerWeights decoder_weights{ma::weights_f32(wq, dim, dim),
                                              ma::weights_f32(wk, kv_dim, dim),
                                              ma::weights_f32(wv, kv_dim, dim),
                                              ma::weights_f32(wo, dim, dim),
                                              ma::weights_f32(w1, hidden, dim),
                                              ma::weights_f32(w2, dim, hidden),
                                              ma::weights_f32(w3, hidden, dim),
                                              norm,
                                              norm};
const ma::EncoderLayerWeights encoder_weights{
    {ma::weights_f32(wq, dim, dim), ma::weights_f32(wq, dim, dim), ma::weights_f32(wq, dim, dim), nullptr, nullptr,
     nullptr, ma::weights_f32(wo, dim, dim), nullptr},
    ma::weights_f32(w1, hidden, dim),
    nullptr,
    ma::weights_f32(w2, dim, hidden),
    nullptr,
    norm,
    nullptr,
    norm,
    nullptr};

ma::DecoderLayer<seq, dim, heads, kv_heads, hidden> decoder{decoder_weights};
ma::TransformerEncoderLayer<seq, dim, heads, hidden> encoder{encoder_weights};

void fill(float* p, std::size_t n, float step) {
  for (std::size_t i = 0; i < n; ++i) p[i] = step * static_cast<float>(static_cast<int>(i % 9) - 4);
}
}  // namespace

int main() {
  for (float* p : {wq, wo}) fill(p, dim * dim, 0.02f);
  for (float* p : {wk, wv}) fill(p, kv_dim * dim, 0.03f);
  for (float* p : {w1, w3}) fill(p, hidden * dim, 0.01f);
  fill(w2, dim * hidden, 0.015f);
  fill(x, seq * dim, 0.1f);
  for (float& v : norm) v = 1.0f;
  const ma::Status d = decoder.forward(ma::make_view<const float>(x, seq, dim), ma::make_view(y, seq, dim));
  const ma::Status e = encoder.forward(ma::make_view<const float>(y, seq, dim), ma::make_view(y, seq, dim));
  std::printf("blocks f32: status %d %d, y[0] %g\n", static_cast<int>(d), static_cast<int>(e),
              static_cast<double>(y[0]));
  return d == ma::Status::ok && e == ma::Status::ok ? 0 : 1;
}
