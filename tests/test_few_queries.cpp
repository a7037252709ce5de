// The few-query path (one query per row: dot products with the keys, online softmax, AXPYs over V) and its row
// kernels, for every kernel table of the build, against the double reference: n_q from 1 across the table's
// few_query_max, n_kv across every key-block and vector edge, odd and even head sizes, strided and misaligned
// views, masks, causal offsets (top-left, bottom-right, far beyond both ends), sliding and local windows,
// grouped-query heads in one pass, non-finite values, and bit-identical repeats.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attention_harness.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

using Case = AttentionCase;
using Problem = AttentionProblem;

void run_case(const ma::detail::Kernels& kern, const Case& c, std::uint32_t seed) {
  run_attention_case(&kern, c, seed);
}

// n_q = 1 … 8 and the table's threshold ± 1 (the last goes through the query-tile path: both sides of the edge).
std::vector<std::size_t> few_counts(const ma::detail::Kernels& kern) {
  std::vector<std::size_t> n{1, 2, 3, 4, 5, 6, 7, 8};
  for (std::size_t t : {kern.few_query_max - 1, kern.few_query_max, kern.few_query_max + 1})
    if (t > 8) n.push_back(t);
  return n;
}

class FewQueries : public ::testing::TestWithParam<const ma::detail::Kernels*> {};

TEST_P(FewQueries, SweepQueriesKeysAndHeadSizes) {
  const ma::detail::Kernels& kern = *GetParam();
  std::uint32_t seed = 1;
#if MICROATTN_TEST_EMULATED
  const std::vector<std::size_t> keys{1, 3, 16, 17, 33, 64, 65, 130};
#else
  const std::vector<std::size_t> keys{1, 2, 3, 15, 16, 17, 31, 33, 63, 64, 65, 129, 300};
#endif
  for (std::size_t n_q : few_counts(kern))
    for (std::size_t n_kv : keys) {
      const long long bottom_right = static_cast<long long>(n_kv) - static_cast<long long>(n_q);
      run_case(kern, {n_q, n_kv, 64, 64, false, 0, 0, false, n_kv % 3, (n_q & 1) != 0}, seed++);
      run_case(kern, {n_q, n_kv, 17, 9, true, bottom_right, 0, false, 1, (n_kv & 1) != 0}, seed++);
      run_case(kern, {n_q, n_kv, 32, 33, true, 0, 0, true, 0, false}, seed++);
    }
  for (std::size_t d_k : {1, 3, 8, 16, 63, 64, 65, 128, 130})
    for (std::size_t d_v : {d_k, static_cast<std::size_t>(5), d_k + 16}) {
      run_case(kern, {1, 70, d_k, d_v, true, 69, 0, false, 2, (d_k & 1) != 0}, seed++);
      run_case(kern, {4, 70, d_k, d_v, false, 0, 0, true, 0, true}, seed++);
    }
}

TEST_P(FewQueries, CausalOffsetsAtAndBeyondTheEdges) {
  std::uint32_t seed = 100;
  for (long long off : {-1000000LL, -9LL, -3LL, -1LL, 0LL, 1LL, 5LL, 63LL, 69LL, 1000000LL,
                        static_cast<long long>(std::numeric_limits<std::ptrdiff_t>::max()),
                        static_cast<long long>(std::numeric_limits<std::ptrdiff_t>::min())})
    for (std::size_t n_q : {1, 3, 8}) run_case(*GetParam(), {n_q, 70, 16, 16, true, off}, seed++);
}

TEST_P(FewQueries, SlidingAndLocalWindows) {
  // Windows of 1 key up to more than the cache, causal (Mistral's sliding window) and not (local attention), at
  // offsets that put the window across the start, the end and beyond; n_q = 40 too (a windowed call of any size
  // is supported).
  std::uint32_t seed = 200;
  for (std::size_t window : {1, 2, 5, 16, 17, 64, 65, 1000})
    for (std::size_t n_q : {1, 4, 8, 40})
      for (long long off : {0LL, 3LL, 66LL, -5LL}) {
        const long long bottom_right = 130LL - static_cast<long long>(n_q);
        run_case(*GetParam(), {n_q, 130, 16, 8, true, off == 66 ? bottom_right : off, window}, seed++);
        run_case(*GetParam(), {n_q, 130, 16, 8, false, off, window, (window & 1) != 0, 1, true}, seed++);
      }
  // Extreme offsets and windows: the bounds i + offset ± window must not overflow.
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  const long long pmax = static_cast<long long>(std::numeric_limits<std::ptrdiff_t>::max());
  const long long pmin = static_cast<long long>(std::numeric_limits<std::ptrdiff_t>::min());
  for (std::size_t window : {static_cast<std::size_t>(3), huge, huge / 2})
    for (long long off : {pmax, pmin, pmax - 2, pmin + 2})
      for (bool causal : {false, true}) run_case(*GetParam(), {2, 20, 8, 8, causal, off, window}, seed++);
}

TEST_P(FewQueries, GroupedQueryHeadsInOnePass) {
  // heads query heads of a packed (n_q × heads·d) matrix against one K/V head, through attention_run_heads; each
  // head checked against the reference alone. heads·n_q crosses the rows per pass (attention_block_q).
  const ma::detail::Kernels& kern = *GetParam();
  std::uint32_t seed = 300;
  for (std::size_t heads : {1, 2, 3, 6})
    for (std::size_t n_q : {1, 2, 7})
      for (bool causal : {false, true}) {
        constexpr std::size_t d = 16, n_kv = 77;
        SCOPED_TRACE(::testing::Message() << kern.arch << " heads=" << heads << " n_q=" << n_q << " causal=" << causal);
        Guarded q(n_q, heads * d, heads * d + 3), out(n_q, heads * d, heads * d + 1), k(n_kv, d), v(n_kv, d, d + 2);
        Guarded ws(1, ma::attention_workspace_floats(d, d), 0, true);
        Uniform u(seed++);
        q.fill(u);
        k.fill(u);
        v.fill(u);
        out.fill_value(777.0f);
        ma::AttentionOptions o;
        o.causal = causal;
        o.causal_offset = static_cast<std::ptrdiff_t>(n_kv - n_q);
        o.window = causal ? 30 : 0;
        const ma::detail::QueryHeads qh{
            {q.data(), n_q, d, q.stride()}, d, {out.data(), n_q, d, out.stride()}, d, heads};
        ma::detail::attention_run_heads(kern, qh, k.cview(), v.cview(), ws.data(), o);
        for (std::size_t h = 0; h < heads; ++h) {
          ref::AttentionCase rc{
              q.data() + h * d, q.stride(),      k.data(), k.stride(), v.data(), v.stride(), n_q, n_kv, d, d, 0.0,
              causal,           o.causal_offset, nullptr,  0};
          rc.window = o.window;
          std::vector<double> want, wabs, sabs;
          ref::attention(rc, want, wabs, sabs);
          ASSERT_TRUE(attention_near(out.data() + h * d, out.stride(), n_q, d, d, n_kv, want, wabs, sabs))
              << "head " << h;
        }
        EXPECT_TRUE(out.canaries_intact());
        EXPECT_TRUE(ws.canaries_intact());
      }
}

TEST_P(FewQueries, RepeatsAreBitIdentical) {
  for (std::size_t n_q : {1, 3, 8}) {
    Problem p({n_q, 300, 64, 64, true, 297, 100, true, 1, true}, 400);
    ASSERT_TRUE(p.run(GetParam()));
    const auto first = p.out.snapshot();
    p.out.fill_value(1.0f);
    ASSERT_TRUE(p.run(GetParam()));
    EXPECT_EQ(p.out.snapshot(), first) << n_q;
  }
}

// ---- non-finite values on the few-query path (docs/numerical-contract.md "Non-finite values") -------------------

TEST_P(FewQueries, NanInAValueRowReachesOnlyTheQueriesThatSeeIt) {
  // V row j holds NaN (or ±inf); queries that do not see j (causal, window or mask) stay finite and equal to the
  // clean run up to rounding (their row is recomputed skipping zero probabilities); the others turn non-finite.
  for (int where = 0; where < 3; ++where)
    for (std::size_t j : {3, 40, 64, 99}) {
      Case c{8, 100, 16, 16, true, 92, where == 1 ? static_cast<std::size_t>(20) : 0, where == 2};
      Problem clean(c, 500), dirty(c, 500);
      dirty.v.at(j, 5) = where == 1 ? inf : nan_value;
      if (where == 1) dirty.v.at(j, 6) = -inf;
      dirty.k.at(j, 2) = where == 2 ? nan_value : dirty.k.at(j, 2);
      ASSERT_TRUE(clean.run(GetParam()));
      ASSERT_TRUE(dirty.run(GetParam()));
      for (std::size_t i = 0; i < c.n_q; ++i) {
        SCOPED_TRACE(::testing::Message() << "where=" << where << " j=" << j << " row " << i);
        const bool sees = ref::visible(i, j, c.causal, c.offset, c.window) && clean.mask.at(i, j) != -inf;
        for (std::size_t col = 0; col < c.d_v; ++col) {
          if (sees) {
            if (col == 5 || where == 2) {
              EXPECT_FALSE(std::isfinite(dirty.out.at(i, col))) << col;
            }
          } else {
            ASSERT_TRUE(std::isfinite(dirty.out.at(i, col))) << col;
            ASSERT_NEAR(dirty.out.at(i, col), clean.out.at(i, col), 1e-6) << col;
          }
        }
      }
      EXPECT_TRUE(dirty.out.canaries_intact());
    }
}

TEST_P(FewQueries, NonFiniteQueryOrMaskStaysInItsRow) {
  for (float bad : {nan_value, inf}) {
    Case c{6, 50, 16, 16, false, 0, 0, true};
    Problem p(c, 600);
    for (std::size_t j = 0; j < c.n_kv; ++j) p.mask.at(2, j) = j == 7 ? 0.0f : -inf;  // row 2 sees key 7 only
    p.q.at(1, 3) = nan_value;
    p.mask.at(4, 7) = bad;
    ASSERT_TRUE(p.run(GetParam()));
    for (std::size_t i = 0; i < c.n_q; ++i)
      for (std::size_t col = 0; col < c.d_v; ++col) {
        if (i == 1 || i == 4) {
          EXPECT_TRUE(std::isnan(p.out.at(i, col))) << i;
        } else {
          EXPECT_TRUE(std::isfinite(p.out.at(i, col))) << i;
        }
      }
    for (std::size_t col = 0; col < c.d_v; ++col) EXPECT_EQ(p.out.at(2, col), p.v.at(7, col));
  }
}

TEST_P(FewQueries, QueriesThatSeeNoKeyGetZerosEvenBesideNan) {
  Case c{3, 40, 8, 8, true, -2};  // query i sees keys j <= i − 2: queries 0 and 1 see none
  Problem p(c, 700);
  p.v.at(0, 0) = nan_value;
  p.k.at(1, 0) = nan_value;
  ASSERT_TRUE(p.run(GetParam()));
  for (std::size_t i : {0, 1})
    for (std::size_t col = 0; col < c.d_v; ++col) EXPECT_EQ(p.out.at(i, col), 0.0f) << i;
  EXPECT_TRUE(std::isnan(p.out.at(2, 0)));  // sees key 0 (NaN in v column 0)
  EXPECT_TRUE(std::isfinite(p.out.at(2, 1)));
}

TEST_P(FewQueries, WideKeyBlocksAcrossManyKeys) {
  // The few-query path takes key blocks of rows_max·bc / n_q keys (whole bc; 2048 for one query on the SIMD builds):
  // key counts one below, at and one above a block, and two blocks and a ragged rest, so the online softmax rescales
  // across blocks of every width; dense, bottom-right causal with a window, and masked (the mask is indexed per
  // block).
  const ma::detail::Kernels& kern = *GetParam();
  std::uint32_t seed = 500;
#if MICROATTN_TEST_EMULATED
  const std::vector<std::size_t> counts{1, 3, 8};
#else
  const std::vector<std::size_t> counts{1, 2, 3, 5, 8};
#endif
  for (std::size_t n_q : counts) {
    const std::size_t bc = ma::attention_block_kv;
    const std::size_t bw = ma::target_is_mcu ? bc : ma::attention_block_q * bc / n_q / bc * bc;
    for (std::size_t n_kv : {bw - 1, bw, bw + 1, 2 * bw + 17}) {
      const long long bottom_right = static_cast<long long>(n_kv) - static_cast<long long>(n_q);
      run_case(kern, {n_q, n_kv, 64, 64, false, 0, 0, false, 0, (n_kv & 1) != 0}, seed++);
      run_case(kern, {n_q, n_kv, 32, 16, true, bottom_right, bw + 5, false, 3, true}, seed++);
      run_case(kern, {n_q, n_kv, 16, 24, false, 0, 0, true, 1, false}, seed++);
      // d_v > 256 in whole vectors: one query's P·V walks 8 rows of V at a time, rescaling o by alpha per block
      run_case(kern, {n_q, n_kv, 16, 272, false, 0, 0, false, 0, false}, seed++);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryArch, FewQueries, ::testing::ValuesIn(all_kernel_tables()), kernel_table_name);

// ---- the row kernels alone -----------------------------------------------------------------------------------------

class RowKernels : public ::testing::TestWithParam<const ma::detail::Kernels*> {};

TEST_P(RowKernels, DotAndAxpyAgainstDouble) {
  // rows_dot: s = q·kᵀ; rows_axpy: o = o·alpha + p·v, and o = p·v when alpha is null (stale o ignored).
  const ma::detail::Kernels& kern = *GetParam();
  std::uint32_t seed = 800;
#if MICROATTN_TEST_EMULATED
  const std::vector<std::size_t> rows{1, 2, 3, 8, 9}, inners{1, 8, 17, 78, 257}, widths{1, 8, 33, 78, 130};
#else
  const std::vector<std::size_t> rows{1, 2, 3, 4, 5, 8, 9, 13}, inners{1, 3, 8, 16, 17, 64, 78, 255, 257, 600},
      widths{1, 7, 8, 16, 33, 64, 78, 130, 300};
#endif
  // 8: a head dim of 8, the Cortex-M asm kernels (q or o held in registers, one or two rows).
  // 78 = 19 vectors + 2: the NEON row kernels' last chunk of q (16 + 3 on AArch64, 8 + 8 + 3 on ARMv7) and last
  // column tile short of a whole one, two keys past a group of four, two columns short of a vector.
  for (std::size_t nr : rows)
    for (std::size_t inner : inners)
      for (std::size_t cols : widths) {
        SCOPED_TRACE(::testing::Message() << kern.arch << " nr=" << nr << " inner=" << inner << " cols=" << cols);
        Uniform u(seed++);
        Guarded a(nr, inner, inner + 1, true), bt(cols, inner, inner + 3), b(inner, cols, cols + 2, true);
        Guarded s(nr, cols, cols + 1), o(nr, cols, cols + 5, true);
        a.fill(u);
        bt.fill(u);
        b.fill(u);
        kern.rows_dot(a.data(), a.stride(), nr, inner, bt.data(), bt.stride(), cols, s.data(), s.stride());
        std::vector<double> want, scale;
        ref::matmul(a.data(), a.stride(), bt.data(), bt.stride(), true, nr, cols, inner, want, scale);
        EXPECT_TRUE(matrix_near(s, want, scale, dot_tolerance(inner)));
        EXPECT_TRUE(s.canaries_intact());

        o.fill_value(nan_value);  // stale: must not be read when alpha is null
        kern.rows_axpy(a.data(), a.stride(), nr, inner, b.data(), b.stride(), cols, nullptr, o.data(), o.stride());
        ref::matmul(a.data(), a.stride(), b.data(), b.stride(), false, nr, cols, inner, want, scale);
        EXPECT_TRUE(matrix_near(o, want, scale, dot_tolerance(inner)));

        std::vector<float> alpha(nr);
        for (std::size_t r = 0; r < nr; ++r) alpha[r] = 0.25f * static_cast<float>(r % 4);
        Guarded before(nr, cols);
        for (std::size_t r = 0; r < nr; ++r)
          for (std::size_t c = 0; c < cols; ++c) before.at(r, c) = o.at(r, c);
        kern.rows_axpy(a.data(), a.stride(), nr, inner, b.data(), b.stride(), cols, alpha.data(), o.data(), o.stride());
        for (std::size_t r = 0; r < nr; ++r)
          for (std::size_t c = 0; c < cols; ++c) {
            want[r * cols + c] += alpha[r] * static_cast<double>(before.at(r, c));
            scale[r * cols + c] += std::fabs(alpha[r] * static_cast<double>(before.at(r, c)));
          }
        EXPECT_TRUE(matrix_near(o, want, scale, dot_tolerance(inner + 1)));
        EXPECT_TRUE(o.canaries_intact());
      }
}

TEST_P(RowKernels, ShortHeadDotTilesAgainstDouble) {
  // rows_dot with a head dim of whole vectors (1 … 9 and 16 vectors of the table's width, 4 and a float, 16 less
  // 3 floats): the tiles
  // of 2, 4 and 8 rows by lanes / rows keys, the one-row tile, and the groups of the rest (3 = 2 + 1, 7 = 4 + 2 + 1,
  // 15, 17), with key counts around each tile width and the 64-key passes; misaligned, padded rows.
  const ma::detail::Kernels& kern = *GetParam();
  const std::size_t lanes = kern.vector_floats;
  std::uint32_t seed = 900;
#if MICROATTN_TEST_EMULATED
  const std::vector<std::size_t> rows{2, 3, 4, 7, 8, 9}, keys{1, 3, 4, 5, 9, 65};
#else
  const std::vector<std::size_t> rows{1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 17},
      keys{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 66, 129};
#endif
  std::vector<std::size_t> inners;
  for (std::size_t v = 1; v <= 9; ++v) inners.push_back(v * lanes);
  inners.push_back(4 * lanes + 1);
  inners.push_back(16 * lanes);  // one row past the short tiles: the long-row tile (x·Wᵀ with m = 1)
  inners.push_back(16 * lanes - 3);
  for (std::size_t nr : rows)
    for (std::size_t inner : inners)
      for (std::size_t cols : keys) {
        SCOPED_TRACE(::testing::Message() << kern.arch << " nr=" << nr << " inner=" << inner << " keys=" << cols);
        Uniform u(seed++);
        Guarded a(nr, inner, inner + 3, (seed & 1) != 0), bt(cols, inner, inner + 1, (seed & 2) != 0);
        Guarded s(nr, cols, cols + 5, (seed & 4) != 0);
        a.fill(u);
        bt.fill(u);
        kern.rows_dot(a.data(), a.stride(), nr, inner, bt.data(), bt.stride(), cols, s.data(), s.stride());
        std::vector<double> want, scale;
        ref::matmul(a.data(), a.stride(), bt.data(), bt.stride(), true, nr, cols, inner, want, scale);
        EXPECT_TRUE(matrix_near(s, want, scale, dot_tolerance(inner)));
        EXPECT_TRUE(s.canaries_intact());
      }
}

TEST_P(RowKernels, OnlineSoftmaxStepAgainstDouble) {
  // rows_softmax over two successive blocks (m, l, alpha carried), row counts across a vector of rows, block
  // lengths across the vector and tail edges: m = max, alpha = 2^(m_old − m_new), p = 2^(s − m_new),
  // l = l·alpha + Σp. Hidden keys (−inf) in some rows, a row hidden in the first block only, one hidden in both
  // (m stays −inf, l 0, its probabilities 0), a finite score far below the rest.
  const ma::detail::Kernels& kern = *GetParam();
  std::uint32_t seed = 1000;
#if MICROATTN_TEST_EMULATED
  const std::vector<std::size_t> rows{1, 3, 9}, lengths{1, 17, 64};
#else
  const std::vector<std::size_t> rows{1, 2, 3, 4, 5, 8, 9, 16, 17, 33}, lengths{1, 2, 5, 15, 16, 17, 33, 64, 100};
#endif
  for (std::size_t nr : rows)
    for (std::size_t bk : lengths) {
      SCOPED_TRACE(::testing::Message() << kern.arch << " nr=" << nr << " bk=" << bk);
      Uniform u(seed++, -20.0f, 5.0f);
      std::vector<float> m(nr, -inf), l(nr, 0.0f), alpha(nr, nan_value);
      std::vector<double> md(nr, -HUGE_VAL), ld(nr, 0.0);
      for (int block = 0; block < 2; ++block) {
        Guarded s(nr, bk, bk + 3, block == 1);
        s.fill(u);
        for (std::size_t r = 0; r < nr; ++r) {
          if (r % 4 == 1) s.at(r, (r + static_cast<std::size_t>(block)) % bk) = -inf;
          if ((r % 7 == 5 && block == 0) || r % 7 == 6)
            for (std::size_t j = 0; j < bk; ++j) s.at(r, j) = -inf;
          if (r % 3 == 2 && block == 1)  // a larger maximum in the second block: the first one's sum rescales
            s.at(r, bk / 2) = 9.0f;
          if (r % 5 == 3) s.at(r, bk - 1) = -300.0f;  // finite, far below the clamp of 2^x: exactly 0
        }
        const Guarded before = s;
        kern.rows_softmax(s.data(), s.stride(), nr, bk, m.data(), l.data(), alpha.data());
        EXPECT_TRUE(s.canaries_intact());
        for (std::size_t r = 0; r < nr; ++r) {
          double mb = md[r];
          for (std::size_t j = 0; j < bk; ++j) {  // (not std::fmax: GCC 12 for AArch64 crashes vectorising it)
            const double x = before.at(r, j);
            mb = x > mb ? x : mb;
          }
          const double m_use = mb == -HUGE_VAL ? 0.0 : mb;
          const double a = std::exp2(md[r] - m_use);
          double sum = 0.0;
          for (std::size_t j = 0; j < bk; ++j) {
            const double pj = std::exp2(static_cast<double>(before.at(r, j)) - m_use);
            sum += pj;
            EXPECT_TRUE(within(s.at(r, j), pj, pj, {16.0 * unit_roundoff, 1e-37}))
                << "p(" << r << "," << j << ") = " << s.at(r, j) << ", want " << pj;
          }
          ld[r] = ld[r] * a + sum;
          md[r] = mb;
          EXPECT_TRUE(within(alpha[r], a, a, {16.0 * unit_roundoff, 1e-37})) << r << ": " << alpha[r] << " vs " << a;
          EXPECT_TRUE(within(l[r], ld[r], ld[r], {(static_cast<double>(bk) + 16.0) * 4.0 * unit_roundoff, 1e-37}))
              << r << ": " << l[r] << " vs " << ld[r];
          EXPECT_EQ(static_cast<double>(m[r]), md[r]) << r;
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(EveryArch, RowKernels, ::testing::ValuesIn(all_kernel_tables()), kernel_table_name);

}  // namespace
