// The attention comparison harness: one case type, one way to lay out and fill its operands (strided,
// misaligned, canary-guarded), one call through a kernel table or the entry point, one double reference
// (reference.hpp) and one comparison with the tolerance policy and the canary checks. test_attention.cpp,
// test_few_queries.cpp and test_window.cpp describe cases; this runs them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "attention_run.hpp"
#include "reference.hpp"
#include "test_support.hpp"

namespace testing_support {

struct AttentionCase {
  std::size_t n_q, n_kv, d_k, d_v;
  bool causal = false;
  long long offset = 0;  // causal_offset (and the window's centre)
  std::size_t window = 0;
  int mask = 0;  // 0: none; 1: random finite / −inf entries, every 7th row (from row 3) fully hidden
  // Row padding of the operands (k gets twice as much) and whether q, v, mask and the workspace sit one float
  // off their allocation (k and out then do not, so both alignments meet).
  std::size_t pad = 0;
  bool misalign = false;
  float scale = 0.0f;        // 0: the default 1/sqrt(d_k)
  float value_range = 1.0f;  // q, k, v uniform in [−value_range, value_range]
};

inline ::testing::Message describe(const char* path, const AttentionCase& c) {
  return ::testing::Message() << path << " n_q=" << c.n_q << " n_kv=" << c.n_kv << " d_k=" << c.d_k << " d_v=" << c.d_v
                              << " causal=" << c.causal << " offset=" << c.offset << " window=" << c.window
                              << " mask=" << c.mask << " pad=" << c.pad << " misalign=" << c.misalign
                              << " scale=" << c.scale << " range=" << c.value_range;
}

// Output rows of one attention call (row stride ldo) against the reference's out / weighted_abs / score_abs
// (reference.hpp), element by element with attention_tolerance; reports the first few misses.
inline ::testing::AssertionResult attention_near(const float* out, std::size_t ldo, std::size_t n_q, std::size_t d_k,
                                                 std::size_t d_v, std::size_t n_kv, const std::vector<double>& want,
                                                 const std::vector<double>& wabs, const std::vector<double>& sabs) {
  std::size_t bad = 0;
  ::testing::AssertionResult res = ::testing::AssertionSuccess();
  for (std::size_t i = 0; i < n_q; ++i) {
    const Tolerance tol = attention_tolerance(d_k, n_kv, sabs[i]);
    for (std::size_t col = 0; col < d_v; ++col) {
      const double w = want[i * d_v + col], got = out[i * ldo + col];
      if (within(got, w, wabs[i * d_v + col], tol)) continue;
      if (bad == 0) res = ::testing::AssertionFailure();
      if (bad < 5)
        res << "out(" << i << "," << col << ") = " << got << ", reference " << w << ", allowed ±"
            << tol.rel * wabs[i * d_v + col] + tol.abs << "; ";
      ++bad;
    }
  }
  if (bad) res << bad << " element(s) out of tolerance";
  return res;
}

// The operands of one case, filled from a seed, and the call and check.
struct AttentionProblem {
  AttentionCase c;
  Guarded q, k, v, mask, out, ws;

  AttentionProblem(const AttentionCase& cs, std::uint32_t seed, std::size_t ws_floats = 0)
      : c(cs),
        q(cs.n_q, cs.d_k, cs.d_k + cs.pad, cs.misalign),
        k(cs.n_kv, cs.d_k, cs.d_k + 2 * cs.pad, !cs.misalign),
        v(cs.n_kv, cs.d_v, cs.d_v + cs.pad, cs.misalign),
        mask(cs.n_q, cs.n_kv, 0, cs.misalign),  // zeros without a mask (tests may read it either way)
        out(cs.n_q, cs.d_v, cs.d_v + cs.pad, !cs.misalign),
        ws(1, ws_floats != 0 ? ws_floats : microattn::attention_workspace_floats(cs.d_k, cs.d_v), 0, cs.misalign) {
    Uniform u(seed, -c.value_range, c.value_range);
    q.fill(u);
    k.fill(u);
    v.fill(u);
    out.fill_value(777.0f);
    ws.fill_value(555.0f);
    mask.fill_value(0.0f);
    if (c.mask) {
      std::mt19937 rng(seed + 1);
      for (std::size_t i = 0; i < c.n_q; ++i)
        for (std::size_t j = 0; j < c.n_kv; ++j)
          mask.at(i, j) = i % 7 == 3 || rng() % 4 == 0 ? -std::numeric_limits<float>::infinity()
                                                       : static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    }
  }

  microattn::AttentionOptions options() const {
    microattn::AttentionOptions o;
    o.scale = c.scale;
    o.causal = c.causal;
    o.causal_offset = static_cast<std::ptrdiff_t>(c.offset);
    o.window = c.window;
    if (c.mask) o.mask = mask.cview();
    return o;
  }

  // Through one kernel table (after attention_check, as the entry point does) or, with kernels == nullptr,
  // through attention() with the workspace's size.
  ::testing::AssertionResult run(const microattn::detail::Kernels* kernels) {
    const microattn::AttentionOptions o = options();
    microattn::Status s;
    if (kernels != nullptr) {
      s = microattn::detail::attention_check(q.cview(), k.cview(), v.cview(), out.view(), o);
      if (s == microattn::Status::ok)
        microattn::detail::attention_run(*kernels, q.cview(), k.cview(), v.cview(), out.view(), ws.data(), o);
    } else {
      s = microattn::attention(q.cview(), k.cview(), v.cview(), out.view(), ws.data(), ws.cols(), o);
    }
    if (s != microattn::Status::ok) return ::testing::AssertionFailure() << "status " << static_cast<int>(s);
    return ::testing::AssertionSuccess();
  }

  void reference(std::vector<double>& want, std::vector<double>& wabs, std::vector<double>& sabs) const {
    ref::AttentionCase rc{
        q.data(),     q.stride(), k.data(), k.stride(), v.data(), v.stride(), c.n_q,
        c.n_kv,       c.d_k,      c.d_v,    c.scale,    c.causal, c.offset,   c.mask ? mask.data() : nullptr,
        mask.stride()};
    rc.window = c.window;
    ref::attention(rc, want, wabs, sabs);
  }

  // Output against the reference; nothing written around the output or past the workspace.
  void check() const {
    std::vector<double> want, wabs, sabs;
    reference(want, wabs, sabs);
    EXPECT_TRUE(attention_near(out.data(), out.stride(), c.n_q, c.d_k, c.d_v, c.n_kv, want, wabs, sabs));
    EXPECT_TRUE(out.canaries_intact()) << "out";
    EXPECT_TRUE(ws.canaries_intact()) << "workspace";
  }
};

// One case end to end: kernels == nullptr takes the entry point.
inline void run_attention_case(const microattn::detail::Kernels* kernels, const AttentionCase& c, std::uint32_t seed) {
  SCOPED_TRACE(describe(kernels != nullptr ? kernels->arch : "attention()", c));
  AttentionProblem p(c, seed);
  ASSERT_TRUE(p.run(kernels));
  p.check();
}

}  // namespace testing_support
