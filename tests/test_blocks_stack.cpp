// The blocks' entry points on a thread with a 64 KiB painted stack: each uses at most entry_point_stack_bytes
// (measured as test_small_stack.cpp measures the others: the deepest byte changed, less an empty thread's).
// Linux targets only (pthreads); Cortex-M: scripts/footprint.py.
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "microattn/microattn.hpp"
#include "stack_probe.hpp"

namespace ma = microattn;

namespace {

using namespace stack_probe;  // NOLINT: the probe is these tests' own vocabulary

std::vector<float> filled(std::size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f);
  return v;
}
constexpr std::size_t S = 64, D = 128, H = 4, KV = 2, F = 344;
std::vector<float> x = filled(S * D), y(S * D), wd = filled(F * D, 0.1f), ones(F * D / 32, 0.01f), vec = filled(D);
std::vector<std::int8_t> wq(F * D, 3);

ma::WeightMatrix q8(std::size_t rows, std::size_t cols) { return ma::weights_q8(wq.data(), ones.data(), rows, cols, 32); }
ma::MatrixView<const float> xin(std::size_t rows) { return {x.data(), rows, D, D}; }
ma::MatrixView<float> yout(std::size_t rows) { return {y.data(), rows, D, D}; }

ma::DecoderLayerWeights decoder_weights() {
  ma::DecoderLayerWeights w{};
  w.wq = w.wo = q8(D, D);
  w.wk = w.wv = q8(KV * D / H, D);
  w.w1 = w.w3 = q8(F, D);
  w.w2 = q8(D, F);
  w.attention_norm = w.ffn_norm = vec.data();
  return w;
}
ma::EncoderLayerWeights encoder_weights() {
  ma::EncoderLayerWeights w{};
  w.self_attn = {q8(D, D), q8(D, D), q8(D, D), vec.data(), vec.data(), vec.data(), q8(D, D), vec.data()};
  w.linear1 = q8(F, D);
  w.linear1_bias = wd.data();
  w.linear2 = q8(D, F);
  w.linear2_bias = vec.data();
  return w;
}
std::unique_ptr<ma::DecoderLayer<S, D, H, KV, F>> decoder;
std::unique_ptr<ma::TransformerEncoderLayer<S, D, H, F>> encoder;

struct Case {
  const char* name;
  Job job;
};
const Case cases[] = {
    {"layer_norm_rows", [] { job_status = ma::layer_norm_rows(xin(S), vec.data(), vec.data(), 1e-5f, yout(S)); }},
    {"rms_norm_rows", [] { job_status = ma::rms_norm_rows(xin(S), vec.data(), 1e-5f, yout(S)); }},
    {"activate_rows gelu", [] { job_status = ma::activate_rows(yout(S), ma::Activation::gelu); }},
    {"TransformerEncoderLayer::forward q8", [] { job_status = encoder->forward(xin(S), yout(S)); }},
    {"DecoderLayer::forward q8", [] { job_status = decoder->forward(xin(S - 1), yout(S - 1)); }},
    {"DecoderLayer::append q8", [] { job_status = decoder->append(xin(1), yout(1)); }},
};

TEST(BlocksSmallStack, EveryEntryPoint) {
  ma::DecoderLayerConfig dc;
  dc.attention.rope_theta = 10000.0f;
  decoder = std::make_unique<ma::DecoderLayer<S, D, H, KV, F>>(decoder_weights(), dc);
  ma::EncoderLayerConfig ec;
  ec.activation = ma::Activation::gelu;
  encoder = std::make_unique<ma::TransformerEncoderLayer<S, D, H, F>>(encoder_weights(), ec);
  for (const Case& c : cases) {
    job_status = ma::Status::invalid_shape;
    const std::size_t used = stack_use(c.job);
    EXPECT_EQ(job_status, ma::Status::ok) << c.name;
    std::printf("%-40s %6zu bytes of stack\n", c.name, used);
    if (!sanitized) {
      EXPECT_LE(used, ma::entry_point_stack_bytes) << c.name;
    }
  }
}

}  // namespace
