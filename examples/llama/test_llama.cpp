// Tests of the llama2.c runner's parts: the checkpoint loader (accepts the generated files, refuses every kind
// of bad one), the forward pass against a float64 model read by an independent parser of the file formats, the
// tokenizer's run.c rules and the sampler's. argv[1]: the directory of the generated checkpoints.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "llama_forward.hpp"
#include "llama_model.hpp"
#include "llama_sampler.hpp"
#include "llama_tokenizer.hpp"
#include "microattn/posix_pool.hpp"

namespace {

std::string g_dir = ".";
std::string g_models;  // argv[2]: the committed models/ (its trained tokenizer), or empty

// File bytes in 4-byte aligned storage, as a mapping would be.
struct Bytes {
  std::vector<std::uint32_t> words;
  std::size_t size = 0;
  const unsigned char* data() const { return reinterpret_cast<const unsigned char*>(words.data()); }
  unsigned char* data() { return reinterpret_cast<unsigned char*>(words.data()); }
  void assign(const std::vector<unsigned char>& b) {
    size = b.size();
    words.assign(size / 4 + 1, 0);
    if (size != 0) std::memcpy(data(), b.data(), size);
  }
  std::vector<unsigned char> vec() const { return std::vector<unsigned char>(data(), data() + size); }
};

std::vector<unsigned char> read_path(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "missing " << path;
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(f), {});
}

std::vector<unsigned char> read_file(const std::string& name) { return read_path(g_dir + "/" + name); }

Bytes bytes_of(const std::vector<unsigned char>& v) {
  Bytes b;
  b.assign(v);
  return b;
}

llama::LoadStatus load_status(const std::vector<unsigned char>& v) {
  Bytes b = bytes_of(v);
  llama::Model m;
  const llama::LoadResult r = llama::load_checkpoint(b.data(), b.size, m);
  if (!r.ok()) {
    EXPECT_NE(r.message[0], '\0');
    EXPECT_TRUE(m.layers.empty());
  }
  return r.status;
}

void put_i32(std::vector<unsigned char>& v, std::size_t at, std::int32_t x) { std::memcpy(v.data() + at, &x, 4); }

// ---- an independent float64 model of the two formats ---------------------------------------------------------

struct RefModel {
  int dim, hidden, layers, heads, kv_heads, vocab, seq;
  bool shared;
  std::size_t group;  // 0: fp32
  std::vector<double> emb, cls, final_norm;
  std::vector<std::vector<double>> att_norm, ffn_norm, wq, wk, wv, wo, w1, w2, w3;
};

struct Reader {
  const std::vector<unsigned char>& b;
  std::size_t at;
  std::int32_t i32() {
    std::int32_t v;
    std::memcpy(&v, b.data() + at, 4);
    at += 4;
    return v;
  }
  std::vector<double> f32(std::size_t n) {
    std::vector<double> v(n);
    for (auto& x : v) {
      float f;
      std::memcpy(&f, b.data() + at, 4);
      at += 4;
      x = f;
    }
    return v;
  }
  std::vector<double> q8(std::size_t n, std::size_t group) {
    std::vector<double> v(n);
    const std::size_t q_at = at;
    at += n;
    const std::vector<double> s = f32(n / group);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<signed char>(b[q_at + i]) * s[i / group];
    return v;
  }
};

RefModel parse_reference(const std::vector<unsigned char>& b) {
  RefModel m{};
  Reader r{b, 0};
  std::uint32_t magic;
  std::memcpy(&magic, b.data(), 4);
  const bool v2 = magic == 0x616b3432u;
  if (v2) r.at = 8;
  m.dim = r.i32(), m.hidden = r.i32(), m.layers = r.i32(), m.heads = r.i32(), m.kv_heads = r.i32();
  m.vocab = r.i32(), m.seq = r.i32();
  std::size_t group = 1;
  if (v2) {
    m.shared = b[r.at] != 0;
    r.at += 1;
    group = static_cast<std::size_t>(r.i32());
    m.group = group;
    r.at = 256;
  } else {
    m.shared = m.vocab > 0;
    m.vocab = std::abs(m.vocab);
  }
  const std::size_t d = m.dim, h = m.hidden, kv = d / m.heads * m.kv_heads, V = m.vocab, L = m.layers;
  auto per_layer = [&](std::vector<std::vector<double>>& t, std::size_t n, bool quantized) {
    t.clear();
    for (std::size_t l = 0; l < L; ++l) t.push_back(quantized ? r.q8(n, group) : r.f32(n));
  };
  if (!v2) {
    m.emb = r.f32(V * d);
    per_layer(m.att_norm, d, false);
    per_layer(m.wq, d * d, false);
    per_layer(m.wk, kv * d, false);
    per_layer(m.wv, kv * d, false);
    per_layer(m.wo, d * d, false);
    per_layer(m.ffn_norm, d, false);
    per_layer(m.w1, h * d, false);
    per_layer(m.w2, d * h, false);
    per_layer(m.w3, h * d, false);
    m.final_norm = r.f32(d);
    r.at += static_cast<std::size_t>(m.seq) * (d / m.heads) * 4;
    m.cls = m.shared ? m.emb : r.f32(V * d);
  } else {
    per_layer(m.att_norm, d, false);
    per_layer(m.ffn_norm, d, false);
    m.final_norm = r.f32(d);
    m.emb = r.q8(V * d, group);
    per_layer(m.wq, d * d, true);
    per_layer(m.wk, kv * d, true);
    per_layer(m.wv, kv * d, true);
    per_layer(m.wo, d * d, true);
    per_layer(m.w1, h * d, true);
    per_layer(m.w2, d * h, true);
    per_layer(m.w3, h * d, true);
    m.cls = m.shared ? m.emb : r.q8(V * d, group);
  }
  EXPECT_EQ(r.at, b.size());
  return m;
}

// Logits of each position of `tokens`, in double, from the definitions (llama2.c model.py).
std::vector<std::vector<double>> reference_logits(const RefModel& m, const std::vector<int>& tokens) {
  const std::size_t d = m.dim, hd = d / m.heads, kv = hd * m.kv_heads, H = m.hidden;
  std::vector<std::vector<std::vector<double>>> kc(m.layers), vc(m.layers);
  std::vector<std::vector<double>> out;
  // q8 weights whose groups tile the rows: x quantized as runq.c does (per group, absmax / 127, rounded half
  // away from zero), the product then exact. Elsewhere (fp32, groups straddling rows) x as it is.
  auto mv = [&](const std::vector<double>& w, std::vector<double> x, std::size_t rows) {
    const std::size_t g = m.group;
    if (g != 0 && x.size() % g == 0)
      for (std::size_t c0 = 0; c0 < x.size(); c0 += g) {
        double mx = 0;
        for (std::size_t c = c0; c < c0 + g; ++c) mx = std::max(mx, std::abs(x[c]));
        const double s = mx / 127;
        for (std::size_t c = c0; c < c0 + g; ++c) x[c] = s == 0 ? 0 : std::round(x[c] / s) * s;
      }
    std::vector<double> y(rows, 0.0);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < x.size(); ++c) y[r] += w[r * x.size() + c] * x[c];
    return y;
  };
  auto norm = [](const std::vector<double>& x, const std::vector<double>& w) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / x.size() + 1e-5);
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = w[i] * x[i] * s;
    return y;
  };
  for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
    std::vector<double> x(m.emb.begin() + tokens[pos] * d, m.emb.begin() + (tokens[pos] + 1) * d);
    for (int l = 0; l < m.layers; ++l) {
      const auto n = norm(x, m.att_norm[l]);
      auto q = mv(m.wq[l], n, d), k = mv(m.wk[l], n, kv), v = mv(m.wv[l], n, kv);
      auto rot = [&](std::vector<double>& t) {
        for (std::size_t i = 0; i < t.size(); i += 2) {
          const double a = pos * std::pow(10000.0, -static_cast<double>(i % hd) / hd);
          const double t0 = t[i], t1 = t[i + 1];
          t[i] = t0 * std::cos(a) - t1 * std::sin(a);
          t[i + 1] = t0 * std::sin(a) + t1 * std::cos(a);
        }
      };
      rot(q);
      rot(k);
      kc[l].push_back(k);
      vc[l].push_back(v);
      std::vector<double> att(d, 0.0);
      for (int h = 0; h < m.heads; ++h) {
        const std::size_t g = h / (m.heads / m.kv_heads);
        std::vector<double> s(pos + 1);
        double mx = -1e300, sum = 0;
        for (std::size_t t = 0; t <= pos; ++t) {
          double dot = 0;
          for (std::size_t i = 0; i < hd; ++i) dot += q[h * hd + i] * kc[l][t][g * hd + i];
          s[t] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[t]);
        }
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (std::size_t t = 0; t <= pos; ++t)
          for (std::size_t i = 0; i < hd; ++i) att[h * hd + i] += s[t] / sum * vc[l][t][g * hd + i];
      }
      const auto o = mv(m.wo[l], att, d);
      for (std::size_t i = 0; i < d; ++i) x[i] += o[i];
      const auto n2 = norm(x, m.ffn_norm[l]);
      auto a = mv(m.w1[l], n2, H);
      const auto b = mv(m.w3[l], n2, H);
      for (std::size_t i = 0; i < H; ++i) a[i] = a[i] / (1 + std::exp(-a[i])) * b[i];
      const auto f = mv(m.w2[l], a, d);
      for (std::size_t i = 0; i < d; ++i) x[i] += f[i];
    }
    out.push_back(mv(m.cls, norm(x, m.final_norm), m.vocab));
  }
  return out;
}

// ---- loader --------------------------------------------------------------------------------------------------

const char* const k_models[] = {"s260k", "small", "tiny", "mha32"};

TEST(LlamaLoader, AcceptsGeneratedCheckpoints) {
  for (const char* name : k_models)
    for (const char* v : {"v0", "v2"}) {
      SCOPED_TRACE(std::string(name) + "-" + v);
      const auto file = read_file(std::string(name) + "-" + v + ".bin");
      Bytes b = bytes_of(file);
      llama::Model m;
      const llama::LoadResult r = llama::load_checkpoint(b.data(), b.size, m);
      ASSERT_TRUE(r.ok()) << r.message;
      const RefModel ref = parse_reference(file);
      EXPECT_EQ(m.config.dim, ref.dim);
      EXPECT_EQ(m.config.hidden_dim, ref.hidden);
      EXPECT_EQ(m.config.n_layers, ref.layers);
      EXPECT_EQ(m.config.vocab_size, ref.vocab);
      EXPECT_EQ(m.config.shared_classifier, ref.shared);
      EXPECT_EQ(m.config.version, v[1] - '0');
      EXPECT_EQ(static_cast<int>(m.layers.size()), ref.layers);
    }
}

TEST(LlamaLoader, RefusesEveryTruncation) {
  for (const char* name : k_models)
    for (const char* v : {"v0", "v2"}) {
      const auto file = read_file(std::string(name) + "-" + v + ".bin");
      std::vector<std::size_t> cuts;
      for (std::size_t n = 0; n < 300 && n < file.size(); ++n) cuts.push_back(n);
      for (std::size_t n = 300; n < file.size(); n += 997) cuts.push_back(n);
      for (std::size_t back = 1; back <= 9; ++back) cuts.push_back(file.size() - back);
      for (std::size_t n : cuts) {
        const std::vector<unsigned char> cut(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n));
        EXPECT_EQ(load_status(cut), llama::LoadStatus::truncated) << name << "-" << v << " cut at " << n;
      }
      auto longer = file;
      longer.push_back(0);
      EXPECT_EQ(load_status(longer), llama::LoadStatus::size_mismatch) << name << "-" << v;
    }
}

TEST(LlamaLoader, RefusesEveryBadHeaderField) {
  using S = llama::LoadStatus;
  for (const char* v : {"v0", "v2"}) {
    const auto file = read_file(std::string("s260k-") + v + ".bin");
    const std::size_t base = v[1] == '2' ? 8 : 0;
    // Field index, value, expected status. s260k: dim 64, hidden 172, 5 layers, 8 heads, 4 kv heads, vocab 512.
    const struct {
      int field;
      std::int32_t value;
      S expected;
    } cases[] = {
        {0, 0, S::bad_header},      {0, -64, S::bad_header},
        {0, 60, S::bad_header},  // 60 % 8 != 0
        {0, 80, S::truncated},      {0, INT_MAX, S::bad_header},
        {0, 128, S::truncated},     {1, 0, S::bad_header},
        {1, -1, S::bad_header},     {1, 173, S::truncated},
        {1, INT_MAX, S::truncated}, {2, 0, S::bad_header},
        {2, -5, S::bad_header},     {2, 4, S::size_mismatch},
        {2, 6, S::truncated},       {2, INT_MAX, S::truncated},
        {3, 0, S::bad_header},      {3, -8, S::bad_header},
        {3, 3, S::bad_header},  // 64 % 3
        {3, 64, S::bad_header},     {3, 12, S::bad_header},
        {3, 16, S::size_mismatch},  // head dim 1; 12∤64; head dim 4
        {4, 0, S::bad_header},      {4, -4, S::bad_header},
        {4, 3, S::bad_header},  // 8 % 3
        {4, 16, S::bad_header},     {4, 8, S::truncated},
        {4, 2, S::size_mismatch},   {6, 0, S::bad_header},
        {6, -1, S::bad_header},     {5, v[1] == '2' ? 0 : 0, S::bad_header},
        {5, 511, S::size_mismatch}, {5, 513, S::truncated},
    };
    for (const auto& c : cases) {
      auto bad = file;
      put_i32(bad, base + 4 * static_cast<std::size_t>(c.field), c.value);
      EXPECT_EQ(load_status(bad), c.expected) << v << " field " << c.field << " = " << c.value;
    }
    if (v[1] == '0') {
      auto bad = file;
      put_i32(bad, 20, INT_MIN);
      EXPECT_EQ(load_status(bad), S::bad_header);
      put_i32(bad, 20, -512);  // separate classifier announced, absent
      EXPECT_EQ(load_status(bad), S::truncated);
      put_i32(bad, 24, 511);  // seq_len changes the v0 size (rope tables)
      put_i32(bad, 20, 512);
      EXPECT_EQ(load_status(bad), S::size_mismatch);
      // Shapes whose byte counts overflow 64 bits: dim 2^30 (head dim 2).
      put_i32(bad, 0, 1 << 30);
      put_i32(bad, 12, 1 << 29);
      EXPECT_EQ(load_status(bad), S::too_big);
    } else {
      for (std::int32_t version : {0, 1, 3, -2, INT_MAX}) {
        auto bad = file;
        put_i32(bad, 4, version);
        EXPECT_EQ(load_status(bad), S::bad_magic) << version;
      }
      auto bad = file;
      put_i32(bad, 28, -512);  // vocab_size must be positive in version 2
      EXPECT_EQ(load_status(bad), S::bad_header);
      for (unsigned char shared : {2, 255}) {
        bad = file;
        bad[36] = shared;
        EXPECT_EQ(load_status(bad), S::bad_header);
      }
      bad = file;
      bad[36] = 0;  // separate classifier announced, absent
      EXPECT_EQ(load_status(bad), S::truncated);
      for (std::int32_t group : {0, -64, 3, 7, 128 * 3, INT_MAX, INT_MIN}) {
        bad = file;
        std::memcpy(bad.data() + 37, &group, 4);
        EXPECT_EQ(load_status(bad), S::bad_group) << group;
      }
      bad = file;
      std::int32_t group = 32;  // divides everything: a different, consistent layout that the file does not fill
      std::memcpy(bad.data() + 37, &group, 4);
      EXPECT_EQ(load_status(bad), S::truncated);
      bad = file;
      put_i32(bad, 8, 1 << 30);
      put_i32(bad, 16, 100);
      put_i32(bad, 20, 1 << 29);
      EXPECT_EQ(load_status(bad), S::too_big);
    }
  }
}

// ---- forward -------------------------------------------------------------------------------------------------

// 40 tokens spread over the vocabulary, across the 16-position key blocks (fewer where seq_len is shorter). A q8
// model takes 12: there a float activation that lands on the other side of a rounding boundary than its float64
// value quantizes one step away, and through the K/V cache that step moves every later position's logits (s260k-v2
// between the GCC and Clang builds: within 1e-7 of the largest logit up to position 31, but for 4e-3 at one
// position, then 1.4e-2 from 32 on): the longer the run, the likelier.
std::vector<int> test_tokens(const llama::Model& m) {
  std::vector<int> tokens;
  const int count = m.config.version == 2 ? 12 : 40;
  for (int i = 0; i < count && i < m.config.seq_len; ++i) tokens.push_back((i * 131 + 7) % m.config.vocab_size);
  return tokens;
}

// Runs `tokens` through the forward pass and expects each position's logits within tol · max|want| of `want`.
void expect_logits_near(const llama::Model& m, llama::RunState& s, const std::vector<int>& tokens,
                        const std::vector<std::vector<double>>& want, double tol) {
  for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
    const float* got = llama::forward(m, s, tokens[pos], pos);
    double max_ref = 0, max_err = 0;
    for (int i = 0; i < m.config.vocab_size; ++i) {
      max_ref = std::max(max_ref, std::abs(want[pos][i]));
      max_err = std::max(max_err, std::abs(got[i] - want[pos][i]));
    }
    EXPECT_LE(max_err, tol * max_ref) << "position " << pos;
  }
}

TEST(LlamaForward, LogitsMatchFloat64Reference) {
  for (const char* name : k_models)
    for (const char* v : {"v0", "v2"}) {
      SCOPED_TRACE(std::string(name) + "-" + v);
      const auto file = read_file(std::string(name) + "-" + v + ".bin");
      Bytes b = bytes_of(file);
      llama::Model m;
      ASSERT_TRUE(llama::load_checkpoint(b.data(), b.size, m).ok());
      const RefModel ref = parse_reference(file);
      const std::vector<int> tokens = test_tokens(m);
      const auto want = reference_logits(ref, tokens);
      // Fused projections (the default for these small models) and the matrices in place (limit 0).
      for (const std::size_t fuse_limit : {llama::default_fuse_limit_bytes, std::size_t{0}}) {
        SCOPED_TRACE("fuse limit " + std::to_string(fuse_limit));
        llama::RunState s;
        ASSERT_TRUE(llama::init_state(m, tokens.size(), s, fuse_limit));
        ASSERT_EQ(s.layers[0].qkv_parts, fuse_limit == 0 ? 3u : 1u);
        // Packed where fused, fp32 and AVX-512 (LlamaScalar: never).
        const bool packed = fuse_limit != 0 && v[1] == '0' && llama::avx512_loops();
        ASSERT_EQ(s.layers[0].qkv_packed.data != nullptr, packed);
        ASSERT_EQ(s.classifier_packed.data != nullptr, packed);
        // Float rounding only (measured: 3e-6 fp32, 5e-7 q8, relative to the largest logit); the bound for q8
        // leaves room for an activation on a rounding boundary that rounds the other way in float than in double.
        expect_logits_near(m, s, tokens, want, v[1] == '0' ? 2e-5 : 1e-4);
      }
    }
}

// A pool that counts its runs and hands them to PosixPool.
struct CountingPool {
  microattn::PosixPool<4> pool{3};
  microattn::Parallel inner = pool.parallel();
  std::size_t runs = 0;
  static bool run(void* p, microattn::ParallelTask task, void* ctx, std::size_t count) noexcept {
    auto& self = *static_cast<CountingPool*>(p);
    ++self.runs;
    return self.inner.run(self.inner.pool, task, ctx, count);
  }
};

TEST(LlamaForward, WorkersGiveTheSameLogits) {
  for (const char* v : {"v0", "v2"}) {
    SCOPED_TRACE(v);
    const auto file = read_file(std::string("wide-") + v + ".bin");
    Bytes b = bytes_of(file);
    llama::Model m;
    ASSERT_TRUE(llama::load_checkpoint(b.data(), b.size, m).ok());
    const std::vector<int> tokens = test_tokens(m);
    llama::RunState one, three;
    // The matrices in place (limit 0): the fused fp32 ones would be packed, which runs on the calling thread.
    ASSERT_TRUE(llama::init_state(m, tokens.size(), one, 0));
    ASSERT_TRUE(llama::init_state(m, tokens.size(), three, 0));
    CountingPool pool;
    ASSERT_EQ(pool.pool.workers(), 3u);
    three.parallel = microattn::Parallel{&CountingPool::run, &pool, 3};
    for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
      const float* a = llama::forward(m, one, tokens[pos], pos);
      const float* c = llama::forward(m, three, tokens[pos], pos);
      ASSERT_EQ(std::memcmp(a, c, sizeof(float) * static_cast<std::size_t>(m.config.vocab_size)), 0)
          << "position " << pos;
    }
    EXPECT_GT(pool.runs, 0u);  // the projections were cut into items
  }
}

// f rounded to binary16 (to nearest, ties to even), from its definition: 11 significant bits, or multiples of 2^-24
// below 2^-14.
double round_to_half(double f) {
  if (std::abs(f) < std::ldexp(1.0, -14)) return std::nearbyint(std::ldexp(f, 24)) * std::ldexp(1.0, -24);
  int e = 0;
  const double m = std::frexp(f, &e);  // |m| in [0.5, 1)
  return std::ldexp(std::nearbyint(std::ldexp(m, 11)), e - 11);
}

TEST(LlamaForward, F16StorageMatchesFloat64Reference) {
  for (const char* name : k_models) {
    SCOPED_TRACE(name);
    const auto file = read_file(std::string(name) + "-v0.bin");
    Bytes b = bytes_of(file);
    llama::Model m;
    ASSERT_TRUE(llama::load_checkpoint(b.data(), b.size, m).ok());
    ASSERT_TRUE(llama::fits_f16(m));
    RefModel ref = parse_reference(file);
    // Every matrix in f16; the embedding rows stay fp32 (a shared classifier's copy is rounded, its rows not).
    for (auto* layer_set : {&ref.wq, &ref.wk, &ref.wv, &ref.wo, &ref.w1, &ref.w2, &ref.w3})
      for (auto& w : *layer_set)
        for (double& v : w) v = round_to_half(v);
    for (double& v : ref.cls) v = round_to_half(v);
    const std::vector<int> tokens = test_tokens(m);
    const auto want = reference_logits(ref, tokens);
    for (const std::size_t fuse_limit : {llama::default_fuse_limit_bytes, std::size_t{0}}) {
      SCOPED_TRACE("fuse limit " + std::to_string(fuse_limit));
      llama::RunState s;
      ASSERT_TRUE(llama::init_state(m, tokens.size(), s, fuse_limit, llama::Storage::f16));
      ASSERT_EQ(s.classifier.format, microattn::Format::f16);
      expect_logits_near(m, s, tokens, want, 2e-5);  // float rounding only, as for fp32
    }
  }
}

// ---- tokenizer -----------------------------------------------------------------------------------------------

std::vector<unsigned char> tokenizer_file(const std::vector<std::pair<std::string, float>>& tokens, int max_len) {
  std::vector<unsigned char> out(4);
  std::memcpy(out.data(), &max_len, 4);
  for (const auto& t : tokens) {
    unsigned char head[8];
    const std::int32_t len = static_cast<std::int32_t>(t.first.size());
    std::memcpy(head, &t.second, 4);
    std::memcpy(head + 4, &len, 4);
    out.insert(out.end(), head, head + 8);
    out.insert(out.end(), t.first.begin(), t.first.end());
  }
  return out;
}

// <unk> <s> </s>, the 256 byte tokens, then the given pieces.
std::vector<std::pair<std::string, float>> vocabulary(const std::vector<std::pair<std::string, float>>& extra) {
  std::vector<std::pair<std::string, float>> v = {{"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}};
  for (int b = 0; b < 256; ++b) {
    char s[8];
    std::snprintf(s, sizeof s, "<0x%02X>", b);
    v.push_back({s, 0});
  }
  v.insert(v.end(), extra.begin(), extra.end());
  return v;
}

llama::Tokenizer make_tokenizer(const std::vector<std::pair<std::string, float>>& vocab) {
  int max_len = 8;
  for (const auto& t : vocab) max_len = std::max(max_len, static_cast<int>(t.first.size()));
  Bytes b = bytes_of(tokenizer_file(vocab, max_len));
  llama::Tokenizer t;
  const llama::LoadResult r = t.load(b.data(), b.size, static_cast<int>(vocab.size()));
  EXPECT_TRUE(r.ok()) << r.message;
  return t;
}

TEST(LlamaTokenizer, EncodeFollowsRunC) {
  // 259 " ", 260 "a", 261 "b", 262 "ab", 263 " a", 264 "zz" (" ab" below), 265 "é"
  const auto vocab = vocabulary({{" ", -1}, {"a", -2}, {"b", -3}, {"ab", -5}, {" a", -4}, {"zz", -6}, {"é", -7}});
  const llama::Tokenizer t = make_tokenizer(vocab);
  std::vector<int> ids;
  std::string err;
  // " ", "a", "b": " a" (-4) beats "ab" (-5); " a" + "b" is not a token.
  ASSERT_TRUE(t.encode("ab", true, false, ids, err));
  EXPECT_EQ(ids, (std::vector<int>{1, 263, 261}));
  // Empty text: no dummy prefix.
  ASSERT_TRUE(t.encode("", true, true, ids, err));
  EXPECT_EQ(ids, (std::vector<int>{1, 2}));
  // A code point in the vocabulary is one token; one that is not falls back to its bytes + 3.
  ASSERT_TRUE(t.encode("é\xe2\x80\x94", false, true, ids, err));
  EXPECT_EQ(ids, (std::vector<int>{259, 265, 0xe2 + 3, 0x80 + 3, 0x94 + 3, 2}));
  // A stray continuation byte is a code point of its own.
  ASSERT_TRUE(
      t.encode("\x80"
               "a",
               false, false, ids, err));
  EXPECT_EQ(ids, (std::vector<int>{259, 0x80 + 3, 260}));

  // With "ab" scoring best, that pair merges first.
  auto vocab2 = vocab;
  vocab2[262].second = 0;
  const llama::Tokenizer t2 = make_tokenizer(vocab2);
  ASSERT_TRUE(t2.encode("ab", true, false, ids, err));
  EXPECT_EQ(ids, (std::vector<int>{1, 259, 262}));
  // Merges repeat: with " ab" a token, " a" + "b" merges on.
  vocab2 = vocab;
  vocab2[264].first = " ab";
  const llama::Tokenizer t3 = make_tokenizer(vocab2);
  ASSERT_TRUE(t3.encode("ab", true, false, ids, err));
  EXPECT_EQ(ids, (std::vector<int>{1, 264}));

  // Missing " " or byte tokens: an error, not an index out of range.
  const llama::Tokenizer small = make_tokenizer({{"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}, {" ", 0}, {"a", 0}});
  EXPECT_TRUE(small.encode("a", true, false, ids, err));
  EXPECT_FALSE(small.encode("z", true, false, ids, err));
  const llama::Tokenizer no_space = make_tokenizer({{"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}, {"a", 0}});
  EXPECT_FALSE(no_space.encode("a", true, false, ids, err));
}

TEST(LlamaTokenizer, DecodeFollowsRunC) {
  const auto vocab = vocabulary({{" ", -1}, {" ab", -2}, {"<0x4", -3}, {"<0x>", -4}});
  const llama::Tokenizer t = make_tokenizer(vocab);
  EXPECT_EQ(t.decode(1, 260), "ab");  // leading space dropped after BOS
  EXPECT_EQ(t.decode(5, 260), " ab");
  EXPECT_EQ(t.decode(5, 0x41 + 3), "A");  // <0x41>
  EXPECT_EQ(t.decode(5, 3), "");          // <0x00>: nothing printed
  EXPECT_EQ(t.decode(5, 261), "\x04");    // "<0x4": sscanf's one-digit match
  EXPECT_EQ(t.decode(5, 262), "<0x>");
  EXPECT_FALSE(llama::Tokenizer::printable("\x04"));
  EXPECT_FALSE(llama::Tokenizer::printable(""));
  EXPECT_TRUE(llama::Tokenizer::printable("\n"));
  EXPECT_TRUE(llama::Tokenizer::printable("\xc3\xa9"));
}

TEST(LlamaTokenizer, RoundTripsGeneratedVocabulary) {
  const auto file = read_file("s260k-tok.bin");
  Bytes b = bytes_of(file);
  llama::Tokenizer t;
  ASSERT_TRUE(t.load(b.data(), b.size, 512).ok());
  for (const std::string text : {"Once upon a time, there was a little girl.", "h\xc3\xa9llo \xe2\x80\x94 x",
                                 "\x01\x7f tabs\tand\nnewlines", "\xe6\x97\xa5\xe6\x9c\xac", "a"}) {
    std::vector<int> ids;
    std::string err;
    ASSERT_TRUE(t.encode(text, true, false, ids, err)) << err;
    std::string back;
    for (std::size_t i = 1; i < ids.size(); ++i) back += t.decode(ids[i - 1], ids[i]);
    // The dummy prefix's space is dropped after BOS, as sentencepiece does.
    EXPECT_EQ(back, text);
    EXPECT_LT(ids.size(), text.size() + 3);
  }
}

TEST(LlamaTokenizer, RefusesBadFiles) {
  using S = llama::LoadStatus;
  const auto file = read_file("small-tok.bin");
  auto status = [](const std::vector<unsigned char>& v, int vocab) {
    Bytes b = bytes_of(v);
    llama::Tokenizer t;
    const llama::LoadResult r = t.load(b.data(), b.size, vocab);
    if (!r.ok()) {
      EXPECT_EQ(t.vocab_size(), 0);
    }
    return r.status;
  };
  EXPECT_EQ(status(file, 300), S::ok);
  for (std::size_t n = 0; n < file.size(); ++n) {
    const std::vector<unsigned char> cut(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_EQ(status(cut, 300), S::truncated) << n;
  }
  EXPECT_EQ(status(file, 299), S::size_mismatch);
  EXPECT_EQ(status(file, 301), S::truncated);
  EXPECT_EQ(status(file, 0), S::bad_header);
  EXPECT_EQ(status(file, 2), S::bad_header);  // no EOS
  EXPECT_EQ(status(file, INT_MAX), S::truncated);
  for (std::int32_t max_len : {0, -1, INT_MIN}) {
    auto bad = file;
    put_i32(bad, 0, max_len);
    EXPECT_EQ(status(bad, 300), S::bad_header);
  }
  auto bad = file;
  put_i32(bad, 0, 2);  // shorter than the longest token
  EXPECT_EQ(status(bad, 300), S::bad_header);
  for (std::int32_t len : {-1, INT_MIN, INT_MAX, 100}) {
    bad = file;
    put_i32(bad, 8, len);  // token 0's length
    EXPECT_NE(status(bad, 300), S::ok) << len;
  }
}

// run.c's encoding as it is written there, with its quadratic merge loop: every adjacent pair looked up, the one
// whose merged token scores best (above -1e10, the first on a tie) merged, until no pair merges. The reference
// the encoder's merge queue must reproduce token for token.
std::vector<int> reference_encode(const llama::Tokenizer& t, const std::string& text, bool add_bos, bool add_eos) {
  std::vector<int> ids;
  if (add_bos) ids.push_back(llama::Tokenizer::bos);
  const std::string s(text.c_str());  // up to the first byte 0
  if (!s.empty()) ids.push_back(t.lookup(" "));
  for (std::size_t at = 0; at < s.size();) {
    std::size_t len = 1;  // a code point: a byte and up to three continuation bytes after it
    while (len < 4 && at + len < s.size() && (static_cast<unsigned char>(s[at + len]) & 0xC0) == 0x80) ++len;
    const std::string cp = s.substr(at, len);
    const int id = t.lookup(cp);
    if (id >= 0) {
      ids.push_back(id);
    } else {
      for (const char b : cp) ids.push_back(static_cast<unsigned char>(b) + 3);
    }
    at += len;
  }
  for (;;) {
    float best_score = -1e10f;
    int best_id = -1;
    std::size_t best_at = 0;
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      const int id = t.lookup(t.piece(ids[i]) + t.piece(ids[i + 1]));
      if (id >= 0 && t.score(id) > best_score) {
        best_score = t.score(id);
        best_id = id;
        best_at = i;
      }
    }
    if (best_id < 0) break;
    ids[best_at] = best_id;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  if (add_eos) ids.push_back(llama::Tokenizer::eos);
  return ids;
}

void expect_encodes_as_reference(const llama::Tokenizer& t, const std::string& text) {
  for (const bool bos : {true, false})
    for (const bool eos : {false, true}) {
      std::vector<int> ids;
      std::string err;
      ASSERT_TRUE(t.encode(text, bos, eos, ids, err)) << err;
      ASSERT_EQ(ids, reference_encode(t, text, bos, eos)) << "text \"" << text << "\" bos " << bos << " eos " << eos;
    }
}

// Small random vocabularies over a few letters, whose scores come from a handful of values (ties everywhere, -0
// against +0, -1e10 and below that never merge, NaN), with duplicate pieces, merges of byte and BOS pieces, and
// random texts over those letters: the same tokens as the quadratic loop.
TEST(LlamaTokenizer, EncodeMatchesQuadraticMergeOnRandomVocabularies) {
  std::uint32_t state = 2024;
  const auto next = [&](std::uint32_t n) {
    state = state * 1664525u + 1013904223u;
    return (state >> 8) % n;
  };
  const std::string letters[] = {"a", "b", "c", " ", "\xc3\xa9", "z"};  // "z" has no token: bytes + 3
  const float scores[] = {-1.0f, -2.0f, -3.0f, 0.0f, -0.0f, -1e10f, -3e10f, NAN, 5.0f};
  for (int v = 0; v < 60; ++v) {
    std::vector<std::pair<std::string, float>> extra;
    for (int i = 0; i < 5; ++i) extra.push_back({letters[i], scores[next(5)]});
    const int merges = 5 + static_cast<int>(next(40));
    for (int i = 0; i < merges; ++i) {
      std::string piece;
      const std::uint32_t parts = 2 + next(4);
      for (std::uint32_t k = 0; k < parts; ++k) piece += letters[next(5)];
      if (next(8) == 0) piece = letters[next(5)] + "<0x7A>";    // a piece merging a byte token
      if (next(12) == 0) piece = "\n<s>\n" + letters[next(5)];  // and one merging BOS
      if (next(10) == 0 && !extra.empty()) piece = extra[next(static_cast<std::uint32_t>(extra.size()))].first;
      extra.push_back({piece, scores[next(9)]});
    }
    const llama::Tokenizer t = make_tokenizer(vocabulary(extra));
    SCOPED_TRACE("vocabulary " + std::to_string(v));
    for (int k = 0; k < 40; ++k) {
      std::string text;
      const std::uint32_t n = next(k < 10 ? 8 : 200);
      for (std::uint32_t i = 0; i < n; ++i) text += letters[next(6)];
      expect_encodes_as_reference(t, text);
    }
  }
}

// The generated tokenizers and the committed model's: the tests' prompts and random texts of their pieces.
TEST(LlamaTokenizer, EncodeMatchesQuadraticMergeOnCommittedTokenizers) {
  std::vector<std::pair<std::string, int>> files = {{g_dir + "/s260k-tok.bin", 512},
                                                    {g_dir + "/small-tok.bin", 300},
                                                    {g_dir + "/tiny-tok.bin", 301},
                                                    {g_dir + "/mha32-tok.bin", 300}};
  if (!g_models.empty()) files.push_back({g_models + "/tiny-llama-tokenizer.bin", 512});
  std::uint32_t state = 99;
  const auto next = [&](std::uint32_t n) {
    state = state * 1664525u + 1013904223u;
    return (state >> 8) % n;
  };
  for (const auto& [path, vocab_size] : files) {
    SCOPED_TRACE(path);
    Bytes b = bytes_of(read_path(path));
    llama::Tokenizer t;
    ASSERT_TRUE(t.load(b.data(), b.size, vocab_size).ok());
    for (const std::string text :
         {"Once upon a time", "the day", "You will", "h\xc3\xa9llo \xe2\x80\x94 x", "a", "",
          "Once upon a time, there was a little girl. She liked the day and the night.\n\t-- 7"})
      expect_encodes_as_reference(t, text);
    for (int k = 0; k < 12; ++k) {
      std::string text;
      const std::uint32_t n = 50 + next(600);
      while (text.size() < n) {
        const int id = 3 + static_cast<int>(next(static_cast<std::uint32_t>(vocab_size - 3)));
        const std::string& p = t.piece(id);
        text += p.size() == 6 && p.compare(0, 3, "<0x") == 0 ? std::string(1, "ab .\xc3"[next(5)]) : p;
      }
      expect_encodes_as_reference(t, text);
    }
  }
}

// The encoder's work (vocabulary lookups and merge-queue operations, as encode counts them) grows as n log n, not
// n²: 100 000 bytes over {a, b}, every string of up to 4 letters a token, scores tied in groups, most bytes merged.
// A scan of every pair per merge would look up about n² / 3 pairs here.
TEST(LlamaTokenizer, EncodeWorkIsQuasiLinear) {
  std::vector<std::pair<std::string, float>> extra = {{" ", -1.0f}};
  for (int len = 1; len <= 4; ++len)
    for (int bits = 0; bits < (1 << len); ++bits) {
      std::string piece;
      int bs = 0;
      for (int i = 0; i < len; ++i) {
        piece += (bits >> i) & 1 ? 'b' : 'a';
        bs += (bits >> i) & 1;
      }
      extra.push_back({piece, -static_cast<float>(bs)});
    }
  const llama::Tokenizer t = make_tokenizer(vocabulary(extra));
  std::uint32_t state = 7;
  const std::size_t n = 100000;
  std::string text;
  for (std::size_t i = 0; i < n; ++i) {
    state = state * 1664525u + 1013904223u;
    text += (state >> 16) & 1 ? 'b' : 'a';
  }
  std::vector<int> ids;
  std::string err;
  std::size_t work = 0;
  ASSERT_TRUE(t.encode(text, true, false, ids, err, &work)) << err;
  const double bound = 2.0 * static_cast<double>(n) * std::log2(static_cast<double>(n));
  EXPECT_LE(static_cast<double>(work), bound) << "work " << work << " for " << n << " bytes";
  EXPECT_LT(ids.size(), n / 3);  // most bytes merged
  std::string back;
  for (std::size_t i = 1; i < ids.size(); ++i) back += t.decode(ids[i - 1], ids[i]);
  EXPECT_EQ(back, text);
}

// ---- packed weights ------------------------------------------------------------------------------------------

// packed_gemv against float64 sums of the row-major rows, over row counts and column counts below, at and above
// the 16-row tiles and 4-column blocks (and two matrices packed one after the other), x and y misaligned, 16
// canaries on each side of y. LlamaScalar runs it on the plain loop.
TEST(LlamaPacked, GemvMatchesFloat64AcrossTileEdges) {
  std::uint32_t state = 12345;
  auto next = [&] {  // uniform in [-1, 1)
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<std::int32_t>(state >> 8) - (1 << 23)) / static_cast<float>(1 << 23);
  };
  const float canary = -7.25e30f;
  for (const std::size_t rows_a : {1, 3, 4, 5, 15, 16, 17, 31, 32, 33, 64, 172})
    for (const std::size_t cols : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 63, 64, 65, 172})
      for (const std::size_t rows_b : {0, 5}) {
        SCOPED_TRACE(std::to_string(rows_a) + " + " + std::to_string(rows_b) + " rows x " + std::to_string(cols));
        const std::size_t rows = rows_a + rows_b;
        std::vector<float> w(rows * cols), x_buf(cols + 1), y_buf(rows + 32, canary);
        for (float& v : w) v = next();
        for (float& v : x_buf) v = next();
        const float* x = x_buf.data() + 1;
        float* y = y_buf.data() + 15;  // a tile's width of canaries on each side
        const microattn::WeightMatrix parts[2] = {microattn::weights_f32(w.data(), rows_a, cols),
                                                  microattn::weights_f32(w.data() + rows_a * cols, rows_b, cols)};
        llama::aligned_vector<float> packed(llama::packed_floats(rows, cols), canary);
        llama::pack_rows(parts, rows_b > 0 ? 2 : 1, packed.data());
        llama::packed_gemv(llama::PackedMatrix{packed.data(), rows, cols}, x, y);
        for (std::size_t r = 0; r < rows; ++r) {
          double want = 0, size = 0;
          for (std::size_t c = 0; c < cols; ++c) {
            want += static_cast<double>(w[r * cols + c]) * x[c];
            size += std::abs(static_cast<double>(w[r * cols + c]) * x[c]);
          }
          // Any order of float sums: within (cols + 1) units of 2^-24 of the sum of magnitudes.
          EXPECT_LE(std::abs(y[r] - want), static_cast<double>(cols + 1) * std::ldexp(size, -24)) << "row " << r;
        }
        for (std::size_t i = 0; i < y_buf.size(); ++i)
          if (i < 15 || i >= 15 + rows) {
            EXPECT_EQ(y_buf[i], canary) << "canary " << i;
          }
      }
}

// ---- sampler -------------------------------------------------------------------------------------------------

TEST(LlamaSampler, XorshiftStarAsRunC) {
  // First outputs of run.c's random_u32 from state 42, computed by hand from its definition (Python).
  llama::Rng r{42};
  EXPECT_EQ(r.next_u32(), 1456360119u);
  EXPECT_EQ(r.next_u32(), 3359763283u);
  EXPECT_EQ(r.next_u32(), 3393612768u);
  llama::Rng f{42};
  EXPECT_EQ(f.next_f32(), static_cast<float>(1456360119u >> 8) / 16777216.0f);
}

TEST(LlamaSampler, ArgmaxIsTheFirstLargestAcrossVectors) {
  // run.c's rule (strict >, from x[0]): the first of equal maxima, NaN never taken after x[0], −0 equal to +0.
  // Lengths across the 16-lane blocks, values from a few levels so that maxima repeat.
  std::uint32_t state = 12345;
  const auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  const float levels[] = {-1.0f, 0.0f, -0.0f, 2.5f, 2.5f, NAN, -INFINITY, INFINITY, 1e-30f};
  for (int n = 1; n <= 70; ++n)
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<float> x(static_cast<std::size_t>(n));
      for (float& v : x) v = trial % 3 == 0 ? levels[next() % 9] : static_cast<float>(next() % 7) - 3.0f;
      if (trial % 5 == 1) x[static_cast<std::size_t>(next() % n)] = NAN;
      int want = 0;
      for (int i = 1; i < n; ++i)
        if (x[static_cast<std::size_t>(i)] > x[static_cast<std::size_t>(want)]) want = i;
      ASSERT_EQ(llama::argmax(x.data(), n), want) << "n " << n << " trial " << trial;
    }
}

// A temperature so small that logits / temperature overflow to inf (1e-45, the smallest subnormal, and 1e-38
// against logits of 4), or logits that are not finite: argmax, as -t 0, where the softmax's NaNs would pick the
// last index. Plain and nucleus sampling, a vocabulary of 4 and one past the 16-lane blocks.
TEST(LlamaSampler, OverflowingTemperatureIsGreedy) {
  for (const float temperature : {1e-45f, 1e-38f})
    for (const float topp : {0.9f, 1.0f, 0.0f}) {
      SCOPED_TRACE("t " + std::to_string(temperature) + " p " + std::to_string(topp));
      llama::Sampler s(4, temperature, topp, 42);
      for (int i = 0; i < 20; ++i) {
        std::vector<float> l = {0.5f, 4.0f, 4.0f, -1.0f};
        EXPECT_EQ(s.sample(l.data()), 1);
      }
      std::vector<float> wide(37);
      for (std::size_t i = 0; i < wide.size(); ++i) wide[i] = std::sin(static_cast<float>(i)) * 4.0f;
      llama::Sampler w(37, temperature, topp, 5);
      std::vector<float> l = wide;
      EXPECT_EQ(w.sample(l.data()), llama::argmax(wide.data(), 37));
    }
  llama::Sampler s(4, 1.0f, 0.9f, 1);
  std::vector<float> l = {0.5f, INFINITY, 1.0f, NAN};
  EXPECT_EQ(s.sample(l.data()), 1);
  l = {0.5f, 1e30f, 2e30f, 1.0f};  // finite, but / 1e-9 they overflow
  llama::Sampler tiny(4, 1e-9f, 1.0f, 1);
  EXPECT_EQ(tiny.sample(l.data()), 2);
}

TEST(LlamaSampler, RulesAndDeterminism) {
  std::vector<float> logits = {0.5f, 3.0f, 3.0f, -1.0f};
  llama::Sampler greedy(4, 0.0f, 0.9f, 1);
  EXPECT_EQ(greedy.sample(logits.data()), 1);  // first of two equal maxima
  std::vector<int> a, b;
  for (std::uint64_t seed : {7ull, 7ull}) {
    llama::Sampler s(4, 1.0f, 0.9f, seed);
    auto& out = a.empty() ? a : b;
    for (int i = 0; i < 200; ++i) {
      std::vector<float> l = {0.5f, 2.0f, 1.0f, -1.0f};
      out.push_back(s.sample(l.data()));
    }
  }
  EXPECT_EQ(a, b);
  // Top-p 0.5 over probabilities ~ (0.64, 0.24, 0.09, 0.03): only the first.
  llama::Sampler nucleus(4, 1.0f, 0.5f, 3);
  for (int i = 0; i < 100; ++i) {
    std::vector<float> l = {2.0f, 1.0f, 0.0f, -1.0f};
    EXPECT_EQ(nucleus.sample(l.data()), 0);
  }
  // Top-p 0.8: the nucleus ends at the first token whose cumulative probability exceeds 0.8, the second here
  // (0.64 + 0.24), and is sampled in proportion: 0.64 / 0.88 and 0.24 / 0.88.
  const double z = std::exp(2.0) + std::exp(1.0) + 1 + std::exp(-1.0);
  llama::Sampler nucleus2(4, 1.0f, 0.8f, 5);
  int top[4] = {};
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = {2.0f, 1.0f, 0.0f, -1.0f};
    ++top[nucleus2.sample(l.data())];
  }
  const double p0 = std::exp(2.0) / z, p1 = std::exp(1.0) / z;
  EXPECT_NEAR(top[0] / static_cast<double>(n), p0 / (p0 + p1), 0.02);
  EXPECT_NEAR(top[1] / static_cast<double>(n), p1 / (p0 + p1), 0.02);
  EXPECT_EQ(top[2] + top[3], 0);
  // Plain sampling (topp 1): frequencies follow the softmax.
  llama::Sampler plain(4, 1.0f, 1.0f, 11);
  int counts[4] = {};
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = {2.0f, 1.0f, 0.0f, -1.0f};
    ++counts[plain.sample(l.data())];
  }
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(counts[i] / static_cast<double>(n), std::exp(2.0 - i) / z, 0.02) << i;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) g_dir = argv[1];
  if (argc > 2) g_models = argv[2];
  return RUN_ALL_TESTS();
}
