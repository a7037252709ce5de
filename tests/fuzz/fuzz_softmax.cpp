// libFuzzer target: softmax_rows(x) and exp_elements(x, y, n).
//
// Input bytes, in order (missing bytes read as 0):
//   seed (4) | flags: bit 0 exp_elements (else softmax_rows), bit 1 also run the scalar kernel table | then
//   softmax_rows: rows, cols (dim; cols reach 257) | pad, gap | mutations | values (style, range) | specials
//   exp_elements: n (dim, up to 257) | x gap | y placement: 0 own array, 1 in place (y = x), 2 y = x + delta |
//                 delta (int8) | argument mutation (null x / null y / n = 0 / n overflowing) | values: style 0-3
//                 as fill(), 4 raw float bit patterns, 5 runs of consecutive floats around the range edges | range |
//                 specials
// Checks: the contract's Status (exp: n = 0 first, then null, then n, then partial overlap) and an untouched arena
// on error; on success nothing but the output written, and
//   softmax: a row holding NaN or +inf is all NaN; any other row is within softmax_tolerance(n, spread) of the
//            long-double reference (−inf entries give 0, all −inf gives zeros);
//   exp:     NaN → NaN, −inf → 0, results above FLT_MAX → +inf, normal results within exp_max_ulp ULP, subnormal
//            ones within one subnormal step (2⁻¹²⁶ where the kernel table flushes subnormals).
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "fuzz_support.hpp"
#include "kernels/attention.hpp"
#include "reference.hpp"

namespace {

using namespace fuzz;
using S = ma::Status;
constexpr float inf = std::numeric_limits<float>::infinity();

// ---- softmax_rows --------------------------------------------------------------------------------------------

struct SoftmaxWant {
  std::vector<std::vector<double>> rows;
  std::vector<double> spread;
  std::vector<bool> bad;  // NaN or +inf in the row: all NaN
};

SoftmaxWant softmax_reference(Arena& arena, const Mat& x) {
  SoftmaxWant w;
  w.rows.resize(x.rows);
  w.spread.assign(x.rows, 0.0);
  w.bad.assign(x.rows, false);
  for (std::size_t r = 0; r < x.rows; ++r) {
    const float* row = &arena.elem(x, r, 0);
    ref::softmax_row(row, x.cols, w.rows[r]);
    float mx = -inf;
    for (std::size_t c = 0; c < x.cols; ++c) {
      mx = std::fmax(mx, row[c]);
      if (std::isnan(row[c]) || row[c] == inf) w.bad[r] = true;
    }
    for (std::size_t c = 0; c < x.cols; ++c)
      if (std::isfinite(row[c])) w.spread[r] = std::fmax(w.spread[r], std::fabs(static_cast<double>(mx) - row[c]));
  }
  return w;
}

void check_softmax(Arena& arena, const Mat& x, const SoftmaxWant& w, const char* what) {
  arena.clear_writable();
  arena.writable(x);
  arena.expect_untouched(what);
  for (std::size_t r = 0; r < x.rows; ++r) {
    const Tolerance tol = testing_support::softmax_tolerance(x.cols, w.spread[r]);
    for (std::size_t c = 0; c < x.cols; ++c) {
      const float got = arena.elem(x, r, c);
      if (w.bad[r]) {
        if (!std::isnan(got)) fail("%s (%zu, %zu): %g in a row holding NaN or +inf (must be NaN)", what, r, c, got);
      } else {
        expect_within(got, w.rows[r][c], w.rows[r][c], tol, what, r, c);
      }
    }
  }
}

int run_softmax(Reader& in, Rng& rng, bool also_scalar) {
  const std::size_t rows = dim(in), cols = dim(in, true);
  std::size_t cursor = 0;
  Mat x = place(cursor, rows, cols, pad(in), gap(in));
  const Mat x_fill = x;
  mutate(in, {&x}, true);
  static Arena arena;
  arena.reset(arena_floats({&x, &x_fill}));
  static constexpr float ranges[] = {1.0f, 1.0f, 10.0f, 100.0f, 1e4f, 1e30f, 1e-20f};
  fill(arena, x_fill, rng, values(in, ranges, 7));
  write_specials(in, arena, {&x_fill});
  arena.snapshot();

  S want = S::ok;
  if (x.null)
    want = S::null_pointer;
  else if (!shape_ok(x))
    want = S::invalid_shape;
  if (want == S::ok && !arena.contains(x)) return 0;
  set_context("softmax_rows x{%zu,%zu,%zu,%zu%s}", x.offset, x.rows, x.cols, x.stride, x.null ? ",null" : "");

  SoftmaxWant w;
  if (want == S::ok) w = softmax_reference(arena, x);
  const S got = ma::softmax_rows(arena.view<float>(x));
  expect_status(got, want, "softmax_rows status");
  if (got != S::ok) {
    arena.clear_writable();
    arena.expect_untouched("softmax_rows error");
    return 0;
  }
  check_softmax(arena, x, w, "softmax_rows");
  if (also_scalar) {
    arena.restore();
    for (std::size_t r = 0; r < x.rows; ++r) ma::detail::scalar_kernels().softmax_row(&arena.elem(x, r, 0), x.cols);
    check_softmax(arena, x, w, "scalar softmax_row");
  }
  return 0;
}

// ---- exp_elements ----------------------------------------------------------------------------------------------

void check_exp(Arena& arena, const Mat& y, const std::vector<float>& xs, bool flushes, const char* what) {
  arena.clear_writable();
  arena.writable(y);
  arena.expect_untouched(what);
  expect_written(arena, y, what);
  const double min_normal = FLT_MIN;
  const double overflow = FLT_MAX * (1.0 + testing_support::unit_roundoff);
  const Tolerance subnormal{0.0, std::ldexp(1.0, flushes ? -126 : -149)};
  const Tolerance normal{static_cast<double>(ma::exp_max_ulp), 0.0};
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const float x = xs[i], got = arena.elem(y, 0, i);
    if (std::isnan(x)) {
      if (!std::isnan(got)) fail("%s [%zu]: exp(NaN) = %g, must be NaN", what, i, got);
      continue;
    }
    if (x == -inf) {
      if (got != 0.0f) fail("%s [%zu]: exp(-inf) = %g, must be 0", what, i, got);
      continue;
    }
    const double exact = ref::exp(x);
    if (exact > overflow) {
      if (got != inf) fail("%s [%zu]: exp(%.9g) = %g, must overflow to +inf", what, i, x, got);
    } else if (exact >= min_normal) {
      int e;
      std::frexp(exact, &e);
      expect_within(got, exact, std::ldexp(1.0, e - 24), normal, what, 0, i);  // scale: one ULP at exact
    } else {
      expect_within(got, exact, 0.0, subnormal, what, 0, i);
    }
  }
}

int run_exp(Reader& in, Rng& rng, bool also_scalar) {
  std::size_t n = dim(in, true);
  std::size_t cursor = 0;
  Mat x = place(cursor, 1, n, 0, gap(in));
  Mat y = place(cursor, 1, n, 0, gap(in));
  const std::size_t mode = in.below(3);
  const int delta = static_cast<std::int8_t>(in.byte());
  if (mode == 1) place_over(y, x, 1, 0);
  if (mode == 2) place_over(y, x, 2, delta);
  const std::size_t mutation = in.byte();
  if (mutation >= 176) {
    switch (mutation % 6) {
      case 0:
        x.null = true;
        break;
      case 1:
        y.null = true;
        break;
      case 2:
        x.null = y.null = true;
        break;
      case 3:
        n = 0;
        break;
      case 4:
        n = std::numeric_limits<std::size_t>::max() / 2;
        break;
      default:
        n = std::numeric_limits<std::size_t>::max();
        break;
    }
  }
  static Arena arena;
  arena.reset(arena_floats({&x, &y}));
  arena.fill_value(y, from_bits(poison_bits));
  const std::size_t style = in.below(6);
  static constexpr float ranges[] = {1.0f, 10.0f, 88.7f, 104.0f, 120.0f, 200.0f};
  Values v;
  v.style = style % 4;
  v.range = ranges[in.below(6)];
  if (style < 4) {
    fill(arena, x, rng, v);
  } else if (style == 4) {
    for (std::size_t i = 0; i < x.cols; ++i) arena.elem(x, 0, i) = from_bits(static_cast<std::uint32_t>(rng.next()));
  } else {
    static constexpr float edges[] = {88.72283f, -87.33654f, -103.9721f, 0.0f, 0.34657359f, -0.34657359f};
    float f = edges[rng.next() % 6];
    for (int k = static_cast<int>(rng.next() % 4000) - 2000; k != 0; k += k > 0 ? -1 : 1)
      f = std::nextafter(f, k > 0 ? inf : -inf);
    for (std::size_t i = 0; i < x.cols; ++i) arena.elem(x, 0, i) = f = std::nextafter(f, inf);
  }
  write_specials(in, arena, {&x});
  arena.snapshot();

  // The contract: n == 0 is a valid empty call whatever the pointers; then null, then n, then partial overlap.
  S want = S::ok;
  if (n == 0)
    want = S::ok;
  else if (x.null || y.null)
    want = S::null_pointer;
  else if (static_cast<unsigned __int128>(n) * sizeof(float) >
           static_cast<unsigned __int128>(std::numeric_limits<std::ptrdiff_t>::max()))
    want = S::invalid_shape;
  else if (x.offset != y.offset && x.offset < y.offset + n && y.offset < x.offset + n)
    want = S::aliasing;
  set_context("exp_elements n=%zu x{%zu%s} y{%zu%s}", n, x.offset, x.null ? ",null" : "", y.offset,
              y.null ? ",null" : "");

  std::vector<float> xs;
  if (want == S::ok && n != 0) xs.assign(arena.at(x.offset), arena.at(x.offset) + n);
  const S got = ma::exp_elements(x.null ? nullptr : arena.at(x.offset), y.null ? nullptr : arena.at(y.offset), n);
  expect_status(got, want, "exp_elements status");
  if (got != S::ok || n == 0) {
    arena.clear_writable();
    arena.expect_untouched(got != S::ok ? "exp_elements error" : "exp_elements n = 0");
    return 0;
  }
  check_exp(arena, y, xs, ma::detail::selected_kernels().flushes_subnormals, "exp_elements");
  if (also_scalar) {
    arena.restore();
    ma::detail::scalar_kernels().exp(arena.at(x.offset), arena.at(y.offset), n);
    check_exp(arena, y, xs, ma::detail::scalar_kernels().flushes_subnormals, "scalar exp");
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  Rng rng{in.u32()};
  const std::size_t flags = in.byte();
  const bool also_scalar = (flags & 2u) != 0;
  return (flags & 1u) != 0 ? run_exp(in, rng, also_scalar) : run_softmax(in, rng, also_scalar);
}
