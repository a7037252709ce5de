// MultiHeadAttention / SelfAttention against a double-precision reference of PyTorch's
// nn.MultiheadAttention math: random weights and biases, grouped-query heads, no out projection,
// cross-attention, in-place use, the tutorial's seed example, the RAM formula and the bad-input contract.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "reference.hpp"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

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

}  // namespace
