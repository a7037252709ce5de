// Shared test machinery: the tolerance policy, canary-guarded matrices, random fills and the list of
// kernel tables this build compiled (the comparison harness runs every table).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/linear.hpp"
#include "microattn/microattn.hpp"
#include "tolerance.hpp"

namespace testing_support {

// The float specials every suite uses, defined once: the test programs compile as unity builds.
inline constexpr float inf = std::numeric_limits<float>::infinity();
inline constexpr float nan_value = std::numeric_limits<float>::quiet_NaN();

// ---- canary-guarded matrix -----------------------------------------------------------------------------
// rows × cols inside a rows × stride layout, `guard` floats before and after, optionally shifted by one
// float so data is misaligned. Everything outside the rows × cols elements holds a NaN with a recognisable
// payload: an output test proves nothing else was written, an input test would see NaN if it were read.
constexpr std::uint32_t canary_bits = 0x7fc0dead;
inline float canary() {
  float f;
  std::memcpy(&f, &canary_bits, sizeof f);
  return f;
}
inline bool is_canary(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u == canary_bits;
}

class Guarded {
 public:
  Guarded(std::size_t rows, std::size_t cols, std::size_t stride = 0, bool misalign = false, std::size_t guard = 37)
      : rows_(rows),
        cols_(cols),
        stride_(stride == 0 ? cols : stride),
        guard_(guard),
        offset_(misalign ? 1 : 0),
        buf_(guard + offset_ + (rows == 0 ? 0 : (rows - 1) * stride_ + cols) + guard, canary()) {}

  float* data() { return buf_.data() + guard_ + offset_; }
  const float* data() const { return buf_.data() + guard_ + offset_; }
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  std::size_t stride() const { return stride_; }
  float& at(std::size_t r, std::size_t c) { return data()[r * stride_ + c]; }
  float at(std::size_t r, std::size_t c) const { return data()[r * stride_ + c]; }
  microattn::MatrixView<float> view() { return {data(), rows_, cols_, stride_}; }
  microattn::MatrixView<const float> cview() const { return {data(), rows_, cols_, stride_}; }

  template <class Gen>
  void fill(Gen&& gen) {
    for (std::size_t r = 0; r < rows_; ++r)
      for (std::size_t c = 0; c < cols_; ++c) at(r, c) = gen();
  }
  void fill_value(float v) {
    fill([v] { return v; });
  }
  // Every float of the buffer that is not an element still holds the canary.
  ::testing::AssertionResult canaries_intact() const {
    const float* d = data();
    for (std::size_t i = 0; i < buf_.size(); ++i) {
      const std::ptrdiff_t off = static_cast<std::ptrdiff_t>(i) - static_cast<std::ptrdiff_t>(guard_ + offset_);
      const bool element = off >= 0 && rows_ > 0 && static_cast<std::size_t>(off) < (rows_ - 1) * stride_ + cols_ &&
                           static_cast<std::size_t>(off) % stride_ < cols_;
      if (!element && !is_canary(buf_[i]))
        return ::testing::AssertionFailure()
               << "write outside the matrix at offset " << off << " (value " << buf_[i] << ")";
    }
    (void)d;
    return ::testing::AssertionSuccess();
  }
  // Bitwise snapshot of the whole buffer, to prove an erroring call wrote nothing at all.
  std::vector<std::uint32_t> snapshot() const {
    std::vector<std::uint32_t> s(buf_.size());
    std::memcpy(s.data(), buf_.data(), buf_.size() * sizeof(float));
    return s;
  }

 private:
  std::size_t rows_, cols_, stride_, guard_, offset_;
  std::vector<float> buf_;
};

// ---- random values --------------------------------------------------------------------------------------
struct Uniform {
  std::mt19937 rng;
  std::uniform_real_distribution<float> dist;
  explicit Uniform(std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) : rng(seed), dist(lo, hi) {}
  float operator()() { return dist(rng); }
};

// ---- kernel tables compiled into this build --------------------------------------------------------------
// Random layer weights in nn.Linear layout (q: d × d, k and v: kv_dim × d, biases, out projection), uniform in
// [−0.3, 0.3], and their LayerWeights view with or without biases and the out projection.
struct LayerTestWeights {
  std::vector<float> wq, wk, wv, bq, bk, bv, wo, bo;
  LayerTestWeights(std::size_t d, std::size_t kv_dim, std::uint32_t seed)
      : wq(d * d), wk(kv_dim * d), wv(kv_dim * d), bq(d), bk(kv_dim), bv(kv_dim), wo(d * d), bo(d) {
    Uniform u(seed, -0.3f, 0.3f);
    for (auto* v : {&wq, &wk, &wv, &bq, &bk, &bv, &wo, &bo})
      for (float& x : *v) x = u();
  }
  microattn::LayerWeights view(bool biases = true, bool out_projection = true) const {
    return {wq.data(),
            wk.data(),
            wv.data(),
            biases ? bq.data() : nullptr,
            biases ? bk.data() : nullptr,
            biases ? bv.data() : nullptr,
            out_projection ? wo.data() : nullptr,
            out_projection && biases ? bo.data() : nullptr};
  }
};

inline std::vector<const microattn::detail::Kernels*> all_kernel_tables() {
  std::vector<const microattn::detail::Kernels*> t{&microattn::detail::scalar_kernels()};
  if (microattn::detail::vector_kernels() != nullptr) t.push_back(microattn::detail::vector_kernels());
  return t;
}
// linear()'s tables: the scalar one always, the build's vector one when it has one.
inline std::vector<const microattn::detail::LinearKernels*> all_linear_kernel_tables() {
  std::vector<const microattn::detail::LinearKernels*> t{&microattn::detail::scalar_linear_kernels()};
  if (microattn::detail::vector_linear_kernels() != nullptr) t.push_back(microattn::detail::vector_linear_kernels());
  return t;
}
inline std::string kernel_table_name(const ::testing::TestParamInfo<const microattn::detail::Kernels*>& info) {
  return info.param->arch;
}

// Compare a float matrix with a double reference element by element; report the first few failures.
inline ::testing::AssertionResult matrix_near(const Guarded& got, const std::vector<double>& want,
                                              const std::vector<double>& scale, Tolerance tol) {
  std::size_t bad = 0;
  ::testing::AssertionResult res = ::testing::AssertionSuccess();
  for (std::size_t r = 0; r < got.rows(); ++r)
    for (std::size_t c = 0; c < got.cols(); ++c) {
      const std::size_t i = r * got.cols() + c;
      if (!within(got.at(r, c), want[i], scale[i], tol)) {
        if (bad == 0) res = ::testing::AssertionFailure();
        if (bad < 5)
          res << "(" << r << "," << c << "): got " << got.at(r, c) << " want " << want[i] << " (allowed "
              << tol.rel * std::fabs(scale[i]) + tol.abs << ") ";
        ++bad;
      }
    }
  if (bad) res << "— " << bad << " element(s) out of tolerance";
  return res;
}

}  // namespace testing_support
