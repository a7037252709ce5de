// The f16 and q8 K/V cache: attention over the stored values against the double reference of those values (the
// test rounds K and V to binary16 and quantizes them to int8 itself), within the fp32 bound, on every kernel
// table and conversion table (attention_run_cache directly), and through the layers: forward, cross forward and
// attend, append one by one and in chunks, ring windows, GQA, masks, query counts around few_query_max,
// non-finite values, full caches, canaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "attention_run.hpp"
#include "kernels/cache.hpp"
#include "microattn/microattn.hpp"
#include "reference.hpp"
#include "test_support.hpp"

namespace ma = microattn;
namespace md = microattn::detail;
using namespace testing_support;

namespace {

// ---- the test's own storage rounding ------------------------------------------------------------------------
// binary16 by arithmetic in double: the value's ulp at its binade, nearbyint (ties to even in the default
// rounding mode), IEEE overflow at 65520.
std::uint16_t ref_half_bits(float x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
  if (std::isnan(x)) return static_cast<std::uint16_t>(sign | 0x7e00u);
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 65520.0) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (a < std::ldexp(1.0, -14)) {
    const double q = std::nearbyint(a / std::ldexp(1.0, -24));  // 0 … 1024 (1024: the smallest normal)
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(q));
  }
  int e = std::ilogb(a);
  double m = std::nearbyint(a / std::ldexp(1.0, e - 10));  // 1024 … 2048
  if (m == 2048.0) {
    m = 1024.0;
    ++e;
  }
  if (e > 15) return static_cast<std::uint16_t>(sign | 0x7c00u);
  return static_cast<std::uint16_t>(sign | ((e + 15) << 10) | (static_cast<int>(m) - 1024));
}
float ref_half_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double s = (h & 0x8000u) ? -1.0 : 1.0;
  if (e == 31) return m == 0 ? static_cast<float>(s * INFINITY) : std::numeric_limits<float>::quiet_NaN();
  if (e == 0) return static_cast<float>(s * std::ldexp(m, -24));
  return static_cast<float>(s * std::ldexp(1024 + m, e - 25));
}
// q8 as documented: s = max|x| / 127 (float), q = round-half-away(x / s) (float division; ties to even for
// weights, as the exporter) clamped to ±127; zeros: s = 0; a NaN or ±inf: s = NaN, q = 0.
void ref_q8_row(const float* x, std::size_t n, std::int8_t* q, float* s, bool ties_to_even = false) {
  float top = 0.0f;
  bool finite = true;
  for (std::size_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    top = std::max(top, std::fabs(x[i]));
  }
  *s = !finite ? std::numeric_limits<float>::quiet_NaN() : top / 127.0f;
  for (std::size_t i = 0; i < n; ++i) {
    if (!finite || *s == 0.0f) {
      q[i] = 0;
      continue;
    }
    const float t = x[i] / *s;
    const double r = ties_to_even ? std::nearbyint(static_cast<double>(t)) : std::round(static_cast<double>(t));
    q[i] = static_cast<std::int8_t>(std::max(-127.0, std::min(127.0, r)));
  }
  if (!finite) return;
  if (*s == 0.0f) *s = 0.0f;
}

// K or V of rows × (kv_heads·hd) floats (stride ld) in a format: its bytes, scales, and the values it holds.
struct Stored {
  ma::Format format;
  std::size_t rows, kv_heads, hd;
  std::vector<std::uint16_t> h;
  std::vector<std::int8_t> q;
  std::vector<float> scales;  // rows × kv_heads
  std::vector<float> values;  // rows × kv_dim: what attention must see
  Stored(ma::Format f, const float* x, std::size_t ld, std::size_t rows_, std::size_t kv_heads_, std::size_t hd_)
      : format(f), rows(rows_), kv_heads(kv_heads_), hd(hd_) {
    const std::size_t kv_dim = kv_heads * hd;
    values.resize(rows * kv_dim);
    if (f == ma::Format::f16) {
      h.resize(rows * kv_dim);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < kv_dim; ++c) {
          h[r * kv_dim + c] = ref_half_bits(x[r * ld + c]);
          values[r * kv_dim + c] = ref_half_value(h[r * kv_dim + c]);
        }
    } else {
      q.resize(rows * kv_dim);
      scales.resize(rows * kv_heads);
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t g = 0; g < kv_heads; ++g) {
          ref_q8_row(x + r * ld + g * hd, hd, &q[r * kv_dim + g * hd], &scales[r * kv_heads + g]);
          for (std::size_t c = 0; c < hd; ++c)
            values[r * kv_dim + g * hd + c] = scales[r * kv_heads + g] * static_cast<float>(q[r * kv_dim + g * hd + c]);
        }
    }
  }
  md::KvSource source(std::size_t g) const {
    const std::size_t kv_dim = kv_heads * hd;
    const void* data = format == ma::Format::f16 ? static_cast<const void*>(h.data() + g * hd)
                                                 : static_cast<const void*>(q.data() + g * hd);
    return {data, kv_dim, format == ma::Format::q8 ? scales.data() + g : nullptr, kv_heads, rows, hd};
  }
};

std::vector<const md::CacheKernels*> all_cache_tables() {
  std::vector<const md::CacheKernels*> t{&md::scalar_cache_kernels()};
  if (md::vector_cache_kernels() != nullptr) t.push_back(md::vector_cache_kernels());
  return t;
}

TEST(CacheStorage, HalfRoundingMatchesTheDefinition) {
  std::vector<float> xs = {0.0f,          -0.0f,         1.0f,     65504.0f,       65519.99f,
                           65520.0f,      -65520.0f,     65536.0f, 1e30f,          INFINITY,
                           -INFINITY,     6.1035156e-5f, 6.0e-5f,  5.9604645e-8f,  2.98e-8f,
                           2.9802322e-8f, 2.9802326e-8f, 1e-30f,   1.00048828125f, 1.00146484375f,
                           -3.0e-6f,      2048.5f,       2049.0f,  2051.0f,        1.401e-45f};
  Uniform u(7, -1.0f, 1.0f);
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    std::uint32_t b = static_cast<std::uint32_t>(rng());
    if ((b & 0x7f800000u) == 0x7f800000u) continue;
    float f;
    std::memcpy(&f, &b, sizeof f);
    xs.push_back(f);
  }
  for (float x : xs) {
    EXPECT_EQ(ma::f16_from_float(x), ref_half_bits(x)) << x;
    EXPECT_EQ(ma::f16_from_float(-x), ref_half_bits(-x));
  }
  EXPECT_EQ(ma::f16_from_float(NAN) & 0x7e00u, 0x7e00u);
}

TEST(CacheStorage, Q8RowsMatchTheDefinition) {
  std::mt19937 rng(5);
  for (std::size_t n : {1u, 3u, 16u, 33u}) {
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<float> x(n);
      const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 200) - 140);
      for (float& v : x) v = (static_cast<float>(rng() % 2001) / 1000.0f - 1.0f) * mag;
      if (trial % 7 == 0) x[trial % n] = 0.0f;
      if (trial % 11 == 0) std::fill(x.begin(), x.end(), 0.0f);
      if (trial % 13 == 0) x[0] = trial % 2 ? INFINITY : NAN;
      std::vector<std::int8_t> q(n), qr(n);
      float s = -1.0f, sr = -1.0f;
      md::q8_store_row(x.data(), n, q.data(), &s);
      ref_q8_row(x.data(), n, qr.data(), &sr);
      ASSERT_EQ(std::isnan(s), std::isnan(sr));
      if (!std::isnan(s)) {
        ASSERT_EQ(s, sr);
      }
      ASSERT_EQ(q, qr) << "n " << n << " trial " << trial;
    }
  }
}

// ---- the public conversions (weights.hpp) --------------------------------------------------------------------
TEST(Formats, FloatFromF16EveryBitPattern) {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const float got = ma::float_from_f16(static_cast<std::uint16_t>(h)),
                want = ref_half_value(static_cast<std::uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000u) != 0) << std::hex << h;
    } else {
      ASSERT_EQ(got, want) << std::hex << h;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << h;
    }
    if (!std::isnan(want)) {
      ASSERT_EQ(ma::f16_from_float(got), h) << std::hex << h;  // every half round-trips
    }
  }
}

// quantize_q8 against the reference group by group (ties to even), over strides, groups that divide the columns,
// equal them, span several rows or straddle rows, magnitudes from subnormal to large, exact ties, zero and
// non-finite groups; canaries after data and scales.
TEST(Formats, QuantizeQ8AsTheExporter) {
  std::mt19937 rng(11);
  struct Shape {
    std::size_t rows, cols, stride, group;
  };
  const Shape shapes[] = {{1, 1, 1, 1}, {3, 8, 8, 8}, {3, 8, 11, 4},   {4, 6, 6, 12},      {16, 172, 172, 64},
                          {2, 7, 9, 2}, {7, 3, 5, 7}, {6, 32, 40, 32}, {1, 300, 300, 300}, {9, 5, 5, 45}};
  std::size_t checked = 0;
  for (const Shape& sh : shapes)
    for (int trial = 0; trial < 40; ++trial) {
      SCOPED_TRACE(::testing::Message() << sh.rows << "x" << sh.cols << " stride " << sh.stride << " group " << sh.group
                                        << " trial " << trial);
      std::vector<float> w(sh.rows * sh.stride, 12345.0f), dense(sh.rows * sh.cols);
      const float mag = std::ldexp(1.0f, static_cast<int>(rng() % 240) - 140);
      for (std::size_t r = 0; r < sh.rows; ++r)
        for (std::size_t c = 0; c < sh.cols; ++c) {
          float v = (static_cast<float>(rng() % 2001) / 1000.0f - 1.0f) * mag;
          if (trial % 3 == 0) v = static_cast<float>(static_cast<int>(rng() % 255) - 127) + 0.5f * (trial % 2);  // ties
          if (trial % 3 == 0 && (r * sh.cols + c) % sh.group == 0) v = 127.0f;  // s = 1 exactly
          dense[r * sh.cols + c] = w[r * sh.stride + c] = v;
        }
      if (trial % 5 == 1) {
        for (std::size_t i = 0; i < sh.group; ++i) dense[i] = 0.0f;  // a zero group
      }
      if (trial % 7 == 2) dense[sh.rows * sh.cols - 1] = trial % 2 ? INFINITY : NAN;
      for (std::size_t e = 0; e < sh.rows * sh.cols; ++e) w[e / sh.cols * sh.stride + e % sh.cols] = dense[e];
      const std::size_t n = sh.rows * sh.cols, groups = n / sh.group;
      std::vector<std::int8_t> q(n + 8, 0x5a), qr(n);
      std::vector<float> s(groups + 2, -7.0f), sr(groups);
      ASSERT_EQ(
          ma::quantize_q8(ma::MatrixView<const float>{static_cast<const float*>(w.data()), sh.rows, sh.cols, sh.stride},
                          sh.group, q.data(), s.data()),
          ma::Status::ok);
      for (std::size_t g = 0; g < groups; ++g) {
        ref_q8_row(dense.data() + g * sh.group, sh.group, qr.data() + g * sh.group, &sr[g], true);
        ASSERT_EQ(std::isnan(s[g]), std::isnan(sr[g])) << g;
        if (!std::isnan(sr[g])) {
          ASSERT_EQ(s[g], sr[g]) << g;
        }
      }
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(q[i], qr[i]) << i;
      for (std::size_t i = n; i < q.size(); ++i) ASSERT_EQ(q[i], 0x5a) << "written past data";
      for (std::size_t g = groups; g < s.size(); ++g) ASSERT_EQ(s[g], -7.0f) << "written past the scales";
      ++checked;
    }
  EXPECT_EQ(checked, 400u);
}

TEST(Formats, QuantizeQ8BadInput) {
  alignas(16) float w[24] = {};
  for (int i = 0; i < 24; ++i) w[i] = static_cast<float>(i) - 11.5f;
  alignas(16) std::int8_t q[32];
  alignas(16) float s[8];
  const auto untouched = [&] {
    for (std::int8_t v : q)
      if (v != 0x33) return false;
    for (float v : s)
      if (v != -1.0f) return false;
    return true;
  };
  const auto run = [&](ma::MatrixView<const float> v, std::size_t group, std::int8_t* qd, float* sd) {
    std::fill(std::begin(q), std::end(q), static_cast<std::int8_t>(0x33));
    std::fill(std::begin(s), std::end(s), -1.0f);
    const ma::Status st = ma::quantize_q8(v, group, qd, sd);
    EXPECT_TRUE(untouched()) << ma::to_string(st);
    return st;
  };
  const float* cw = w;
  EXPECT_EQ(run(ma::make_view(static_cast<const float*>(nullptr), 4, 6), 6, q, s), ma::Status::null_pointer);
  EXPECT_EQ(run(ma::make_view(cw, 4, 6), 6, nullptr, s), ma::Status::null_pointer);
  EXPECT_EQ(run(ma::make_view(cw, 4, 6), 6, q, nullptr), ma::Status::null_pointer);
  EXPECT_EQ(run(ma::make_view(reinterpret_cast<const float*>(reinterpret_cast<const char*>(w) + 1), 2, 6), 6, q, s),
            ma::Status::misaligned);
  EXPECT_EQ(run(ma::make_view(cw, 4, 6), 6, q, reinterpret_cast<float*>(reinterpret_cast<char*>(s) + 2)),
            ma::Status::misaligned);
  EXPECT_EQ(run(ma::make_view(cw, 0, 6), 6, q, s), ma::Status::invalid_shape);
  EXPECT_EQ(run(ma::make_view(cw, 4, 0), 6, q, s), ma::Status::invalid_shape);
  EXPECT_EQ(run(ma::MatrixView<const float>{cw, 4, 6, 5}, 6, q, s), ma::Status::invalid_shape);  // stride < cols
  EXPECT_EQ(run(ma::make_view(cw, 4, 6), 0, q, s), ma::Status::invalid_shape);
  EXPECT_EQ(run(ma::make_view(cw, 4, 6), 5, q, s), ma::Status::invalid_shape);  // 24 % 5
  EXPECT_EQ(run(ma::MatrixView<const float>{cw, 1, 6, SIZE_MAX / 2}, 6, q, s), ma::Status::invalid_shape);
  EXPECT_EQ(ma::quantize_q8(ma::make_view(cw, 4, 6), 8, q, s), ma::Status::ok);  // a group may straddle rows
  // Outputs over w (in place is not offered), over each other.
  EXPECT_EQ(ma::quantize_q8(ma::make_view(cw, 4, 6), 6, reinterpret_cast<std::int8_t*>(w + 23), s),
            ma::Status::aliasing);
  EXPECT_EQ(ma::quantize_q8(ma::make_view(cw, 4, 6), 6, q, w + 20), ma::Status::aliasing);
  EXPECT_EQ(run(ma::make_view(cw, 4, 6), 12, q, reinterpret_cast<float*>(q + 20)), ma::Status::aliasing);
  EXPECT_EQ(ma::quantize_q8(ma::make_view(cw, 4, 6), 12, q, reinterpret_cast<float*>(q + 24)),
            ma::Status::ok);                                                    // adjacent
  for (int i = 0; i < 24; ++i) EXPECT_EQ(w[i], static_cast<float>(i) - 11.5f);  // the aliasing calls wrote nothing
}

// ---- attention_run_cache on every kernel table and conversion table ---------------------------------------
struct KernelPair {
  const md::Kernels* kern;
  const md::CacheKernels* ck;
};
std::vector<KernelPair> all_pairs() {
  std::vector<KernelPair> p;
  for (const md::Kernels* k : all_kernel_tables())
    for (const md::CacheKernels* c : all_cache_tables()) p.push_back({k, c});
  return p;
}
std::string pair_name(const ::testing::TestParamInfo<KernelPair>& info) {
  std::string n = std::string(info.param.kern->arch) + "_" + info.param.ck->arch;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

class CacheKernel : public ::testing::TestWithParam<KernelPair> {};

struct RunOpts {
  bool causal = false;
  long long offset = 0;
  std::size_t window = 0;
  bool mask = false;
};

// Query heads `group` × n_q rows (head h at column h·d of a row) against one K/V head g of `kv_heads`.
void check_run(const KernelPair& kp, ma::Format f, std::size_t n_q, std::size_t n_kv, std::size_t d, std::size_t group,
               std::size_t kv_heads, const RunOpts& o, std::uint32_t seed, float v_poison = 0.0f) {
  SCOPED_TRACE(::testing::Message() << "format " << static_cast<int>(f) << " n_q " << n_q << " n_kv " << n_kv << " d "
                                    << d << " group " << group << " causal " << o.causal << " window " << o.window
                                    << " mask " << o.mask);
  Uniform u(seed, -2.0f, 2.0f);
  const std::size_t kv_dim = kv_heads * d;
  Guarded q(n_q, group * d, group * d + 3);
  q.fill(u);
  std::vector<float> k(n_kv * kv_dim), v(n_kv * kv_dim);
  for (float& x : k) x = u();
  for (std::size_t j = 0; j < n_kv; ++j)
    for (std::size_t c = 0; c < kv_dim; ++c) v[j * kv_dim + c] = u() * (j % 5 == 1 ? 0.01f : 1.0f);
  if (n_kv > 2) std::fill(v.begin() + kv_dim, v.begin() + 2 * kv_dim, 0.0f);  // a row of zeros: scale 0
  if (v_poison != 0.0f) v[(n_kv / 2) * kv_dim + (kv_heads - 1) * d + d / 2] = v_poison;
  const Stored sk(f, k.data(), kv_dim, n_kv, kv_heads, d), sv(f, v.data(), kv_dim, n_kv, kv_heads, d);
  std::vector<float> mask;
  if (o.mask) {
    mask.resize(n_q * n_kv);
    for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 7 == 3 ? -INFINITY : u() * 0.5f;
  }
  const std::size_t g = kv_heads - 1;
  const md::KvSource ks = sk.source(g), vs = sv.source(g);
  Guarded out(n_q, group * d, group * d + 2);
  const std::size_t ws_floats =
      ma::attention_workspace_floats(d, d) + ma::layer_cache_block_floats(d) + (seed % 2 ? 1000 : 0);
  Guarded ws(1, ws_floats);
  ws.fill_value(0.0f);
  ma::AttentionOptions opt;
  opt.causal = o.causal;
  opt.causal_offset = o.offset;
  opt.window = o.window;
  if (o.mask) opt.mask = {mask.data(), n_q, n_kv, n_kv};
  const md::QueryHeads qh{{q.data(), n_q, d, q.stride()}, d, {out.data(), n_q, d, out.stride()}, d, group};
  md::attention_run_cache(*kp.kern, *kp.ck, f, qh, ks, vs, ws.data(), ws_floats, opt);
  EXPECT_TRUE(out.canaries_intact());
  EXPECT_TRUE(ws.canaries_intact());
  for (std::size_t h = 0; h < group; ++h) {
    ref::AttentionCase c{q.data() + h * d,
                         q.stride(),
                         sk.values.data() + g * d,
                         kv_dim,
                         sv.values.data() + g * d,
                         kv_dim,
                         n_q,
                         n_kv,
                         d,
                         d,
                         0.0,
                         o.causal,
                         o.offset,
                         o.mask ? mask.data() : nullptr,
                         n_kv,
                         o.window};
    std::vector<double> want, wabs, sabs;
    ref::attention(c, want, wabs, sabs);
    for (std::size_t i = 0; i < n_q; ++i) {
      bool sees_poison = false;
      if (v_poison != 0.0f) {
        const std::size_t j = n_kv / 2;
        sees_poison = ref::visible(i, j, o.causal, o.offset, o.window) && (!o.mask || mask[i * n_kv + j] != -INFINITY);
      }
      const Tolerance tol = attention_tolerance(d, n_kv, sabs[i]);
      for (std::size_t cc = 0; cc < d; ++cc) {
        const float got = out.at(i, h * d + cc);
        if (sees_poison && (f == ma::Format::q8 || cc == d / 2) && h < group) {
          // f16: inf stored, the column is NaN (the exact path's rule, as fp32); q8: the row reads NaN.
          ASSERT_TRUE(std::isnan(got)) << "row " << i << " col " << cc;
          continue;
        }
        ASSERT_TRUE(within(got, want[i * d + cc], wabs[i * d + cc], tol))
            << "head " << h << " row " << i << " col " << cc << ": got " << got << " want " << want[i * d + cc];
      }
    }
  }
}

TEST_P(CacheKernel, EveryShapeAndOption) {
  for (ma::Format f : {ma::Format::f16, ma::Format::q8})
    for (std::size_t d : {8u, 17u, 32u})
      for (std::size_t n_kv : {1u, 15u, 16u, 17u, 64u, 65u, 130u})
        for (std::size_t n_q : {1u, 2u, 3u, 4u, 5u, 31u, 33u})
          for (std::size_t group : {1u, 4u}) {
            if (n_q * group > 40 && n_kv > 64) continue;
            const std::uint32_t seed = static_cast<std::uint32_t>(d * 1000 + n_kv * 10 + n_q + group);
            check_run(GetParam(), f, n_q, n_kv, d, group, 2, {}, seed);
            check_run(GetParam(), f, n_q, n_kv, d, group, 2,
                      {true, static_cast<long long>(n_kv) - static_cast<long long>(n_q), 0, false}, seed + 1);
            check_run(GetParam(), f, n_q, n_kv, d, group, 1, {true, 2, 5, true}, seed + 2);
            check_run(GetParam(), f, n_q, n_kv, d, group, 2, {false, 3, 4, false}, seed + 3);
          }
}

TEST_P(CacheKernel, NonFiniteValues) {
  for (ma::Format f : {ma::Format::f16, ma::Format::q8})
    for (std::size_t n_q : {1u, 3u, 9u}) {
      check_run(GetParam(), f, n_q, 40, 16, 2, 2, {}, 11, INFINITY);
      check_run(GetParam(), f, n_q, 40, 16, 2, 2, {true, 30, 0, false}, 12, -INFINITY);
      check_run(GetParam(), f, n_q, 40, 16, 1, 2, {true, 25, 0, true}, 13, NAN);
    }
  // f16 only: a finite value past 65520 stores inf.
  for (std::size_t n_q : {1u, 6u}) check_run(GetParam(), ma::Format::f16, n_q, 40, 16, 2, 2, {}, 14, 1e6f);
}

INSTANTIATE_TEST_SUITE_P(EveryArch, CacheKernel, ::testing::ValuesIn(all_pairs()), pair_name);

// ---- the tables' fused products, field by field --------------------------------------------------------------
// Each table's *_rows_dot / *_rows_axpy against the double products of the stored values (Stored: the test's own
// rounding) within the fp32 bound, and against the scalar table within twice it; n_q 1–33 rows, key counts and
// head dims across every vector and tile edge, rows strided (two K/V heads: the second one read, scale_stride 2),
// canaries in every row's padding and past the end, alpha and none, non-finite stored values and queries.
constexpr float canary = -12345.0f;

// A double sum of products and the sum of their magnitudes (the fp32 bound's).
struct DotRef {
  double sum = 0.0, mag = 0.0;
  void add(double a, double b) {
    sum += a * b;
    mag += std::fabs(a * b);
  }
};

// |got − want| <= bound: NaN where the double product is NaN, the same inf where it is inf.
::testing::AssertionResult near_ref(float got, double want, double bound) {
  if (std::isnan(want)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
  } else if (std::isinf(want)) {
    if (static_cast<double>(got) == want) return ::testing::AssertionSuccess();
  } else if (std::isfinite(got) && std::fabs(static_cast<double>(got) - want) <= bound) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << got << " want " << want << " bound " << bound;
}

struct FusedCase {
  ma::Format f;
  std::size_t nr, bk, d;
  int poison;  // 0 none, 1 a stored inf, 2 a stored NaN, 3 an inf query element
};

// One table against the reference and the scalar table; both products.
void check_fused(const md::CacheKernels& ck, const FusedCase& t, std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << ck.arch << " format " << static_cast<int>(t.f) << " nr " << t.nr << " bk "
                                    << t.bk << " d " << t.d << " poison " << t.poison);
  const std::size_t nr = t.nr, bk = t.bk, d = t.d, kv_heads = 2, kv_dim = kv_heads * d;
  Uniform u(seed, -2.0f, 2.0f);
  std::vector<float> x(bk * kv_dim);
  for (std::size_t j = 0; j < bk; ++j)
    for (std::size_t c = 0; c < kv_dim; ++c) x[j * kv_dim + c] = u() * (j % 7 == 3 ? 0.001f : 1.0f);
  if (bk > 2)
    for (std::size_t c = 0; c < kv_dim; ++c) x[kv_dim + c] = 0.0f;  // a zero row: scale 0
  if (t.poison == 1) x[(bk / 2) * kv_dim + d + d / 2] = INFINITY;
  if (t.poison == 2) x[(bk - 1) * kv_dim + d + d - 1] = NAN;
  const Stored st(t.f, x.data(), kv_dim, bk, kv_heads, d);
  const md::KvSource src = st.source(1);
  const float* val = st.values.data() + d;  // row j, column c: val[j·kv_dim + c]

  // Scores: q nr × d (stride d + 1), s nr × (bk + 3).
  const std::size_t ldq = d + 1, lds = bk + 3;
  std::vector<float> q(nr * ldq);
  for (float& e : q) e = u();
  if (t.poison == 3) q[(nr / 2) * ldq + d / 3] = -INFINITY;
  std::vector<float> s(nr * lds + 5, canary), s_scalar(nr * lds + 5, canary);
  const auto dot = [&](const md::CacheKernels& table, float* out) {
    if (t.f == ma::Format::f16)
      table.f16_rows_dot(q.data(), ldq, nr, d, static_cast<const std::uint16_t*>(src.data), src.stride, bk, out, lds);
    else
      table.q8_rows_dot(q.data(), ldq, nr, d, static_cast<const std::int8_t*>(src.data), src.stride, src.scales,
                        src.scale_stride, bk, out, lds);
  };
  dot(ck, s.data());
  dot(md::scalar_cache_kernels(), s_scalar.data());
  constexpr double u32 = 0x1p-24;
  for (std::size_t r = 0; r < nr; ++r) {
    for (std::size_t j = 0; j < bk; ++j) {
      DotRef ref;
      for (std::size_t p = 0; p < d; ++p) ref.add(q[r * ldq + p], val[j * kv_dim + p]);
      const double bound = (static_cast<double>(d) + 2.0) * u32 * ref.mag;
      ASSERT_TRUE(near_ref(s[r * lds + j], ref.sum, bound)) << "score row " << r << " key " << j;
      ASSERT_TRUE(near_ref(s[r * lds + j], s_scalar[r * lds + j], 2.0 * bound)) << "vs scalar, row " << r;
    }
    for (std::size_t j = bk; j < lds && r * lds + j < s.size(); ++j)
      ASSERT_EQ(s[r * lds + j], canary) << "score padding row " << r;
  }
  for (std::size_t i = nr * lds; i < s.size(); ++i) ASSERT_EQ(s[i], canary) << "past the scores";

  // P·V: p nr × (bk + 2), o nr × (d + 2) with canaries between rows; alpha per row (or none on odd seeds).
  const std::size_t ldp = bk + 2, ldo = d + 2;
  std::vector<float> p(nr * ldp), o0(nr * ldo, canary), alpha(nr);
  for (float& e : p) e = 0.5f * (u() + 2.0f);  // probabilities-like: [0, 2)
  for (std::size_t r = 0; r < nr; ++r) {
    alpha[r] = r % 3 == 0 ? 1.0f : 0.25f * (u() + 2.0f);
    for (std::size_t c = 0; c < d; ++c) o0[r * ldo + c] = u() * 4.0f;
  }
  const bool with_alpha = seed % 2 == 0;
  std::vector<float> o = o0, o_scalar = o0;
  o.resize(nr * ldo + 7, canary);
  o_scalar.resize(nr * ldo + 7, canary);
  const auto axpy = [&](const md::CacheKernels& table, float* out) {
    const float* a = with_alpha ? alpha.data() : nullptr;
    if (t.f == ma::Format::f16)
      table.f16_rows_axpy(p.data(), ldp, nr, bk, static_cast<const std::uint16_t*>(src.data), src.stride, d, a, out,
                          ldo);
    else
      table.q8_rows_axpy(p.data(), ldp, nr, bk, static_cast<const std::int8_t*>(src.data), src.stride, src.scales,
                         src.scale_stride, d, a, out, ldo);
  };
  axpy(ck, o.data());
  axpy(md::scalar_cache_kernels(), o_scalar.data());
  for (std::size_t r = 0; r < nr; ++r) {
    for (std::size_t c = 0; c < d; ++c) {
      DotRef ref;
      if (with_alpha) ref.add(o0[r * ldo + c], alpha[r]);
      for (std::size_t j = 0; j < bk; ++j) ref.add(p[r * ldp + j], val[j * kv_dim + c]);
      const double bound = (static_cast<double>(bk) + 3.0) * u32 * ref.mag;
      ASSERT_TRUE(near_ref(o[r * ldo + c], ref.sum, bound)) << "output row " << r << " col " << c;
      ASSERT_TRUE(near_ref(o[r * ldo + c], o_scalar[r * ldo + c], 2.0 * bound)) << "vs scalar, row " << r;
    }
    for (std::size_t c = d; c < ldo; ++c) ASSERT_EQ(o[r * ldo + c], canary) << "output padding row " << r;
  }
  for (std::size_t i = nr * ldo; i < o.size(); ++i) ASSERT_EQ(o[i], canary) << "past the output";
}

class CacheFused : public ::testing::TestWithParam<const md::CacheKernels*> {};

TEST_P(CacheFused, EveryShapeAgainstTheDoubleProducts) {
  std::uint32_t seed = 1;
  for (ma::Format f : {ma::Format::f16, ma::Format::q8})
    for (std::size_t d : {1u, 2u, 3u, 4u, 5u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 32u, 33u, 48u, 64u, 65u})
      for (std::size_t bk : {1u, 2u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 32u, 33u, 63u, 64u, 65u, 100u})
        for (std::size_t nr : {1u, 2u, 3u, 4u, 5u, 7u, 8u, 9u, 12u, 16u, 17u, 33u}) {
          if (nr > 9 && d > 17 && bk > 33 && nr != 33) continue;
          check_fused(*GetParam(), {f, nr, bk, d, 0}, seed++);
          if (HasFatalFailure()) return;
        }
}

TEST_P(CacheFused, NonFiniteValues) {
  std::uint32_t seed = 7;
  for (ma::Format f : {ma::Format::f16, ma::Format::q8})
    for (int poison : {1, 2, 3})
      for (std::size_t d : {5u, 8u, 16u, 33u})
        for (std::size_t nr : {1u, 4u, 9u}) {
          check_fused(*GetParam(), {f, nr, 40, d, poison}, seed++);
          if (HasFatalFailure()) return;
        }
}

std::string table_name(const ::testing::TestParamInfo<const md::CacheKernels*>& info) { return info.param->arch; }
INSTANTIATE_TEST_SUITE_P(EveryTable, CacheFused, ::testing::ValuesIn(all_cache_tables()), table_name);

// ---- the layers --------------------------------------------------------------------------------------------
// Weights that project exactly: each output feature is one input feature times ±2^e (no bias), so Q, K and V are
// known to the bit and the stored K/V are the test's own rounding of them.
struct ExactWeights {
  std::vector<float> wq, wk, wv;
  std::vector<std::size_t> pq, pk, pv;
  std::vector<float> fq, fk, fv;
  ExactWeights(std::size_t d, std::size_t kv_dim, std::uint32_t seed) {
    std::mt19937 rng(seed);
    auto make = [&](std::size_t n, std::vector<float>& w, std::vector<std::size_t>& p, std::vector<float>& f) {
      std::vector<std::size_t> perm(d);
      for (std::size_t i = 0; i < d; ++i) perm[i] = i;
      std::shuffle(perm.begin(), perm.end(), rng);
      w.assign(n * d, 0.0f);
      p.resize(n);
      f.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        p[i] = perm[i];
        f[i] = std::ldexp(rng() % 2 ? 1.0f : -1.0f, static_cast<int>(rng() % 3) - 1);
        w[i * d + p[i]] = f[i];
      }
    };
    make(d, wq, pq, fq);
    make(kv_dim, wk, pk, fk);
    make(kv_dim, wv, pv, fv);
  }
  ma::LayerWeights view() const { return {wq.data(), wk.data(), wv.data()}; }
  // rows × n of x projected (exactly).
  static std::vector<float> project(const Guarded& x, const std::vector<std::size_t>& p, const std::vector<float>& f) {
    std::vector<float> y(x.rows() * p.size());
    for (std::size_t r = 0; r < x.rows(); ++r)
      for (std::size_t i = 0; i < p.size(); ++i) y[r * p.size() + i] = x.at(r, p[i]) * f[i];
    return y;
  }
};

// y (n_q × d, the concatenated heads) of attention from `query` over `context` stored in format f.
struct LayerRef {
  std::vector<double> y, wabs;
  std::vector<double> sabs;  // n_q × heads
};
LayerRef layer_reference(const ExactWeights& w, ma::Format f, std::size_t d, std::size_t heads, std::size_t kv_heads,
                         const Guarded& query, const Guarded& context, const RunOpts& o, const float* mask = nullptr) {
  const std::size_t hd = d / heads, kv_dim = kv_heads * hd, n_q = query.rows(), n_kv = context.rows();
  const std::vector<float> q = ExactWeights::project(query, w.pq, w.fq);
  const std::vector<float> k = ExactWeights::project(context, w.pk, w.fk);
  const std::vector<float> v = ExactWeights::project(context, w.pv, w.fv);
  const Stored sk(f, k.data(), kv_dim, n_kv, kv_heads, hd), sv(f, v.data(), kv_dim, n_kv, kv_heads, hd);
  LayerRef r;
  r.y.assign(n_q * d, 0.0);
  r.wabs.assign(n_q * d, 0.0);
  r.sabs.assign(n_q * heads, 0.0);
  for (std::size_t h = 0; h < heads; ++h) {
    const std::size_t g = h / (heads / kv_heads);
    ref::AttentionCase c{q.data() + h * hd,
                         d,
                         sk.values.data() + g * hd,
                         kv_dim,
                         sv.values.data() + g * hd,
                         kv_dim,
                         n_q,
                         n_kv,
                         hd,
                         hd,
                         0.0,
                         o.causal,
                         o.offset,
                         mask,
                         n_kv,
                         o.window};
    std::vector<double> want, wabs, sabs;
    ref::attention(c, want, wabs, sabs);
    for (std::size_t i = 0; i < n_q; ++i) {
      r.sabs[i * heads + h] = sabs[i];
      for (std::size_t cc = 0; cc < hd; ++cc) {
        r.y[i * d + h * hd + cc] = want[i * hd + cc];
        r.wabs[i * d + h * hd + cc] = wabs[i * hd + cc];
      }
    }
  }
  return r;
}

// Rows [first, first + y.rows()) of the reference against y.
::testing::AssertionResult layer_near(const Guarded& y, const LayerRef& r, std::size_t first, std::size_t heads,
                                      std::size_t n_kv) {
  const std::size_t d = y.cols(), hd = d / heads;
  for (std::size_t i = 0; i < y.rows(); ++i)
    for (std::size_t c = 0; c < d; ++c) {
      const std::size_t at = (first + i) * d + c;
      const Tolerance tol = attention_tolerance(hd, n_kv, r.sabs[(first + i) * heads + c / hd]);
      if (!within(y.at(i, c), r.y[at], r.wabs[at], tol))
        return ::testing::AssertionFailure()
               << "row " << first + i << " col " << c << ": got " << y.at(i, c) << " want " << r.y[at];
    }
  return y.canaries_intact();
}

// Each test runs for both formats (a parameter, so that the suite's filter */Cache.* finds it).
class Cache : public ::testing::TestWithParam<ma::Format> {};
#define CACHE_TEST(name)               \
  template <ma::Format F>              \
  void name##_body();                  \
  TEST_P(Cache, name) {                \
    if (GetParam() == ma::Format::f16) \
      name##_body<ma::Format::f16>();  \
    else                               \
      name##_body<ma::Format::q8>();   \
  }                                    \
  template <ma::Format F>              \
  void name##_body()

constexpr std::size_t kD = 32;

template <ma::Format F, std::size_t Heads, std::size_t KvHeads>
void forward_cases() {
  using L = ma::MultiHeadAttention<80, kD, Heads, KvHeads, true, F>;
  const ExactWeights w(kD, KvHeads * (kD / Heads), 21 + Heads * 3 + KvHeads);
  auto layer = std::make_unique<L>(w.view());
  for (std::size_t n : {1u, 2u, 3u, 4u, 5u, 31u, 33u, 70u}) {
    Guarded x(n, kD, kD + 5);
    x.fill(Uniform(static_cast<std::uint32_t>(n), -3.0f, 3.0f));
    for (int variant = 0; variant < 4; ++variant) {
      SCOPED_TRACE(::testing::Message() << "heads " << Heads << "/" << KvHeads << " rows " << n << " variant "
                                        << variant);
      RunOpts o;
      std::vector<float> mask;
      ma::AttentionOptions opt;
      if (variant == 1) o.causal = opt.causal = true;
      if (variant == 2) {
        mask.resize(n * n);
        Uniform mu(5, -1.0f, 1.0f);
        for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 5 == 2 ? -INFINITY : mu();
        opt.mask = {mask.data(), n, n, n};
      }
      if (variant == 3) o.window = opt.window = 4;
      Guarded y(n, kD, kD + 1);
      ASSERT_EQ(layer->forward(x.cview(), y.view(), opt), ma::Status::ok);
      EXPECT_EQ(layer->cached(), n);
      const LayerRef r = layer_reference(w, F, kD, Heads, KvHeads, x, x, o, variant == 2 ? mask.data() : nullptr);
      EXPECT_TRUE(layer_near(y, r, 0, Heads, n));
    }
  }
}

CACHE_TEST(ForwardEveryHeadLayout) {
  forward_cases<F, 4, 4>();
  forward_cases<F, 4, 2>();
  forward_cases<F, 4, 1>();
  forward_cases<F, 1, 1>();
}

CACHE_TEST(CrossForwardThenAttend) {
  using L = ma::MultiHeadAttention<64, kD, 4, 2, true, F>;
  const ExactWeights w(kD, 2 * 8, 9);
  auto layer = std::make_unique<L>(w.view());
  Guarded ctx(50, kD), query(7, kD), later(3, kD);
  ctx.fill(Uniform(1, -2.0f, 2.0f));
  query.fill(Uniform(2, -2.0f, 2.0f));
  later.fill(Uniform(3, -2.0f, 2.0f));
  Guarded y(7, kD), y2(3, kD);
  ASSERT_EQ(layer->forward(query.cview(), ctx.cview(), y.view()), ma::Status::ok);
  EXPECT_TRUE(layer_near(y, layer_reference(w, F, kD, 4, 2, query, ctx, {}), 0, 4, 50));
  ASSERT_EQ(layer->attend(later.cview(), y2.view()), ma::Status::ok);
  EXPECT_TRUE(layer_near(y2, layer_reference(w, F, kD, 4, 2, later, ctx, {}), 0, 4, 50));
  EXPECT_EQ(layer->cached(), 50u);
}

CACHE_TEST(AppendOneByOneAndInChunksIsOneCausalForward) {
  using L = ma::MultiHeadAttention<72, kD, 4, 2, true, F>;
  const ExactWeights w(kD, 16, 4);
  Guarded all(72, kD);
  all.fill(Uniform(8, -3.0f, 3.0f));
  RunOpts causal;
  causal.causal = true;
  const LayerRef r = layer_reference(w, F, kD, 4, 2, all, all, causal);
  for (std::size_t chunk : {1u, 3u, 17u, 40u}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk);
    auto layer = std::make_unique<L>(w.view());
    for (std::size_t t = 0; t < 72; t += chunk) {
      const std::size_t n = std::min(chunk, 72 - t);
      Guarded x(n, kD, kD + 2), y(n, kD, kD + 3);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t c = 0; c < kD; ++c) x.at(i, c) = all.at(t + i, c);
      ASSERT_EQ(layer->append(x.cview(), y.view()), ma::Status::ok);
      ASSERT_TRUE(layer_near(y, r, t, 4, 72)) << "at " << t;
    }
    EXPECT_EQ(layer->cached(), 72u);
    // Full: nothing written, nothing changed.
    Guarded x(1, kD), y(1, kD);
    x.fill_value(1.0f);
    const auto before = y.snapshot();
    EXPECT_EQ(layer->append(x.cview(), y.view()), ma::Status::invalid_shape);
    EXPECT_EQ(y.snapshot(), before);
    EXPECT_EQ(layer->cached(), 72u);
  }
}

CACHE_TEST(RingWindowWrapsSeveralTimes) {
  using L = ma::MultiHeadAttention<20, kD, 4, 1, true, F>;
  const ExactWeights w(kD, 8, 6);
  ma::LayerConfig cfg;
  cfg.window = 8;
  const std::size_t total = 90;
  Guarded all(total, kD);
  all.fill(Uniform(10, -3.0f, 3.0f));
  RunOpts o;
  o.causal = true;
  o.window = 8;
  const LayerRef r = layer_reference(w, F, kD, 4, 1, all, all, o);
  for (std::size_t chunk : {1u, 5u, 13u}) {
    auto layer = std::make_unique<L>(w.view(), cfg);
    for (std::size_t t = 0; t < total; t += chunk) {
      const std::size_t n = std::min(chunk, total - t);
      Guarded x(n, kD), y(n, kD);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t c = 0; c < kD; ++c) x.at(i, c) = all.at(t + i, c);
      ASSERT_EQ(layer->append(x.cview(), y.view()), ma::Status::ok);
      ASSERT_TRUE(layer_near(y, r, t, 4, 8)) << "chunk " << chunk << " at " << t;
    }
    EXPECT_EQ(layer->position(), total);
  }
}

CACHE_TEST(SharedScratchAndRandomWeightsAgreeWithF32Cache) {
  constexpr std::size_t d = 48;
  const LayerTestWeights w(d, 2 * 12, 77);
  using L32 = ma::MultiHeadAttention<40, d, 4, 2>;
  using LQ = ma::MultiHeadAttentionSharedScratch<40, d, 4, 2, F>;
  static_assert(LQ::scratch_floats == ma::layer_scratch_floats(d, 4, F), "scratch formula");
  static_assert(LQ::ram_bytes == ma::layer_cache_bytes(40, d, 4, 2, F) + (F == ma::Format::q8 ? 0 : 0),
                "RAM is the cache at its format's size");
  static ma::LayerScratch<ma::layer_scratch_floats(d, 4, F)> scratch;
  auto l32 = std::make_unique<L32>(w.view());
  auto lq = std::make_unique<LQ>(w.view(), scratch);
  Guarded x(30, d);
  x.fill(Uniform(4, -1.0f, 1.0f));
  Guarded a(30, d), b(30, d);
  ma::AttentionOptions opt;
  opt.causal = true;
  ASSERT_EQ(l32->forward(x.cview(), a.view(), opt), ma::Status::ok);
  ASSERT_EQ(lq->forward(x.cview(), b.view(), opt), ma::Status::ok);
  EXPECT_TRUE(b.canaries_intact());
  // Plumbing only (biases, the out projection, the borrowed scratch): the stored rounding moves y by about
  // the format's relative step times |v|.
  const double tol = F == ma::Format::f16 ? 2e-3 : 2e-2;
  for (std::size_t i = 0; i < 30; ++i)
    for (std::size_t c = 0; c < d; ++c) EXPECT_NEAR(b.at(i, c), a.at(i, c), tol) << i << "," << c;
}

INSTANTIATE_TEST_SUITE_P(Formats, Cache, ::testing::Values(ma::Format::f16, ma::Format::q8),
                         [](const ::testing::TestParamInfo<ma::Format>& i) {
                           return std::string(i.param == ma::Format::f16 ? "f16" : "q8");
                         });

// Weights in f16 (the ±2^e of ExactWeights are exact in binary16, so the projections stay exact) through
// LayerWeightMatrices, with the cache format: the same reference.
CACHE_TEST(WeightMatricesInF16) {
  const ExactWeights w(kD, 16, 31);
  auto to_half = [](const std::vector<float>& a) {
    std::vector<std::uint16_t> h(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) h[i] = ref_half_bits(a[i]);
    return h;
  };
  const std::vector<std::uint16_t> hq = to_half(w.wq), hk = to_half(w.wk), hv = to_half(w.wv);
  ma::LayerWeightMatrices m{};
  m.q = ma::weights_f16(hq.data(), kD, kD);
  m.k = ma::weights_f16(hk.data(), 16, kD);
  m.v = ma::weights_f16(hv.data(), 16, kD);
  using L = ma::MultiHeadAttention<40, kD, 4, 2, true, F>;
  auto layer = std::make_unique<L>(m);
  Guarded x(37, kD), y(37, kD);
  x.fill(Uniform(12, -2.0f, 2.0f));
  ma::AttentionOptions opt;
  opt.causal = true;
  ASSERT_EQ(layer->forward(x.cview(), y.view(), opt), ma::Status::ok);
  RunOpts o;
  o.causal = true;
  EXPECT_TRUE(layer_near(y, layer_reference(w, F, kD, 4, 2, x, x, o), 0, 4, 37));
  Guarded t(1, kD), yt(1, kD);
  t.fill(Uniform(13, -2.0f, 2.0f));
  ASSERT_EQ(layer->append(t.cview(), yt.view()), ma::Status::ok);
  EXPECT_EQ(layer->cached(), 38u);
}

TEST(CacheRam, TheCacheAtItsFormatsSize) {
  using F32 = ma::MultiHeadAttention<16, 64, 4, 4, true, ma::Format::f32>;
  using F16 = ma::MultiHeadAttention<16, 64, 4, 4, true, ma::Format::f16>;
  using Q8 = ma::MultiHeadAttention<16, 64, 4, 4, true, ma::Format::q8>;
  static_assert(F16::ram_bytes < F32::ram_bytes, "an f16 cache takes less RAM");
  static_assert(Q8::ram_bytes < F16::ram_bytes, "a q8 cache takes less RAM");
  static_assert(F32::ram_bytes == 4 * (2 * 16 * 64 + ma::layer_scratch_floats(64, 4)), "f32 as before");
  static_assert(F16::ram_bytes == 2 * 2 * 16 * 64 + 4 * ma::layer_scratch_floats(64, 4, ma::Format::f16), "f16");
  static_assert(Q8::ram_bytes == 2 * 16 * 64 + 4 * 2 * 16 * 4 + 4 * ma::layer_scratch_floats(64, 4, ma::Format::q8),
                "q8: int8 and a scale per row and K/V head");
  static_assert(ma::layer_cache_bytes(1024, 256, 8, 2, ma::Format::q8) == 2 * 1024 * 64 + 4 * 2 * 1024 * 2, "q8");
  static_assert(ma::layer_cache_bytes(1024, 256, 8, 2, static_cast<ma::Format>(3)) == 0, "bad format");
  static_assert(ma::layer_scratch_floats(64, 4, static_cast<ma::Format>(7)) == 0, "bad format");
  SUCCEED();
}

}  // namespace
