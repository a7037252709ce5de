// linear()'s bad-input contract, one test per row of docs/errors.md "Bad arguments": every class of bad argument, the
// Status it returns, and not one byte written — each call is followed by a bitwise comparison of y's whole buffer (row
// gaps and guard zones included). Also the neighbours of each error that must stay valid.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;
using S = ma::Status;
using ma::Format;

namespace {

// After each call: the status, and every watched buffer bit for bit as before (test_bad_input.cpp's Untouched).
class Untouched {
 public:
  explicit Untouched(std::initializer_list<const Guarded*> buffers) : buffers_(buffers) {
    for (const Guarded* b : buffers_) before_.push_back(b->snapshot());
  }
  void expect(S got, S want, const char* what) const {
    EXPECT_EQ(got, want) << what << ": got " << ma::to_string(got);
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      EXPECT_EQ(buffers_[i]->snapshot(), before_[i]) << what << ": buffer " << i << " written on error";
  }

 private:
  std::vector<const Guarded*> buffers_;
  std::vector<std::vector<std::uint32_t>> before_;
};

template <class T>
const T* shifted(const T* p, std::size_t bytes) {
  return reinterpret_cast<const T*>(reinterpret_cast<const unsigned char*>(p) + bytes);
}
template <class T>
ma::MatrixView<T> shifted(ma::MatrixView<T> v, std::size_t bytes) {
  using Byte = std::conditional_t<std::is_const<T>::value, const unsigned char, unsigned char>;
  return {reinterpret_cast<T*>(reinterpret_cast<Byte*>(v.data) + bytes), v.rows, v.cols, v.stride};
}

// x: 3 × 8 (stride 9), y: 3 × 6 (stride 7), weights 6 × 8 in every format (q8 groups of 4), bias 6.
struct Args {
  Guarded x{3, 8, 9}, y{3, 6, 7};
  std::vector<float> wf = std::vector<float>(48 + 4, 0.25f), scales = std::vector<float>(48 + 4, 0.5f);
  std::vector<float> bias = std::vector<float>(6 + 4, 1.0f);
  std::vector<std::uint16_t> wh = std::vector<std::uint16_t>(48 + 8, 0x3c00);
  std::vector<std::int8_t> wq = std::vector<std::int8_t>(48 + 8, 3);
  Args() {
    Uniform u(1);
    x.fill(u);
    y.fill(u);
  }
  ma::WeightMatrix f32() const { return ma::weights_f32(wf.data(), 6, 8); }
  ma::WeightMatrix f16() const { return ma::weights_f16(wh.data(), 6, 8); }
  ma::WeightMatrix q8() const { return ma::weights_q8(wq.data(), scales.data(), 6, 8, 4); }
  S call(const ma::WeightMatrix& w, const float* b = nullptr) { return ma::linear(x.cview(), w, b, y.view()); }
};

TEST(LinearBadInput, NullPointers) {
  Args a;
  const Untouched t{&a.y};
  for (const ma::WeightMatrix& w : {a.f32(), a.f16(), a.q8()}) {
    t.expect(ma::linear({nullptr, 3, 8, 9}, w, nullptr, a.y.view()), S::null_pointer, "x null");
    t.expect(ma::linear(a.x.cview(), w, nullptr, {nullptr, 3, 6, 7}), S::null_pointer, "y null");
    ma::WeightMatrix z = w;
    z.data = nullptr;
    t.expect(a.call(z), S::null_pointer, "weight data null");
  }
  ma::WeightMatrix q = a.q8();
  q.scales = nullptr;
  t.expect(a.call(q), S::null_pointer, "q8 scales null");
  // Scales are not read for f32 and f16: null is fine there.
  EXPECT_EQ(a.call(a.f16()), S::ok);
}

TEST(LinearBadInput, Misaligned) {
  for (std::size_t off : {1, 2, 3}) {
    SCOPED_TRACE(off);
    Args a;
    const Untouched t{&a.x, &a.y};
    t.expect(ma::linear(shifted(a.x.cview(), off), a.q8(), nullptr, a.y.view()), S::misaligned, "x");
    t.expect(ma::linear(a.x.cview(), a.f16(), nullptr, shifted(a.y.view(), off)), S::misaligned, "y");
    t.expect(a.call(a.f32(), shifted(a.bias.data(), off)), S::misaligned, "bias");
    t.expect(a.call(ma::weights_f32(shifted(a.wf.data(), off), 6, 8)), S::misaligned, "f32 data");
    t.expect(a.call(ma::weights_q8(a.wq.data(), shifted(a.scales.data(), off), 6, 8, 4)), S::misaligned, "scales");
    if (off % 2 != 0)
      t.expect(a.call(ma::weights_f16(shifted(a.wh.data(), off), 6, 8)), S::misaligned, "f16 data, odd address");
    // Null pointers are reported first.
    t.expect(ma::linear({nullptr, 3, 8, 9}, a.f32(), shifted(a.bias.data(), off), a.y.view()), S::null_pointer,
             "null before misaligned");
  }
  // Valid: f16 at any even address, q8 data at any address, all float pointers at any multiple of 4.
  Args a;
  EXPECT_EQ(a.call(ma::weights_f16(a.wh.data() + 1, 6, 8)), S::ok);
  for (std::size_t off : {1, 2, 3})
    EXPECT_EQ(a.call(ma::weights_q8(a.wq.data() + off, a.scales.data(), 6, 8, 4)), S::ok);
  EXPECT_EQ(a.call(ma::weights_q8(a.wq.data(), a.scales.data() + 1, 6, 8, 4), a.bias.data() + 1), S::ok);
}

TEST(LinearBadInput, FormatOutsideTheEnum) {
  Args a;
  const Untouched t{&a.y};
  for (int f : {3, 4, 127, 255}) {
    ma::WeightMatrix w = a.f32();
    w.format = static_cast<Format>(f);
    t.expect(a.call(w), S::invalid_shape, "format");
  }
}

TEST(LinearBadInput, ZeroAndMismatchedShapes) {
  Args a;
  const Untouched t{&a.y};
  for (const ma::WeightMatrix& good : {a.f32(), a.f16(), a.q8()}) {
    ma::WeightMatrix w = good;
    w.rows = 0;
    t.expect(ma::linear(a.x.cview(), w, nullptr, {a.y.data(), 3, 0, 7}), S::invalid_shape, "w.rows = 0");
    w = good;
    w.cols = 0;
    t.expect(ma::linear({a.x.data(), 3, 0, 9}, w, nullptr, a.y.view()), S::invalid_shape, "w.cols = 0");
    t.expect(ma::linear({a.x.data(), 0, 8, 9}, good, nullptr, {a.y.data(), 0, 6, 7}), S::invalid_shape, "m = 0");
    t.expect(ma::linear({a.x.data(), 3, 7, 9}, good, nullptr, a.y.view()), S::invalid_shape, "x.cols != w.cols");
    t.expect(ma::linear(a.x.cview(), good, nullptr, {a.y.data(), 3, 5, 7}), S::invalid_shape, "y.cols != w.rows");
    t.expect(ma::linear(a.x.cview(), good, nullptr, {a.y.data(), 2, 6, 7}), S::invalid_shape, "y.rows != x.rows");
    t.expect(ma::linear({a.x.data(), 3, 8, 7}, good, nullptr, a.y.view()), S::invalid_shape, "x stride < cols");
    t.expect(ma::linear(a.x.cview(), good, nullptr, {a.y.data(), 3, 6, 5}), S::invalid_shape, "y stride < cols");
    const std::size_t huge = static_cast<std::size_t>(PTRDIFF_MAX) / 4;
    t.expect(ma::linear({a.x.data(), 3, 8, huge}, good, nullptr, a.y.view()), S::invalid_shape, "x extent overflows");
    t.expect(ma::linear(a.x.cview(), good, nullptr, {a.y.data(), 3, 6, huge}), S::invalid_shape, "y extent overflows");
  }
}

TEST(LinearBadInput, WeightElementsOverflow) {
  // rows·cols elements (times their size) beyond ptrdiff_t, with x and y valid views: refused before anything is read.
  Args a;
  const Untouched t{&a.y};
  const std::size_t side = std::size_t{1} << (sizeof(std::size_t) == 8 ? 40 : 16);
  for (Format f : {Format::f32, Format::f16, Format::q8}) {
    const ma::WeightMatrix w{f, a.wf.data(), side, side, a.scales.data(), 1};
    t.expect(ma::linear({a.x.data(), 1, side, side}, w, nullptr, {a.y.data(), 1, side, side}), S::invalid_shape,
             "rows·cols overflows");
  }
  // Elements that fit, but not as bytes of f32 (4·rows·cols > PTRDIFF_MAX).
  const std::size_t rows = static_cast<std::size_t>(PTRDIFF_MAX) / 4 / 2 + 1;
  t.expect(
      ma::linear({a.x.data(), 1, 2, 2}, ma::weights_f32(a.wf.data(), rows, 2), nullptr, {a.y.data(), 1, rows, rows}),
      S::invalid_shape, "f32 bytes overflow");
}

TEST(LinearBadInput, Q8Groups) {
  Args a;
  const Untouched t{&a.y};
  t.expect(a.call(ma::weights_q8(a.wq.data(), a.scales.data(), 6, 8, 0)), S::invalid_shape, "group 0");
  t.expect(a.call(ma::weights_q8(a.wq.data(), a.scales.data(), 6, 8, 5)), S::invalid_shape, "group does not divide 48");
  t.expect(a.call(ma::weights_q8(a.wq.data(), a.scales.data(), 6, 8, 96)), S::invalid_shape, "group > rows·cols");
  // Valid: groups straddling rows (48 = 3·16), one group for all, group = 1.
  for (std::size_t g : {16, 48, 1, 3, 24})
    EXPECT_EQ(a.call(ma::weights_q8(a.wq.data(), a.scales.data(), 6, 8, g)), S::ok) << g;
  // group is not read for other formats.
  ma::WeightMatrix w = a.f16();
  w.group = 5;
  EXPECT_EQ(a.call(w), S::ok);
}

TEST(LinearBadInput, OutputOverlapsAnInput) {
  // One float arena holds everything: y placed on x, the weights, the scales, the bias.
  std::vector<float> arena(400, 0.5f);
  float* d = arena.data();
  const ma::MatrixView<const float> x{d, 2, 8, 8};                                                     // [0, 16)
  const ma::WeightMatrix wf = ma::weights_f32(d + 100, 6, 8);                                          // [100, 148)
  const ma::WeightMatrix wh = ma::weights_f16(reinterpret_cast<const std::uint16_t*>(d + 200), 6, 8);  // [200, 224)
  // q8: 48 bytes from byte 1 of float 250 (its last byte in float 262), scales [300, 312)
  const ma::WeightMatrix wq = ma::weights_q8(reinterpret_cast<const std::int8_t*>(d + 250) + 1, d + 300, 6, 8, 4);
  const float* bias = d + 350;  // [350, 356)
  const std::vector<float> before = arena;
  const auto fails = [&](S got, const char* what) {
    EXPECT_EQ(got, S::aliasing) << what;
    EXPECT_EQ(arena, before) << what << ": written on error";
  };
  fails(ma::linear(x, wf, nullptr, {d + 8, 2, 6, 6}), "y on x's second row");
  fails(ma::linear(x, wf, nullptr, {d + 147, 2, 6, 6}), "y on the last f32 weight");
  fails(ma::linear(x, wh, nullptr, {d + 223, 2, 6, 6}), "y on the last f16 weights");
  fails(ma::linear(x, wq, nullptr, {d + 262, 2, 6, 6}), "y on the last q8 byte");
  fails(ma::linear(x, wq, nullptr, {d + 311, 2, 6, 6}), "y on the last scale");
  fails(ma::linear(x, wq, bias, {d + 340, 2, 6, 11}), "y's second row on the bias");
  fails(ma::linear(x, wq, nullptr, {d + 294, 2, 6, 14}), "y's second row on the last scales");
  fails(ma::linear(x, wf, bias, {d + 86, 2, 6, 14}), "y's second row on the first f32 weights");
  // Neighbours that do not overlap (written, so last): y just past each range, and a range in y's row gap.
  EXPECT_EQ(ma::linear(x, wq, bias, {d + 263, 2, 6, 6}), S::ok) << "y right after the q8 bytes";
  EXPECT_EQ(ma::linear(x, wh, nullptr, {d + 224, 2, 6, 6}), S::ok) << "y right after the f16 weights";
  EXPECT_EQ(ma::linear(x, wq, bias, {d + 356, 2, 6, 6}), S::ok) << "y right after the bias";
  EXPECT_EQ(ma::linear(x, wq, bias, {d + 344, 2, 6, 12}), S::ok) << "the bias [350, 356) in y's row gap [350, 356)";
}

}  // namespace
