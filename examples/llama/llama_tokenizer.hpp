// llama2.c's tokenizer.bin and its byte-pair encoding, with run.c's semantics.
//
// File: int32 max_token_length, then per token: float score, int32 length, that many bytes (no terminator).
// The file holds exactly vocab_size tokens (the model's; the file does not say). Tokens 0, 1, 2 are <unk>,
// BOS, EOS; tokens 3..258 are the byte-fallback tokens <0x00>..<0xFF> when the vocabulary has them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "llama_model.hpp"

namespace llama {

class Tokenizer {
 public:
  static constexpr int bos = 1, eos = 2;

  // Reads `size` bytes at `data`; tokens are compared as C strings, as run.c does (a byte 0 ends a token).
  LoadResult load(const unsigned char* data, std::size_t size, int vocab_size);

  int vocab_size() const noexcept { return static_cast<int>(pieces_.size()); }
  const std::string& piece(int id) const { return pieces_[static_cast<std::size_t>(id)]; }
  float score(int id) const { return scores_[static_cast<std::size_t>(id)]; }

  // The id of a token spelled exactly `s`, or -1.
  int lookup(const std::string& s) const;

  // run.c's encode: optional BOS, a dummy-prefix " " token when text is not empty, each UTF-8 code point as its
  // token or as byte tokens (byte + 3), then repeated merges of the adjacent pair whose merged token scores best
  // (the first such pair on a tie; run.c's merges in its order, found in O(n log n)), optional EOS. Returns false
  // with a message when the vocabulary lacks a token the text needs (" " or a byte token): run.c would index out of
  // range there. `work`, when given: the vocabulary lookups and merge-queue operations the encoding took, a
  // deterministic measure of its cost for the tests.
  bool encode(const std::string& text, bool add_bos, bool add_eos, std::vector<int>& tokens, std::string& error,
              std::size_t* work = nullptr) const;

  // run.c's decode: the piece of `token`, its leading space dropped after BOS, a <0xHH> piece as that byte.
  std::string decode(int prev_token, int token) const;

  // run.c's safe_printf rule: a one-byte piece that is neither printable nor whitespace is not printed.
  static bool printable(const std::string& piece);

 private:
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int> sorted_;  // ids ordered by strcmp of their pieces (ties: lower id first)
  unsigned max_token_length_ = 0;
};

}  // namespace llama
