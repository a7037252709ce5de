// The reproducibility contract (docs/numerical-contract.md): for the same values, results are bit-for-bit
// identical across repeated calls, aligned and misaligned data, and strided and contiguous layouts.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

// The same matrix in three layouts: contiguous and aligned, contiguous but misaligned by one float, and
// strided (stride cols + 5) and misaligned.
struct Layouts {
  Guarded plain, shifted, strided;
  Layouts(std::size_t rows, std::size_t cols, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f)
      : plain(rows, cols), shifted(rows, cols, cols, true), strided(rows, cols, cols + 5, true) {
    Uniform u(seed, lo, hi);
    plain.fill(u);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) shifted.at(r, c) = strided.at(r, c) = plain.at(r, c);
  }
  Guarded& get(int i) { return i == 0 ? plain : i == 1 ? shifted : strided; }
};

::testing::AssertionResult same_bits(const Guarded& a, const Guarded& b) {
  for (std::size_t r = 0; r < a.rows(); ++r)
    for (std::size_t c = 0; c < a.cols(); ++c) {
      const float x = a.at(r, c), y = b.at(r, c);
      if (std::memcmp(&x, &y, sizeof x) != 0)
        return ::testing::AssertionFailure() << "(" << r << "," << c << "): " << x << " vs " << y;
    }
  return ::testing::AssertionSuccess();
}

TEST(Determinism, Matmul) {
  for (bool tb : {false, true}) {
    Layouts a(45, 70, 1), b(tb ? 33 : 70, tb ? 70 : 33, 2);
    Layouts c(45, 33, 3);
    for (int l = 0; l < 3; ++l)
      ASSERT_EQ(ma::matmul(a.get(l).cview(), b.get(2 - l).cview(), c.get(l).view(), tb), ma::Status::ok);
    EXPECT_TRUE(same_bits(c.plain, c.shifted));
    EXPECT_TRUE(same_bits(c.plain, c.strided));
    Guarded again(45, 33);
    ASSERT_EQ(ma::matmul(a.plain.cview(), b.plain.cview(), again.view(), tb), ma::Status::ok);
    EXPECT_TRUE(same_bits(c.plain, again));
  }
}

TEST(Determinism, SoftmaxAndExp) {
  Layouts x(9, 77, 4, -20.0f, 20.0f);
  Guarded before(9, 77);
  for (std::size_t r = 0; r < 9; ++r)
    for (std::size_t c = 0; c < 77; ++c) before.at(r, c) = x.plain.at(r, c);
  for (int l = 0; l < 3; ++l) ASSERT_EQ(ma::softmax_rows(x.get(l).view()), ma::Status::ok);
  EXPECT_TRUE(same_bits(x.plain, x.shifted));
  EXPECT_TRUE(same_bits(x.plain, x.strided));
  // exp over the same values starting at different alignments
  std::vector<float> src(300), y1(300), y2(301);
  Uniform u(5, -80.0f, 80.0f);
  for (float& v : src) v = u();
  std::vector<float> src_shifted(301);
  std::memcpy(src_shifted.data() + 1, src.data(), 300 * sizeof(float));
  ASSERT_EQ(ma::exp_elements(src.data(), y1.data(), 300), ma::Status::ok);
  ASSERT_EQ(ma::exp_elements(src_shifted.data() + 1, y2.data() + 1, 300), ma::Status::ok);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data() + 1, 300 * sizeof(float)), 0);
}

TEST(Determinism, Attention) {
  for (bool causal : {false, true}) {
    Layouts q(70, 40, 6), k(90, 40, 7), v(90, 24, 8), mask(70, 90, 9), out(70, 24, 10);
    std::vector<float> ws(ma::attention_workspace_floats(40, 24) + 1);
    for (int l = 0; l < 3; ++l) {
      ma::AttentionOptions o;
      o.causal = causal;
      o.causal_offset = 20;
      o.mask = mask.get((l + 1) % 3).cview();
      // the workspace itself also moves by one float between runs
      ASSERT_EQ(ma::attention(q.get(l).cview(), k.get((l + 2) % 3).cview(), v.get(l).cview(), out.get(l).view(),
                              ws.data() + (l & 1), ws.size() - 1, o),
                ma::Status::ok);
    }
    EXPECT_TRUE(same_bits(out.plain, out.shifted));
    EXPECT_TRUE(same_bits(out.plain, out.strided));
  }
}

TEST(Determinism, LayerForward) {
  static std::vector<float> w(48 * 48);
  Uniform u(11, -0.3f, 0.3f);
  for (float& x : w) x = u();
  static ma::MultiHeadAttention<80, 48, 6, 2> layer{
      {w.data(), w.data(), w.data(), w.data(), w.data(), w.data(), w.data(), w.data()}};
  Layouts x(80, 48, 12), y(80, 48, 13);
  ma::AttentionOptions o;
  o.causal = true;
  for (int l = 0; l < 3; ++l) ASSERT_EQ(layer.forward(x.get(l).cview(), y.get(l).view(), o), ma::Status::ok);
  EXPECT_TRUE(same_bits(y.plain, y.shifted));
  EXPECT_TRUE(same_bits(y.plain, y.strided));
  ASSERT_EQ(layer.forward(x.plain.cview(), y.shifted.view(), o), ma::Status::ok);
  EXPECT_TRUE(same_bits(y.plain, y.shifted));
}

}  // namespace
