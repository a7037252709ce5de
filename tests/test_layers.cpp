// MultiHeadAttention / SelfAttention against a double-precision reference of PyTorch's
// nn.MultiheadAttention math: random weights and biases, grouped-query heads, no out projection,
// cross-attention, in-place use, the tutorial's seed example, the RAM formula, the bad-input contract and the size
// functions at size_t's edge (exact, or SIZE_MAX).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "reference.hpp"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

// Runs layer.forward on query (and context, unless self) and compares with the reference.
template <class Layer>
void check_layer(Layer& layer, std::size_t heads, std::size_t kv_heads, std::size_t n_q, std::size_t n_kv, bool self,
                 bool causal, long long offset, bool with_mask, std::uint32_t seed) {
  const ma::LayerWeights& w = layer.weights();
  const std::size_t model = static_cast<std::size_t>(Layer::HeadDim) * heads;
  SCOPED_TRACE(::testing::Message() << "d=" << model << " heads=" << heads << "/" << kv_heads << " n_q=" << n_q
                                    << " n_kv=" << n_kv << " self=" << self << " causal=" << causal
                                    << " offset=" << offset << " mask=" << with_mask
                                    << " bias=" << (w.q_bias != nullptr) << " out=" << (w.out_weight != nullptr));
  Uniform u(seed);
  Guarded query(n_q, model, model + 3, true), context(self ? 1 : n_kv, model), y(n_q, model, model + 1);
  query.fill(u);
  if (!self) context.fill(u);
  Guarded mask(with_mask ? n_q : 1, with_mask ? n_kv : 1);
  if (with_mask) {
    std::mt19937 rng(seed);
    for (std::size_t i = 0; i < n_q; ++i)
      for (std::size_t j = 0; j < n_kv; ++j)
        mask.at(i, j) = i % 5 == 2 || rng() % 4 == 0 ? -inf : static_cast<float>(rng() % 100) / 100.0f;
  }
  ma::AttentionOptions o;
  o.causal = causal;
  o.causal_offset = static_cast<std::ptrdiff_t>(offset);
  if (with_mask) o.mask = mask.cview();
  const ma::Status st =
      self ? layer.forward(query.cview(), y.view(), o) : layer.forward(query.cview(), context.cview(), y.view(), o);
  ASSERT_EQ(st, ma::Status::ok);
  std::vector<double> want;
  const Guarded& ctx = self ? query : context;
  ref::multihead_attention({model,        heads,          kv_heads,   w.q_weight,
                            w.k_weight,   w.v_weight,     w.q_bias,   w.k_bias,
                            w.v_bias,     w.out_weight,   w.out_bias, query.data(),
                            n_q,          query.stride(), ctx.data(), self ? n_q : n_kv,
                            ctx.stride(), causal,         offset,     with_mask ? mask.data() : nullptr,
                            mask.stride()},
                           want);
  const Tolerance tol = layer_tolerance(model, self ? n_q : n_kv);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n_q; ++i) {
    double row = 0.0;
    for (std::size_t c = 0; c < model; ++c) row = std::fmax(row, std::fabs(want[i * model + c]));
    for (std::size_t c = 0; c < model; ++c)
      if (!within(y.at(i, c), want[i * model + c], row, tol) && bad++ < 5)
        ADD_FAILURE() << "y(" << i << "," << c << ") = " << y.at(i, c) << ", reference " << want[i * model + c];
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_TRUE(y.canaries_intact());
}

// A layer with static storage, as firmware would declare it (its buffer is in .bss).
const LayerTestWeights g_weights_64(64, 64, 1);
ma::MultiHeadAttention<64, 64, 4> g_layer_64_64_4{g_weights_64.view()};

TEST(Layers, MultiHeadMatchesPyTorchMath) {
  std::uint32_t seed = 10;
  for (std::size_t n : {1, 2, 5, 31, 32, 33, 64}) {
    check_layer(g_layer_64_64_4, 4, 4, n, n, true, false, 0, false, seed++);
    check_layer(g_layer_64_64_4, 4, 4, n, n, true, true, 0, false, seed++);
    check_layer(g_layer_64_64_4, 4, 4, n, n, true, n % 2 == 0, 0, true, seed++);
  }
}

TEST(Layers, WithoutBiasesAndWithoutOutProjection) {
  const LayerTestWeights w(48, 48, 2);
  ma::MultiHeadAttention<40, 48, 3> no_bias{w.view(false, true)};
  ma::MultiHeadAttention<40, 48, 3> no_out{w.view(true, false)};
  for (std::size_t n : {1, 17, 40}) {
    check_layer(no_bias, 3, 3, n, n, true, false, 0, false, 20 + static_cast<std::uint32_t>(n));
    check_layer(no_out, 3, 3, n, n, true, true, 0, false, 30 + static_cast<std::uint32_t>(n));
  }
}

TEST(Layers, GroupedQueryAttention) {
  const LayerTestWeights w2(48, 2 * 8, 3), w1(48, 1 * 8, 4);
  ma::MultiHeadAttention<40, 48, 6, 2> gqa2{w2.view()};
  ma::MultiHeadAttention<40, 48, 6, 1> mqa{w1.view()};
  for (std::size_t n : {3, 33, 40}) {
    check_layer(gqa2, 6, 2, n, n, true, false, 0, false, 40 + static_cast<std::uint32_t>(n));
    check_layer(gqa2, 6, 2, n, n, true, true, 0, false, 50 + static_cast<std::uint32_t>(n));
    check_layer(mqa, 6, 1, n, n, true, false, 0, true, 60 + static_cast<std::uint32_t>(n));
  }
}

TEST(Layers, CrossAttention) {
  const LayerTestWeights w(32, 32, 5);
  ma::MultiHeadAttention<70, 32, 2> layer{w.view()};
  check_layer(layer, 2, 2, 7, 70, false, false, 0, false, 70);
  check_layer(layer, 2, 2, 70, 9, false, false, 0, true, 71);
  check_layer(layer, 2, 2, 33, 65, false, true, 65 - 33, false, 72);  // bottom-right causal: decoding
  check_layer(layer, 2, 2, 1, 70, false, true, 69, false, 73);
}

TEST(Layers, InPlaceGivesTheSameBitsAsOutOfPlace) {
  for (std::size_t n : {1, 32, 33, 64}) {
    Guarded x(n, 64), y(n, 64);
    Uniform u(80 + static_cast<std::uint32_t>(n));
    x.fill(u);
    ASSERT_EQ(g_layer_64_64_4.forward(x.cview(), y.view()), ma::Status::ok);
    ASSERT_EQ(g_layer_64_64_4.forward(x.cview(), x.view()), ma::Status::ok);  // x becomes y
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < 64; ++c) ASSERT_EQ(x.at(i, c), y.at(i, c)) << i << "," << c;
    // Cross-attention writing over its context, also allowed.
    Guarded q(n, 64), ctx(n, 64), expect(n, 64);
    q.fill(u);
    ctx.fill(u);
    ASSERT_EQ(g_layer_64_64_4.forward(q.cview(), ctx.cview(), expect.view()), ma::Status::ok);
    ASSERT_EQ(g_layer_64_64_4.forward(q.cview(), ctx.cview(), ctx.view()), ma::Status::ok);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < 64; ++c) ASSERT_EQ(ctx.at(i, c), expect.at(i, c));
  }
}

TEST(Layers, RepeatedCallsAreBitIdentical) {
  Guarded x(45, 64), y1(45, 64), y2(45, 64);
  Uniform u(90);
  x.fill(u);
  ASSERT_EQ(g_layer_64_64_4.forward(x.cview(), y1.view()), ma::Status::ok);
  ASSERT_EQ(g_layer_64_64_4.forward(x.cview(), y2.view()), ma::Status::ok);
  EXPECT_EQ(y1.snapshot(), y2.snapshot());
}

TEST(Layers, SeedExampleWithIdentityProjections) {
  // The tutorial's X through SelfAttention<3, 2> with W_q = W_k = W_v = I and no out projection:
  // y = softmax(X·Xᵀ/√2)·X.
  const float x[] = {0.1f, 0.5f, 0.3f, 0.4f, 0.8f, 0.0f};
  static const float eye[] = {1.0f, 0.0f, 0.0f, 1.0f};
  ma::SelfAttention<3, 2> layer{{eye, eye, eye}};
  float y[6];
  ASSERT_EQ(layer.forward(ma::make_view(x, 3, 2), ma::make_view(y, 3, 2)), ma::Status::ok);
  std::vector<double> want, wabs, sabs;
  ref::attention({x, 2, x, 2, x, 2, 3, 3, 2, 2, 0.0, false, 0, nullptr, 0}, want, wabs, sabs);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y[i], want[i], 1e-6) << i;
}

TEST(Layers, RamIsTheDocumentedFormula) {
  using L = ma::MultiHeadAttention<64, 64, 4>;
  constexpr std::size_t hd = 16;
  constexpr std::size_t formula =
      4 * (2 * 64 * 4 * hd + 2 * ma::attention_block_q * 64 + ma::attention_workspace_floats(hd, hd));
  static_assert(L::ram_bytes == formula, "ram_bytes follows the documented formula");
  static_assert(sizeof(L) >= L::ram_bytes && sizeof(L) <= L::ram_bytes + sizeof(ma::LayerWeightMatrices) +
                                                              sizeof(ma::LayerConfig) + 4 * sizeof(void*) + 16,
                "the object holds its buffers, the weights given to its constructor (LayerWeights or "
                "LayerWeightMatrices), the configuration, the cache state (2 words), a scratch and a reader pointer, "
                "nothing else");
  using S = ma::MultiHeadAttentionSharedScratch<64, 64, 4>;
  static_assert(S::ram_bytes == 4 * (2 * 64 * 4 * hd), "a shared-scratch layer holds only K and V");
  static_assert(
      ma::layer_scratch_floats(64, 4) == 2 * ma::attention_block_q * 64 + ma::attention_workspace_floats(hd, hd),
      "the scratch formula");
  using G = ma::MultiHeadAttention<100, 48, 6, 2>;
  static_assert(
      G::ram_bytes == 4 * (2 * 100 * 2 * 8 + 2 * ma::attention_block_q * 48 + ma::attention_workspace_floats(8, 8)),
      "GQA stores only KvHeads of K and V");
  static_assert(ma::SelfAttention<3, 2>::HeadDim == 2, "SelfAttention has one head");
  RecordProperty("MultiHeadAttention_64_64_4_ram_bytes", std::to_string(L::ram_bytes));
}

// ---- size functions at size_t's edge ---------------------------------------------------------------------------
// Every public size function against its documented formula, evaluated exactly in a wider type: where that fits a
// size_t, the value; where it does not, SIZE_MAX (never a wrapped, plausible-looking size).
#if defined(__SIZEOF_INT128__)
__extension__ typedef unsigned __int128 Wide;  // not ISO C++: __extension__ keeps -Wpedantic quiet
#else
using Wide = unsigned long long;
static_assert(sizeof(std::size_t) < sizeof(Wide), "the exact sizes need a type wider than size_t");
#endif
constexpr std::size_t size_max = SIZE_MAX;

// The largest x for which exact(x) (non-decreasing in x) fits a size_t: bisection, exact(0) fitting and
// exact(SIZE_MAX) not.
template <class Exact>
std::size_t largest_fitting(Exact exact) {
  std::size_t lo = 0, hi = size_max;
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (exact(mid) <= size_max ? lo : hi) = mid;
  }
  return lo;
}

// f at the largest argument that fits gives the exact size; one more, and SIZE_MAX, give SIZE_MAX.
template <class F, class Exact>
::testing::AssertionResult saturates_at_edge(F f, Exact exact) {
  if (exact(0) > size_max || exact(size_max) <= size_max)
    return ::testing::AssertionFailure() << "no edge: exact(0) must fit and exact(SIZE_MAX) must not";
  const std::size_t x = largest_fitting(exact);
  const std::size_t want = static_cast<std::size_t>(exact(x));
  if (f(x) != want) return ::testing::AssertionFailure() << "f(" << x << ") = " << f(x) << ", exact " << want;
  if (f(x + 1) != size_max)
    return ::testing::AssertionFailure() << "f(" << x + 1 << ") = " << f(x + 1) << ", not SIZE_MAX (it overflows)";
  if (f(size_max) != size_max) return ::testing::AssertionFailure() << "f(SIZE_MAX) = " << f(size_max);
  return ::testing::AssertionSuccess();
}

// The documented formulas (attention.hpp, layers.hpp, blocks.hpp), exact.
constexpr Wide bq = ma::attention_block_q, bkv = ma::attention_block_kv, ffn_rows = ma::block_ffn_rows;
Wide exact_workspace(Wide dk, Wide dv) { return bq * (dk + dv + bkv + 3) + 16; }
Wide exact_scratch(Wide d, Wide heads) { return 2 * bq * d + exact_workspace(d / heads, d / heads); }
Wide exact_cache(Wide seq, Wide d, Wide heads, Wide kv) { return 2 * seq * kv * (d / heads); }
Wide exact_block(Wide hd) { return 2 * ((bkv + 3) / 4) * hd; }
Wide exact_scratch(Wide d, Wide heads, ma::Format f) {
  return exact_scratch(d, heads) + (f == ma::Format::f32 ? 0 : exact_block(d / heads));
}
Wide exact_cache_bytes(Wide seq, Wide d, Wide heads, Wide kv, ma::Format f) {
  const Wide e = exact_cache(seq, d, heads, kv);
  return f == ma::Format::f32 ? 4 * e : f == ma::Format::f16 ? 2 * e : e + 4 * 2 * seq * kv;
}
Wide exact_encoder(Wide d, Wide heads, Wide ff) { return exact_scratch(d, heads) + ffn_rows * (d + ff); }
Wide exact_decoder(Wide d, Wide heads, Wide hidden, ma::Format f) {
  return exact_scratch(d, heads, f) + ffn_rows * (d + 2 * hidden);
}

// At compile time too, where the templates' static constexpr members and static_asserts use them (edges that hold
// on every target: no tile size in them).
static_assert(ma::layer_cache_floats(SIZE_MAX / 2, 1, 1, 1) == SIZE_MAX - 1, "the largest cache that fits");
static_assert(ma::layer_cache_floats(SIZE_MAX / 2 + 1, 1, 1, 1) == SIZE_MAX, "one row more saturates");
static_assert(ma::layer_cache_floats(2, SIZE_MAX, 1, SIZE_MAX) == SIZE_MAX, "kv_heads·head_dim saturates");
static_assert(ma::layer_cache_floats(SIZE_MAX, 64, 4, 0) == 0, "a factor 0 is 0, not SIZE_MAX");
static_assert(ma::layer_cache_bytes(SIZE_MAX / 8, 1, 1, 1, ma::Format::f32) == SIZE_MAX - 7, "f32 edge");
static_assert(ma::layer_cache_bytes(SIZE_MAX / 8 + 1, 1, 1, 1, ma::Format::f32) == SIZE_MAX, "f32 past it");
static_assert(ma::layer_cache_bytes(SIZE_MAX / 4, 1, 1, 1, ma::Format::f16) == SIZE_MAX - 3, "f16 edge");
static_assert(ma::layer_cache_bytes(SIZE_MAX / 4 + 1, 1, 1, 1, ma::Format::f16) == SIZE_MAX, "f16 past it");
static_assert(ma::layer_cache_bytes(SIZE_MAX / 10, 1, 1, 1, ma::Format::q8) == SIZE_MAX / 10 * 10, "q8 edge");
static_assert(ma::layer_cache_bytes(SIZE_MAX / 10 + 1, 1, 1, 1, ma::Format::q8) == SIZE_MAX, "q8 past it");
static_assert(ma::layer_cache_block_floats(SIZE_MAX) == SIZE_MAX, "conversion block");
static_assert(ma::attention_workspace_floats(SIZE_MAX, 0) == SIZE_MAX, "workspace");
static_assert(ma::layer_scratch_floats(SIZE_MAX, 1) == SIZE_MAX, "scratch");
static_assert(ma::layer_scratch_floats(SIZE_MAX / 2, 1, ma::Format::q8) == SIZE_MAX, "scratch with a q8 cache");
static_assert(ma::encoder_layer_scratch_floats(1, 8, 1, SIZE_MAX - 7) == SIZE_MAX, "model_dim + feed_forward");
static_assert(ma::decoder_layer_scratch_floats(1, 8, 1, SIZE_MAX / 2) == SIZE_MAX, "model_dim + 2·hidden");
static_assert(ma::decoder_layer_scratch_floats(1, 8, 1, SIZE_MAX, static_cast<ma::Format>(3)) == 0, "bad format: 0");
static_assert(ma::layer_cache_bytes(SIZE_MAX, 1, 1, 1, static_cast<ma::Format>(3)) == 0, "bad format: 0");

TEST(Layers, SizeFunctionsSaturate) {
  using F = ma::Format;
  using Z = std::size_t;
  EXPECT_TRUE(saturates_at_edge([](Z x) { return ma::attention_workspace_floats(x, 1); },
                                [](Z x) { return exact_workspace(x, 1); }));
  EXPECT_TRUE(saturates_at_edge([](Z x) { return ma::attention_workspace_floats(64, x); },
                                [](Z x) { return exact_workspace(64, x); }));
  for (Z heads : {1, 4}) {
    EXPECT_TRUE(saturates_at_edge([=](Z x) { return ma::layer_scratch_floats(x, heads); },
                                  [=](Z x) { return exact_scratch(x, heads); }))
        << "heads " << heads;
    for (F f : {F::f32, F::f16, F::q8})
      EXPECT_TRUE(saturates_at_edge([=](Z x) { return ma::layer_scratch_floats(x, heads, f); },
                                    [=](Z x) { return exact_scratch(x, heads, f); }))
          << "heads " << heads << " format " << int(f);
  }
  EXPECT_TRUE(saturates_at_edge([](Z x) { return ma::layer_cache_floats(x, 64, 4, 2); },
                                [](Z x) { return exact_cache(x, 64, 4, 2); }));
  EXPECT_TRUE(saturates_at_edge([](Z x) { return ma::layer_cache_floats(3, x, 1, 1); },
                                [](Z x) { return exact_cache(3, x, 1, 1); }));
  EXPECT_TRUE(saturates_at_edge([](Z x) { return ma::layer_cache_floats(3, 64, 4, x); },
                                [](Z x) { return exact_cache(3, 64, 4, x); }));
  EXPECT_TRUE(
      saturates_at_edge([](Z x) { return ma::layer_cache_block_floats(x); }, [](Z x) { return exact_block(x); }));
  for (F f : {F::f32, F::f16, F::q8}) {
    EXPECT_TRUE(saturates_at_edge([=](Z x) { return ma::layer_cache_bytes(x, 64, 4, 2, f); },
                                  [=](Z x) { return exact_cache_bytes(x, 64, 4, 2, f); }))
        << "format " << int(f);
    EXPECT_TRUE(saturates_at_edge([=](Z x) { return ma::layer_cache_bytes(3, x, 1, 1, f); },
                                  [=](Z x) { return exact_cache_bytes(3, x, 1, 1, f); }))
        << "format " << int(f);
    EXPECT_TRUE(saturates_at_edge([=](Z x) { return ma::layer_cache_bytes(3, 64, 4, x, f); },
                                  [=](Z x) { return exact_cache_bytes(3, 64, 4, x, f); }))
        << "format " << int(f);
    EXPECT_TRUE(saturates_at_edge([=](Z x) { return ma::decoder_layer_scratch_floats(1, 8, 1, x, f); },
                                  [=](Z x) { return exact_decoder(8, 1, x, f); }))
        << "format " << int(f);
    EXPECT_TRUE(saturates_at_edge([=](Z x) { return ma::decoder_layer_scratch_floats(size_max, x, 2, 1, f); },
                                  [=](Z x) { return exact_decoder(x, 2, 1, f); }))
        << "format " << int(f);
  }
  EXPECT_TRUE(saturates_at_edge([](Z x) { return ma::encoder_layer_scratch_floats(1, 8, 1, x); },
                                [](Z x) { return exact_encoder(8, 1, x); }));
  EXPECT_TRUE(saturates_at_edge([](Z x) { return ma::encoder_layer_scratch_floats(size_max, x, 1, 1); },
                                [](Z x) { return exact_encoder(x, 1, 1); }));
  // Sizes that once wrapped (to 3376, 3184 and a small scratch on 64-bit targets).
  EXPECT_EQ(ma::decoder_layer_scratch_floats(1, 8, 1, size_max / 2), size_max);
  EXPECT_EQ(ma::encoder_layer_scratch_floats(1, 8, 1, size_max - 7), size_max);
  EXPECT_EQ(ma::layer_scratch_floats(size_max / (2 * ma::detail::layer_block_q) + 1, 1), size_max);
  // An invalid format is 0 still, overflowing or not.
  EXPECT_EQ(ma::layer_scratch_floats(size_max, 1, static_cast<F>(3)), 0u);
  EXPECT_EQ(ma::layer_cache_bytes(size_max, 64, 4, 2, static_cast<F>(3)), 0u);
  EXPECT_EQ(ma::decoder_layer_scratch_floats(1, 8, 1, size_max, static_cast<F>(3)), 0u);
}

}  // namespace
