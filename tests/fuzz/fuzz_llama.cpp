// libFuzzer target: examples/llama's llama2.c checkpoint loader and tokenizer on arbitrary bytes.
//
// Input: a mode byte, then (mode bit 0 clear) a whole checkpoint file, or (set) two bytes of vocabulary size
// (1 + little-endian u16 % 4096) and a whole tokenizer.bin.
// Checks: the loaders never read outside the bytes (ASan), every tensor of an accepted checkpoint lies inside
// them with the header's shapes, a refusal carries a message and leaves the model empty; an accepted small model
// runs two forward steps; an accepted tokenizer encodes a fixed and a fuzzed text into ids inside the vocabulary
// and decodes every id. MICROATTN_FUZZ_PLANT=status: an accepted file counts as a failure (the check can fail).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "llama_forward.hpp"
#include "llama_model.hpp"
#include "llama_tokenizer.hpp"

namespace {

using namespace fuzz;

void check_inside(const void* p, std::size_t bytes, const unsigned char* data, std::size_t size, const char* what) {
  const auto* b = static_cast<const unsigned char*>(p);
  if (b < data || b > data + size || bytes > static_cast<std::size_t>(data + size - b))
    fail("%s (%zu bytes) lies outside the file of %zu bytes", what, bytes, size);
}

void check_matrix(const microattn::WeightMatrix& w, std::size_t rows, std::size_t cols, const unsigned char* data,
                  std::size_t size, const char* what) {
  if (w.rows != rows || w.cols != cols) fail("%s is %zu x %zu, want %zu x %zu", what, w.rows, w.cols, rows, cols);
  const std::size_t n = rows * cols;
  if (w.format == microattn::Format::f32) {
    check_inside(w.data, n * 4, data, size, what);
  } else {
    check_inside(w.data, n, data, size, what);
    if (w.group == 0 || n % w.group != 0) fail("%s: group %zu does not divide %zu", what, w.group, n);
  }
}

int run_checkpoint(const unsigned char* data, std::size_t size) {
  llama::Model m;
  const llama::LoadResult r = llama::load_checkpoint(data, size, m);
  set_context("checkpoint of %zu bytes: %s", size, r.message);
  if (!r.ok()) {
    if (r.message[0] == '\0' || !m.layers.empty()) fail("a refusal without a message, or with a model");
    return 0;
  }
  if (plant() == Plant::status) fail("planted: an accepted checkpoint");
  const llama::Config& p = m.config;
  const std::size_t d = p.dim, h = p.hidden_dim, kv = p.kv_dim(), v = p.vocab_size;
  check_matrix(m.embedding, v, d, data, size, "embedding");
  check_matrix(m.classifier, v, d, data, size, "classifier");
  check_inside(m.final_norm, d * 4, data, size, "final norm");
  if (m.layers.size() != static_cast<std::size_t>(p.n_layers)) fail("%zu layers", m.layers.size());
  for (const auto& l : m.layers) {
    check_inside(l.attention_norm, d * 4, data, size, "attention norm");
    check_inside(l.ffn_norm, d * 4, data, size, "ffn norm");
    check_matrix(l.wq, d, d, data, size, "wq");
    check_matrix(l.wk, kv, d, data, size, "wk");
    check_matrix(l.wv, kv, d, data, size, "wv");
    check_matrix(l.wo, d, d, data, size, "wo");
    check_matrix(l.w1, h, d, data, size, "w1");
    check_matrix(l.w2, d, h, data, size, "w2");
    check_matrix(l.w3, h, d, data, size, "w3");
  }
  if (d <= 64 && h <= 256 && v <= 1024 && p.n_layers <= 4) {
    llama::RunState s;
    const std::size_t steps = p.seq_len < 2 ? 1 : 2;
    if (!llama::init_state(m, steps, s)) fail("no state for %zu positions", steps);
    for (std::size_t pos = 0; pos < steps; ++pos) llama::forward(m, s, static_cast<int>(pos ? v - 1 : 0), pos);
  }
  return 0;
}

int run_tokenizer(const unsigned char* data, std::size_t size, int vocab) {
  llama::Tokenizer t;
  const llama::LoadResult r = t.load(data, size, vocab);
  set_context("tokenizer of %zu bytes, vocabulary %d: %s", size, vocab, r.message);
  if (!r.ok()) {
    if (r.message[0] == '\0' || t.vocab_size() != 0) fail("a refusal without a message, or with tokens");
    return 0;
  }
  if (plant() == Plant::status) fail("planted: an accepted tokenizer");
  const std::string texts[] = {"Once upon a time \xc3\xa9\xe2\x80\x94\x01\x80",
                               std::string(reinterpret_cast<const char*>(data), size < 48 ? size : 48)};
  for (const std::string& text : texts) {
    std::vector<int> ids;
    std::string err;
    if (!t.encode(text, true, true, ids, err)) {
      if (err.empty()) fail("encode failed without a message");
      continue;
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab) fail("id %d outside the vocabulary of %d", ids[i], vocab);
      if (i > 0) (void)llama::Tokenizer::printable(t.decode(ids[i - 1], ids[i]));
    }
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  std::size_t skip = (mode & 1u) != 0 ? 3 : 1;
  if (size < skip) return 0;
  int vocab = 0;
  if ((mode & 1u) != 0) vocab = 1 + (data[1] | (data[2] << 8)) % 4096;
  // The file's bytes at a 4-byte aligned address, as a mapping gives them.
  std::vector<std::uint32_t> aligned((size - skip) / 4 + 1);
  std::memcpy(aligned.data(), data + skip, size - skip);
  const auto* file = reinterpret_cast<const unsigned char*>(aligned.data());
  return (mode & 1u) != 0 ? run_tokenizer(file, size - skip, vocab) : run_checkpoint(file, size - skip);
}
