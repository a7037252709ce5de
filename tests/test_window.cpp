// AttentionOptions::window: every kernel table against the double reference, causal (Mistral's sliding window)
// and not (local attention), with offsets that move the window over and beyond the keys, window 1, windows
// at and past n_kv, over lengths that cross the query-tile, key-block and vector edges; the visibility rule
// itself against the definition; skipped key blocks shown by a NaN in a key that no query may see.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention_harness.hpp"

namespace ma = microattn;
using namespace testing_support;

namespace {

// Window cases: one head size for q, k and v, padded rows, q and v misaligned.
AttentionCase window_case(std::size_t n_q, std::size_t n_kv, std::size_t d, bool causal, long long offset,
                          std::size_t window, bool mask = false) {
  return {n_q, n_kv, d, d, causal, offset, window, mask ? 1 : 0, 1, true};
}

class WindowKernel : public ::testing::TestWithParam<const ma::detail::Kernels*> {};

TEST_P(WindowKernel, CausalSlidingWindowSweep) {
  std::uint32_t seed = 1;
  for (std::size_t n : {1, 5, 31, 33, 70, 200})
    for (std::size_t window : {1, 2, 3, 16, 17, 40, 64, 65, 199, 200, 1000}) {
      run_attention_case(GetParam(), window_case(n, n, 16, true, 0, window), seed++);  // top-left, as a full forward
      run_attention_case(GetParam(), window_case(n, n + 37, 16, true, 37, window), seed++);  // bottom-right: decoding
    }
}

TEST_P(WindowKernel, LocalAttentionSweep) {
  std::uint32_t seed = 100;
  for (std::size_t n_q : {1, 4, 33, 70})
    for (std::size_t n_kv : {1, 17, 64, 130})
      for (std::size_t window : {1, 3, 16, 65, 500})
        run_attention_case(GetParam(), window_case(n_q, n_kv, 8, false, static_cast<long long>(n_kv / 3), window),
                           seed++);
}

TEST_P(WindowKernel, OffsetsMovingTheWindowOverAndBeyondTheKeys) {
  std::uint32_t seed = 200;
  constexpr long long pmax = std::numeric_limits<std::ptrdiff_t>::max();
  constexpr long long pmin = std::numeric_limits<std::ptrdiff_t>::min();
  for (long long off : {pmin, -1000LL, -75LL, -40LL, -3LL, 5LL, 60LL, 69LL, 70LL, 90LL, 1000LL, pmax})
    for (std::size_t window : {1, 7, 50}) {
      run_attention_case(GetParam(), window_case(40, 70, 16, true, off, window), seed++);
      run_attention_case(GetParam(), window_case(40, 70, 16, false, off, window), seed++);
    }
  // Windows so large that with a huge offset they still reach back into the keys (no overflow anywhere).
  const std::size_t huge = static_cast<std::size_t>(pmax);
  for (std::size_t window : {huge - 10, huge, huge + 1, huge + 20, std::numeric_limits<std::size_t>::max()})
    for (long long off : {pmax, pmax - 30, pmin, pmin + 5}) {
      run_attention_case(GetParam(), window_case(40, 70, 8, true, off, window), seed++);
      run_attention_case(GetParam(), window_case(40, 70, 8, false, off, window), seed++);
    }
}

TEST_P(WindowKernel, WithMasks) {
  std::uint32_t seed = 300;
  for (std::size_t window : {1, 9, 33}) {
    run_attention_case(GetParam(), window_case(45, 80, 16, true, 35, window, true), seed++);
    run_attention_case(GetParam(), window_case(45, 80, 16, false, 20, window, true), seed++);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryArch, WindowKernel, ::testing::ValuesIn(all_kernel_tables()), kernel_table_name);

TEST(Window, EntryPointHeadSizes) {
  std::uint32_t seed = 400;
  for (std::size_t d : {1, 24, 64, 80})
    for (std::size_t window : {4, 40}) {
      run_attention_case(nullptr, window_case(50, 300, d, true, 250, window), seed++);
      run_attention_case(nullptr, window_case(64, 64, d, false, 0, window), seed++);
    }
}

TEST(Window, VisibleKeysIsTheDefinition) {
  // The library's interval against the reference's per-key predicate, including saturating cases.
  constexpr long long pmax = std::numeric_limits<std::ptrdiff_t>::max();
  const std::size_t n_kv = 40;
  for (bool causal : {false, true})
    for (long long off : {-50LL, -41LL, -40LL, -39LL, -5LL, -1LL, 0LL, 1LL, 17LL, 39LL, 40LL, 41LL, 80LL, pmax,
                          pmax - 3, -pmax, -pmax - 1})
      for (std::size_t window :
           {static_cast<std::size_t>(0), static_cast<std::size_t>(1), static_cast<std::size_t>(2),
            static_cast<std::size_t>(13), static_cast<std::size_t>(39), static_cast<std::size_t>(40),
            static_cast<std::size_t>(41), static_cast<std::size_t>(pmax), static_cast<std::size_t>(pmax) + 2,
            std::numeric_limits<std::size_t>::max()})
        for (std::size_t i = 0; i < 30; ++i) {
          ma::AttentionOptions o;
          o.causal = causal;
          o.causal_offset = static_cast<std::ptrdiff_t>(off);
          o.window = window;
          const ma::detail::KeyRange r = ma::detail::visible_keys(i, n_kv, o);
          for (std::size_t j = 0; j < n_kv; ++j)
            ASSERT_EQ(j >= r.lo && j < r.hi, ref::visible(i, j, causal, off, window))
                << "causal=" << causal << " off=" << off << " window=" << window << " i=" << i << " j=" << j;
          // Rows from `first` on, with advance_rows (in steps of 3, as the layers' tiles), see what they saw as
          // rows of the whole call.
          for (std::size_t first : {3, 9}) {
            if (i < first) continue;
            ma::AttentionOptions shifted = o;
            for (std::size_t step = 0; step < first; step += 3) ma::detail::advance_rows(shifted, 3);
            const ma::detail::KeyRange s = ma::detail::visible_keys(i - first, n_kv, shifted);
            const bool empty_r = r.lo >= r.hi, empty_s = s.lo >= s.hi;
            ASSERT_EQ(empty_r, empty_s);
            if (!empty_r) {
              ASSERT_TRUE(r.lo == s.lo && r.hi == s.hi) << "first=" << first;
            }
          }
        }
}

TEST(Window, KeyBlocksOutsideEveryWindowAreNotComputed) {
  // A NaN in a key no query sees: skipped blocks never meet it, and a hidden score is −inf, not NaN, even in a
  // block that is computed. So no output is NaN.
  const std::size_t n = 300, d = 16;
  for (bool causal : {false, true}) {
    Guarded q(n, d), k(n, d), v(n, d), out(n, d);
    Uniform u(500);
    q.fill(u);
    k.fill(u);
    v.fill(u);
    ma::AttentionOptions o;
    o.causal = causal;
    o.causal_offset = causal ? 0 : 0;
    o.window = 8;
    // Query i sees keys up to i + 7 (local) or i (causal): key 299 is seen by queries >= 292; poison key 150's
    // V only for rows that do not see it, i.e. checks rows far away stay finite.
    k.at(150, 3) = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> ws(ma::attention_workspace_floats(d, d));
    ASSERT_EQ(ma::attention(q.cview(), k.cview(), v.cview(), out.view(), ws.data(), ws.size(), o), ma::Status::ok);
    for (std::size_t i = 0; i < n; ++i) {
      const bool sees = causal ? (i >= 150 && i < 158) : (i + 8 > 150 && i < 158);
      EXPECT_EQ(std::isnan(out.at(i, 0)), sees) << "row " << i << " causal " << causal;
    }
  }
}

}  // namespace
