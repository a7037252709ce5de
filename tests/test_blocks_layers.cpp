// TransformerEncoderLayer and DecoderLayer (blocks.hpp) against float64 references of PyTorch's semantics written
// here: nn.TransformerEncoderLayer (both norm orders, every activation, biases), and the llama decoder layer
// (RMSNorm, grouped-query attention with rope in both pairings, causal, SwiGLU feed-forward), prompt by forward and
// token by token by append. Outputs inside canaries; every error leaves y (and the cache) untouched.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "microattn/microattn.hpp"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;
using Mat = std::vector<double>;  // row-major

namespace {

// ---- float64 reference pieces ------------------------------------------------------------------------------
// y (n × out) = x (n × in) · wᵀ + b.
Mat ref_linear(const Mat& x, std::size_t n, std::size_t in, const std::vector<float>& w, const float* b,
               std::size_t out) {
  Mat y(n * out);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t o = 0; o < out; ++o) {
      double s = b != nullptr ? b[o] : 0.0;
      for (std::size_t k = 0; k < in; ++k) s += x[i * in + k] * w[o * in + k];
      y[i * out + o] = s;
    }
  return y;
}
Mat ref_layer_norm(const Mat& x, std::size_t n, std::size_t d, const std::vector<float>& w, const std::vector<float>& b,
                   double eps) {
  Mat y(n * d);
  for (std::size_t i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (std::size_t j = 0; j < d; ++j) m += x[i * d + j];
    m /= d;
    for (std::size_t j = 0; j < d; ++j) v += (x[i * d + j] - m) * (x[i * d + j] - m);
    const double r = 1 / std::sqrt(v / d + eps);
    for (std::size_t j = 0; j < d; ++j) y[i * d + j] = (x[i * d + j] - m) * r * w[j] + b[j];
  }
  return y;
}
Mat ref_rms_norm(const Mat& x, std::size_t n, std::size_t d, const std::vector<float>& w, double eps) {
  Mat y(n * d);
  for (std::size_t i = 0; i < n; ++i) {
    double ss = 0;
    for (std::size_t j = 0; j < d; ++j) ss += x[i * d + j] * x[i * d + j];
    const double r = 1 / std::sqrt(ss / d + eps);
    for (std::size_t j = 0; j < d; ++j) y[i * d + j] = x[i * d + j] * r * w[j];
  }
  return y;
}
double ref_act(ma::Activation a, double x) {
  switch (a) {
    case ma::Activation::relu:
      return x < 0 ? 0 : x;
    case ma::Activation::gelu:
      return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case ma::Activation::gelu_tanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    default:
      return x / (1 + std::exp(-x));
  }
}
// Rotary embedding of one head's vector at position pos (HF rotate_half pairs (i, i + dims/2), or interleaved).
void ref_rope(double* v, std::size_t dims, double theta, bool interleaved, std::size_t pos) {
  for (std::size_t i = 0; i < dims / 2; ++i) {
    const double ang = static_cast<double>(pos) * std::pow(theta, -2.0 * i / dims);
    const std::size_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + dims / 2;
    const double x0 = v[a], x1 = v[b];
    v[a] = x0 * std::cos(ang) - x1 * std::sin(ang);
    v[b] = x0 * std::sin(ang) + x1 * std::cos(ang);
  }
}
// Multi-head attention over n rows (GQA: query head h uses K/V head h / (heads / kv_heads)), causal or not, rope
// (theta 0: none) at positions 0 … n − 1, scale 1/sqrt(hd), biases optional, then the out projection.
struct RefAttn {
  std::size_t d, heads, kv_heads;
  const std::vector<float>*wq, *wk, *wv, *wo;
  const float *bq, *bk, *bv, *bo;
  double theta;
  bool interleaved, causal;
};
Mat ref_attention(const RefAttn& r, const Mat& x, std::size_t n) {
  const std::size_t hd = r.d / r.heads, kvd = r.kv_heads * hd;
  Mat q = ref_linear(x, n, r.d, *r.wq, r.bq, r.d), k = ref_linear(x, n, r.d, *r.wk, r.bk, kvd),
      v = ref_linear(x, n, r.d, *r.wv, r.bv, kvd);
  if (r.theta != 0)
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t h = 0; h < r.heads; ++h) ref_rope(&q[i * r.d + h * hd], hd, r.theta, r.interleaved, i);
      for (std::size_t h = 0; h < r.kv_heads; ++h) ref_rope(&k[i * kvd + h * hd], hd, r.theta, r.interleaved, i);
    }
  Mat o(n * r.d, 0.0);
  for (std::size_t h = 0; h < r.heads; ++h) {
    const std::size_t g = h / (r.heads / r.kv_heads);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t last = r.causal ? i + 1 : n;
      std::vector<double> s(last);
      double mx = -INFINITY, sum = 0;
      for (std::size_t j = 0; j < last; ++j) {
        double t = 0;
        for (std::size_t c = 0; c < hd; ++c) t += q[i * r.d + h * hd + c] * k[j * kvd + g * hd + c];
        s[j] = t / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, s[j]);
      }
      for (double& t : s) sum += (t = std::exp(t - mx));
      for (std::size_t j = 0; j < last; ++j)
        for (std::size_t c = 0; c < hd; ++c) o[i * r.d + h * hd + c] += s[j] / sum * v[j * kvd + g * hd + c];
    }
  }
  return ref_linear(o, n, r.d, *r.wo, r.bo, r.d);
}

std::vector<float> random_vec(std::size_t n, std::uint32_t seed, float lo, float hi) {
  Uniform u(seed, lo, hi);
  std::vector<float> v(n);
  for (float& e : v) e = u();
  return v;
}
Mat to_double(const Guarded& g) {
  Mat m(g.rows() * g.cols());
  for (std::size_t r = 0; r < g.rows(); ++r)
    for (std::size_t c = 0; c < g.cols(); ++c) m[r * g.cols() + c] = g.at(r, c);
  return m;
}
// Every element within 1e-4 of its row's largest |value| (+1e-6): the model-level bound, far above the
// steps' own fp32 bounds at these sizes and far below any semantic difference (a missed bias, residual, norm order).
::testing::AssertionResult rows_near(const Guarded& got, const Mat& want, std::size_t first_row = 0,
                                     double tol = 1e-4) {
  const std::size_t cols = got.cols();
  for (std::size_t r = 0; r < got.rows(); ++r) {
    double scale = 0;
    for (std::size_t c = 0; c < cols; ++c) scale = std::max(scale, std::fabs(want[(first_row + r) * cols + c]));
    for (std::size_t c = 0; c < cols; ++c) {
      const double w = want[(first_row + r) * cols + c], g = got.at(r, c);
      if (!(std::fabs(g - w) <= tol * scale + 1e-6))
        return ::testing::AssertionFailure() << "(" << r << "," << c << "): got " << g << " want " << w;
    }
  }
  return got.canaries_intact();
}

// ---- encoder -------------------------------------------------------------------------------------------------
constexpr std::size_t kSeq = 40, kD = 32, kH = 4, kFF = 48;

struct EncoderModel {
  std::vector<float> wq, wk, wv, wo, bq, bk, bv, bo, w1, b1, w2, b2, n1w, n1b, n2w, n2b;
  explicit EncoderModel(std::uint32_t s)
      : wq(random_vec(kD * kD, s, -0.3f, 0.3f)),
        wk(random_vec(kD * kD, s + 1, -0.3f, 0.3f)),
        wv(random_vec(kD * kD, s + 2, -0.3f, 0.3f)),
        wo(random_vec(kD * kD, s + 3, -0.3f, 0.3f)),
        bq(random_vec(kD, s + 4, -0.2f, 0.2f)),
        bk(random_vec(kD, s + 5, -0.2f, 0.2f)),
        bv(random_vec(kD, s + 6, -0.2f, 0.2f)),
        bo(random_vec(kD, s + 7, -0.2f, 0.2f)),
        w1(random_vec(kFF * kD, s + 8, -0.3f, 0.3f)),
        b1(random_vec(kFF, s + 9, -0.5f, 0.5f)),
        w2(random_vec(kD * kFF, s + 10, -0.3f, 0.3f)),
        b2(random_vec(kD, s + 11, -0.2f, 0.2f)),
        n1w(random_vec(kD, s + 12, 0.5f, 1.5f)),
        n1b(random_vec(kD, s + 13, -0.5f, 0.5f)),
        n2w(random_vec(kD, s + 14, 0.5f, 1.5f)),
        n2b(random_vec(kD, s + 15, -0.5f, 0.5f)) {}
  ma::EncoderLayerWeights weights() const {
    ma::EncoderLayerWeights w{};
    w.self_attn = {ma::weights_f32(wq.data(), kD, kD),
                   ma::weights_f32(wk.data(), kD, kD),
                   ma::weights_f32(wv.data(), kD, kD),
                   bq.data(),
                   bk.data(),
                   bv.data(),
                   ma::weights_f32(wo.data(), kD, kD),
                   bo.data()};
    w.linear1 = ma::weights_f32(w1.data(), kFF, kD);
    w.linear1_bias = b1.data();
    w.linear2 = ma::weights_f32(w2.data(), kD, kFF);
    w.linear2_bias = b2.data();
    w.norm1_weight = n1w.data();
    w.norm1_bias = n1b.data();
    w.norm2_weight = n2w.data();
    w.norm2_bias = n2b.data();
    return w;
  }
  Mat reference(const Mat& x, std::size_t n, const ma::EncoderLayerConfig& c, bool causal) const {
    const RefAttn ra{kD, kH, kH, &wq, &wk, &wv, &wo, bq.data(), bk.data(), bv.data(), bo.data(), 0, false, causal};
    auto ff = [&](const Mat& h) {
      Mat f = ref_linear(h, n, kD, w1, b1.data(), kFF);
      for (double& e : f) e = ref_act(c.activation, e);
      return ref_linear(f, n, kFF, w2, b2.data(), kD);
    };
    Mat h(n * kD);
    if (!c.norm_first) {
      const Mat a = ref_attention(ra, x, n);
      for (std::size_t i = 0; i < n * kD; ++i) h[i] = x[i] + a[i];
      h = ref_layer_norm(h, n, kD, n1w, n1b, c.layer_norm_eps);
      const Mat f = ff(h);
      for (std::size_t i = 0; i < n * kD; ++i) h[i] += f[i];
      return ref_layer_norm(h, n, kD, n2w, n2b, c.layer_norm_eps);
    }
    const Mat a = ref_attention(ra, ref_layer_norm(x, n, kD, n1w, n1b, c.layer_norm_eps), n);
    for (std::size_t i = 0; i < n * kD; ++i) h[i] = x[i] + a[i];
    const Mat f = ff(ref_layer_norm(h, n, kD, n2w, n2b, c.layer_norm_eps));
    for (std::size_t i = 0; i < n * kD; ++i) h[i] += f[i];
    return h;
  }
};

TEST(BlocksLayers, EncoderBothNormOrdersEveryActivation) {
  const EncoderModel model(11);
  static ma::TransformerEncoderLayer<kSeq, kD, kH, kFF>* layer = nullptr;
  static_assert(ma::TransformerEncoderLayer<kSeq, kD, kH, kFF>::ram_bytes ==
                    4 * (2 * kSeq * kD + ma::encoder_layer_scratch_floats(kSeq, kD, kH, kFF)),
                "ram_bytes: the K/V and the scratch");
  for (bool norm_first : {false, true})
    for (ma::Activation act :
         {ma::Activation::relu, ma::Activation::gelu, ma::Activation::gelu_tanh, ma::Activation::silu})
      for (std::size_t n : {std::size_t{1}, std::size_t{3}, ma::block_ffn_rows, ma::block_ffn_rows + 1, kSeq})
        for (bool in_place : {false, true})
          for (bool causal : {false, true}) {
            ma::EncoderLayerConfig c;
            c.norm_first = norm_first;
            c.activation = act;
            c.layer_norm_eps = 1e-5f;
            auto l = std::make_unique<ma::TransformerEncoderLayer<kSeq, kD, kH, kFF>>(model.weights(), c);
            layer = l.get();
            Guarded x(n, kD, kD + 3);
            x.fill(Uniform(static_cast<std::uint32_t>(n * 7 + norm_first), -2.0f, 2.0f));
            const Mat want = model.reference(to_double(x), n, c, causal);
            Guarded y(n, kD, kD + 1);
            Guarded& out = in_place ? x : y;
            ma::AttentionOptions o;
            o.causal = causal;
            ASSERT_EQ(layer->forward(x.cview(), out.view(), o), ma::Status::ok);
            EXPECT_TRUE(rows_near(out, want)) << "norm_first " << norm_first << " act " << int(act) << " n " << n
                                              << " in place " << in_place << " causal " << causal;
          }
}

// Layers sharing one scratch give what layers with their own give, one after another (a two-layer stack).
TEST(BlocksLayers, EncoderSharedScratch) {
  const EncoderModel m1(21), m2(41);
  ma::EncoderLayerConfig c;
  c.norm_first = true;
  c.activation = ma::Activation::gelu;
  static ma::LayerScratch<ma::encoder_layer_scratch_floats(kSeq, kD, kH, kFF)> scratch;
  auto s1 = std::make_unique<ma::TransformerEncoderLayerSharedScratch<kSeq, kD, kH, kFF>>(m1.weights(), scratch, c);
  auto s2 = std::make_unique<ma::TransformerEncoderLayerSharedScratch<kSeq, kD, kH, kFF>>(m2.weights(), scratch, c);
  auto o1 = std::make_unique<ma::TransformerEncoderLayer<kSeq, kD, kH, kFF>>(m1.weights(), c);
  auto o2 = std::make_unique<ma::TransformerEncoderLayer<kSeq, kD, kH, kFF>>(m2.weights(), c);
  static_assert(ma::TransformerEncoderLayerSharedScratch<kSeq, kD, kH, kFF>::ram_bytes == 4 * 2 * kSeq * kD,
                "a shared-scratch layer holds its K/V only");
  Guarded x(9, kD);
  x.fill(Uniform(5, -1.0f, 1.0f));
  Guarded a = x, b = x;
  ASSERT_EQ(s1->forward(a.cview(), a.view()), ma::Status::ok);
  ASSERT_EQ(s2->forward(a.cview(), a.view()), ma::Status::ok);
  ASSERT_EQ(o1->forward(b.cview(), b.view()), ma::Status::ok);
  ASSERT_EQ(o2->forward(b.cview(), b.view()), ma::Status::ok);
  EXPECT_EQ(a.snapshot(), b.snapshot());
  const Mat want = m2.reference(m1.reference(to_double(x), 9, c, false), 9, c, false);
  EXPECT_TRUE(rows_near(a, want));
}

// ---- decoder -------------------------------------------------------------------------------------------------
constexpr std::size_t dSeq = 40, dD = 32, dH = 4, dKv = 2, dHid = 40;

struct DecoderModel {
  std::vector<float> wq, wk, wv, wo, w1, w2, w3, an, fn;
  explicit DecoderModel(std::uint32_t s)
      : wq(random_vec(dD * dD, s, -0.3f, 0.3f)),
        wk(random_vec(dKv * 8 * dD, s + 1, -0.3f, 0.3f)),
        wv(random_vec(dKv * 8 * dD, s + 2, -0.3f, 0.3f)),
        wo(random_vec(dD * dD, s + 3, -0.3f, 0.3f)),
        w1(random_vec(dHid * dD, s + 4, -0.3f, 0.3f)),
        w2(random_vec(dD * dHid, s + 5, -0.3f, 0.3f)),
        w3(random_vec(dHid * dD, s + 6, -0.3f, 0.3f)),
        an(random_vec(dD, s + 7, 0.5f, 1.5f)),
        fn(random_vec(dD, s + 8, 0.5f, 1.5f)) {}
  ma::DecoderLayerWeights weights() const {
    ma::DecoderLayerWeights w{};
    w.wq = ma::weights_f32(wq.data(), dD, dD);
    w.wk = ma::weights_f32(wk.data(), dKv * 8, dD);
    w.wv = ma::weights_f32(wv.data(), dKv * 8, dD);
    w.wo = ma::weights_f32(wo.data(), dD, dD);
    w.w1 = ma::weights_f32(w1.data(), dHid, dD);
    w.w2 = ma::weights_f32(w2.data(), dD, dHid);
    w.w3 = ma::weights_f32(w3.data(), dHid, dD);
    w.attention_norm = an.data();
    w.ffn_norm = fn.data();
    return w;
  }
  Mat reference(const Mat& x, std::size_t n, double theta, bool interleaved, double eps) const {
    const RefAttn ra{dD, dH, dKv, &wq, &wk, &wv, &wo, nullptr, nullptr, nullptr, nullptr, theta, interleaved, true};
    const Mat a = ref_attention(ra, ref_rms_norm(x, n, dD, an, eps), n);
    Mat h(n * dD);
    for (std::size_t i = 0; i < n * dD; ++i) h[i] = x[i] + a[i];
    const Mat hn = ref_rms_norm(h, n, dD, fn, eps);
    Mat g = ref_linear(hn, n, dD, w1, nullptr, dHid);
    const Mat u = ref_linear(hn, n, dD, w3, nullptr, dHid);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
    const Mat f = ref_linear(g, n, dHid, w2, nullptr, dD);
    for (std::size_t i = 0; i < n * dD; ++i) h[i] += f[i];
    return h;
  }
};
using Decoder = ma::DecoderLayer<dSeq, dD, dH, dKv, dHid>;

TEST(BlocksLayers, DecoderPrefillAndAppend) {
  const DecoderModel model(7);
  static_assert(Decoder::ram_bytes == 4 * (2 * dSeq * dKv * 8 + ma::decoder_layer_scratch_floats(dSeq, dD, dH, dHid)),
                "ram_bytes: the K/V cache and the scratch");
  for (double theta : {0.0, 10000.0})
    for (bool interleaved : {false, true}) {
      if (theta == 0 && interleaved) continue;
      ma::DecoderLayerConfig c;
      c.attention.rope_theta = static_cast<float>(theta);
      c.attention.rope_interleaved = interleaved;
      c.rms_norm_eps = 1e-5f;
      const std::size_t n = 37;  // crosses block_ffn_rows (4 on Cortex-M, 32 otherwise)
      Guarded x(n, dD, dD + 2);
      x.fill(Uniform(3, -1.5f, 1.5f));
      const Mat want = model.reference(to_double(x), n, theta, interleaved, 1e-5);
      // The whole prompt at once.
      auto prompt = std::make_unique<Decoder>(model.weights(), c);
      Guarded y(n, dD, dD + 1);
      ASSERT_EQ(prompt->forward(x.cview(), y.view()), ma::Status::ok);
      EXPECT_TRUE(rows_near(y, want)) << "forward, theta " << theta << " interleaved " << interleaved;
      EXPECT_EQ(prompt->cached(), n);
      EXPECT_EQ(prompt->position(), n);
      // In place: each query tile reads its rows of x before it writes them, and none after.
      auto in_place = std::make_unique<Decoder>(model.weights(), c);
      Guarded w = x;
      ASSERT_EQ(in_place->forward(w.cview(), w.view()), ma::Status::ok);
      EXPECT_TRUE(rows_near(w, want)) << "in place, theta " << theta << " interleaved " << interleaved;
      // A prefix by forward, the rest by append in chunks of 1, 2, 3 … rows (in place): the same rows.
      auto step = std::make_unique<Decoder>(model.weights(), c);
      Guarded z = x;
      ASSERT_EQ(step->forward(ma::MatrixView<const float>{z.data(), 5, dD, z.stride()},
                              ma::MatrixView<float>{z.data(), 5, dD, z.stride()}),
                ma::Status::ok);
      for (std::size_t r = 5, k = 1; r < n; r += k, ++k) {
        const std::size_t m = std::min(k, n - r);
        ASSERT_EQ(step->append(ma::MatrixView<const float>{z.data() + r * z.stride(), m, dD, z.stride()},
                               ma::MatrixView<float>{z.data() + r * z.stride(), m, dD, z.stride()}),
                  ma::Status::ok);
      }
      EXPECT_EQ(step->position(), n);
      EXPECT_TRUE(rows_near(z, want)) << "append, theta " << theta << " interleaved " << interleaved;
      step->reset();
      EXPECT_EQ(step->cached(), 0u);
      EXPECT_EQ(step->position(), 0u);
    }
}

// An f16 or q8 K/V cache: prefill and chunked append agree (the same stored rows), both near the float64 model
// within what rounding K and V to the format costs (f16: 2^-11 relative per element; q8: half a step of
// absmax/127 per row), and the cache takes less RAM.
template <ma::Format F>
void decoder_cache_format(double tol) {
  using D = ma::DecoderLayer<dSeq, dD, dH, dKv, dHid, F>;
  static_assert(D::ram_bytes < Decoder::ram_bytes, "a low-precision cache takes less RAM");
  static_assert(D::ram_bytes == 4 * ((ma::layer_cache_bytes(dSeq, dD, dH, dKv, F) + 3) / 4 +
                                     ma::decoder_layer_scratch_floats(dSeq, dD, dH, dHid, F)),
                "ram_bytes: the cache at its format's size and the scratch");
  const DecoderModel model(11);
  ma::DecoderLayerConfig c;
  c.attention.rope_theta = 10000.0f;
  c.attention.rope_interleaved = true;
  const std::size_t n = 37;
  Guarded x(n, dD, dD + 2);
  x.fill(Uniform(5, -1.5f, 1.5f));
  const Mat want = model.reference(to_double(x), n, 10000.0, true, 1e-5);
  auto prompt = std::make_unique<D>(model.weights(), c);
  Guarded y(n, dD, dD + 1);
  ASSERT_EQ(prompt->forward(x.cview(), y.view()), ma::Status::ok);
  EXPECT_TRUE(rows_near(y, want, 0, tol)) << "forward";
  auto step = std::make_unique<D>(model.weights(), c);
  Guarded z = x;
  for (std::size_t r = 0, k = 1; r < n; r += k, ++k) {
    const std::size_t m = std::min(k, n - r);
    ASSERT_EQ(step->append(ma::MatrixView<const float>{z.data() + r * z.stride(), m, dD, z.stride()},
                           ma::MatrixView<float>{z.data() + r * z.stride(), m, dD, z.stride()}),
              ma::Status::ok);
  }
  EXPECT_EQ(step->cached(), n);
  EXPECT_TRUE(rows_near(z, want, 0, tol)) << "append";
  Mat prefill(n * dD);
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t j = 0; j < dD; ++j) prefill[r * dD + j] = y.at(r, j);
  EXPECT_TRUE(rows_near(z, prefill)) << "append against prefill: the same stored K/V";
}
TEST(BlocksLayers, DecoderCacheF16) { decoder_cache_format<ma::Format::f16>(3e-3); }
TEST(BlocksLayers, DecoderCacheQ8) { decoder_cache_format<ma::Format::q8>(3e-2); }

// Two layers sharing one scratch, one after the other, in place.
TEST(BlocksLayers, DecoderSharedScratchTwoLayers) {
  const DecoderModel m1(1), m2(2);
  ma::DecoderLayerConfig c;
  c.attention.rope_theta = 10000.0f;
  c.attention.rope_interleaved = true;
  static ma::LayerScratch<ma::decoder_layer_scratch_floats(dSeq, dD, dH, dHid)> scratch;
  auto l1 = std::make_unique<ma::DecoderLayerSharedScratch<dSeq, dD, dH, dKv, dHid>>(m1.weights(), scratch, c);
  auto l2 = std::make_unique<ma::DecoderLayerSharedScratch<dSeq, dD, dH, dKv, dHid>>(m2.weights(), scratch, c);
  Guarded x(6, dD);
  x.fill(Uniform(8, -1.0f, 1.0f));
  const Mat want = m2.reference(m1.reference(to_double(x), 6, 10000.0, true, 1e-5), 6, 10000.0, true, 1e-5);
  ASSERT_EQ(l1->forward(x.cview(), x.view()), ma::Status::ok);
  ASSERT_EQ(l2->forward(x.cview(), x.view()), ma::Status::ok);
  EXPECT_TRUE(rows_near(x, want));
  // x or y inside the shared scratch (its last floats: the feed-forward rows) would be overwritten mid-call.
  constexpr std::size_t sf = ma::decoder_layer_scratch_floats(dSeq, dD, dH, dHid);
  float* const tail = scratch.data + sf - dD;
  const std::size_t cached = l1->cached();
  EXPECT_EQ(l1->append(ma::MatrixView<const float>{x.data(), 1, dD, dD}, ma::MatrixView<float>{tail, 1, dD, dD}),
            ma::Status::aliasing);
  EXPECT_EQ(l1->append(ma::MatrixView<const float>{tail, 1, dD, dD}, ma::MatrixView<float>{x.data(), 1, dD, dD}),
            ma::Status::aliasing);
  EXPECT_EQ(l1->cached(), cached);
}

// ---- rows of huge values -------------------------------------------------------------------------------------
// Constant rows, and rows alternating in sign by column or row by row, of magnitudes where the norms' float sums
// overflow: the norms rescale them (a constant row's layer norm is its bias), and every output is finite and near
// the float64 model. Post-norm projects x itself, so its magnitudes stay where the projections do not overflow
// (PyTorch's would give inf there too); pre-norm and the decoder add bounded terms to x, up to FLT_MAX.
enum class Huge { constant, by_column, by_row };
void fill_huge(Guarded& x, Huge h, float a) {
  for (std::size_t r = 0; r < x.rows(); ++r)
    for (std::size_t c = 0; c < x.cols(); ++c)
      x.at(r, c) = h == Huge::constant ? a : (h == Huge::by_column ? c : r) % 2 == 1 ? -a : a;
}
::testing::AssertionResult all_finite(const Guarded& y) {
  for (std::size_t r = 0; r < y.rows(); ++r)
    for (std::size_t c = 0; c < y.cols(); ++c)
      if (!std::isfinite(y.at(r, c)))
        return ::testing::AssertionFailure() << "(" << r << "," << c << "): " << y.at(r, c);
  return ::testing::AssertionSuccess();
}
const float huge_values[] = {1e30f, -1e30f, 0x1p100f, 1e38f, FLT_MAX, -FLT_MAX};

TEST(BlocksLayers, EncoderHugeRowsStayFinite) {
  const EncoderModel model(31);
  for (bool norm_first : {false, true})
    for (float a : huge_values)
      for (Huge h : {Huge::constant, Huge::by_column, Huge::by_row}) {
        if (!norm_first && std::fabs(a) > 1e30f) continue;
        ma::EncoderLayerConfig c;
        c.norm_first = norm_first;
        c.activation = ma::Activation::gelu;
        c.layer_norm_eps = 1e-5f;
        auto layer = std::make_unique<ma::TransformerEncoderLayer<kSeq, kD, kH, kFF>>(model.weights(), c);
        Guarded x(5, kD, kD + 3), y(5, kD, kD + 1);
        fill_huge(x, h, a);
        const Mat want = model.reference(to_double(x), 5, c, false);
        ASSERT_EQ(layer->forward(x.cview(), y.view()), ma::Status::ok);
        EXPECT_TRUE(all_finite(y)) << "norm_first " << norm_first << " a " << a << " shape " << int(h);
        EXPECT_TRUE(rows_near(y, want)) << "norm_first " << norm_first << " a " << a << " shape " << int(h);
      }
}

TEST(BlocksLayers, DecoderHugeRowsStayFinite) {
  const DecoderModel model(17);
  ma::DecoderLayerConfig c;
  c.attention.rope_theta = 10000.0f;
  c.rms_norm_eps = 1e-5f;
  for (float a : huge_values)
    for (Huge h : {Huge::constant, Huge::by_column, Huge::by_row}) {
      auto layer = std::make_unique<Decoder>(model.weights(), c);
      Guarded x(5, dD, dD + 2), y(5, dD, dD + 1);
      fill_huge(x, h, a);
      const Mat want = model.reference(to_double(x), 5, 10000.0, false, 1e-5);
      // A prompt of 4 rows, then the fifth appended.
      ASSERT_EQ(layer->forward(ma::MatrixView<const float>{x.data(), 4, dD, x.stride()},
                               ma::MatrixView<float>{y.data(), 4, dD, y.stride()}),
                ma::Status::ok);
      ASSERT_EQ(layer->append(ma::MatrixView<const float>{x.data() + 4 * x.stride(), 1, dD, x.stride()},
                              ma::MatrixView<float>{y.data() + 4 * y.stride(), 1, dD, y.stride()}),
                ma::Status::ok);
      EXPECT_TRUE(all_finite(y)) << "a " << a << " shape " << int(h);
      EXPECT_TRUE(rows_near(y, want)) << "a " << a << " shape " << int(h);
    }
}

// ---- bad input: the status, and y, the cache and the position untouched ----------------------------------------
TEST(BlocksLayers, BadInput) {
  const DecoderModel model(3);
  auto layer = std::make_unique<Decoder>(model.weights());
  Guarded x(4, dD), y(4, dD);
  x.fill(Uniform(1));
  ASSERT_EQ(layer->forward(x.cview(), y.view()), ma::Status::ok);
  const auto before = y.snapshot();
  auto expect = [&](ma::Status got, ma::Status want, const char* what) {
    EXPECT_EQ(got, want) << what;
    EXPECT_EQ(y.snapshot(), before) << what << ": y written";
    EXPECT_EQ(layer->cached(), 4u) << what;
    EXPECT_EQ(layer->position(), 4u) << what;
  };
  expect(layer->append({nullptr, 1, dD, dD}, y.view()), ma::Status::null_pointer, "x null");
  expect(
      layer->append(x.cview(), {reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(y.data()) + 2), 4, dD, dD}),
      ma::Status::misaligned, "y misaligned");
  {  // 4 cached + 37 rows > MaxSeq: the attention's own check, after the block's, before anything is written.
    Guarded big(dSeq - 3, dD), ybig(dSeq - 3, dD);
    big.fill(Uniform(2));
    const auto ybefore = ybig.snapshot();
    EXPECT_EQ(layer->append(big.cview(), ybig.view()), ma::Status::invalid_shape);
    EXPECT_EQ(ybig.snapshot(), ybefore);
    EXPECT_EQ(layer->cached(), 4u);
  }
  expect(layer->append({x.data(), 4, dD - 1, dD}, {y.data(), 4, dD - 1, dD}), ma::Status::invalid_shape, "cols");
  expect(layer->append(x.cview(), {x.data() + 1, 4, dD, dD}), ma::Status::aliasing, "y on x shifted");
  {  // y on a weight: the norm's vector inside y.
    ma::DecoderLayerWeights w = model.weights();
    w.ffn_norm = y.data() + 3;
    auto l = std::make_unique<Decoder>(w);
    EXPECT_EQ(l->forward(x.cview(), y.view()), ma::Status::aliasing);
    EXPECT_EQ(y.snapshot(), before);
    w = model.weights();
    w.w2 = ma::weights_f32(model.w2.data(), dD, dHid - 1);
    l = std::make_unique<Decoder>(w);
    EXPECT_EQ(l->forward(x.cview(), y.view()), ma::Status::invalid_shape);
    w = model.weights();
    w.w3.data = nullptr;
    l = std::make_unique<Decoder>(w);
    EXPECT_EQ(l->forward(x.cview(), y.view()), ma::Status::null_pointer);
    w = model.weights();
    w.wq.data = nullptr;  // the attention's own weights, checked by the block first
    l = std::make_unique<Decoder>(w);
    EXPECT_EQ(l->forward(x.cview(), y.view()), ma::Status::null_pointer);
    ma::DecoderLayerConfig bad_eps;
    bad_eps.rms_norm_eps = -1.0f;
    l = std::make_unique<Decoder>(model.weights(), bad_eps);
    EXPECT_EQ(l->forward(x.cview(), y.view()), ma::Status::invalid_shape);
    EXPECT_EQ(y.snapshot(), before);
  }
  const EncoderModel em(4);
  ma::EncoderLayerConfig ec;
  ec.activation = static_cast<ma::Activation>(7);
  auto enc = std::make_unique<ma::TransformerEncoderLayer<kSeq, kD, kH, kFF>>(em.weights(), ec);
  Guarded ex(3, kD), ey(3, kD);
  ex.fill(Uniform(5));
  const auto ebefore = ey.snapshot();
  EXPECT_EQ(enc->forward(ex.cview(), ey.view()), ma::Status::invalid_shape);
  ec.activation = ma::Activation::relu;
  ec.layer_norm_eps = NAN;
  enc = std::make_unique<ma::TransformerEncoderLayer<kSeq, kD, kH, kFF>>(em.weights(), ec);
  EXPECT_EQ(enc->forward(ex.cview(), ey.view()), ma::Status::invalid_shape);
  ma::EncoderLayerWeights ew = em.weights();
  ew.norm2_bias = reinterpret_cast<const float*>(reinterpret_cast<const unsigned char*>(em.n2b.data()) + 2);
  enc = std::make_unique<ma::TransformerEncoderLayer<kSeq, kD, kH, kFF>>(ew, ma::EncoderLayerConfig{});
  EXPECT_EQ(enc->forward(ex.cview(), ey.view()), ma::Status::misaligned);
  ew = em.weights();
  ew.linear1 = ma::weights_f32(em.w1.data(), kFF - 1, kD);
  enc = std::make_unique<ma::TransformerEncoderLayer<kSeq, kD, kH, kFF>>(ew, ma::EncoderLayerConfig{});
  EXPECT_EQ(enc->forward(ex.cview(), ey.view()), ma::Status::invalid_shape);
  // An out bias without its projection: null_pointer, from the check MultiHeadAttention and the C API share.
  ew = em.weights();
  ew.self_attn.out.data = nullptr;
  ew.self_attn.out_bias = em.n2b.data();
  enc = std::make_unique<ma::TransformerEncoderLayer<kSeq, kD, kH, kFF>>(ew, ma::EncoderLayerConfig{});
  EXPECT_EQ(enc->forward(ex.cview(), ey.view()), ma::Status::null_pointer);
  EXPECT_EQ(ey.snapshot(), ebefore);
}

}  // namespace
