// Google Benchmark: decoding. Per-token time of MultiHeadAttention::append (one row) at a given cache length,
// split into its two parts — the projections (four 1-row products through nn.Linear weights: flat, O(d²)) and
// the attention of one query per head over the cache (O(t·d), growing with the cache) — and the cost of a
// sliding window in attention() (a causal window W costs O(n·W), not O(n²)).
// Run pinned to one core: taskset -c 0 build/bench/bench_decode
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <microattn/microattn.hpp>

#include "bench_common.hpp"
#include "peak.hpp"

namespace ma = microattn;

namespace {

using bench::random_vector;
using bench::set_flop_counters;

constexpr std::size_t max_seq = 1024 + 64, d = 256, heads = 8, kv_heads = 2, hd = d / heads, kv_dim = kv_heads * hd;
using DecodeLayer = ma::MultiHeadAttention<max_seq, d, heads, kv_heads>;

struct DecodeWeights {
  std::vector<float> wq = random_vector(d * d, 4, -0.1f, 0.1f), wk = random_vector(kv_dim * d, 5, -0.1f, 0.1f),
                     wv = random_vector(kv_dim * d, 6, -0.1f, 0.1f), wo = random_vector(d * d, 7, -0.1f, 0.1f),
                     bq = random_vector(d, 8), bk = random_vector(kv_dim, 9), bv = random_vector(kv_dim, 10),
                     bo = random_vector(d, 11);
  ma::LayerWeights view() const {
    return {wq.data(), wk.data(), wv.data(), bq.data(), bk.data(), bv.data(), wo.data(), bo.data()};
  }
};

// args: cache length t, rope (0/1). One iteration = append one token; every 32 tokens the cache is refilled to t
// by a forward (outside the timing), so the cache holds t … t + 31 rows.
void BM_decode_append(benchmark::State& state) {
  const auto t = static_cast<std::size_t>(state.range(0));
  static const DecodeWeights w;
  ma::LayerConfig cfg;
  if (state.range(1) != 0) cfg.rope_theta = 10000.0f;
  auto layer = std::make_unique<DecodeLayer>(w.view(), cfg);
  const auto prompt = random_vector(t * d, 12);
  auto token = random_vector(d, 13);
  std::vector<float> y(t * d);
  ma::AttentionOptions causal;
  causal.causal = true;
  const auto refill = [&] {
    return layer->forward(ma::make_view(prompt.data(), t, d), ma::make_view(y.data(), t, d), causal);
  };
  if (refill() != ma::Status::ok) state.SkipWithError("forward failed");
  for (auto _ : state) {
    if (layer->position() == t + 32) {
      state.PauseTiming();
      refill();
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(
        layer->append(ma::make_view<const float>(token.data(), 1, d), ma::make_view(token.data(), 1, d)));
    benchmark::ClobberMemory();
  }
  const double tt = static_cast<double>(t) + 16.0, dd = static_cast<double>(d);
  set_flop_counters(state, 2.0 * dd * (2.0 * dd + 2.0 * static_cast<double>(kv_dim)) + 4.0 * tt * dd);
  state.counters["layer_ram_bytes"] = static_cast<double>(DecodeLayer::ram_bytes);
}
BENCHMARK(BM_decode_append)->ArgsProduct({{64, 256, 1024}, {0, 1}});

// Weights and K/V cache formats: args weights (0 f32, 1 q8 with one scale per row), cache (0 f32, 1 f16, 2 q8);
// cache length 1024 (+0…31), as BM_decode_append. The ratios of one run are the speed-ups.
struct Q8Weights {
  std::vector<std::int8_t> q[4];
  std::vector<float> s[4];
  explicit Q8Weights(const DecodeWeights& w) {
    const std::vector<float>* m[4] = {&w.wq, &w.wk, &w.wv, &w.wo};
    const std::size_t rows[4] = {d, kv_dim, kv_dim, d};
    for (int i = 0; i < 4; ++i) {
      q[i].resize(rows[i] * d);
      s[i].resize(rows[i]);
      for (std::size_t r = 0; r < rows[i]; ++r) {
        float top = 0.0f;
        for (std::size_t c = 0; c < d; ++c) top = std::max(top, std::fabs((*m[i])[r * d + c]));
        s[i][r] = top / 127.0f;
        for (std::size_t c = 0; c < d; ++c)
          q[i][r * d + c] = static_cast<std::int8_t>(std::lround((*m[i])[r * d + c] / s[i][r]));
      }
    }
  }
  ma::LayerWeightMatrices view(const DecodeWeights& w) const {
    return {ma::weights_q8(q[0].data(), s[0].data(), d, d, d),
            ma::weights_q8(q[1].data(), s[1].data(), kv_dim, d, d),
            ma::weights_q8(q[2].data(), s[2].data(), kv_dim, d, d),
            w.bq.data(),
            w.bk.data(),
            w.bv.data(),
            ma::weights_q8(q[3].data(), s[3].data(), d, d, d),
            w.bo.data()};
  }
};

template <ma::Format Cache>
void decode_formats(benchmark::State& state, bool q8_weights) {
  using Layer = ma::MultiHeadAttention<max_seq, d, heads, kv_heads, true, Cache>;
  constexpr std::size_t t = 1024;
  static const DecodeWeights w;
  static const Q8Weights wq8(w);
  auto layer = q8_weights ? std::make_unique<Layer>(wq8.view(w)) : std::make_unique<Layer>(w.view());
  const auto prompt = random_vector(t * d, 12);
  auto token = random_vector(d, 13);
  std::vector<float> y(t * d);
  ma::AttentionOptions causal;
  causal.causal = true;
  const auto refill = [&] {
    return layer->forward(ma::make_view(prompt.data(), t, d), ma::make_view(y.data(), t, d), causal);
  };
  if (refill() != ma::Status::ok) state.SkipWithError("forward failed");
  for (auto _ : state) {
    if (layer->position() == t + 32) {
      state.PauseTiming();
      refill();
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(
        layer->append(ma::make_view<const float>(token.data(), 1, d), ma::make_view(token.data(), 1, d)));
    benchmark::ClobberMemory();
  }
  state.counters["layer_ram_bytes"] = static_cast<double>(Layer::ram_bytes);
}
void BM_decode_formats(benchmark::State& state) {
  const bool q8_weights = state.range(0) != 0;
  switch (state.range(1)) {
    case 0:
      decode_formats<ma::Format::f32>(state, q8_weights);
      break;
    case 1:
      decode_formats<ma::Format::f16>(state, q8_weights);
      break;
    default:
      decode_formats<ma::Format::q8>(state, q8_weights);
      break;
  }
  state.SetLabel(std::string(q8_weights ? "q8" : "f32") + " weights, " +
                 (state.range(1) == 0   ? "f32"
                  : state.range(1) == 1 ? "f16"
                                        : "q8") +
                 " cache");
}
BENCHMARK(BM_decode_formats)->ArgsProduct({{0, 1}, {0, 1, 2}})->MinTime(0.1);

// The flat part of a decode step: Q, K, V and out projections of one row through the public matmul.
void BM_decode_projections(benchmark::State& state) {
  static const DecodeWeights w;
  const auto x = random_vector(d, 14);
  std::vector<float> q(d), k(kv_dim), v(kv_dim), o(d);
  for (auto _ : state) {
    ma::matmul(ma::make_view(x.data(), 1, d), ma::make_view(w.wq.data(), d, d), ma::make_view(q.data(), 1, d), true);
    ma::matmul(ma::make_view(x.data(), 1, d), ma::make_view(w.wk.data(), kv_dim, d), ma::make_view(k.data(), 1, kv_dim),
               true);
    ma::matmul(ma::make_view(x.data(), 1, d), ma::make_view(w.wv.data(), kv_dim, d), ma::make_view(v.data(), 1, kv_dim),
               true);
    ma::matmul(ma::make_view<const float>(q.data(), 1, d), ma::make_view(w.wo.data(), d, d),
               ma::make_view(o.data(), 1, d), true);
    benchmark::ClobberMemory();
  }
  const double dd = static_cast<double>(d);
  set_flop_counters(state, 2.0 * dd * (2.0 * dd + 2.0 * static_cast<double>(kv_dim)));
}
BENCHMARK(BM_decode_projections);

// The growing part: one query per head over a cache of t keys (heads share K/V heads as in the layer).
void BM_decode_attention(benchmark::State& state) {
  const auto t = static_cast<std::size_t>(state.range(0));
  const auto q = random_vector(d, 15), k = random_vector(t * kv_dim, 16), v = random_vector(t * kv_dim, 17);
  std::vector<float> out(d), ws(ma::attention_workspace_floats(hd, hd));
  for (auto _ : state) {
    for (std::size_t h = 0; h < heads; ++h) {
      const std::size_t g = h / (heads / kv_heads);
      benchmark::DoNotOptimize(ma::attention({q.data() + h * hd, 1, hd, d}, {k.data() + g * hd, t, hd, kv_dim},
                                             {v.data() + g * hd, t, hd, kv_dim}, {out.data() + h * hd, 1, hd, d},
                                             ws.data(), ws.size()));
    }
    benchmark::ClobberMemory();
  }
  set_flop_counters(state, 4.0 * static_cast<double>(t) * static_cast<double>(d));
}
BENCHMARK(BM_decode_attention)->Arg(64)->Arg(256)->Arg(1024);

// attention() with a causal sliding window: args n (= n_q = n_kv), window (0: none). d = 64. The flop count is
// the dense one, so GFLOP/s show the saving directly.
void BM_attention_window(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  constexpr std::size_t dk = 64;
  const auto q = random_vector(n * dk, 1), k = random_vector(n * dk, 2), v = random_vector(n * dk, 3);
  std::vector<float> out(n * dk), ws(ma::attention_workspace_floats(dk, dk));
  ma::AttentionOptions o;
  o.causal = true;
  o.window = static_cast<std::size_t>(state.range(1));
  for (auto _ : state) {
    benchmark::DoNotOptimize(ma::attention(ma::make_view(q.data(), n, dk), ma::make_view(k.data(), n, dk),
                                           ma::make_view(v.data(), n, dk), ma::make_view(out.data(), n, dk), ws.data(),
                                           ws.size(), o));
    benchmark::ClobberMemory();
  }
  set_flop_counters(state, 4.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(dk));
}
BENCHMARK(BM_attention_window)->ArgsProduct({{1024, 4096}, {0, 64, 256}});

}  // namespace

int main(int argc, char** argv) {
  bench::peak_gflops() = bench::measure_fma_peak_gflops();
  std::printf("microattn kernels: %s; single-core FMA peak (%s) measured at start: %.1f GFLOP/s\n", ma::simd_arch(),
              bench::peak_arch(), bench::peak_gflops());
  return bench::run_benchmarks(argc, argv, ma::simd_arch());
}
