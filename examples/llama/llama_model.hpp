// llama2.c checkpoints (run.c's version 0, runq.c's version 2) read in place from a file's bytes.
//
// Version 0: seven int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative
// vocab_size means a separate classifier), then fp32 tensors: embedding, attention norms, wq, wk, wv, wo, ffn
// norms, w1, w2, w3, final norm, two unused rope tables (seq_len · head_dim / 2 floats each), classifier.
// Version 2: uint32 magic "ak42" (0x616b3432), int32 version 2, the seven int32 (vocab_size positive), a byte
// shared_classifier, int32 group_size, zeros to 256 bytes; fp32 attention norms, ffn norms, final norm; then
// q8 tensors, each as its int8 values followed by one fp32 scale per group of group_size values: embedding,
// wq, wk, wv, wo, w1, w2, w3 (one tensor per layer each), classifier.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <microattn/weights.hpp>

namespace llama {

enum class LoadStatus {
  ok = 0,
  truncated,      // the file ends before its header or before the tensors its shapes need
  bad_magic,      // a versioned header whose version is not 2
  bad_header,     // a header field out of range or inconsistent with another
  bad_group,      // group_size not positive or not dividing a quantized tensor
  too_big,        // a size that overflows 64-bit arithmetic
  size_mismatch,  // the file is longer than its shapes need
};

const char* to_string(LoadStatus s) noexcept;

// A result with a human-readable message naming the field or offset at fault.
struct LoadResult {
  LoadStatus status = LoadStatus::ok;
  char message[200] = {};
  bool ok() const noexcept { return status == LoadStatus::ok; }
};

struct Config {
  int dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
  int version = 0;  // 0 or 2
  bool shared_classifier = false;
  int group_size = 0;  // version 2
  int head_dim() const noexcept { return dim / n_heads; }
  int kv_dim() const noexcept { return head_dim() * n_kv_heads; }
};

struct LayerWeights {
  const float* attention_norm;
  const float* ffn_norm;
  microattn::WeightMatrix wq, wk, wv, wo, w1, w2, w3;
};

struct Model {
  Config config;
  microattn::WeightMatrix embedding;  // vocab_size × dim (f32 or q8)
  std::vector<LayerWeights> layers;
  const float* final_norm = nullptr;
  microattn::WeightMatrix classifier;  // vocab_size × dim
  // Scales of a q8 tensor whose offset in the file is not 4-byte aligned are copied here (everything else points
  // into the file): a tensor of an odd number of quadruples of values shifts every later scale array.
  std::vector<std::vector<float>> owned_scales;

  // Row `token` of the embedding as floats (q8: dequantized as runq.c, value · scale).
  void embedding_row(int token, float* out) const noexcept;
};

// Reads a checkpoint from `size` bytes at `data` (4-byte aligned; a mapped file is). Every header field and size
// is checked; on error `model` is left empty and the result says why. The model points into `data`, which must
// outlive it.
LoadResult load_checkpoint(const unsigned char* data, std::size_t size, Model& model);

}  // namespace llama
