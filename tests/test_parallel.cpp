// linear() on the caller's workers (microattn/parallel.hpp): the same floats as linear() without a pool, bit for
// bit, for every worker count and every way a pool may cut the items into ranges, over shapes whose rows cross the
// items' edges in every format; a double reference of the stored weights shows those floats are linear()'s (not
// both wrong alike); a failing or absent pool falls back to the calling thread; bad input is refused before any
// item runs. Where POSIX threads exist, the same through PosixPool with 1–8 workers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "microattn/microattn.hpp"
#include "test_support.hpp"
#if MICROATTN_TEST_POSIX_POOL
#include "microattn/posix_pool.hpp"
#endif

namespace ma = microattn;
using namespace testing_support;
using ma::Format;

namespace {

// binary16 from its definition (finite values only: the weights here are). One integer significand and exponent,
// then one conversion (a conversion on each branch makes GCC 12 emit an invalid conditional vcvt for Cortex-M55).
double half_value(std::uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const int significand = e == 0 ? m : m + 1024, exponent = e == 0 ? -24 : e - 25;
  const double v = std::ldexp(static_cast<double>(significand), exponent);
  return (h & 0x8000) != 0 ? -v : v;
}

// Weights in one format, stored by the library's own converters (what a user's program does), and read back in
// double from their bits for the reference.
struct Weights {
  Format format;
  std::size_t n, k, group;
  std::vector<float> f32;
  std::vector<std::uint16_t> f16;
  std::vector<std::int8_t> q8;
  std::vector<float> scales;

  Weights(Format f, std::size_t rows, std::size_t cols, std::size_t grp, std::uint32_t seed)
      : format(f), n(rows), k(cols), group(grp), f32(rows * cols) {
    Uniform u(seed, -0.5f, 0.5f);
    for (float& v : f32) v = u();
    if (f == Format::f16) {
      for (float v : f32) f16.push_back(ma::f16_from_float(v));
    } else if (f == Format::q8) {
      q8.resize(rows * cols);
      scales.resize(rows * cols / grp);
      EXPECT_EQ(ma::quantize_q8(ma::make_view<const float>(f32.data(), rows, cols), grp, q8.data(), scales.data()),
                ma::Status::ok);
    }
  }
  ma::WeightMatrix matrix() const {
    switch (format) {
      case Format::f16:
        return ma::weights_f16(f16.data(), n, k);
      case Format::q8:
        return ma::weights_q8(q8.data(), scales.data(), n, k, group);
      default:
        return ma::weights_f32(f32.data(), n, k);
    }
  }
  double at(std::size_t r, std::size_t c) const {
    const std::size_t i = r * k + c;
    switch (format) {
      case Format::f16:
        return half_value(f16[i]);
      case Format::q8:
        return static_cast<double>(scales[i / group]) * q8[i];
      default:
        return f32[i];
    }
  }
};

// A pool on the calling thread: worker w's items are [w·count/workers, (w+1)·count/workers), run from the last
// worker to the first, each worker's range cut in two calls; it records what it was asked.
struct FakePool {
  std::size_t calls = 0, last_count = 0;
  bool fail = false;
  static bool run(void* p, ma::ParallelTask task, void* ctx, std::size_t count) noexcept {
    auto& pool = *static_cast<FakePool*>(p);
    ++pool.calls;
    pool.last_count = count;
    if (pool.fail) return false;
    const std::size_t workers = pool.workers;
    for (std::size_t w = workers; w-- > 0;) {
      const std::size_t begin = w * count / workers, end = (w + 1) * count / workers;
      const std::size_t mid = begin + (end - begin) / 2;
      if (mid < end) task(ctx, mid, end);
      if (begin < mid) task(ctx, begin, mid);
    }
    return true;
  }
  std::size_t workers = 1;
  ma::Parallel parallel(std::size_t w) {
    workers = w;
    return ma::Parallel{&FakePool::run, this, w};
  }
};

bool same_bits(const Guarded& a, const Guarded& b) { return a.snapshot() == b.snapshot(); }

struct Shape {
  Format format;
  std::size_t m, n, k, group;
};

std::vector<Shape> shapes() {
  std::vector<Shape> s;
  // Rows below, at and past an item's 32, and a tail of every length class; k past every vector width.
#if MICROATTN_TEST_EMULATED  // under QEMU: a sparser sweep that still crosses every edge
  const std::vector<std::size_t> ns = {129, 161, 192, 300}, ks = {256, 344};
#else
  const std::vector<std::size_t> ns = {129, 160, 161, 191, 192, 257, 300}, ks = {172, 256, 600, 1001};
#endif
  for (std::size_t n : ns)
    for (std::size_t k : ks)
      for (std::size_t m : {1, 3}) {
        s.push_back({Format::f32, m, n, k, 0});
        s.push_back({Format::f16, m, n, k, 0});
        s.push_back({Format::q8, m, n, k, k});
        if (k % 64 != 0 && n * k % 64 == 0) s.push_back({Format::q8, m, n, k, 64});  // groups straddling rows
        if (k == 256) s.push_back({Format::q8, m, n, k, 32});
      }
  return s;
}

void check_shape(const Shape& sh, std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "format " << static_cast<int>(sh.format) << " m " << sh.m << " n " << sh.n
                                    << " k " << sh.k << " group " << sh.group);
  const Weights w(sh.format, sh.n, sh.k, sh.group == 0 ? 1 : sh.group, seed);
  Guarded x(sh.m, sh.k, sh.k + 3);
  x.fill(Uniform(seed + 1));
  std::vector<float> bias(sh.n);
  Uniform ub(seed + 2);
  for (float& b : bias) b = ub();
  Guarded y0(sh.m, sh.n, sh.n + 5);
  ASSERT_EQ(ma::linear(x.cview(), w.matrix(), bias.data(), y0.view()), ma::Status::ok);

  // linear()'s floats are right (the double reference of the stored weights, matmul's bound with room).
  for (std::size_t i = 0; i < sh.m; ++i)
    for (std::size_t r = 0; r < sh.n; ++r) {
      double want = bias[r], mag = std::fabs(bias[r]);
      for (std::size_t c = 0; c < sh.k; ++c) {
        want += static_cast<double>(x.at(i, c)) * w.at(r, c);
        mag += std::fabs(static_cast<double>(x.at(i, c)) * w.at(r, c));
      }
      const double allowed = sh.format == Format::q8 ? 0.02 * mag : 4.0 * (sh.k + 3) * 0x1p-24 * mag;
      ASSERT_LE(std::fabs(y0.at(i, r) - want), allowed) << "row " << i << " col " << r;
    }

  FakePool pool;
  for (std::size_t workers = 0; workers <= 8; ++workers) {
    Guarded y(sh.m, sh.n, sh.n + 5);
    pool.calls = 0;
    ASSERT_EQ(ma::linear(x.cview(), w.matrix(), bias.data(), y.view(), pool.parallel(workers)), ma::Status::ok);
    EXPECT_TRUE(y.canaries_intact());
    EXPECT_TRUE(same_bits(y, y0)) << workers << " workers";
    // The items come from the shape alone: 32 rows each (the last one the rest), unless the product is small, w has
    // fewer than 64 rows or q8's groups would start inside an item.
    const bool split = sh.m * sh.n * sh.k >= ma::linear_parallel_min_macs * (sh.format == Format::q8 ? 2 : 1) &&
                       sh.n >= 64 && (sh.format != Format::q8 || (32 * sh.k) % sh.group == 0);
    if (workers > 1 && split) {
      EXPECT_GE(pool.calls, 1u);  // q8: once per chunk of x's rows and columns
      if (sh.format != Format::q8) {
        EXPECT_EQ(pool.calls, 1u);
      }
      EXPECT_EQ(pool.last_count, sh.n / 32);  // the last item takes the rest
    } else {
      EXPECT_EQ(pool.calls, 0u);
    }
  }
}

TEST(Parallel, SameFloatsForEveryWorkerCount) {
  std::uint32_t seed = 11;
  for (const Shape& s : shapes()) check_shape(s, seed++);
}

TEST(Parallel, SmallShapesAndUnalignedGroupsAreOneItem) {
  FakePool pool;
  struct Case {
    Format format;
    std::size_t m, n, k, group;
  };
  // linear_parallel_min_macs (2^16; q8 twice that) multiply-adds and more are split, fewer are not; fewer than 64 rows
  // of w, and q8 groups that would start inside an item, are one item.
  for (const Case c :
       {Case{Format::f32, 1, 128, 511, 0}, Case{Format::f32, 4, 64, 255, 0}, Case{Format::f32, 1, 63, 8192, 0},
        Case{Format::f16, 2, 40, 4096, 0}, Case{Format::q8, 1, 300, 1000, 3000}, Case{Format::q8, 1, 600, 172, 516}}) {
    const Weights w(c.format, c.n, c.k, c.group == 0 ? 1 : c.group, 5);
    Guarded x(c.m, c.k);
    x.fill(Uniform(6));
    Guarded y0(c.m, c.n), y(c.m, c.n);
    ASSERT_EQ(ma::linear(x.cview(), w.matrix(), nullptr, y0.view()), ma::Status::ok);
    pool.calls = 0;
    ASSERT_EQ(ma::linear(x.cview(), w.matrix(), nullptr, y.view(), pool.parallel(4)), ma::Status::ok);
    EXPECT_EQ(pool.calls, 0u) << c.m << " x " << c.n << " x " << c.k;
    EXPECT_TRUE(same_bits(y, y0));
  }
  // Above the threshold: split.
  const Weights w(Format::f32, 128, 1024, 1, 7);
  Guarded x(1, 1024), y(1, 128);
  x.fill(Uniform(8));
  pool.calls = 0;
  ASSERT_EQ(ma::linear(x.cview(), w.matrix(), nullptr, y.view(), pool.parallel(2)), ma::Status::ok);
  EXPECT_EQ(pool.calls, 1u);
  EXPECT_EQ(pool.last_count, 4u);
}

TEST(Parallel, FailingOrAbsentPoolRunsOnTheCaller) {
  const Weights w(Format::q8, 256, 512, 64, 9);
  Guarded x(2, 512);
  x.fill(Uniform(10));
  Guarded y0(2, 256);
  ASSERT_EQ(ma::linear(x.cview(), w.matrix(), nullptr, y0.view()), ma::Status::ok);
  FakePool pool;
  pool.fail = true;
  Guarded y1(2, 256), y2(2, 256);
  ASSERT_EQ(ma::linear(x.cview(), w.matrix(), nullptr, y1.view(), pool.parallel(3)), ma::Status::ok);
  EXPECT_GE(pool.calls, 1u);  // q8 asks again for every chunk of x
  EXPECT_TRUE(same_bits(y1, y0));
  ASSERT_EQ(ma::linear(x.cview(), w.matrix(), nullptr, y2.view(), ma::Parallel{nullptr, nullptr, 8}), ma::Status::ok);
  EXPECT_TRUE(same_bits(y2, y0));
}

TEST(Parallel, BadInputIsRefusedBeforeAnyItem) {
  const Weights w(Format::f32, 256, 512, 1, 12);
  Guarded x(2, 512), y(2, 256);
  x.fill(Uniform(13));
  FakePool pool;
  const auto before = y.snapshot();
  const ma::WeightMatrix wm = w.matrix();
  ma::WeightMatrix bad = wm;
  bad.cols = 511;
  EXPECT_EQ(ma::linear(x.cview(), bad, nullptr, y.view(), pool.parallel(4)), ma::Status::invalid_shape);
  EXPECT_EQ(ma::linear(ma::MatrixView<const float>{nullptr, 2, 512, 512}, wm, nullptr, y.view(), pool.parallel(4)),
            ma::Status::null_pointer);
  EXPECT_EQ(ma::linear(ma::make_view<const float>(y.data(), 2, 256), ma::weights_f32(w.f32.data(), 256, 256), nullptr,
                       y.view(), pool.parallel(4)),
            ma::Status::aliasing);
  bad = wm;
  bad.format = static_cast<Format>(7);
  EXPECT_EQ(ma::linear(x.cview(), bad, nullptr, y.view(), pool.parallel(4)), ma::Status::invalid_shape);
  EXPECT_EQ(pool.calls, 0u);
  EXPECT_EQ(y.snapshot(), before);
}

#if MICROATTN_TEST_POSIX_POOL
TEST(Parallel, PosixPoolSameFloatsForOneToEightWorkers) {
  std::uint32_t seed = 101;
  for (const Shape& sh : {Shape{Format::f32, 1, 300, 1001, 0}, Shape{Format::f16, 3, 257, 256, 0},
                          Shape{Format::q8, 1, 544, 172, 64}, Shape{Format::q8, 4, 161, 1001, 1001}}) {
    const Weights w(sh.format, sh.n, sh.k, sh.group == 0 ? 1 : sh.group, seed++);
    Guarded x(sh.m, sh.k);
    x.fill(Uniform(seed++));
    Guarded y0(sh.m, sh.n);
    ASSERT_EQ(ma::linear(x.cview(), w.matrix(), nullptr, y0.view()), ma::Status::ok);
    for (std::size_t workers = 1; workers <= 8; ++workers) {
      ma::PosixPool<8> pool(workers);
      EXPECT_EQ(pool.workers(), workers);
      for (int repeat = 0; repeat < 3; ++repeat) {
        Guarded y(sh.m, sh.n);
        ASSERT_EQ(ma::linear(x.cview(), w.matrix(), nullptr, y.view(), pool.parallel()), ma::Status::ok);
        EXPECT_TRUE(same_bits(y, y0)) << workers << " workers";
        EXPECT_TRUE(y.canaries_intact());
      }
    }
  }
}
#endif

}  // namespace
