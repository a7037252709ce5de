// Non-finite values stay contained (README "Non-finite values"): a NaN or ±inf in query row i reaches only
// output row i; in key/value row j only the rows that see j (causal, mask); fully hidden rows are zeros; huge
// finite inputs do not overflow. Every kernel table of the build runs these.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attention_run.hpp"
#include "reference.hpp"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
const float nan_value = std::numeric_limits<float>::quiet_NaN();

struct Problem {
  std::size_t n_q, n_kv, d;
  Guarded q, k, v, mask, out;
  std::vector<float> ws;
  Problem(std::size_t nq, std::size_t nkv, std::size_t dd, std::uint32_t seed)
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
    Problem p(40, 70, 16, 1);
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
      Problem clean(80, 80, 16, 2), dirty(80, 80, 16, 2);
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
  Problem clean(20, 30, 8, 3), dirty(20, 30, 8, 3);
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
  Problem p(20, 30, 8, 4);
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
  Problem p(40, 50, 16, 5);
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
  Problem p(33, 40, 4, 6);
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
  Problem p(33, 40, 4, 7);
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

INSTANTIATE_TEST_SUITE_P(EveryArch, NonFinite, ::testing::ValuesIn(all_kernel_tables()), kernel_table_name);

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
