#include "peak.hpp"

#include <chrono>

#if defined(MICROATTN_BENCH_XSIMD)
#include <xsimd/xsimd.hpp>
using vfloat = xsimd::batch<float>;
constexpr std::size_t lanes = vfloat::size;
#else
constexpr std::size_t lanes = 1;
#endif

namespace bench {

// Independent accumulator chains: enough to cover FMA latency × FMA ports (4 × 2 here) on every target, and
// few enough to stay in registers with the two constants. 16 chains spill on 16-register ISAs (AVX2, SSE2,
// ARMv7 NEON, x86-64 scalar): the spilled chains then run through memory and the "peak" comes out at ~60 % of
// the real one (seen with AVX2 on this project's machine).
#if defined(__AVX512F__) || defined(__aarch64__) || (defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M')
constexpr int chains = 16;  // 32 vector (or, on Cortex-M, single-precision) registers
#else
constexpr int chains = 12;
#endif

double fma_burst(std::size_t iterations, float* sink) {
#if defined(MICROATTN_BENCH_XSIMD)
  vfloat acc[chains];
  for (int i = 0; i < chains; ++i) acc[i] = vfloat(1.0f + 0.001f * static_cast<float>(i));
  const vfloat a(0.999999f), b(1e-7f);
  for (std::size_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < chains; ++i) acc[i] = xsimd::fma(acc[i], a, b);
  }
  vfloat s(0.0f);
  for (int i = 0; i < chains; ++i) s += acc[i];
  *sink = xsimd::hadd(s);
#else
  float acc[chains];
  for (int i = 0; i < chains; ++i) acc[i] = 1.0f + 0.001f * static_cast<float>(i);
  for (std::size_t it = 0; it < iterations; ++it)
    for (int i = 0; i < chains; ++i) acc[i] = __builtin_fmaf(acc[i], 0.999999f, 1e-7f);
  float s = 0.0f;
  for (int i = 0; i < chains; ++i) s += acc[i];
  *sink = s;
#endif
  return 2.0 * static_cast<double>(lanes) * chains * static_cast<double>(iterations);
}

volatile float g_sink;  // keeps the bursts' results alive

double measure_fma_peak_gflops() {
  float sink = 0.0f;
  double best = 0.0;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const double flops = fma_burst(2000000, &sink);
    const auto t1 = std::chrono::steady_clock::now();
    const double g = flops / std::chrono::duration<double>(t1 - t0).count() * 1e-9;
    if (g > best) best = g;
  }
  g_sink = sink;
  return best;
}

const char* peak_arch() {
#if defined(MICROATTN_BENCH_XSIMD)
  return xsimd::default_arch::name();
#else
  return "scalar";
#endif
}

}  // namespace bench
