// libFuzzer target: attention(q, k, v, out, workspace, workspace_floats, options).
//
// Input bytes, in order (missing bytes read as 0, which decodes to a valid 1×1 dense call):
//   seed (4) | n_q, n_kv, d_k, d_v (dim) | flags: bit 0 causal, bit 1 mask, bit 2 also run the scalar kernel table,
//   bits 3–5 the window (0, 1, 2, 5, 16, 33, 64, about SIZE_MAX / 2) |
//   scale (0 = default, positive, negative, NaN, +inf, 1e30) | causal offset kind, byte (0, n_kv − n_q, ±n_q, n_kv,
//   one beyond, PTRDIFF_MIN/MAX and their neighbours, small) | q, k, v, out, mask: pad, gap |
//   workspace: size (exact, one less, more, 0, SIZE_MAX, half), gap, null | out placement: mode, delta, over q/k/v/mask
//   | workspace placement: mode (own, over, just after, just before), delta, target | mutations (q, k, v, out, mask) |
//   q, k, v values (style, range) | mask: share of −inf, period of fully hidden rows, range | specials (q, k, v, mask)
// Checks:
//  - the Status of the documented check order: null pointers (a null mask is no mask), shapes (zero, stride < cols,
//    overflowing extent, k.cols != d_k, v.rows != n_kv, out not n_q × d_v, head size > attention_max_head_dim, mask
//    not n_q × n_kv), then workspace size, then overlap (out or the first attention_workspace_floats(d_k, d_v)
//    floats of the workspace against q, k, v, the mask, and each other); on error the arena bit-for-bit untouched;
//  - on success nothing written but out and those workspace floats, every element of out written;
//  - a query that sees no key (causal and −inf mask) gets exact zeros; NaN in its q row, NaN in the k row of a key
//    it sees, NaN or +inf in its mask at a key it sees, or a NaN scale makes its row NaN;
//  - a query whose q row, visible k rows and visible mask entries are tame (finite, |x| <= 1e6), with a tame
//    non-negative scale, gets out[i][c] within attention_tolerance of the reference wherever column c of its visible
//    v rows is tame (a negative scale: finite). Values that no query sees are replaced by 0 for the reference, so
//    the comparison covers exactly what the contract promises (NaN in row j of k only reaches the rows that see j).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention_run.hpp"
#include "fuzz_support.hpp"
#include "kernels/attention.hpp"
#include "reference.hpp"

namespace {

using namespace fuzz;
using S = ma::Status;
constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float limit = 1e6f;

struct Call {
  Mat q, k, v, out, mask, ws;  // ws: the physical workspace (1 × floats)
  bool has_mask = false, ws_null = false;
  std::size_t ws_floats = 0;  // what the library is told
  ma::AttentionOptions options;
};

bool mask_given(const Call& c) { return c.has_mask && !c.mask.null; }

// The workspace floats attention() may use, given the (valid) head sizes.
Mat workspace_used(const Call& c) {
  const std::size_t need = ma::attention_workspace_floats(c.q.cols, c.v.cols);
  Mat w;
  w.offset = c.ws.offset;
  w.rows = 1;
  w.cols = w.stride = need;
  return w;
}

// The documented order: null pointers, then shapes, then the workspace size, then overlap. (The library checks the
// output's overlaps before the workspace size: see CHANGELOG.md and the corpus's repro-check-order-* input.)
S expected_status(const Call& c) {
  if (c.ws_null || c.q.null || c.k.null || c.v.null || c.out.null) return S::null_pointer;
  if (!shape_ok(c.q) || !shape_ok(c.k) || !shape_ok(c.v) || !shape_ok(c.out)) return S::invalid_shape;
  if (c.k.cols != c.q.cols || c.v.rows != c.k.rows || c.out.rows != c.q.rows || c.out.cols != c.v.cols)
    return S::invalid_shape;
  if (c.q.cols > ma::attention_max_head_dim || c.v.cols > ma::attention_max_head_dim) return S::invalid_shape;
  const bool mask = mask_given(c);
  if (mask && (!shape_ok(c.mask) || c.mask.rows != c.q.rows || c.mask.cols != c.k.rows)) return S::invalid_shape;
  if (c.ws_floats < ma::attention_workspace_floats(c.q.cols, c.v.cols)) return S::workspace_too_small;
  if (overlaps(c.out, c.q) || overlaps(c.out, c.k) || overlaps(c.out, c.v) || (mask && overlaps(c.out, c.mask)))
    return S::aliasing;
  const Mat w = workspace_used(c);
  if (overlaps(w, c.q) || overlaps(w, c.k) || overlaps(w, c.v) || overlaps(w, c.out) || (mask && overlaps(w, c.mask)))
    return S::aliasing;
  return S::ok;
}

// What the contract promises about each output element of a valid call.
struct Want {
  enum Row { zeros, nan, checked, free };
  std::vector<Row> row;
  std::vector<std::uint8_t> element_checked;  // n_q × d_v, for rows `checked`
  bool finite_only = false;                   // negative scale: the tolerance policy assumes scale >= 0
  std::vector<double> out, weighted_abs, score_abs;
};

Want expectations(Arena& arena, const Call& c) {
  const std::size_t n_q = c.q.rows, n_kv = c.k.rows, d_k = c.q.cols, d_v = c.v.cols;
  const bool mask = mask_given(c);
  const float scale = c.options.scale;
  const bool scale_tame = tame(scale, limit);
  auto causal_visible = [&](std::size_t i, std::size_t j) {  // causal and window
    return ref::visible(i, j, c.options.causal, static_cast<long long>(c.options.causal_offset), c.options.window);
  };
  auto visible = [&](std::size_t i, std::size_t j) {
    return causal_visible(i, j) && !(mask && arena.elem(c.mask, i, j) == -inf);
  };
  // Sanitised contiguous copies: values no clean output depends on become 0.
  std::vector<float> q(n_q * d_k), k(n_kv * d_k), v(n_kv * d_v), m(mask ? n_q * n_kv : 0);
  std::vector<bool> q_tame(n_q, true), q_nan(n_q, false), k_tame(n_kv, true), k_nan(n_kv, false);
  std::vector<std::uint8_t> v_tame(n_kv * d_v, 1);
  for (std::size_t i = 0; i < n_q; ++i)
    for (std::size_t p = 0; p < d_k; ++p) {
      const float x = arena.elem(c.q, i, p);
      q_tame[i] = q_tame[i] && tame(x, limit);
      q_nan[i] = q_nan[i] || std::isnan(x);
    }
  for (std::size_t j = 0; j < n_kv; ++j)
    for (std::size_t p = 0; p < d_k; ++p) {
      const float x = arena.elem(c.k, j, p);
      k_tame[j] = k_tame[j] && tame(x, limit);
      k_nan[j] = k_nan[j] || std::isnan(x);
    }
  for (std::size_t i = 0; i < n_q; ++i)
    for (std::size_t p = 0; p < d_k; ++p) q[i * d_k + p] = q_tame[i] ? arena.elem(c.q, i, p) : 0.0f;
  for (std::size_t j = 0; j < n_kv; ++j) {
    for (std::size_t p = 0; p < d_k; ++p) k[j * d_k + p] = k_tame[j] ? arena.elem(c.k, j, p) : 0.0f;
    for (std::size_t col = 0; col < d_v; ++col) {
      const float x = arena.elem(c.v, j, col);
      v_tame[j * d_v + col] = tame(x, limit);
      v[j * d_v + col] = tame(x, limit) ? x : 0.0f;
    }
  }
  for (std::size_t i = 0; i < n_q && mask; ++i)
    for (std::size_t j = 0; j < n_kv; ++j) {
      const float x = arena.elem(c.mask, i, j);
      m[i * n_kv + j] = x == -inf || tame(x, limit) ? x : 0.0f;
    }

  Want w;
  w.row.assign(n_q, Want::free);
  w.element_checked.assign(n_q * d_v, 0);
  w.finite_only = scale < 0.0f;
  for (std::size_t i = 0; i < n_q; ++i) {
    bool any = false, nan_row = std::isnan(scale), clean = q_tame[i] && scale_tame;
    for (std::size_t j = 0; j < n_kv; ++j) {
      if (!visible(i, j)) continue;
      any = true;
      const float mij = mask ? arena.elem(c.mask, i, j) : 0.0f;
      nan_row = nan_row || q_nan[i] || k_nan[j] || std::isnan(mij) || mij == inf;
      clean = clean && k_tame[j] && tame(mij, limit);
    }
    if (!any) {
      w.row[i] = Want::zeros;
    } else if (nan_row) {
      w.row[i] = Want::nan;
    } else if (clean) {
      w.row[i] = Want::checked;
      for (std::size_t col = 0; col < d_v; ++col) {
        bool ok = true;
        for (std::size_t j = 0; j < n_kv && ok; ++j) ok = !visible(i, j) || v_tame[j * d_v + col] != 0;
        w.element_checked[i * d_v + col] = ok ? 1 : 0;
      }
    }
  }
  if (scale_tame) {
    ref::AttentionCase rc{q.data(),
                          d_k,
                          k.data(),
                          d_k,
                          v.data(),
                          d_v,
                          n_q,
                          n_kv,
                          d_k,
                          d_v,
                          scale,
                          c.options.causal,
                          static_cast<long long>(c.options.causal_offset),
                          mask ? m.data() : nullptr,
                          n_kv};
    rc.window = c.options.window;
    ref::attention(rc, w.out, w.weighted_abs, w.score_abs);
  }
  return w;
}

void check_output(Arena& arena, const Call& c, const Want& w, const char* what) {
  arena.clear_writable();
  arena.writable(c.out);
  const Mat used = workspace_used(c);
  arena.writable(used.offset, used.cols);
  arena.expect_untouched(what);
  expect_written(arena, c.out, what);
  const std::size_t d_v = c.v.cols;
  for (std::size_t i = 0; i < c.q.rows; ++i)
    for (std::size_t col = 0; col < d_v; ++col) {
      const float got = arena.elem(c.out, i, col);
      switch (w.row[i]) {
        case Want::zeros:
          if (got != 0.0f) fail("%s (%zu, %zu): %g for a query that sees no key (must be 0)", what, i, col, got);
          break;
        case Want::nan:
          if (!std::isnan(got))
            fail("%s (%zu, %zu): %g for a query with a NaN or +inf score (must be NaN)", what, i, col, got);
          break;
        case Want::checked:
          if (w.element_checked[i * d_v + col] == 0) break;
          if (w.finite_only) {
            if (!std::isfinite(got)) fail("%s (%zu, %zu): %g from finite inputs", what, i, col, got);
          } else {
            expect_within(got, w.out[i * d_v + col], w.weighted_abs[i * d_v + col],
                          testing_support::attention_tolerance(c.q.cols, c.k.rows, w.score_abs[i]), what, i, col);
          }
          break;
        case Want::free:
          break;
      }
    }
}

float decode_scale(std::size_t kind, std::size_t d_k) {
  switch (kind % 12) {
    case 1:
      return 1.0f;
    case 2:
      return 0.5f;
    case 3:
      return 0.125f;
    case 4:
      return 1e-3f;
    case 5:
      return 4.0f;
    case 6:
      return 16.0f;
    case 7:
      return -1.0f;
    case 8:
      return std::numeric_limits<float>::quiet_NaN();
    case 9:
      return inf;
    case 10:
      return 1e30f;
    case 11:
      return 1.0f / std::sqrt(static_cast<float>(d_k == 0 ? 1 : d_k));
    default:
      return 0.0f;
  }
}

std::ptrdiff_t decode_offset(std::size_t kind, int small, std::size_t n_q, std::size_t n_kv) {
  const std::ptrdiff_t q = static_cast<std::ptrdiff_t>(n_q), kv = static_cast<std::ptrdiff_t>(n_kv);
  constexpr std::ptrdiff_t lo = std::numeric_limits<std::ptrdiff_t>::min(),
                           hi = std::numeric_limits<std::ptrdiff_t>::max();
  switch (kind % 12) {
    case 1:
      return kv - q;
    case 2:
      return -q;
    case 3:
      return kv;
    case 4:
      return -q - 1;
    case 5:
      return kv + 1;
    case 6:
      return lo;
    case 7:
      return hi;
    case 8:
      return lo + 1;
    case 9:
      return hi - 1;
    case 10:
    case 11:
      return small;
    default:
      return 0;
  }
}

void fill_mask(Arena& arena, const Mat& m, Rng& rng, std::size_t style) {
  static constexpr double hide[] = {0.0, 0.0, 0.125, 0.5, 0.875, 1.0};
  static constexpr std::size_t period[] = {0, 0, 3, 7};
  static constexpr double range[] = {1.0, 1.0, 10.0, 100.0};
  const double p = hide[style % 6], r = range[(style / 6) % 4];
  const std::size_t every = period[(style / 24) % 4];
  for (std::size_t i = 0; i < m.rows; ++i)
    for (std::size_t j = 0; j < m.cols; ++j) {
      const bool hidden = (every != 0 && i % every == every - 1) || rng.unit() < p;
      arena.elem(m, i, j) = hidden ? -inf : static_cast<float>((2.0 * rng.unit() - 1.0) * r);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  Rng rng{in.u32()};
  const std::size_t n_q = dim(in), n_kv = dim(in), d_k = dim(in), d_v = dim(in);
  const std::size_t flags = in.byte();
  const bool also_scalar = (flags & 4u) != 0;
  Call c;
  c.has_mask = (flags & 2u) != 0;
  c.options.causal = (flags & 1u) != 0;
  const std::size_t windows[] = {0, 1, 2, 5, 16, 33, 64, std::numeric_limits<std::size_t>::max() / 2 + 3};
  c.options.window = windows[(flags >> 3) & 7u];
  c.options.scale = decode_scale(in.byte(), d_k);
  const std::size_t offset_kind = in.byte();
  c.options.causal_offset = decode_offset(offset_kind, static_cast<std::int8_t>(in.byte()), n_q, n_kv);

  std::size_t cursor = 0;
  c.q = place(cursor, n_q, d_k, pad(in), gap(in));
  c.k = place(cursor, n_kv, d_k, pad(in), gap(in));
  c.v = place(cursor, n_kv, d_v, pad(in), gap(in));
  c.out = place(cursor, n_q, d_v, pad(in), gap(in));
  c.mask = place(cursor, c.has_mask ? n_q : 0, c.has_mask ? n_kv : 0, pad(in), gap(in));
  const std::size_t need = ma::attention_workspace_floats(d_k, d_v);
  const std::size_t ws_mode = in.below(8), ws_extra = in.below(64);
  std::size_t ws_physical = need;
  switch (ws_mode) {
    case 3:
      c.ws_floats = ws_physical = need - 1;
      break;
    case 4:
      c.ws_floats = ws_physical = need + ws_extra;
      break;
    case 5:
      c.ws_floats = ws_physical = 0;
      break;
    case 6:
      c.ws_floats = std::numeric_limits<std::size_t>::max();
      break;
    case 7:
      c.ws_floats = ws_physical = need / 2;
      break;
    default:
      c.ws_floats = need;
      break;
  }
  c.ws = place(cursor, 1, ws_physical, 0, gap(in));
  c.ws_null = in.below(16) == 15;

  const std::size_t out_mode = in.below(8);
  const int out_delta = static_cast<std::int8_t>(in.byte());
  const Mat* out_targets[] = {&c.q, &c.k, &c.v, &c.mask};
  place_over(c.out, *out_targets[in.below(4)], out_mode, out_delta);
  const std::size_t ws_place = in.below(8);
  const int ws_delta = static_cast<std::int8_t>(in.byte());
  const Mat* ws_targets[] = {&c.q, &c.k, &c.v, &c.out, &c.mask};
  const Mat& ws_target = *ws_targets[in.below(5)];
  if (ws_place == 5) place_over(c.ws, ws_target, 4, ws_delta);
  if (ws_place == 6) c.ws.offset = ws_target.offset + static_cast<std::size_t>(extent(ws_target)) + (ws_delta & 1);
  if (ws_place == 7) {
    const std::size_t back = need + (ws_delta & 1);
    c.ws.offset = ws_target.offset >= back ? ws_target.offset - back : 0;
  }

  const Call physical = c;
  mutate(in, {&c.q, &c.k, &c.v, &c.out, &c.mask}, true);
  static Arena arena;
  Mat ws_claimed = physical.ws;
  if (c.q.cols <= ma::attention_max_head_dim && c.v.cols <= ma::attention_max_head_dim) ws_claimed = workspace_used(c);
  arena.reset(arena_floats({&c.q, &c.k, &c.v, &c.out, &c.mask, &physical.q, &physical.k, &physical.v, &physical.out,
                            &physical.mask, &physical.ws, &ws_claimed}));
  arena.fill_value(physical.out, from_bits(poison_bits));
  arena.fill_value(physical.ws, from_bits(poison_bits));
  static constexpr float ranges[] = {1.0f, 1.0f, 1.0f, 0.5f, 4.0f, 10.0f, 100.0f, 1e-20f};
  const Values vq = values(in, ranges, 8), vk = values(in, ranges, 8), vv = values(in, ranges, 8);
  const std::size_t mask_style = in.byte();
  fill(arena, physical.q, rng, vq);
  fill(arena, physical.k, rng, vk);
  fill(arena, physical.v, rng, vv);
  fill_mask(arena, physical.mask, rng, mask_style);
  write_specials(in, arena, {&physical.q, &physical.k, &physical.v, &physical.mask});
  arena.snapshot();

  const S want = expected_status(c);
  if (want == S::ok && !(arena.contains(c.q) && arena.contains(c.k) && arena.contains(c.v) && arena.contains(c.out) &&
                         (!mask_given(c) || arena.contains(c.mask)) && arena.contains(workspace_used(c))))
    return 0;  // a mutated yet valid view reaching past the arena: not a call this harness can check
  set_context(
      "attention n_q=%zu n_kv=%zu d_k=%zu d_v=%zu scale=%g causal=%d offset=%td window=%zu mask=%d "
      "q{%zu,%zu,%zu,%zu%s} "
      "k{%zu,%zu,%zu,%zu%s} v{%zu,%zu,%zu,%zu%s} out{%zu,%zu,%zu,%zu%s} mask{%zu,%zu,%zu,%zu%s} ws{%zu,%zu%s}",
      n_q, n_kv, d_k, d_v, static_cast<double>(c.options.scale), c.options.causal, c.options.causal_offset,
      c.options.window, c.has_mask, c.q.offset, c.q.rows, c.q.cols, c.q.stride, c.q.null ? ",null" : "", c.k.offset,
      c.k.rows, c.k.cols, c.k.stride, c.k.null ? ",null" : "", c.v.offset, c.v.rows, c.v.cols, c.v.stride,
      c.v.null ? ",null" : "", c.out.offset, c.out.rows, c.out.cols, c.out.stride, c.out.null ? ",null" : "",
      c.mask.offset, c.mask.rows, c.mask.cols, c.mask.stride, c.mask.null ? ",null" : "", c.ws.offset, c.ws_floats,
      c.ws_null ? ",null" : "");
  if (c.has_mask) c.options.mask = arena.view<const float>(c.mask);

  Want w;
  if (want == S::ok) w = expectations(arena, c);
  float* ws = c.ws_null ? nullptr : arena.at(c.ws.offset);
  const S got = ma::attention(arena.view<const float>(c.q), arena.view<const float>(c.k), arena.view<const float>(c.v),
                              arena.view<float>(c.out), ws, c.ws_floats, c.options);
  expect_status(got, want, "attention status");
  if (got != S::ok) {
    arena.clear_writable();
    arena.expect_untouched("attention error");
    return 0;
  }
  check_output(arena, c, w, "attention");
  if (also_scalar) {
    arena.restore();
    ma::detail::attention_run(ma::detail::scalar_kernels(), arena.view<const float>(c.q), arena.view<const float>(c.k),
                              arena.view<const float>(c.v), arena.view<float>(c.out), ws, c.options);
    check_output(arena, c, w, "scalar attention_run");
  }
  return 0;
}
