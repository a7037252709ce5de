// Token sampling with run.c's semantics and random numbers: the same seed and logits give the same tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace llama {

// run.c's xorshift* generator.
struct Rng {
  std::uint64_t state;
  std::uint32_t next_u32() noexcept;
  float next_f32() noexcept;  // in [0, 1): the top 24 bits of next_u32
};

class Sampler {
 public:
  // temperature 0: argmax (no random number drawn), as for any temperature at which some logit / temperature is
  // not finite. topp outside (0, 1): plain sampling from the softmax.
  Sampler(int vocab_size, float temperature, float topp, std::uint64_t seed);
  // Overwrites logits (divided by the temperature, then softmax) unless it takes the argmax.
  int sample(float* logits);

 private:
  struct ProbIndex {
    float prob;
    int index;
  };
  int vocab_size_;
  float temperature_, topp_;
  Rng rng_;
  std::vector<ProbIndex> candidates_;
  int sample_topp(const float* probs, float coin);
};

int argmax(const float* x, int n) noexcept;  // the first index of the largest value (NaN never wins)
void softmax(float* x, int n) noexcept;      // run.c's: max subtracted, expf, divided by the sum

}  // namespace llama
