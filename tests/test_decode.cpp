// Decoding with the layer's K/V cache: append token by token and in chunks against the double-precision
// reference of one causal forward over all tokens (every layer shape: biases or not, out projection or not,
// GQA, MQA), rotary embeddings in both pair conventions and partial rope_dims (their sin/cos at every float
// angle, the layer at positions up to 2³² − 2¹⁶), sliding windows with the ring wrapping several times, masks
// in position order, attend after a cross forward, a full cache refusing an append with nothing written, layers
// sharing one scratch, and the cache bookkeeping.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "reference.hpp"
#include "sin_cos.hpp"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

// The reference of a causal self-attention forward over all of x (t × d), with the layer's window and rope.
std::vector<double> reference_causal(const ma::LayerWeights& w, const ma::LayerConfig& cfg, std::size_t d,
                                     std::size_t heads, std::size_t kv_heads, const Guarded& x, std::size_t window,
                                     const float* mask = nullptr, std::size_t ldm = 0) {
  ref::MhaCase c{d,        heads,    kv_heads,     w.q_weight, w.k_weight, w.v_weight, w.q_bias,
                 w.k_bias, w.v_bias, w.out_weight, w.out_bias, x.data(),   x.rows(),   x.stride(),
                 x.data(), x.rows(), x.stride(),   true,       0,          mask,       ldm};
  c.window = window;
  c.rope_theta = cfg.rope_theta;
  c.rope_dims = cfg.rope_dims;
  c.rope_interleaved = cfg.rope_interleaved;
  std::vector<double> y;
  ref::multihead_attention(c, y);
  return y;
}

// layer_tolerance plus the rotary angles' float rounding: about position · (ln θ + 4) · 2⁻²⁴ radians, which
// moves each score, and so the output, by that much relative to the row's magnitude.
Tolerance decode_tolerance(std::size_t d, std::size_t n_kv, const ma::LayerConfig& cfg, std::size_t max_position) {
  Tolerance t = layer_tolerance(d, n_kv);
  if (cfg.rope_theta != 0.0f)
    t.rel += 8.0 * static_cast<double>(max_position + 1) * (std::log(cfg.rope_theta) + 4.0) * unit_roundoff;
  return t;
}

// Rows [first, first + y.rows()) of want (t × d) against y, relative to each row's largest |want|.
::testing::AssertionResult rows_near(const Guarded& y, const std::vector<double>& want, std::size_t first,
                                     Tolerance tol) {
  const std::size_t d = y.cols();
  std::size_t bad = 0;
  ::testing::AssertionResult res = ::testing::AssertionSuccess();
  for (std::size_t i = 0; i < y.rows(); ++i) {
    double row = 0.0;
    for (std::size_t c = 0; c < d; ++c) row = std::fmax(row, std::fabs(want[(first + i) * d + c]));
    for (std::size_t c = 0; c < d; ++c)
      if (!within(y.at(i, c), want[(first + i) * d + c], row, tol)) {
        if (bad == 0) res = ::testing::AssertionFailure();
        if (bad++ < 5)
          res << "row " << first + i << " col " << c << ": got " << y.at(i, c) << " want " << want[(first + i) * d + c]
              << "; ";
      }
  }
  if (bad) res << bad << " element(s) out of tolerance";
  return res;
}

// Appends the t rows of x in chunks of the sizes given (cycled), each into its own canary-guarded y (or in
// place), and checks every chunk against the reference's rows, and the cache bookkeeping after each.
template <class Layer>
void check_append(Layer& layer, std::size_t heads, std::size_t kv_heads, std::size_t t,
                  const std::vector<std::size_t>& chunks, std::uint32_t seed, bool in_place = false) {
  const std::size_t d = Layer::HeadDim * heads;
  const ma::LayerWeights& w = layer.weights();
  const ma::LayerConfig& cfg = layer.config();
  SCOPED_TRACE(::testing::Message() << "d=" << d << " heads=" << heads << "/" << kv_heads << " t=" << t
                                    << " first chunk=" << chunks[0] << " bias=" << (w.q_bias != nullptr)
                                    << " out=" << (w.out_weight != nullptr) << " rope=" << cfg.rope_theta << "/"
                                    << cfg.rope_dims << "/" << cfg.rope_interleaved << " window=" << cfg.window
                                    << " in_place=" << in_place);
  Uniform u(seed);
  Guarded x(t, d, d + 2);
  x.fill(u);
  const std::vector<double> want = reference_causal(w, cfg, d, heads, kv_heads, x, cfg.window);
  const Tolerance tol = decode_tolerance(d, t, cfg, t);
  layer.reset();
  ASSERT_EQ(layer.cached(), 0u);
  ASSERT_EQ(layer.position(), 0u);
  std::size_t done = 0;
  for (std::size_t c = 0; done < t; ++c) {
    const std::size_t r = std::min(chunks[c % chunks.size()], t - done);
    Guarded xr(r, d, d + 1, c % 2 == 1), y(r, d, d + 3);
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t k = 0; k < d; ++k) xr.at(i, k) = x.at(done + i, k);
    const ma::Status st = in_place ? layer.append(xr.cview(), xr.view()) : layer.append(xr.cview(), y.view());
    ASSERT_EQ(st, ma::Status::ok) << "chunk at " << done;
    const Guarded& got = in_place ? xr : y;
    ASSERT_TRUE(rows_near(got, want, done, tol)) << "chunk at " << done << " of " << r << " rows";
    EXPECT_TRUE(got.canaries_intact());
    done += r;
    ASSERT_EQ(layer.position(), done);
    if (cfg.window == 0) {
      ASSERT_EQ(layer.cached(), done);
    } else {
      ASSERT_TRUE(layer.cached() <= Layer::max_seq && layer.cached() >= std::min(done, cfg.window - 1));
    }
  }
}

const std::vector<std::size_t> one_by_one{1};
const std::vector<std::size_t> ragged{3, 1, 7, 2, 33, 5};
const std::vector<std::size_t> tile_edges{ma::attention_block_q - 1, ma::attention_block_q, ma::attention_block_q + 1};

TEST(Decode, AppendMatchesOneCausalForwardForEveryLayerShape) {
  const LayerTestWeights w64(64, 64, 1), w48_2(48, 2 * 8, 2), w48_1(48, 1 * 8, 3);
  // On the heap: the test programs' stack is small on Cortex-M.
  auto mha_p = std::make_unique<ma::MultiHeadAttention<80, 64, 4>>(w64.view());
  auto no_bias_p = std::make_unique<ma::MultiHeadAttention<80, 64, 4>>(w64.view(false, true));
  auto no_out_p = std::make_unique<ma::MultiHeadAttention<80, 64, 4>>(w64.view(true, false));
  auto gqa_p = std::make_unique<ma::MultiHeadAttention<80, 48, 6, 2>>(w48_2.view());
  auto mqa_p = std::make_unique<ma::MultiHeadAttention<80, 48, 6, 1>>(w48_1.view());
  auto &mha = *mha_p, &no_bias = *no_bias_p, &no_out = *no_out_p;
  auto& gqa = *gqa_p;
  auto& mqa = *mqa_p;
  std::uint32_t seed = 10;
  for (const auto* chunks : {&one_by_one, &ragged, &tile_edges}) {
    check_append(mha, 4, 4, 70, *chunks, seed++);
    check_append(no_bias, 4, 4, 45, *chunks, seed++);
    check_append(no_out, 4, 4, 45, *chunks, seed++);
    check_append(gqa, 6, 2, 80, *chunks, seed++);
    check_append(mqa, 6, 1, 41, *chunks, seed++);
  }
  check_append(mha, 4, 4, 80, {80}, seed++);  // one chunk filling the cache exactly
  check_append(gqa, 6, 2, 66, {5}, seed++, true);
  const LayerTestWeights w7(7, 7, 4);
  auto single = std::make_unique<ma::SelfAttention<20, 7>>(w7.view());
  check_append(*single, 1, 1, 20, {1}, seed++);
}

TEST(Decode, AppendAfterForwardContinuesTheSequence) {
  // A prompt through forward (causal), then tokens through append: the rows of one causal forward.
  const LayerTestWeights w(48, 2 * 8, 20);
  auto layer_p = std::make_unique<ma::MultiHeadAttention<64, 48, 6, 2>>(w.view());
  auto& layer = *layer_p;
  const std::size_t t = 64, prompt = 37;
  Guarded x(t, 48);
  Uniform u(21);
  x.fill(u);
  const std::vector<double> want = reference_causal(w.view(), {}, 48, 6, 2, x, 0);
  Guarded y0(prompt, 48);
  ma::AttentionOptions causal;
  causal.causal = true;
  ASSERT_EQ(layer.forward({x.data(), prompt, 48, 48}, y0.view(), causal), ma::Status::ok);
  EXPECT_EQ(layer.cached(), prompt);
  EXPECT_EQ(layer.position(), prompt);
  const Tolerance tol = layer_tolerance(48, t);
  EXPECT_TRUE(rows_near(y0, want, 0, tol));
  for (std::size_t p = prompt; p < t; ++p) {
    Guarded y(1, 48);
    ASSERT_EQ(layer.append({x.data() + p * 48, 1, 48, 48}, y.view()), ma::Status::ok);
    ASSERT_TRUE(rows_near(y, want, p, tol)) << "token " << p;
  }
}

TEST(Decode, RotaryEmbeddingsBothConventionsAndPartialDims) {
  const LayerTestWeights w64(64, 64, 30), w48(48, 2 * 8, 31);
  std::uint32_t seed = 32;
  for (bool interleaved : {false, true})
    for (std::size_t dims : {0, 16, 8, 2}) {
      ma::LayerConfig cfg;
      cfg.rope_theta = 10000.0f;
      cfg.rope_dims = dims;
      cfg.rope_interleaved = interleaved;
      auto mha_p = std::make_unique<ma::MultiHeadAttention<70, 64, 4>>(w64.view(), cfg);
      auto& mha = *mha_p;
      check_append(mha, 4, 4, 70, ragged, seed++);
      if (dims <= 8) {
        auto gqa_p = std::make_unique<ma::MultiHeadAttention<70, 48, 6, 2>>(w48.view(), cfg);
        auto& gqa = *gqa_p;
        check_append(gqa, 6, 2, 50, one_by_one, seed++);
      }
      // forward itself rotates too (query and context rows at positions 0 …), also for cross-attention.
      Guarded x(33, 64), ctx(70, 64), y(33, 64);
      Uniform u(seed++);
      x.fill(u);
      ctx.fill(u);
      ASSERT_EQ(mha.forward(x.cview(), ctx.cview(), y.view()), ma::Status::ok);
      const ma::LayerWeights lw = w64.view();
      ref::MhaCase c{64,
                     4,
                     4,
                     lw.q_weight,
                     lw.k_weight,
                     lw.v_weight,
                     lw.q_bias,
                     lw.k_bias,
                     lw.v_bias,
                     lw.out_weight,
                     lw.out_bias,
                     x.data(),
                     33,
                     64,
                     ctx.data(),
                     70,
                     64,
                     false,
                     0,
                     nullptr,
                     0};
      c.rope_theta = cfg.rope_theta;
      c.rope_dims = dims;
      c.rope_interleaved = interleaved;
      std::vector<double> want;
      ref::multihead_attention(c, want);
      EXPECT_TRUE(rows_near(y, want, 0, decode_tolerance(64, 70, cfg, 70))) << "cross forward";
    }
  // A different base and long positions: the angle's rounding stays within the stated bound.
  ma::LayerConfig cfg;
  cfg.rope_theta = 500000.0f;
  const LayerTestWeights w16(16, 16, 40);
  auto long_layer_p = std::make_unique<ma::MultiHeadAttention<300, 16, 2>>(w16.view(), cfg);
  auto& long_layer = *long_layer_p;
  check_append(long_layer, 2, 2, 300, {64}, seed++);
  // The extremes of the bases accepted: 1 (every pair turns by the position) and FLT_MAX.
  for (float theta : {1.0f, std::numeric_limits<float>::max()}) {
    cfg.rope_theta = theta;
    auto edge = std::make_unique<ma::MultiHeadAttention<40, 16, 2>>(w16.view(), cfg);
    check_append(*edge, 2, 2, 40, ragged, seed++);
  }
}

TEST(Decode, RotaryReferenceSanity) {
  // The reference's rotation against hand values: at position 1 with θ = 100 and 4 dims, pair 0 turns by 1 rad and
  // pair 1 by 0.1 rad; rotate_half pairs (0, 2), (1, 3); interleaved pairs (0, 1), (2, 3).
  double m[4] = {1.0, 0.0, 0.0, 1.0};
  ref::rotate(m, 1, 4, 1, 4, 100.0, 4, false, 1);
  EXPECT_NEAR(m[0], std::cos(1.0), 1e-15);
  EXPECT_NEAR(m[2], std::sin(1.0), 1e-15);
  EXPECT_NEAR(m[1], -std::sin(0.1), 1e-15);
  EXPECT_NEAR(m[3], std::cos(0.1), 1e-15);
  double n[4] = {1.0, 0.0, 0.0, 1.0};
  ref::rotate(n, 1, 4, 1, 4, 100.0, 4, true, 1);
  EXPECT_NEAR(n[0], std::cos(1.0), 1e-15);
  EXPECT_NEAR(n[1], std::sin(1.0), 1e-15);
  EXPECT_NEAR(n[2], -std::sin(0.1), 1e-15);
  EXPECT_NEAR(n[3], std::cos(0.1), 1e-15);
}

// The rotary embeddings' sin and cos against double sin/cos of the same float angle (every target's libm reduces
// huge arguments exactly), within 2e−7, a few ulps of 1: at the switch to the large-angle reduction (6434), in
// and around the band from 2²²·π/2 to 2²³·π/2 (where rounding t = x·2/π to an integer once failed), at 2²⁴·π/2,
// around 2^e·π/2 and at random for every exponent up to FLT_MAX, below the switch, and negated.
TEST(Decode, RotarySinCosEveryFloatAngle) {
  const double half_pi = 1.5707963267948966;
  std::vector<float> angles{6588398.0f};
  auto around = [&](double centre, int ulps) {
    float f = static_cast<float>(centre);
    for (int i = 0; i < ulps; ++i) f = std::nextafter(f, 0.0f);
    for (int i = 0; i <= 2 * ulps; ++i, f = std::nextafter(f, std::numeric_limits<float>::max())) angles.push_back(f);
  };
  around(4096.0 * half_pi, 256);
  for (int e : {22, 23, 24}) around(std::ldexp(half_pi, e), 512);
  for (int i = 0; i <= 4096; ++i) angles.push_back(static_cast<float>(6588397.0 + (13176795.0 - 6588397.0) * i / 4096));
  std::mt19937 rng(121);
  for (int e = 12; e <= 127; ++e) {
    around(std::ldexp(half_pi, e), 8);
    for (int i = 0; i < 16; ++i)  // random significand, exponent e
      angles.push_back(std::ldexp(static_cast<float>(0x800000u | (rng() & 0x7fffffu)), e - 23));
  }
  float top = std::numeric_limits<float>::max();
  for (int i = 0; i < 64; ++i, top = std::nextafter(top, 0.0f)) angles.push_back(top);
  Uniform small(122, -6434.0f, 6434.0f);
  for (int i = 0; i < 4096; ++i) angles.push_back(small());
  for (std::size_t i = 0, n = angles.size(); i < n; ++i) angles.push_back(-angles[i]);

  std::size_t bad = 0;
  double worst = 0.0;
  for (float x : angles) {
    float s, c;
    ma::detail::sin_cos(x, s, c);
    const double err =
        std::fmax(std::fabs(s - std::sin(static_cast<double>(x))), std::fabs(c - std::cos(static_cast<double>(x))));
    worst = std::fmax(worst, err);
    if (!(err <= 2e-7) && bad++ < 5)
      ADD_FAILURE() << "x = " << x << ": sin " << s << " want " << std::sin(static_cast<double>(x)) << ", cos " << c
                    << " want " << std::cos(static_cast<double>(x));
  }
  EXPECT_EQ(bad, 0u) << "of " << angles.size() << " angles; worst error " << worst;
  for (float x : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    float s, c;
    ma::detail::sin_cos(x, s, c);
    EXPECT_TRUE(std::isnan(s) && std::isnan(c)) << x;
  }
}

// The layer appending at large positions (the angles of the test above, through rotate()) against the reference.
// θ = 1 turns every pair by the position itself, exactly (1^(−2p/dims) = 1), and θ = 10⁴ with rope_dims 2 is pair 0 of
// a usual base: positions that are floats make the layer's angles the reference's, so the tolerance has no term for the
// angles' rounding. Positions 6 588 398 … (the first the old reduction got wrong), the middle and end of that band, and
// beyond 2²⁴ steps of the float spacing there (each row appended alone at its position).
TEST(Decode, RotaryAtLargePositions) {
  constexpr std::size_t d = 16, heads = 2, n = 8;
  const LayerTestWeights w(d, d, 120);
  const ma::LayerWeights lw = w.view();
  std::vector<float> k(n * d), v(n * d), scratch(ma::layer_scratch_floats(d, heads));
  Guarded x(n, d);
  Uniform u(123, -2.0f, 2.0f);
  x.fill(u);
  const struct {
    std::size_t first, step;
  } runs[] = {{6588398, 1},  {9876543, 1},     {13176788, 1},     {26353584, 2},
              {52707176, 4}, {1000000000, 64}, {4294901760u, 256}};
  for (int config = 0; config < 3; ++config) {
    ma::LayerConfig cfg;
    cfg.rope_theta = config == 2 ? 10000.0f : 1.0f;
    cfg.rope_dims = config == 2 ? 2 : 0;
    cfg.rope_interleaved = config == 1;
    for (const auto& run : runs) {
      SCOPED_TRACE(::testing::Message() << "theta " << cfg.rope_theta << " dims " << cfg.rope_dims << " interleaved "
                                        << cfg.rope_interleaved << " positions " << run.first << " step " << run.step);
      ma::detail::LayerState state{0, run.first};
      const ma::detail::LayerParts parts{
          {n, d, heads, heads, d / heads}, &lw, &ma::detail::layer_weights_f32, &cfg, &state, k.data(), v.data(), scratch.data()};
      ref::MhaCase c{d,
                     heads,
                     heads,
                     lw.q_weight,
                     lw.k_weight,
                     lw.v_weight,
                     lw.q_bias,
                     lw.k_bias,
                     lw.v_bias,
                     lw.out_weight,
                     lw.out_bias,
                     x.data(),
                     n,
                     d,
                     x.data(),
                     n,
                     d,
                     true,
                     0,
                     nullptr,
                     0};
      c.rope_theta = cfg.rope_theta;
      c.rope_dims = cfg.rope_dims;
      c.rope_interleaved = cfg.rope_interleaved;
      c.q_position = c.kv_position = run.first;
      c.position_step = run.step;
      std::vector<double> want;
      if (run.step == 1) {  // one append of n rows at positions first … first + n − 1
        Guarded y(n, d);
        ASSERT_EQ(ma::detail::layer_run(parts, ma::detail::LayerOp::append, x.cview(), x.cview(), y.view(), {}),
                  ma::Status::ok);
        ref::multihead_attention(c, want);
        EXPECT_TRUE(rows_near(y, want, 0, layer_tolerance(d, n)));
        continue;
      }
      for (std::size_t i = 0; i < n; ++i) {  // row i alone at first + i·step, after rows 0 … i − 1
        state.position = run.first + i * run.step;
        Guarded y(1, d);
        const ma::MatrixView<const float> xi{x.data() + i * d, 1, d, d};
        ASSERT_EQ(ma::detail::layer_run(parts, ma::detail::LayerOp::append, xi, xi, y.view(), {}), ma::Status::ok);
        c.query = xi.data;
        c.n_q = 1;
        c.n_kv = i + 1;
        c.causal = false;
        c.q_position = state.position - 1;  // the layer advanced it
        ref::multihead_attention(c, want);
        EXPECT_TRUE(rows_near(y, want, 0, layer_tolerance(d, i + 1))) << "row " << i;
      }
    }
  }
}

TEST(Decode, SlidingWindowRingWrapsSeveralTimes) {
  const LayerTestWeights w32(32, 32, 50), w48(48, 2 * 8, 51);
  std::uint32_t seed = 52;
  for (std::size_t window : {1, 2, 5, 12}) {
    ma::LayerConfig cfg;
    cfg.window = window;
    auto ring_p = std::make_unique<ma::MultiHeadAttention<12, 32, 2>>(w32.view(), cfg);
    auto& ring = *ring_p;                        // 100 tokens through 12 rows: 8+ wraps
    const std::size_t most = 12 - (window - 1);  // the largest chunk that always fits
    check_append(ring, 2, 2, 100, one_by_one, seed++);
    check_append(ring, 2, 2, 100, {most, 1, most > 2 ? most - 2 : 1}, seed++);
    cfg.rope_theta = 10000.0f;
    cfg.rope_interleaved = window % 2 == 0;
    auto ring_gqa_p = std::make_unique<ma::MultiHeadAttention<12, 48, 6, 2>>(w48.view(), cfg);
    auto& ring_gqa = *ring_gqa_p;
    check_append(ring_gqa, 6, 2, 77, {std::min<std::size_t>(3, most), 1}, seed++);
  }
  // A ring larger than the window (moves only every MaxSeq − W + 1 tokens), with a narrower options.window.
  ma::LayerConfig cfg;
  cfg.window = 9;
  auto big_p = std::make_unique<ma::MultiHeadAttention<40, 32, 2>>(w32.view(), cfg);
  auto& big = *big_p;
  check_append(big, 2, 2, 150, {3, 1, 7, 2, 32, 5}, seed++);  // 32 = 40 − (9 − 1): the most that fits
  Guarded x(100, 32);
  Uniform u(seed++);
  x.fill(u);
  const std::vector<double> want = reference_causal(w32.view(), {}, 32, 2, 2, x, 4);
  big.reset();
  ma::AttentionOptions narrow;
  narrow.window = 4;
  for (std::size_t p = 0; p < 100; p += 4) {
    Guarded y(4, 32);
    ASSERT_EQ(big.append({x.data() + p * 32, 4, 32, 32}, y.view(), narrow), ma::Status::ok);
    ASSERT_TRUE(rows_near(y, want, p, layer_tolerance(32, 100))) << "at " << p;
  }
}

TEST(Decode, WindowWithoutRingViaOptions) {
  // options.window on a layer without config.window: the cache fills up as usual, the window hides keys.
  const LayerTestWeights w(32, 32, 60);
  auto layer_p = std::make_unique<ma::MultiHeadAttention<90, 32, 4>>(w.view());
  auto& layer = *layer_p;
  Guarded x(90, 32);
  Uniform u(61);
  x.fill(u);
  const std::vector<double> want = reference_causal(w.view(), {}, 32, 4, 4, x, 6);
  ma::AttentionOptions o;
  o.window = 6;
  for (std::size_t p = 0; p < 90; p += 9) {
    Guarded y(9, 32);
    ASSERT_EQ(layer.append({x.data() + p * 32, 9, 32, 32}, y.view(), o), ma::Status::ok);
    ASSERT_TRUE(rows_near(y, want, p, layer_tolerance(32, 90)));
  }
  EXPECT_EQ(layer.cached(), 90u);
  // forward with the same window gives the same rows.
  Guarded y(90, 32);
  o.causal = true;
  ASSERT_EQ(layer.forward(x.cview(), y.view(), o), ma::Status::ok);
  EXPECT_TRUE(rows_near(y, want, 0, layer_tolerance(32, 90)));
}

TEST(Decode, MaskColumnsAreInPositionOrder) {
  const LayerTestWeights w(32, 32, 70);
  auto layer_p = std::make_unique<ma::MultiHeadAttention<60, 32, 2>>(w.view());
  auto& layer = *layer_p;
  const std::size_t t = 60;
  Guarded x(t, 32), mask(t, t);
  Uniform u(71);
  x.fill(u);
  std::mt19937 rng(72);
  for (std::size_t i = 0; i < t; ++i)
    for (std::size_t j = 0; j < t; ++j)
      mask.at(i, j) =
          rng() % 5 == 0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(rng() % 100) / 100.0f;
  const std::vector<double> want = reference_causal(w.view(), {}, 32, 2, 2, x, 0, mask.data(), t);
  std::size_t p = 0;
  for (std::size_t r : {1, 4, 1, 31, 2, 21}) {
    Guarded y(r, 32);
    ma::AttentionOptions o;
    o.mask = {mask.data() + p * t, r, p + r, t};
    o.causal = false;      // ignored by append
    o.causal_offset = -5;  // ignored by append
    ASSERT_EQ(layer.append({x.data() + p * 32, r, 32, 32}, y.view(), o), ma::Status::ok);
    ASSERT_TRUE(rows_near(y, want, p, layer_tolerance(32, t))) << "at " << p;
    p += r;
  }
}

TEST(Decode, AttendAfterCrossForward) {
  // Encoder output fills the cache once; decoder queries then attend to it, token by token, with and without
  // options, and the cache stays as it is.
  const LayerTestWeights w(48, 2 * 8, 80);
  for (bool rope : {false, true}) {
    ma::LayerConfig cfg;
    if (rope) cfg.rope_theta = 10000.0f;
    auto layer_p = std::make_unique<ma::MultiHeadAttention<50, 48, 6, 2>>(w.view(), cfg);
    auto& layer = *layer_p;
    Guarded enc(50, 48), q0(3, 48), y0(3, 48), dec(9, 48);
    Uniform u(81);
    enc.fill(u);
    q0.fill(u);
    dec.fill(u);
    ASSERT_EQ(layer.forward(q0.cview(), enc.cview(), y0.view()), ma::Status::ok);
    EXPECT_EQ(layer.cached(), 50u);
    EXPECT_EQ(layer.position(), 50u);
    const ma::LayerWeights lw = w.view();
    for (bool causal : {false, true}) {
      ref::MhaCase c{48,
                     6,
                     2,
                     lw.q_weight,
                     lw.k_weight,
                     lw.v_weight,
                     lw.q_bias,
                     lw.k_bias,
                     lw.v_bias,
                     lw.out_weight,
                     lw.out_bias,
                     dec.data(),
                     9,
                     48,
                     enc.data(),
                     50,
                     48,
                     causal,
                     30,
                     nullptr,
                     0};
      c.rope_theta = cfg.rope_theta;
      std::vector<double> want;
      ref::multihead_attention(c, want);
      Guarded y(9, 48, 50);
      ma::AttentionOptions o;
      o.causal = causal;
      o.causal_offset = 30;
      ASSERT_EQ(layer.attend(dec.cview(), y.view(), o), ma::Status::ok);
      EXPECT_TRUE(rows_near(y, want, 0, decode_tolerance(48, 50, cfg, 50))) << "causal " << causal;
      EXPECT_TRUE(y.canaries_intact());
      // In place: y == query.
      Guarded yq(9, 48);
      for (std::size_t i = 0; i < 9; ++i)
        for (std::size_t k = 0; k < 48; ++k) yq.at(i, k) = dec.at(i, k);
      ASSERT_EQ(layer.attend(yq.cview(), yq.view(), o), ma::Status::ok);
      for (std::size_t i = 0; i < 9; ++i)
        for (std::size_t k = 0; k < 48; ++k) ASSERT_EQ(yq.at(i, k), y.at(i, k));
      EXPECT_EQ(layer.cached(), 50u);
      EXPECT_EQ(layer.position(), 50u);
    }
  }
}

TEST(Decode, FullCacheRefusesAnAppendAndWritesNothing) {
  const LayerTestWeights w(32, 32, 90);
  auto layer_p = std::make_unique<ma::MultiHeadAttention<20, 32, 2>>(w.view());
  auto& layer = *layer_p;
  Guarded x(20, 32);
  Uniform u(91);
  x.fill(u);
  const std::vector<double> want = reference_causal(w.view(), {}, 32, 2, 2, x, 0);
  Guarded y(17, 32);
  ASSERT_EQ(layer.append({x.data(), 17, 32, 32}, y.view()), ma::Status::ok);
  Guarded y4(4, 32);
  y4.fill_value(5.0f);
  const auto before = y4.snapshot();
  EXPECT_EQ(layer.append({x.data() + 17 * 32, 4, 32, 32}, y4.view()), ma::Status::invalid_shape);  // 17 + 4 > 20
  EXPECT_EQ(y4.snapshot(), before);
  EXPECT_EQ(layer.cached(), 17u);
  EXPECT_EQ(layer.position(), 17u);
  // The cache is intact: the three rows that fit still give the reference.
  Guarded y3(3, 32);
  ASSERT_EQ(layer.append({x.data() + 17 * 32, 3, 32, 32}, y3.view()), ma::Status::ok);
  EXPECT_TRUE(rows_near(y3, want, 17, layer_tolerance(32, 20)));
  Guarded y1(1, 32);
  y1.fill_value(5.0f);
  const auto before1 = y1.snapshot();
  EXPECT_EQ(layer.append({x.data(), 1, 32, 32}, y1.view()), ma::Status::invalid_shape);  // full
  EXPECT_EQ(y1.snapshot(), before1);
  EXPECT_EQ(layer.cached(), 20u);
  EXPECT_EQ(layer.position(), 20u);
  layer.reset();
  EXPECT_EQ(layer.cached(), 0u);
  EXPECT_EQ(layer.position(), 0u);
  ASSERT_EQ(layer.append({x.data(), 1, 32, 32}, y1.view()), ma::Status::ok);
  EXPECT_TRUE(rows_near(y1, want, 0, layer_tolerance(32, 20)));
}

TEST(Decode, LayersSharingOneScratchMatchLayersThatOwnIt) {
  // Three layers of a model on one scratch, interleaved as a decoder runs them, bit for bit the owning layers.
  constexpr std::size_t d = 48, heads = 6, kv = 2;
  const LayerTestWeights w0(d, kv * 8, 100), w1(d, kv * 8, 101), w2(d, kv * 8, 102);
  using Shared = ma::MultiHeadAttentionSharedScratch<40, d, heads, kv>;
  using Owning = ma::MultiHeadAttention<40, d, heads, kv>;
  auto scratch = std::make_unique<ma::LayerScratch<ma::layer_scratch_floats(d, heads)>>();
  ma::LayerConfig cfg;
  cfg.rope_theta = 10000.0f;
  auto s0 = std::make_unique<Shared>(w0.view(), *scratch, cfg), s1 = std::make_unique<Shared>(w1.view(), *scratch, cfg),
       s2 = std::make_unique<Shared>(w2.view(), *scratch, cfg);
  auto o0 = std::make_unique<Owning>(w0.view(), cfg), o1 = std::make_unique<Owning>(w1.view(), cfg),
       o2 = std::make_unique<Owning>(w2.view(), cfg);
  static_assert(Shared::ram_bytes == ma::layer_cache_floats(40, d, heads, kv) * sizeof(float),
                "a shared-scratch layer holds only its K/V cache");
  static_assert(Owning::ram_bytes ==
                    (ma::layer_cache_floats(40, d, heads, kv) + ma::layer_scratch_floats(d, heads)) * sizeof(float),
                "an owning layer holds its cache and its scratch");
  Guarded x(40, d);
  Uniform u(103);
  x.fill(u);
  for (std::size_t p = 0; p < 40; ++p) {
    Guarded a(1, d), b(1, d);
    for (std::size_t k = 0; k < d; ++k) a.at(0, k) = b.at(0, k) = x.at(p, k);
    ASSERT_EQ(s0->append(a.cview(), a.view()), ma::Status::ok);
    ASSERT_EQ(s1->append(a.cview(), a.view()), ma::Status::ok);
    ASSERT_EQ(s2->append(a.cview(), a.view()), ma::Status::ok);
    ASSERT_EQ(o0->append(b.cview(), b.view()), ma::Status::ok);
    ASSERT_EQ(o1->append(b.cview(), b.view()), ma::Status::ok);
    ASSERT_EQ(o2->append(b.cview(), b.view()), ma::Status::ok);
    ASSERT_EQ(a.snapshot(), b.snapshot()) << "token " << p;
  }
  // y over the shared scratch is aliasing, and writes nothing.
  const std::vector<float> scratch_before(scratch->data, scratch->data + d + 5);
  EXPECT_EQ(s0->attend({x.data(), 1, d, d}, {scratch->data + 5, 1, d, d}), ma::Status::aliasing);
  EXPECT_TRUE(std::equal(scratch_before.begin(), scratch_before.end(), scratch->data));
}

TEST(Decode, ForwardRefillsTheCache) {
  const LayerTestWeights w(32, 32, 110);
  auto layer_p = std::make_unique<ma::MultiHeadAttention<30, 32, 2>>(w.view());
  auto& layer = *layer_p;
  Guarded x(30, 32), y(30, 32);
  Uniform u(111);
  x.fill(u);
  ASSERT_EQ(layer.append({x.data(), 10, 32, 32}, {y.data(), 10, 32, 32}), ma::Status::ok);
  EXPECT_EQ(layer.position(), 10u);
  ASSERT_EQ(layer.forward({x.data(), 25, 32, 32}, {y.data(), 25, 32, 32}), ma::Status::ok);
  EXPECT_EQ(layer.cached(), 25u);
  EXPECT_EQ(layer.position(), 25u);
  // A failing forward leaves the cache as it was.
  EXPECT_EQ(layer.forward({x.data(), 25, 31, 32}, {y.data(), 25, 31, 32}), ma::Status::invalid_shape);
  EXPECT_EQ(layer.cached(), 25u);
  EXPECT_EQ(layer.position(), 25u);
}

}  // namespace
