// libFuzzer target: matmul(a, b, c, transpose_b).
//
// Input bytes, in order (missing bytes read as 0, which decodes to a valid 1×1×1 product):
//   seed (4) | m, k, n (dim; k and n reach the 256 × 128 block edges) | flags: bit 0 transpose_b, bit 1 also run
//   the scalar kernel table | a, b, c: pad, gap | c placement: mode (0-4, see place_over), delta (int8), over a or b |
//   mutations | a values, b values (style, range) | specials (into a or b)
// Checks: the Status the contract prescribes (null, then shapes, then overlap); on error the arena untouched; on
// success every element of c whose row of a and column of b hold no huge finite value agrees with the double
// reference within dot_tolerance(k) (NaN and ±inf propagate as in IEEE arithmetic), and nothing but c is written.
#include <cstdint>
#include <vector>

#include "fuzz_support.hpp"
#include "kernels/attention.hpp"
#include "reference.hpp"

namespace {

using namespace fuzz;
using S = ma::Status;

constexpr float limit = 1e6f;  // finite values beyond this are wild: their products may overflow a float

S expected_status(const Mat& a, const Mat& b, const Mat& c, bool tb) {
  if (a.null || b.null || c.null) return S::null_pointer;
  if (!shape_ok(a) || !shape_ok(b) || !shape_ok(c)) return S::invalid_shape;
  const std::size_t inner = tb ? b.cols : b.rows, n = tb ? b.rows : b.cols;
  if (inner != a.cols || c.rows != a.rows || c.cols != n) return S::invalid_shape;
  if (overlaps(c, a) || overlaps(c, b)) return S::aliasing;
  return S::ok;
}

void check_product(Arena& arena, const Mat& a, const Mat& b, const Mat& c, bool tb, const std::vector<double>& want,
                   const std::vector<double>& abs_want, const char* what) {
  arena.clear_writable();
  arena.writable(c);
  arena.expect_untouched(what);
  expect_written(arena, c, what);
  const std::size_t m = a.rows, k = a.cols, n = c.cols;
  std::vector<bool> row_wild(m, false), col_wild(n, false);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < k; ++p) {
      const float x = arena.elem(a, i, p);
      if (x - x == 0.0f && !tame(x, limit)) row_wild[i] = true;
    }
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t p = 0; p < k; ++p) {
      const float x = tb ? arena.elem(b, j, p) : arena.elem(b, p, j);
      if (x - x == 0.0f && !tame(x, limit)) col_wild[j] = true;
    }
  const Tolerance tol = testing_support::dot_tolerance(k);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (!row_wild[i] && !col_wild[j])
        expect_within(arena.elem(c, i, j), want[i * n + j], abs_want[i * n + j], tol, what, i, j);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  Rng rng{in.u32()};
  const std::size_t m = dim(in), k = dim(in, true), n = dim(in, true);
  const std::size_t flags = in.byte();
  const bool tb = (flags & 1u) != 0, also_scalar = (flags & 2u) != 0;

  std::size_t cursor = 0;
  Mat a = place(cursor, m, k, pad(in), gap(in));
  Mat b = tb ? place(cursor, n, k, pad(in), gap(in)) : place(cursor, k, n, pad(in), gap(in));
  Mat c = place(cursor, m, n, pad(in), gap(in));
  const std::size_t mode = in.below(8);
  const int delta = static_cast<std::int8_t>(in.byte());
  const Mat& target = in.flag() ? b : a;
  place_over(c, target, mode, delta);
  const Mat a_fill = a, b_fill = b, c_fill = c;
  mutate(in, {&a, &b, &c}, true);

  static Arena arena;
  arena.reset(arena_floats({&a, &b, &c, &a_fill, &b_fill, &c_fill}));
  arena.fill_value(c_fill, from_bits(poison_bits));
  static constexpr float ranges[] = {1.0f, 1.0f, 1.0f, 0.5f, 10.0f, 1e4f, 1e-20f};
  const Values va = values(in, ranges, 7), vb = values(in, ranges, 7);
  fill(arena, a_fill, rng, va);
  fill(arena, b_fill, rng, vb);
  write_specials(in, arena, {&a_fill, &b_fill});
  arena.snapshot();

  const S want = expected_status(a, b, c, tb);
  if (want == S::ok && !(arena.contains(a) && arena.contains(b) && arena.contains(c)))
    return 0;  // a mutated yet valid view reaching past the arena: not a call this harness can check
  set_context("matmul m=%zu k=%zu n=%zu transpose_b=%d a{%zu,%zu,%zu,%zu%s} b{%zu,%zu,%zu,%zu%s} c{%zu,%zu,%zu,%zu%s}",
              m, k, n, tb, a.offset, a.rows, a.cols, a.stride, a.null ? ",null" : "", b.offset, b.rows, b.cols,
              b.stride, b.null ? ",null" : "", c.offset, c.rows, c.cols, c.stride, c.null ? ",null" : "");

  std::vector<double> ref_c, ref_abs;
  if (want == S::ok)
    ref::matmul(arena.at(a.offset), a.stride, arena.at(b.offset), b.stride, tb, a.rows, c.cols, a.cols, ref_c, ref_abs);

  const S got = ma::matmul(arena.view<const float>(a), arena.view<const float>(b), arena.view<float>(c), tb);
  expect_status(got, want, "matmul status");
  if (got != S::ok) {
    arena.clear_writable();
    arena.expect_untouched("matmul error");
    return 0;
  }
  check_product(arena, a, b, c, tb, ref_c, ref_abs, "matmul");

  if (also_scalar) {
    arena.restore();
    // the strides matmul() hands the kernels: a one-row view's stride is its column count
    const auto step = [](const Mat& v) { return v.rows == 1 ? v.cols : v.stride; };
    const ma::detail::GemmArgs g{arena.at(a.offset),
                                 step(a),
                                 arena.at(b.offset),
                                 step(b),
                                 tb,
                                 arena.at(c.offset),
                                 step(c),
                                 a.rows,
                                 c.cols,
                                 a.cols};
    ma::detail::scalar_kernels().gemm(g);
    check_product(arena, a, b, c, tb, ref_c, ref_abs, "scalar gemm");
  }
  return 0;
}
