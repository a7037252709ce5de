// The bad-input contract of the blocks (blocks.hpp), one row per class of bad argument: the Status returned and,
// on every error, not one byte written (bitwise snapshots of the outputs, their row gaps and guard zones, and of
// the inputs).
#include <gtest/gtest.h>

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "microattn/blocks.hpp"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;
using S = ma::Status;

namespace {

template <class T>
T* shifted(T* p, std::size_t bytes) {
  using Byte = std::conditional_t<std::is_const<T>::value, const unsigned char, unsigned char>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(p) + bytes);
}

struct NormArgs {
  Guarded x{3, 7, 9}, y{3, 7, 8}, w{1, 7}, b{1, 7};
  NormArgs() {
    Uniform g(3);
    x.fill(g);
    y.fill(g);
    w.fill(g);
    b.fill(g);
  }
  bool untouched(const std::vector<std::vector<std::uint32_t>>& before) const {
    return x.snapshot() == before[0] && y.snapshot() == before[1] && w.snapshot() == before[2] &&
           b.snapshot() == before[3];
  }
  std::vector<std::vector<std::uint32_t>> snap() const { return {x.snapshot(), y.snapshot(), w.snapshot(), b.snapshot()}; }
};

// Calls both norms with the same arguments (rms_norm_rows takes no bias) and checks the status and that nothing
// was written.
void expect_both(NormArgs& a, ma::MatrixView<const float> x, const float* w, const float* b, float eps,
                 ma::MatrixView<float> y, S want, const char* what) {
  const auto before = a.snap();
  EXPECT_EQ(ma::layer_norm_rows(x, w, b, eps, y), want) << "layer_norm_rows: " << what;
  EXPECT_TRUE(a.untouched(before)) << "layer_norm_rows wrote on error: " << what;
  EXPECT_EQ(ma::rms_norm_rows(x, w, eps, y), want) << "rms_norm_rows: " << what;
  EXPECT_TRUE(a.untouched(before)) << "rms_norm_rows wrote on error: " << what;
}

TEST(BlocksBadInput, NormsNullPointer) {
  NormArgs a;
  ma::MatrixView<const float> x = a.x.cview();
  x.data = nullptr;
  expect_both(a, x, a.w.data(), a.b.data(), 1e-5f, a.y.view(), S::null_pointer, "x null");
  ma::MatrixView<float> y = a.y.view();
  y.data = nullptr;
  expect_both(a, a.x.cview(), a.w.data(), a.b.data(), 1e-5f, y, S::null_pointer, "y null");
  // Null before misaligned, before shape.
  expect_both(a, {nullptr, 0, 0, 0}, shifted(a.w.data(), 1), nullptr, -1.0f, a.y.view(), S::null_pointer,
              "null first");
}

TEST(BlocksBadInput, NormsMisaligned) {
  NormArgs a;
  for (std::size_t off : {1, 2, 3}) {
    ma::MatrixView<const float> x = a.x.cview();
    x.data = shifted(x.data, off);
    expect_both(a, x, a.w.data(), a.b.data(), 1e-5f, a.y.view(), S::misaligned, "x");
    ma::MatrixView<float> y = a.y.view();
    y.data = shifted(y.data, off);
    expect_both(a, a.x.cview(), a.w.data(), a.b.data(), 1e-5f, y, S::misaligned, "y");
    expect_both(a, a.x.cview(), shifted(a.w.data(), off), a.b.data(), 1e-5f, a.y.view(), S::misaligned, "weight");
    const auto before = a.snap();
    EXPECT_EQ(ma::layer_norm_rows(a.x.cview(), a.w.data(), shifted(a.b.data(), off), 1e-5f, a.y.view()), S::misaligned);
    EXPECT_TRUE(a.untouched(before));
  }
}

TEST(BlocksBadInput, NormsShape) {
  NormArgs a;
  const ma::MatrixView<const float> x = a.x.cview();
  const ma::MatrixView<float> y = a.y.view();
  expect_both(a, {x.data, 0, 7, 9}, nullptr, nullptr, 1e-5f, y, S::invalid_shape, "x rows 0");
  expect_both(a, {x.data, 3, 0, 9}, nullptr, nullptr, 1e-5f, y, S::invalid_shape, "x cols 0");
  expect_both(a, {x.data, 3, 7, 6}, nullptr, nullptr, 1e-5f, y, S::invalid_shape, "x stride < cols");
  expect_both(a, x, nullptr, nullptr, 1e-5f, {y.data, 2, 7, 8}, S::invalid_shape, "y rows differ");
  expect_both(a, x, nullptr, nullptr, 1e-5f, {y.data, 3, 6, 8}, S::invalid_shape, "y cols differ");
  expect_both(a, x, nullptr, nullptr, 1e-5f, {y.data, 3, 7, 5}, S::invalid_shape, "y stride < cols");
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 2;
  expect_both(a, {x.data, huge, 7, 9}, nullptr, nullptr, 1e-5f, {y.data, huge, 7, 8}, S::invalid_shape,
              "extent overflows");
}

TEST(BlocksBadInput, NormsEps) {
  NormArgs a;
  for (float eps : {-1e-5f, -FLT_MIN, -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN()})
    expect_both(a, a.x.cview(), a.w.data(), a.b.data(), eps, a.y.view(), S::invalid_shape, "eps");
  // The edges that are fine: 0, −0 and FLT_MAX (every output is then ≈ bias).
  for (float eps : {0.0f, -0.0f, FLT_MAX}) {
    EXPECT_EQ(ma::layer_norm_rows(a.x.cview(), a.w.data(), a.b.data(), eps, a.y.view()), S::ok) << eps;
    EXPECT_EQ(ma::rms_norm_rows(a.x.cview(), a.w.data(), eps, a.y.view()), S::ok) << eps;
  }
}

TEST(BlocksBadInput, NormsAliasing) {
  // One buffer holding x, y, weight and bias at chosen offsets.
  std::vector<float> buf(200, 1.0f);
  float* p = buf.data();
  const auto x = ma::MatrixView<const float>{p, 3, 7, 9};
  auto snapshot = [&] { return std::vector<float>(buf); };
  auto expect = [&](ma::MatrixView<float> y, const float* w, const float* b, S want, const char* what) {
    const std::vector<float> before = snapshot();
    EXPECT_EQ(ma::layer_norm_rows(x, w, b, 1e-5f, y), want) << what;
    if (want != S::ok) {
      EXPECT_EQ(snapshot(), before) << what;
    }
    if (b == nullptr) {
      buf = before;
      EXPECT_EQ(ma::rms_norm_rows(x, w, 1e-5f, y), want) << what;
      if (want != S::ok) {
      EXPECT_EQ(snapshot(), before) << what;
    }
    }
    buf = before;
  };
  expect({p, 3, 7, 9}, nullptr, nullptr, S::ok, "in place");
  expect({p + 1, 3, 7, 9}, nullptr, nullptr, S::aliasing, "y shifted by one");
  expect({p, 3, 7, 10}, nullptr, nullptr, S::aliasing, "same data, other stride");
  expect({p + 7, 3, 7, 9}, nullptr, nullptr, S::aliasing, "y in x's row gaps");
  expect({p + 100, 3, 7, 9}, p + 102, nullptr, S::aliasing, "weight inside y");
  expect({p + 100, 3, 7, 9}, nullptr, p + 118, S::aliasing, "bias inside y");
  expect({p, 3, 7, 9}, p + 2, nullptr, S::aliasing, "weight inside y in place");
  expect({p + 100, 3, 7, 9}, p + 50, p + 60, S::ok, "all apart");
  expect({p + 100, 3, 7, 9}, p + 1, p + 2, S::ok, "weight and bias inside x: inputs only");
}

TEST(BlocksBadInput, ActivateRows) {
  Guarded x(3, 5, 7);
  Uniform g(9);
  x.fill(g);
  const auto before = x.snapshot();
  auto expect = [&](ma::MatrixView<float> v, ma::Activation a, S want, const char* what) {
    EXPECT_EQ(ma::activate_rows(v, a), want) << what;
    EXPECT_EQ(x.snapshot(), before) << what << ": written on error";
  };
  ma::MatrixView<float> v = x.view();
  expect({nullptr, 3, 5, 7}, ma::Activation::relu, S::null_pointer, "null");
  expect({nullptr, 0, 0, 0}, static_cast<ma::Activation>(9), S::null_pointer, "null before the activation");
  for (std::size_t off : {1, 2, 3})
    expect({shifted(v.data, off), 3, 5, 7}, ma::Activation::gelu, S::misaligned, "misaligned");
  expect({v.data, 0, 5, 7}, ma::Activation::silu, S::invalid_shape, "rows 0");
  expect({v.data, 3, 0, 7}, ma::Activation::silu, S::invalid_shape, "cols 0");
  expect({v.data, 3, 5, 4}, ma::Activation::silu, S::invalid_shape, "stride < cols");
  expect({v.data, std::numeric_limits<std::size_t>::max(), 5, 7}, ma::Activation::silu, S::invalid_shape, "extent");
  for (int a : {4, 5, 128, 255}) expect(v, static_cast<ma::Activation>(a), S::invalid_shape, "activation");
}

}  // namespace
