#include "llama_tokenizer.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace llama {

namespace {

LoadResult failure(LoadStatus s, const char* message) {
  LoadResult r;
  r.status = s;
  std::snprintf(r.message, sizeof r.message, "%s", message);
  return r;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

LoadResult Tokenizer::load(const unsigned char* data, std::size_t size, int vocab_size) {
  pieces_.clear();
  scores_.clear();
  sorted_.clear();
  char msg[200];
  // run.c's fixed ids BOS 1 and EOS 2 must exist.
  if (vocab_size < 3) {
    std::snprintf(msg, sizeof msg, "tokenizer: a vocabulary of %d tokens has no BOS (1) and EOS (2)", vocab_size);
    return failure(LoadStatus::bad_header, msg);
  }
  if (data == nullptr || size < 4)
    return failure(LoadStatus::truncated, "tokenizer: file shorter than its 4-byte header");
  std::int32_t max_len;
  std::memcpy(&max_len, data, 4);
  if (max_len <= 0) {
    std::snprintf(msg, sizeof msg, "tokenizer: max_token_length is %d, must be positive", max_len);
    return failure(LoadStatus::bad_header, msg);
  }
  std::vector<std::string> pieces;
  std::vector<float> scores;
  // Each token takes at least 8 bytes: a vocabulary the file cannot hold is refused before anything is reserved.
  if (static_cast<std::uint64_t>(vocab_size) * 8 > size - 4) {
    std::snprintf(msg, sizeof msg, "tokenizer: file of %zu bytes cannot hold %d tokens", size, vocab_size);
    return failure(LoadStatus::truncated, msg);
  }
  pieces.reserve(static_cast<std::size_t>(vocab_size));
  scores.reserve(static_cast<std::size_t>(vocab_size));
  std::size_t at = 4;
  for (int i = 0; i < vocab_size; ++i) {
    if (size - at < 8) {
      std::snprintf(msg, sizeof msg, "tokenizer: file ends in the header of token %d (offset %zu)", i, at);
      return failure(LoadStatus::truncated, msg);
    }
    float score;
    std::int32_t len;
    std::memcpy(&score, data + at, 4);
    std::memcpy(&len, data + at + 4, 4);
    at += 8;
    if (len < 0 || len > max_len) {
      std::snprintf(msg, sizeof msg, "tokenizer: token %d has length %d, outside 0..max_token_length %d", i, len,
                    max_len);
      return failure(LoadStatus::bad_header, msg);
    }
    if (size - at < static_cast<std::size_t>(len)) {
      std::snprintf(msg, sizeof msg, "tokenizer: file ends inside token %d (offset %zu, length %d)", i, at, len);
      return failure(LoadStatus::truncated, msg);
    }
    const char* s = reinterpret_cast<const char*>(data + at);
    pieces.emplace_back(s, strnlen(s, static_cast<std::size_t>(len)));
    scores.push_back(score);
    at += static_cast<std::size_t>(len);
  }
  if (at != size) {
    std::snprintf(msg, sizeof msg, "tokenizer: %zu bytes after the %d tokens of the model's vocabulary", size - at,
                  vocab_size);
    return failure(LoadStatus::size_mismatch, msg);
  }
  pieces_ = std::move(pieces);
  scores_ = std::move(scores);
  max_token_length_ = static_cast<unsigned>(max_len);
  sorted_.resize(pieces_.size());
  for (std::size_t i = 0; i < sorted_.size(); ++i) sorted_[i] = static_cast<int>(i);
  std::stable_sort(sorted_.begin(), sorted_.end(),
                   [&](int a, int b) { return std::strcmp(piece(a).c_str(), piece(b).c_str()) < 0; });
  return LoadResult{};
}

int Tokenizer::lookup(const std::string& s) const {
  const char* key = s.c_str();
  auto it = std::lower_bound(sorted_.begin(), sorted_.end(), key,
                             [&](int id, const char* k) { return std::strcmp(piece(id).c_str(), k) < 0; });
  return it != sorted_.end() && std::strcmp(piece(*it).c_str(), key) == 0 ? *it : -1;
}

namespace {

// A possible merge of two adjacent symbols. `left` is the left symbol's index in the initial sequence; symbols keep
// their order as they merge, so the smaller index is the pair further left. The stamps are the two symbols' at
// the time the merge was queued: one that changed since (merged, or absorbed) makes the entry stale.
struct Merge {
  float score;
  std::size_t left, right;
  int id;
  std::uint32_t left_stamp, right_stamp;
};

// The heap's top is the best score and, among equal scores, the leftmost pair: the quadratic scan's choice.
bool queued_after(const Merge& a, const Merge& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

bool Tokenizer::encode(const std::string& text, bool add_bos, bool add_eos, std::vector<int>& tokens,
                       std::string& error, std::size_t* work) const {
  std::size_t lookups = 0, queue_operations = 0;
  tokens.clear();
  const int n_vocab = vocab_size();
  if (add_bos) tokens.push_back(bos);
  const char* c = text.c_str();  // as run.c: the text ends at its first byte 0
  if (*c != '\0') {
    const int space = lookup(" ");
    if (space < 0) {
      error = "the tokenizer has no \" \" token (the dummy prefix)";
      return false;
    }
    tokens.push_back(space);
  }
  std::string buf;
  for (; *c != '\0'; ++c) {
    // A code point: a lead (or ASCII) byte and its continuation bytes, at most four bytes in all.
    if ((static_cast<unsigned char>(*c) & 0xC0) != 0x80) buf.clear();
    buf.push_back(*c);
    if ((static_cast<unsigned char>(c[1]) & 0xC0) == 0x80 && buf.size() < 4) continue;
    const int id = lookup(buf);
    ++lookups;
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      for (char b : buf) {
        const int byte_id = static_cast<unsigned char>(b) + 3;
        if (byte_id >= n_vocab) {
          char msg[120];
          std::snprintf(msg, sizeof msg, "the text needs byte token %d (byte 0x%02X), beyond the vocabulary of %d",
                        byte_id, static_cast<unsigned char>(b), n_vocab);
          error = msg;
          return false;
        }
        tokens.push_back(byte_id);
      }
    }
    buf.clear();
  }

  // run.c merges the best-scoring adjacent pair (the leftmost on a tie) until none merges, scanning every pair for
  // every merge: quadratic in the text. The same merges in the same order from a heap of the possible ones over a
  // linked list of symbols: each merge queues the two pairs it makes, stale entries are dropped when they surface.
  const std::size_t n = tokens.size();
  if (n >= 2) {
    std::vector<std::size_t> prev(n), next(n);
    std::vector<std::uint32_t> stamp(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      prev[i] = i - 1;  // wraps for the first: no symbol before it
      next[i] = i + 1;  // n: none after
    }
    std::vector<Merge> heap;
    heap.reserve(n);
    const auto queue_pair = [&](std::size_t left) {
      const std::size_t right = next[left];
      if (right >= n) return;
      const int id = lookup(piece(tokens[left]) + piece(tokens[right]));
      ++lookups;
      // run.c's scan starts from a best score of -1e10 and takes only a better one: a token scoring -1e10 or less,
      // or NaN, never merges.
      if (id < 0 || !(score(id) > -1e10f)) return;
      heap.push_back({score(id), left, right, id, stamp[left], stamp[right]});
      std::push_heap(heap.begin(), heap.end(), queued_after);
      ++queue_operations;
    };
    for (std::size_t i = 0; i + 1 < n; ++i) queue_pair(i);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), queued_after);
      const Merge m = heap.back();
      heap.pop_back();
      ++queue_operations;
      if (stamp[m.left] != m.left_stamp || stamp[m.right] != m.right_stamp) continue;
      tokens[m.left] = m.id;
      ++stamp[m.left];
      ++stamp[m.right];
      next[m.left] = next[m.right];
      if (next[m.left] < n) prev[next[m.left]] = m.left;
      if (prev[m.left] < n) queue_pair(prev[m.left]);
      queue_pair(m.left);
    }
    std::size_t kept = 0;
    for (std::size_t i = 0; i < n; i = next[i]) tokens[kept++] = tokens[i];  // symbol 0 is never absorbed
    tokens.resize(kept);
  }
  if (add_eos) tokens.push_back(eos);
  if (work != nullptr) *work = lookups + queue_operations;
  return true;
}

std::string Tokenizer::decode(int prev_token, int token) const {
  const std::string& p = piece(token);
  std::size_t start = prev_token == bos && !p.empty() && p[0] == ' ' ? 1 : 0;
  // run.c reads "<0x%02hhX>": "<0x" and one or two hex digits name a raw byte (the closing '>' is not checked).
  if (p.size() - start >= 4 && p.compare(start, 3, "<0x") == 0) {
    const int hi = hex_digit(p[start + 3]);
    if (hi >= 0) {
      const int lo = p.size() - start > 4 ? hex_digit(p[start + 4]) : -1;
      const int byte = lo >= 0 ? hi * 16 + lo : hi;
      return byte == 0 ? std::string() : std::string(1, static_cast<char>(byte));
    }
  }
  return p.substr(start);
}

bool Tokenizer::printable(const std::string& piece) {
  if (piece.empty()) return false;
  if (piece.size() == 1) {
    const unsigned char b = static_cast<unsigned char>(piece[0]);
    return std::isprint(b) || std::isspace(b);
  }
  return true;
}

}  // namespace llama
