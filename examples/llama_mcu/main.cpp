// Firmware example: a llama2.c model generating text on a microcontroller, greedily (run.c's -t 0), from const
// arrays in flash written by scripts/export_llama.py. Under QEMU the text reaches the host over semihosting;
// natively it is an ordinary program. The build names the exported header (LLAMA_FW_HEADER) and the number of
// tokens to generate (LLAMA_FW_STEPS).
//
// What it does per token, as run.c: the token's embedding row (dequantized from the weights' format), every
// decoder layer's append (attention over the layer's K/V cache, feed-forward), the final RMSNorm, the classifier
// through linear(), the first maximum of the logits. It starts from BOS (1), stops early at BOS, and prints each
// token as run.c does (the space after BOS dropped, <0xHH> pieces as raw bytes, unprintable single bytes skipped).
//
// Memory, all fixed at compile time (no heap):
//  - flash: the weights (the header's LLAMA_WEIGHT_BYTES) and the vocabulary;
//  - .bss: each layer's K/V cache for LLAMA_FW_MAX_SEQ positions (default: the model's seq_len) in the cache
//    format, one LayerScratch shared by the layers (they run one after another), a row of activations, the logits.
// The cache's format follows the weights' (f32: f32; f16: f16; q8: q8, a quarter of f32's RAM plus a scale per
// position and KV head), as a firmware short of RAM would pick; -DLLAMA_FW_CACHE=0/1/2 (Format's values) overrides.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>

#include <microattn/blocks.hpp>
#include <microattn/microattn.hpp>

#ifndef LLAMA_FW_HEADER
#error "define LLAMA_FW_HEADER as the header scripts/export_llama.py wrote, e.g. -DLLAMA_FW_HEADER='\"llama.h\"'"
#endif
#include LLAMA_FW_HEADER
// Tests: the expected text (llama_expected, LLAMA_EXPECTED_BYTES: the host runner's, or for f16 a float64
// reference's), which the printed text must equal byte for byte (exit status 1 otherwise).
#ifdef LLAMA_FW_EXPECTED
#include LLAMA_FW_EXPECTED
#endif

namespace ma = microattn;

#ifndef LLAMA_FW_MAX_SEQ
#define LLAMA_FW_MAX_SEQ LLAMA_SEQ
#endif
#ifndef LLAMA_FW_STEPS
#define LLAMA_FW_STEPS LLAMA_FW_MAX_SEQ
#endif
#ifndef LLAMA_FW_CACHE
#define LLAMA_FW_CACHE LLAMA_FORMAT
#endif

namespace {

constexpr std::size_t max_seq = LLAMA_FW_MAX_SEQ, steps = LLAMA_FW_STEPS, dim = LLAMA_DIM, vocab = LLAMA_VOCAB;
static_assert(max_seq <= LLAMA_SEQ, "the model's rope and training cover LLAMA_SEQ positions");
static_assert(steps <= max_seq, "each generated token takes a cache position");
constexpr ma::Format cache_format = static_cast<ma::Format>(LLAMA_FW_CACHE);
constexpr int bos = 1;  // llama2.c's fixed BOS id

using Layer =
    ma::DecoderLayerSharedScratch<max_seq, LLAMA_DIM, LLAMA_HEADS, LLAMA_KV_HEADS, LLAMA_HIDDEN, cache_format>;
using Scratch =
    ma::LayerScratch<ma::decoder_layer_scratch_floats(max_seq, LLAMA_DIM, LLAMA_HEADS, LLAMA_HIDDEN, cache_format)>;

ma::DecoderLayerConfig llama2c_config() {
  ma::DecoderLayerConfig c;
  c.attention.rope_theta = 10000.0f;    // llama2.c's base
  c.attention.rope_interleaved = true;  // pairs (2i, 2i + 1), as run.c rotates them
  c.rms_norm_eps = 1e-5f;
  return c;
}

Scratch scratch;

template <std::size_t... I>
struct LayerStack {
  Layer layer[sizeof...(I)];
  explicit LayerStack(std::index_sequence<I...>) : layer{Layer{llama_layers[I], scratch, llama2c_config()}...} {}
};
LayerStack stack{std::make_index_sequence<LLAMA_LAYERS>{}};

alignas(16) float x[dim];
alignas(16) float logits[vocab];

// Row `token` of the embedding as floats (q8: scale · value, as runq.c dequantizes it).
void embed(int token, float* out) {
  const ma::WeightMatrix& e = llama_embedding_matrix;
  const std::size_t first = static_cast<std::size_t>(token) * e.cols;
  for (std::size_t i = 0; i < e.cols; ++i) {
    if (e.format == ma::Format::f32)
      out[i] = static_cast<const float*>(e.data)[first + i];
    else if (e.format == ma::Format::f16)
      out[i] = ma::float_from_f16(static_cast<const std::uint16_t*>(e.data)[first + i]);
    else
      out[i] = static_cast<float>(static_cast<const std::int8_t*>(e.data)[first + i]) * e.scales[(first + i) / e.group];
  }
}

// The first maximum, as run.c; `gap` gets (best - second best) / |best|: how close another implementation's
// rounding (a summation order, a quantized cache) would have to come to pick another token here.
int argmax(const float* v, std::size_t n, float& gap) {
  std::size_t best = 0;
  float second = -3.4e38f;
  for (std::size_t i = 1; i < n; ++i) {
    if (v[i] > v[best]) {
      second = v[best];
      best = i;
    } else if (v[i] > second) {
      second = v[i];
    }
  }
  gap = v[best] != 0.0f ? (v[best] - second) / (v[best] < 0.0f ? -v[best] : v[best]) : 0.0f;
  return static_cast<int>(best);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Every printed byte, compared with the expected text where there is one.
std::size_t printed = 0, first_difference = static_cast<std::size_t>(-1);
void emit(const char* p, std::size_t n) {
  std::printf("%.*s", static_cast<int>(n), p);
#ifdef LLAMA_FW_EXPECTED
  for (std::size_t i = 0; i < n && first_difference == static_cast<std::size_t>(-1); ++i)
    if (printed + i >= LLAMA_EXPECTED_BYTES || static_cast<unsigned char>(p[i]) != llama_expected[printed + i])
      first_difference = printed + i;
#endif
  printed += n;
}

// Prints `token` as run.c's decode and safe_printf do after `prev`.
void print_token(int prev, int token) {
  const char* p = llama_vocab_bytes + llama_vocab_offsets[token];
  std::size_t n = llama_vocab_offsets[token + 1] - llama_vocab_offsets[token];
  if (prev == bos && n > 0 && p[0] == ' ') {
    ++p;
    --n;
  }
  char byte;
  // "<0x" and one or two hex digits: a raw byte (run.c's sscanf "<0x%02hhX>"; the '>' is not checked).
  if (n >= 4 && std::memcmp(p, "<0x", 3) == 0 && hex_digit(p[3]) >= 0) {
    const int lo = n > 4 ? hex_digit(p[4]) : -1;
    byte = static_cast<char>(lo >= 0 ? hex_digit(p[3]) * 16 + lo : hex_digit(p[3]));
    if (byte == 0) return;
    p = &byte;
    n = 1;
  }
  if (n == 0) return;
  if (n == 1) {  // a lone control byte (or a byte >= 0x80) is not printed
    const unsigned char b = static_cast<unsigned char>(p[0]);
    if (!((b >= 0x20 && b < 0x7f) || (b >= 0x09 && b <= 0x0d))) return;
  }
  emit(p, n);
}

bool ok(ma::Status s, const char* what) {
  if (s == ma::Status::ok) return true;
  std::printf("\n[llama_mcu] %s failed: %s\n", what, ma::to_string(s));
  return false;
}

}  // namespace

int main() {
  int token = bos;
  std::size_t pos = 0, closest_pos = 0;
  float closest = 3.4e38f;
  const auto xv = ma::make_view(x, 1, dim);
  while (pos < steps) {
    embed(token, x);
    for (Layer& layer : stack.layer)
      if (!ok(layer.append(xv, xv), "append")) return 1;
    if (!ok(ma::rms_norm_rows(xv, llama_final_norm, 1e-5f, xv), "rms_norm_rows")) return 1;
    if (!ok(ma::linear(xv, llama_classifier_matrix, nullptr, ma::make_view(logits, 1, vocab)), "linear")) return 1;
    float gap;
    const int next = argmax(logits, vocab, gap);
    if (gap < closest) {
      closest = gap;
      closest_pos = pos;
    }
    ++pos;
    if (next == bos) break;
    print_token(token, next);
    token = next;
  }
  emit("\n", 1);
  static const char* const formats[] = {"f32", "f16", "q8"};
  std::printf("[llama_mcu] %u tokens; weights %s, %u bytes; K/V cache %s for %u positions, %u bytes in all\n",
              static_cast<unsigned>(pos), formats[LLAMA_FORMAT], static_cast<unsigned>(LLAMA_WEIGHT_BYTES),
              formats[static_cast<int>(cache_format)], static_cast<unsigned>(max_seq),
              static_cast<unsigned>(LLAMA_LAYERS * Layer::cache_bytes));
  // The near-tie report: text compared with another implementation's is only robust up to here.
  std::printf("[llama_mcu] closest call: the two best logits %.2e apart (relative) at position %u\n",
              static_cast<double>(closest), static_cast<unsigned>(closest_pos));
#ifdef LLAMA_FW_EXPECTED
  if (first_difference == static_cast<std::size_t>(-1) && printed != LLAMA_EXPECTED_BYTES) first_difference = printed;
  if (first_difference != static_cast<std::size_t>(-1)) {
    std::printf("[llama_mcu] FAIL: the text differs from the expected one (%u bytes) at byte %u\n",
                static_cast<unsigned>(LLAMA_EXPECTED_BYTES), static_cast<unsigned>(first_difference));
    return 1;
  }
  std::printf("[llama_mcu] PASS: the text is the expected one, %u bytes\n", static_cast<unsigned>(printed));
#endif
  return 0;
}
