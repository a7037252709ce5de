// attention(): every kernel table against the double reference over sequence lengths and head sizes that
// cross the query-tile, key-block and vector edges, causal (top-left and bottom-right), additive masks with
// −inf including fully hidden rows, strided head views, the workspace contract and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "attention_harness.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

using Case = AttentionCase;

class AttentionKernel : public ::testing::TestWithParam<const ma::detail::Kernels*> {};

TEST_P(AttentionKernel, SweepSequenceLengthsDenseAndCausal) {
  std::uint32_t seed = 1;
  for (std::size_t n_q : {1, 3, 4, 5, 31, 32, 33, 65, 300})
    for (std::size_t n_kv : {1, 2, 15, 16, 17, 63, 64, 65, 129, 300}) {
      const long long bottom_right = static_cast<long long>(n_kv) - static_cast<long long>(n_q);
      run_attention_case(GetParam(), {n_q, n_kv, 16, 24, false, 0, 0, 0, (n_q + n_kv) % 3, ((n_q ^ n_kv) & 1) != 0},
                         seed++);
      run_attention_case(GetParam(), {n_q, n_kv, 16, 24, true, 0, 0, 0, 1, false}, seed++);
      run_attention_case(GetParam(), {n_q, n_kv, 16, 24, true, bottom_right, 0, 0, 0, true}, seed++);
    }
}

TEST_P(AttentionKernel, SweepHeadSizes) {
  std::uint32_t seed = 1000;
  for (std::size_t d_k : {1, 3, 8, 16, 64, 80, 128})
    for (std::size_t d_v : {d_k, static_cast<std::size_t>(5), d_k + 9}) {
      run_attention_case(GetParam(), {37, 70, d_k, d_v, false, 0, 0, 0, 2, (d_k & 1) != 0}, seed++);
      run_attention_case(GetParam(), {70, 70, d_k, d_v, true, 0, 0, 0, 0, false}, seed++);
    }
}

TEST_P(AttentionKernel, MasksWithFullyHiddenRows) {
  std::uint32_t seed = 2000;
  for (std::size_t n_q : {3, 33, 45})
    for (std::size_t n_kv : {5, 64, 77}) {
      run_attention_case(GetParam(), {n_q, n_kv, 16, 16, false, 0, 0, 1}, seed++);
      run_attention_case(GetParam(), {n_q, n_kv, 16, 16, true, 0, 0, 1, 3, true}, seed++);
      run_attention_case(GetParam(),
                         {n_q, n_kv, 8, 20, true, static_cast<long long>(n_kv) - static_cast<long long>(n_q), 0, 1},
                         seed++);
    }
}

TEST_P(AttentionKernel, CausalOffsetsAtAndBeyondTheEdges) {
  std::uint32_t seed = 3000;
  for (long long off : {-1000000LL, -70LL, -40LL, -1LL, 1LL, 5LL, 63LL, 1000000LL,
                        static_cast<long long>(std::numeric_limits<std::ptrdiff_t>::max()),
                        static_cast<long long>(std::numeric_limits<std::ptrdiff_t>::min())})
    run_attention_case(GetParam(), {40, 70, 16, 16, true, off}, seed++);
}

TEST_P(AttentionKernel, ExplicitScaleAndLargeScoresDoNotOverflow) {
  run_attention_case(GetParam(), {33, 65, 16, 16, false, 0, 0, 0, 0, false, 0.37f}, 4000);
  run_attention_case(GetParam(), {33, 65, 16, 16, false, 0, 0, 0, 0, false, 0.0f, 30.0f}, 4001);    // scores up to ~1e4
  run_attention_case(GetParam(), {33, 65, 16, 16, true, 0, 0, 0, 0, false, 1000.0f, 10.0f}, 4002);  // one key dominates
}

TEST_P(AttentionKernel, NonFiniteQueryOrKeyStaysInItsRows) {
  // A NaN in query row i makes output row i NaN and no other; a NaN in key j makes exactly the rows that
  // see j NaN (causal: rows i >= j).
  const Case c{40, 50, 16, 16, true, 0};
  AttentionProblem b(c, 5000);
  b.q.at(7, 3) = std::numeric_limits<float>::quiet_NaN();
  b.k.at(20, 5) = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(b.run(GetParam()));
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
    run_attention_case(nullptr, {47, 90, 32, 40, causal, 0, 0, 0, 7, true}, seed++);
    run_attention_case(nullptr, {5, 300, 64, 64, causal, 295, 0, 1, 1, false}, seed++);
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
    EXPECT_TRUE(attention_near(out.data() + h * hd, out.stride(), seq, hd, hd, seq, want, wabs, sabs)) << "head " << h;
  }
  EXPECT_TRUE(out.canaries_intact());
}

TEST(Attention, SeedExample) {
  // Self-attention of the tutorial's X with itself (Q = K = V = X): softmax(X·Xᵀ/√2)·X.
  const float x[] = {0.1f, 0.5f, 0.3f, 0.4f, 0.8f, 0.0f};
  Guarded out(3, 2);
  std::vector<float> ws(ma::attention_workspace_floats(2, 2));
  const auto xv = ma::make_view(x, 3, 2);
  ASSERT_EQ(ma::attention(xv, xv, xv, out.view(), ws.data(), ws.size()), ma::Status::ok);
  std::vector<double> want, wabs, sabs;
  ref::attention({x, 2, x, 2, x, 2, 3, 3, 2, 2, 0.0, false, 0, nullptr, 0}, want, wabs, sabs);
  EXPECT_TRUE(attention_near(out.data(), out.stride(), 3, 2, 2, 3, want, wabs, sabs));
  EXPECT_TRUE(out.canaries_intact());
}

TEST(Attention, WorkspaceExactlyTheFormulaWorksOneLessFails) {
  for (std::size_t d_k : {1, 16, 64, 80})
    for (std::size_t d_v : {3, 64}) {
      const std::size_t need = ma::attention_workspace_floats(d_k, d_v);
      EXPECT_EQ(need, ma::attention_block_q * (d_k + d_v + ma::attention_block_kv + 3) + 16);
      Case c{45, 70, d_k, d_v};
      for (bool misalign : {false, true}) {
        c.misalign = misalign;
        AttentionProblem b(c, 8000, need);
        const auto before = b.out.snapshot();
        const auto ws_before = b.ws.snapshot();
        EXPECT_EQ(ma::attention(b.q.cview(), b.k.cview(), b.v.cview(), b.out.view(), b.ws.data(), need - 1),
                  ma::Status::workspace_too_small);
        EXPECT_EQ(b.out.snapshot(), before);
        EXPECT_EQ(b.ws.snapshot(), ws_before);
        ASSERT_EQ(ma::attention(b.q.cview(), b.k.cview(), b.v.cview(), b.out.view(), b.ws.data(), need),
                  ma::Status::ok);
        b.check();  // includes: nothing written past the workspace's `need` floats
      }
    }
}

TEST(Attention, WorkspaceDoesNotDependOnSequenceLength) {
  // The same workspace serves 1 and 1000 tokens.
  const std::size_t need = ma::attention_workspace_floats(32, 32);
  for (std::size_t n : {1, 1000}) {
    Case c{n, n, 32, 32, true};
    AttentionProblem b(c, 9000, need);
    ASSERT_TRUE(b.run(nullptr));
    b.check();
  }
}

TEST(Attention, DecodingOneQueryAgainstACache) {
  // n_q = 1 with offset n_kv − 1: the newest token sees the whole cache (PyTorch's bottom-right causal).
  for (std::size_t n_kv : {1, 17, 64, 65, 200})
    run_attention_case(nullptr, {1, n_kv, 64, 64, true, static_cast<long long>(n_kv) - 1}, 11000 + n_kv);
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
      AttentionProblem b(c, static_cast<std::uint32_t>(n * 131 + d));
      ASSERT_TRUE(b.run(nullptr));
      std::vector<double> want, wabs, sabs;
      b.reference(want, wabs, sabs);
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
