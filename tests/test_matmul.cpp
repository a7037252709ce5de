// matmul: the tutorial's seed example, every kernel table against the double reference over shape sweeps
// that cross every tile and vector edge (dav1d checkasm style), strides, misalignment, and the bad-input
// contract of the entry point.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "check.hpp"
#include "reference.hpp"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

// Sizes around every tile edge of every kernel table: vector widths 4/8/16, register tiles 4/6/8 rows and
// 8/12/16/32 columns, blocks of 128 columns and 256 of the inner dimension.
const std::vector<std::size_t> edge_sizes = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 127, 200};

// Runs one product through `kernels` (or the public entry point when kernels is null) and checks it.
void check_product(const ma::detail::Kernels* kernels, std::size_t m, std::size_t n, std::size_t k, bool transpose_b,
                   std::size_t pad, bool misalign, std::uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << (kernels ? kernels->arch : "matmul()") << " m=" << m << " n=" << n << " k=" << k
                                    << " transpose_b=" << transpose_b << " pad=" << pad << " misalign=" << misalign);
  Uniform u(seed);
  Guarded a(m, k, k + pad, misalign);
  Guarded b(transpose_b ? n : k, transpose_b ? k : n, (transpose_b ? k : n) + pad, !misalign);
  Guarded c(m, n, n + 2 * pad, misalign);
  a.fill(u);
  b.fill(u);
  c.fill_value(12345.0f);  // stale output must be overwritten, not accumulated into
  if (kernels != nullptr) {
    const ma::detail::GemmArgs g{a.data(), a.stride(), b.data(), b.stride(), transpose_b,
                                 c.data(), c.stride(), m,        n,          k};
    kernels->gemm(g);
  } else {
    ASSERT_EQ(ma::matmul(a.cview(), b.cview(), c.view(), transpose_b), ma::Status::ok);
  }
  std::vector<double> want, scale;
  ref::matmul(a.data(), a.stride(), b.data(), b.stride(), transpose_b, m, n, k, want, scale);
  EXPECT_TRUE(matrix_near(c, want, scale, dot_tolerance(k)));
  EXPECT_TRUE(c.canaries_intact());
}

class MatmulKernel : public ::testing::TestWithParam<const ma::detail::Kernels*> {};

TEST_P(MatmulKernel, SweepRowsColsAcrossTileEdges) {
  std::uint32_t seed = 1;
  for (bool tb : {false, true})
    for (std::size_t m : edge_sizes)
      for (std::size_t n : edge_sizes)
        for (std::size_t k : {1, 3, 17, 64}) check_product(GetParam(), m, n, k, tb, (m + n) % 3, (m ^ n) & 1, seed++);
}

TEST_P(MatmulKernel, SweepInnerDimensionAcrossBlockEdges) {
  std::uint32_t seed = 100;
  for (bool tb : {false, true})
    for (std::size_t k : {2, 7, 8, 9, 15, 16, 31, 33, 65, 127, 255, 256, 257, 300, 511, 513, 600})
      for (std::size_t mn : {1, 9, 33, 65}) check_product(GetParam(), mn, 75 - mn, k, tb, k % 2, k & 1, seed++);
}

TEST_P(MatmulKernel, SweepColumnsAcrossPackedBlockEdges) {
  std::uint32_t seed = 200;
  for (bool tb : {false, true})
    for (std::size_t n : {127, 128, 129, 255, 256, 257, 300, 385})
      for (std::size_t m : {5, 17}) check_product(GetParam(), m, n, 260, tb, 1, n & 1, seed++);
}

TEST_P(MatmulKernel, SmallRowsReadBInPlace) {
  // m <= 8 reads b in place (dot products with its rows, or AXPYs over them) instead of packing it: every m up to
  // one past that, inner dimensions and widths on both sides of the row kernels' long-row switch (256).
  std::uint32_t seed = 300;
  // n = 272 and 512 (whole vectors, > 256): x·W with m = 1 walks 8 rows of W at a time, k = 19 and 9 leave 3 and 1.
#if MICROATTN_TEST_EMULATED
  const std::vector<std::pair<std::size_t, std::size_t>> kn{{1, 1}, {17, 300}, {300, 17}, {19, 272}};
#else
  const std::vector<std::pair<std::size_t, std::size_t>> kn{{1, 1},     {17, 300},   {300, 17},  {19, 272},
                                                            {256, 256}, {257, 1030}, {1030, 40}, {9, 512}};
#endif
  for (bool tb : {false, true})
    for (std::size_t m = 1; m <= 9; ++m)
      for (const auto& [k, n] : kn) check_product(GetParam(), m, n, k, tb, m % 3, (m & 1) != 0, seed++);
}

TEST_P(MatmulKernel, OneRowLongInnerEveryAlignment) {
  // x·Wᵀ with m = 1 and a long inner dimension walks the rows of W from their first vector-aligned element, four
  // rows at once when the row stride is a whole number of vectors, with the elements before that and after the last
  // whole vector taken as one vector each: every start offset of W within 16 floats, strides that are and are not
  // whole vectors. Values are small multiples of 1/2, so every sum is exact and checked for equality; an infinity
  // near a row's start or end must give +inf, not 0·inf = NaN from the lanes its vector does not own.
  const ma::detail::Kernels& kern = *GetParam();
  constexpr std::size_t n = 6;  // a group of four rows and two single ones
  const std::vector<std::pair<std::size_t, std::size_t>> shapes{{257, 257}, {1027, 1027}, {1024, 1024}, {300, 304}};
  for (const auto& [k, ldk] : shapes) {
    std::vector<float> storage(n * ldk + 16), x(k), y(n + 1);
    for (std::size_t t = 0; t < k; ++t) x[t] = static_cast<float>(t % 7 + 1);
    for (std::size_t off = 0; off < 16; ++off) {
      SCOPED_TRACE(::testing::Message() << kern.arch << " k=" << k << " ldk=" << ldk << " offset=" << off);
      float* w = storage.data() + off;
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t t = 0; t < ldk; ++t) w[j * ldk + t] = t < k ? 0.5f * static_cast<float>((j + t) % 5) : 1e30f;
      w[1 * ldk + 2] = std::numeric_limits<float>::infinity();      // near the start of row 1 (in the group)
      w[3 * ldk + k - 2] = std::numeric_limits<float>::infinity();  // near the end of row 3
      w[5 * ldk + 1] = std::numeric_limits<float>::infinity();      // a single row
      y[n] = 7.0f;                                                  // canary
      const ma::detail::GemmArgs g{x.data(), k, w, ldk, true, y.data(), n, 1, n, k};
      kern.gemm(g);
      for (std::size_t j = 0; j < n; ++j) {
        if (j == 1 || j == 3 || j == 5) {
          EXPECT_EQ(y[j], std::numeric_limits<float>::infinity()) << "row " << j;
          continue;
        }
        double want = 0.0;
        for (std::size_t t = 0; t < k; ++t) want += static_cast<double>(x[t]) * w[j * ldk + t];
        EXPECT_EQ(static_cast<double>(y[j]), want) << "row " << j;
      }
      EXPECT_EQ(y[n], 7.0f);
    }
  }
}

TEST_P(MatmulKernel, OneRowLongRowsEveryAlignment) {
  // x·W with m = 1 and rows of W longer than 256 (and one query's P·V with d_v > 256, o = o·alpha + p·v): the
  // columns up to the rows' first cache-line boundary and past the last whole vector go one by one, the rest in
  // vectors from that boundary, when the row stride is a whole number of lines; otherwise in vectors from column 0.
  // Every start offset of W within 16 floats, widths and strides on both sides; k = 9 and 17 leave one row past
  // the groups of 8. Small multiples of 1/2: every sum is exact and checked for equality, with a canary past y.
  const ma::detail::Kernels& kern = *GetParam();
  const std::vector<std::pair<std::size_t, std::size_t>> shapes{
      {272, 272}, {300, 304}, {300, 300}, {257, 272}, {1030, 1040}};
  for (std::size_t k : {9, 17})
    for (const auto& shape : shapes) {
      const std::size_t n = shape.first, ldw = shape.second;  // not a structured binding: the lambda captures it
      std::vector<float> storage(k * ldw + 16), x(k), y(n + 1), alpha{0.5f};
      for (std::size_t j = 0; j < k; ++j) x[j] = 0.5f * static_cast<float>(j % 3 + 1);
      for (std::size_t off = 0; off < 16; ++off) {
        SCOPED_TRACE(::testing::Message()
                     << kern.arch << " k=" << k << " n=" << n << " ldw=" << ldw << " offset=" << off);
        float* w = storage.data() + off;
        for (std::size_t j = 0; j < k; ++j)
          for (std::size_t c = 0; c < ldw; ++c) w[j * ldw + c] = c < n ? 0.5f * static_cast<float>((j + c) % 7) : 1e30f;
        const auto want = [&](std::size_t c) {
          double sum = 0.0;
          for (std::size_t j = 0; j < k; ++j) sum += static_cast<double>(x[j]) * w[j * ldw + c];
          return sum;
        };
        y.assign(n + 1, std::numeric_limits<float>::quiet_NaN());  // stale y must not be read
        y[n] = 7.0f;                                               // canary
        const ma::detail::GemmArgs g{x.data(), k, w, ldw, false, y.data(), n, 1, n, k};
        kern.gemm(g);
        for (std::size_t c = 0; c < n; ++c) ASSERT_EQ(static_cast<double>(y[c]), want(c)) << "column " << c;
        EXPECT_EQ(y[n], 7.0f);

        for (std::size_t c = 0; c < n; ++c) y[c] = static_cast<float>(c % 5);
        kern.rows_axpy(x.data(), k, 1, k, w, ldw, n, alpha.data(), y.data(), n);
        for (std::size_t c = 0; c < n; ++c)
          ASSERT_EQ(static_cast<double>(y[c]), 0.5 * static_cast<double>(c % 5) + want(c)) << "column " << c;
        EXPECT_EQ(y[n], 7.0f);
      }
    }
}

INSTANTIATE_TEST_SUITE_P(EveryArch, MatmulKernel, ::testing::ValuesIn(all_kernel_tables()), kernel_table_name);

TEST(Matmul, SeedExampleFromTheTutorial) {
  // X = [[0.1, 0.5], [0.3, 0.4], [0.8, 0.0]]; X·Xᵀ from the tutorial's worked example.
  const float x[] = {0.1f, 0.5f, 0.3f, 0.4f, 0.8f, 0.0f};
  const double tutorial[] = {0.26, 0.23, 0.08, 0.23, 0.25, 0.24, 0.08, 0.24, 0.64};
  Guarded s(3, 3);
  const ma::MatrixView<const float> xv{x, 3, 2, 2};
  ASSERT_EQ(ma::matmul(xv, xv, s.view(), /*transpose_b=*/true), ma::Status::ok);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j)  // the decimals are exact to 2 places; floats of 0.1 etc. are not
      EXPECT_NEAR(s.at(i, j), tutorial[i * 3 + j], 1e-6) << "(" << i << "," << j << ")";
  EXPECT_TRUE(s.canaries_intact());
  // The same through the non-transposed path: Xᵀ stored explicitly.
  const float xt[] = {0.1f, 0.3f, 0.8f, 0.5f, 0.4f, 0.0f};
  Guarded s2(3, 3);
  ASSERT_EQ(ma::matmul(xv, ma::MatrixView<const float>{xt, 2, 3, 3}, s2.view()), ma::Status::ok);
  for (std::size_t i = 0; i < 9; ++i) EXPECT_EQ(s2.at(i / 3, i % 3), s.at(i / 3, i % 3));
}

TEST(Matmul, EntryPointStridedMisalignedAndTransposed) {
  std::uint32_t seed = 300;
  for (bool tb : {false, true})
    for (std::size_t m : {1, 16, 33})
      for (std::size_t n : {1, 17, 64})
        for (std::size_t k : {1, 9, 64}) check_product(nullptr, m, n, k, tb, 5, (m + n + k) & 1, seed++);
}

TEST(Matmul, ReportsTheKernelInUse) {
  const std::string name = ma::matmul_kernel_name();
  EXPECT_NE(name.find("gemm_"), std::string::npos);
  EXPECT_NE(name.find('x'), std::string::npos);
  EXPECT_STREQ(ma::simd_arch(), ma::detail::simd_arch_name());
  // The gemm's name ends in the table's arch (one vocabulary: docs/design.md "Kernel names").
  const std::string arch = std::string("_") + ma::detail::selected_kernels().arch;
  ASSERT_GT(name.size(), arch.size());
  EXPECT_EQ(name.substr(name.size() - arch.size()), arch);
}

TEST(ViewsOverlap, ExactForEqualStridesConservativeOtherwise) {
  alignas(16) float m[64] = {};
  using ma::detail::views_overlap;
  auto V = [&](std::size_t off, std::size_t r, std::size_t c, std::size_t s) {
    return ma::MatrixView<const float>{m + off, r, c, s};
  };
  EXPECT_TRUE(views_overlap(V(0, 2, 2, 8), V(0, 2, 2, 8)));
  EXPECT_FALSE(views_overlap(V(0, 4, 2, 8), V(2, 4, 2, 8)));   // side-by-side columns
  EXPECT_TRUE(views_overlap(V(0, 4, 3, 8), V(2, 4, 2, 8)));    // column 2 shared
  EXPECT_FALSE(views_overlap(V(0, 2, 8, 8), V(16, 2, 8, 8)));  // consecutive rows
  EXPECT_TRUE(views_overlap(V(0, 3, 8, 8), V(16, 2, 8, 8)));
  EXPECT_TRUE(views_overlap(V(6, 2, 4, 8), V(8, 2, 2, 8)));  // b starts in a's row wrap-around
  EXPECT_FALSE(views_overlap(V(6, 1, 2, 8), V(9, 1, 2, 8)));
  EXPECT_TRUE(views_overlap(V(0, 2, 3, 8), V(7, 2, 2, 8)));   // b's second column is a's next row start
  EXPECT_FALSE(views_overlap(V(0, 1, 3, 8), V(7, 1, 2, 8)));  // a has one row only
  EXPECT_FALSE(views_overlap(V(0, 2, 3, 8), V(3, 2, 4, 8)));  // spans overlap, elements interleave
  EXPECT_TRUE(views_overlap(V(0, 2, 3, 8), V(3, 2, 6, 8)));   // b's row 0 reaches a's row 1
  EXPECT_TRUE(views_overlap(V(0, 4, 2, 8), V(2, 2, 2, 4)));   // different strides: span overlap counts
  EXPECT_FALSE(views_overlap(V(0, 1, 4, 4), V(4, 1, 4, 4)));
}

}  // namespace
