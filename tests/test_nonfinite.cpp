// Non-finite values stay contained (docs/numerical-contract.md): a NaN or ±inf in query row i reaches only
// output row i; in key/value row j only the rows that see j (causal, mask); fully hidden rows are zeros; huge
// finite inputs do not overflow. Every kernel table of the build runs these.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention_run.hpp"
#include "reference.hpp"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

struct NonFiniteProblem {
  std::size_t n_q, n_kv, d;
  Guarded q, k, v, mask, out;
  std::vector<float> ws;
  NonFiniteProblem(std::size_t nq, std::size_t nkv, std::size_t dd, std::uint32_t seed)
      : n_q(nq),
        n_kv(nkv),
        d(dd),
        q(nq, dd),
        k(nkv, dd),
        v(nkv, dd, dd + 1),
        mask(nq, nkv),
        out(nq, dd),
        ws(ma::attention_workspace_floats(dd, dd)) {
    Uniform u(seed);
    q.fill(u);
    k.fill(u);
    v.fill(u);
    mask.fill_value(0.0f);
  }
  void run(const ma::detail::Kernels& kern, const ma::AttentionOptions& o) {
    out.fill_value(123.0f);
    ma::detail::attention_run(kern, q.cview(), k.cview(), v.cview(), out.view(), ws.data(), o);
  }
  bool row_nan(std::size_t i) const {
    bool all = true;
    for (std::size_t c = 0; c < d; ++c) all = all && std::isnan(out.at(i, c));
    return all;
  }
  bool row_finite(std::size_t i) const {
    for (std::size_t c = 0; c < d; ++c)
      if (!std::isfinite(out.at(i, c))) return false;
    return true;
  }
};

class NonFinite : public ::testing::TestWithParam<const ma::detail::Kernels*> {};

TEST_P(NonFinite, NanInOneQueryRowReachesOnlyThatRow) {
  for (float bad : {nan_value, inf, -inf}) {
    NonFiniteProblem p(40, 70, 16, 1);
    p.q.at(13, 4) = bad;
    p.run(*GetParam(), {});
    for (std::size_t i = 0; i < p.n_q; ++i) {
      if (i == 13) {
        EXPECT_FALSE(p.row_finite(i)) << bad;  // ±inf scores: +inf gives NaN, −inf everywhere gives zeros…
      } else {
        EXPECT_TRUE(p.row_finite(i)) << "row " << i << " bad=" << bad;
      }
    }
    if (std::isnan(bad)) {
      EXPECT_TRUE(p.row_nan(13));
    }
  }
}

TEST_P(NonFinite, NanInAKeyOrValueRowReachesOnlyTheRowsThatSeeIt) {
  // Causal: key j is seen by rows i >= j. Rows before j must be finite AND exactly what they are without
  // the NaN, whichever of k or v holds it, inside or across the key block that straddles the diagonal.
  for (int where = 0; where < 4; ++where)
    for (std::size_t j : {5, 33, 64, 65}) {
      NonFiniteProblem clean(80, 80, 16, 2), dirty(80, 80, 16, 2);
      ma::AttentionOptions o;
      o.causal = true;
      clean.run(*GetParam(), o);
      float& cell = where == 0 ? dirty.k.at(j, 3) : where == 1 ? dirty.v.at(j, 7) : dirty.v.at(j, 0);
      cell = where == 3 ? inf : nan_value;
      if (where == 3) dirty.v.at(j, 1) = -inf;
      dirty.run(*GetParam(), o);
      for (std::size_t i = 0; i < 80; ++i) {
        SCOPED_TRACE(::testing::Message() << "where=" << where << " j=" << j << " row " << i);
        if (i < j) {
          for (std::size_t c = 0; c < 16; ++c) ASSERT_EQ(dirty.out.at(i, c), clean.out.at(i, c));
        } else {
          EXPECT_FALSE(dirty.row_finite(i));
        }
      }
    }
}

TEST_P(NonFinite, MaskedOutKeysCannotLeakTheirNaN) {
  // Key 9 holds NaN in k and v but the mask hides it (−inf) from even rows: those stay finite and equal
  // to the clean result up to rounding (the guarded P·V sums the block in two runs around key 9); odd rows
  // see it and turn NaN.
  NonFiniteProblem clean(20, 30, 8, 3), dirty(20, 30, 8, 3);
  for (std::size_t i = 0; i < 20; ++i) {
    clean.mask.at(i, 9) = i % 2 == 0 ? -inf : 0.5f;
    dirty.mask.at(i, 9) = clean.mask.at(i, 9);
  }
  dirty.k.at(9, 2) = nan_value;
  dirty.v.at(9, 5) = nan_value;
  ma::AttentionOptions oc, od;
  oc.mask = clean.mask.cview();
  od.mask = dirty.mask.cview();
  clean.run(*GetParam(), oc);
  dirty.run(*GetParam(), od);
  for (std::size_t i = 0; i < 20; ++i) {
    if (i % 2 == 0) {
      for (std::size_t c = 0; c < 8; ++c) ASSERT_NEAR(dirty.out.at(i, c), clean.out.at(i, c), 1e-6) << i << "," << c;
    } else {
      EXPECT_TRUE(dirty.row_nan(i)) << i;
    }
  }
}

TEST_P(NonFinite, NanInTheMaskReachesOnlyItsRow) {
  NonFiniteProblem p(20, 30, 8, 4);
  p.mask.at(6, 11) = nan_value;
  p.mask.at(7, 12) = inf;
  ma::AttentionOptions o;
  o.mask = p.mask.cview();
  p.run(*GetParam(), o);
  for (std::size_t i = 0; i < 20; ++i) {
    if (i == 6 || i == 7) {
      EXPECT_TRUE(p.row_nan(i)) << i;
    } else {
      EXPECT_TRUE(p.row_finite(i)) << i;
    }
  }
}

TEST_P(NonFinite, FullyHiddenRowsAreZerosNeverNan) {
  NonFiniteProblem p(40, 50, 16, 5);
  for (std::size_t j = 0; j < 50; ++j) p.mask.at(3, j) = -inf;  // row 3: mask hides everything
  p.v.at(10, 0) = nan_value;                                    // even with a NaN value around
  ma::AttentionOptions o;
  o.mask = p.mask.cview();
  o.causal = true;
  o.causal_offset = -5;  // rows 0..4 see no key at all
  p.run(*GetParam(), o);
  for (std::size_t i : {0, 1, 2, 3, 4})
    for (std::size_t c = 0; c < 16; ++c) EXPECT_EQ(p.out.at(i, c), 0.0f) << i;
  EXPECT_TRUE(p.row_finite(6));
  EXPECT_TRUE(std::isnan(p.out.at(15, 0)));  // sees key 10, whose value has a NaN in column 0
  EXPECT_TRUE(std::isfinite(p.out.at(15, 1)));
}

TEST_P(NonFinite, HugeFiniteScoresDoNotOverflow) {
  // q and k entries of 1e15 give scores near 1e30: the max is subtracted first, nothing overflows, and
  // every output stays a convex combination of the rows of v.
  NonFiniteProblem p(33, 40, 4, 6);
  for (std::size_t i = 0; i < 33; ++i)
    for (std::size_t c = 0; c < 4; ++c) p.q.at(i, c) *= 1e15f;
  for (std::size_t j = 0; j < 40; ++j)
    for (std::size_t c = 0; c < 4; ++c) p.k.at(j, c) *= 1e15f;
  p.run(*GetParam(), {});
  for (std::size_t c = 0; c < 4; ++c) {
    float lo = inf, hi = -inf;
    for (std::size_t j = 0; j < 40; ++j) {
      lo = std::fmin(lo, p.v.at(j, c));
      hi = std::fmax(hi, p.v.at(j, c));
    }
    for (std::size_t i = 0; i < 33; ++i) {
      ASSERT_TRUE(std::isfinite(p.out.at(i, c))) << i;
      EXPECT_GE(p.out.at(i, c), lo - 1e-6f);
      EXPECT_LE(p.out.at(i, c), hi + 1e-6f);
    }
  }
}

TEST_P(NonFinite, HugeMaskValuesDecideExactly) {
  // A +1e30 mask entry makes its key the only one that counts: the output row is exactly that value row.
  // A −1e30 entry makes its key vanish: the rest is the reference within tolerance.
  NonFiniteProblem p(33, 40, 4, 7);
  for (std::size_t i = 0; i < 33; ++i) p.mask.at(i, (i * 7) % 40) = i % 2 == 0 ? 1e30f : -1e30f;
  ma::AttentionOptions o;
  o.mask = p.mask.cview();
  p.run(*GetParam(), o);
  std::vector<double> want, wabs, sabs;
  ref::attention({p.q.data(), p.q.stride(), p.k.data(), p.k.stride(), p.v.data(), p.v.stride(), 33, 40, 4, 4, 0.0,
                  false, 0, p.mask.data(), p.mask.stride()},
                 want, wabs, sabs);
  for (std::size_t i = 0; i < 33; ++i)
    for (std::size_t c = 0; c < 4; ++c) {
      if (i % 2 == 0) {
        EXPECT_EQ(p.out.at(i, c), p.v.at((i * 7) % 40, c)) << i;
      } else {
        EXPECT_NEAR(p.out.at(i, c), want[i * 4 + c], 1e-6) << i;
      }
    }
}

// ---- finite extremes (issue 12): the math has a finite answer, and the library must return it -----------------

// attention_run on small dense matrices (rows contiguous), through one kernel table.
std::vector<float> run_small(const ma::detail::Kernels& kern, const std::vector<float>& q, const std::vector<float>& k,
                             const std::vector<float>& v, std::size_t d_k, std::size_t d_v,
                             const ma::AttentionOptions& o = {}) {
  const std::size_t n_q = q.size() / d_k, n_kv = k.size() / d_k;
  std::vector<float> out(n_q * d_v, 123.0f), tiles(n_q * d_v, 123.0f), ws(ma::attention_workspace_floats(d_k, d_v));
  ma::detail::attention_run(kern, {q.data(), n_q, d_k, d_k}, {k.data(), n_kv, d_k, d_k}, {v.data(), n_kv, d_v, d_v},
                            {out.data(), n_q, d_v, d_v}, ws.data(), o);
  // These shapes are few-query ones: the query-tile path must give the same answers (within rounding).
  ma::detail::attention_run_tiles(kern, {q.data(), n_q, d_k, d_k}, {k.data(), n_kv, d_k, d_k},
                                  {v.data(), n_kv, d_v, d_v}, {tiles.data(), n_q, d_v, d_v}, ws.data(), o);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const bool same =
        (std::isnan(out[i]) && std::isnan(tiles[i])) || out[i] == tiles[i] ||
        std::fabs(static_cast<double>(out[i]) - tiles[i]) <= 1e-5 * std::fabs(static_cast<double>(out[i]));
    EXPECT_TRUE(same) << "element " << i << ": few-query path " << out[i] << ", tile path " << tiles[i];
  }
  return out;
}

// softmax(scores)·v for one query in double, from the definition (scores already scaled, mask added).
double softmax_dot(const std::vector<double>& scores, const std::vector<double>& v) {
  double m = -INFINITY, l = 0.0, acc = 0.0;
  for (double s : scores) m = std::fmax(m, s);
  for (std::size_t j = 0; j < scores.size(); ++j) {
    const double p = std::exp(scores[j] - m);
    l += p;
    acc += p * v[j];
  }
  return acc / l;
}

constexpr float flt_max = std::numeric_limits<float>::max();

TEST_P(NonFinite, HugeFiniteMaskEntriesAreFinite) {
  // Issue 12 item 1: mask·log2 e overflowed from −2.4e38 on. A −FLT_MAX fill (torch.finfo(float32).min) on
  // every key is a constant shift: the softmax is unchanged. A +FLT_MAX entry makes its key the only one.
  const std::vector<float> q = {0.0f, 0.0f, 0.5f, -0.25f}, k = {1.0f, 2.0f, -1.0f, 0.5f, 0.25f, 3.0f};
  const std::vector<float> v = {1.0f, 2.0f, 6.0f};
  for (float fill : {-flt_max, -3e38f, -2.4e38f, -1e38f}) {
    std::vector<float> mask(6, fill);
    mask[3] = 0.0f;
    mask[4] = flt_max;  // row 1: key 1 at +FLT_MAX
    mask[5] = 0.0f;
    ma::AttentionOptions o;
    o.mask = {mask.data(), 2, 3, 3};
    o.scale = 1.0f;
    const std::vector<float> out = run_small(*GetParam(), q, k, v, 2, 1, o);
    EXPECT_FLOAT_EQ(out[0], 3.0f) << fill;  // q row 0 is zero: equal scores, the average of v
    EXPECT_EQ(out[1], 2.0f) << fill;
  }
  // Distinct scores under a huge fill: the mask is added to the scores in float, as PyTorch does, and a fill
  // of −1e38 or beyond absorbs scores of order 1 (s + mask rounds to mask): the row is uniform over those keys
  // (within the documented bound, whose S_i contains |mask|). A key with a 0 mask entry still wins outright.
  const std::vector<float> q1 = {0.5f, -0.25f};
  for (float fill : {-flt_max, -3e38f, -1e38f}) {
    std::vector<float> mask1(3, fill);
    ma::AttentionOptions o;
    o.mask = {mask1.data(), 1, 3, 3};
    o.scale = 1.0f;
    EXPECT_FLOAT_EQ(run_small(*GetParam(), q1, k, v, 2, 1, o)[0], 3.0f) << fill;
    mask1[2] = 0.0f;
    EXPECT_EQ(run_small(*GetParam(), q1, k, v, 2, 1, o)[0], 6.0f) << fill;
  }
}

TEST_P(NonFinite, HugeScoresDoNotOverflowThePreScaling) {
  // Issue 12 item 2: q·scale·log2 e overflowed although the scores were finite.
  const ma::detail::Kernels& kern = *GetParam();
  {  // q = 3e38, k = {1e−38, 0}: scores 3 and 0
    const std::vector<float> out = run_small(kern, {3e38f}, {1e-38f, 0.0f}, {10.0f, 20.0f}, 1, 1);
    const double want = softmax_dot({3e38 * static_cast<double>(1e-38f), 0.0}, {10, 20});
    EXPECT_NEAR(out[0], want, 1e-5) << "q = 3e38";  // 10.474
  }
  {  // the same with keys below zero: every pre-scaled score was −inf, and the row came out as zeros
    const std::vector<float> out = run_small(kern, {3e38f}, {-1e-38f, -2e-38f}, {10.0f, 20.0f}, 1, 1);
    const double want =
        softmax_dot({-3e38 * static_cast<double>(1e-38f), -3e38 * static_cast<double>(2e-38f)}, {10, 20});
    EXPECT_NEAR(out[0], want, 1e-5) << "q = 3e38, negative keys";
  }
  for (float scale : {2.4e38f, 3e38f, flt_max}) {  // scores 0 and scale·1: the second key alone
    ma::AttentionOptions o;
    o.scale = scale;
    const std::vector<float> out = run_small(kern, {1.0f, 0.0f}, {0.0f, 0.0f, 1.0f, 0.0f}, {10.0f, 20.0f}, 2, 1, o);
    EXPECT_EQ(out[0], 20.0f) << scale;
  }
  {  // q = k = 1.7e19, d = 1, scale 1: a score of 2.89e38 (< FLT_MAX) against 0
    ma::AttentionOptions o;
    o.scale = 1.0f;
    const std::vector<float> out = run_small(kern, {1.7e19f}, {1.7e19f, 0.0f}, {10.0f, 20.0f}, 1, 1, o);
    EXPECT_EQ(out[0], 10.0f);
    const std::vector<float> one = run_small(kern, {1.7e19f}, {1.7e19f}, {7.0f}, 1, 1, o);
    EXPECT_EQ(one[0], 7.0f);
  }
}

TEST_P(NonFinite, WeightedSumOfHugeValuesDoesNotOverflow) {
  // Issue 12 item 3: Σ p·v overflowed before the division by the row sum.
  const ma::detail::Kernels& kern = *GetParam();
  struct Case {
    std::size_t n_kv;
    float v;
  };
  for (Case c : {Case{4, 1e38f}, Case{2, 2e38f}, Case{3, flt_max}, Case{100000, 1e34f}, Case{70, -3e38f}}) {
    const std::vector<float> q(2, 0.0f), k(c.n_kv, 0.0f), v(c.n_kv, c.v);
    const std::vector<float> out = run_small(kern, q, k, v, 1, 1);
    // The contract's bound for these inputs (scores 0): 2·(n_kv + 15)·2⁻²⁴ relative.
    const double tol = std::fabs(c.v) * 2.0 * (static_cast<double>(c.n_kv) + 15.0) * std::ldexp(1.0, -24);
    EXPECT_NEAR(out[0], c.v, tol) << c.n_kv << " × " << c.v;
    EXPECT_NEAR(out[1], c.v, tol) << c.n_kv << " × " << c.v;
  }
  // Opposite signs: 3e38, −3e38, 3e38 averages to 1e38 (the running sum would meet +inf − inf).
  const std::vector<float> out = run_small(kern, {0.0f}, {0.0f, 0.0f, 0.0f}, {3e38f, -3e38f, 3e38f}, 1, 1);
  EXPECT_NEAR(out[0], 1e38, 1e32);
  // A column of huge values next to a column of ordinary ones: each within its own relative bound.
  const std::vector<float> out2 =
      run_small(kern, {0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}, {3e38f, 1.0f, 3e38f, 2.0f, 3e38f, 3.0f, 3e38f, 4.0f}, 1, 2);
  EXPECT_NEAR(out2[0], 3e38, 3e32);
  EXPECT_NEAR(out2[1], 2.5, 1e-6);
}

TEST_P(NonFinite, SubnormalScaleIsExact) {
  // Issue 12 item 4: scale·log2 e was rounded in the subnormal range (the softmax became base 2).
  for (float scale : {std::ldexp(1.0f, -149), 1e-44f, 1e-42f, 1e-40f, 1e-39f}) {
    ma::AttentionOptions o;
    o.scale = scale;
    const std::vector<float> out = run_small(*GetParam(), {3e38f}, {0.0f, 2.4e6f}, {0.0f, 1.0f}, 1, 1, o);
    const double s1 = static_cast<double>(scale) * 3e38 * 2.4e6;
    const double want = softmax_dot({0.0, s1}, {0.0, 1.0});  // 0.73281 for 2^−149
    EXPECT_NEAR(out[0], want, 2.1e-6) << scale;
  }
}

TEST_P(NonFinite, NonFiniteValuesGiveNanInEveryKeyOrder) {
  // Issue 12 item 5: key A (score 0, v = +inf or NaN) and key B (score 200, v = 1) among 130 keys gave NaN with A
  // in the first key block and B in the second, 1 otherwise. The rule: a visible key whose value is NaN or ±inf
  // makes that output column NaN, whatever its probability. A hidden key (mask −inf, causal) never does.
  const ma::detail::Kernels& kern = *GetParam();
  const std::size_t n = 130;
  const std::size_t places[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129};
  for (float bad : {inf, -inf, nan_value})
    for (std::size_t a : places)
      for (std::size_t b : places) {
        if (a == b) continue;
        SCOPED_TRACE(::testing::Message() << "bad=" << bad << " A at " << a << ", B at " << b);
        std::vector<float> k(n, 0.0f), v(2 * n, 0.5f), mask(n, 0.0f);
        k[b] = 200.0f;
        v[2 * a] = bad;  // column 0 of A; column 1 stays finite
        v[2 * b] = 1.0f;
        v[2 * b + 1] = 1.0f;
        ma::AttentionOptions o;
        o.scale = 1.0f;
        const std::vector<float> out = run_small(kern, {1.0f}, k, v, 1, 2, o);
        EXPECT_TRUE(std::isnan(out[0]));
        EXPECT_EQ(out[1], 1.0f);
        mask[a] = -inf;  // A hidden: it cannot leak
        o.mask = {mask.data(), 1, n, n};
        const std::vector<float> hidden = run_small(kern, {1.0f}, k, v, 1, 2, o);
        EXPECT_EQ(hidden[0], 1.0f);
        EXPECT_EQ(hidden[1], 1.0f);
        ma::AttentionOptions c;  // causal: A hidden from the query iff a > offset
        c.scale = 1.0f;
        c.causal = true;
        c.causal_offset = static_cast<std::ptrdiff_t>(a > b ? b : a);
        const std::vector<float> causal = run_small(kern, {1.0f}, k, v, 1, 2, c);
        if (a < b) {  // B hidden, A seen: column 0 NaN
          EXPECT_TRUE(std::isnan(causal[0]));
        } else {  // A hidden, B seen
          EXPECT_EQ(causal[0], 1.0f);
          EXPECT_EQ(causal[1], 1.0f);
        }
      }
}

TEST_P(NonFinite, MaskNanAtAKeyTheCausalRuleHidesHasNoEffect) {
  // Issue 12 item 11: a NaN or +inf mask entry counts only at keys the causal rule lets the query see.
  NonFiniteProblem p(20, 30, 8, 11), clean(20, 30, 8, 11);
  p.mask.at(6, 20) = nan_value;  // hidden from row 6 (6 + 0 < 20)
  p.mask.at(7, 25) = inf;        // hidden from row 7
  p.mask.at(9, 3) = nan_value;   // seen by row 9
  ma::AttentionOptions o, oc;
  o.causal = oc.causal = true;
  o.mask = p.mask.cview();
  oc.mask = clean.mask.cview();
  p.run(*GetParam(), o);
  clean.run(*GetParam(), oc);
  for (std::size_t i = 0; i < 20; ++i) {
    if (i == 9) {
      EXPECT_TRUE(p.row_nan(i));
    } else {
      for (std::size_t c = 0; c < 8; ++c) ASSERT_EQ(p.out.at(i, c), clean.out.at(i, c)) << i;
    }
  }
}

TEST_P(NonFinite, ExactRowPathMeetsTheDocumentedBound) {
  // The exact path against the double reference with the tolerance of every other attention test, on
  // ordinary data: (a) every row, forced by a scale whose scale·log2 e is subnormal (q and k scaled up to
  // keep the scores of order 1); (b) rows whose Σ p·v overflows (v near 1e37, up to 130 keys), dense, causal
  // (both corners) and masked with fully hidden rows.
  std::uint32_t seed = 500;
  for (int mode = 0; mode < 2; ++mode)
    for (std::size_t n_kv : {1, 17, 64, 65, 130})
      for (int layout = 0; layout < 4; ++layout) {
        NonFiniteProblem p(37, n_kv, 9, seed++);
        ma::AttentionOptions o;
        if (mode == 0) {
          o.scale = 4e-39f;  // scale·log2 e < 2^−126
          for (std::size_t i = 0; i < p.n_q; ++i)
            for (std::size_t c = 0; c < p.d; ++c) p.q.at(i, c) *= 1.5e19f;
          for (std::size_t j = 0; j < n_kv; ++j)
            for (std::size_t c = 0; c < p.d; ++c) p.k.at(j, c) *= 1.5e19f;
        } else {
          for (std::size_t j = 0; j < n_kv; ++j)
            for (std::size_t c = 0; c < p.d; ++c) p.v.at(j, c) = p.v.at(j, c) * 1e37f + (c % 2 == 0 ? 3e38f : 0.0f);
        }
        o.causal = layout == 1 || layout == 2;
        o.causal_offset = layout == 2 ? static_cast<std::ptrdiff_t>(n_kv) - 37 : 0;
        if (layout == 3) {
          std::mt19937 rng(seed);
          for (std::size_t i = 0; i < p.n_q; ++i)
            for (std::size_t j = 0; j < n_kv; ++j)
              p.mask.at(i, j) = i % 7 == 3 || rng() % 3 == 0 ? -inf : static_cast<float>(rng() % 100) / 50.0f;
          o.mask = p.mask.cview();
        }
        p.run(*GetParam(), o);
        std::vector<double> want, wabs, sabs;
        ref::attention({p.q.data(), p.q.stride(), p.k.data(), p.k.stride(), p.v.data(), p.v.stride(), p.n_q, n_kv, p.d,
                        p.d, o.scale, o.causal, static_cast<long long>(o.causal_offset),
                        layout == 3 ? p.mask.data() : nullptr, p.mask.stride()},
                       want, wabs, sabs);
        for (std::size_t i = 0; i < p.n_q; ++i) {
          const Tolerance tol = attention_tolerance(p.d, n_kv, sabs[i]);
          for (std::size_t c = 0; c < p.d; ++c)
            ASSERT_TRUE(within(p.out.at(i, c), want[i * p.d + c], wabs[i * p.d + c], tol))
                << "mode " << mode << " n_kv " << n_kv << " layout " << layout << " (" << i << ", " << c
                << "): " << p.out.at(i, c) << " vs " << want[i * p.d + c];
        }
      }
}

INSTANTIATE_TEST_SUITE_P(EveryArch, NonFinite, ::testing::ValuesIn(all_kernel_tables()), kernel_table_name);

TEST(NonFiniteEntry, ReproducersThroughThePublicEntryPoint) {
  // The inputs through attention() itself (the selected kernel table).
  float q[2] = {3e38f, 0.0f}, k[2] = {1e-38f, 0.0f}, v[2] = {10.0f, 20.0f}, out[1] = {0.0f};
  std::vector<float> ws(ma::attention_workspace_floats(1, 1));
  ASSERT_EQ(ma::attention({q, 1, 1, 1}, {k, 2, 1, 1}, {v, 2, 1, 1}, {out, 1, 1, 1}, ws.data(), ws.size()),
            ma::Status::ok);
  EXPECT_NEAR(out[0], 10.474, 1e-3);
  float big[4] = {1e38f, 1e38f, 1e38f, 1e38f}, zeros[4] = {};
  ASSERT_EQ(ma::attention({zeros, 1, 1, 1}, {zeros, 4, 1, 1}, {big, 4, 1, 1}, {out, 1, 1, 1}, ws.data(), ws.size()),
            ma::Status::ok);
  EXPECT_NEAR(out[0], 1e38, 1e32);
}

TEST(NonFiniteLayer, NanTokenReachesOnlyLaterTokensUnderCausalSelfAttention) {
  static std::vector<float> w(32 * 32);
  Uniform u(7, -0.3f, 0.3f);
  for (float& x : w) x = u();
  static ma::MultiHeadAttention<70, 32, 4, 2> layer{
      {w.data(), w.data(), w.data(), w.data(), w.data(), w.data(), w.data(), w.data()}};
  Guarded x(70, 32), y_clean(70, 32), y_dirty(70, 32);
  x.fill(u);
  ma::AttentionOptions o;
  o.causal = true;
  ASSERT_EQ(layer.forward(x.cview(), y_clean.view(), o), ma::Status::ok);
  x.at(40, 9) = std::numeric_limits<float>::quiet_NaN();
  ASSERT_EQ(layer.forward(x.cview(), y_dirty.view(), o), ma::Status::ok);
  for (std::size_t i = 0; i < 70; ++i)
    for (std::size_t c = 0; c < 32; ++c) {
      if (i < 40) {
        ASSERT_EQ(y_dirty.at(i, c), y_clean.at(i, c)) << i << "," << c;
      } else {
        ASSERT_TRUE(std::isnan(y_dirty.at(i, c))) << i << "," << c;
      }
    }
}

}  // namespace
