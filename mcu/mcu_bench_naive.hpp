// The yardsticks of mcu/mcu_bench.cpp: the plain loops a firmware would write without a library, compiled
// -O2 (mcu/meson.build) with newlib's expf. Also the reference its results are checked against.
#pragma once

#include <cstddef>

namespace mcu_bench {

// c (m×n) = a (m×k) · b (k×n), row-major, three loops.
void naive_matmul(const float* a, const float* b, float* c, std::size_t m, std::size_t k, std::size_t n);

// out = softmax(q·kᵀ/√d)·v for n queries and n keys of head size d (row-major n×d each); causal: query i
// sees keys j <= i. scores: n floats of scratch (one row).
void naive_attention(const float* q, const float* k, const float* v, float* out, float* scores, std::size_t n,
                     std::size_t d, bool causal);

}  // namespace mcu_bench
