// libFuzzer target: decoding with the layer's K/V cache — a sequence of append, attend, forward and reset calls on
// one layer, against a model of the documented cache rules and the double-precision reference over every token
// since the last reset. Two layers: <12, 16, 2, 1> (MQA) and <20, 24, 3, 3>.
//
// Input bytes, in order (missing bytes read as 0, which decodes to one valid one-token append):
//   seed (4) | layer | config: bit 0 rope, 1 interleaved pairs, 2 half the head rotates, bits 3–4 the layer window
//   (none, 1, 3, 6), bit 5 no biases, bit 6 no out projection | steps (1 + b % 12) | per step: op (b % 10: 0–5
//   append, 6 attend, 7 forward (causal), 8 reset, 9 append with an options byte), rows (b < 200: 1 + b % 9; else
//   0 or MaxSeq + 1 or 13), y placement (b % 6: own, own; in place; shifted over the input: aliasing; 4 a row gap;
//   5 y rows one short), options (bit 0 mask (not on a ring), bits 1–2 options.window (0, 1, 2, 9), bit 3 attend
//   causal, bits 4–7 attend causal offset)
// Values are uniform in [−1, 1], weights in [−0.3, 0.3]: the regime of layer_tolerance.
// Checks after every call: the Status the documented rules give (rows, capacity, ring limits, mask shape, an empty
// cache, overlap), cached() and position() as the rules say (unchanged on error), nothing written but y (nothing
// at all on error), every element of y within layer_tolerance (plus the rotary angles' rounding) of the reference.
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "fuzz_support.hpp"
#include "reference.hpp"

namespace {

using namespace fuzz;
using S = ma::Status;

struct Geometry {
  std::size_t max_seq, d, heads, kv_heads;
};

struct Step {
  std::size_t op, rows, y_mode, opts;
};

std::size_t step_rows(std::size_t b, std::size_t max_seq) {
  if (b < 200) return 1 + b % 9;
  const std::size_t odd[] = {0, max_seq + 1, 13};
  return odd[b % 3];
}

template <class Layer>
int run(Reader& in, Rng& rng, const Geometry& g) {
  const std::size_t d = g.d, hd = g.d / g.heads, kvd = g.kv_heads * hd;
  const std::size_t cfg_bits = in.byte();
  ma::LayerConfig cfg;
  if ((cfg_bits & 1u) != 0) cfg.rope_theta = 10000.0f;
  cfg.rope_interleaved = (cfg_bits & 2u) != 0;
  cfg.rope_dims = (cfg_bits & 4u) != 0 ? hd / 2 - (hd / 2) % 2 : 0;
  const std::size_t windows[] = {0, 1, 3, 6};
  cfg.window = windows[(cfg_bits >> 3) & 3u];
  const bool biases = (cfg_bits & 32u) == 0, out_projection = (cfg_bits & 64u) == 0;
  const std::size_t n_steps = 1 + in.byte() % 12;

  std::vector<float> wq(d * d), wk(kvd * d), wv(kvd * d), bq(d), bk(kvd), bv(kvd), wo(d * d), bo(d);
  for (auto* v : {&wq, &wk, &wv, &bq, &bk, &bv, &wo, &bo})
    for (float& x : *v) x = static_cast<float>(0.6 * rng.unit() - 0.3);
  const ma::LayerWeights w{wq.data(),
                           wk.data(),
                           wv.data(),
                           biases ? bq.data() : nullptr,
                           biases ? bk.data() : nullptr,
                           biases ? bv.data() : nullptr,
                           out_projection ? wo.data() : nullptr,
                           out_projection && biases ? bo.data() : nullptr};
  static std::optional<Layer> layer;
  layer.emplace(w, cfg);

  std::vector<float> history;  // every token since the last reset or forward, row-major (position order)
  std::size_t cached = 0, position = 0;
  for (std::size_t step = 0; step < n_steps; ++step) {
    Step st;
    st.op = in.below(10);
    st.rows = in.byte();
    st.y_mode = in.below(6);
    st.opts = in.byte();
    const bool attend = st.op == 6, forward = st.op == 7, reset = st.op == 8;
    if (reset) {
      layer->reset();
      history.clear();
      cached = position = 0;
      if (layer->cached() != 0 || layer->position() != 0) fail("reset: cache not empty");
      continue;
    }
    const std::size_t r = step_rows(st.rows, g.max_seq);
    ma::AttentionOptions o;
    const bool with_options = st.op == 9 || attend;
    const std::size_t option_windows[] = {0, 1, 2, 9};
    if (with_options) o.window = option_windows[(st.opts >> 1) & 3u];
    if (attend) {
      o.causal = (st.opts & 8u) != 0;
      o.causal_offset = static_cast<std::ptrdiff_t>(st.opts >> 4) - 4;
    }
    if (forward) o.causal = true;
    const bool want_mask = with_options && (st.opts & 1u) != 0;  // never on forward
    const std::size_t mask_cols = attend ? cached : cached + r;  // append: cached + rows, attend: cached

    // Arena: x (r × d, stride d + 1), y, mask.
    std::size_t cursor = 0;
    Mat x = place(cursor, r, d, 1, 3);
    Mat y = place(cursor, st.y_mode == 5 && r > 0 ? r - 1 : r, d, st.y_mode == 4 ? 2 : 0, 2);
    Mat mask = place(cursor, want_mask ? r : 0, want_mask ? mask_cols : 0, 0, 1);
    if (st.y_mode == 2) place_over(y, x, 1, 0);  // exactly x: in place
    if (st.y_mode == 3) place_over(y, x, 4, 5);  // shifted over x: aliasing
    static Arena arena;
    arena.reset(arena_floats({&x, &y, &mask}));
    for (std::size_t i = 0; i < x.rows; ++i)
      for (std::size_t c = 0; c < d; ++c) arena.elem(x, i, c) = static_cast<float>(2.0 * rng.unit() - 1.0);
    if (st.y_mode != 2) arena.fill_value(y, from_bits(poison_bits));
    for (std::size_t i = 0; i < mask.rows; ++i)
      for (std::size_t j = 0; j < mask.cols; ++j)
        arena.elem(mask, i, j) = rng.unit() < 0.25 ? -INFINITY : static_cast<float>(rng.unit());
    if (want_mask) o.mask = arena.view<const float>(mask);
    arena.snapshot();

    // The documented rules.
    const std::size_t window = o.window != 0 ? o.window : cfg.window;
    const bool ring = cfg.window != 0;
    S want = S::ok;
    std::size_t first_kv = cached;  // where the new rows go (append)
    if (r == 0 || y.rows != r) {
      want = S::invalid_shape;
    } else if (forward) {
      if (r > g.max_seq) want = S::invalid_shape;
    } else if (attend) {
      if (cached == 0) want = S::invalid_shape;
    } else if (r > g.max_seq ||
               (ring ? window > cfg.window || cfg.window - 1 + r > g.max_seq : cached + r > g.max_seq)) {
      want = S::invalid_shape;
    }
    if (want == S::ok && want_mask && !attend && ring) want = S::invalid_shape;
    if (want == S::ok && st.y_mode == 3) want = S::aliasing;
    if (!attend && !forward && ring && cached + r > g.max_seq)
      first_kv = cached < cfg.window - 1 ? cached : cfg.window - 1;
    // Inputs as they were (y may be x).
    std::vector<float> xs(r * d), ms(mask.rows * mask.cols);
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t col = 0; col < d; ++col) xs[i * d + col] = arena.elem(x, i, col);
    for (std::size_t i = 0; i < mask.rows; ++i)
      for (std::size_t j = 0; j < mask.cols; ++j) ms[i * mask.cols + j] = arena.elem(mask, i, j);
    set_context(
        "decode layer<%zu,%zu,%zu,%zu> rope=%g/%zu/%d window=%zu step %zu op %zu rows %zu y_mode %zu opts %zu "
        "cached %zu position %zu",
        g.max_seq, g.d, g.heads, g.kv_heads, static_cast<double>(cfg.rope_theta), cfg.rope_dims, cfg.rope_interleaved,
        cfg.window, step, st.op, r, st.y_mode, st.opts, cached, position);
    const ma::MatrixView<const float> xv = arena.view<const float>(x);
    const ma::MatrixView<float> yv = arena.view<float>(y);
    const S got = attend ? layer->attend(xv, yv, o) : forward ? layer->forward(xv, yv, o) : layer->append(xv, yv, o);
    expect_status(got, want, "status");
    arena.clear_writable();
    if (got != S::ok) {
      arena.expect_untouched("error");
      if (layer->cached() != cached || layer->position() != position) fail("error: the cache changed");
      continue;
    }
    arena.writable(y);
    arena.expect_untouched("call");
    expect_written(arena, y, "call");

    // The reference, and the model's new state.
    ref::MhaCase c{d,        g.heads,      g.kv_heads, w.q_weight, w.k_weight, w.v_weight, w.q_bias, w.k_bias,
                   w.v_bias, w.out_weight, w.out_bias, xs.data(),  r,          d,          nullptr,  0,
                   d,        false,        0,          nullptr,    0};
    c.window = window;
    c.rope_theta = cfg.rope_theta;
    c.rope_dims = cfg.rope_dims;
    c.rope_interleaved = cfg.rope_interleaved;
    if (forward) {
      history = xs;
      c.context = history.data();
      c.n_kv = r;
      c.causal = true;
      cached = position = r;
    } else if (attend) {
      c.context = history.data() + (position - cached) * d;
      c.n_kv = cached;
      c.kv_position = position - cached;
      c.causal = o.causal;
      c.causal_offset = o.causal_offset;
      if (want_mask) {
        c.mask = ms.data();
        c.ldm = cached;
      }
    } else {
      history.insert(history.end(), xs.begin(), xs.end());
      c.context = history.data();  // all tokens: those the ring dropped lie outside every window
      c.n_kv = position + r;
      c.q_position = position;
      c.causal = true;
      c.causal_offset = static_cast<long long>(position);
      if (want_mask) {  // not a ring: cached == position, the mask covers every key
        c.mask = ms.data();
        c.ldm = position + r;
      }
      cached = first_kv + r;
      position += r;
    }
    if (layer->cached() != cached || layer->position() != position)
      fail("cached %zu position %zu, the rules say %zu %zu", layer->cached(), layer->position(), cached, position);
    std::vector<double> want_y;
    ref::multihead_attention(c, want_y);
    Tolerance tol = testing_support::layer_tolerance(d, c.n_kv);
    if (cfg.rope_theta != 0.0f)
      tol.rel +=
          8.0 * static_cast<double>(position + r + 1) * (std::log(10000.0) + 4.0) * testing_support::unit_roundoff;
    for (std::size_t i = 0; i < r; ++i) {
      double row = 0.0;
      for (std::size_t col = 0; col < d; ++col) row = std::fmax(row, std::fabs(want_y[i * d + col]));
      for (std::size_t col = 0; col < d; ++col)
        expect_within(arena.elem(y, i, col), want_y[i * d + col], row, tol, "y", i, col);
    }
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reader in(data, size);
  Rng rng{in.u32()};
  if (in.below(2) == 0) return run<ma::MultiHeadAttention<12, 16, 2, 1>>(in, rng, {12, 16, 2, 1});
  return run<ma::MultiHeadAttention<20, 24, 3, 3>>(in, rng, {20, 24, 3, 3});
}
