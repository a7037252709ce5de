#include "llama_sampler.hpp"

#include <algorithm>
#include <cmath>

namespace llama {

std::uint32_t Rng::next_u32() noexcept {
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return static_cast<std::uint32_t>((state * 0x2545F4914F6CDD1Dull) >> 32);
}

float Rng::next_f32() noexcept { return static_cast<float>(next_u32() >> 8) / 16777216.0f; }

int argmax(const float* x, int n) noexcept {
  int best = 0;
  float best_value = x[0];
  for (int i = 1; i < n; ++i)
    if (x[i] > best_value) {
      best = i;
      best_value = x[i];
    }
  return best;
}

void softmax(float* x, int n) noexcept {
  float max_value = x[0];
  for (int i = 1; i < n; ++i)
    if (x[i] > max_value) max_value = x[i];
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  for (int i = 0; i < n; ++i) x[i] /= sum;
}

Sampler::Sampler(int vocab_size, float temperature, float topp, std::uint64_t seed)
    : vocab_size_(vocab_size), temperature_(temperature), topp_(topp), rng_{seed} {}

int Sampler::sample_topp(const float* probs, float coin) {
  // run.c's nucleus sampling: tokens below (1 - topp) / (n - 1) cannot be in the nucleus and are dropped before
  // sorting; the nucleus ends at the first token whose cumulative probability exceeds topp.
  const int n = vocab_size_;
  const float cutoff = (1.0f - topp_) / static_cast<float>(n - 1);
  candidates_.clear();
  for (int i = 0; i < n; ++i)
    if (probs[i] >= cutoff) candidates_.push_back({probs[i], i});
  if (candidates_.empty()) return n - 1;  // only NaN probabilities: run.c would read before its array
  // Descending by probability; glibc's qsort, which run.c calls, merges stably, so equal ones keep index order.
  std::stable_sort(candidates_.begin(), candidates_.end(),
                   [](const ProbIndex& a, const ProbIndex& b) { return a.prob > b.prob; });
  float cumulative = 0.0f;
  std::size_t last = candidates_.size() - 1;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += candidates_[i].prob;
    if (cumulative > topp_) {
      last = i;
      break;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0.0f;
  for (std::size_t i = 0; i <= last; ++i) {
    cdf += candidates_[i].prob;
    if (r < cdf) return candidates_[i].index;
  }
  return candidates_[last].index;
}

int Sampler::sample(float* logits) {
  if (temperature_ == 0.0f) return argmax(logits, vocab_size_);
  for (int i = 0; i < vocab_size_; ++i) logits[i] /= temperature_;
  softmax(logits, vocab_size_);
  const float coin = rng_.next_f32();
  if (topp_ <= 0.0f || topp_ >= 1.0f) {
    float cdf = 0.0f;
    for (int i = 0; i < vocab_size_; ++i) {
      cdf += logits[i];
      if (coin < cdf) return i;
    }
    return vocab_size_ - 1;
  }
  return sample_topp(logits, coin);
}

}  // namespace llama
