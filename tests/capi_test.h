/* What the C tests of the C API share (test_capi.c, test_capi_blocks.c): the check counters and CHECK, the
 * xorshift32 generator (the same values on every target) and the NaN canary. C99. */
#ifndef MICROATTN_TESTS_CAPI_TEST_H
#define MICROATTN_TESTS_CAPI_TEST_H

#include <stdio.h>
#include <string.h>

static int failures = 0;
static int checks = 0;

#define CHECK(cond, ...)                                       \
  do {                                                         \
    ++checks;                                                  \
    if (!(cond)) {                                             \
      if (++failures <= 20) {                                  \
        printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
        printf(__VA_ARGS__);                                   \
        printf("\n");                                          \
      }                                                        \
    }                                                          \
  } while (0)

static unsigned rng_state = 2463534242u;
static inline unsigned next_bits(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return rng_state;
}
static inline float uniform(float lo, float hi) {
  return lo + (hi - lo) * (float)((next_bits() >> 8) * (1.0 / 16777216.0));
}

/* Every float a correct call does not write is NaN with this payload. */
static inline float canary(void) {
  const unsigned bits = 0x7fc0beefu;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

#endif
