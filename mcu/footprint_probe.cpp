// For scripts/footprint.py, built on the Cortex-M cross builds with the library's stack-usage flags:
//  - reference_layer: the layer configuration whose RAM the footprint table reports;
//  - call_*: one out-of-line call of each public entry point (forward() and append() are inline members, so
//    their frames are those of call_forward and call_append), which the static stack analysis covers too;
//  - main: runs each call_* once on a painted stack under QEMU and prints the bytes it really used, so the
//    script can check that its static worst case is never below a measured use.
#include <cstdint>
#include <cstdio>

#include <microattn/microattn.hpp>

namespace ma = microattn;

namespace footprint {

namespace {
constexpr std::size_t n = 64;
float w[n * n], x[n * n], y[n * n], q[n * n], k[n * n], v[n * n], out[n * n], mask[n * n];
float workspace[ma::attention_workspace_floats(n, n)];
}  // namespace

ma::MultiHeadAttention<64, 64, 4> reference_layer{{w, w, w, w, w, w, w, w}};

__attribute__((noinline)) ma::Status call_forward() {
  return reference_layer.forward(ma::make_view<const float>(x, n, n), ma::make_view(y, n, n));
}

// Decoding: a rotary, sliding-window layer of the same size; append one token after 40 (the ring moves at 64).
ma::LayerConfig decode_config() {
  ma::LayerConfig c;
  c.rope_theta = 10000.0f;
  c.window = 32;
  return c;
}
ma::MultiHeadAttention<64, 64, 4> decode_layer{{w, w, w, w, w, w, w, w}, decode_config()};

__attribute__((noinline)) ma::Status call_append() {
  return decode_layer.append(ma::make_view<const float>(x, 1, n), ma::make_view(y, 1, n));
}

__attribute__((noinline)) ma::Status call_attention() {
  ma::AttentionOptions options;
  options.causal = true;
  options.mask = ma::make_view<const float>(mask, n, n);
  return ma::attention(ma::make_view<const float>(q, n, n), ma::make_view<const float>(k, n, n),
                       ma::make_view<const float>(v, n, n), ma::make_view(out, n, n), workspace,
                       sizeof workspace / sizeof workspace[0], options);
}

__attribute__((noinline)) ma::Status call_matmul() {
  return ma::matmul(ma::make_view<const float>(q, n - 1, n), ma::make_view<const float>(k, n - 3, n),
                    ma::make_view(out, n - 1, n - 3), true);
}

__attribute__((noinline)) ma::Status call_softmax_rows() { return ma::softmax_rows(ma::make_view(out, n, n)); }

__attribute__((noinline)) ma::Status call_exp_elements() { return ma::exp_elements(q, out, n * n); }

// q8 weights in groups of 32 (x quantized on the stack, the deepest of linear's paths), w's bytes as the int8 data.
// The format is read at run time, as from a file: the probe links every format's entry point and kernels, whose
// text footprint.py counts by format.
volatile ma::Format linear_format = ma::Format::q8;
__attribute__((noinline)) ma::Status call_linear() {
  ma::WeightMatrix wm = ma::weights_q8(reinterpret_cast<const std::int8_t*>(w), mask, n, n, 32);
  wm.format = linear_format;
  return ma::linear(ma::make_view<const float>(x, 4, n), wm, k, ma::make_view(out, 4, n));
}

}  // namespace footprint

namespace {

constexpr std::uint32_t paint = 0xdeadbeef;
constexpr std::size_t painted_words = 2048;  // 8 KiB below the caller's stack pointer

// Bytes of stack below this function's frame that f overwrote (painted_words * 4 means: at least that).
__attribute__((noinline)) unsigned measure(ma::Status (*f)()) {
  std::uint32_t* sp;
  asm volatile("mov %0, sp" : "=r"(sp));
  volatile std::uint32_t* const bottom = sp - painted_words;
  for (volatile std::uint32_t* p = bottom; p < sp; ++p) *p = paint;
  if (f() != ma::Status::ok) return 0;  // 0: the call failed, the script reports it
  volatile std::uint32_t* p = bottom;
  while (p < sp && *p == paint) ++p;
  return static_cast<unsigned>(sp - const_cast<std::uint32_t*>(p)) * 4;
}

}  // namespace

int main() {
  using namespace footprint;
  for (std::size_t i = 0; i < n * n; ++i) {
    w[i] = 0.01f * static_cast<float>(i % 7);
    x[i] = q[i] = k[i] = v[i] = 0.1f * static_cast<float>(i % 5);
  }
  std::printf("measured call_forward %u\n", measure(call_forward));
  for (int i = 0; i < 40; ++i) call_append();
  std::printf("measured call_append %u\n", measure(call_append));
  std::printf("measured call_attention %u\n", measure(call_attention));
  std::printf("measured call_matmul %u\n", measure(call_matmul));
  std::printf("measured call_softmax_rows %u\n", measure(call_softmax_rows));
  std::printf("measured call_exp_elements %u\n", measure(call_exp_elements));
  std::printf("measured call_linear %u\n", measure(call_linear));
  return 0;
}
