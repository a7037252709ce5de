/* The blocks' C API (microattn.h: microattn_encoder_layer_*, microattn_decoder_layer_*) from C: each block against a
 * double-precision reference of PyTorch's / llama's semantics written here (layer norm, RMS norm, multi-head
 * attention with GQA and rope, the relu / gelu / silu feed-forwards), both norm orders, decoding token by token,
 * f16 and q8 caches, outputs inside NaN canaries, and every bad argument giving its documented status with nothing
 * written. C99, on every target; the exit status is the verdict. */
#include <microattn/microattn.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "capi_test.h"

/* Weights k/4096, |k| <= 1000: exact in binary16 too, so an f16 matrix holds the very values the reference uses. */
static void fill_weights(float* p, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) p[i] = (float)((int)(next_bits() % 2001u) - 1000) / 4096.0f;
}
static void fill(float* p, size_t n, float lo, float hi) {
  size_t i;
  for (i = 0; i < n; ++i) p[i] = uniform(lo, hi);
}
/* The binary16 bits of a float that binary16 represents exactly (zero or normal). */
static unsigned short half_bits(float f) {
  int e;
  double m;
  unsigned short sign = f < 0.0f ? 0x8000u : 0u;
  if (f == 0.0f) return sign;
  m = frexp(fabs((double)f), &e); /* f = m·2^e, m in [0.5, 1) */
  return (unsigned short)(sign | (unsigned)((e - 1 + 15) << 10) | (unsigned)((m * 2.0 - 1.0) * 1024.0 + 0.5));
}

static int is_canary(float f) {
  unsigned b;
  memcpy(&b, &f, sizeof b);
  return b == 0x7fc0beefu;
}

/* ---- sizes -------------------------------------------------------------------------------------------------- */

#define D_MAX 16
#define F_MAX 24
#define N_MAX 40
#define SEQ_MAX (N_MAX + 2)
#define HD_MAX 16

/* The largest blocks the sweeps use, from the macros (integer constant expressions). */
#define ENC_SCRATCH MICROATTN_ENCODER_LAYER_SCRATCH_FLOATS(SEQ_MAX, D_MAX, 1, F_MAX)
#define DEC_SCRATCH (MICROATTN_DECODER_LAYER_SCRATCH_FLOATS(SEQ_MAX, D_MAX, 1, F_MAX) + 2u * 64u * HD_MAX)
#define CACHE_FLOATS MICROATTN_LAYER_CACHE_FLOATS(SEQ_MAX, D_MAX, 1, 1)
static float cache_block[CACHE_FLOATS + 8];
static float scratch_block[(ENC_SCRATCH > DEC_SCRATCH ? ENC_SCRATCH : DEC_SCRATCH) + 8];

static void test_sizes(void) {
  size_t a, b;
  a = microattn_encoder_layer_scratch_floats(10, 16, 4, 24);
  CHECK(a == MICROATTN_ENCODER_LAYER_SCRATCH_FLOATS(10, 16, 4, 24), "%u", (unsigned)a);
  CHECK(a == microattn_layer_scratch_floats(16, 4) + MICROATTN_ATTENTION_BLOCK_Q * (16 + 24), "%u", (unsigned)a);
  b = microattn_decoder_layer_scratch_floats(10, 16, 4, 24, MICROATTN_FORMAT_F32);
  CHECK(b == MICROATTN_DECODER_LAYER_SCRATCH_FLOATS(10, 16, 4, 24), "%u", (unsigned)b);
  b = microattn_decoder_layer_scratch_floats(10, 16, 4, 24, MICROATTN_FORMAT_Q8);
  CHECK(b == microattn_layer_cache_scratch_floats(16, 4, MICROATTN_FORMAT_Q8) +
                 MICROATTN_ATTENTION_BLOCK_Q * (16 + 2 * 24),
        "%u", (unsigned)b);
  CHECK(microattn_decoder_layer_scratch_floats(10, 16, 4, 24, MICROATTN_FORMAT_F16) ==
            microattn_decoder_layer_scratch_floats(10, 16, 4, 24, MICROATTN_FORMAT_Q8),
        "f16 and q8 convert the same block");
  /* 0 for the sizes the templates reject */
  CHECK(microattn_encoder_layer_scratch_floats(0, 16, 4, 24) == 0, "max_seq 0");
  CHECK(microattn_encoder_layer_scratch_floats(10, 0, 4, 24) == 0, "model_dim 0");
  CHECK(microattn_encoder_layer_scratch_floats(10, 16, 0, 24) == 0, "heads 0");
  CHECK(microattn_encoder_layer_scratch_floats(10, 16, 4, 0) == 0, "feed_forward 0");
  CHECK(microattn_encoder_layer_scratch_floats(10, 18, 4, 24) == 0, "model_dim not a multiple of heads");
  CHECK(microattn_encoder_layer_scratch_floats(2, 2 * 65537, 2, 4) == 0, "head dim too large");
  CHECK(microattn_encoder_layer_scratch_floats((size_t)-1 / 8, 64, 4, 4) == 0, "max_seq overflow");
  CHECK(microattn_encoder_layer_scratch_floats(4, 64, 4, (size_t)-1 / 8) == 0, "feed_forward overflow");
  CHECK(microattn_decoder_layer_scratch_floats(10, 16, 4, 24, (microattn_format)3) == 0, "format");
  CHECK(microattn_decoder_layer_scratch_floats(10, 16, 4, (size_t)-1 / 16, MICROATTN_FORMAT_F32) == 0, "hidden");
}

/* ---- double reference ----------------------------------------------------------------------------------------- */

/* y (n × out) = x (n × in)·wᵀ + bias */
static void ref_linear(const double* x, size_t n, size_t in, const float* w, const float* bias, size_t out, double* y) {
  size_t i, o, j;
  for (i = 0; i < n; ++i)
    for (o = 0; o < out; ++o) {
      double s = bias != NULL ? (double)bias[o] : 0.0;
      for (j = 0; j < in; ++j) s += x[i * in + j] * (double)w[o * in + j];
      y[i * out + o] = s;
    }
}
static void ref_layer_norm(double* x, size_t n, size_t d, const float* w, const float* b, double eps) {
  size_t i, j;
  for (i = 0; i < n; ++i) {
    double mean = 0.0, var = 0.0;
    for (j = 0; j < d; ++j) mean += x[i * d + j];
    mean /= (double)d;
    for (j = 0; j < d; ++j) var += (x[i * d + j] - mean) * (x[i * d + j] - mean);
    var /= (double)d;
    for (j = 0; j < d; ++j)
      x[i * d + j] =
          (x[i * d + j] - mean) / sqrt(var + eps) * (w != NULL ? (double)w[j] : 1.0) + (b != NULL ? (double)b[j] : 0.0);
  }
}
static void ref_rms_norm(const double* x, size_t n, size_t d, const float* w, double eps, double* y) {
  size_t i, j;
  for (i = 0; i < n; ++i) {
    double ms = 0.0;
    for (j = 0; j < d; ++j) ms += x[i * d + j] * x[i * d + j];
    ms /= (double)d;
    for (j = 0; j < d; ++j) y[i * d + j] = x[i * d + j] / sqrt(ms + eps) * (w != NULL ? (double)w[j] : 1.0);
  }
}
static double ref_activation(int a, double x) {
  const double pi = 3.14159265358979323846;
  switch (a) {
    case MICROATTN_ACTIVATION_RELU:
      return x > 0.0 ? x : 0.0;
    case MICROATTN_ACTIVATION_GELU:
      return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case MICROATTN_ACTIVATION_GELU_TANH:
      return 0.5 * x * (1.0 + tanh(sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
    default:
      return x / (1.0 + exp(-x));
  }
}
/* Rotary embedding of one row of `heads` heads at position pos (theta 0: none). */
static void ref_rope(double* row, size_t heads, size_t hd, const microattn_layer_config* c, size_t pos) {
  size_t h, p, dims, half;
  if (c == NULL || c->rope_theta == 0.0f) return;
  dims = c->rope_dims != 0 ? c->rope_dims : hd;
  half = dims / 2;
  for (p = 0; p < half; ++p) {
    const double angle = (double)pos * pow((double)c->rope_theta, -2.0 * (double)p / (double)dims);
    const size_t a = c->rope_interleaved ? 2 * p : p, b = c->rope_interleaved ? 2 * p + 1 : p + half;
    for (h = 0; h < heads; ++h) {
      const double x = row[h * hd + a], z = row[h * hd + b];
      row[h * hd + a] = x * cos(angle) - z * sin(angle);
      row[h * hd + b] = x * sin(angle) + z * cos(angle);
    }
  }
}

typedef struct {
  const float *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
} ref_attention_weights;
static double rq[N_MAX * D_MAX], rk[N_MAX * D_MAX], rv[N_MAX * D_MAX], ratt[N_MAX * D_MAX];
/* Multi-head self-attention over n rows at positions 0 … n - 1, heads query heads sharing kv_heads K/V heads. */
static void ref_attention(const double* x, size_t n, size_t d, size_t heads, size_t kv_heads,
                          const ref_attention_weights* w, const microattn_layer_config* rope, int causal, double* y) {
  const size_t hd = d / heads, kvd = kv_heads * hd, group = heads / kv_heads;
  size_t i, j, h, e;
  double scores[N_MAX];
  ref_linear(x, n, d, w->wq, w->bq, d, rq);
  ref_linear(x, n, d, w->wk, w->bk, kvd, rk);
  ref_linear(x, n, d, w->wv, w->bv, kvd, rv);
  for (i = 0; i < n; ++i) {
    ref_rope(rq + i * d, heads, hd, rope, i);
    ref_rope(rk + i * kvd, kv_heads, hd, rope, i);
  }
  for (h = 0; h < heads; ++h) {
    const size_t g = h / group;
    for (i = 0; i < n; ++i) {
      const size_t seen = causal ? i + 1 : n;
      double top = -HUGE_VAL, sum = 0.0;
      for (j = 0; j < seen; ++j) {
        double s = 0.0;
        for (e = 0; e < hd; ++e) s += rq[i * d + h * hd + e] * rk[j * kvd + g * hd + e];
        scores[j] = s / sqrt((double)hd);
        if (scores[j] > top) top = scores[j];
      }
      for (j = 0; j < seen; ++j) sum += (scores[j] = exp(scores[j] - top));
      for (e = 0; e < hd; ++e) {
        double acc = 0.0;
        for (j = 0; j < seen; ++j) acc += scores[j] * rv[j * kvd + g * hd + e];
        ratt[i * d + h * hd + e] = acc / sum;
      }
    }
  }
  if (w->wo != NULL)
    ref_linear(ratt, n, d, w->wo, w->bo, d, y);
  else
    memcpy(y, ratt, n * d * sizeof *y);
}

/* ---- weights -------------------------------------------------------------------------------------------------- */

static float wq[D_MAX * D_MAX], wk[D_MAX * D_MAX], wv[D_MAX * D_MAX], wo[D_MAX * D_MAX];
static float bq[D_MAX], bk[D_MAX], bv[D_MAX], bo[D_MAX];
static float w1[F_MAX * D_MAX], w2[D_MAX * F_MAX], w3[F_MAX * D_MAX], b1[F_MAX], b2[D_MAX];
static float n1w[D_MAX], n1b[D_MAX], n2w[D_MAX], n2b[D_MAX];
static unsigned short wk_half[D_MAX * D_MAX], w2_half[D_MAX * F_MAX], w3_half[F_MAX * D_MAX];

static void make_weights(void) {
  size_t i;
  fill_weights(wq, sizeof wq / sizeof *wq);
  fill_weights(wk, sizeof wk / sizeof *wk);
  fill_weights(wv, sizeof wv / sizeof *wv);
  fill_weights(wo, sizeof wo / sizeof *wo);
  fill_weights(w1, sizeof w1 / sizeof *w1);
  fill_weights(w2, sizeof w2 / sizeof *w2);
  fill_weights(w3, sizeof w3 / sizeof *w3);
  fill(bq, D_MAX, -0.5f, 0.5f);
  fill(bk, D_MAX, -0.5f, 0.5f);
  fill(bv, D_MAX, -0.5f, 0.5f);
  fill(bo, D_MAX, -0.5f, 0.5f);
  fill(b1, F_MAX, -0.5f, 0.5f);
  fill(b2, D_MAX, -0.5f, 0.5f);
  fill(n1w, D_MAX, 0.5f, 1.5f);
  fill(n1b, D_MAX, -0.5f, 0.5f);
  fill(n2w, D_MAX, 0.5f, 1.5f);
  fill(n2b, D_MAX, -0.5f, 0.5f);
  for (i = 0; i < sizeof wk / sizeof *wk; ++i) wk_half[i] = half_bits(wk[i]);
  for (i = 0; i < sizeof w2 / sizeof *w2; ++i) w2_half[i] = half_bits(w2[i]);
  for (i = 0; i < sizeof w3 / sizeof *w3; ++i) w3_half[i] = half_bits(w3[i]);
}
static microattn_weight_matrix f32_matrix(const float* data, size_t rows, size_t cols) {
  microattn_weight_matrix m;
  memset(&m, 0, sizeof m);
  m.format = MICROATTN_FORMAT_F32;
  m.data = data;
  m.rows = rows;
  m.cols = cols;
  return m;
}
static microattn_weight_matrix f16_matrix(const unsigned short* data, size_t rows, size_t cols) {
  microattn_weight_matrix m = f32_matrix(NULL, rows, cols);
  m.format = MICROATTN_FORMAT_F16;
  m.data = data;
  return m;
}

/* ---- outputs inside canaries ---------------------------------------------------------------------------------- */

#define OUT_FLOATS (N_MAX * (D_MAX + 3) + 16)
static float out_arena[OUT_FLOATS];
static float x_data[N_MAX * D_MAX];
static double ref_y[N_MAX * D_MAX], ref_h[N_MAX * D_MAX], ref_t[N_MAX * D_MAX], ref_f[N_MAX * F_MAX],
    ref_g[N_MAX * F_MAX];

static void arena_reset(void) {
  size_t i;
  for (i = 0; i < OUT_FLOATS; ++i) out_arena[i] = canary();
}
/* y: rows × d at out_arena + 5, row stride d + gap. */
static microattn_view out_view(size_t rows, size_t d, size_t gap) {
  microattn_view v;
  v.data = out_arena + 5;
  v.rows = rows;
  v.cols = d;
  v.stride = d + gap;
  return v;
}
static int canaries_ok(microattn_view v) {
  size_t i;
  for (i = 0; i < OUT_FLOATS; ++i) {
    const size_t off = i >= 5 ? i - 5 : (size_t)-1;
    const int inside = i >= 5 && off / v.stride < v.rows && off % v.stride < v.cols;
    if (inside == is_canary(out_arena[i])) return 0;
  }
  return 1;
}
/* Row r of y against the reference within tol of the row's magnitude (and 1). */
static int rows_match(microattn_view y, size_t r0, const double* want, size_t rows, double tol, const char* what) {
  size_t r, j;
  for (r = 0; r < rows; ++r) {
    double mag = 1.0, worst = 0.0;
    for (j = 0; j < y.cols; ++j)
      if (fabs(want[r * y.cols + j]) > mag) mag = fabs(want[r * y.cols + j]);
    for (j = 0; j < y.cols; ++j) {
      const double e = fabs((double)y.data[(r0 + r) * y.stride + j] - want[r * y.cols + j]);
      if (!(e <= worst)) worst = e;
    }
    if (!(worst <= tol * mag)) {
      printf("  %s: row %u off by %g (tolerance %g)\n", what, (unsigned)(r0 + r), worst, tol * mag);
      return 0;
    }
  }
  return 1;
}
static microattn_cview as_input(const float* data, size_t rows, size_t cols) {
  microattn_cview v;
  v.data = data;
  v.rows = rows;
  v.cols = cols;
  v.stride = cols;
  return v;
}
static void to_double(const float* x, size_t n, double* y) {
  size_t i;
  for (i = 0; i < n; ++i) y[i] = (double)x[i];
}

/* ---- encoder -------------------------------------------------------------------------------------------------- */

typedef struct {
  size_t n, d, heads, ff;
  int norm_first, activation, causal, f16_linear2, out_proj;
} encoder_case;

static void ref_encoder(const encoder_case* c, double eps, double* y) {
  const size_t n = c->n, d = c->d, ff = c->ff;
  ref_attention_weights aw;
  size_t i;
  aw.wq = wq, aw.wk = wk, aw.wv = wv, aw.wo = c->out_proj ? wo : NULL;
  aw.bq = bq, aw.bk = bk, aw.bv = bv, aw.bo = c->out_proj ? bo : NULL;
  to_double(x_data, n * d, ref_h);
  if (c->norm_first) {
    memcpy(ref_t, ref_h, n * d * sizeof *ref_t);
    ref_layer_norm(ref_t, n, d, n1w, n1b, eps);
    ref_attention(ref_t, n, d, c->heads, c->heads, &aw, NULL, c->causal, y);
    for (i = 0; i < n * d; ++i) ref_h[i] += y[i]; /* h = x + sa(norm1(x)) */
    memcpy(ref_t, ref_h, n * d * sizeof *ref_t);
    ref_layer_norm(ref_t, n, d, n2w, n2b, eps);
    ref_linear(ref_t, n, d, w1, b1, ff, ref_f);
    for (i = 0; i < n * ff; ++i) ref_f[i] = ref_activation(c->activation, ref_f[i]);
    ref_linear(ref_f, n, ff, w2, b2, d, y);
    for (i = 0; i < n * d; ++i) y[i] += ref_h[i];
  } else {
    ref_attention(ref_h, n, d, c->heads, c->heads, &aw, NULL, c->causal, y);
    for (i = 0; i < n * d; ++i) ref_h[i] += y[i];
    ref_layer_norm(ref_h, n, d, n1w, n1b, eps); /* h = norm1(x + sa(x)) */
    ref_linear(ref_h, n, d, w1, b1, ff, ref_f);
    for (i = 0; i < n * ff; ++i) ref_f[i] = ref_activation(c->activation, ref_f[i]);
    ref_linear(ref_f, n, ff, w2, b2, d, y);
    for (i = 0; i < n * d; ++i) y[i] += ref_h[i];
    ref_layer_norm(y, n, d, n2w, n2b, eps);
  }
}

static microattn_encoder_layer_weights encoder_weights(const encoder_case* c) {
  microattn_encoder_layer_weights w;
  memset(&w, 0, sizeof w);
  w.self_attn.q = f32_matrix(wq, c->d, c->d);
  w.self_attn.k = f32_matrix(wk, c->d, c->d);
  w.self_attn.v = f32_matrix(wv, c->d, c->d);
  w.self_attn.q_bias = bq;
  w.self_attn.k_bias = bk;
  w.self_attn.v_bias = bv;
  if (c->out_proj) {
    w.self_attn.out = f32_matrix(wo, c->d, c->d);
    w.self_attn.out_bias = bo;
  }
  w.linear1 = f32_matrix(w1, c->ff, c->d);
  w.linear1_bias = b1;
  w.linear2 = c->f16_linear2 ? f16_matrix(w2_half, c->d, c->ff) : f32_matrix(w2, c->d, c->ff);
  w.linear2_bias = b2;
  w.norm1_weight = n1w;
  w.norm1_bias = n1b;
  w.norm2_weight = n2w;
  w.norm2_bias = n2b;
  return w;
}

static void test_encoder(void) {
  const size_t bq_rows = MICROATTN_ATTENTION_BLOCK_Q;
  const encoder_case cases[] = {
      {1, 4, 1, 3, 0, MICROATTN_ACTIVATION_RELU, 0, 0, 1},
      {7, 12, 3, 10, 1, MICROATTN_ACTIVATION_GELU, 0, 1, 1},
      {bq_rows + 3, 16, 2, 24, 0, MICROATTN_ACTIVATION_GELU_TANH, 1, 0, 1},
      {bq_rows + 1, 8, 4, 5, 1, MICROATTN_ACTIVATION_SILU, 0, 0, 0},
      {bq_rows, 16, 4, 17, 1, MICROATTN_ACTIVATION_RELU, 1, 1, 1},
      {bq_rows - 1, 6, 2, 9, 0, MICROATTN_ACTIVATION_SILU, 0, 0, 0},
  };
  size_t ci;
  for (ci = 0; ci < sizeof cases / sizeof cases[0]; ++ci) {
    const encoder_case* c = &cases[ci];
    const size_t max_seq = c->n + 2;
    const size_t cf = microattn_layer_cache_floats(max_seq, c->d, c->heads, c->heads);
    const size_t sf = microattn_encoder_layer_scratch_floats(max_seq, c->d, c->heads, c->ff);
    const microattn_encoder_layer_weights w = encoder_weights(c);
    microattn_encoder_layer_config config;
    microattn_encoder_layer layer;
    microattn_attention_options o;
    microattn_status s;
    microattn_view y = out_view(c->n, c->d, ci % 3);
    int pass;
    config.norm_first = c->norm_first;
    config.activation = (microattn_activation)c->activation;
    config.layer_norm_eps = 1e-5f;
    memset(&o, 0, sizeof o);
    o.causal = c->causal;
    cache_block[cf] = canary();
    scratch_block[sf] = canary();
    s = microattn_encoder_layer_init(&layer, max_seq, c->d, c->heads, c->ff, &w, &config, cache_block, cf,
                                     scratch_block, sf);
    CHECK(s == MICROATTN_OK, "case %u: init %s", (unsigned)ci, microattn_status_string(s));
    if (s != MICROATTN_OK) continue;
    for (pass = 0; pass < 2; ++pass) { /* twice: the cache refills, the result is the same */
      fill(x_data, c->n * c->d, -1.0f, 1.0f);
      arena_reset();
      s = microattn_encoder_layer_forward(&layer, as_input(x_data, c->n, c->d), y, &o);
      CHECK(s == MICROATTN_OK, "case %u: forward %s", (unsigned)ci, microattn_status_string(s));
      CHECK(canaries_ok(y), "case %u: canaries", (unsigned)ci);
      ref_encoder(c, 1e-5, ref_y);
      CHECK(rows_match(y, 0, ref_y, c->n, 1e-4, "encoder"), "case %u (n %u d %u heads %u ff %u norm_first %d)",
            (unsigned)ci, (unsigned)c->n, (unsigned)c->d, (unsigned)c->heads, (unsigned)c->ff, c->norm_first);
    }
    CHECK(is_canary(cache_block[cf]) && is_canary(scratch_block[sf]), "case %u: past the blocks", (unsigned)ci);
    /* in place (y exactly x), default config through NULL for the first case */
    {
      microattn_view yx;
      size_t i;
      fill(x_data, c->n * c->d, -1.0f, 1.0f);
      ref_encoder(c, 1e-5, ref_y);
      for (i = 0; i < OUT_FLOATS; ++i) out_arena[i] = 0.0f;
      memcpy(out_arena, x_data, c->n * c->d * sizeof *x_data);
      yx.data = out_arena, yx.rows = c->n, yx.cols = c->d, yx.stride = c->d;
      s = microattn_encoder_layer_forward(&layer, as_input(out_arena, c->n, c->d), yx, &o);
      CHECK(s == MICROATTN_OK && rows_match(yx, 0, ref_y, c->n, 1e-4, "in place"), "case %u in place", (unsigned)ci);
    }
  }
  /* config NULL: post-norm, relu, eps 1e-5 */
  {
    const encoder_case c = {5, 8, 2, 6, 0, MICROATTN_ACTIVATION_RELU, 0, 0, 1};
    const microattn_encoder_layer_weights w = encoder_weights(&c);
    microattn_encoder_layer layer;
    microattn_view y = out_view(c.n, c.d, 1);
    microattn_status s = microattn_encoder_layer_init(&layer, 8, c.d, c.heads, c.ff, &w, NULL, cache_block,
                                                      CACHE_FLOATS, scratch_block, ENC_SCRATCH);
    CHECK(s == MICROATTN_OK, "init defaults %s", microattn_status_string(s));
    fill(x_data, c.n * c.d, -1.0f, 1.0f);
    arena_reset();
    s = microattn_encoder_layer_forward(&layer, as_input(x_data, c.n, c.d), y, NULL);
    ref_encoder(&c, 1e-5, ref_y);
    CHECK(s == MICROATTN_OK && canaries_ok(y) && rows_match(y, 0, ref_y, c.n, 1e-4, "defaults"), "defaults");
  }
}

/* ---- decoder -------------------------------------------------------------------------------------------------- */

typedef struct {
  size_t n, d, heads, kv_heads, hidden;
  float theta;
  size_t rope_dims;
  int interleaved, out_proj;
  microattn_format cache;
  size_t prompt; /* rows of forward before the appends */
} decoder_case;

/* The decoder over the whole sequence x_data (n rows, causal, positions 0 …). */
static void ref_decoder(const decoder_case* c, const microattn_layer_config* rope, double eps, double* y) {
  const size_t n = c->n, d = c->d, hid = c->hidden;
  ref_attention_weights aw;
  size_t i;
  aw.wq = wq, aw.wk = wk, aw.wv = wv, aw.wo = c->out_proj ? wo : NULL;
  aw.bq = aw.bk = aw.bv = aw.bo = NULL;
  to_double(x_data, n * d, ref_h);
  ref_rms_norm(ref_h, n, d, n1w, eps, ref_t);
  ref_attention(ref_t, n, d, c->heads, c->kv_heads, &aw, rope, 1, y);
  for (i = 0; i < n * d; ++i) ref_h[i] += y[i]; /* h = x + attn(rms(x)) */
  ref_rms_norm(ref_h, n, d, n2w, eps, ref_t);
  ref_linear(ref_t, n, d, w1, NULL, hid, ref_f);
  ref_linear(ref_t, n, d, w3, NULL, hid, ref_g);
  for (i = 0; i < n * hid; ++i) ref_f[i] = ref_activation(MICROATTN_ACTIVATION_SILU, ref_f[i]) * ref_g[i];
  ref_linear(ref_f, n, hid, w2, NULL, d, y);
  for (i = 0; i < n * d; ++i) y[i] += ref_h[i];
}

static microattn_decoder_layer_weights decoder_weights(const decoder_case* c) {
  const size_t kvd = c->kv_heads * (c->d / c->heads);
  microattn_decoder_layer_weights w;
  memset(&w, 0, sizeof w);
  w.wq = f32_matrix(wq, c->d, c->d);
  w.wk = f16_matrix(wk_half, kvd, c->d); /* f16 storage of the same values */
  w.wv = f32_matrix(wv, kvd, c->d);
  if (c->out_proj) w.wo = f32_matrix(wo, c->d, c->d);
  w.w1 = f32_matrix(w1, c->hidden, c->d);
  w.w2 = f32_matrix(w2, c->d, c->hidden);
  w.w3 = f16_matrix(w3_half, c->hidden, c->d);
  w.attention_norm = n1w;
  w.ffn_norm = n2w;
  return w;
}

static void test_decoder(void) {
  const size_t bq_rows = MICROATTN_ATTENTION_BLOCK_Q;
  const decoder_case cases[] = {
      {9, 8, 2, 1, 12, 10000.0f, 0, 0, 1, MICROATTN_FORMAT_F32, 4},
      {bq_rows + 3, 16, 4, 2, 20, 10000.0f, 2, 1, 1, MICROATTN_FORMAT_F32, bq_rows + 1},
      {5, 12, 3, 3, 7, 0.0f, 0, 0, 0, MICROATTN_FORMAT_F32, 1},
      {bq_rows + 2, 16, 2, 2, 24, 500.0f, 0, 1, 1, MICROATTN_FORMAT_F32, 2},
      {11, 16, 4, 1, 9, 10000.0f, 0, 0, 1, MICROATTN_FORMAT_F16, 3},
      {10, 8, 2, 2, 12, 10000.0f, 4, 0, 1, MICROATTN_FORMAT_Q8, 5},
  };
  size_t ci;
  for (ci = 0; ci < sizeof cases / sizeof cases[0]; ++ci) {
    const decoder_case* c = &cases[ci];
    const size_t max_seq = c->n + 1;
    const size_t cb = microattn_layer_cache_bytes(max_seq, c->d, c->heads, c->kv_heads, c->cache);
    const size_t cf = (cb + 3) / 4;
    const size_t sf = microattn_decoder_layer_scratch_floats(max_seq, c->d, c->heads, c->hidden, c->cache);
    const microattn_decoder_layer_weights w = decoder_weights(c);
    /* f32: the bound of the blocks; f16 / q8: K and V rounded when stored */
    const double tol = c->cache == MICROATTN_FORMAT_F32 ? 1e-4 : c->cache == MICROATTN_FORMAT_F16 ? 3e-3 : 3e-2;
    microattn_decoder_layer_config config;
    microattn_decoder_layer layer;
    microattn_status s;
    microattn_view y = out_view(c->n, c->d, ci % 2);
    size_t t;
    memset(&config, 0, sizeof config);
    config.attention.rope_theta = c->theta;
    config.attention.rope_dims = c->rope_dims;
    config.attention.rope_interleaved = c->interleaved;
    config.rms_norm_eps = 1e-5f;
    cache_block[cf] = canary();
    scratch_block[sf] = canary();
    s = microattn_decoder_layer_init(&layer, max_seq, c->d, c->heads, c->kv_heads, c->hidden, &w, &config, c->cache,
                                     cache_block, cb, scratch_block, sf);
    CHECK(s == MICROATTN_OK, "case %u: init %s", (unsigned)ci, microattn_status_string(s));
    if (s != MICROATTN_OK) continue;
    CHECK(microattn_decoder_layer_cached(&layer) == 0 && microattn_decoder_layer_position(&layer) == 0, "empty");
    fill(x_data, c->n * c->d, -1.0f, 1.0f);
    ref_decoder(c, &config.attention, 1e-5, ref_y);
    /* forward over the whole sequence */
    arena_reset();
    s = microattn_decoder_layer_forward(&layer, as_input(x_data, c->n, c->d), y, NULL);
    CHECK(s == MICROATTN_OK && canaries_ok(y), "case %u: forward %s", (unsigned)ci, microattn_status_string(s));
    CHECK(rows_match(y, 0, ref_y, c->n, tol, "decoder forward"), "case %u (n %u d %u heads %u/%u hidden %u)",
          (unsigned)ci, (unsigned)c->n, (unsigned)c->d, (unsigned)c->heads, (unsigned)c->kv_heads, (unsigned)c->hidden);
    CHECK(microattn_decoder_layer_cached(&layer) == c->n && microattn_decoder_layer_position(&layer) == c->n,
          "case %u: cached %u", (unsigned)ci, (unsigned)microattn_decoder_layer_cached(&layer));
    /* a prompt, then token by token: the rows of the whole sequence's forward */
    CHECK(microattn_decoder_layer_reset(&layer) == MICROATTN_OK && microattn_decoder_layer_cached(&layer) == 0 &&
              microattn_decoder_layer_position(&layer) == 0,
          "reset");
    arena_reset();
    {
      microattn_view yp = y;
      yp.rows = c->prompt;
      s = microattn_decoder_layer_forward(&layer, as_input(x_data, c->prompt, c->d), yp, NULL);
      CHECK(s == MICROATTN_OK && canaries_ok(yp), "case %u: prompt", (unsigned)ci);
    }
    for (t = c->prompt; t < c->n; ++t) {
      microattn_view yt = y;
      yt.data = y.data + t * y.stride;
      yt.rows = 1;
      s = microattn_decoder_layer_append(&layer, as_input(x_data + t * c->d, 1, c->d), yt, NULL);
      CHECK(s == MICROATTN_OK, "case %u: append %u: %s", (unsigned)ci, (unsigned)t, microattn_status_string(s));
      CHECK(microattn_decoder_layer_position(&layer) == t + 1, "position");
    }
    CHECK(canaries_ok(y), "case %u: canaries after appends", (unsigned)ci);
    CHECK(rows_match(y, 0, ref_y, c->n, tol, "decoder append"), "case %u: prompt %u + appends", (unsigned)ci,
          (unsigned)c->prompt);
    CHECK(is_canary(cache_block[cf]) && is_canary(scratch_block[sf]), "case %u: past the blocks", (unsigned)ci);
  }
}

/* ---- bad input ------------------------------------------------------------------------------------------------ */

static unsigned char snapshot_cache[sizeof cache_block], snapshot_scratch[sizeof scratch_block];
static float snapshot_out[OUT_FLOATS];
static void take_snapshot(void) {
  memcpy(snapshot_cache, cache_block, sizeof cache_block);
  memcpy(snapshot_scratch, scratch_block, sizeof scratch_block);
  memcpy(snapshot_out, out_arena, sizeof out_arena);
}
/* y's arena and the cache; with `scratch`, the scratch too (a decoder call that fails in its attention step, as an
 * append past max_seq, has used the scratch already: its contents are undefined after every call, as the C++
 * block's). */
static int memory_untouched(int scratch) {
  return memcmp(snapshot_cache, cache_block, sizeof cache_block) == 0 &&
         (!scratch || memcmp(snapshot_scratch, scratch_block, sizeof scratch_block) == 0) &&
         memcmp(snapshot_out, out_arena, sizeof out_arena) == 0;
}
static float misaligned_floats[D_MAX * F_MAX + 2];
static float* misaligned(void) { return (float*)((char*)misaligned_floats + 2); }

#define E_SEQ 6
#define E_D 8
#define E_H 2
#define E_FF 10

typedef struct {
  microattn_encoder_layer* layer;
  size_t max_seq, d, heads, ff;
  microattn_encoder_layer_weights w;
  const microattn_encoder_layer_config* config;
  microattn_encoder_layer_config cfg;
  float* cache;
  size_t cache_floats;
  float* scratch;
  size_t scratch_floats;
} encoder_init_args;

static void test_encoder_bad_input(void) {
  const encoder_case ec = {E_SEQ, E_D, E_H, E_FF, 0, MICROATTN_ACTIVATION_RELU, 0, 0, 1};
  microattn_encoder_layer layer, untouched;
  encoder_init_args good, a;
  const size_t cf = MICROATTN_LAYER_CACHE_FLOATS(E_SEQ, E_D, E_H, E_H);
  const size_t sf = MICROATTN_ENCODER_LAYER_SCRATCH_FLOATS(E_SEQ, E_D, E_H, E_FF);
  static const float nan_value = 0.0f;
  int row;
  memset(&good, 0, sizeof good);
  good.layer = &layer;
  good.max_seq = E_SEQ, good.d = E_D, good.heads = E_H, good.ff = E_FF;
  good.w = encoder_weights(&ec);
  good.cfg.norm_first = 0, good.cfg.activation = MICROATTN_ACTIVATION_GELU, good.cfg.layer_norm_eps = 1e-5f;
  good.config = &good.cfg;
  good.cache = cache_block, good.cache_floats = cf;
  good.scratch = scratch_block, good.scratch_floats = sf;
  (void)nan_value;
  for (row = 0;; ++row) {
    microattn_status want = MICROATTN_OK, s;
    a = good;
    a.config = &a.cfg;
    switch (row) {
      case 0:
        break; /* the good arguments */
      case 1:
        a.layer = NULL, want = MICROATTN_NULL_POINTER;
        break;
      case 2:
        a.cache = NULL, want = MICROATTN_NULL_POINTER;
        break;
      case 3:
        a.scratch = NULL, want = MICROATTN_NULL_POINTER;
        break;
      case 4:
        a.w.self_attn.v.data = NULL, want = MICROATTN_NULL_POINTER;
        break;
      case 5:
        a.w.linear1.data = NULL, want = MICROATTN_NULL_POINTER;
        break;
      case 6:
        a.w.linear2.format = MICROATTN_FORMAT_Q8, a.w.linear2.group = E_FF, want = MICROATTN_NULL_POINTER;
        break;
      case 7:
        a.w.self_attn.out.data = NULL, want = MICROATTN_NULL_POINTER;
        break; /* out_bias stays */
      case 8:
        a.max_seq = 0, want = MICROATTN_INVALID_SHAPE;
        break;
      case 9:
        a.heads = 3, want = MICROATTN_INVALID_SHAPE;
        break;
      case 10:
        a.ff = 0, want = MICROATTN_INVALID_SHAPE;
        break;
      case 11:
        a.w.linear1.rows = E_FF + 1, want = MICROATTN_INVALID_SHAPE;
        break;
      case 12:
        a.w.linear2.cols = E_FF - 1, want = MICROATTN_INVALID_SHAPE;
        break;
      case 13:
        a.w.self_attn.k.format = (microattn_format)7, want = MICROATTN_INVALID_SHAPE;
        break;
      case 14:
        a.cfg.layer_norm_eps = -1e-5f, want = MICROATTN_INVALID_SHAPE;
        break;
      case 15:
        a.cfg.layer_norm_eps = (float)NAN, want = MICROATTN_INVALID_SHAPE;
        break;
      case 16:
        a.cfg.layer_norm_eps = (float)INFINITY, want = MICROATTN_INVALID_SHAPE;
        break;
      case 17:
        a.cfg.activation = (microattn_activation)4, want = MICROATTN_INVALID_SHAPE;
        break;
      case 18:
        a.cache_floats = cf - 1, want = MICROATTN_WORKSPACE_TOO_SMALL;
        break;
      case 19:
        a.scratch_floats = sf - 1, want = MICROATTN_WORKSPACE_TOO_SMALL;
        break;
      case 20:
        a.cache = (float*)((char*)cache_block + 2), want = MICROATTN_MISALIGNED;
        break;
      case 21:
        a.w.norm2_bias = misaligned(), want = MICROATTN_MISALIGNED;
        break;
      case 22:
        a.w.linear1_bias = misaligned(), want = MICROATTN_MISALIGNED;
        break;
      case 23:
        a.w.linear1.data = misaligned(), want = MICROATTN_MISALIGNED;
        break;
      case 24:
        a.w.linear1.data = cache_block + 3, want = MICROATTN_ALIASING;
        break;
      case 25:
        a.w.norm1_weight = scratch_block + sf - 1, want = MICROATTN_ALIASING;
        break;
      case 26:
        a.w.self_attn.q_bias = cache_block, want = MICROATTN_ALIASING;
        break;
      case 27:
        a.scratch = cache_block + cf - 1, want = MICROATTN_ALIASING;
        break;
      /* the order: the first failing check's status */
      case 28:
        a.cache = NULL, a.max_seq = 0, want = MICROATTN_NULL_POINTER;
        break;
      case 29:
        a.max_seq = 0, a.cache_floats = 0, want = MICROATTN_INVALID_SHAPE;
        break;
      case 30:
        a.cache_floats = 0, a.scratch = (float*)((char*)scratch_block + 1), want = MICROATTN_WORKSPACE_TOO_SMALL;
        break;
      case 31:
        a.w.norm1_bias = misaligned(), a.w.linear2.data = cache_block, want = MICROATTN_MISALIGNED;
        break;
      case 32:
        a.config = NULL;
        break; /* defaults */
      default:
        row = -1;
        break;
    }
    if (row < 0) break;
    memset(&layer, 0x5a, sizeof layer);
    untouched = layer;
    s = microattn_encoder_layer_init(a.layer, a.max_seq, a.d, a.heads, a.ff, &a.w, a.config, a.cache, a.cache_floats,
                                     a.scratch, a.scratch_floats);
    CHECK(s == want, "encoder init row %d: %s, want %s", row, microattn_status_string(s),
          microattn_status_string(want));
    if (want != MICROATTN_OK)
      CHECK(memcmp(&layer, &untouched, sizeof layer) == 0, "encoder init row %d wrote the layer", row);
  }
  CHECK(microattn_encoder_layer_init(&layer, E_SEQ, E_D, E_H, E_FF, NULL, NULL, cache_block, cf, scratch_block, sf) ==
            MICROATTN_NULL_POINTER,
        "weights NULL");

  /* calls */
  {
    microattn_encoder_layer zero;
    microattn_status s;
    microattn_attention_options o;
    float mask[E_SEQ * E_SEQ];
    microattn_cview x = as_input(x_data, 4, E_D);
    microattn_view y = out_view(4, E_D, 1);
    memset(&zero, 0, sizeof zero);
    memset(mask, 0, sizeof mask);
    s = microattn_encoder_layer_init(&layer, E_SEQ, E_D, E_H, E_FF, &good.w, &good.cfg, cache_block, cf, scratch_block,
                                     sf);
    CHECK(s == MICROATTN_OK, "init %s", microattn_status_string(s));
    fill(x_data, 4 * E_D, -1.0f, 1.0f);
    for (row = 0;; ++row) {
      microattn_cview xr = x;
      microattn_view yr = y;
      microattn_encoder_layer* l = &layer;
      const microattn_attention_options* op = NULL;
      microattn_status want;
      memset(&o, 0, sizeof o);
      switch (row) {
        case 0:
          l = NULL, want = MICROATTN_NULL_POINTER;
          break;
        case 1:
          l = &zero, want = MICROATTN_NULL_POINTER;
          break;
        case 2:
          xr.data = NULL, want = MICROATTN_NULL_POINTER;
          break;
        case 3:
          yr.data = NULL, want = MICROATTN_NULL_POINTER;
          break;
        case 4:
          yr.data = (float*)((char*)yr.data + 2), want = MICROATTN_MISALIGNED;
          break;
        case 5:
          xr.cols = E_D - 1, want = MICROATTN_INVALID_SHAPE;
          break;
        case 6:
          xr.rows = E_SEQ + 1, yr.rows = E_SEQ + 1, want = MICROATTN_INVALID_SHAPE;
          break;
        case 7:
          yr.rows = 3, want = MICROATTN_INVALID_SHAPE;
          break;
        case 8:
          yr.stride = E_D - 1, want = MICROATTN_INVALID_SHAPE;
          break;
        case 9:
          o.mask = as_input(mask, 4, 3), op = &o, want = MICROATTN_INVALID_SHAPE;
          break;
        case 10:
          xr.data = yr.data + 1, xr.stride = yr.stride, want = MICROATTN_ALIASING;
          break;
        case 11:
          yr.data = w1 + 1, yr.rows = 1, xr.rows = 1, want = MICROATTN_ALIASING;
          break;
        case 12:
          yr.data = n2w, yr.rows = 1, yr.stride = E_D, xr.rows = 1, want = MICROATTN_ALIASING;
          break;
        case 13:
          yr.data = scratch_block + 7, want = MICROATTN_ALIASING;
          break;
        case 14:
          xr.data = cache_block + cf - 2, want = MICROATTN_ALIASING;
          break;
        case 15:
          o.mask = as_input(cache_block, 4, 4), op = &o, want = MICROATTN_ALIASING;
          break;
        case 16:
          yr.data = cache_block, xr.cols = 3, want = MICROATTN_INVALID_SHAPE;
          break; /* shape first */
        default:
          row = -1, want = MICROATTN_OK;
          break;
      }
      if (row < 0) break;
      arena_reset();
      take_snapshot();
      {
        float w1_copy[sizeof w1 / sizeof *w1], n2w_copy[D_MAX];
        memcpy(w1_copy, w1, sizeof w1);
        memcpy(n2w_copy, n2w, sizeof n2w);
        s = microattn_encoder_layer_forward(l, xr, yr, op);
        CHECK(s == want, "encoder forward row %d: %s, want %s", row, microattn_status_string(s),
              microattn_status_string(want));
        CHECK(memory_untouched(1) && memcmp(w1_copy, w1, sizeof w1) == 0 && memcmp(n2w_copy, n2w, sizeof n2w) == 0,
              "encoder forward row %d wrote", row);
      }
    }
    arena_reset();
    s = microattn_encoder_layer_forward(&layer, x, y, NULL);
    CHECK(s == MICROATTN_OK && canaries_ok(y), "the layer still works: %s", microattn_status_string(s));
  }
}

#define DS 6
#define DD 8
#define DH 2
#define DKV 1
#define DHID 12

static void test_decoder_bad_input(void) {
  const decoder_case dc = {DS, DD, DH, DKV, DHID, 10000.0f, 0, 0, 1, MICROATTN_FORMAT_F32, 1};
  const microattn_decoder_layer_weights good_w = decoder_weights(&dc);
  microattn_decoder_layer layer, untouched;
  microattn_decoder_layer_config good_c;
  const size_t cb = microattn_layer_cache_bytes(DS, DD, DH, DKV, MICROATTN_FORMAT_Q8);
  const size_t sf = microattn_decoder_layer_scratch_floats(DS, DD, DH, DHID, MICROATTN_FORMAT_Q8);
  int row;
  memset(&good_c, 0, sizeof good_c);
  good_c.attention.rope_theta = 10000.0f;
  good_c.rms_norm_eps = 1e-6f;
  for (row = 0;; ++row) {
    microattn_decoder_layer_weights w = good_w;
    microattn_decoder_layer_config c = good_c;
    const microattn_decoder_layer_config* cp = &c;
    microattn_decoder_layer* l = &layer;
    microattn_format f = MICROATTN_FORMAT_Q8;
    size_t max_seq = DS, d = DD, heads = DH, kv = DKV, hidden = DHID, bytes = cb, sfl = sf;
    void* cache = cache_block;
    float* scratch = scratch_block;
    microattn_status want = MICROATTN_OK, s;
    switch (row) {
      case 0:
        break;
      case 1:
        l = NULL, want = MICROATTN_NULL_POINTER;
        break;
      case 2:
        cache = NULL, want = MICROATTN_NULL_POINTER;
        break;
      case 3:
        scratch = NULL, want = MICROATTN_NULL_POINTER;
        break;
      case 4:
        w.wq.data = NULL, want = MICROATTN_NULL_POINTER;
        break;
      case 5:
        w.w2.data = NULL, want = MICROATTN_NULL_POINTER;
        break;
      case 6:
        w.w3.format = MICROATTN_FORMAT_Q8, w.w3.group = DD, want = MICROATTN_NULL_POINTER;
        break;
      case 7:
        kv = 3, want = MICROATTN_INVALID_SHAPE;
        break;
      case 8:
        hidden = 0, want = MICROATTN_INVALID_SHAPE;
        break;
      case 9:
        f = (microattn_format)3, want = MICROATTN_INVALID_SHAPE;
        break;
      case 10:
        w.wk.rows = DD, want = MICROATTN_INVALID_SHAPE;
        break; /* kv_heads·head_dim rows */
      case 11:
        w.w1.cols = DHID, want = MICROATTN_INVALID_SHAPE;
        break;
      case 12:
        c.attention.rope_dims = 3, want = MICROATTN_INVALID_SHAPE;
        break;
      case 13:
        c.attention.rope_theta = 0.5f, want = MICROATTN_INVALID_SHAPE;
        break;
      case 14:
        c.rms_norm_eps = -1.0f, want = MICROATTN_INVALID_SHAPE;
        break;
      case 15:
        bytes = cb - 1, want = MICROATTN_WORKSPACE_TOO_SMALL;
        break;
      case 16:
        sfl = sf - 1, want = MICROATTN_WORKSPACE_TOO_SMALL;
        break;
      case 17:
        sfl = microattn_decoder_layer_scratch_floats(DS, DD, DH, DHID, MICROATTN_FORMAT_F32),
        want = MICROATTN_WORKSPACE_TOO_SMALL;
        break; /* q8 needs its conversion block */
      case 18:
        scratch = (float*)((char*)scratch_block + 1), want = MICROATTN_MISALIGNED;
        break;
      case 19:
        w.ffn_norm = misaligned(), want = MICROATTN_MISALIGNED;
        break;
      case 20:
        w.wk.data = (const char*)wk_half + 1, want = MICROATTN_MISALIGNED;
        break;
      case 21:
        w.wv.data = scratch_block + 2, want = MICROATTN_ALIASING;
        break;
      case 22:
        w.attention_norm = (const float*)cache_block + 1, want = MICROATTN_ALIASING;
        break;
      case 23:
        scratch = cache_block + 4, want = MICROATTN_ALIASING;
        break;
      case 24:
        f = MICROATTN_FORMAT_F32, bytes = cb, want = MICROATTN_WORKSPACE_TOO_SMALL;
        break; /* f32 is larger */
      case 25:
        cp = NULL;
        break;
      case 26:
        w.wo.data = NULL;
        break; /* no out projection */
      default:
        row = -1;
        break;
    }
    if (row < 0) break;
    (void)max_seq;
    memset(&layer, 0x5a, sizeof layer);
    untouched = layer;
    s = microattn_decoder_layer_init(l, max_seq, d, heads, kv, hidden, &w, cp, f, cache, bytes, scratch, sfl);
    CHECK(s == want, "decoder init row %d: %s, want %s", row, microattn_status_string(s),
          microattn_status_string(want));
    if (want != MICROATTN_OK)
      CHECK(memcmp(&layer, &untouched, sizeof layer) == 0, "decoder init row %d wrote the layer", row);
  }

  /* calls: a layer with a q8 cache, 3 tokens cached */
  {
    microattn_decoder_layer zero;
    microattn_status s;
    microattn_view y = out_view(DS, DD, 2);
    microattn_attention_options o;
    memset(&zero, 0, sizeof zero);
    s = microattn_decoder_layer_init(&layer, DS, DD, DH, DKV, DHID, &good_w, &good_c, MICROATTN_FORMAT_Q8, cache_block,
                                     cb, scratch_block, sf);
    CHECK(s == MICROATTN_OK, "init %s", microattn_status_string(s));
    fill(x_data, DS * DD, -1.0f, 1.0f);
    {
      microattn_view y3 = y;
      y3.rows = 3;
      s = microattn_decoder_layer_forward(&layer, as_input(x_data, 3, DD), y3, NULL);
      CHECK(s == MICROATTN_OK && microattn_decoder_layer_cached(&layer) == 3, "prompt %s", microattn_status_string(s));
    }
    for (row = 0;; ++row) {
      microattn_cview x = as_input(x_data, 2, DD);
      microattn_view yr = y;
      microattn_decoder_layer* l = &layer;
      const microattn_attention_options* op = NULL;
      int append = 1;
      microattn_status want;
      yr.rows = 2;
      memset(&o, 0, sizeof o);
      switch (row) {
        case 0:
          l = NULL, want = MICROATTN_NULL_POINTER;
          break;
        case 1:
          l = &zero, want = MICROATTN_NULL_POINTER;
          break;
        case 2:
          x.data = NULL, want = MICROATTN_NULL_POINTER;
          break;
        case 3:
          x.data = (const float*)((const char*)x_data + 2), want = MICROATTN_MISALIGNED;
          break;
        case 4:
          x.rows = 4, yr.rows = 4, want = MICROATTN_INVALID_SHAPE;
          break; /* 3 + 4 > max_seq */
        case 5:
          x.rows = 7, yr.rows = 7, append = 0, want = MICROATTN_INVALID_SHAPE;
          break;
        case 6:
          yr.cols = DD + 1, want = MICROATTN_INVALID_SHAPE;
          break;
        case 7:
          o.mask = as_input(x_data, 2, 4), op = &o, want = MICROATTN_INVALID_SHAPE;
          break; /* 2 × 5 needed */
        case 8:
          yr.data = (float*)x_data + 1, yr.stride = DD, want = MICROATTN_ALIASING;
          break;
        case 9:
          yr.data = wq, yr.stride = DD, want = MICROATTN_ALIASING;
          break;
        case 10:
          yr.data = scratch_block + sf - 3, want = MICROATTN_ALIASING;
          break;
        case 11:
          x.data = cache_block, append = 0, want = MICROATTN_ALIASING;
          break;
        case 12:
          o.mask = as_input(scratch_block, 2, 5), op = &o, want = MICROATTN_ALIASING;
          break;
        default:
          row = -1, want = MICROATTN_OK;
          break;
      }
      if (row < 0) break;
      arena_reset();
      take_snapshot();
      {
        float wq_copy[sizeof wq / sizeof *wq];
        memcpy(wq_copy, wq, sizeof wq);
        s = append ? microattn_decoder_layer_append(l, x, yr, op) : microattn_decoder_layer_forward(l, x, yr, op);
        CHECK(s == want, "decoder %s row %d: %s, want %s", append ? "append" : "forward", row,
              microattn_status_string(s), microattn_status_string(want));
        CHECK(memory_untouched(row != 4) && memcmp(wq_copy, wq, sizeof wq) == 0, "decoder row %d wrote", row);
        CHECK(microattn_decoder_layer_cached(&layer) == 3 && microattn_decoder_layer_position(&layer) == 3,
              "decoder row %d moved the cache", row);
      }
    }
    CHECK(microattn_decoder_layer_reset(NULL) == MICROATTN_NULL_POINTER, "reset NULL");
    CHECK(microattn_decoder_layer_reset(&zero) == MICROATTN_NULL_POINTER, "reset zeroed");
    CHECK(microattn_decoder_layer_cached(NULL) == 0 && microattn_decoder_layer_position(NULL) == 0, "NULL");
    arena_reset();
    {
      microattn_view y3 = y;
      y3.rows = 3;
      s = microattn_decoder_layer_append(&layer, as_input(x_data + 3 * DD, 3, DD), y3, NULL);
      CHECK(s == MICROATTN_OK && canaries_ok(y3) && microattn_decoder_layer_position(&layer) == 6,
            "the layer still works: %s", microattn_status_string(s));
    }
  }
}

int main(void) {
  make_weights();
  test_sizes();
  test_encoder();
  test_decoder();
  test_encoder_bad_input();
  test_decoder_bad_input();
  printf("%d checks, %d failures\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
