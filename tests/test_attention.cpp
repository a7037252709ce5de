// attention(): every kernel table against the double reference over sequence lengths and head sizes that
// cross the query-tile, key-block and vector edges, causal (top-left and bottom-right), additive masks with
// −inf including fully hidden rows, strided head views, the workspace contract and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "attention_run.hpp"
#include "reference.hpp"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();

struct Case {
  std::size_t n_q, n_kv, d_k, d_v;
  bool causal = false;
  long long offset = 0;
  int mask = 0;  // 0: none, 1: random finite/−inf with some fully hidden rows
  float scale = 0.0f;
  std::size_t pad = 0;
  bool misalign = false;
  float value_range = 1.0f;
};

struct Buffers {
  Guarded q, k, v, mask, out, ws;
  Buffers(const Case& c, std::size_t ws_floats)
      : q(c.n_q, c.d_k, c.d_k + c.pad, c.misalign),
        k(c.n_kv, c.d_k, c.d_k + 2 * c.pad, !c.misalign),
        v(c.n_kv, c.d_v, c.d_v + c.pad, c.misalign),
        mask(c.mask ? c.n_q : 1, c.mask ? c.n_kv : 1, 0, c.misalign),
        out(c.n_q, c.d_v, c.d_v + c.pad, !c.misalign),
        ws(1, ws_floats, 0, c.misalign) {}
};

void fill_inputs(const Case& c, Buffers& b, std::uint32_t seed) {
  Uniform u(seed, -c.value_range, c.value_range);
  b.q.fill(u);
  b.k.fill(u);
  b.v.fill(u);
  b.out.fill_value(777.0f);
  b.ws.fill_value(555.0f);
  if (c.mask) {
    std::mt19937 rng(seed + 1);
    for (std::size_t i = 0; i < c.n_q; ++i)
      for (std::size_t j = 0; j < c.n_kv; ++j) {
        const bool row_hidden = i % 7 == 3;  // every 7th row: no key visible at all
        b.mask.at(i, j) = row_hidden || rng() % 5 == 0 ? -inf : static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
      }
  }
}

ma::AttentionOptions options_of(const Case& c, const Buffers& b) {
  ma::AttentionOptions o;
  o.scale = c.scale;
  o.causal = c.causal;
  o.causal_offset = static_cast<std::ptrdiff_t>(c.offset);
  if (c.mask) o.mask = b.mask.cview();
  return o;
}

void check_against_reference(const Case& c, const Buffers& b) {
  std::vector<double> want, wabs, sabs;
  ref::attention({b.q.data(), b.q.stride(), b.k.data(), b.k.stride(), b.v.data(), b.v.stride(), c.n_q, c.n_kv, c.d_k,
                  c.d_v, c.scale, c.causal, c.offset, c.mask ? b.mask.data() : nullptr, b.mask.stride()},
                 want, wabs, sabs);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < c.n_q; ++i) {
    const Tolerance tol = attention_tolerance(c.d_k, c.n_kv, sabs[i]);
    for (std::size_t col = 0; col < c.d_v; ++col) {
      const double w = want[i * c.d_v + col];
      if (!within(b.out.at(i, col), w, wabs[i * c.d_v + col], tol) && bad++ < 5)
        ADD_FAILURE() << "out(" << i << "," << col << ") = " << b.out.at(i, col) << ", reference " << w << ", allowed ±"
                      << tol.rel * wabs[i * c.d_v + col] + tol.abs;
    }
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_TRUE(b.out.canaries_intact());
  EXPECT_TRUE(b.ws.canaries_intact());
}

// Through one kernel table (attention_run) or, with kernels == nullptr, through attention().
void run_case(const ma::detail::Kernels* kernels, const Case& c, std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << (kernels ? kernels->name : "attention()") << " n_q=" << c.n_q
                                    << " n_kv=" << c.n_kv << " d_k=" << c.d_k << " d_v=" << c.d_v
                                    << " causal=" << c.causal << " offset=" << c.offset << " mask=" << c.mask
                                    << " pad=" << c.pad << " misalign=" << c.misalign);
  const std::size_t ws_floats = ma::attention_workspace_floats(c.d_k, c.d_v);
  Buffers b(c, ws_floats);
  fill_inputs(c, b, seed);
  const ma::AttentionOptions o = options_of(c, b);
  if (kernels != nullptr) {
    ASSERT_EQ(ma::detail::attention_check(b.q.cview(), b.k.cview(), b.v.cview(), b.out.view(), o), ma::Status::ok);
    ma::detail::attention_run(*kernels, b.q.cview(), b.k.cview(), b.v.cview(), b.out.view(), b.ws.data(), o);
  } else {
    ASSERT_EQ(ma::attention(b.q.cview(), b.k.cview(), b.v.cview(), b.out.view(), b.ws.data(), ws_floats, o),
              ma::Status::ok);
  }
  check_against_reference(c, b);
}

class AttentionKernel : public ::testing::TestWithParam<const ma::detail::Kernels*> {};

TEST_P(AttentionKernel, SweepSequenceLengthsDenseAndCausal) {
  std::uint32_t seed = 1;
  for (std::size_t n_q : {1, 3, 4, 5, 31, 32, 33, 65, 300})
    for (std::size_t n_kv : {1, 2, 15, 16, 17, 63, 64, 65, 129, 300}) {
      const long long bottom_right = static_cast<long long>(n_kv) - static_cast<long long>(n_q);
      run_case(GetParam(), {n_q, n_kv, 16, 24, false, 0, 0, 0.0f, (n_q + n_kv) % 3, ((n_q ^ n_kv) & 1) != 0}, seed++);
      run_case(GetParam(), {n_q, n_kv, 16, 24, true, 0, 0, 0.0f, 1, false}, seed++);
      run_case(GetParam(), {n_q, n_kv, 16, 24, true, bottom_right, 0, 0.0f, 0, true}, seed++);
    }
}

TEST_P(AttentionKernel, SweepHeadSizes) {
  std::uint32_t seed = 1000;
  for (std::size_t d_k : {1, 3, 8, 16, 64, 80, 128})
    for (std::size_t d_v : {d_k, static_cast<std::size_t>(5), d_k + 9}) {
      run_case(GetParam(), {37, 70, d_k, d_v, false, 0, 0, 0.0f, 2, (d_k & 1) != 0}, seed++);
      run_case(GetParam(), {70, 70, d_k, d_v, true, 0, 0, 0.0f, 0, false}, seed++);
    }
}

TEST_P(AttentionKernel, MasksWithFullyHiddenRows) {
  std::uint32_t seed = 2000;
  for (std::size_t n_q : {3, 33, 45})
    for (std::size_t n_kv : {5, 64, 77}) {
      run_case(GetParam(), {n_q, n_kv, 16, 16, false, 0, 1}, seed++);
      run_case(GetParam(), {n_q, n_kv, 16, 16, true, 0, 1, 0.0f, 3, true}, seed++);
      run_case(GetParam(), {n_q, n_kv, 8, 20, true, static_cast<long long>(n_kv) - static_cast<long long>(n_q), 1},
               seed++);
    }
}

TEST_P(AttentionKernel, CausalOffsetsAtAndBeyondTheEdges) {
  std::uint32_t seed = 3000;
  for (long long off : {-1000000LL, -70LL, -40LL, -1LL, 1LL, 5LL, 63LL, 1000000LL,
                        static_cast<long long>(std::numeric_limits<std::ptrdiff_t>::max()),
                        static_cast<long long>(std::numeric_limits<std::ptrdiff_t>::min())})
    run_case(GetParam(), {40, 70, 16, 16, true, off}, seed++);
}

TEST_P(AttentionKernel, ExplicitScaleAndLargeScoresDoNotOverflow) {
  run_case(GetParam(), {33, 65, 16, 16, false, 0, 0, 0.37f}, 4000);
  run_case(GetParam(), {33, 65, 16, 16, false, 0, 0, 0.0f, 0, false, 30.0f}, 4001);    // scores up to ~1e4
  run_case(GetParam(), {33, 65, 16, 16, true, 0, 0, 1000.0f, 0, false, 10.0f}, 4002);  // one key dominates
}

TEST_P(AttentionKernel, NonFiniteQueryOrKeyStaysInItsRows) {
  // A NaN in query row i makes output row i NaN and no other; a NaN in key j makes exactly the rows that
  // see j NaN (causal: rows i >= j).
  Case c{40, 50, 16, 16, true, 0};
  Buffers b(c, ma::attention_workspace_floats(16, 16));
  fill_inputs(c, b, 5000);
  b.q.at(7, 3) = std::numeric_limits<float>::quiet_NaN();
  b.k.at(20, 5) = std::numeric_limits<float>::quiet_NaN();
  const ma::AttentionOptions o = options_of(c, b);
  ma::detail::attention_run(*GetParam(), b.q.cview(), b.k.cview(), b.v.cview(), b.out.view(), b.ws.data(), o);
  for (std::size_t i = 0; i < c.n_q; ++i) {
    const bool should_be_nan = i == 7 || i >= 20;
    for (std::size_t col = 0; col < c.d_v; ++col)
      EXPECT_EQ(std::isnan(b.out.at(i, col)), should_be_nan) << "row " << i << " col " << col;
  }
  EXPECT_TRUE(b.out.canaries_intact());
}

INSTANTIATE_TEST_SUITE_P(EveryArch, AttentionKernel, ::testing::ValuesIn(all_kernel_tables()), kernel_table_name);

TEST(Attention, EntryPointStridedAndMisaligned) {
  std::uint32_t seed = 6000;
  for (bool causal : {false, true}) {
    run_case(nullptr, {47, 90, 32, 40, causal, 0, 0, 0.0f, 7, true}, seed++);
    run_case(nullptr, {5, 300, 64, 64, causal, 295, 1, 0.0f, 1, false}, seed++);
  }
}

TEST(Attention, HeadsOfAPackedMatrixWithoutCopies) {
  // q, k, v packed side by side per token: [q_h0 q_h1 q_h2 | k_h0 .. | v_h0 ..], out packed by head.
  constexpr std::size_t seq = 70, heads = 3, hd = 16, row = 3 * heads * hd;
  Guarded qkv(seq, row, row + 1);
  Guarded out(seq, heads * hd);
  Uniform u(7000);
  qkv.fill(u);
  std::vector<float> ws(ma::attention_workspace_floats(hd, hd));
  for (std::size_t h = 0; h < heads; ++h) {
    const ma::MatrixView<const float> q{qkv.data() + h * hd, seq, hd, qkv.stride()};
    const ma::MatrixView<const float> k{qkv.data() + (heads + h) * hd, seq, hd, qkv.stride()};
    const ma::MatrixView<const float> v{qkv.data() + (2 * heads + h) * hd, seq, hd, qkv.stride()};
    ma::AttentionOptions o;
    o.causal = h == 1;
    ASSERT_EQ(ma::attention(q, k, v, {out.data() + h * hd, seq, hd, out.stride()}, ws.data(), ws.size(), o),
              ma::Status::ok);
    std::vector<double> want, wabs, sabs;
    ref::attention(
        {q.data, q.stride, k.data, k.stride, v.data, v.stride, seq, seq, hd, hd, 0.0, o.causal, 0, nullptr, 0}, want,
        wabs, sabs);
    for (std::size_t i = 0; i < seq; ++i)
      for (std::size_t c = 0; c < hd; ++c)
        EXPECT_TRUE(
            within(out.at(i, h * hd + c), want[i * hd + c], wabs[i * hd + c], attention_tolerance(hd, seq, sabs[i])))
            << "head " << h << " (" << i << "," << c << ")";
  }
  EXPECT_TRUE(out.canaries_intact());
}

TEST(Attention, SeedExample) {
  // Self-attention of the tutorial's X with itself (Q = K = V = X): softmax(X·Xᵀ/√2)·X.
  const float x[] = {0.1f, 0.5f, 0.3f, 0.4f, 0.8f, 0.0f};
  const Case c{3, 3, 2, 2};
  Guarded out(3, 2);
  std::vector<float> ws(ma::attention_workspace_floats(2, 2));
  const auto xv = ma::make_view(x, 3, 2);
  ASSERT_EQ(ma::attention(xv, xv, xv, out.view(), ws.data(), ws.size()), ma::Status::ok);
  std::vector<double> want, wabs, sabs;
  ref::attention({x, 2, x, 2, x, 2, 3, 3, 2, 2, 0.0, false, 0, nullptr, 0}, want, wabs, sabs);
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_TRUE(within(out.at(i / 2, i % 2), want[i], wabs[i], attention_tolerance(2, 3, sabs[i / 2])));
  (void)c;
}

TEST(Attention, WorkspaceExactlyTheFormulaWorksOneLessFails) {
  for (std::size_t d_k : {1, 16, 64, 80})
    for (std::size_t d_v : {3, 64}) {
      const std::size_t need = ma::attention_workspace_floats(d_k, d_v);
      EXPECT_EQ(need, ma::attention_block_q * (d_k + d_v + ma::attention_block_kv + 3) + 16);
      Case c{45, 70, d_k, d_v};
      for (bool misalign : {false, true}) {
        c.misalign = misalign;
        Buffers b(c, need);
        fill_inputs(c, b, 8000);
        const auto before = b.out.snapshot();
        const auto ws_before = b.ws.snapshot();
        EXPECT_EQ(ma::attention(b.q.cview(), b.k.cview(), b.v.cview(), b.out.view(), b.ws.data(), need - 1),
                  ma::Status::workspace_too_small);
        EXPECT_EQ(b.out.snapshot(), before);
        EXPECT_EQ(b.ws.snapshot(), ws_before);
        ASSERT_EQ(ma::attention(b.q.cview(), b.k.cview(), b.v.cview(), b.out.view(), b.ws.data(), need),
                  ma::Status::ok);
        check_against_reference(c, b);  // includes: nothing written past the workspace's `need` floats
      }
    }
}

TEST(Attention, WorkspaceDoesNotDependOnSequenceLength) {
  // The same workspace serves 1 and 1000 tokens.
  const std::size_t need = ma::attention_workspace_floats(32, 32);
  for (std::size_t n : {1, 1000}) {
    Case c{n, n, 32, 32, true};
    Buffers b(c, need);
    fill_inputs(c, b, 9000);
    ASSERT_EQ(ma::attention(b.q.cview(), b.k.cview(), b.v.cview(), b.out.view(), b.ws.data(), need, options_of(c, b)),
              ma::Status::ok);
    check_against_reference(c, b);
  }
}

TEST(Attention, DecodingOneQueryAgainstACache) {
  // n_q = 1 with offset n_kv − 1: the newest token sees the whole cache (PyTorch's bottom-right causal).
  for (std::size_t n_kv : {1, 17, 64, 65, 200})
    run_case(nullptr, {1, n_kv, 64, 64, true, static_cast<long long>(n_kv) - 1}, 11000 + n_kv);
}

}  // namespace

namespace {

// The published bound for inputs in a stated range (docs/numerical-contract.md "attention"): with |q|, |k|, |v| <= 1,
// no mask and the default scale, every score has |s| <= sqrt(d_k) and Σ_j p_ij·|v_jc| <= 1, so the
// element-wise tolerance collapses to  |out − exact| <= 2·((d_k + 6)·sqrt(d_k) + n_kv + 15)·2⁻²⁴.
// This measures the real error over a sweep and checks it against that bound, on every target.
TEST(AttentionAccuracy, BoundForUnitRangeInputs) {
  std::printf("%8s %6s %14s %14s\n", "n_kv", "d", "max |error|", "bound");
  for (std::size_t d : {16, 64, 128})
    for (std::size_t n : {16, 64, 256, 1024}) {
      Case c{std::min<std::size_t>(n, 64), n, d, d};
      Buffers b(c, ma::attention_workspace_floats(d, d));
      fill_inputs(c, b, static_cast<std::uint32_t>(n * 131 + d));
      ASSERT_EQ(ma::attention(b.q.cview(), b.k.cview(), b.v.cview(), b.out.view(), b.ws.data(),
                              ma::attention_workspace_floats(d, d)),
                ma::Status::ok);
      std::vector<double> want, wabs, sabs;
      ref::attention({b.q.data(), b.q.stride(), b.k.data(), b.k.stride(), b.v.data(), b.v.stride(), c.n_q, n, d, d, 0.0,
                      false, 0, nullptr, 0},
                     want, wabs, sabs);
      double worst = 0.0;
      for (std::size_t i = 0; i < c.n_q; ++i)
        for (std::size_t col = 0; col < d; ++col) {
          // (not std::fmax: GCC 12 for AArch64 has an internal compiler error on that reduction at -O3)
          const double e = std::fabs(b.out.at(i, col) - want[i * d + col]);
          worst = e > worst ? e : worst;
        }
      const double dk = static_cast<double>(d);
      const double bound = 2.0 * ((dk + 6.0) * std::sqrt(dk) + static_cast<double>(n) + 15.0) * unit_roundoff;
      std::printf("%8zu %6zu %14.3e %14.3e\n", n, d, worst, bound);
      EXPECT_LE(worst, bound) << "n_kv=" << n << " d=" << d;
    }
}

}  // namespace
