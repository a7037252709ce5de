// Every function-pointer field of every kernel table this build compiles (detail::Kernels and
// detail::LinearKernels), called directly, against a double reference and against the scalar table's function of
// the same field (dav1d's checkasm idea). Each dimension is swept over {1, tile − 1, tile, tile + 1, 2·tile,
// 2·tile + 1} of the tiles that matter to it (the table's vector_floats, the gemm tile from gemm_name, the query
// tile, the key block, the linear tiles from their names), with strides wider than the rows, caller-side
// arrays misaligned by one float and canaries around every output. Where the contract is exact (products and
// sums, the transposes, the division by a power of two) the inputs are small multiples of 1/2 so that every
// order of summation gives the exact result and the comparison is bitwise; elsewhere (exp, softmax) it is the
// tolerance of tolerance.hpp. A failure names the field, the table and the sizes.
//
// MICROATTN_CHECK_BENCH=1 in the environment also times every field per table and size (ns per call; see
// docs/testing.md "Kernel check").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/linear.hpp"
#include "reference.hpp"
#include "test_support.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <chrono>
#define MICROATTN_CHECK_CAN_BENCH 1
#else
#define MICROATTN_CHECK_CAN_BENCH 0  // bare metal: no clock in the test runtime
#endif

namespace ma = microattn;
namespace md = microattn::detail;
using namespace testing_support;

namespace {

constexpr std::size_t br = ma::attention_block_q;
constexpr std::size_t bc = ma::attention_block_kv;

// A new member of either table changes its size: this fails to compile until the field has a check below (and
// the mirror its member).
struct KernelsFields {
  const char* a;
  std::size_t b;
  const char* c;
  bool d;
  void* f[9];
  std::size_t g;
  void* h[3];
};
static_assert(sizeof(md::Kernels) == sizeof(KernelsFields),
              "detail::Kernels changed: add its field to test_kernels.cpp");
struct LinearKernelsFields {
  const char* n[4];
  void* f[3];
  std::size_t r;
  void* g[2];
};
static_assert(sizeof(md::LinearKernels) == sizeof(LinearKernelsFields),
              "detail::LinearKernels changed: add its field to test_kernels.cpp");

// ---- sizes ---------------------------------------------------------------------------------------------------
// {1, t − 1, t, t + 1, 2t, 2t + 1} for each tile t, the extras, nothing above cap, sorted, no repeats.
std::vector<std::size_t> around(std::initializer_list<std::size_t> tiles, std::initializer_list<std::size_t> extra = {},
                                std::size_t cap = std::numeric_limits<std::size_t>::max()) {
  std::vector<std::size_t> s{1};
  for (std::size_t t : tiles)
    for (std::size_t v : {t - 1, t, t + 1, 2 * t, 2 * t + 1}) s.push_back(v);
  for (std::size_t v : extra) s.push_back(v);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  s.erase(std::remove_if(s.begin(), s.end(), [cap](std::size_t v) { return v == 0 || v > cap; }), s.end());
  return s;
}

// The first "<a>x<b>" of a kernel name ("gemm_8x32_avx512" → 8, 32); 1 × 1 when it has none.
void tile_of(const char* name, std::size_t& a, std::size_t& b) {
  a = b = 1;
  const std::string s = name;
  for (std::size_t i = 0; i + 2 < s.size(); ++i)
    if (s[i] == '_' && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      unsigned x = 0, y = 0;
      if (std::sscanf(s.c_str() + i + 1, "%ux%u", &x, &y) == 2) {
        a = x;
        b = y;
        return;
      }
    }
}

std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }

// ---- inputs --------------------------------------------------------------------------------------------------
// Multiples of 1/2 in [−2, 2]: products are multiples of 1/4 up to 4, so every sum the sweeps form (a few
// thousand terms at most) is exact in float whatever the order or FMA.
struct Halves {
  std::mt19937 rng;
  explicit Halves(std::uint32_t seed) : rng(seed) {}
  float operator()() { return static_cast<float>(static_cast<int>(rng() % 9) - 4) * 0.5f; }
};

// ---- 64-byte aligned tile in the queries-in-lanes layout -------------------------------------------------------
// rows × br floats (as the workspace holds them), canaries before and after and in the lanes from `width` on:
// the primitives may compute lanes up to nq rounded up to a vector, never further.
class Tile {
 public:
  Tile(std::size_t rows, std::size_t width)
      : rows_(rows), width_(width), buf_(guard + rows * br + guard + 16, canary()) {
    const auto addr = reinterpret_cast<std::uintptr_t>(buf_.data() + guard);
    offset_ = guard + (64 - addr % 64) % 64 / sizeof(float);
  }
  float* data() { return buf_.data() + offset_; }
  const float* data() const { return buf_.data() + offset_; }
  float& at(std::size_t r, std::size_t i) { return data()[r * br + i]; }
  float at(std::size_t r, std::size_t i) const { return data()[r * br + i]; }
  void fill_lanes(std::size_t lo, std::size_t hi, float v) {
    for (std::size_t r = 0; r < rows_; ++r)
      for (std::size_t i = lo; i < hi; ++i) at(r, i) = v;
  }
  ::testing::AssertionResult canaries_intact() const {
    for (std::size_t i = 0; i < buf_.size(); ++i) {
      const std::ptrdiff_t off = static_cast<std::ptrdiff_t>(i) - static_cast<std::ptrdiff_t>(offset_);
      const bool inside =
          off >= 0 && static_cast<std::size_t>(off) < rows_ * br && static_cast<std::size_t>(off) % br < width_;
      if (!inside && !is_canary(buf_[i]))
        return ::testing::AssertionFailure()
               << "write outside the tile's lanes at offset " << off << " (row "
               << off / static_cast<std::ptrdiff_t>(br) << ", lane "
               << (off % static_cast<std::ptrdiff_t>(br) + static_cast<std::ptrdiff_t>(br)) %
                      static_cast<std::ptrdiff_t>(br)
               << ", value " << buf_[i] << ")";
    }
    return ::testing::AssertionSuccess();
  }

 private:
  static constexpr std::size_t guard = 40;
  std::size_t rows_, width_;
  std::vector<float> buf_;
  std::size_t offset_ = 0;
};

// ---- comparison and reporting --------------------------------------------------------------------------------
// Collects the mismatches of one field over its whole sweep: the first few with field, table, sizes and element,
// then the count.
class Check {
 public:
  Check(const char* field, const char* table) : field_(field), table_(table) {}
  ~Check() {
    if (bad_ > 0)
      ADD_FAILURE() << field_ << " of table " << table_ << ": " << bad_ << " mismatch(es) in " << bad_sizes_
                    << " size(s)";
  }
  void at(std::string sizes) {
    sizes_ = std::move(sizes);
    counted_ = false;
  }
  const std::string& sizes() const { return sizes_; }
  // allowed < 0: exact (bitwise, NaN matches NaN).
  void value(const char* what, std::size_t r, std::size_t c, double got, double want, double allowed) {
    const bool ok = std::isnan(want)   ? std::isnan(got)
                    : allowed < 0.0    ? got == want
                    : std::isinf(want) ? got == want
                                       : std::fabs(got - want) <= allowed;
    if (ok) return;
    note() << what << "(" << r << "," << c << ") = " << got << ", want " << want
           << (allowed < 0.0 ? " exactly" : " ± " + std::to_string(allowed));
  }
  void canaries(const char* what, const ::testing::AssertionResult& res) {
    if (!res) note() << what << ": " << res.message();
  }
  void flag(const std::string& what) { note() << what; }

 private:
  struct Line {
    Check* c;
    ::testing::Message m;
    ~Line() {
      if (c->messages_++ < 12) ADD_FAILURE() << c->field_ << " [" << c->table_ << "] " << c->sizes_ << ": " << m;
    }
    template <class T>
    Line& operator<<(const T& v) {
      m << v;
      return *this;
    }
  };
  Line note() {
    ++bad_;
    if (!counted_) ++bad_sizes_;
    counted_ = true;
    return Line{this, {}};
  }
  const char *field_, *table_;
  std::string sizes_;
  std::size_t bad_ = 0, bad_sizes_ = 0, messages_ = 0;
  bool counted_ = false;
};

std::string dims(std::initializer_list<std::pair<const char*, std::size_t>> d) {
  std::string s;
  for (const auto& p : d) s += std::string(s.empty() ? "" : " ") + p.first + "=" + std::to_string(p.second);
  return s;
}

// ---- bench mode ----------------------------------------------------------------------------------------------
bool bench_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("MICROATTN_CHECK_BENCH");
    return e != nullptr && e[0] != '\0' && e[0] != '0';
  }();
  return on && MICROATTN_CHECK_CAN_BENCH;
}

// ns per call of fn, repeated until 1 ms has passed (the best of three such runs), printed as
// "bench <field> <table> <sizes> <ns>".
template <class Fn>
void bench(const char* field, const char* table, const std::string& sizes, Fn&& fn) {
#if MICROATTN_CHECK_CAN_BENCH
  if (!bench_enabled()) return;
  using clock = std::chrono::steady_clock;
  double best = 0.0;
  for (int run = 0; run < 3; ++run) {
    std::size_t n = 0;
    const auto t0 = clock::now();
    auto t1 = t0;
    do {
      for (int i = 0; i < 16; ++i) fn();
      n += 16;
      t1 = clock::now();
    } while (t1 - t0 < std::chrono::milliseconds(1));
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
    best = run == 0 || ns < best ? ns : best;
  }
  std::printf("bench %-16s %-12s %-28s %10.1f ns\n", field, table, sizes.c_str(), best);
#else
  (void)field, (void)table, (void)sizes, (void)fn;
#endif
}

// ================================================================================================================
// detail::Kernels
// ================================================================================================================
using Table = const md::Kernels*;
const md::Kernels& scalar() { return md::scalar_kernels(); }

void check_gemm(const md::Kernels& t) {
  Check chk("gemm", t.arch);
  std::size_t mr, nr;
  tile_of(t.gemm_name, mr, nr);
  const std::size_t vf = t.vector_floats;
#if MICROATTN_TEST_EMULATED
  const auto ks = around({vf}, {md::matmul_block_k + 1});
#else
  const auto ks = around({vf}, {md::matmul_block_k, md::matmul_block_k + 1});
#endif
  std::uint32_t seed = 1;
  // m = 8 and n = 64 in every table's sweep: bench lines of the same size compare tables
  for (bool tb : {false, true})
    for (std::size_t m : around({mr}, {8}))
      for (std::size_t n : around({nr, vf}, {64}))
        for (std::size_t k : ks) {
          chk.at(dims({{"m", m}, {"n", n}, {"k", k}, {"transpose_b", tb}}));
          // a one-row operand's stride is its width (kernels/attention.hpp); every other row is padded
          Guarded a(m, k, m == 1 ? k : k + 3, true);
          Guarded b(tb ? n : k, tb ? k : n, (tb ? n : k) == 1 ? 0 : (tb ? k : n) + 2, (seed & 1) != 0);
          Guarded c(m, n, m == 1 ? n : n + 5, true), cs(m, n, m == 1 ? n : n + 5, true);
          Halves h(seed++);
          a.fill(h);
          b.fill(h);
          c.fill_value(777.0f);
          const md::GemmArgs args{a.data(), a.stride(), b.data(), b.stride(), tb, c.data(), c.stride(), m, n, k};
          t.gemm(args);
          std::vector<double> want, mag;
          ref::matmul(a.data(), a.stride(), b.data(), b.stride(), tb, m, n, k, want, mag);
          if (&t != &scalar()) {
            md::GemmArgs s = args;
            s.c = cs.data();
            scalar().gemm(s);
          }
          for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
              chk.value("c", i, j, c.at(i, j), want[i * n + j], -1.0);
              if (&t != &scalar()) chk.value("c vs scalar", i, j, c.at(i, j), cs.at(i, j), -1.0);
            }
          chk.canaries("c", c.canaries_intact());
          bench("gemm", t.arch, chk.sizes(), [&] { t.gemm(args); });
        }
}

void check_softmax_row(const md::Kernels& t) {
  Check chk("softmax_row", t.arch);
  const std::size_t vf = t.vector_floats;
  std::uint32_t seed = 100;
  for (std::size_t n : around({vf, 4 * vf}, {100})) {
    chk.at(dims({{"n", n}}));
    Guarded x(1, n, 0, true), xs(1, n, 0, true);
    Uniform u(seed++, -8.0f, 8.0f);
    x.fill(u);
    if (n > 3) x.at(0, n / 2) = -inf;  // a hidden element is exactly 0
    for (std::size_t j = 0; j < n; ++j) xs.at(0, j) = x.at(0, j);
    std::vector<double> want;
    ref::softmax_row(x.data(), n, want);
    const Tolerance tol = softmax_tolerance(n, 16.0);
    t.softmax_row(x.data(), n);
    if (&t != &scalar()) scalar().softmax_row(xs.data(), n);
    for (std::size_t j = 0; j < n; ++j) {
      chk.value("y", 0, j, x.at(0, j), want[j], tol.rel * std::fabs(want[j]) + tol.abs);
      if (&t != &scalar()) chk.value("y vs scalar", 0, j, x.at(0, j), xs.at(0, j), 2.0 * tol.rel * want[j] + tol.abs);
    }
    chk.canaries("x", x.canaries_intact());
    bench("softmax_row", t.arch, chk.sizes(), [&] { t.softmax_row(xs.data(), n); });
  }
}

// exp and exp2_nonpositive: y = f(x), out of place (misaligned) and in place.
template <class Ref>
void check_elementwise(const char* field, const md::Kernels& t,
                       void (*md::Kernels::*fn)(const float*, float*, std::size_t) noexcept, float lo, float hi,
                       double rel, Ref&& reference) {
  Check chk(field, t.arch);
  const std::size_t vf = t.vector_floats;
  std::uint32_t seed = 200;
  for (bool in_place : {false, true})
    for (std::size_t n : around({vf, 4 * vf}, {100})) {
      chk.at(dims({{"n", n}, {"in_place", in_place}}));
      Guarded x(1, n, 0, true), y(1, n, 0, false), ys(1, n);
      Uniform u(seed++, lo, hi);
      x.fill(u);
      y.fill_value(777.0f);
      std::vector<float> x0(x.data(), x.data() + n);
      float* out = in_place ? x.data() : y.data();
      (t.*fn)(x.data(), out, n);
      if (&t != &scalar()) (scalar().*fn)(x0.data(), ys.data(), n);
      for (std::size_t j = 0; j < n; ++j) {
        const double want = reference(x0[j]);
        const double allowed = rel * std::fabs(want) + 0x1p-126;  // tables that flush subnormal results give 0
        chk.value("y", 0, j, out[j], want, allowed);
        if (&t != &scalar()) chk.value("y vs scalar", 0, j, out[j], ys.at(0, j), 2.0 * allowed);
      }
      chk.canaries("x", x.canaries_intact());
      chk.canaries("y", y.canaries_intact());
      if (!in_place) bench(field, t.arch, chk.sizes(), [&] { (t.*fn)(x0.data(), y.data(), n); });
    }
}

// Query counts of a tile: around the vector, up to the whole tile.
std::vector<std::size_t> tile_queries(std::size_t vf) { return around({vf}, {br - 1, br}, br); }

void check_attn_pack_q(const md::Kernels& t) {
  Check chk("attn_pack_q", t.arch);
  const std::size_t vf = t.vector_floats;
  std::uint32_t seed = 300;
  for (std::size_t bq : tile_queries(vf))
    for (std::size_t d_k : around({vf}, {64, 65})) {
      chk.at(dims({{"bq", bq}, {"d_k", d_k}}));
      const std::size_t width = round_up(bq, vf);
      Guarded q(bq, d_k, d_k + 3, true);
      Halves h(seed++);
      q.fill(h);
      Tile qt(d_k, width), qs(d_k, width);
      qt.fill_lanes(0, width, 777.0f);
      t.attn_pack_q(q.data(), q.stride(), bq, d_k, 0.5f, qt.data());
      if (&t != &scalar()) scalar().attn_pack_q(q.data(), q.stride(), bq, d_k, 0.5f, qs.data());
      for (std::size_t p = 0; p < d_k; ++p)
        for (std::size_t i = 0; i < width; ++i) {
          chk.value("qt", p, i, qt.at(p, i), i < bq ? 0.5 * q.at(i, p) : 0.0, -1.0);
          if (&t != &scalar() && i < bq) chk.value("qt vs scalar", p, i, qt.at(p, i), qs.at(p, i), -1.0);
        }
      chk.canaries("qt", qt.canaries_intact());
      bench("attn_pack_q", t.arch, chk.sizes(), [&] { t.attn_pack_q(q.data(), q.stride(), bq, d_k, 0.5f, qt.data()); });
    }
}

void check_attn_scores(const md::Kernels& t) {
  Check chk("attn_scores", t.arch);
  const std::size_t vf = t.vector_floats;
  std::uint32_t seed = 400;
  for (std::size_t nq : tile_queries(vf))
    for (std::size_t d_k : around({vf}, {64}))
      for (std::size_t bk : around({vf}, {bc - 1, bc}, bc)) {
        chk.at(dims({{"nq", nq}, {"d_k", d_k}, {"bk", bk}}));
        const std::size_t width = round_up(nq, vf);
        Tile qt(d_k, width), s(bk, width), ss(bk, width);
        Halves h(seed++);
        for (std::size_t p = 0; p < d_k; ++p)
          for (std::size_t i = 0; i < width; ++i) qt.at(p, i) = i < nq ? h() : 0.0f;  // the driver zero-fills
        Guarded k(bk, d_k, d_k + 1, true);
        k.fill(h);
        s.fill_lanes(0, width, 777.0f);
        t.attn_scores(qt.data(), d_k, k.data(), k.stride(), bk, s.data(), nq);
        if (&t != &scalar()) scalar().attn_scores(qt.data(), d_k, k.data(), k.stride(), bk, ss.data(), nq);
        for (std::size_t j = 0; j < bk; ++j)
          for (std::size_t i = 0; i < nq; ++i) {
            double want = 0.0;
            for (std::size_t p = 0; p < d_k; ++p) want += static_cast<double>(qt.at(p, i)) * k.at(j, p);
            chk.value("s", j, i, s.at(j, i), want, -1.0);
            if (&t != &scalar()) chk.value("s vs scalar", j, i, s.at(j, i), ss.at(j, i), -1.0);
          }
        chk.canaries("s", s.canaries_intact());
        bench("attn_scores", t.arch, chk.sizes(),
              [&] { t.attn_scores(qt.data(), d_k, k.data(), k.stride(), bk, s.data(), nq); });
      }
}

// The online-softmax step (attn_softmax's and rows_softmax's rule) in double for one row or lane: returns p_j,
// updates m, l and gives alpha.
struct OnlineRef {
  double m = -HUGE_VAL, l = 0.0, alpha = 0.0;
  std::vector<double> p;
  void step(const std::vector<float>& s) {
    double mb = m;
    for (float x : s) mb = x > mb ? x : mb;  // (not std::fmax: GCC 12 for AArch64 crashes vectorising it)
    const double m_use = mb == -HUGE_VAL ? 0.0 : mb;
    alpha = std::exp2(m - m_use);
    p.assign(s.size(), 0.0);
    double sum = 0.0;
    for (std::size_t j = 0; j < s.size(); ++j) sum += p[j] = std::exp2(static_cast<double>(s[j]) - m_use);
    l = l * alpha + sum;
    m = mb;
  }
};
constexpr double p_rel = 16.0 * unit_roundoff;
double l_rel(std::size_t bk) { return (static_cast<double>(bk) + 16.0) * 4.0 * unit_roundoff; }

// Scores of block `block` for row/lane r: uniform in [−20, 5], some hidden keys, rows hidden in the first block
// or in both, and a larger maximum in the second block (the first block's sum rescales).
void fill_scores(std::vector<float>& s, std::size_t r, int block, Uniform& u) {
  const std::size_t bk = s.size();
  for (float& x : s) x = u();
  if (r % 4 == 1) s[(r + static_cast<std::size_t>(block)) % bk] = -inf;
  if ((r % 7 == 5 && block == 0) || r % 7 == 6) std::fill(s.begin(), s.end(), -inf);
  if (r % 3 == 2 && block == 1) s[bk / 2] = 9.0f;
}

void check_attn_softmax(const md::Kernels& t) {
  Check chk("attn_softmax", t.arch);
  const std::size_t vf = t.vector_floats;
  std::uint32_t seed = 500;
  for (std::size_t nq : tile_queries(vf))
    for (std::size_t bk : around({vf, 4}, {bc - 1, bc}, bc)) {
      chk.at(dims({{"nq", nq}, {"bk", bk}}));
      const std::size_t width = round_up(nq, vf);
      Tile m(1, width), l(1, width), alpha(1, width), ms(1, width), ls(1, width), as(1, width);
      for (Tile* v : {&m, &ms}) v->fill_lanes(0, width, -inf);
      for (Tile* v : {&l, &ls, &alpha, &as}) v->fill_lanes(0, width, 0.0f);
      std::vector<OnlineRef> want(nq);
      Uniform u(seed++, -20.0f, 5.0f);
      for (int block = 0; block < 2; ++block) {
        Tile s(bk, width), ss(bk, width);
        s.fill_lanes(0, width, 0.0f);  // idle lanes hold the scores of zero queries
        std::vector<float> row(bk);
        for (std::size_t i = 0; i < nq; ++i) {
          fill_scores(row, i, block, u);
          for (std::size_t j = 0; j < bk; ++j) s.at(j, i) = row[j];
          want[i].step(row);
        }
        for (std::size_t j = 0; j < bk; ++j)
          for (std::size_t i = 0; i < width; ++i) ss.at(j, i) = s.at(j, i);
        t.attn_softmax(s.data(), bk, m.data(), l.data(), alpha.data(), nq);
        if (&t != &scalar()) scalar().attn_softmax(ss.data(), bk, ms.data(), ls.data(), as.data(), nq);
        for (std::size_t i = 0; i < nq; ++i) {
          const OnlineRef& w = want[i];
          for (std::size_t j = 0; j < bk; ++j) {
            chk.value("p", j, i, s.at(j, i), w.p[j], p_rel * w.p[j] + 1e-37);
            if (&t != &scalar()) chk.value("p vs scalar", j, i, s.at(j, i), ss.at(j, i), 2 * p_rel * w.p[j] + 1e-37);
          }
          chk.value("m", block, i, m.at(0, i), w.m, -1.0);
          chk.value("alpha", block, i, alpha.at(0, i), w.alpha, p_rel * w.alpha + 1e-37);
          chk.value("l", block, i, l.at(0, i), w.l, l_rel(bk) * w.l + 1e-37);
          if (&t != &scalar()) chk.value("l vs scalar", block, i, l.at(0, i), ls.at(0, i), 2 * l_rel(bk) * w.l + 1e-37);
        }
        chk.canaries("s", s.canaries_intact());
        for (const Tile* v : {&m, &l, &alpha}) chk.canaries("m, l, alpha", v->canaries_intact());
        if (block == 1)
          bench("attn_softmax", t.arch, chk.sizes(),
                [&] { t.attn_softmax(ss.data(), bk, ms.data(), ls.data(), as.data(), nq); });
      }
    }
}

void check_attn_pv(const md::Kernels& t) {
  Check chk("attn_pv", t.arch);
  const std::size_t vf = t.vector_floats;
  std::size_t mr, nr;
  tile_of(t.gemm_name, mr, nr);
  std::uint32_t seed = 600;
  for (std::size_t nq : tile_queries(vf))
    for (std::size_t bk : around({vf}, {bc}, bc))
      for (std::size_t d_v : around({mr, vf}, {64})) {
        chk.at(dims({{"nq", nq}, {"bk", bk}, {"d_v", d_v}}));
        const std::size_t width = round_up(nq, vf);
        Tile p(bk, width), alpha(1, width), ot(d_v, width), os(d_v, width);
        Halves h(seed++);
        for (std::size_t j = 0; j < bk; ++j)
          for (std::size_t i = 0; i < width; ++i) p.at(j, i) = i < nq ? h() : 0.0f;
        for (std::size_t i = 0; i < width; ++i) alpha.at(0, i) = i < nq ? 0.25f * static_cast<float>(i % 5) : 1.0f;
        for (std::size_t c = 0; c < d_v; ++c)
          for (std::size_t i = 0; i < width; ++i) os.at(c, i) = ot.at(c, i) = i < nq ? h() : 0.0f;
        Guarded v(bk, d_v, d_v + 2, true);
        v.fill(h);
        Tile before = ot;
        t.attn_pv(p.data(), bk, v.data(), v.stride(), d_v, alpha.data(), ot.data(), nq);
        if (&t != &scalar()) scalar().attn_pv(p.data(), bk, v.data(), v.stride(), d_v, alpha.data(), os.data(), nq);
        for (std::size_t c = 0; c < d_v; ++c)
          for (std::size_t i = 0; i < nq; ++i) {
            double want = static_cast<double>(before.at(c, i)) * alpha.at(0, i);
            for (std::size_t j = 0; j < bk; ++j) want += static_cast<double>(p.at(j, i)) * v.at(j, c);
            chk.value("ot", c, i, ot.at(c, i), want, -1.0);
            if (&t != &scalar()) chk.value("ot vs scalar", c, i, ot.at(c, i), os.at(c, i), -1.0);
          }
        chk.canaries("ot", ot.canaries_intact());
        bench("attn_pv", t.arch, chk.sizes(),
              [&] { t.attn_pv(p.data(), bk, v.data(), v.stride(), d_v, alpha.data(), os.data(), nq); });
      }
}

void check_attn_store_out(const md::Kernels& t) {
  Check chk("attn_store_out", t.arch);
  const std::size_t vf = t.vector_floats;
  std::uint32_t seed = 700;
  for (std::size_t bq : tile_queries(vf))
    for (std::size_t d_v : around({vf}, {64, 65})) {
      chk.at(dims({{"bq", bq}, {"d_v", d_v}}));
      const std::size_t width = round_up(bq, vf);
      Tile ot(d_v, width), l(1, width);
      Halves h(seed++);
      for (std::size_t c = 0; c < d_v; ++c)
        for (std::size_t i = 0; i < width; ++i) ot.at(c, i) = h();
      const float sums[] = {1.0f, 0.0f, 2.0f, 0.5f, 4.0f};  // powers of two: the division is exact; 0: no key
      for (std::size_t i = 0; i < width; ++i) l.at(0, i) = i < bq ? sums[i % 5] : 1.0f;
      Guarded out(bq, d_v, d_v + 3, true), os(bq, d_v, d_v + 3, true);
      out.fill_value(777.0f);
      t.attn_store_out(ot.data(), l.data(), bq, d_v, out.data(), out.stride());
      if (&t != &scalar()) scalar().attn_store_out(ot.data(), l.data(), bq, d_v, os.data(), os.stride());
      for (std::size_t i = 0; i < bq; ++i)
        for (std::size_t c = 0; c < d_v; ++c) {
          const double li = l.at(0, i);
          chk.value("out", i, c, out.at(i, c), li == 0.0 ? 0.0 : ot.at(c, i) / li, -1.0);
          if (&t != &scalar()) chk.value("out vs scalar", i, c, out.at(i, c), os.at(i, c), -1.0);
        }
      chk.canaries("out", out.canaries_intact());
      bench("attn_store_out", t.arch, chk.sizes(),
            [&] { t.attn_store_out(ot.data(), l.data(), bq, d_v, os.data(), os.stride()); });
    }
}

std::vector<std::size_t> row_counts() { return {1, 2, 3, 4, 5, 7, 8, 9}; }

void check_rows_dot(const md::Kernels& t) {
  Check chk("rows_dot", t.arch);
  const std::size_t vf = t.vector_floats;
  std::uint32_t seed = 800;
#if MICROATTN_TEST_EMULATED
  const auto ds = around({vf}, {8 * vf, 16 * vf + 1});
#else
  const auto ds = around({vf, 4 * vf}, {8 * vf, 8 * vf + 1, 16 * vf, 16 * vf + 1, 257});
#endif
  for (std::size_t nr : row_counts())
    for (std::size_t d : ds)
      for (std::size_t bk : around({vf}, {64, 65})) {
        chk.at(dims({{"nr", nr}, {"d", d}, {"bk", bk}}));
        Guarded q(nr, d, d + 3, true), k(bk, d, d + 1, (seed & 1) != 0);
        Guarded s(nr, bk, bk + 5, true), ss(nr, bk, bk + 5, true);
        Halves h(seed++);
        q.fill(h);
        k.fill(h);
        s.fill_value(777.0f);
        t.rows_dot(q.data(), q.stride(), nr, d, k.data(), k.stride(), bk, s.data(), s.stride());
        if (&t != &scalar())
          scalar().rows_dot(q.data(), q.stride(), nr, d, k.data(), k.stride(), bk, ss.data(), ss.stride());
        std::vector<double> want, mag;
        ref::matmul(q.data(), q.stride(), k.data(), k.stride(), true, nr, bk, d, want, mag);
        for (std::size_t r = 0; r < nr; ++r)
          for (std::size_t j = 0; j < bk; ++j) {
            chk.value("s", r, j, s.at(r, j), want[r * bk + j], -1.0);
            if (&t != &scalar()) chk.value("s vs scalar", r, j, s.at(r, j), ss.at(r, j), -1.0);
          }
        chk.canaries("s", s.canaries_intact());
        bench("rows_dot", t.arch, chk.sizes(),
              [&] { t.rows_dot(q.data(), q.stride(), nr, d, k.data(), k.stride(), bk, s.data(), s.stride()); });
      }
}

void check_rows_softmax(const md::Kernels& t) {
  Check chk("rows_softmax", t.arch);
  const std::size_t vf = t.vector_floats;
  std::uint32_t seed = 900;
  for (std::size_t nr : around({vf}, {9, 17}))
    for (std::size_t bk : around({vf, 4 * vf}, {64, 100})) {
      chk.at(dims({{"nr", nr}, {"bk", bk}}));
      Guarded m(1, nr, 0, true), l(1, nr, 0, true), alpha(1, nr, 0, true);
      std::vector<float> ms(nr, -inf), ls(nr, 0.0f), as(nr, 0.0f);
      m.fill_value(-inf);
      l.fill_value(0.0f);
      alpha.fill_value(std::numeric_limits<float>::quiet_NaN());
      std::vector<OnlineRef> want(nr);
      Uniform u(seed++, -20.0f, 5.0f);
      for (int block = 0; block < 2; ++block) {
        Guarded s(nr, bk, bk + 3, block == 1), ss(nr, bk, bk + 3, block == 1);
        std::vector<float> row(bk);
        for (std::size_t r = 0; r < nr; ++r) {
          fill_scores(row, r, block, u);
          for (std::size_t j = 0; j < bk; ++j) ss.at(r, j) = s.at(r, j) = row[j];
          want[r].step(row);
        }
        t.rows_softmax(s.data(), s.stride(), nr, bk, m.data(), l.data(), alpha.data());
        if (&t != &scalar()) scalar().rows_softmax(ss.data(), ss.stride(), nr, bk, ms.data(), ls.data(), as.data());
        for (std::size_t r = 0; r < nr; ++r) {
          const OnlineRef& w = want[r];
          for (std::size_t j = 0; j < bk; ++j) {
            chk.value("p", r, j, s.at(r, j), w.p[j], p_rel * w.p[j] + 1e-37);
            if (&t != &scalar()) chk.value("p vs scalar", r, j, s.at(r, j), ss.at(r, j), 2 * p_rel * w.p[j] + 1e-37);
          }
          chk.value("m", block, r, m.at(0, r), w.m, -1.0);
          chk.value("alpha", block, r, alpha.at(0, r), w.alpha, p_rel * w.alpha + 1e-37);
          chk.value("l", block, r, l.at(0, r), w.l, l_rel(bk) * w.l + 1e-37);
          if (&t != &scalar()) chk.value("l vs scalar", block, r, l.at(0, r), ls[r], 2 * l_rel(bk) * w.l + 1e-37);
        }
        chk.canaries("s", s.canaries_intact());
        for (const Guarded* v : {&m, &l, &alpha}) chk.canaries("m, l, alpha", v->canaries_intact());
        if (block == 1)
          bench("rows_softmax", t.arch, chk.sizes(),
                [&] { t.rows_softmax(ss.data(), ss.stride(), nr, bk, ms.data(), ls.data(), as.data()); });
      }
    }
}

void check_rows_axpy(const md::Kernels& t) {
  Check chk("rows_axpy", t.arch);
  const std::size_t vf = t.vector_floats;
  std::uint32_t seed = 1000;
#if MICROATTN_TEST_EMULATED
  const auto ws = around({vf}, {8 * vf + 1, 16 * vf + 3});
#else
  const auto ws = around({vf, 4 * vf}, {8 * vf, 8 * vf + 1, 16 * vf + 3, 64});
#endif
  for (bool with_alpha : {false, true})
    for (std::size_t nr : row_counts())
      for (std::size_t bk : around({vf, 4}, {17}))
        for (std::size_t d_v : ws) {
          chk.at(dims({{"nr", nr}, {"bk", bk}, {"d_v", d_v}, {"alpha", with_alpha}}));
          Guarded p(nr, bk, bk + 1, true), v(bk, d_v, d_v + 2, (seed & 1) != 0);
          Guarded o(nr, d_v, d_v + 5, true), os(nr, d_v, d_v + 5, true), alpha(1, nr, 0, true);
          Halves h(seed++);
          p.fill(h);
          v.fill(h);
          for (std::size_t r = 0; r < nr; ++r) alpha.at(0, r) = 0.25f * static_cast<float>(r % 5);
          if (with_alpha) {
            o.fill(h);
          } else {
            o.fill_value(std::numeric_limits<float>::quiet_NaN());  // stale: must not be read
          }
          for (std::size_t r = 0; r < nr; ++r)
            for (std::size_t c = 0; c < d_v; ++c) os.at(r, c) = o.at(r, c);
          const Guarded before = o;
          const float* a = with_alpha ? alpha.data() : nullptr;
          t.rows_axpy(p.data(), p.stride(), nr, bk, v.data(), v.stride(), d_v, a, o.data(), o.stride());
          if (&t != &scalar())
            scalar().rows_axpy(p.data(), p.stride(), nr, bk, v.data(), v.stride(), d_v, a, os.data(), os.stride());
          for (std::size_t r = 0; r < nr; ++r)
            for (std::size_t c = 0; c < d_v; ++c) {
              double want = with_alpha ? static_cast<double>(before.at(r, c)) * alpha.at(0, r) : 0.0;
              for (std::size_t j = 0; j < bk; ++j) want += static_cast<double>(p.at(r, j)) * v.at(j, c);
              chk.value("o", r, c, o.at(r, c), want, -1.0);
              if (&t != &scalar()) chk.value("o vs scalar", r, c, o.at(r, c), os.at(r, c), -1.0);
            }
          chk.canaries("o", o.canaries_intact());
          bench("rows_axpy", t.arch, chk.sizes(), [&] {
            t.rows_axpy(p.data(), p.stride(), nr, bk, v.data(), v.stride(), d_v, a, os.data(), os.stride());
          });
        }
}

void check_few_query_max(const md::Kernels& t) {
  Check chk("few_query_max", t.arch);
  chk.at("");
  // The few-query path handles up to attention_block_q rows per pass (attention.cpp); a threshold above it would
  // send calls there that the tile path should take.
  if (t.few_query_max < 1 || t.few_query_max > br) chk.flag("few_query_max " + std::to_string(t.few_query_max));
  if (t.vector_floats < 1 || br % t.vector_floats != 0) chk.flag("vector_floats does not divide the query tile");
}

struct KernelField {
  const char* name;
  void (*check)(const md::Kernels&);
};
const KernelField kernel_fields[] = {
    {"gemm", check_gemm},
    {"softmax_row", check_softmax_row},
    {"exp",
     [](const md::Kernels& t) {
       check_elementwise("exp", t, &md::Kernels::exp, -87.0f, 88.0f, 2.0 * (ma::exp_max_ulp + 0.5) * unit_roundoff,
                         [](float x) { return ref::exp(x); });
     }},
    {"attn_scores", check_attn_scores},
    {"attn_softmax", check_attn_softmax},
    {"attn_pv", check_attn_pv},
    {"attn_pack_q", check_attn_pack_q},
    {"attn_store_out", check_attn_store_out},
    {"exp2_nonpositive",
     [](const md::Kernels& t) {
       check_elementwise("exp2_nonpositive", t, &md::Kernels::exp2_nonpositive, -120.0f, 0.0f, 8.0 * unit_roundoff,
                         [](float x) { return std::exp2(static_cast<double>(x)); });
     }},
    {"few_query_max", check_few_query_max},
    {"rows_dot", check_rows_dot},
    {"rows_softmax", check_rows_softmax},
    {"rows_axpy", check_rows_axpy},
};

struct KernelCase {
  Table table;
  const KernelField* field;
};
void PrintTo(const KernelCase& c, std::ostream* os) { *os << c.field->name << " of " << c.table->arch; }
std::vector<KernelCase> kernel_cases() {
  std::vector<KernelCase> c;
  for (Table t : all_kernel_tables())
    for (const KernelField& f : kernel_fields) c.push_back({t, &f});
  return c;
}
std::string safe_name(std::string n) {
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

class KernelCheck : public ::testing::TestWithParam<KernelCase> {};
TEST_P(KernelCheck, FieldAgainstScalarAndReference) { GetParam().field->check(*GetParam().table); }
INSTANTIATE_TEST_SUITE_P(EveryTable, KernelCheck, ::testing::ValuesIn(kernel_cases()),
                         [](const ::testing::TestParamInfo<KernelCase>& i) {
                           return safe_name(std::string(i.param.field->name) + "_" + i.param.table->arch);
                         });

// ================================================================================================================
// detail::LinearKernels
// ================================================================================================================
using LTable = const md::LinearKernels*;
const md::LinearKernels& lscalar() { return md::scalar_linear_kernels(); }

// binary16 bits of a float that binary16 holds exactly (the halves above: normal or zero).
std::uint16_t half_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  const std::uint16_t sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
  if ((b & 0x7fffffffu) == 0) return sign;
  const int e = static_cast<int>((b >> 23) & 0xff) - 127 + 15;
  return static_cast<std::uint16_t>(sign | (e << 10) | ((b >> 13) & 0x3ffu));
}

// f32 and f16: y = x·wᵀ + bias, exact for halves.
void check_linear_dense(const md::LinearKernels& t, bool f16) {
  const char* field = f16 ? "f16" : "f32";
  Check chk(field, t.arch);
  std::size_t tm, tn;
  tile_of(f16 ? t.f16_name : t.f32_name, tm, tn);
  std::uint32_t seed = 2000;
  for (bool with_bias : {false, true})
    for (std::size_t m : around({tm, 4}))
      for (std::size_t n : around({tn, 4}))
        for (std::size_t k : around({4, 8, 16}, {64})) {
          chk.at(dims({{"m", m}, {"n", n}, {"k", k}, {"bias", with_bias}}));
          Halves h(seed++);
          Guarded x(m, k, m == 1 ? k : k + 3, true), bias(1, n, 0, true);
          std::vector<float> w(n * k);
          std::vector<std::uint16_t> wh(n * k);
          x.fill(h);
          bias.fill(h);
          for (std::size_t i = 0; i < n * k; ++i) wh[i] = half_bits(w[i] = h());
          Guarded y(m, n, m == 1 ? n : n + 2, true), ys(m, n, m == 1 ? n : n + 2, true);
          y.fill_value(777.0f);
          md::LinearArgs a{f16 ? static_cast<const void*>(wh.data()) : w.data(),
                           nullptr,
                           0,
                           x.data(),
                           x.stride(),
                           with_bias ? bias.data() : nullptr,
                           y.data(),
                           y.stride(),
                           m,
                           n,
                           k};
          auto fn = f16 ? t.f16 : t.f32;
          fn(a);
          if (&t != &lscalar()) {
            md::LinearArgs s = a;
            s.y = ys.data();
            (f16 ? lscalar().f16 : lscalar().f32)(s);
          }
          std::vector<double> want, mag;
          ref::matmul(x.data(), x.stride(), w.data(), k, true, m, n, k, want, mag);
          for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
              chk.value("y", i, j, y.at(i, j), want[i * n + j] + (with_bias ? bias.at(0, j) : 0.0f), -1.0);
              if (&t != &lscalar()) chk.value("y vs scalar", i, j, y.at(i, j), ys.at(i, j), -1.0);
            }
          chk.canaries("y", y.canaries_intact());
          bench(field, t.arch, chk.sizes(), [&] { fn(a); });
        }
}

void check_q8_chunk(const md::LinearKernels& t) {
  Check chk("q8_chunk", t.arch);
  std::size_t tm, tn;
  tile_of(t.q8_name, tm, tn);
  std::uint32_t seed = 3000;
  const std::size_t max_rows = t.q8_chunk_rows < md::linear_q8_rows ? t.q8_chunk_rows : md::linear_q8_rows;
  for (bool first : {true, false})
    for (std::size_t rows : around({tm}, {max_rows}, max_rows))
      for (std::size_t n : around({tn, 4}))
        for (std::size_t seg : {3, 4, 15, 16, 17, 32, 33, 64})
          for (std::size_t segs : {1, 2, 3}) {
            const std::size_t len = seg * segs;
            chk.at(dims({{"rows", rows}, {"n", n}, {"seg", seg}, {"segs", segs}, {"first", first}}));
            std::mt19937 rng(seed++);
            auto small = [&] { return static_cast<std::int8_t>(static_cast<int>(rng() % 17) - 8); };
            // q: the caller's aligned chunk buffer; w: columns c0.. of rows of length ldw, misaligned
            std::vector<std::int8_t> qbuf(64 + rows * len + 64), wbuf(1 + n * (len + 5));
            std::int8_t* q = qbuf.data() + (64 - reinterpret_cast<std::uintptr_t>(qbuf.data()) % 64) % 64;
            std::int8_t* w = wbuf.data() + 1;
            const std::size_t ldw = len + 5;
            for (std::size_t i = 0; i < rows * len; ++i) q[i] = small();
            for (std::size_t i = 0; i < n * ldw; ++i) w[i] = small();
            // scales: powers of two, so every product and sum is exact
            const float pow2[] = {0.5f, 1.0f, 0.25f, 2.0f, 0.125f};
            std::vector<float> sx(rows * segs), sw(n * segs), bias(n);
            for (std::size_t i = 0; i < sx.size(); ++i) sx[i] = i % 7 == 3 ? 0.0f : pow2[i % 5];
            for (std::size_t i = 0; i < sw.size(); ++i) sw[i] = pow2[(i * 3) % 5];
            for (std::size_t r = 0; r < n; ++r) bias[r] = 0.5f * static_cast<float>(static_cast<int>(r % 7) - 3);
            Guarded y(rows, n, rows == 1 ? n : n + 3, true), ys(rows, n, rows == 1 ? n : n + 3, true);
            Halves h(seed);
            y.fill(h);
            for (std::size_t i = 0; i < rows; ++i)
              for (std::size_t r = 0; r < n; ++r) ys.at(i, r) = y.at(i, r);
            const Guarded before = y;
            md::Q8Chunk c{q,         len,  sx.data(), segs,        rows,  len,      seg,
                          sw.data(), segs, 1,         bias.data(), first, y.data(), y.stride()};
            t.q8_chunk(w, ldw, n, c);
            if (&t != &lscalar()) {
              md::Q8Chunk s = c;
              s.y = ys.data();
              lscalar().q8_chunk(w, ldw, n, s);
            }
            for (std::size_t i = 0; i < rows; ++i)
              for (std::size_t r = 0; r < n; ++r) {
                double want = first ? bias[r] : before.at(i, r);
                for (std::size_t s = 0; s < segs; ++s) {
                  long long dot = 0;
                  for (std::size_t col = s * seg; col < (s + 1) * seg; ++col)
                    dot += q[i * len + col] * w[r * ldw + col];
                  want += static_cast<double>(dot) * sw[r * segs + s] * sx[i * segs + s];
                }
                chk.value("y", i, r, y.at(i, r), want, -1.0);
                if (&t != &lscalar()) chk.value("y vs scalar", i, r, y.at(i, r), ys.at(i, r), -1.0);
              }
            chk.canaries("y", y.canaries_intact());
            bench("q8_chunk", t.arch, chk.sizes(), [&] {
              md::Q8Chunk s = c;
              s.first = true;
              t.q8_chunk(w, ldw, n, s);
            });
          }
}

void check_absmax_bits(const md::LinearKernels& t) {
  Check chk("absmax_bits", t.arch);
  std::uint32_t seed = 4000;
  const float specials[] = {0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), -3.5f};
  for (int special = -1; special < 5; ++special)
    for (std::size_t n : around({4, 8, 16}, {64, 100})) {
      chk.at(dims({{"n", n}, {"special", static_cast<std::size_t>(special + 1)}}));
      Guarded x(1, n, 0, true);
      Halves h(seed++);
      x.fill(h);
      if (special >= 0) x.at(0, (seed * 7) % n) = specials[special];
      const std::uint32_t got = t.absmax_bits(x.data(), n);
      std::uint32_t want = 0;  // the largest |x| as an integer: NaN's and inf's bits are above every finite one
      for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t b;
        std::memcpy(&b, &x.at(0, i), sizeof b);
        want = std::max(want, b & 0x7fffffffu);
      }
      const bool ok = want > 0x7f800000u ? got > 0x7f800000u : got == want;  // any NaN will do
      if (!ok) chk.flag("got bits " + std::to_string(got) + ", want " + std::to_string(want));
      if (&t != &lscalar()) {
        const std::uint32_t s = lscalar().absmax_bits(x.data(), n);
        if (want <= 0x7f800000u && s != got) chk.flag("differs from the scalar table");
      }
      volatile std::uint32_t sink = 0;
      bench("absmax_bits", t.arch, chk.sizes(), [&] { sink = t.absmax_bits(x.data(), n); });
      (void)sink;
    }
}

void check_quantize(const md::LinearKernels& t) {
  Check chk("quantize", t.arch);
  std::uint32_t seed = 5000;
  for (float s : {0.25f, 1.0f / 127.0f})
    for (std::size_t n : around({4, 8, 16, 32}, {64, 100})) {
      chk.at(dims({{"n", n}, {"s_is_quarter", s == 0.25f}}));
      std::mt19937 rng(seed++);
      Guarded x(1, n, 0, true);
      // multiples of s/2 in [−127·s, 127·s]: exact quotients, half of them ties (round half away from zero)
      for (std::size_t i = 0; i < n; ++i)
        x.at(0, i) = static_cast<float>(static_cast<int>(rng() % 509) - 254) * 0.5f * s;
      if (s != 0.25f)  // s = 1/127 is not exact: x / s is its quotient, whatever the rounding, checked in double below
        for (std::size_t i = 0; i < n; ++i)
          x.at(0, i) = static_cast<float>(static_cast<int>(rng() % 255) - 127) / 127.0f;
      std::vector<std::int8_t> qb(n + 2, 99), qs(n + 2, 99);
      t.quantize(x.data(), n, s, qb.data() + 1);
      if (&t != &lscalar()) lscalar().quantize(x.data(), n, s, qs.data() + 1);
      for (std::size_t i = 0; i < n; ++i) {
        const double r = static_cast<double>(x.at(0, i)) / s;
        const double want = s == 0.25f ? (r < 0 ? -std::floor(-r + 0.5) : std::floor(r + 0.5)) : std::nearbyint(r);
        if (s == 0.25f) {
          chk.value("q", 0, i, qb[i + 1], want, -1.0);
        } else {
          chk.value("q", 0, i, qb[i + 1], want, 1.0);  // the float quotient may land on either side of an integer
        }
        if (&t != &lscalar()) chk.value("q vs scalar", 0, i, qb[i + 1], qs[i + 1], -1.0);
      }
      if (qb[0] != 99 || qb[n + 1] != 99) chk.flag("write outside q");
      bench("quantize", t.arch, chk.sizes(), [&] { t.quantize(x.data(), n, s, qs.data() + 1); });
    }
  // Quotients at and around half integers (x = (j + ½)·s rounded, and a few ulps off): a kernel that rounds
  // anything but the float quotient x / s (a product with 1/s, say) lands on the other side of some of them. Scales
  // with random significands, small ones where x may be subnormal, blocks of every length around 16.
  std::mt19937 rng(seed);
  for (int round = 0; round < 40; ++round) {
    const std::size_t n = 1 + rng() % 70;
    const int e = round % 8 == 7 ? -126 + static_cast<int>(rng() % 4) : static_cast<int>(rng() % 40) - 20;
    const float s = std::ldexp(1.0f + static_cast<float>(rng() & 0x7fffffu) * 0x1p-23f, e);
    chk.at(dims({{"n", n}, {"near_ties_round", static_cast<std::size_t>(round)}}));
    Guarded x(1, n, 0, true);
    for (std::size_t i = 0; i < n; ++i) {
      const int j = static_cast<int>(rng() % 254) - 127;  // j + ½ in [−127, 126.5]
      float v = static_cast<float>((j + 0.5) * static_cast<double>(s));
      for (int u = static_cast<int>(rng() % 5) - 2; u != 0; u += u > 0 ? -1 : 1)
        v = std::nextafter(v, u > 0 ? 1e30f : -1e30f);
      if (rng() % 8 == 0) v = static_cast<float>(static_cast<int>(rng() % 255) - 127) * s;
      x.at(0, i) = std::fabs(v) <= 127.0f * s ? v : std::copysign(127.0f * s, v);
    }
    std::vector<std::int8_t> qb(n + 2, 99), qs(n + 2, 99);
    t.quantize(x.data(), n, s, qb.data() + 1);
    lscalar().quantize(x.data(), n, s, qs.data() + 1);
    for (std::size_t i = 0; i < n; ++i) {
      // The float quotient (the double quotient rounded to float is the correctly rounded one), half away from 0.
      const double u = static_cast<float>(static_cast<double>(x.at(0, i)) / static_cast<double>(s));
      const double want = u < 0 ? -std::floor(-u + 0.5) : std::floor(u + 0.5);
      chk.value("q near a tie", 0, i, qb[i + 1], want, -1.0);
      chk.value("q near a tie vs scalar", 0, i, qb[i + 1], qs[i + 1], -1.0);
    }
    if (qb[0] != 99 || qb[n + 1] != 99) chk.flag("write outside q");
  }
}

struct LinearField {
  const char* name;
  void (*check)(const md::LinearKernels&);
};
const LinearField linear_fields[] = {
    {"f32", [](const md::LinearKernels& t) { check_linear_dense(t, false); }},
    {"f16", [](const md::LinearKernels& t) { check_linear_dense(t, true); }},
    {"q8_chunk", check_q8_chunk},
    {"absmax_bits", check_absmax_bits},
    {"quantize", check_quantize},
};
struct LinearCase {
  LTable table;
  const LinearField* field;
};
void PrintTo(const LinearCase& c, std::ostream* os) { *os << c.field->name << " of " << c.table->arch; }
std::vector<LinearCase> linear_cases() {
  std::vector<LinearCase> c;
  for (LTable t : all_linear_kernel_tables())
    for (const LinearField& f : linear_fields) c.push_back({t, &f});
  return c;
}

class LinearKernelCheck : public ::testing::TestWithParam<LinearCase> {};
TEST_P(LinearKernelCheck, FieldAgainstScalarAndReference) {
  const md::LinearKernels& t = *GetParam().table;
  if (t.q8_chunk_rows < 1) ADD_FAILURE() << t.arch << ": q8_chunk_rows is 0";
  GetParam().field->check(t);
}
INSTANTIATE_TEST_SUITE_P(EveryTable, LinearKernelCheck, ::testing::ValuesIn(linear_cases()),
                         [](const ::testing::TestParamInfo<LinearCase>& i) {
                           return safe_name(std::string(i.param.field->name) + "_" + i.param.table->arch);
                         });

}  // namespace
