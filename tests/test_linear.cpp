// linear(): every format through every kernel table against a double reference of the dequantized weights
// (computed here: binary16 decoded with ldexp, q8 as scale·q in double), over shapes that cross every tile, vector,
// group and chunk edge, misaligned-but-valid pointers, canaries around y and NaN/large padding around the weights.
// Tolerances are those of include/microattn/weights.hpp: matmul's dot-product bound (tests/tolerance.hpp) with the
// bias as one more term, plus for q8 the activation-quantization term, checked where it is tight and exactly where
// the integer sums are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "linear.hpp"
#include "test_support.hpp"

namespace ma = microattn;
namespace md = microattn::detail;
using namespace testing_support;
using ma::Format;
using Table = const ma::detail::LinearKernels*;

namespace {

std::string table_name(const ::testing::TestParamInfo<Table>& info) { return info.param->arch; }

constexpr double inf_d = std::numeric_limits<double>::infinity();

// binary16 from its definition: (−1)^s · 2^(e − 15) · (1 + m/1024), subnormal 2^−14 · m/1024, e = 31: inf / NaN.
double half_value(std::uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) {
    v = m != 0 ? std::numeric_limits<double>::quiet_NaN() : inf_d;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), -24);
  } else {
    v = std::ldexp(static_cast<double>(m + 1024), e - 25);
  }
  return (h & 0x8000) != 0 ? -v : v;
}

// A weight matrix placed at a chosen byte offset in a buffer padded with values that would show if read: NaN for
// f32 and f16, 127 for q8 (any sum it entered would move), NaN after the scales.
struct Weights {
  Format format;
  std::size_t n, k, group;
  std::vector<std::uint64_t> storage;
  std::vector<float> scale_storage;
  void* data = nullptr;
  float* scales = nullptr;

  Weights(Format f, std::size_t rows, std::size_t cols, std::size_t grp, std::size_t byte_offset, bool shift_scales)
      : format(f), n(rows), k(cols), group(grp) {
    const std::size_t elem = f == Format::f32 ? 4 : f == Format::f16 ? 2 : 1;
    const std::size_t pad = 64;
    storage.resize((pad + byte_offset + n * k * elem + pad) / 8 + 1);
    auto* bytes = reinterpret_cast<unsigned char*>(storage.data());
    for (std::size_t i = 0; i < storage.size() * 8; i += elem) {
      if (f == Format::f32) {
        std::memcpy(bytes + i, &canary_bits, 4);
      } else if (f == Format::f16) {
        const std::uint16_t h = 0x7e01;
        std::memcpy(bytes + i, &h, 2);
      } else {
        bytes[i] = 127;
      }
    }
    data = bytes + pad + byte_offset;
    if (f == Format::q8) {
      scale_storage.assign(n * k / group + 8, canary());
      scales = scale_storage.data() + (shift_scales ? 1 : 0);
    }
  }
  float* f32() { return static_cast<float*>(data); }
  std::uint16_t* f16() { return static_cast<std::uint16_t*>(data); }
  std::int8_t* q8() { return static_cast<std::int8_t*>(data); }
  const float* f32() const { return static_cast<const float*>(data); }
  const std::uint16_t* f16() const { return static_cast<const std::uint16_t*>(data); }
  const std::int8_t* q8() const { return static_cast<const std::int8_t*>(data); }

  double value(std::size_t r, std::size_t c) const {
    const std::size_t i = r * k + c;
    if (format == Format::f32) return f32()[i];
    if (format == Format::f16) return half_value(f16()[i]);
    return static_cast<double>(scales[i / group]) * q8()[i];
  }
  ma::WeightMatrix matrix() const {
    switch (format) {
      case Format::f32:
        return ma::weights_f32(f32(), n, k);
      case Format::f16:
        return ma::weights_f16(f16(), n, k);
      default:
        return ma::weights_q8(q8(), scales, n, k, group);
    }
  }

  // Random finite values: f32 in [−1, 1]; f16 with exponents 0…16 (subnormals included, |w| < 4); q8 all of
  // int8 with scales in [2⁻⁹, 2⁻⁶].
  void fill_random(std::uint32_t seed) {
    std::mt19937 rng(seed);
    for (std::size_t i = 0; i < n * k; ++i) {
      if (format == Format::f32) {
        f32()[i] = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
      } else if (format == Format::f16) {
        const std::uint32_t e = std::uniform_int_distribution<std::uint32_t>(0, 16)(rng);
        const std::uint32_t m = rng() & 1023u, s = rng() & 1u;
        f16()[i] = static_cast<std::uint16_t>((s << 15) | (e << 10) | m);
      } else {
        q8()[i] = static_cast<std::int8_t>(std::uniform_int_distribution<int>(-128, 127)(rng));
      }
    }
    if (format == Format::q8)
      for (std::size_t g = 0; g < n * k / group; ++g)
        scales[g] = std::ldexp(std::uniform_real_distribution<float>(1.0f, 8.0f)(rng), -9);
  }
};

// What the reference gives for row i, weight row r, and the magnitudes its bounds scale with.
struct Expected {
  std::vector<double> want, scale, quant;  // m × n
};

// quant: Σ_g s_g·Σ_{c∈g}|w_rc| over row r's columns cut where its weight groups are, s_g = max_{c∈g}|x_c| / 127.
Expected reference(const Weights& w, const Guarded& x, const float* bias) {
  const std::size_t m = x.rows(), n = w.n, k = w.k;
  Expected e{std::vector<double>(m * n), std::vector<double>(m * n), std::vector<double>(m * n, 0.0)};
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t r = 0; r < n; ++r) {
      double sum = bias != nullptr ? bias[r] : 0.0, abs = bias != nullptr ? std::fabs(bias[r]) : 0.0;
      for (std::size_t c = 0; c < k; ++c) {
        const double p = static_cast<double>(x.at(i, c)) * w.value(r, c);
        sum += p;
        abs += std::fabs(p);
      }
      double quant = 0.0;
      if (w.format == Format::q8) {
        for (std::size_t c = 0; c < k;) {
          const std::size_t g = (r * k + c) / w.group;
          const std::size_t end = std::min(k, (g + 1) * w.group - r * k);
          double amax = 0.0, wsum = 0.0;
          for (std::size_t t = c; t < end; ++t) {
            amax = std::max(amax, std::fabs(static_cast<double>(x.at(i, t))));
            wsum += std::fabs(w.value(r, t));
          }
          quant += amax / 127.0 * wsum;
          c = end;
        }
      }
      e.want[i * n + r] = sum;
      e.scale[i * n + r] = abs;
      e.quant[i * n + r] = quant;
    }
  return e;
}

// The bound of weights.hpp for one element; NaN and ±inf must match exactly (NaN: any NaN).
double bound(const Expected& e, std::size_t idx, std::size_t k, Format f) {
  const double fp = 2.0 * (static_cast<double>(k) + 3.0) * unit_roundoff;
  const double q = f == Format::q8 ? e.quant[idx] : 0.0;
  return 0.5 * (1.0 + std::ldexp(1.0, -16)) * q + fp * (e.scale[idx] + q) + 1e-37;
}
bool element_ok(double got, double want, double allowed) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= allowed;
}

::testing::AssertionResult matches(const Guarded& y, const Expected& e, std::size_t k, Format f) {
  std::size_t bad = 0;
  ::testing::AssertionResult res = ::testing::AssertionSuccess();
  for (std::size_t i = 0; i < y.rows(); ++i)
    for (std::size_t r = 0; r < y.cols(); ++r) {
      const std::size_t idx = i * y.cols() + r;
      const double allowed = bound(e, idx, k, f);
      if (!element_ok(y.at(i, r), e.want[idx], allowed)) {
        if (bad == 0) res = ::testing::AssertionFailure();
        if (bad < 5)
          res << "(" << i << "," << r << "): got " << y.at(i, r) << " want " << e.want[idx] << " (allowed " << allowed
              << ") ";
        ++bad;
      }
    }
  if (bad) res << "— " << bad << " element(s) out of bounds";
  return res;
}

// y through table t (nullptr: the public entry point).
void run(Table t, const Weights& w, const Guarded& x, const float* bias, Guarded& y) {
  if (t == nullptr) {
    ASSERT_EQ(ma::linear(x.cview(), w.matrix(), bias, y.view()), ma::Status::ok);
    return;
  }
  const ma::detail::LinearArgs a{w.data,
                                 w.scales,
                                 w.group,
                                 x.data(),
                                 x.rows() == 1 ? w.k : x.stride(),
                                 bias,
                                 y.data(),
                                 y.rows() == 1 ? w.n : y.stride(),
                                 x.rows(),
                                 w.n,
                                 w.k};
  ma::detail::linear_run(*t, w.format, a);
}

struct Case {
  Format format;
  std::size_t m, n, k, group = 0;
  std::size_t pad = 0;       // extra floats of stride in x and y
  bool misalign = false;     // x and y one float off their allocation's alignment, scales too
  std::size_t w_offset = 0;  // byte offset of the weight data (a multiple of its element size)
  bool bias = true;
};

const char* format_name(Format f) { return f == Format::f32 ? "f32" : f == Format::f16 ? "f16" : "q8"; }

void check_case(Table t, const Case& c, std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << (t ? t->arch : "linear()") << " " << format_name(c.format) << " m=" << c.m
                                    << " n=" << c.n << " k=" << c.k << " group=" << c.group << " pad=" << c.pad
                                    << " misalign=" << c.misalign << " w_offset=" << c.w_offset);
  Weights w(c.format, c.n, c.k, c.group == 0 ? c.k : c.group, c.w_offset, c.misalign);
  w.fill_random(seed);
  Uniform u(seed + 7);
  Guarded x(c.m, c.k, c.k + c.pad, c.misalign);
  x.fill(u);
  std::vector<float> bias(c.n + 1);
  for (float& b : bias) b = u();
  const float* b = c.bias ? bias.data() + (c.misalign ? 1 : 0) : nullptr;
  Guarded y(c.m, c.n, c.n + 2 * c.pad, !c.misalign);
  y.fill_value(12345.0f);  // overwritten, never accumulated into
  run(t, w, x, b, y);
  EXPECT_TRUE(matches(y, reference(w, x, b), c.k, c.format));
  EXPECT_TRUE(y.canaries_intact());
}

class LinearKernel : public ::testing::TestWithParam<Table> {};

#if MICROATTN_TEST_EMULATED
const std::vector<std::size_t> sweep_m = {1, 2, 3, 5, 9};
const std::vector<std::size_t> sweep_n = {1, 3, 4, 5, 9, 17};
const std::vector<std::size_t> sweep_k = {1, 3, 7, 8, 9, 16, 17, 33, 65};
#else
const std::vector<std::size_t> sweep_m = {1, 2, 3, 4, 5, 8, 9};
const std::vector<std::size_t> sweep_n = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17};
const std::vector<std::size_t> sweep_k = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 65, 100, 129};
#endif

TEST_P(LinearKernel, F32AndF16AcrossTileAndVectorEdges) {
  std::uint32_t seed = 1;
  for (Format f : {Format::f32, Format::f16})
    for (std::size_t m : sweep_m)
      for (std::size_t n : sweep_n)
        for (std::size_t k : sweep_k) {
          Case c{f, m, n, k};
          c.pad = (m + n) % 3;
          c.misalign = ((m ^ k) & 1) != 0;
          c.w_offset = f == Format::f16 ? 2 * (k % 4) : 4 * (n % 2);
          c.bias = (k % 3) != 0;
          check_case(GetParam(), c, seed++);
        }
}

TEST_P(LinearKernel, LongRowsAndManyRows) {
  // Rows longer than a few vectors and blocks, n across 4-row tiles, m across x-row tiles.
  std::uint32_t seed = 500;
  for (Format f : {Format::f32, Format::f16, Format::q8})
    for (std::size_t k : {255, 256, 257, 1024, 1031})
      for (std::size_t m : {1, 2, 4, 7}) {
        Case c{f, m, 13, k, f == Format::q8 ? (k % 2 == 0 ? 64 : k) : 0};
        c.misalign = (m & 1) != 0;
        // f16: rows starting word-aligned (m even) and 2 mod 4 (m odd), for even k and for odd k (rows alternate)
        c.w_offset = f == Format::q8 ? 3 : f == Format::f16 ? 4 + 2 * (m & 1) : 4;
        check_case(GetParam(), c, seed++);
      }
}

TEST_P(LinearKernel, F16OneRowOverLargeWeights) {
  // m = 1 over weights of 4 MiB and more, which x86 reads one row after another (f16_sequential_bytes): n across
  // the 8-row tiles, k with and without a tail vector, and a matrix just below the threshold.
  std::uint32_t seed = 900;
  for (const auto& [n, k] : std::vector<std::pair<std::size_t, std::size_t>>{{2051, 1031}, {8195, 257}, {2047, 1024}}) {
    Case c{Format::f16, 1, n, k};
    c.w_offset = 2 * (n % 4);
    c.misalign = (n & 1) != 0;
    check_case(GetParam(), c, seed++);
  }
}

// q8 group layouts: (k, group, n). Groups dividing k (segments of 1 … 96, across the 16/32/64-byte vectors), group
// = k, group a multiple of k (rows share a scale), one scale for all, and groups that straddle rows unevenly (the
// float path: hidden 172 with group 64 as llama2.c's w2, 100/64, 7/3, 20/8).
struct Layout {
  std::size_t k, group, n;
};
const std::vector<Layout> q8_layouts = {
    {1, 1, 5},       {7, 1, 3},     {10, 2, 4},    {9, 3, 5},     {20, 4, 3},    {80, 16, 5},  {64, 32, 9},
    {96, 32, 4},     {128, 64, 5},  {192, 64, 4},  {144, 48, 3},  {192, 96, 5},  {320, 64, 2}, {3, 3, 4},
    {16, 16, 5},     {17, 17, 4},   {31, 31, 3},   {32, 32, 5},   {33, 33, 4},   {63, 63, 3},  {64, 64, 9},
    {65, 65, 4},     {127, 127, 2}, {129, 129, 5}, {200, 200, 3}, {256, 256, 5}, {24, 48, 6},  {40, 120, 9},
    {33, 33 * 5, 5}, {172, 64, 16}, {100, 64, 16}, {7, 3, 3},     {20, 8, 2},    {50, 75, 3},  {96, 256, 8}};

TEST_P(LinearKernel, Q8GroupLayouts) {
  std::uint32_t seed = 1000;
  for (const Layout& l : q8_layouts)
    for (std::size_t m : {1, 2, 3, 5}) {
      Case c{Format::q8, m, l.n, l.k, l.group};
      c.pad = m % 2;
      c.misalign = (m & 1) == 0;
      c.w_offset = m;  // any byte offset is valid for int8
      c.bias = m != 3;
      check_case(GetParam(), c, seed++);
    }
}

TEST_P(LinearKernel, Q8AlignedRowsAcrossKernelBlocks) {
  // Word-aligned weights with segments of whole 16-byte steps: the Cortex-M kernels' fast paths (row pairs / quads in
  // asm, sums kept per block of 16 rows), across their row-tile and block edges, with one and several segments per
  // chunk, scales per row, per group and shared by rows, and more than one chunk per row (the accumulating calls).
  // Segments of an odd number of 16 columns enter the 32-column asm step at its second half (48: then whole steps).
  const std::vector<Layout> layouts = {{16, 16, 0},       {64, 64, 0}, {256, 64, 0},  {48, 16, 0},
                                       {96, 32, 0},       {32, 64, 0}, {512, 512, 0}, {576, 64, 0},
                                       {128, 128 * 4, 0}, {48, 48, 0}, {144, 48, 0},  {80, 80, 0}};
  std::uint32_t seed = 2500;
  for (const Layout& l : layouts)
    for (std::size_t n : {1, 2, 3, 4, 5, 7, 15, 16, 17, 31, 32, 33, 67})
      for (std::size_t m : {1, 2}) {
        if ((n * l.k) % l.group != 0) continue;
        Case c{Format::q8, m, n, l.k, l.group};
        c.bias = n % 3 != 0;
        check_case(GetParam(), c, seed++);
      }
}

TEST_P(LinearKernel, Q8GroupsLongerThanTheChunk) {
  // A group longer than the quantization buffer: its scale comes from the whole group before its first piece.
  const std::size_t chunk = md::linear_q8_chunk_bytes;
  const std::size_t g = chunk + chunk / 2 + 4;
  std::uint32_t seed = 2000;
  const std::vector<Layout> layouts = {{2 * g, g, 3},
                                       {2 * chunk + 40, 2 * chunk + 40, 2},
                                       {chunk + 1, 2 * (chunk + 1), 4},
                                       {chunk + 3, (chunk + 3) * 3, 3}};
  for (const Layout& l : layouts)
    for (std::size_t m : {1, 3}) check_case(GetParam(), Case{Format::q8, m, l.n, l.k, l.group, 1, m == 3, 1}, seed++);
}

TEST_P(LinearKernel, Q8ManyGroupsPerChunk) {
  // More groups than a chunk holds scales for (linear_q8_chunk_groups), and chunks that end inside a row.
  const std::size_t groups = md::linear_q8_chunk_groups;
  std::uint32_t seed = 3000;
  for (std::size_t g : {std::size_t{1}, std::size_t{4}, std::size_t{32}})
    for (std::size_t k : {groups * g * 2 + g, groups * g - g})
      if (k > 0) check_case(GetParam(), Case{Format::q8, 2, 5, k, g, 0, true, 2}, seed++);
}

// x exactly on the quantization grid, power-of-two scales (two exponents each, so that every partial sum stays
// within 2^24 units of the finest grid): every product and sum is exact, so y equals the integer result bit for bit.
// Some elements sit half-way between grid points: runq.c rounds them away from zero.
TEST_P(LinearKernel, Q8ExactOnTheGridWithTiesAwayFromZero) {
  const std::vector<Layout> layouts = {{64, 32, 5}, {200, 200, 4}, {96, 16, 9}, {256, 64, 4}, {130, 130 * 2, 6}};
  std::uint32_t seed = 4000;
  for (const Layout& l : layouts)
    for (std::size_t m : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message() << GetParam()->arch << " k=" << l.k << " group=" << l.group << " m=" << m);
      std::mt19937 rng(seed++);
      Weights w(Format::q8, l.n, l.k, l.group, 1, false);
      w.fill_random(seed);
      for (std::size_t g = 0; g < l.n * l.k / l.group; ++g)
        w.scales[g] = std::ldexp(1.0f, -5 - static_cast<int>(g % 2));
      const std::size_t seg = std::min(l.k, l.group);
      Guarded x(m, l.k);
      std::vector<double> xq(m * l.k), sx(m * (l.k / seg));
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t s = 0; s < l.k / seg; ++s) {
          const int e = -3 - static_cast<int>((i + s) % 2);
          sx[i * (l.k / seg) + s] = std::ldexp(1.0, e);
          for (std::size_t c = s * seg; c < (s + 1) * seg; ++c) {
            const int q = std::uniform_int_distribution<int>(-126, 126)(rng);
            const bool tie = rng() % 4 == 0;
            // The group's max is 127 grid steps (scale = max/127 = 2^e exactly); ties at q ± ½.
            const double v = c == s * seg + (i % seg) ? (q < 0 ? -127.0 : 127.0) : q + (tie ? (q < 0 ? -0.5 : 0.5) : 0);
            x.at(i, c) = static_cast<float>(std::ldexp(v, e));
            xq[i * l.k + c] = std::round(v);  // half away from zero
          }
        }
      Guarded y(m, l.n);
      run(GetParam(), w, x, nullptr, y);
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t r = 0; r < l.n; ++r) {
          double want = 0.0;
          for (std::size_t c = 0; c < l.k; ++c) want += xq[i * l.k + c] * sx[i * (l.k / seg) + c / seg] * w.value(r, c);
          EXPECT_EQ(static_cast<double>(y.at(i, r)), want) << "row " << i << ", weight row " << r;
        }
      EXPECT_TRUE(y.canaries_intact());
    }
}

// The quantization term is tight: per group one element at the group's max, the others just under half a grid
// step with the sign of the weight, so each loses ~0.49 steps: the error reaches ~96 % of ½·Σ_g s_g·Σ|w|.
TEST_P(LinearKernel, Q8BoundIsTightForAdversarialX) {
  const std::vector<Layout> layouts = {{64, 64, 4}, {256, 64, 4}, {96, 32, 3}, {1024, 1024, 2}, {200, 400, 4}};
  std::uint32_t seed = 5000;
  for (const Layout& l : layouts) {
    SCOPED_TRACE(::testing::Message() << GetParam()->arch << " k=" << l.k << " group=" << l.group);
    Weights w(Format::q8, l.n, l.k, l.group, 0, false);
    w.fill_random(seed++);
    const std::size_t seg = std::min(l.k, l.group);
    Guarded x(l.n, l.k);  // x row i is adversarial for weight row i
    for (std::size_t i = 0; i < l.n; ++i)
      for (std::size_t c = 0; c < l.k; ++c) {
        const float big = 1.0f + static_cast<float>(c / seg);
        const float step = big / 127.0f;
        const bool first = c % seg == 0;
        const float sign = w.q8()[i * l.k + c] < 0 ? -1.0f : 1.0f;
        x.at(i, c) = first ? big : 0.49f * step * sign;
      }
    Guarded y(l.n, l.n);
    run(GetParam(), w, x, nullptr, y);
    const Expected e = reference(w, x, nullptr);
    EXPECT_TRUE(matches(y, e, l.k, Format::q8));
    for (std::size_t i = 0; i < l.n; ++i) {
      const std::size_t idx = i * l.n + i;
      const double err = std::fabs(y.at(i, i) - e.want[idx]);
      EXPECT_GT(err, 0.9 * 0.5 * e.quant[idx]) << "row " << i << ": the error should be near the bound";
    }
  }
}

// Every binary16 bit pattern, each alone in its weight row (the other weights +0) at a column that moves across the
// vector lanes and tails: y = x·value exactly (x = 1, −2, 0.5), inf stays inf, NaN stays NaN.
void check_f16_every_bit_pattern(Table t, std::size_t k);
TEST_P(LinearKernel, F16EveryBitPatternExactly) {
  // k = 16: every pattern in the vector kernels' whole groups of columns; 19: some in a last partial group.
  for (std::size_t k : {16, 19}) check_f16_every_bit_pattern(GetParam(), k);
}

void check_f16_every_bit_pattern(Table t, std::size_t k) {
  constexpr std::size_t block = 4096;
  Guarded x(3, k);
  for (std::size_t c = 0; c < k; ++c) {
    x.at(0, c) = 1.0f;
    x.at(1, c) = -2.0f;
    x.at(2, c) = 0.5f;
  }
  Weights w(Format::f16, block, k, 0, 2, false);
  Guarded y(3, block);
  for (std::uint32_t first = 0; first < 65536; first += block) {
    for (std::size_t r = 0; r < block; ++r)
      for (std::size_t c = 0; c < k; ++c)
        w.f16()[r * k + c] = c == r % k ? static_cast<std::uint16_t>(first + r) : std::uint16_t{0};
    run(t, w, x, nullptr, y);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t r = 0; r < block; ++r) {
        const double want = static_cast<double>(x.at(i, 0)) * half_value(static_cast<std::uint16_t>(first + r));
        const double got = y.at(i, r);
        const bool ok = std::isnan(want) ? std::isnan(got) : got == want;
        if (!ok && bad++ < 5)
          ADD_FAILURE() << t->arch << " k=" << k << ": pattern 0x" << std::hex << first + r << std::dec << " times "
                        << x.at(i, 0) << ": got " << got << ", want " << want;
      }
    EXPECT_EQ(bad, 0u) << "patterns from " << first;
  }
  EXPECT_TRUE(y.canaries_intact());
}

// f16 weights of every magnitude against x rows with subnormal elements and with elements of 2¹⁶ and more (which a
// vector kernel that widens the halves in integer instructions, flushing subnormal operands, cannot take as they are).
TEST_P(LinearKernel, F16WithSubnormalAndLargeX) {
  // Row kinds: 0 all subnormal, 1 one subnormal among normal elements, 2 elements of 2¹⁶ and above, 3 plain; in
  // orders that put subnormal rows first, between and after plain ones (kernels pairing rows of x), k across 8.
  const std::vector<std::vector<int>> orders = {{0, 1, 2, 3}, {3, 1, 2, 3, 0}, {2, 3, 1}};
  for (std::size_t k : {24, 29}) {
    for (const std::vector<int>& kinds : orders) {
      constexpr std::size_t n = 9;
      const std::size_t m = kinds.size();
      Weights w(Format::f16, n, k, 0, 0, false);
      std::mt19937 rng(static_cast<std::uint32_t>(8000 + k + m));
      for (std::size_t i = 0; i < n * k; ++i)  // normal halves with exponents 1..30, either sign
        w.f16()[i] = static_cast<std::uint16_t>(((rng() & 1u) << 15) | ((1 + rng() % 30) << 10) | (rng() & 1023u));
      const auto element = [&](int kind, std::size_t c) {
        if (kind == 0) return std::ldexp(static_cast<float>(1 + rng() % 1000), -140);  // subnormal
        if (kind == 1) return c % 5 == 2 ? 3.0e-39f : 0.25f;  // one subnormal among normal ones
        if (kind == 2) return c % 7 == 3 ? 70000.0f : -1.5f;  // 2¹⁶ and above
        return static_cast<float>(c) - 11.5f;                 // plain
      };
      Guarded x(m, k);
      for (std::size_t r = 0; r < m; ++r)
        for (std::size_t c = 0; c < k; ++c) x.at(r, c) = element(kinds[r], c);
      Guarded y(m, n);
      run(GetParam(), w, x, nullptr, y);  // no bias: it would hide the subnormal rows' products
      EXPECT_TRUE(matches(y, reference(w, x, nullptr), k, Format::f16)) << "k=" << k << " m=" << m;
      EXPECT_TRUE(y.canaries_intact());
    }
  }
}

// Non-finite x: the row becomes what fp32 matmul of the dequantized weights gives (NaN where inf meets a zero
// weight or an opposite inf), never a silently finite value; the other rows are untouched by it. Tiny x (its group
// max below 127·FLT_MIN) goes to q8's float path and keeps the f32 bound.
TEST_P(LinearKernel, NonFiniteAndTinyRows) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), finf = std::numeric_limits<float>::infinity();
  std::uint32_t seed = 6000;
  for (Format f : {Format::f32, Format::f16, Format::q8})
    for (const Layout& l : std::vector<Layout>{{64, 32, 5}, {37, 37, 6}, {172, 64, 16}, {200, 100, 3}}) {
      SCOPED_TRACE(::testing::Message() << GetParam()->arch << " " << format_name(f) << " k=" << l.k);
      Weights w(f, l.n, l.k, f == Format::q8 ? l.group : l.k, 0, false);
      w.fill_random(seed++);
      if (f == Format::q8) {
        w.q8()[l.k - 1] = 0;  // weight row 0 has a zero weight where row 2 of x is +inf: NaN there
        for (std::size_t g = 0; g < l.n * l.k / l.group; ++g) w.scales[g] = std::ldexp(1.0f, 80);
      }
      Guarded x(6, l.k);
      Uniform u(seed);
      x.fill(u);
      x.at(1, l.k / 2) = nan;
      x.at(2, l.k - 1) = finf;
      x.at(3, 0) = finf;
      x.at(3, l.k - 1) = -finf;
      for (std::size_t c = 0; c < l.k; ++c) x.at(4, c) = 1e-37f * u();  // below 127·FLT_MIN: q8's float path
      x.at(5, l.k / 3) = -finf;
      Guarded y(6, l.n);
      run(GetParam(), w, x, nullptr, y);
      const Expected e = reference(w, x, nullptr);
      EXPECT_TRUE(matches(y, e, l.k, f));
      for (std::size_t r = 0; r < l.n; ++r) {
        EXPECT_TRUE(std::isnan(y.at(1, r))) << r;
        EXPECT_FALSE(std::isfinite(y.at(2, r))) << r;
        EXPECT_FALSE(std::isfinite(y.at(3, r))) << r;
        EXPECT_FALSE(std::isfinite(y.at(5, r))) << r;
        EXPECT_TRUE(std::isfinite(y.at(0, r))) << r;
      }
    }
}

// Zero rows of x (+0 and −0 mixed) give exactly the bias (or 0), in every format; a q8 group of zeros among others
// adds nothing.
TEST_P(LinearKernel, ZeroRowsGiveTheBias) {
  std::uint32_t seed = 7000;
  for (Format f : {Format::f32, Format::f16, Format::q8}) {
    SCOPED_TRACE(::testing::Message() << GetParam()->arch << " " << format_name(f));
    Weights w(f, 9, 70, f == Format::q8 ? 35 : 70, 0, false);
    w.fill_random(seed++);
    Guarded x(3, 70);
    Uniform u(seed);
    x.fill(u);
    for (std::size_t c = 0; c < 70; ++c) {
      x.at(0, c) = (c % 2) != 0 ? -0.0f : 0.0f;
      if (c < 35) x.at(2, c) = c % 3 == 0 ? -0.0f : 0.0f;  // row 2: the first q8 group all zeros
    }
    std::vector<float> bias(9);
    for (float& b : bias) b = u();
    for (const float* b : {static_cast<const float*>(bias.data()), static_cast<const float*>(nullptr)}) {
      Guarded y(3, 9);
      run(GetParam(), w, x, b, y);
      for (std::size_t r = 0; r < 9; ++r) EXPECT_EQ(y.at(0, r), b != nullptr ? b[r] : 0.0f) << r;
      EXPECT_TRUE(matches(y, reference(w, x, b), 70, f));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, LinearKernel, ::testing::ValuesIn(all_linear_kernel_tables()), table_name);

// ---- the entry point ----------------------------------------------------------------------------------------

TEST(Linear, EntryPointRunsTheSelectedTable) {
  std::uint32_t seed = 8000;
  for (Format f : {Format::f32, Format::f16, Format::q8}) {
    SCOPED_TRACE(format_name(f));
    Weights w(f, 37, 96, f == Format::q8 ? 32 : 96, 0, false);
    w.fill_random(seed++);
    Guarded x(3, 96, 101);
    Uniform u(seed);
    x.fill(u);
    std::vector<float> bias(37, 0.25f);
    Guarded y1(3, 37, 40), y2(3, 37, 40);
    ASSERT_EQ(ma::linear(x.cview(), w.matrix(), bias.data(), y1.view()), ma::Status::ok);
    run(&ma::detail::selected_linear_kernels(), w, x, bias.data(), y2);
    EXPECT_EQ(y1.snapshot(), y2.snapshot());
    EXPECT_TRUE(matches(y1, reference(w, x, bias.data()), 96, f));
  }
}

TEST(Linear, OneRowViewsIgnoreTheirStride) {
  // One row: the stride addresses nothing and may be huge (the kernels must not step by it).
  Weights w(Format::q8, 5, 40, 20, 0, false);
  w.fill_random(1);
  std::vector<float> x(40, 0.5f), y(5, 0.0f);
  const std::size_t huge = std::size_t{1} << (sizeof(std::size_t) == 8 ? 40 : 20);
  ASSERT_EQ(ma::linear({x.data(), 1, 40, huge}, w.matrix(), nullptr, {y.data(), 1, 5, huge}), ma::Status::ok);
  for (std::size_t r = 0; r < 5; ++r) {
    double want = 0.0;
    for (std::size_t c = 0; c < 40; ++c) want += 0.5 * w.value(r, c);
    EXPECT_NEAR(y[r], want, 1e-3) << r;
  }
}

TEST(Linear, KernelNames) {
  for (Format f : {Format::f32, Format::f16, Format::q8}) {
    const std::string name = ma::linear_kernel_name(f);
    EXPECT_EQ(name.rfind(std::string("linear_") + format_name(f) + "_", 0), 0u) << name;
    // docs/design.md's rule: single underscores, the arch last and from its list.
    EXPECT_EQ(name.find("__"), std::string::npos) << name;
    bool arch_last = false;
    for (const char* arch : {"_scalar", "_sse2", "_avx2", "_avx512", "_avx512vnni", "_avxvnni", "_neon", "_neon64",
                             "_neon64dot", "_helium", "_armv7em"}) {
      const std::string a = arch;
      arch_last = arch_last || (name.size() > a.size() && name.compare(name.size() - a.size(), a.size(), a) == 0);
    }
    EXPECT_TRUE(arch_last) << name;
  }
  EXPECT_STREQ(ma::linear_kernel_name(static_cast<Format>(7)), "");
  std::printf("[ kernels ] linear: %s, %s, %s\n", ma::linear_kernel_name(Format::f32),
              ma::linear_kernel_name(Format::f16), ma::linear_kernel_name(Format::q8));
}

}  // namespace
