// Every entry point runs on a thread with a 64 KiB stack (musl's default is 128 KiB, embedded Linux often less;
// glibc on AArch64 refuses less than its 128 KiB PTHREAD_STACK_MIN, which is then used)
// and uses at most entry_point_stack_bytes of it. The thread's stack is painted before the call; the deepest
// byte that changed, minus what an empty thread function changes (the thread's own start-up frames; glibc also
// keeps its thread descriptor and TLS in that block), is the entry point's stack use, printed for docs/testing.md.
// Linux targets only (pthreads; the cross targets run it under qemu-user). Cortex-M: scripts/footprint.py.
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "microattn/microattn.hpp"
#include "stack_probe.hpp"

namespace ma = microattn;

namespace {

using namespace stack_probe;  // NOLINT: the probe is these tests' own vocabulary

std::vector<float> filled(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  return v;
}

// Inputs outlive the jobs (plain functions: no captures).
std::vector<float> a = filled(300 * 513), b = filled(513 * 300), c(300 * 300), x = filled(8192), y(8192);
std::vector<float> q = filled(200 * 128), k = filled(200 * 128), v = filled(200 * 128), out(200 * 128);
std::vector<float> mask = filled(200 * 200), ws(ma::attention_workspace_floats(128, 128));
std::vector<float> w = filled(256 * 256);
ma::MultiHeadAttention<128, 256, 4, 2> layer{
    {w.data(), w.data(), w.data(), w.data(), w.data(), w.data(), w.data(), w.data()}};

// linear(): weights in every format; x is a (up to 20 rows of 513, 5 of 5000).
std::vector<std::uint16_t> wh(513 * 300, 0x3c00);
std::vector<std::int8_t> wq(5000 * 300, 3);
std::vector<float> wscales(5000 * 300, 0.01f);

// The same layer from weight matrices: q8 (groups of 64 and per row), f16.
const ma::LayerWeightMatrices matrices{ma::weights_q8(wq.data(), wscales.data(), 256, 256, 64),
                                       ma::weights_q8(wq.data(), wscales.data(), 128, 256, 256),
                                       ma::weights_f16(wh.data(), 128, 256),
                                       w.data(),
                                       w.data(),
                                       w.data(),
                                       ma::weights_q8(wq.data(), wscales.data(), 256, 256, 32),
                                       w.data()};
ma::MultiHeadAttention<128, 256, 4, 2> layer_matrices{matrices};

void report(const char* what, std::size_t bytes) {
  std::printf("[ stack ] %-42s %6zu bytes (%s)\n", what, bytes, ma::matmul_kernel_name());
  if (!sanitized) {
    EXPECT_LE(bytes, ma::entry_point_stack_bytes) << what;
  }
  EXPECT_EQ(job_status, ma::Status::ok) << what;
}

TEST(SmallStack, EveryEntryPointRunsOnA64KiBStack) {
  std::printf("[ stack ] thread stack: %zu bytes\n", thread_stack_bytes());
  EXPECT_LE(stack_block + thread_stack_bytes(), stack_block + sizeof stack_block);
  report("matmul 300x513 * 513x300", stack_use([] {
           job_status = ma::matmul({a.data(), 300, 513, 513}, {b.data(), 513, 300, 300}, {c.data(), 300, 300, 300});
         }));
  report(
      "matmul 300x513 * (300x513)^T", stack_use([] {
        job_status = ma::matmul({a.data(), 300, 513, 513}, {b.data(), 300, 513, 513}, {c.data(), 300, 300, 300}, true);
      }));
  report("softmax_rows 2 x 4096", stack_use([] { job_status = ma::softmax_rows({x.data(), 2, 4096, 4096}); }));
  report("exp_elements 8192", stack_use([] { job_status = ma::exp_elements(x.data(), y.data(), 8192); }));
  report("attention 200x200, d 128, causal + mask", stack_use([] {
           ma::AttentionOptions o;
           o.causal = true;
           o.mask = {mask.data(), 200, 200, 200};
           job_status = ma::attention({q.data(), 200, 128, 128}, {k.data(), 200, 128, 128}, {v.data(), 200, 128, 128},
                                      {out.data(), 200, 128, 128}, ws.data(), ws.size(), o);
         }));
  report("attention exact rows (v = 1e38)", stack_use([] {
           std::vector<float>* vv = &v;
           for (float& e : *vv) e = 1e38f;
           job_status = ma::attention({q.data(), 40, 128, 128}, {k.data(), 40, 128, 128}, {v.data(), 40, 128, 128},
                                      {out.data(), 40, 128, 128}, ws.data(), ws.size());
         }));
  report("linear f32 20 x 513 * (300x513)^T", stack_use([] {
           job_status = ma::linear({a.data(), 20, 513, 513}, ma::weights_f32(b.data(), 300, 513), w.data(),
                                   {c.data(), 20, 300, 300});
         }));
  report("linear f16 20 x 513 * (300x513)^T", stack_use([] {
           job_status = ma::linear({a.data(), 20, 513, 513}, ma::weights_f16(wh.data(), 300, 513), w.data(),
                                   {c.data(), 20, 300, 300});
         }));
  report("linear q8 group 64, 5 x 4096 * (300x4096)^T", stack_use([] {
           job_status = ma::linear({a.data(), 5, 4096, 4096}, ma::weights_q8(wq.data(), wscales.data(), 300, 4096, 64),
                                   nullptr, {c.data(), 5, 300, 300});
         }));
  report("linear q8 group 32 (packed), 5 x 4096 * (300x4096)^T", stack_use([] {
           job_status = ma::linear({a.data(), 5, 4096, 4096}, ma::weights_q8(wq.data(), wscales.data(), 300, 4096, 32),
                                   nullptr, {c.data(), 5, 300, 300});
         }));
  report("linear q8 group = cols 5000 (over chunks)", stack_use([] {
           job_status =
               ma::linear({a.data(), 5, 5000, 5000}, ma::weights_q8(wq.data(), wscales.data(), 300, 5000, 5000),
                          nullptr, {c.data(), 5, 300, 300});
         }));
  report("linear q8 group 48 straddling rows of 100", stack_use([] {
           job_status = ma::linear({a.data(), 5, 100, 100}, ma::weights_q8(wq.data(), wscales.data(), 300, 100, 48),
                                   nullptr, {c.data(), 5, 300, 300});
         }));
  report("MultiHeadAttention<128, 256, 4, 2>::forward", stack_use([] {
           job_status = layer.forward({x.data(), 20, 256, 256}, {y.data(), 20, 256, 256});
         }));
  report("MultiHeadAttention<128, 256, 4, 2> q8/f16 forward", stack_use([] {
           job_status = layer_matrices.forward({x.data(), 20, 256, 256}, {y.data(), 20, 256, 256});
         }));
  report("MultiHeadAttention<128, 256, 4, 2> q8/f16 append", stack_use([] {
           job_status = layer_matrices.append({x.data(), 3, 256, 256}, {y.data(), 3, 256, 256});
         }));
}

}  // namespace
