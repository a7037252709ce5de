// On-target benchmark: what a firmware engineer flashes to profile microattn on a Cortex-M part.
//
// Runs matmul, softmax_rows, attention (dense and causal), a MultiHeadAttention forward and linear() with
// f32, f16 and q8 weights (one row of x: the decoding case; q8 with one scale per row and in groups of 64) over
// MCU-sized shapes, plus two yardsticks compiled -O2 (mcu_bench_naive.cpp: the plain three-loop attention and matmul
// a firmware would otherwise write), and prints one row per call: the work (MACs: m·n·k for matmul, 2·n²·d
// for attention — causal included, so its row shows the work it skips — and projections + attention for a
// layer, n·k for linear; elements for softmax), the cycles the DWT cycle counter saw, and cycles per MAC (or per
// element). Each measured call sits between mcu_bench_mark_begin() and mcu_bench_mark_end(), two empty functions whose
// addresses the QEMU plugin tools/qemu_insn_count.c is given: under QEMU, where the cycle counter does not count (QEMU
// models no timing), scripts/mcu_bench.sh counts the instructions of each call instead. Every result is checked against
// the yardstick (or an exact property), so a wrong kernel cannot post a good figure: the program exits 1 on a mismatch.
//
// On a board: build with any cross/cortex-m*.ini (ninja -C BUILD mcu/mcu_bench), bring the board's startup
// and linker script, retarget printf (semihosting here), flash mcu_bench, read the console. The inputs are
// generated at start-up (no flash tables); RAM: about 3.2 MiB of .bss (the 128×32 attention, the
// <64, 64, 4> layer, 256 × 256 linear weights in each format, and the llama model: 1 MiB of fp32 weights, their q8
// copy, five K/V caches of each format, the reference's); cut `cases` for smaller parts. The QEMU boards load .data
// and .bss as one segment at .data's flash address, so .bss beyond the 4 MiB flash region would not load.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <microattn/microattn.hpp>

#include "mcu_bench_naive.hpp"

namespace ma = microattn;

extern "C" {
// The markers: empty and out of line, so the plugin sees every measured call start and end at them.
__attribute__((noinline, used)) void mcu_bench_mark_begin() { asm volatile("" ::: "memory"); }
__attribute__((noinline, used)) void mcu_bench_mark_end() { asm volatile("" ::: "memory"); }
}

namespace {

// ---- DWT cycle counter (Armv7-M / Armv8-M debug) ----------------------------------------------------------
volatile std::uint32_t& reg(std::uintptr_t addr) { return *reinterpret_cast<volatile std::uint32_t*>(addr); }
constexpr std::uintptr_t demcr = 0xE000EDFCu;     // Debug Exception and Monitor Control: TRCENA is bit 24
constexpr std::uintptr_t dwt_ctrl = 0xE0001000u;  // CYCCNTENA is bit 0
constexpr std::uintptr_t dwt_cyccnt = 0xE0001004u;
constexpr std::uintptr_t dwt_lar = 0xE0001FB0u;  // lock access (Cortex-M7 parts need the key before writes)

// Enables the counter and tells whether it counts (it does not under QEMU, and on parts without a DWT).
bool cycle_counter_start() {
  reg(demcr) |= 1u << 24;
  reg(dwt_lar) = 0xC5ACCE55u;
  reg(dwt_cyccnt) = 0;
  reg(dwt_ctrl) |= 1u;
  const std::uint32_t t0 = reg(dwt_cyccnt);
  for (volatile int i = 0; i < 100; ++i) {
  }
  return reg(dwt_cyccnt) != t0;
}
inline std::uint32_t cycles_now() { return reg(dwt_cyccnt); }

// ---- inputs -----------------------------------------------------------------------------------------------
std::uint32_t rng_state = 12345;
float uniform() {  // [-1, 1), xorshift32
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return static_cast<float>(rng_state >> 8) * (2.0f / 16777216.0f) - 1.0f;
}
void fill(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = uniform();
}

constexpr std::size_t max_elems = 128 * 64;
float a_buf[max_elems], b_buf[max_elems], c_buf[max_elems], out_buf[max_elems], ref_buf[max_elems];
float scores_buf[128];  // the yardstick's one row of scores
float workspace[ma::attention_workspace_floats(64, 64)];

constexpr std::size_t layer_seq = 64, layer_dim = 64, layer_heads = 4;
float layer_w[layer_dim * layer_dim], layer_bias[layer_dim];
ma::MultiHeadAttention<layer_seq, layer_dim, layer_heads> layer{
    {layer_w, layer_w, layer_w, layer_bias, layer_bias, layer_bias, layer_w, layer_bias}};

// ---- cases ------------------------------------------------------------------------------------------------
enum class Op {
  matmul,
  matmul_naive,
  softmax_rows,
  attention,
  attention_causal,
  attention_naive,
  layer_forward,
  linear_f32,
  linear_f16,
  linear_q8,
  linear_q8_g64,
  llama_token
};
const char* op_name(Op op) {
  switch (op) {
    case Op::matmul:
      return "matmul";
    case Op::matmul_naive:
      return "matmul_naive_O2";
    case Op::softmax_rows:
      return "softmax_rows";
    case Op::attention:
      return "attention";
    case Op::attention_causal:
      return "attention_causal";
    case Op::attention_naive:
      return "attention_naive_O2";
    case Op::layer_forward:
      return "mha_forward";
    case Op::linear_f32:
      return "linear_f32";
    case Op::linear_f16:
      return "linear_f16";
    case Op::linear_q8:
      return "linear_q8";
    case Op::linear_q8_g64:
      return "linear_q8_g64";
    case Op::llama_token:
      return "llama_token";
  }
  return "?";
}

struct Case {
  Op op;
  std::size_t n, d;  // matmul: n = m = k = n (d unused); softmax: n rows × d cols; attention: n × d; layer: n;
                     // linear: weights n × d (out × in), one row of x (m = 1); llama_token: n = 1 q8, 0 f32
};
constexpr Case cases[] = {
    {Op::matmul, 16, 0},
    {Op::matmul, 32, 0},
    {Op::matmul, 64, 0},
    {Op::matmul_naive, 64, 0},
    {Op::softmax_rows, 16, 16},
    {Op::softmax_rows, 64, 64},
    {Op::attention, 16, 16},
    {Op::attention, 64, 16},
    {Op::attention, 32, 32},
    {Op::attention, 64, 32},
    {Op::attention, 128, 32},
    {Op::attention, 64, 64},
    {Op::attention_causal, 16, 16},
    {Op::attention_causal, 64, 16},
    {Op::attention_causal, 64, 32},
    {Op::attention_causal, 128, 32},
    {Op::attention_naive, 16, 16},
    {Op::attention_naive, 64, 16},
    {Op::attention_naive, 64, 32},
    {Op::attention_naive, 128, 32},
    {Op::layer_forward, 16, 0},
    {Op::layer_forward, 64, 0},
    {Op::linear_f32, 64, 256},
    {Op::linear_f32, 256, 64},
    {Op::linear_f32, 256, 256},
    {Op::linear_f16, 64, 256},
    {Op::linear_f16, 256, 64},
    {Op::linear_f16, 256, 256},
    {Op::linear_q8, 64, 256},
    {Op::linear_q8, 256, 64},
    {Op::linear_q8, 256, 256},
    {Op::linear_q8_g64, 64, 256},
    {Op::linear_q8_g64, 256, 64},
    {Op::linear_q8_g64, 256, 256},
    {Op::llama_token, 1, 0},
    {Op::llama_token, 0, 0},
};

// Work of a case: MACs (elements for softmax_rows).
unsigned long work(const Case& c) {
  const unsigned long n = c.n, d = c.d, dm = layer_dim;
  switch (c.op) {
    case Op::matmul:
    case Op::matmul_naive:
      return n * n * n;
    case Op::softmax_rows:
      return n * d;
    case Op::layer_forward:
      return 4 * n * dm * dm + 2 * n * n * dm;  // q, k, v, out projections + attention
    case Op::linear_f32:
    case Op::linear_f16:
    case Op::linear_q8:
    case Op::linear_q8_g64:
      return n * d;
    case Op::llama_token: {  // per step: the projections, the ffn, the classifier, and attention over p + 1 keys
      constexpr unsigned long dim = 64, kv = 32, hid = 172, layers = 5, vocab = 512;
      unsigned long macs = 0;
      for (unsigned long p = 128; p < 136; ++p)
        macs += layers * (2 * dim * dim + 2 * kv * dim + 3 * hid * dim + 2 * (p + 1) * dim) + vocab * dim;
      return macs;
    }
    default:
      return 2 * n * n * d;
  }
}

bool close(const float* x, const float* ref, std::size_t n, float tol) {
  float scale = 0.0f;
  for (std::size_t i = 0; i < n; ++i) scale = std::fmax(scale, std::fabs(ref[i]));
  for (std::size_t i = 0; i < n; ++i)
    if (!(std::fabs(x[i] - ref[i]) <= tol * (scale + 1e-6f))) return false;
  return true;
}

// linear(): weights of up to 256 × 256 in each format (f32 in lin_w, f16 and q8 in the same storage), x one row.
constexpr std::size_t lin_max = 256 * 256;
float lin_w[lin_max], lin_scales[lin_max / 64], lin_bias[256], lin_x[256], lin_y[256];
std::uint16_t lin_h[lin_max];
std::int8_t lin_q[lin_max];

double half_value(std::uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const int mant = e == 0 ? m : m + 1024, exp = e == 0 ? -24 : e - 25;  // one conversion (see weight_value)
  const double v = std::ldexp(static_cast<double>(mant), exp);
  return (h & 0x8000) != 0 ? -v : v;
}

// Weight i as stored, in double. Out of line with plain branches: GCC 12 for Cortex-M55 emits a conditional
// VCVT.F64 inside an IT block for the same selection written as one expression, which its assembler rejects.
__attribute__((noinline)) double weight_value(Op op, std::size_t i, std::size_t group) {
  if (op == Op::linear_f16) return half_value(lin_h[i]);
  if (op == Op::linear_q8 || op == Op::linear_q8_g64) {
    const double q = lin_q[i];
    return static_cast<double>(lin_scales[i / group]) * q;
  }
  return lin_w[i];
}

// Runs linear() with weights n × k in the case's format between the markers; checks y against a double product of
// x and the weights as stored (q8: within its quantization term and the float bound).
bool run_linear(Op op, std::size_t n, std::size_t k, std::uint32_t& t0, std::uint32_t& t1) {
  fill(lin_w, n * k);
  fill(lin_x, k);
  fill(lin_bias, n);
  std::uint16_t* const h = lin_h;
  std::int8_t* const q = lin_q;
  const std::size_t group = op == Op::linear_q8_g64 ? 64 : k;
  ma::WeightMatrix w = ma::weights_f32(lin_w, n, k);
  if (op == Op::linear_f16) {
    for (std::size_t i = 0; i < n * k; ++i) h[i] = ma::f16_from_float(lin_w[i]);
    w = ma::weights_f16(h, n, k);
  } else if (op == Op::linear_q8 || op == Op::linear_q8_g64) {
    for (std::size_t g = 0; g < n * k / group; ++g) {
      lin_scales[g] = 1.0f / 127.0f;
      for (std::size_t i = g * group; i < (g + 1) * group; ++i)
        q[i] = static_cast<std::int8_t>(static_cast<int>(std::lround(lin_w[i] * 127.0f)));
    }
    w = ma::weights_q8(q, lin_scales, n, k, group);
  }
  ma::Status st = ma::Status::ok;
  t0 = cycles_now();
  mcu_bench_mark_begin();
  st = ma::linear(ma::make_view<const float>(lin_x, 1, k), w, lin_bias, ma::make_view(lin_y, 1, n));
  mcu_bench_mark_end();
  t1 = cycles_now();
  double amax = 0.0;
  for (std::size_t c = 0; c < k; ++c) amax = std::fmax(amax, std::fabs(lin_x[c]));
  bool ok = st == ma::Status::ok;
  for (std::size_t r = 0; r < n && ok; ++r) {
    double want = lin_bias[r], abs = std::fabs(lin_bias[r]), wabs = 0.0;
    for (std::size_t c = 0; c < k; ++c) {
      const std::size_t i = r * k + c;
      const double wv = weight_value(op, i, group);
      want += wv * lin_x[c];
      abs += std::fabs(wv * lin_x[c]);
      wabs += std::fabs(wv);
    }
    const double quant = op == Op::linear_q8 || op == Op::linear_q8_g64 ? 0.5 * amax / 127.0 * wabs : 0.0;
    ok = std::fabs(lin_y[r] - want) <= quant + 2.0 * (k + 3) * 0x1p-24 * (abs + quant) + 1e-30;
  }
  return ok;
}

// ---- a llama2.c decoder, token by token -------------------------------------------------------------------------
// stories260K's shape (dim 64, 5 layers, 8 heads, 4 K/V heads, hidden 172, vocab 512, shared classifier, seq 512),
// random weights, llama2.c's settings (rope theta 10000 on interleaved pairs, rms eps 1e-5), as a firmware runs it:
// one DecoderLayerSharedScratch per layer over one LayerScratch. q8: every matrix quantized per group of 64 over the
// flattened tensor where the rows have 64 columns (so one scale per row: wq, wk, wv, wo, w1, w3, the classifier),
// w2 (64 × 172) one scale per row (runq.c's groups of 64 would straddle its rows, which linear computes in float),
// K/V cache q8; the embedding row is dequantized from the classifier's q8 table. f32: fp32 weights and cache.
// The case prefills llama_prefill tokens (forward, outside the markers), then measures llama_steps token steps: the
// embedding row, append through every layer, the final rms_norm_rows, the classifier, argmax (the next input).
namespace llama {
// A second argument after the case (scripts/mcu_bench.sh --profile-steps): 1 skips the check after the steps,
// 2 the steps too, so that two profiles differ by the steps alone.
int profile_mode = 0;
constexpr std::size_t dim = 64, layers = 5, heads = 8, kv_heads = 4, hidden = 172, vocab = 512, seq = 512;
constexpr std::size_t kv_dim = dim / heads * kv_heads, prefill = 128, steps = 8, rows = prefill + steps;
// Per layer, row-major and one after another: wq, wk, wv, wo, w1, w2, w3.
constexpr std::size_t off_wk = dim * dim, off_wv = off_wk + kv_dim * dim, off_wo = off_wv + kv_dim * dim,
                      off_w1 = off_wo + dim * dim, off_w2 = off_w1 + hidden * dim, off_w3 = off_w2 + dim * hidden,
                      layer_floats = off_w3 + hidden * dim;
constexpr std::size_t group = 64, layer_scales = layer_floats / group;  // at most one scale per 64 values
float emb[vocab * dim], weights[layers * layer_floats], norms[(2 * layers + 1) * dim];
std::int8_t q_emb[vocab * dim], q_weights[layers * layer_floats];
float s_emb[vocab * dim / group], s_weights[layers * layer_scales];
float x_rows[rows * dim], logits[steps * vocab], ref_logits[steps * vocab];
std::size_t tokens[rows + 1];

// Quantizes n values in groups of g (the library's quantizer: the exporter's rules).
void quantize(const float* w, std::size_t n, std::size_t g, std::int8_t* q, float* s) {
  if (ma::quantize_q8(ma::make_view(w, 1, n), g, q, s) != ma::Status::ok) std::abort();
}

// Layer l's weights in a format: f32 from `weights`, q8 from q_weights / s_weights (scales at the same offsets / 64;
// w2's per-row scales fill its 64-value slots' first entries: hidden / 64 slots per row would not tile it).
ma::DecoderLayerWeights layer_weights(std::size_t l, bool q8) {
  const float* f = weights + l * layer_floats;
  const std::int8_t* q = q_weights + l * layer_floats;
  const float* s = s_weights + l * layer_scales;
  auto m = [&](std::size_t off, std::size_t r, std::size_t c) {
    return q8 ? ma::weights_q8(q + off, s + off / group, r, c, c == dim ? group : c) : ma::weights_f32(f + off, r, c);
  };
  return {m(0, dim, dim),         m(off_wk, kv_dim, dim), m(off_wv, kv_dim, dim),
          m(off_wo, dim, dim),    m(off_w1, hidden, dim), m(off_w2, dim, hidden),
          m(off_w3, hidden, dim), norms + 2 * l * dim,    norms + (2 * l + 1) * dim};
}
ma::DecoderLayerConfig layer_config() {
  ma::DecoderLayerConfig c;
  c.attention.rope_theta = 10000.0f;
  c.attention.rope_interleaved = true;
  c.rms_norm_eps = 1e-5f;
  return c;
}

using LayerQ8 = ma::DecoderLayerSharedScratch<seq, dim, heads, kv_heads, hidden, ma::Format::q8>;
using LayerF32 = ma::DecoderLayerSharedScratch<seq, dim, heads, kv_heads, hidden, ma::Format::f32>;
constexpr std::size_t scratch_floats =
    LayerQ8::scratch_floats > LayerF32::scratch_floats ? LayerQ8::scratch_floats : LayerF32::scratch_floats;
ma::LayerScratch<scratch_floats> scratch;
const ma::DecoderLayerConfig config = layer_config();
const ma::DecoderLayerWeights weights_q8[layers] = {layer_weights(0, true), layer_weights(1, true),
                                                    layer_weights(2, true), layer_weights(3, true),
                                                    layer_weights(4, true)};
const ma::DecoderLayerWeights weights_f32[layers] = {layer_weights(0, false), layer_weights(1, false),
                                                     layer_weights(2, false), layer_weights(3, false),
                                                     layer_weights(4, false)};
LayerQ8 layers_q8[layers] = {{weights_q8[0], scratch, config},
                             {weights_q8[1], scratch, config},
                             {weights_q8[2], scratch, config},
                             {weights_q8[3], scratch, config},
                             {weights_q8[4], scratch, config}};
LayerF32 layers_f32[layers] = {{weights_f32[0], scratch, config},
                               {weights_f32[1], scratch, config},
                               {weights_f32[2], scratch, config},
                               {weights_f32[3], scratch, config},
                               {weights_f32[4], scratch, config}};

// The fp32 weights from a fixed seed, and their q8 copies; again after reference_logits dequantized over them.
bool weights_made = false;
void make_weights() {
  if (weights_made) return;
  weights_made = true;
  rng_state = 0x2545f491u;
  fill(emb, vocab * dim);
  fill(weights, layers * layer_floats);
  for (std::size_t l = 0; l < layers; ++l) {  // ~1/√fan-in, so the activations stay in a sane range
    float* w = weights + l * layer_floats;
    for (std::size_t i = 0; i < off_w2; ++i) w[i] *= 0.125f * 1.7f;
    for (std::size_t i = off_w2; i < off_w3; ++i) w[i] *= 0.076f * 1.7f;
    for (std::size_t i = off_w3; i < layer_floats; ++i) w[i] *= 0.125f * 1.7f;
  }
  fill(norms, (2 * layers + 1) * dim);
  for (float& v : norms) v = 1.0f + 0.25f * v;
  quantize(emb, vocab * dim, group, q_emb, s_emb);
  for (std::size_t l = 0; l < layers; ++l) {
    const float* f = weights + l * layer_floats;
    std::int8_t* q = q_weights + l * layer_floats;
    float* s = s_weights + l * layer_scales;
    quantize(f, off_w2, group, q, s);                                            // wq … w1: rows of 64
    quantize(f + off_w2, dim * hidden, hidden, q + off_w2, s + off_w2 / group);  // w2: one scale per row
    quantize(f + off_w3, hidden * dim, group, q + off_w3, s + off_w3 / group);   // w3
  }
}

// The token's embedding row into x (q8: dequantized from the shared classifier's table).
void embed(std::size_t token, bool q8, float* x) {
  for (std::size_t c = 0; c < dim; ++c)
    x[c] = q8 ? s_emb[(token * dim + c) / group] * static_cast<float>(q_emb[token * dim + c]) : emb[token * dim + c];
}

// Final norm, classifier, argmax over `n` rows of x; logits n × vocab. Returns the last row's argmax.
std::size_t classify(float* x, std::size_t n, bool q8, float* out, bool& ok) {
  const ma::WeightMatrix cls = q8 ? ma::weights_q8(q_emb, s_emb, vocab, dim, group) : ma::weights_f32(emb, vocab, dim);
  ok = ok && ma::rms_norm_rows(ma::make_view<const float>(x, n, dim), norms + 2 * layers * dim, 1e-5f,
                               ma::make_view(x, n, dim)) == ma::Status::ok;
  ok = ok &&
       ma::linear(ma::make_view<const float>(x, n, dim), cls, nullptr, ma::make_view(out, n, vocab)) == ma::Status::ok;
  const float* last = out + (n - 1) * vocab;
  std::size_t best = 0;
  for (std::size_t i = 1; i < vocab; ++i)
    if (last[i] > last[best]) best = i;
  return best;
}

// One token step at the layers' position: tokens[p] in, tokens[p + 1] (argmax) out, the logits in `out`.
template <class Layer>
bool token_step(Layer* ls, bool q8, std::size_t p, float* out) {
  float* const x = x_rows;
  embed(tokens[p], q8, x);
  bool ok = true;
  const auto xv = ma::make_view<const float>(x, 1, dim);
  const auto yv = ma::make_view(x, 1, dim);
  for (std::size_t l = 0; l < layers; ++l) ok = ok && ls[l].append(xv, yv) == ma::Status::ok;
  tokens[p + 1] = classify(x, 1, q8, out, ok);
  return ok;
}

// Prefill (forward over n prompt rows, every layer) from tokens[0, n).
template <class Layer>
bool prefill_rows(Layer* ls, bool q8, std::size_t n) {
  for (std::size_t r = 0; r < n; ++r) embed(tokens[r], q8, x_rows + r * dim);
  bool ok = true;
  for (std::size_t l = 0; l < layers; ++l) {
    ls[l].reset();
    ok = ok &&
         ls[l].forward(ma::make_view<const float>(x_rows, n, dim), ma::make_view(x_rows, n, dim)) == ma::Status::ok;
  }
  return ok;
}

// The reference: mcu_bench::naive_llama_token (run.c's loops, -O2) over every row on the weights as stored (q8:
// dequantized over the fp32 arrays, which make_weights then makes again: the image has no room for a second
// copy), its logits for the measured steps.
float ref_k[layers * rows * kv_dim], ref_v[layers * rows * kv_dim], ref_scratch[4 * dim + 2 * hidden + rows];
void reference_logits(bool q8, float* out) {
  if (q8) {
    weights_made = false;
    for (std::size_t i = 0; i < vocab * dim; ++i) emb[i] = s_emb[i / group] * static_cast<float>(q_emb[i]);
    for (std::size_t l = 0; l < layers; ++l)
      for (std::size_t i = 0; i < layer_floats; ++i) {
        const std::size_t g = i >= off_w2 && i < off_w3 ? (i - off_w2) / hidden + off_w2 / group : i / group;
        weights[l * layer_floats + i] =
            s_weights[l * layer_scales + g] * static_cast<float>(q_weights[l * layer_floats + i]);
      }
  }
  const mcu_bench::NaiveLlama m{dim, layers,  heads,        kv_heads, hidden, vocab, rows,
                                emb, weights, layer_floats, norms,    ref_k,  ref_v, ref_scratch};
  for (std::size_t p = 0; p < rows; ++p)
    mcu_bench::naive_llama_token(m, tokens[p], p, p < prefill ? out : out + (p - prefill) * vocab);
}

// Whether each step's logits are within tol of b's, relative to the row's largest |b|.
bool logits_close(const float* a, const float* b, float tol) {
  bool ok = true;
  for (std::size_t s = 0; s < steps && ok; ++s) {
    float scale = 0.0f;
    for (std::size_t i = 0; i < vocab; ++i) scale = std::fmax(scale, std::fabs(b[s * vocab + i]));
    for (std::size_t i = 0; i < vocab; ++i)
      ok = ok && std::isfinite(a[s * vocab + i]) && std::fabs(a[s * vocab + i] - b[s * vocab + i]) <= tol * scale;
    ok = ok && scale > 0.1f;
  }
  return ok;
}

// The case: prefill, llama_steps measured token steps, then two checks of their logits: against the same model run
// the prompt's way (one forward over every row: tiled causal attention instead of the one-query cache path; q8:
// the cache rounds K/V alike, activations are quantized per row alike) and against the reference (q8: within the
// activations' and the cache's quantization, a few % of the largest logit; f32: float rounding).
template <class Layer>
bool run_model(Layer* ls, bool q8, std::uint32_t& t0, std::uint32_t& t1) {
  make_weights();
  for (std::size_t r = 0; r <= prefill; ++r)
    tokens[r] = static_cast<std::size_t>((uniform() + 1.0f) * 0.5f * vocab) % vocab;
  bool ok = prefill_rows(ls, q8, prefill);
  t0 = cycles_now();
  mcu_bench_mark_begin();
  for (std::size_t s = 0; s < steps && profile_mode < 2; ++s)
    ok = token_step(ls, q8, prefill + s, logits + s * vocab) && ok;
  mcu_bench_mark_end();
  t1 = cycles_now();
  if (profile_mode != 0) return ok;
  ok = ok && ls[0].position() == rows;
  ok = prefill_rows(ls, q8, rows) && ok;
  classify(x_rows + prefill * dim, steps, q8, ref_logits, ok);
  ok = ok && logits_close(logits, ref_logits, q8 ? 1e-2f : 1e-4f);
  reference_logits(q8, ref_logits);
  return ok && logits_close(logits, ref_logits, q8 ? 5e-2f : 1e-3f);
}
}  // namespace llama

bool n_is_q8(const Case& c) { return c.n == 1; }

// Runs one case between the markers (inputs prepared before, checks after); returns the cycles and whether
// the result checked out.
bool run_case(const Case& c, std::uint32_t& cycles) {
  const std::size_t n = c.n, d = c.d;
  ma::Status st = ma::Status::ok;
  ma::AttentionOptions causal;
  causal.causal = true;
  std::uint32_t t0 = 0, t1 = 0;
  auto timed = [&](auto&& call) {
    t0 = cycles_now();
    mcu_bench_mark_begin();
    call();
    mcu_bench_mark_end();
    t1 = cycles_now();
  };
  bool ok = true;
  switch (c.op) {
    case Op::matmul:
    case Op::matmul_naive: {
      fill(a_buf, n * n);
      fill(b_buf, n * n);
      if (c.op == Op::matmul)
        timed([&] {
          st = ma::matmul(ma::make_view<const float>(a_buf, n, n), ma::make_view<const float>(b_buf, n, n),
                          ma::make_view(out_buf, n, n), false);
        });
      else
        timed([&] { mcu_bench::naive_matmul(a_buf, b_buf, out_buf, n, n, n); });
      mcu_bench::naive_matmul(a_buf, b_buf, ref_buf, n, n, n);
      ok = close(out_buf, ref_buf, n * n, 1e-5f);
      break;
    }
    case Op::softmax_rows: {
      fill(out_buf, n * d);
      std::memcpy(ref_buf, out_buf, n * d * sizeof(float));
      timed([&] { st = ma::softmax_rows(ma::make_view(out_buf, n, d)); });
      for (std::size_t r = 0; r < n; ++r) {  // each row: positive, sums to 1, ordered as its inputs
        float sum = 0.0f;
        for (std::size_t j = 0; j < d; ++j) {
          sum += out_buf[r * d + j];
          ok = ok && out_buf[r * d + j] > 0.0f &&
               (out_buf[r * d + j] > out_buf[r * d]) == (ref_buf[r * d + j] > ref_buf[r * d]);
        }
        ok = ok && std::fabs(sum - 1.0f) < 1e-5f;
      }
      break;
    }
    case Op::attention:
    case Op::attention_causal:
    case Op::attention_naive: {
      fill(a_buf, n * d);
      fill(b_buf, n * d);
      fill(c_buf, n * d);
      const auto q = ma::make_view<const float>(a_buf, n, d), k = ma::make_view<const float>(b_buf, n, d),
                 v = ma::make_view<const float>(c_buf, n, d);
      const bool is_causal = c.op == Op::attention_causal;
      if (c.op == Op::attention_naive)
        timed([&] { mcu_bench::naive_attention(a_buf, b_buf, c_buf, out_buf, scores_buf, n, d, false); });
      else
        timed([&] {
          st = ma::attention(q, k, v, ma::make_view(out_buf, n, d), workspace, sizeof workspace / sizeof(float),
                             is_causal ? causal : ma::AttentionOptions{});
        });
      mcu_bench::naive_attention(a_buf, b_buf, c_buf, ref_buf, scores_buf, n, d, is_causal);
      ok = close(out_buf, ref_buf, n * d, 1e-5f);
      break;
    }
    case Op::layer_forward: {
      fill(layer_w, layer_dim * layer_dim);
      for (float& w : layer_w) w *= 0.125f;  // ~1/√d, so the scores stay in a sane range
      fill(layer_bias, layer_dim);
      fill(a_buf, n * layer_dim);
      timed([&] {
        st = layer.forward(ma::make_view<const float>(a_buf, n, layer_dim), ma::make_view(out_buf, n, layer_dim));
      });
      for (std::size_t i = 0; i < n * layer_dim; ++i) ok = ok && std::isfinite(out_buf[i]);
      break;
    }
    case Op::linear_f32:
    case Op::linear_f16:
    case Op::linear_q8:
    case Op::linear_q8_g64:
      ok = run_linear(c.op, n, d, t0, t1);
      break;
    case Op::llama_token:
      ok = n == 1 ? llama::run_model(llama::layers_q8, true, t0, t1)
                  : llama::run_model(llama::layers_f32, false, t0, t1);
      break;
  }
  cycles = t1 - t0;
  return ok && st == ma::Status::ok;
}

}  // namespace

int main(int argc, char** argv) {
  // An argument N runs case N alone (for profiles: scripts/mcu_bench.sh --profile TARGET N).
  const unsigned only = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 0;
  llama::profile_mode = argc > 2 ? std::atoi(argv[2]) : 0;
  const bool counting = cycle_counter_start();
  std::printf("microattn mcu_bench: kernels %s (%s), attention tile %u queries x %u keys, linear %s %s %s\n",
              ma::simd_arch(), ma::matmul_kernel_name(), static_cast<unsigned>(ma::attention_block_q),
              static_cast<unsigned>(ma::attention_block_kv), ma::linear_kernel_name(ma::Format::f32),
              ma::linear_kernel_name(ma::Format::f16), ma::linear_kernel_name(ma::Format::q8));
  if (!counting)
    std::printf(
        "DWT CYCCNT does not count here (QEMU, or no DWT): cycles are not available; count "
        "instructions with scripts/mcu_bench.sh\n");
  // Case 0 measures nothing: the cost of the markers themselves, which scripts/mcu_bench.sh subtracts.
  mcu_bench_mark_begin();
  mcu_bench_mark_end();
  std::printf("case 0 | markers | - | 0 | - | -\n");
  std::printf("case # | op | shape | MACs (softmax: elements) | cycles | cycles/MAC\n");
  int failures = 0;
  unsigned index = 1;
  for (const Case& c : cases) {
    if (only != 0 && index != only) {
      ++index;
      continue;
    }
    std::uint32_t cycles = 0;
    const bool ok = run_case(c, cycles);
    failures += ok ? 0 : 1;
    char shape[24];
    if (c.op == Op::matmul || c.op == Op::matmul_naive)
      std::snprintf(shape, sizeof shape, "%ux%ux%u", unsigned(c.n), unsigned(c.n), unsigned(c.n));
    else if (c.op == Op::linear_f32 || c.op == Op::linear_f16 || c.op == Op::linear_q8 || c.op == Op::linear_q8_g64)
      std::snprintf(shape, sizeof shape, "1x%ux%u", unsigned(c.n), unsigned(c.d));
    else if (c.op == Op::llama_token)
      std::snprintf(shape, sizeof shape, "260K_%s@%ux%u", n_is_q8(c) ? "q8" : "f32", unsigned(llama::prefill),
                    unsigned(llama::steps));
    else if (c.op == Op::layer_forward)
      std::snprintf(shape, sizeof shape, "<%u,%u,%u>x%u", unsigned(layer_seq), unsigned(layer_dim),
                    unsigned(layer_heads), unsigned(c.n));
    else
      std::snprintf(shape, sizeof shape, "%ux%u", unsigned(c.n), unsigned(c.d));
    const unsigned long w = work(c);  // newlib-nano's printf has no %llu
    if (counting)
      std::printf("case %u | %s | %s | %lu | %lu | %.3f%s\n", index, op_name(c.op), shape, w,
                  static_cast<unsigned long>(cycles), static_cast<double>(cycles) / static_cast<double>(w),
                  ok ? "" : " | WRONG RESULT");
    else
      std::printf("case %u | %s | %s | %lu | n/a | n/a%s\n", index, op_name(c.op), shape, w,
                  ok ? "" : " | WRONG RESULT");
    ++index;
  }
  if (failures != 0) std::printf("%d case(s) gave a wrong result\n", failures);
  return failures == 0 ? 0 : 1;
}
