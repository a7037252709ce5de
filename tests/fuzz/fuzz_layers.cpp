// libFuzzer target: MultiHeadAttention<...>::forward, self-attention, cross-attention and in place, on four fixed
// layers: <64, 64, 4>, <40, 48, 6, 2> (grouped-query), SelfAttention<3, 2>, <33, 12, 3, 1> (one key/value head).
//
// Input bytes, in order (missing bytes read as 0, which decodes to a valid one-token self-attention):
//   seed (4) | layer | flags: bit 0 cross-attention, 1 causal, 2 mask, 3 no q/k/v biases, 4 no out projection,
//   5 no out bias | causal offset kind, byte | n_q, n_kv (1..MaxSeq, MaxSeq + 1, 0) | query, context, y, mask: pad,
//   gap | weights: gap | y placement: own, exactly query (in place), exactly context, shifted over query or context,
//   over the mask, over a weight array, query's start with another stride | delta | missing q/k/v weight |
//   mutations (query, context, y, mask) | query, context values (style; |x| <= 1) | mask (share of −inf, hidden-row
//   period) | specials (query, context, mask)
// Weights are uniform in [−0.3, 0.3], the regime of layer_tolerance.
// The input's last byte (mod 3; none: 0) picks the layer's K/V cache format, f32, f16 or q8; for f16 and q8 the
// values are checked against the fp32 reference with the format's rounding added to the tolerance (coarse: the
// exact bound over the stored values is tests/test_cache.cpp's), every other check as for f32.
// Checks: the Status of the documented check order (a missing weight, then a null view, then shapes, rows >
// MaxSeq, the mask's shape, then overlap: y against query and context unless exactly the same (data and stride), the
// mask, and the span of y against every weight array); on error the arena untouched; on success nothing written
// but y, all of y written, and each row whose query, visible context rows and visible mask entries are tame gets y
// within layer_tolerance (relative to the row's largest |y|) of the double-precision PyTorch-math reference.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "fuzz_support.hpp"
#include "reference.hpp"

namespace {

using namespace fuzz;
using S = ma::Status;
constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float limit = 1.0f;  // layer_tolerance is stated for inputs in [−1, 1]

struct Geometry {
  std::size_t max_seq, d, heads, kv_heads;
};

struct WeightMats {
  Mat wq, wk, wv, bq, bk, bv, wo, bo;  // contiguous arrays; rows == 0 when absent
  bool missing_q = false, missing_k = false, missing_v = false;
};

struct Call {
  bool cross = false, has_mask = false;
  Mat query, context, y, mask;  // self-attention: context is query
  WeightMats w;
  ma::AttentionOptions options;
};

bool mask_given(const Call& c) { return c.has_mask && !c.mask.null; }

bool bad_overlap(const Mat& y, const Mat& input) {
  const bool identical = y.offset == input.offset && y.stride == input.stride;
  return !identical && overlaps(y, input);
}

S expected_status(const Geometry& g, const Call& c) {
  if (c.w.missing_q || c.w.missing_k || c.w.missing_v) return S::null_pointer;
  if (c.query.null || c.context.null || c.y.null) return S::null_pointer;
  if (c.w.bo.rows != 0 && c.w.wo.rows == 0) return S::null_pointer;  // out_bias needs out_weight
  if (!shape_ok(c.query) || !shape_ok(c.context) || !shape_ok(c.y)) return S::invalid_shape;
  if (c.query.cols != g.d || c.context.cols != g.d || c.y.cols != g.d || c.y.rows != c.query.rows)
    return S::invalid_shape;
  if (c.query.rows > g.max_seq || c.context.rows > g.max_seq) return S::invalid_shape;
  const bool mask = mask_given(c);
  if (mask && (!shape_ok(c.mask) || c.mask.rows != c.query.rows || c.mask.cols != c.context.rows))
    return S::invalid_shape;
  if (bad_overlap(c.y, c.query) || bad_overlap(c.y, c.context) || (mask && overlaps(c.y, c.mask))) return S::aliasing;
  for (const Mat* w : {&c.w.wq, &c.w.wk, &c.w.wv, &c.w.bq, &c.w.bk, &c.w.bv, &c.w.wo, &c.w.bo})
    if (w->rows != 0 && meets_array(c.y, w->offset, w->cols)) return S::aliasing;
  return S::ok;
}

struct Want {
  std::vector<bool> checked;  // per row
  std::vector<double> y;
};

Want expectations(Arena& arena, const Geometry& g, const Call& c) {
  const std::size_t n_q = c.query.rows, n_kv = c.context.rows, d = g.d;
  const bool mask = mask_given(c);
  std::vector<float> query(n_q * d), context(n_kv * d), m(mask ? n_q * n_kv : 0);
  std::vector<bool> q_tame(n_q, true), ctx_tame(n_kv, true);
  for (std::size_t i = 0; i < n_q; ++i)
    for (std::size_t p = 0; p < d; ++p) q_tame[i] = q_tame[i] && tame(arena.elem(c.query, i, p), limit);
  for (std::size_t j = 0; j < n_kv; ++j)
    for (std::size_t p = 0; p < d; ++p) ctx_tame[j] = ctx_tame[j] && tame(arena.elem(c.context, j, p), limit);
  for (std::size_t i = 0; i < n_q; ++i)
    for (std::size_t p = 0; p < d; ++p) query[i * d + p] = q_tame[i] ? arena.elem(c.query, i, p) : 0.0f;
  for (std::size_t j = 0; j < n_kv; ++j)
    for (std::size_t p = 0; p < d; ++p) context[j * d + p] = ctx_tame[j] ? arena.elem(c.context, j, p) : 0.0f;
  for (std::size_t i = 0; i < n_q && mask; ++i)
    for (std::size_t j = 0; j < n_kv; ++j) {
      const float x = arena.elem(c.mask, i, j);
      m[i * n_kv + j] = x == -inf || tame(x, limit) ? x : 0.0f;
    }
  Want w;
  w.checked.assign(n_q, false);
  for (std::size_t i = 0; i < n_q; ++i) {
    bool clean = q_tame[i];
    for (std::size_t j = 0; j < n_kv && clean; ++j) {
      const bool causal_visible = !c.options.causal || static_cast<long long>(j) - static_cast<long long>(i) <=
                                                           static_cast<long long>(c.options.causal_offset);
      const float mij = mask ? arena.elem(c.mask, i, j) : 0.0f;
      if (!causal_visible || mij == -inf) continue;
      clean = ctx_tame[j] && tame(mij, limit);
    }
    w.checked[i] = clean;
  }
  auto ptr = [&](const Mat& a) -> const float* { return a.rows != 0 ? arena.at(a.offset) : nullptr; };
  ref::MhaCase mc{d,
                  g.heads,
                  g.kv_heads,
                  ptr(c.w.wq),
                  ptr(c.w.wk),
                  ptr(c.w.wv),
                  ptr(c.w.bq),
                  ptr(c.w.bk),
                  ptr(c.w.bv),
                  ptr(c.w.wo),
                  ptr(c.w.bo),
                  query.data(),
                  n_q,
                  d,
                  context.data(),
                  n_kv,
                  d,
                  c.options.causal,
                  static_cast<long long>(c.options.causal_offset),
                  mask ? m.data() : nullptr,
                  n_kv};
  ref::multihead_attention(mc, w.y);
  return w;
}

void check_output(Arena& arena, const Geometry& g, const Call& c, const Want& w, const char* what, double cache_rel) {
  arena.clear_writable();
  arena.writable(c.y);
  arena.expect_untouched(what);
  expect_written(arena, c.y, what);
  Tolerance tol = testing_support::layer_tolerance(g.d, c.context.rows);
  tol.rel += cache_rel;
  for (std::size_t i = 0; i < c.query.rows; ++i) {
    if (!w.checked[i]) continue;
    double row_max = 0.0;
    for (std::size_t col = 0; col < g.d; ++col) row_max = std::fmax(row_max, std::fabs(w.y[i * g.d + col]));
    for (std::size_t col = 0; col < g.d; ++col)
      expect_within(arena.elem(c.y, i, col), w.y[i * g.d + col], row_max, tol, what, i, col);
  }
}

std::size_t seq_len(Reader& in, std::size_t max_seq) {
  const std::size_t b = in.byte();
  if (b < 160) return 1 + b % max_seq;
  const std::size_t edges[] = {1, 2, max_seq, max_seq - 1, 31, 32, 33, max_seq + 1, 0};
  const std::size_t n = edges[b % 9];
  return n == 0 || n == max_seq + 1 ? n : (n < 1 ? 1 : (n > max_seq ? max_seq : n));
}

std::ptrdiff_t decode_offset(std::size_t kind, int small, std::size_t n_q, std::size_t n_kv) {
  const std::ptrdiff_t q = static_cast<std::ptrdiff_t>(n_q), kv = static_cast<std::ptrdiff_t>(n_kv);
  switch (kind % 8) {
    case 1:
      return kv - q;
    case 2:
      return -q;
    case 3:
      return std::numeric_limits<std::ptrdiff_t>::min();
    case 4:
      return std::numeric_limits<std::ptrdiff_t>::max();
    case 5:
    case 6:
      return small;
    default:
      return 0;
  }
}

// The relative step of a cache format (f16: half an ulp; q8: half a quantum of the row's max), times a generous
// amplification through the scores and the out projection (|w| <= 0.3, |x| <= 1).
template <class Layer>
constexpr double cache_rel() {
  return Layer::cache_format == ma::Format::f16 ? 64.0 * 0x1p-11 : Layer::cache_format == ma::Format::q8 ? 0.5 : 0.0;
}

template <class Layer>
int run(Reader& in, Rng& rng, const Geometry& g) {
  Call c;
  const std::size_t flags = in.byte();
  c.cross = (flags & 1u) != 0;
  c.options.causal = (flags & 2u) != 0;
  c.has_mask = (flags & 4u) != 0;
  const bool biases = (flags & 8u) == 0, out_projection = (flags & 16u) == 0, out_bias = (flags & 32u) == 0;
  const std::size_t offset_kind = in.byte();
  const int small = static_cast<std::int8_t>(in.byte());
  const std::size_t n_q = seq_len(in, g.max_seq), n_kv = c.cross ? seq_len(in, g.max_seq) : n_q;
  c.options.causal_offset = decode_offset(offset_kind, small, n_q, n_kv);
  const std::size_t d = g.d, kvd = g.kv_heads * (g.d / g.heads);

  std::size_t cursor = 0;
  c.query = place(cursor, n_q, d, pad(in), gap(in));
  c.context = c.cross ? place(cursor, n_kv, d, pad(in), gap(in)) : c.query;
  c.y = place(cursor, n_q, d, pad(in), gap(in));
  c.mask = place(cursor, c.has_mask ? n_q : 0, c.has_mask ? n_kv : 0, pad(in), gap(in));
  const std::size_t wgap = gap(in);
  WeightMats& w = c.w;
  w.wq = place(cursor, 1, d * d, 0, wgap);
  w.wk = place(cursor, 1, kvd * d, 0, wgap);
  w.wv = place(cursor, 1, kvd * d, 0, wgap);
  w.bq = place(cursor, biases ? 1 : 0, d, 0, wgap);
  w.bk = place(cursor, biases ? 1 : 0, kvd, 0, wgap);
  w.bv = place(cursor, biases ? 1 : 0, kvd, 0, wgap);
  w.wo = place(cursor, out_projection ? 1 : 0, d * d, 0, wgap);
  w.bo = place(cursor, out_bias ? 1 : 0, d, 0, wgap);

  const std::size_t y_mode = in.below(12);
  const int delta = static_cast<std::int8_t>(in.byte());
  const Mat* weights[] = {&w.wq, &w.wk, &w.wv, &w.bq, &w.bk, &w.bv, &w.wo, &w.bo};
  switch (y_mode) {
    case 4:
      place_over(c.y, c.query, 1, 0);
      break;
    case 5:
      place_over(c.y, c.context, 1, 0);
      break;
    case 6:
      place_over(c.y, c.query, 2, delta);
      break;
    case 7:
      place_over(c.y, c.context, 2, delta);
      break;
    case 8:
      place_over(c.y, c.query, 4, delta);
      break;
    case 9:
      place_over(c.y, c.mask, 4, delta);
      break;
    case 10:
      place_over(c.y, *weights[static_cast<std::size_t>(delta & 7)], 4, delta / 8);
      break;
    case 11:
      place_over(c.y, c.query, 1, 0);
      c.y.stride = c.query.stride + 1;
      break;
    default:
      break;
  }
  const std::size_t missing = in.byte();
  if (missing >= 240) {
    w.missing_q = missing % 3 == 0;
    w.missing_k = missing % 3 == 1;
    w.missing_v = missing % 3 == 2;
  }
  const Call physical = c;
  if (c.cross)
    mutate(in, {&c.query, &c.context, &c.y, &c.mask}, true);
  else
    mutate(in, {&c.query, &c.y, &c.mask}, true);
  if (!c.cross) c.context = c.query;

  static Arena arena;
  arena.reset(arena_floats({&c.query, &c.context, &c.y, &c.mask, &physical.query, &physical.context, &physical.y,
                            &physical.mask, &w.wq, &w.wk, &w.wv, &w.bq, &w.bk, &w.bv, &w.wo, &w.bo}));
  arena.fill_value(physical.y, from_bits(poison_bits));
  Values wv;
  wv.range = 0.3f;
  for (const Mat* m : weights) fill(arena, *m, rng, wv);
  static constexpr float ranges[] = {1.0f, 1.0f, 1.0f, 0.5f};
  const Values vq = values(in, ranges, 4), vc = values(in, ranges, 4);
  fill(arena, physical.query, rng, vq);
  if (c.cross) fill(arena, physical.context, rng, vc);
  const std::size_t mask_style = in.byte();
  static constexpr double hide[] = {0.0, 0.0, 0.125, 0.5, 0.875, 1.0};
  static constexpr std::size_t period[] = {0, 0, 3, 7};
  for (std::size_t i = 0; i < physical.mask.rows; ++i)
    for (std::size_t j = 0; j < physical.mask.cols; ++j) {
      const std::size_t every = period[(mask_style / 6) % 4];
      const bool hidden = (every != 0 && i % every == every - 1) || rng.unit() < hide[mask_style % 6];
      arena.elem(physical.mask, i, j) = hidden ? -inf : static_cast<float>(2.0 * rng.unit() - 1.0);
    }
  write_specials(in, arena, {&physical.query, &physical.context, &physical.mask});
  arena.snapshot();

  const S want = expected_status(g, c);
  if (want == S::ok && !(arena.contains(c.query) && arena.contains(c.context) && arena.contains(c.y) &&
                         (!mask_given(c) || arena.contains(c.mask))))
    return 0;  // a mutated yet valid view reaching past the arena: not a call this harness can check
  set_context(
      "layer<%zu,%zu,%zu,%zu> %s causal=%d offset=%td mask=%d bias=%d out=%d out_bias=%d missing=%d%d%d "
      "query{%zu,%zu,%zu,%zu%s} context{%zu,%zu,%zu,%zu%s} y{%zu,%zu,%zu,%zu%s} mask{%zu,%zu,%zu,%zu%s}",
      g.max_seq, g.d, g.heads, g.kv_heads, c.cross ? "cross" : "self", c.options.causal, c.options.causal_offset,
      c.has_mask, biases, out_projection, out_bias, w.missing_q, w.missing_k, w.missing_v, c.query.offset, c.query.rows,
      c.query.cols, c.query.stride, c.query.null ? ",null" : "", c.context.offset, c.context.rows, c.context.cols,
      c.context.stride, c.context.null ? ",null" : "", c.y.offset, c.y.rows, c.y.cols, c.y.stride,
      c.y.null ? ",null" : "", c.mask.offset, c.mask.rows, c.mask.cols, c.mask.stride, c.mask.null ? ",null" : "");
  if (c.has_mask) c.options.mask = arena.view<const float>(c.mask);

  Want expected;
  if (want == S::ok) expected = expectations(arena, g, c);
  auto ptr = [&](const Mat& a, bool missing) -> const float* {
    return a.rows != 0 && !missing ? arena.at(a.offset) : nullptr;
  };
  static std::optional<Layer> layer;
  layer.emplace(ma::LayerWeights{ptr(w.wq, w.missing_q), ptr(w.wk, w.missing_k), ptr(w.wv, w.missing_v),
                                 ptr(w.bq, false), ptr(w.bk, false), ptr(w.bv, false), ptr(w.wo, false),
                                 ptr(w.bo, false)});
  const S got = c.cross ? layer->forward(arena.view<const float>(c.query), arena.view<const float>(c.context),
                                         arena.view<float>(c.y), c.options)
                        : layer->forward(arena.view<const float>(c.query), arena.view<float>(c.y), c.options);
  expect_status(got, want, "forward status");
  if (got != S::ok) {
    arena.clear_writable();
    arena.expect_untouched("forward error");
    return 0;
  }
  check_output(arena, g, c, expected, "forward", cache_rel<Layer>());
  return 0;
}

template <ma::Format F>
int run_format(Reader& in, Rng& rng, std::size_t layer) {
  switch (layer) {
    case 0:
      return run<ma::MultiHeadAttention<64, 64, 4, 4, true, F>>(in, rng, {64, 64, 4, 4});
    case 1:
      return run<ma::MultiHeadAttention<40, 48, 6, 2, true, F>>(in, rng, {40, 48, 6, 2});
    case 2:
      return run<ma::MultiHeadAttention<3, 2, 1, 1, true, F>>(in, rng, {3, 2, 1, 1});
    default:
      return run<ma::MultiHeadAttention<33, 12, 3, 1, true, F>>(in, rng, {33, 12, 3, 1});
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  Rng rng{in.u32()};
  const std::size_t layer = in.below(4);
  switch (size > 0 ? data[size - 1] % 3 : 0) {
    case 1:
      return run_format<ma::Format::f16>(in, rng, layer);
    case 2:
      return run_format<ma::Format::q8>(in, rng, layer);
    default:
      return run_format<ma::Format::f32>(in, rng, layer);
  }
}
