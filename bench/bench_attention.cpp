// Google Benchmark: fused attention (single head, dense and causal) and the fixed-size layers, reporting
// GFLOP/s (4·n_q·n_kv·d for attention — causal runs use the same dense count, so their speed-up shows
// directly), % of the FMA peak measured at start-up, and the bytes of RAM each configuration holds.
// Run pinned to one core: taskset -c 0 build/bench/bench_attention
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <microattn/microattn.hpp>

#include "bench_common.hpp"
#include "kernels/attention.hpp"
#include "peak.hpp"

namespace ma = microattn;

namespace {

using bench::random_vector;
using bench::set_flop_counters;

// args: n (= n_q = n_kv), d (= d_k = d_v), causal
void BM_attention(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  const bool causal = state.range(2) != 0;
  const auto q = random_vector(n * d, 1), k = random_vector(n * d, 2), v = random_vector(n * d, 3);
  std::vector<float> out(n * d), ws(ma::attention_workspace_floats(d, d));
  ma::AttentionOptions o;
  o.causal = causal;
  for (auto _ : state) {
    const ma::Status s =
        ma::attention(ma::make_view(q.data(), n, d), ma::make_view(k.data(), n, d), ma::make_view(v.data(), n, d),
                      ma::make_view(out.data(), n, d), ws.data(), ws.size(), o);
    benchmark::DoNotOptimize(s);
    benchmark::ClobberMemory();
  }
  set_flop_counters(state, 4.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(d));
  state.counters["workspace_bytes"] = static_cast<double>(ws.size() * sizeof(float));
}
BENCHMARK(BM_attention)->ArgsProduct({{16, 64, 128, 256, 512, 1024}, {32, 64, 128}, {0, 1}});

// The unfused way, for reference: scores = q·kᵀ·scale (n×n in memory), softmax_rows, out = p·v.
void BM_attention_unfused(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  const auto q = random_vector(n * d, 1), k = random_vector(n * d, 2), v = random_vector(n * d, 3);
  std::vector<float> out(n * d), s(n * n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (auto _ : state) {
    ma::matmul(ma::make_view(q.data(), n, d), ma::make_view(k.data(), n, d), ma::make_view(s.data(), n, n), true);
    for (float& x : s) x *= scale;
    ma::softmax_rows(ma::make_view(s.data(), n, n));
    ma::matmul(ma::make_view<const float>(s.data(), n, n), ma::make_view(v.data(), n, d),
               ma::make_view(out.data(), n, d));
    benchmark::ClobberMemory();
  }
  set_flop_counters(state, 4.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(d));
  state.counters["scratch_bytes"] = static_cast<double>(s.size() * sizeof(float));
}
BENCHMARK(BM_attention_unfused)->ArgsProduct({{16, 64, 256, 1024}, {64}});

// Layers: projections 2·n·d·d each for Q, K, V (K/V with kv_heads/heads of the width) and out, plus attention.
template <std::size_t MaxSeq, std::size_t D, std::size_t H, std::size_t KvH>
void BM_layer(benchmark::State& state) {
  using Layer = ma::MultiHeadAttention<MaxSeq, D, H, KvH>;
  constexpr std::size_t kv_dim = KvH * Layer::HeadDim;
  const auto wq = random_vector(D * D, 4, -0.1f, 0.1f), wk = random_vector(kv_dim * D, 5, -0.1f, 0.1f),
             wv = random_vector(kv_dim * D, 6, -0.1f, 0.1f), wo = random_vector(D * D, 7, -0.1f, 0.1f);
  static Layer layer{{wq.data(), wk.data(), wv.data(), nullptr, nullptr, nullptr, wo.data(), nullptr}};
  layer = Layer{{wq.data(), wk.data(), wv.data(), nullptr, nullptr, nullptr, wo.data(), nullptr}};
  const std::size_t n = MaxSeq;
  auto x = random_vector(n * D, 8);
  std::vector<float> y(n * D);
  ma::AttentionOptions o;
  o.causal = state.range(0) != 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        layer.forward(ma::make_view<const float>(x.data(), n, D), ma::make_view(y.data(), n, D), o));
    benchmark::ClobberMemory();
  }
  const double nn = static_cast<double>(n), dd = static_cast<double>(D);
  set_flop_counters(state, 2.0 * nn * dd * (2.0 * dd + 2.0 * static_cast<double>(kv_dim)) + 4.0 * nn * nn * dd);
  state.counters["ram_bytes"] = static_cast<double>(Layer::ram_bytes);
}
BENCHMARK_TEMPLATE(BM_layer, 64, 64, 4, 4)->Arg(0)->Arg(1);
BENCHMARK_TEMPLATE(BM_layer, 128, 64, 1, 1)->Arg(0)->Arg(1);
BENCHMARK_TEMPLATE(BM_layer, 256, 256, 8, 8)->Arg(0)->Arg(1);
BENCHMARK_TEMPLATE(BM_layer, 256, 256, 8, 2)->Arg(0)->Arg(1);

// Where the time of attention() goes: each phase of the fused loop run alone, through the same kernel table
// and on the same data layout, for n × d with d_k = d_v = d. One iteration = every query tile × key block of
// the dense problem, so the phase times add up to (about) one attention() call. args: n, d, phase.
//   0 scores (Q·Kᵀ on the gemm micro-kernel)  1 online softmax (max, 2^x, sums)  2 P·V with the rescale
//   3 per-tile work (Q transpose-pack, output transpose-store)
void BM_attention_phase(benchmark::State& state) {
  namespace md = microattn::detail;
  const auto n = static_cast<std::size_t>(state.range(0)), d = static_cast<std::size_t>(state.range(1));
  const int phase = static_cast<int>(state.range(2));
  constexpr std::size_t br = ma::attention_block_q, bc = ma::attention_block_kv;
  const md::Kernels& kern = md::selected_kernels();
  const auto q = random_vector(n * d, 1), k = random_vector(n * d, 2), v = random_vector(n * d, 3);
  std::vector<float> out(n * d);
  alignas(64) static float qt[br * 1024], ot[br * 1024], s[br * bc], m[br], l[br], alpha[br];
  kern.attn_pack_q(q.data(), d, br, d, 0.18f, qt);
  for (std::size_t i = 0; i < br; ++i) {
    m[i] = 0.0f;
    l[i] = 1.0f;
    alpha[i] = 1.0f;
  }
  kern.attn_scores(qt, d, k.data(), d, bc, s, br);
  std::vector<float> s_saved(s, s + br * bc);
  for (auto _ : state) {
    for (std::size_t i0 = 0; i0 < n; i0 += br) {
      if (phase == 3) {
        kern.attn_pack_q(q.data() + i0 * d, d, br, d, 0.18f, qt);
        kern.attn_store_out(ot, l, br, d, out.data() + i0 * d, d);
        continue;
      }
      for (std::size_t j0 = 0; j0 < n; j0 += bc) {
        const std::size_t bk = n - j0 < bc ? n - j0 : bc;
        if (phase == 0) kern.attn_scores(qt, d, k.data() + j0 * d, d, bk, s, br);
        if (phase == 1) {
          std::copy(s_saved.begin(), s_saved.begin() + static_cast<std::ptrdiff_t>(bk * br), s);  // timed too:
          kern.attn_softmax(s, bk, m, l, alpha, br);  // the copy is one load + store per score, listed below
        }
        if (phase == 2) kern.attn_pv(s, bk, v.data() + j0 * d, d, d, alpha, ot, br);
        if (phase == 4) std::copy(s_saved.begin(), s_saved.begin() + static_cast<std::ptrdiff_t>(bk * br), s);
      }
    }
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(ot);
    benchmark::ClobberMemory();
  }
  static const char* names[] = {"scores Q·Kᵀ", "online softmax (+ copy)", "P·V + rescale", "Q pack + out store",
                                "copy alone (subtract from softmax)"};
  state.SetLabel(names[phase]);
  const double nn = static_cast<double>(n), dd = static_cast<double>(d);
  if (phase == 0 || phase == 2) set_flop_counters(state, 2.0 * nn * nn * dd);
}
BENCHMARK(BM_attention_phase)->ArgsProduct({{256, 1024}, {64}, {0, 1, 2, 3, 4}});

}  // namespace

int main(int argc, char** argv) {
  bench::peak_gflops() = bench::measure_fma_peak_gflops();
  std::printf(
      "microattn kernels: %s; tiles: %zu queries × %zu keys; single-core FMA peak (%s) measured at start: "
      "%.1f GFLOP/s\n",
      ma::simd_arch(), ma::attention_block_q, ma::attention_block_kv, bench::peak_arch(), bench::peak_gflops());
  return bench::run_benchmarks(argc, argv, ma::simd_arch());
}
