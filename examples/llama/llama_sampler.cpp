#include "llama_sampler.hpp"

#include <algorithm>
#include <cmath>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 intrinsics (see llama_forward.cpp)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define LLAMA_SAMPLER_WIDE 1
#else
#define LLAMA_SAMPLER_WIDE 0
#endif

namespace llama {

namespace {

// Whether every x[i] / t is finite. Division rounds monotonically, so the largest magnitude decides (NaN aside).
bool scales_finitely(const float* x, int n, float t) noexcept {
  float top = 0.0f;
  bool nan = false;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    top = a > top ? a : top;
    nan |= a != a;
  }
  return !nan && std::isfinite(top / t);
}

#if LLAMA_SAMPLER_WIDE
// argmax's result by two vector passes: the largest value (vmaxps keeps its second operand, the running maximum,
// where the element is NaN, as the scalar comparison does), then the first index holding it. x[0] is not NaN.
__attribute__((target("avx512f"))) int argmax_avx512(const float* x, int n) noexcept {
  const __m512 first = _mm512_set1_ps(x[0]);
  __m512 best = first;
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = static_cast<__mmask16>(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1u);
    best = _mm512_max_ps(_mm512_mask_loadu_ps(first, m, x + i), best);
  }
  const __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(best));
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = static_cast<__mmask16>(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1u);
    const __mmask16 hit = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, x + i), top, _CMP_EQ_OQ);
    if (hit != 0) return i + __builtin_ctz(hit);
  }
  return 0;  // not reached: the largest value is one of x
}
const bool wide_argmax = __builtin_cpu_supports("avx512f");
#endif

}  // namespace

std::uint32_t Rng::next_u32() noexcept {
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return static_cast<std::uint32_t>((state * 0x2545F4914F6CDD1Dull) >> 32);
}

float Rng::next_f32() noexcept { return static_cast<float>(next_u32() >> 8) / 16777216.0f; }

int argmax(const float* x, int n) noexcept {
#if LLAMA_SAMPLER_WIDE
  if (wide_argmax && n >= 16 && x[0] == x[0]) return argmax_avx512(x, n);
#endif
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
  // A temperature so small that logits / temperature overflow (or logits that are not finite) would give the
  // softmax NaNs and the last index; argmax there is the limit of the temperature going to 0, -t 0's text.
  if (temperature_ == 0.0f || !scales_finitely(logits, vocab_size_, temperature_)) return argmax(logits, vocab_size_);
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
