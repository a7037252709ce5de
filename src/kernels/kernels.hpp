// Internal kernel interface. One table per compiled instruction set: the scalar table always exists (it is
// the only one on Cortex-M), the xsimd table exists when the build targets an xsimd architecture. Entry
// points validate arguments and then call selected_kernels(); the test harness calls every table.
#pragma once

#include <cstddef>

namespace microattn {
namespace detail {

// c (m×n, row stride ldc) = a (m×k, lda) · b, where b is k×n (ldb) or, with transpose_b, n×k (ldb).
struct GemmArgs {
  const float* a;
  std::size_t lda;
  const float* b;
  std::size_t ldb;
  bool transpose_b;
  float* c;
  std::size_t ldc;
  std::size_t m, n, k;
};

struct Kernels {
  const char* name;           // "scalar", "avx512bw", "fma3+avx2", "sse2", "neon64", ...
  std::size_t vector_floats;  // lanes per vector register (1 for scalar)
  const char* gemm_name;      // micro-kernel by tile and arch, e.g. "gemm_8x32_avx512"
  void (*gemm)(const GemmArgs& args) noexcept;
  void (*softmax_row)(float* x, std::size_t n) noexcept;          // in place, n >= 1
  void (*exp)(const float* x, float* y, std::size_t n) noexcept;  // x == y allowed
};

const Kernels& scalar_kernels() noexcept;
// nullptr when the build has no xsimd architecture (Cortex-M, -Dsimd=scalar).
const Kernels* simd_kernels() noexcept;
// What the entry points use: the xsimd table when there is one, else the scalar table.
inline const Kernels& selected_kernels() noexcept {
  const Kernels* s = simd_kernels();
  return s != nullptr ? *s : scalar_kernels();
}

}  // namespace detail
}  // namespace microattn
