/* The C API (microattn.h) from C: every function against a double-precision reference written here, over shapes
 * that cross the vector and tile edges, outputs inside NaN canaries, and every error path writing nothing.
 * Compiled as C99 on every target (native, Linux cross, Cortex-M under QEMU); the exit status is the verdict. */
#include <microattn/microattn.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "capi_test.h"

static const double unit_roundoff = 5.9604644775390625e-8; /* 2^-24 */

static void fill(float* p, size_t n, float bound) {
  size_t i;
  for (i = 0; i < n; ++i) p[i] = uniform(-bound, bound);
}

/* Canary arena: every float not written by a correct call is NaN with this payload. */
#define ARENA_FLOATS 40000
static float arena[ARENA_FLOATS];
static float arena_copy[ARENA_FLOATS];
static void arena_reset(void) {
  const float c = canary();
  size_t i;
  for (i = 0; i < ARENA_FLOATS; ++i) arena[i] = c;
}
/* An output view of rows × cols at arena + offset with a row gap of `gap` floats. */
static microattn_view arena_view(size_t offset, size_t rows, size_t cols, size_t gap) {
  microattn_view v;
  v.data = arena + offset;
  v.rows = rows;
  v.cols = cols;
  v.stride = cols + gap;
  return v;
}
static size_t view_end(microattn_view v) { return (size_t)(v.data - arena) + (v.rows - 1) * v.stride + v.cols; }
/* Every canary outside the view survived, and every element inside it was written (is not the canary). */
static int canaries_intact(microattn_view v) {
  size_t i, begin = (size_t)(v.data - arena), end = view_end(v);
  unsigned c_bits, a_bits;
  const float c = canary();
  memcpy(&c_bits, &c, sizeof c_bits);
  for (i = 0; i < ARENA_FLOATS; ++i) {
    const int inside = i >= begin && i < end && (i - begin) % v.stride < v.cols;
    memcpy(&a_bits, &arena[i], sizeof a_bits);
    if (inside == (a_bits == c_bits)) return 0;
  }
  return 1;
}
static float at(microattn_view v, size_t r, size_t c) { return v.data[r * v.stride + c]; }
static microattn_cview cview(const float* data, size_t rows, size_t cols, size_t stride) {
  microattn_cview v;
  v.data = data;
  v.rows = rows;
  v.cols = cols;
  v.stride = stride;
  return v;
}
static microattn_cview as_input(microattn_view v) { return cview(v.data, v.rows, v.cols, v.stride); }

/* ---- double references -------------------------------------------------------------------------------- */

static double ref_dot(const float* a, size_t lda, const float* b, size_t ldb, int tb, size_t i, size_t j, size_t k,
                      double* abs_sum) {
  double s = 0, sa = 0;
  size_t p;
  for (p = 0; p < k; ++p) {
    const double x = (double)a[i * lda + p] * (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
    s += x;
    sa += fabs(x);
  }
  *abs_sum = sa;
  return s;
}

static void test_strings_and_build(void) {
  static const char* const names[] = {"ok", "null_pointer", "invalid_shape", "workspace_too_small", "aliasing"};
  int s;
  for (s = MICROATTN_OK; s <= MICROATTN_ALIASING; ++s)
    CHECK(strcmp(microattn_status_string((microattn_status)s), names[s]) == 0, "status %d: %s", s,
          microattn_status_string((microattn_status)s));
  CHECK(MICROATTN_MISALIGNED == 5, "MICROATTN_MISALIGNED = %d", (int)MICROATTN_MISALIGNED);
  CHECK(strcmp(microattn_status_string(MICROATTN_MISALIGNED), "misaligned") == 0, "misaligned's name");
  CHECK(strcmp(microattn_status_string((microattn_status)99), "unknown_status") == 0, "unknown value");
  CHECK(microattn_version() != NULL && microattn_version()[0] >= '0' && microattn_version()[0] <= '9', "version");
  CHECK(microattn_simd_arch() != NULL && microattn_simd_arch()[0] != '\0', "simd_arch");
  /* the machine running the tests runs the library */
  CHECK(microattn_cpu_supported() == 1, "cpu_supported: missing %s", microattn_cpu_missing());
  CHECK(microattn_cpu_missing() != NULL && microattn_cpu_missing()[0] == '\0', "cpu_missing");
  CHECK(microattn_matmul_kernel_name() != NULL && strncmp(microattn_matmul_kernel_name(), "gemm_", 5) == 0,
        "kernel name %s", microattn_matmul_kernel_name());
}

static void test_size_formulas(void) {
  static const size_t dims[] = {1, 3, 8, 16, 64, 80, 128};
  size_t i, j;
  for (i = 0; i < sizeof dims / sizeof dims[0]; ++i)
    for (j = 0; j < sizeof dims / sizeof dims[0]; ++j)
      CHECK(MICROATTN_ATTENTION_WORKSPACE_FLOATS(dims[i], dims[j]) ==
                microattn_attention_workspace_floats(dims[i], dims[j]),
            "workspace macro differs at %u, %u", (unsigned)dims[i], (unsigned)dims[j]);
  CHECK(MICROATTN_LAYER_BUFFER_FLOATS(64, 64, 4, 4) == microattn_layer_buffer_floats(64, 64, 4, 4), "layer macro");
  CHECK(MICROATTN_LAYER_BUFFER_FLOATS(40, 48, 6, 2) == microattn_layer_buffer_floats(40, 48, 6, 2), "layer macro");
  CHECK(MICROATTN_LAYER_BUFFER_FLOATS(3, 2, 1, 1) == microattn_layer_buffer_floats(3, 2, 1, 1), "layer macro");
  CHECK(microattn_layer_buffer_floats(0, 64, 4, 4) == 0, "max_seq 0");
  CHECK(microattn_layer_buffer_floats(8, 30, 4, 4) == 0, "model_dim %% heads");
  CHECK(microattn_layer_buffer_floats(8, 64, 4, 3) == 0, "heads %% kv_heads");
  CHECK(microattn_layer_buffer_floats((size_t)-1 / 4, 64, 1, 1) == 0, "overflow");
}

/* Every size function returns 0 exactly when the block's size in bytes would exceed PTRDIFF_MAX (the largest
 * object; a float count past SIZE_MAX included): just below the limit the formula, just past it 0. The boundaries
 * come from the documented formulas, not from the library. */
static void test_size_limits(void) {
  static const size_t shapes[][3] = {{1, 1, 1}, {2, 1, 1}, {64, 4, 2}, {48, 6, 3}, {64, 1, 1}}; /* dim, heads, kv */
  static const size_t head_dims[] = {1, 64};
  const size_t max_floats = (size_t)PTRDIFF_MAX / sizeof(float);
  const size_t bq = MICROATTN_ATTENTION_BLOCK_Q, fixed = MICROATTN_ATTENTION_BLOCK_KV + 3u;
  size_t i;
  for (i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
    const size_t dim = shapes[i][0], heads = shapes[i][1], kv = shapes[i][2], hd = dim / heads, kv_dim = kv * hd;
    const size_t scratch = 2u * bq * dim + bq * (2u * hd + fixed) + 16u;
    const size_t seq_cache = max_floats / (2u * kv_dim), seq_buffer = (max_floats - scratch) / (2u * kv_dim);
    CHECK(microattn_layer_cache_floats(seq_cache, dim, heads, kv) == 2u * seq_cache * kv_dim, "cache at the limit, %u",
          (unsigned)i);
    CHECK(microattn_layer_cache_floats(seq_cache + 1, dim, heads, kv) == 0, "cache past the limit, %u", (unsigned)i);
    CHECK(microattn_layer_buffer_floats(seq_buffer, dim, heads, kv) == 2u * seq_buffer * kv_dim + scratch,
          "buffer at the limit, %u", (unsigned)i);
    CHECK(microattn_layer_buffer_floats(seq_buffer + 1, dim, heads, kv) == 0, "buffer past the limit, %u", (unsigned)i);
  }
  for (i = 0; i < sizeof head_dims / sizeof head_dims[0]; ++i) {
    /* scratch: 2·Bq·heads·hd + Bq·(2·hd + Bkv + 3) + 16, growing with the number of heads */
    const size_t hd = head_dims[i], rest = bq * (2u * hd + fixed) + 16u;
    const size_t heads = (max_floats - rest) / (2u * bq * hd);
    CHECK(microattn_layer_scratch_floats(heads * hd, heads) == 2u * bq * hd * heads + rest,
          "scratch at the limit, head_dim %u", (unsigned)hd);
    CHECK(microattn_layer_scratch_floats((heads + 1) * hd, heads + 1) == 0, "scratch past the limit, head_dim %u",
          (unsigned)hd);
  }
  {
    /* a buffer that is mostly scratch: max_seq 1, model_dim = heads = kv_heads, 2·dim + 2·Bq·dim + Bq·(2 + Bkv + 3)
     * + 16 */
    const size_t rest = bq * (2u + fixed) + 16u, dim = (max_floats - rest) / (2u + 2u * bq);
    CHECK(microattn_layer_buffer_floats(1, dim, dim, dim) == (2u + 2u * bq) * dim + rest, "scratch-heavy buffer");
    CHECK(microattn_layer_buffer_floats(1, dim + 1, dim + 1, dim + 1) == 0, "scratch-heavy buffer past the limit");
  }
  {
    /* attention: Bq·(d_k + d_v + Bkv + 3) + 16 */
    const size_t d = (max_floats - 16u) / bq - fixed;
    CHECK(microattn_attention_workspace_floats(d, 0) == bq * (d + fixed) + 16u &&
              microattn_attention_workspace_floats(0, d) == bq * (d + fixed) + 16u,
          "workspace at the limit");
    CHECK(microattn_attention_workspace_floats(d + 1, 0) == 0 && microattn_attention_workspace_floats(0, d + 1) == 0 &&
              microattn_attention_workspace_floats(d / 2 + 1, d / 2 + 1) == 0,
          "workspace past the limit");
    CHECK(microattn_attention_workspace_floats((size_t)-1, 0) == 0 &&
              microattn_attention_workspace_floats((size_t)-1, (size_t)-1) == 0,
          "workspace past SIZE_MAX");
  }
  /* 4·(SIZE_MAX / 8) floats of K/V: a count that fits size_t, bytes that do not */
  CHECK(microattn_layer_buffer_floats((size_t)-1 / 8, 2, 1, 1) == 0 &&
            microattn_layer_cache_floats((size_t)-1 / 8, 2, 1, 1) == 0,
        "K/V bytes past size_t");
}

static void test_matmul(void) {
  static const size_t sizes[] = {1, 3, 4, 5, 8, 9, 16, 17, 33};
  static float a[33 * 40], b[40 * 40];
  const size_t ns = sizeof sizes / sizeof sizes[0];
  size_t im, ik, in;
  int tb;
  for (tb = 0; tb <= 1; ++tb)
    for (im = 0; im < ns; ++im)
      for (ik = 0; ik < ns; ++ik)
        for (in = 0; in < ns; in += 2) {
          const size_t m = sizes[im], k = sizes[ik], n = sizes[in], lda = k + 2, ldb = (tb ? k : n) + 1;
          microattn_view c;
          size_t i, j;
          int bad = 0;
          fill(a, m * lda, 1.0f);
          fill(b, (tb ? n : k) * ldb, 1.0f);
          arena_reset();
          c = arena_view(5, m, n, 3);
          CHECK(microattn_matmul(cview(a, m, k, lda), cview(b, tb ? n : k, tb ? k : n, ldb), c, tb) == MICROATTN_OK,
                "matmul %u %u %u", (unsigned)m, (unsigned)k, (unsigned)n);
          for (i = 0; i < m; ++i)
            for (j = 0; j < n; ++j) {
              double sa;
              const double want = ref_dot(a, lda, b, ldb, tb, i, j, k, &sa);
              if (!(fabs(at(c, i, j) - want) <= 2.0 * ((double)k + 2.0) * unit_roundoff * sa + 1e-37)) ++bad;
            }
          CHECK(bad == 0, "matmul %ux%ux%u transpose %d: %d elements out of bound", (unsigned)m, (unsigned)k,
                (unsigned)n, tb, bad);
          CHECK(canaries_intact(c), "matmul %ux%ux%u: canary", (unsigned)m, (unsigned)k, (unsigned)n);
        }
}

static void test_softmax_and_exp(void) {
  static const size_t sizes[] = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 33, 65};
  static float x[65], y[65];
  size_t ir, ic, i;
  for (ir = 0; ir < 5; ++ir)
    for (ic = 0; ic < sizeof sizes / sizeof sizes[0]; ++ic) {
      const size_t rows = sizes[ir], cols = sizes[ic];
      microattn_view v;
      size_t r, c;
      int bad = 0;
      arena_reset();
      v = arena_view(1, rows, cols, 2);
      for (r = 0; r < rows; ++r)
        for (c = 0; c < cols; ++c) v.data[r * v.stride + c] = uniform(-20.0f, 20.0f);
      if (rows > 2)
        for (c = 0; c < cols; ++c) v.data[2 * v.stride + c] = -INFINITY; /* a row of -inf gives zeros */
      memcpy(arena_copy, arena, sizeof arena);
      CHECK(microattn_softmax_rows(v) == MICROATTN_OK, "softmax");
      for (r = 0; r < rows; ++r) {
        const float* in = arena_copy + 1 + r * v.stride;
        double m = -INFINITY, s = 0, spread = 0;
        for (c = 0; c < cols; ++c) m = in[c] > m ? in[c] : m;
        for (c = 0; c < cols; ++c)
          if (m != -INFINITY) {
            s += exp((double)in[c] - m);
            spread = fabs(in[c] - m) > spread && in[c] != -INFINITY ? fabs(in[c] - m) : spread;
          }
        for (c = 0; c < cols; ++c) {
          const double want = m == -INFINITY ? 0.0 : exp((double)in[c] - m) / s;
          if (!(fabs(at(v, r, c) - want) <= (8.0 + spread + (double)cols) * unit_roundoff * want + 1e-37)) ++bad;
        }
      }
      CHECK(bad == 0, "softmax %ux%u: %d out of bound", (unsigned)rows, (unsigned)cols, bad);
      CHECK(canaries_intact(v), "softmax canary");
    }

  for (i = 0; i < 65; ++i) x[i] = uniform(-87.0f, 88.0f);
  x[0] = -INFINITY;
  x[1] = 0.0f;
  CHECK(microattn_exp_elements(x, y, 65) == MICROATTN_OK, "exp");
  for (i = 0; i < 65; ++i) {
    const double want = exp((double)x[i]);
    /* 1.5 ULP of a normal float is at most 1.5·2^-23 relative */
    CHECK(fabs(y[i] - want) <= MICROATTN_EXP_MAX_ULP * 2.0 * unit_roundoff * want, "exp(%g) = %g, want %g",
          (double)x[i], (double)y[i], want);
  }
  CHECK(microattn_exp_elements(x, x, 65) == MICROATTN_OK && memcmp(x, y, sizeof y) == 0, "exp in place");
  CHECK(microattn_exp_elements(x, x + 1, 64) == MICROATTN_ALIASING, "exp partial overlap");
  CHECK(microattn_exp_elements(NULL, y, 3) == MICROATTN_NULL_POINTER, "exp null");
  CHECK(microattn_exp_elements(NULL, NULL, 0) == MICROATTN_OK, "exp n = 0");
}

/* out = softmax(q·kᵀ·scale + mask)·v in double; weighted_abs = Σ_j p_ij·|v_jc| and score_abs for the bound. */
static void ref_attention(const float* q, const float* k, const float* v, size_t n_q, size_t n_kv, size_t d_k,
                          size_t d_v, size_t lds, const microattn_attention_options* o, double* out,
                          double* weighted_abs, double* score_abs) {
  static double s[80], sa[80];
  size_t i, j, c, p;
  const double scale = o->scale != 0.0f ? (double)o->scale : 1.0 / sqrt((double)d_k);
  for (i = 0; i < n_q; ++i) {
    double m = -INFINITY, sum = 0;
    score_abs[i] = 0;
    for (j = 0; j < n_kv; ++j) {
      double dot = 0, dot_abs = 0;
      const double mask = o->mask.data != NULL ? (double)o->mask.data[i * o->mask.stride + j] : 0.0;
      for (p = 0; p < d_k; ++p) {
        dot += (double)q[i * lds + p] * (double)k[j * lds + p];
        dot_abs += fabs((double)q[i * lds + p] * (double)k[j * lds + p]);
      }
      s[j] = dot * scale + mask;
      if (o->causal && (ptrdiff_t)j > (ptrdiff_t)i + o->causal_offset) s[j] = -INFINITY;
      if (o->window != 0) { /* causal: i + offset - W < j; not causal: |j - (i + offset)| < W */
        const ptrdiff_t dist = (ptrdiff_t)i + o->causal_offset - (ptrdiff_t)j, w = (ptrdiff_t)o->window;
        if (dist >= w || (!o->causal && -dist >= w)) s[j] = -INFINITY;
      }
      if (s[j] != -INFINITY) {
        sa[j] = fabs(scale) * dot_abs + fabs(mask);
        score_abs[i] = sa[j] > score_abs[i] ? sa[j] : score_abs[i];
      }
      m = s[j] > m ? s[j] : m;
    }
    for (j = 0; j < n_kv; ++j) {
      s[j] = m == -INFINITY ? 0.0 : exp(s[j] - m);
      sum += s[j];
    }
    for (c = 0; c < d_v; ++c) {
      double acc = 0, acc_abs = 0;
      for (j = 0; j < n_kv; ++j) {
        acc += s[j] * (double)v[j * lds + c];
        acc_abs += s[j] * fabs((double)v[j * lds + c]);
      }
      out[i * d_v + c] = sum > 0 ? acc / sum : 0.0;
      weighted_abs[i * d_v + c] = sum > 0 ? acc_abs / sum : 0.0;
    }
  }
}

static float ws[MICROATTN_ATTENTION_WORKSPACE_FLOATS(16, 16)]; /* an integer constant expression */

static void test_attention(void) {
  static const size_t n_qs[] = {1, 3, 4, 5, 33}, n_kvs[] = {1, 2, 15, 16, 17, 65, 80}, ds[] = {1, 3, 8, 16};
  static float q[80 * 17], k[80 * 17], v[80 * 17], mask[33 * 80];
  static double want[80 * 16], wabs[80 * 16], sabs[80];
  size_t iq, ikv, id, mode;
  for (id = 0; id < sizeof ds / sizeof ds[0]; ++id)
    for (iq = 0; iq < sizeof n_qs / sizeof n_qs[0]; ++iq)
      for (ikv = 0; ikv < sizeof n_kvs / sizeof n_kvs[0]; ++ikv)
        for (mode = 0; mode < 7; ++mode) {
          const size_t d = ds[id], n_q = n_qs[iq], n_kv = n_kvs[ikv], lds = d + 1;
          microattn_attention_options opt;
          microattn_view out;
          size_t i, c;
          int bad = 0;
          memset(&opt, 0, sizeof opt);
          fill(q, n_q * lds, 1.0f);
          fill(k, n_kv * lds, 1.0f);
          fill(v, n_kv * lds, 1.0f);
          if (mode == 1) opt.causal = 1; /* top-left */
          if (mode == 2) {
            opt.causal = 1; /* bottom-right: decoding */
            opt.causal_offset = (ptrdiff_t)n_kv - (ptrdiff_t)n_q;
          }
          if (mode == 3) { /* a mask with hidden keys and a fully hidden first row, explicit scale */
            for (i = 0; i < n_q * n_kv; ++i) mask[i] = (i % 3 == 0 || i < n_kv) ? -INFINITY : uniform(-2.0f, 2.0f);
            opt.mask = cview(mask, n_q, n_kv, n_kv);
            opt.scale = 0.3f;
          }
          if (mode == 5) { /* a causal window, bottom-right (sliding-window decoding) */
            opt.causal = 1;
            opt.causal_offset = (ptrdiff_t)n_kv - (ptrdiff_t)n_q;
            opt.window = 3;
          }
          if (mode == 6) opt.window = 2; /* local attention: |j - i| < 2; rows past n_kv + 1 see nothing */
          arena_reset();
          out = arena_view(3, n_q, d, 1);
          CHECK(microattn_attention(cview(q, n_q, d, lds), cview(k, n_kv, d, lds), cview(v, n_kv, d, lds), out, ws,
                                    sizeof ws / sizeof ws[0], mode == 4 ? NULL : &opt) == MICROATTN_OK,
                "attention");
          ref_attention(q, k, v, n_q, n_kv, d, d, lds, &opt, want, wabs, sabs);
          for (i = 0; i < n_q; ++i)
            for (c = 0; c < d; ++c) {
              const double rel = 2.0 * (((double)d + 6.0) * sabs[i] + 3.0) * unit_roundoff +
                                 (2.0 * (double)n_kv + 24.0) * unit_roundoff;
              if (!(fabs(at(out, i, c) - want[i * d + c]) <= rel * wabs[i * d + c] + 1e-30)) ++bad;
            }
          CHECK(bad == 0, "attention n_q %u n_kv %u d %u mode %u: %d out of bound", (unsigned)n_q, (unsigned)n_kv,
                (unsigned)d, (unsigned)mode, bad);
          CHECK(canaries_intact(out), "attention canary");
        }
}

/* Every error leaves the output (and everything else in the arena) bit-for-bit untouched. */
/* ---- linear: f32, f16 and q8 weights against a double reference of the dequantized weights ----------- */

/* binary16 from its definition (no library code): 2^(e-15)·(1 + m/1024), subnormal 2^-14·m/1024. */
static double half_value(unsigned short h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double v = e == 31  ? (m != 0 ? NAN : INFINITY)
                   : e == 0 ? ldexp((double)m, -24)
                            : ldexp((double)(m + 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

static void test_linear(void) {
  enum { N = 6, K = 24, M = 3 };
  static float x[M * (K + 1)], wf[N * K], bias[N], scales[N * K];
  static unsigned short wh[N * K];
  static signed char wq[N * K];
  /* groups: 8 divides K (x quantized per group), K (one per row), 3·K (rows share one), 16 straddles rows */
  static const size_t groups[] = {8, K, 3 * K, 16};
  size_t i, r, c, g, f;
  microattn_weight_matrix w;
  fill(x, M * (K + 1), 1.0f);
  fill(wf, N * K, 1.0f);
  fill(bias, N, 1.0f);
  for (i = 0; i < N * K; ++i) {
    wh[i] = (unsigned short)(((rng_state >> 3) & 0x8000u) | ((i % 17) << 10) | ((i * 37) & 1023));
    wq[i] = (signed char)((int)(i * 53 % 256) - 128);
    scales[i] = 0.01f + 0.001f * (float)(i % 7);
    uniform(0, 1);
  }
  for (f = 0; f < 3 + sizeof groups / sizeof groups[0] - 1; ++f) {
    const int fmt = f < 2 ? (int)f : 2;
    const size_t group = fmt == 2 ? groups[f - 2] : 0;
    microattn_view y;
    int bad = 0;
    w.format = (microattn_format)fmt;
    w.data = fmt == 0 ? (const void*)wf : fmt == 1 ? (const void*)wh : (const void*)wq;
    w.rows = N;
    w.cols = K;
    w.scales = fmt == 2 ? scales : NULL;
    w.group = group;
    arena_reset();
    y = arena_view(3, M, N, 2);
    CHECK(microattn_linear(cview(x, M, K, K + 1), &w, bias, y) == MICROATTN_OK, "linear format %d group %u", fmt,
          (unsigned)group);
    for (i = 0; i < M; ++i)
      for (r = 0; r < N; ++r) {
        double want = bias[r], abs_sum = fabs(bias[r]), quant = 0.0, allowed;
        for (c = 0; c < K; ++c) {
          const size_t e = r * K + c;
          const double wv = fmt == 0 ? wf[e] : fmt == 1 ? half_value(wh[e]) : (double)scales[e / group] * wq[e];
          want += (double)x[i * (K + 1) + c] * wv;
          abs_sum += fabs((double)x[i * (K + 1) + c] * wv);
        }
        if (fmt == 2) /* ½·Σ_g s_g·Σ|w| over row r's columns cut at its groups, s_g = max|x| / 127 */
          for (c = 0; c < K;) {
            const size_t end =
                ((r * K + c) / group + 1) * group - r * K < K ? ((r * K + c) / group + 1) * group - r * K : K;
            double amax = 0.0, wsum = 0.0;
            for (g = c; g < end; ++g) {
              if (fabs(x[i * (K + 1) + g]) > amax) amax = fabs(x[i * (K + 1) + g]);
              wsum += fabs((double)scales[(r * K + g) / group] * wq[r * K + g]);
            }
            quant += amax / 127.0 * wsum;
            c = end;
          }
        allowed = 0.5 * (1.0 + ldexp(1.0, -16)) * quant + 2.0 * (K + 3.0) * unit_roundoff * (abs_sum + quant) + 1e-37;
        if (!(fabs(at(y, i, r) - want) <= allowed)) ++bad;
      }
    CHECK(bad == 0, "linear format %d group %u: %d elements out of bound", fmt, (unsigned)group, bad);
    CHECK(canaries_intact(y), "linear format %d: canary", fmt);
  }
  /* Errors: nothing written. */
#define LINEAR_UNTOUCHED (memcmp(arena, arena_copy, sizeof arena) == 0)
  arena_reset();
  {
    const microattn_view y = arena_view(0, M, N, 0);
    microattn_weight_matrix bad_w = w; /* q8, group 16 */
    memcpy(arena_copy, arena, sizeof arena);
    CHECK(microattn_linear(cview(x, M, K, K + 1), NULL, bias, y) == MICROATTN_NULL_POINTER && LINEAR_UNTOUCHED,
          "w NULL");
    bad_w.scales = NULL;
    CHECK(microattn_linear(cview(x, M, K, K + 1), &bad_w, bias, y) == MICROATTN_NULL_POINTER && LINEAR_UNTOUCHED,
          "scales NULL");
    bad_w = w;
    bad_w.format = (microattn_format)7;
    CHECK(microattn_linear(cview(x, M, K, K + 1), &bad_w, bias, y) == MICROATTN_INVALID_SHAPE && LINEAR_UNTOUCHED,
          "format 7");
    if (sizeof(microattn_format) > 1) { /* arm-none-eabi's enums are short: 256 does not fit there */
      bad_w.format = (microattn_format)(256 + MICROATTN_FORMAT_F32);
      CHECK(microattn_linear(cview(x, M, K, K + 1), &bad_w, bias, y) == MICROATTN_INVALID_SHAPE && LINEAR_UNTOUCHED,
            "format 256 is not f32");
    }
    bad_w = w;
    bad_w.group = 5;
    CHECK(microattn_linear(cview(x, M, K, K + 1), &bad_w, bias, y) == MICROATTN_INVALID_SHAPE && LINEAR_UNTOUCHED,
          "group 5 does not divide 144");
    CHECK(microattn_linear(cview(x, M, K - 1, K + 1), &w, bias, y) == MICROATTN_INVALID_SHAPE && LINEAR_UNTOUCHED,
          "x.cols != w.cols");
    bad_w = w;
    bad_w.format = MICROATTN_FORMAT_F16;
    bad_w.data = (const unsigned char*)wh + 1;
    CHECK(microattn_linear(cview(x, M, K, K + 1), &bad_w, bias, y) == MICROATTN_MISALIGNED && LINEAR_UNTOUCHED,
          "f16 data at an odd address");
    CHECK(microattn_linear(cview(arena, M, K, K), &w, bias, y) == MICROATTN_ALIASING && LINEAR_UNTOUCHED, "y on x");
  }
#undef LINEAR_UNTOUCHED
}

/* ---- blocks: layer norm, RMS norm and the activations against double references written here ---------- */

/* microattn_linear_parallel through a C pool that runs the second half of the items before the first: the floats of
 * microattn_linear, bit for bit; a pool that refuses and no pool give them too. 64 x 1024 f16: two items. */
#define P_ROWS 64
#define P_COLS 1024
static unsigned short p_w[P_ROWS * P_COLS];
static float p_x[P_COLS], p_bias[P_ROWS], p_y0[P_ROWS + 1], p_y[P_ROWS + 1];
struct fake_pool {
  size_t calls;
  int fail;
};
static int fake_run(void* pool, microattn_parallel_task task, void* ctx, size_t count) {
  struct fake_pool* fp = (struct fake_pool*)pool;
  ++fp->calls;
  if (fp->fail) return 0;
  task(ctx, count / 2, count);
  if (count / 2 > 0) task(ctx, 0, count / 2);
  return 1;
}
static void test_linear_parallel(void) {
  size_t i;
  int mode;
  struct fake_pool pool;
  microattn_parallel par;
  microattn_weight_matrix w;
  fill(p_x, P_COLS, 1.0f);
  fill(p_bias, P_ROWS, 1.0f);
  for (i = 0; i < P_ROWS * P_COLS; ++i) p_w[i] = microattn_f16_from_float(uniform(-0.5f, 0.5f));
  w.format = MICROATTN_FORMAT_F16;
  w.data = p_w;
  w.rows = P_ROWS;
  w.cols = P_COLS;
  w.scales = NULL;
  w.group = 0;
  p_y0[P_ROWS] = p_y[P_ROWS] = -7.0f;
  {
    microattn_view y0;
    y0.data = p_y0;
    y0.rows = 1;
    y0.cols = P_ROWS;
    y0.stride = P_ROWS;
    CHECK(microattn_linear(cview(p_x, 1, P_COLS, P_COLS), &w, p_bias, y0) == MICROATTN_OK, "linear for parallel");
  }
  for (mode = 0; mode < 3; ++mode) {
    microattn_view y;
    y.data = p_y;
    y.rows = 1;
    y.cols = P_ROWS;
    y.stride = P_ROWS;
    for (i = 0; i < P_ROWS; ++i) p_y[i] = 0.0f;
    pool.calls = 0;
    pool.fail = mode == 1;
    par.run = fake_run;
    par.pool = &pool;
    par.workers = 2;
    CHECK(microattn_linear_parallel(cview(p_x, 1, P_COLS, P_COLS), &w, p_bias, y, mode == 2 ? NULL : &par) ==
              MICROATTN_OK,
          "linear_parallel mode %d", mode);
    CHECK(memcmp(p_y, p_y0, sizeof p_y0) == 0, "linear_parallel mode %d: not linear's floats", mode);
    CHECK(pool.calls == (mode == 2 ? 0u : 1u), "linear_parallel mode %d: %u pool calls", mode, (unsigned)pool.calls);
  }
  {
    microattn_view y;
    y.data = p_y;
    y.rows = 1;
    y.cols = P_ROWS;
    y.stride = P_ROWS;
    CHECK(microattn_linear_parallel(cview(p_x, 1, P_COLS, P_COLS), NULL, p_bias, y, &par) == MICROATTN_NULL_POINTER,
          "linear_parallel NULL weights");
  }
}

static double ref_activation(int a, double x) {
  if (a == MICROATTN_ACTIVATION_RELU) return x < 0 ? 0.0 : x;
  if (a == MICROATTN_ACTIVATION_GELU) return x * 0.5 * erfc(-x / sqrt(2.0));
  if (a == MICROATTN_ACTIVATION_GELU_TANH)
    return x / (1.0 + exp(-2.0 * sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
  return x / (1.0 + exp(-x));
}

/* The format conversions: known bits, a tie to even, the zero group, one bad call (nothing written). */
static void test_formats(void) {
  static const float w[8] = {127.0f, 0.5f, 1.5f, -2.5f, 0.0f, 0.0f, 0.0f, 0.0f};
  int8_t q[8];
  float s[2];
  size_t i;
  CHECK(microattn_f16_from_float(1.0f) == 0x3c00u && microattn_f16_from_float(-2.0f) == 0xc000u &&
            microattn_f16_from_float(65520.0f) == 0x7c00u && microattn_f16_from_float(5.9604645e-8f) == 1u,
        "f16_from_float");
  CHECK(microattn_float_from_f16(0x3555u) == 0x1.554p-2f && microattn_float_from_f16(0x8001u) == -0x1p-24f,
        "float_from_f16");
  memset(q, 0x11, sizeof q);
  s[0] = s[1] = -1.0f;
  CHECK(microattn_quantize_q8(cview(w, 2, 4, 4), 3, q, s) == MICROATTN_INVALID_SHAPE && q[0] == 0x11 && s[0] == -1.0f,
        "quantize_q8 group 3");
  CHECK(microattn_quantize_q8(cview(w, 2, 4, 4), 4, q, s) == MICROATTN_OK, "quantize_q8");
  CHECK(s[0] == 1.0f && s[1] == 0.0f && q[0] == 127 && q[1] == 0 && q[2] == 2 && q[3] == -2, "quantize_q8 values");
  for (i = 4; i < 8; ++i) CHECK(q[i] == 0, "quantize_q8 zero group");
}

static void test_blocks(void) {
  static float x[5 * 71], w[70], b[70]; /* 5 rows of up to 70 at stride n + 1 */
  static const size_t lengths[] = {1, 3, 16, 17, 33, 70};
  size_t li, r, c;
  int a;
  fill(x, sizeof x / sizeof x[0], 2.0f);
  fill(w, 70, 1.0f);
  fill(b, 70, 1.0f);
  for (li = 0; li < sizeof lengths / sizeof lengths[0]; ++li) {
    const size_t n = lengths[li];
    const microattn_cview xv = cview(x, 5, n, n + 1);
    microattn_view y;
    int bad = 0;
    arena_reset();
    y = arena_view(1, 5, n, 2);
    CHECK(microattn_layer_norm_rows(xv, w, b, 1e-5f, y) == MICROATTN_OK, "layer_norm n %u", (unsigned)n);
    for (r = 0; r < 5; ++r) {
      double mean = 0, var = 0;
      for (c = 0; c < n; ++c) mean += x[r * (n + 1) + c];
      mean /= (double)n;
      for (c = 0; c < n; ++c) var += (x[r * (n + 1) + c] - mean) * (x[r * (n + 1) + c] - mean);
      var = sqrt(var / (double)n + 1e-5f);
      for (c = 0; c < n; ++c) {
        const double z = (x[r * (n + 1) + c] - mean) / var, want = z * w[c] + b[c];
        const double tol =
            fabs(w[c]) * ((n + 8.0) * unit_roundoff * (fabs(z) + 1.0) + 4 * unit_roundoff * fabs(mean) / var) +
            2 * unit_roundoff * fabs(b[c]);
        if (!(fabs(at(y, r, c) - want) <= tol)) ++bad;
      }
    }
    CHECK(bad == 0 && canaries_intact(y), "layer_norm n %u: %d out of bound", (unsigned)n, bad);
    arena_reset();
    y = arena_view(0, 5, n, 1);
    CHECK(microattn_rms_norm_rows(xv, w, 1e-5f, y) == MICROATTN_OK, "rms_norm n %u", (unsigned)n);
    for (r = 0; r < 5; ++r) {
      double ss = 0;
      for (c = 0; c < n; ++c) ss += (double)x[r * (n + 1) + c] * x[r * (n + 1) + c];
      ss = 1.0 / sqrt(ss / (double)n + 1e-5f);
      for (c = 0; c < n; ++c) {
        const double want = x[r * (n + 1) + c] * ss * w[c];
        if (!(fabs(at(y, r, c) - want) <= (n / 2.0 + 6.0) * unit_roundoff * fabs(want) + 1e-44)) ++bad;
      }
    }
    CHECK(bad == 0 && canaries_intact(y), "rms_norm n %u: %d out of bound", (unsigned)n, bad);
  }
  for (a = MICROATTN_ACTIVATION_RELU; a <= MICROATTN_ACTIVATION_SILU; ++a) {
    microattn_view v;
    int bad = 0;
    arena_reset();
    v = arena_view(5, 7, 29, 3);
    for (r = 0; r < 7; ++r)
      for (c = 0; c < 29; ++c) v.data[r * v.stride + c] = -12.0f + 24.0f * (float)(r * 29 + c) / 202.0f;
    CHECK(microattn_activate_rows(v, (microattn_activation)a) == MICROATTN_OK, "activation %d", a);
    for (r = 0; r < 7; ++r)
      for (c = 0; c < 29; ++c) {
        const double in = -12.0f + 24.0f * (float)(r * 29 + c) / 202.0f, want = ref_activation(a, in);
        const double rel = a == MICROATTN_ACTIVATION_RELU   ? 0
                           : a == MICROATTN_ACTIVATION_GELU ? 16 + 1.5 * in * in
                           : a == MICROATTN_ACTIVATION_GELU_TANH
                               ? 12 + 4 * fabs(1.5957691216 * (in + 0.044715 * in * in * in))
                               : 8;
        if (!(fabs(at(v, r, c) - want) <= rel * unit_roundoff * fabs(want) + 1e-44)) ++bad;
      }
    CHECK(bad == 0 && canaries_intact(v), "activation %d: %d out of bound", a, bad);
  }
  /* Errors: nothing written. */
  arena_reset();
  memcpy(arena_copy, arena, sizeof arena);
#define BLOCKS_UNTOUCHED (memcmp(arena, arena_copy, sizeof arena) == 0)
  {
    const microattn_cview xv = cview(x, 5, 16, 17);
    const microattn_view y = arena_view(0, 5, 16, 0);
    CHECK(
        microattn_layer_norm_rows(cview(NULL, 5, 16, 17), w, b, 1e-5f, y) == MICROATTN_NULL_POINTER && BLOCKS_UNTOUCHED,
        "layer_norm x NULL");
    CHECK(microattn_layer_norm_rows(xv, w, b, -1e-5f, y) == MICROATTN_INVALID_SHAPE && BLOCKS_UNTOUCHED,
          "layer_norm eps < 0");
    CHECK(microattn_rms_norm_rows(xv, w, (float)NAN, y) == MICROATTN_INVALID_SHAPE && BLOCKS_UNTOUCHED,
          "rms_norm eps NaN");
    CHECK(microattn_rms_norm_rows(xv, w, 1e-5f, arena_view(0, 4, 16, 0)) == MICROATTN_INVALID_SHAPE && BLOCKS_UNTOUCHED,
          "rms_norm y rows");
    CHECK(
        microattn_rms_norm_rows(cview(arena + 1, 5, 16, 16), NULL, 1e-5f, y) == MICROATTN_ALIASING && BLOCKS_UNTOUCHED,
        "rms_norm y overlaps x");
    CHECK(microattn_layer_norm_rows(xv, (const float*)((const char*)w + 2), b, 1e-5f, y) == MICROATTN_MISALIGNED &&
              BLOCKS_UNTOUCHED,
          "layer_norm weight misaligned");
    CHECK(microattn_activate_rows(y, (microattn_activation)4) == MICROATTN_INVALID_SHAPE && BLOCKS_UNTOUCHED,
          "activation 4");
    CHECK(microattn_activate_rows(y, (microattn_activation)-1) == MICROATTN_INVALID_SHAPE && BLOCKS_UNTOUCHED,
          "activation -1");
    if (sizeof(microattn_activation) > 1) /* arm-none-eabi's enums are short: 256 does not fit there */
      CHECK(microattn_activate_rows(y, (microattn_activation)256) == MICROATTN_INVALID_SHAPE && BLOCKS_UNTOUCHED,
            "activation 256 is not relu");
    CHECK(microattn_layer_norm_rows(as_input(y), NULL, NULL, 1e-5f, y) == MICROATTN_OK, "layer_norm in place");
  }
#undef BLOCKS_UNTOUCHED
}

static void test_bad_input(void) {
  static float a[64], b[64];
  const size_t wsn = microattn_attention_workspace_floats(4, 4);
  microattn_view out;
  microattn_cview in;
  fill(a, 64, 1.0f);
  fill(b, 64, 1.0f);
  arena_reset();
  out = arena_view(0, 4, 4, 0);
  in = cview(a, 4, 4, 4);
  memcpy(arena_copy, arena, sizeof arena);
#define UNTOUCHED (memcmp(arena, arena_copy, sizeof arena) == 0)
  CHECK(microattn_matmul(cview(NULL, 4, 4, 4), in, out, 0) == MICROATTN_NULL_POINTER && UNTOUCHED, "matmul null");
  CHECK(microattn_matmul(in, cview(b, 3, 4, 4), out, 0) == MICROATTN_INVALID_SHAPE && UNTOUCHED, "matmul shape");
  CHECK(microattn_matmul(cview(a, 4, 4, 3), in, out, 0) == MICROATTN_INVALID_SHAPE && UNTOUCHED, "stride < cols");
  CHECK(microattn_matmul(as_input(out), in, out, 0) == MICROATTN_ALIASING && UNTOUCHED, "matmul aliasing");
  CHECK(microattn_softmax_rows(arena_view(0, 0, 4, 0)) == MICROATTN_INVALID_SHAPE && UNTOUCHED, "softmax shape");
  out.data = NULL;
  CHECK(microattn_softmax_rows(out) == MICROATTN_NULL_POINTER && UNTOUCHED, "softmax null");
  out.data = arena;
  CHECK(microattn_attention(in, in, in, out, NULL, wsn, NULL) == MICROATTN_NULL_POINTER && UNTOUCHED, "ws null");
  CHECK(microattn_attention(in, cview(b, 4, 3, 4), in, out, arena + 100, wsn, NULL) == MICROATTN_INVALID_SHAPE &&
            UNTOUCHED,
        "attention shape");
  CHECK(microattn_attention(in, in, in, out, arena + 100, wsn - 1, NULL) == MICROATTN_WORKSPACE_TOO_SMALL && UNTOUCHED,
        "workspace one float short");
  CHECK(microattn_attention(in, in, as_input(out), out, arena + 100, wsn, NULL) == MICROATTN_ALIASING && UNTOUCHED,
        "attention aliasing");
  CHECK(microattn_attention(in, in, in, out, arena + 2, wsn, NULL) == MICROATTN_ALIASING && UNTOUCHED,
        "workspace over out");
  {
    microattn_attention_options opt;
    memset(&opt, 0, sizeof opt);
    opt.mask = cview(b, 4, 3, 3);
    CHECK(microattn_attention(in, in, in, out, arena + 100, wsn, &opt) == MICROATTN_INVALID_SHAPE && UNTOUCHED,
          "mask shape");
  }
#undef UNTOUCHED
}

/* ---- layers --------------------------------------------------------------------------------------------- */

enum { L_SEQ = 12, L_DIM = 16, L_HEADS = 4, L_KV = 2, L_HD = L_DIM / L_HEADS, L_KVD = L_KV * L_HD };
static float wq[L_DIM * L_DIM], wk[L_KVD * L_DIM], wv[L_KVD * L_DIM], wo[L_DIM * L_DIM];
static float bq[L_DIM], bk[L_KVD], bv[L_KVD], bo[L_DIM];
static float layer_buffer[MICROATTN_LAYER_BUFFER_FLOATS(L_SEQ, L_DIM, L_HEADS, L_KV)];

/* x·wᵀ + b in double; w: n × in. */
static void ref_linear(const double* x, size_t rows, size_t in, const float* w, const float* b, size_t n, double* y) {
  size_t r, c, p;
  for (r = 0; r < rows; ++r)
    for (c = 0; c < n; ++c) {
      double s = b != NULL ? (double)b[c] : 0.0;
      for (p = 0; p < in; ++p) s += x[r * in + p] * (double)w[c * in + p];
      y[r * n + c] = s;
    }
}

/* nn.MultiheadAttention math (with grouped key/value heads) in double. */
static void ref_layer(const float* query, size_t n_q, const float* context, size_t n_kv, int causal, double* y) {
  static double xq[L_SEQ * L_DIM], xc[L_SEQ * L_DIM], qp[L_SEQ * L_DIM], kp[L_SEQ * L_KVD], vp[L_SEQ * L_KVD];
  static double heads[L_SEQ * L_DIM], s[L_SEQ];
  size_t i, j, h, c;
  for (i = 0; i < n_q * L_DIM; ++i) xq[i] = query[i];
  for (i = 0; i < n_kv * L_DIM; ++i) xc[i] = context[i];
  ref_linear(xq, n_q, L_DIM, wq, bq, L_DIM, qp);
  ref_linear(xc, n_kv, L_DIM, wk, bk, L_KVD, kp);
  ref_linear(xc, n_kv, L_DIM, wv, bv, L_KVD, vp);
  for (h = 0; h < L_HEADS; ++h) {
    const size_t g = h / (L_HEADS / L_KV);
    for (i = 0; i < n_q; ++i) {
      double m = -INFINITY, sum = 0;
      for (j = 0; j < n_kv; ++j) {
        double dot = 0;
        for (c = 0; c < L_HD; ++c) dot += qp[i * L_DIM + h * L_HD + c] * kp[j * L_KVD + g * L_HD + c];
        s[j] = causal && j > i ? -INFINITY : dot / sqrt((double)L_HD);
        m = s[j] > m ? s[j] : m;
      }
      for (j = 0; j < n_kv; ++j) {
        s[j] = exp(s[j] - m);
        sum += s[j];
      }
      for (c = 0; c < L_HD; ++c) {
        double acc = 0;
        for (j = 0; j < n_kv; ++j) acc += s[j] * vp[j * L_KVD + g * L_HD + c];
        heads[i * L_DIM + h * L_HD + c] = acc / sum;
      }
    }
  }
  ref_linear(heads, n_q, L_DIM, wo, bo, L_DIM, y);
}

static int layer_matches(microattn_view y, const double* want, size_t n_kv) {
  size_t r, c;
  for (r = 0; r < y.rows; ++r) {
    double row_max = 0;
    for (c = 0; c < L_DIM; ++c) row_max = fabs(want[r * L_DIM + c]) > row_max ? fabs(want[r * L_DIM + c]) : row_max;
    for (c = 0; c < L_DIM; ++c)
      if (!(fabs(at(y, r, c) - want[r * L_DIM + c]) <=
            8.0 * (3.0 * L_DIM + 2.0 * (double)n_kv + 32.0) * unit_roundoff * row_max + 1e-6))
        return 0;
  }
  return 1;
}

static microattn_layer_weights all_weights(void) {
  microattn_layer_weights w;
  w.q_weight = wq;
  w.k_weight = wk;
  w.v_weight = wv;
  w.q_bias = bq;
  w.k_bias = bk;
  w.v_bias = bv;
  w.out_weight = wo;
  w.out_bias = bo;
  return w;
}

static void test_layer(void) {
  static float x[L_SEQ * L_DIM], ctx[L_SEQ * L_DIM];
  static double want[L_SEQ * L_DIM];
  microattn_layer_weights w;
  microattn_layer layer, zeroed;
  microattn_attention_options opt;
  microattn_view y;
  size_t n;
  fill(wq, sizeof wq / sizeof wq[0], 0.3f);
  fill(wk, sizeof wk / sizeof wk[0], 0.3f);
  fill(wv, sizeof wv / sizeof wv[0], 0.3f);
  fill(wo, sizeof wo / sizeof wo[0], 0.3f);
  fill(bq, L_DIM, 0.3f);
  fill(bk, L_KVD, 0.3f);
  fill(bv, L_KVD, 0.3f);
  fill(bo, L_DIM, 0.3f);
  memset(&w, 0, sizeof w);
  memset(&zeroed, 0, sizeof zeroed);

  /* init errors leave *layer untouched */
  layer = zeroed;
  CHECK(microattn_layer_init(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &w, layer_buffer,
                             sizeof layer_buffer / sizeof layer_buffer[0]) == MICROATTN_NULL_POINTER,
        "init without weights");
  w = all_weights();
  CHECK(microattn_layer_init(&layer, L_SEQ, L_DIM, 3, 1, &w, layer_buffer, 100000) == MICROATTN_INVALID_SHAPE,
        "16 %% 3");
  CHECK(microattn_layer_init(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &w, layer_buffer,
                             microattn_layer_buffer_floats(L_SEQ, L_DIM, L_HEADS, L_KV) - 1) ==
            MICROATTN_WORKSPACE_TOO_SMALL,
        "buffer one float short");
  CHECK(microattn_layer_init(&layer, 1, 2, 1, 1, &w, wo, 100000) == MICROATTN_ALIASING, "buffer over a weight");
  CHECK(microattn_layer_init(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &w, (float*)(void*)((char*)layer_buffer + 1),
                             sizeof layer_buffer / sizeof layer_buffer[0]) == MICROATTN_MISALIGNED,
        "misaligned buffer");
  CHECK(memcmp(&layer, &zeroed, sizeof layer) == 0, "init wrote on error");
  CHECK(microattn_layer_forward(&layer, cview(x, 1, L_DIM, L_DIM), arena_view(0, 1, L_DIM, 0), NULL) ==
            MICROATTN_NULL_POINTER,
        "forward on an uninitialised layer");
  CHECK(microattn_layer_init(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &w, layer_buffer,
                             sizeof layer_buffer / sizeof layer_buffer[0]) == MICROATTN_OK,
        "init");
  CHECK(layer.head_dim == L_HD && layer.cache == layer_buffer, "layer fields");

  memset(&opt, 0, sizeof opt);
  for (n = 1; n <= L_SEQ; n += 5) {
    fill(x, n * L_DIM, 1.0f);
    fill(ctx, L_SEQ * L_DIM, 1.0f);
    /* self-attention, options NULL */
    arena_reset();
    y = arena_view(2, n, L_DIM, 3);
    CHECK(microattn_layer_forward(&layer, cview(x, n, L_DIM, L_DIM), y, NULL) == MICROATTN_OK, "forward");
    ref_layer(x, n, x, n, 0, want);
    CHECK(layer_matches(y, want, n) && canaries_intact(y), "layer self n %u", (unsigned)n);
    /* causal */
    opt.causal = 1;
    arena_reset();
    CHECK(microattn_layer_forward(&layer, cview(x, n, L_DIM, L_DIM), y, &opt) == MICROATTN_OK, "forward causal");
    ref_layer(x, n, x, n, 1, want);
    CHECK(layer_matches(y, want, n) && canaries_intact(y), "layer causal n %u", (unsigned)n);
    opt.causal = 0;
    /* cross-attention over a full context */
    arena_reset();
    CHECK(microattn_layer_forward_cross(&layer, cview(x, n, L_DIM, L_DIM), cview(ctx, L_SEQ, L_DIM, L_DIM), y, &opt) ==
              MICROATTN_OK,
          "forward cross");
    ref_layer(x, n, ctx, L_SEQ, 0, want);
    CHECK(layer_matches(y, want, L_SEQ) && canaries_intact(y), "layer cross n %u", (unsigned)n);
    /* in place: y is x */
    ref_layer(x, n, x, n, 0, want);
    y.data = x;
    y.stride = L_DIM;
    CHECK(microattn_layer_forward(&layer, cview(x, n, L_DIM, L_DIM), y, NULL) == MICROATTN_OK &&
              layer_matches(y, want, n),
          "layer in place n %u", (unsigned)n);
  }

  /* errors: nothing written */
  arena_reset();
  y = arena_view(0, 2, L_DIM, 0);
  memcpy(arena_copy, arena, sizeof arena);
  CHECK(microattn_layer_forward(&layer, cview(x, L_SEQ + 1, L_DIM, L_DIM), arena_view(0, L_SEQ + 1, L_DIM, 0), NULL) ==
            MICROATTN_INVALID_SHAPE,
        "more rows than max_seq");
  CHECK(microattn_layer_forward(&layer, cview(x, 2, L_DIM - 1, L_DIM), y, NULL) == MICROATTN_INVALID_SHAPE,
        "cols != model_dim");
  CHECK(microattn_layer_forward(&layer, cview(layer_buffer, 2, L_DIM, L_DIM), y, NULL) == MICROATTN_ALIASING,
        "input in the layer's buffer");
  CHECK(microattn_layer_forward(&layer, as_input(y), arena_view(L_DIM, 2, L_DIM, 0), NULL) == MICROATTN_ALIASING,
        "y overlaps x");
  CHECK(microattn_layer_forward(NULL, cview(x, 2, L_DIM, L_DIM), y, NULL) == MICROATTN_NULL_POINTER, "null layer");
  CHECK(memcmp(arena, arena_copy, sizeof arena) == 0, "layer errors wrote");
  {
    microattn_view in_buffer;
    in_buffer.data = layer_buffer + 5;
    in_buffer.rows = 2;
    in_buffer.cols = L_DIM;
    in_buffer.stride = L_DIM;
    CHECK(microattn_layer_forward(&layer, cview(x, 2, L_DIM, L_DIM), in_buffer, NULL) == MICROATTN_ALIASING,
          "y in the layer's buffer");
  }
}

/* ---- decoding: append, attend, rotary embeddings, windows and the ring, shared scratch ------------------------ */

typedef struct {
  size_t seq, dim, heads, kv_heads;
  microattn_layer_config config;
} layer_shape;

enum { T_MAX = 100, D_MAX = 16 };
static float decode_x[T_MAX * D_MAX], decode_q[T_MAX * D_MAX], decode_x2[T_MAX * D_MAX];
static double decode_want[T_MAX * D_MAX], decode_want2[T_MAX * D_MAX];
static float buffer_b[MICROATTN_LAYER_BUFFER_FLOATS(72, 8, 2, 1)];
static float buffer_copy[MICROATTN_LAYER_BUFFER_FLOATS(L_SEQ, L_DIM, L_HEADS, L_KV)];
static float shared_scratch[MICROATTN_LAYER_SCRATCH_FLOATS(16, 4)];
static float cache_1[MICROATTN_LAYER_CACHE_FLOATS(12, 16, 4, 2)], cache_2[MICROATTN_LAYER_CACHE_FLOATS(12, 16, 4, 2)];
/* A clean arena and copies of it, of the layer buffer and of the layer: what a failing call must leave as is. */
static void snapshot(const microattn_layer* layer, microattn_layer* saved) {
  arena_reset();
  memcpy(arena_copy, arena, sizeof arena);
  memcpy(buffer_copy, layer_buffer, sizeof layer_buffer);
  *saved = *layer;
}

static layer_shape make_shape(size_t seq, size_t dim, size_t heads, size_t kv_heads, float theta, size_t rope_dims,
                              int interleaved, size_t window) {
  layer_shape s;
  s.seq = seq;
  s.dim = dim;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.config.rope_theta = theta;
  s.config.rope_dims = rope_dims;
  s.config.rope_interleaved = interleaved;
  s.config.window = window;
  return s;
}

/* Rotates the heads of one projected row (heads × hd, double) to position pos: pair p of the rope_dims leading
 * dims turns by pos · θ^(-2p/rope_dims); pairs (p, p + rope_dims/2), or (2p, 2p + 1) interleaved. */
static void ref_rope(double* row, size_t heads, size_t hd, const microattn_layer_config* c, size_t pos) {
  const size_t dims = c->rope_dims != 0 ? c->rope_dims : hd, half = dims / 2;
  size_t h, p;
  if (c->rope_theta == 0.0f) return;
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

/* The layer in double over the global weights: queries at positions 0 … n_q - 1 (rows of `query`, dim wide)
 * attend to keys at positions 0 … n_kv - 1 (rows of `context`). Causal: key j is visible to query i iff j <= i
 * and, with a window, i - j < window; not causal: iff no window or |i - j| < window. */
static void ref_decode(const layer_shape* s, const float* query, size_t n_q, const float* context, size_t n_kv,
                       int causal, size_t window, double* y) {
  static double xq[T_MAX * D_MAX], xc[T_MAX * D_MAX], qp[T_MAX * D_MAX], kp[T_MAX * D_MAX], vp[T_MAX * D_MAX];
  static double heads[T_MAX * D_MAX], p[T_MAX];
  const size_t d = s->dim, hd = d / s->heads, kvd = s->kv_heads * hd;
  size_t i, j, h, c;
  for (i = 0; i < n_q * d; ++i) xq[i] = query[i];
  for (i = 0; i < n_kv * d; ++i) xc[i] = context[i];
  ref_linear(xq, n_q, d, wq, bq, d, qp);
  ref_linear(xc, n_kv, d, wk, bk, kvd, kp);
  ref_linear(xc, n_kv, d, wv, bv, kvd, vp);
  for (i = 0; i < n_q; ++i) ref_rope(qp + i * d, s->heads, hd, &s->config, i);
  for (j = 0; j < n_kv; ++j) ref_rope(kp + j * kvd, s->kv_heads, hd, &s->config, j);
  for (h = 0; h < s->heads; ++h) {
    const size_t g = h / (s->heads / s->kv_heads);
    for (i = 0; i < n_q; ++i) {
      double m = -INFINITY, sum = 0;
      for (j = 0; j < n_kv; ++j) {
        const size_t dist = i > j ? i - j : j - i;
        const int visible = causal ? j <= i && (window == 0 || dist < window) : window == 0 || dist < window;
        double dot = 0;
        for (c = 0; c < hd; ++c) dot += qp[i * d + h * hd + c] * kp[j * kvd + g * hd + c];
        p[j] = visible ? dot / sqrt((double)hd) : -INFINITY;
        m = p[j] > m ? p[j] : m;
      }
      for (j = 0; j < n_kv; ++j) {
        p[j] = m == -INFINITY ? 0.0 : exp(p[j] - m);
        sum += p[j];
      }
      for (c = 0; c < hd; ++c) {
        double acc = 0;
        for (j = 0; j < n_kv; ++j) acc += p[j] * vp[j * kvd + g * hd + c];
        heads[i * d + h * hd + c] = sum > 0 ? acc / sum : 0.0;
      }
    }
  }
  ref_linear(heads, n_q, d, wo, bo, d, y);
}

/* y's rows against want's (dim wide): the layer bound of layer_matches, plus the rotary angles' float rounding,
 * about max_pos · (ln θ + 4) · 2^-24 radians (layers.hpp), which moves q and k by as much relative to their size,
 * the scores by twice that relative to |q|·|k|: 16 × leaves room for the score and value spread (an angle
 * 1e-3 off fails). A position offset shared by q and k cancels in q·k: the tests see relative positions only. */
static int decode_matches(microattn_view y, const double* want, size_t n_kv, const microattn_layer_config* c,
                          size_t max_pos) {
  const double rope =
      c->rope_theta != 0.0f ? 16.0 * (double)max_pos * (log((double)c->rope_theta) + 4.0) * unit_roundoff : 0.0;
  const double rel = 8.0 * (3.0 * (double)y.cols + 2.0 * (double)n_kv + 32.0) * unit_roundoff + rope;
  size_t r, col;
  for (r = 0; r < y.rows; ++r) {
    double row_max = 0;
    for (col = 0; col < y.cols; ++col)
      row_max = fabs(want[r * y.cols + col]) > row_max ? fabs(want[r * y.cols + col]) : row_max;
    for (col = 0; col < y.cols; ++col)
      if (!(fabs(at(y, r, col) - want[r * y.cols + col]) <= rel * row_max + 1e-6)) return 0;
  }
  return 1;
}

/* Appends rows [0, t) of x to an empty layer in chunks of the sizes chunks[0], chunks[1], … (cyclic, the last
 * cut at t), each into a fresh canary arena, checking the chunk's rows against the same rows of want and the
 * cache's bookkeeping (a ring keeps the newest window - 1 rows when an append would run past max_seq). */
static void append_in_chunks(microattn_layer* layer, const layer_shape* s, const float* x, size_t t,
                             const size_t* chunks, size_t n_chunks, const double* want, const char* what) {
  size_t done = 0, k = 0, cached = 0;
  const size_t w = s->config.window;
  while (done < t) {
    size_t r = chunks[k++ % n_chunks];
    microattn_view y;
    microattn_status st;
    if (r > t - done) r = t - done;
    arena_reset();
    y = arena_view(7, r, s->dim, 2);
    st = microattn_layer_append(layer, cview(x + done * s->dim, r, s->dim, s->dim), y, NULL);
    CHECK(st == MICROATTN_OK, "%s: append of %u rows at %u: %s", what, (unsigned)r, (unsigned)done,
          microattn_status_string(st));
    if (st != MICROATTN_OK) return;
    cached = (w != 0 && cached + r > s->seq ? (w - 1 < cached ? w - 1 : cached) : cached) + r;
    CHECK(decode_matches(y, want + done * s->dim, cached, &s->config, done + r), "%s: rows %u..%u", what,
          (unsigned)done, (unsigned)(done + r - 1));
    CHECK(canaries_intact(y), "%s: canary at %u", what, (unsigned)done);
    done += r;
    CHECK(microattn_layer_position(layer) == done && layer->position == done, "%s: position %u, want %u", what,
          (unsigned)microattn_layer_position(layer), (unsigned)done);
    CHECK(microattn_layer_cached(layer) == cached && layer->cached == cached, "%s: cached %u, want %u", what,
          (unsigned)microattn_layer_cached(layer), (unsigned)cached);
  }
}

/* Token by token and in chunks equals one causal forward, with and without rotary embeddings (both pair
 * conventions, all or part of the head dims), on a shape that crosses the query and key tiles. */
static void test_layer_append(void) {
  static const size_t ones[] = {1}, mixed[] = {3, 1, 5, 2, 33, 4};
  layer_shape shapes[5];
  const microattn_layer_weights w = all_weights();
  microattn_attention_options causal;
  size_t i;
  shapes[0] = make_shape(L_SEQ, L_DIM, L_HEADS, L_KV, 0.0f, 0, 0, 0);
  shapes[1] = make_shape(72, 8, 2, 1, 0.0f, 0, 0, 0);
  shapes[2] = make_shape(L_SEQ, L_DIM, L_HEADS, L_KV, 10000.0f, 0, 0, 0); /* rotate_half over the whole head */
  shapes[3] = make_shape(L_SEQ, L_DIM, L_HEADS, L_KV, 500.0f, 2, 1, 0);   /* interleaved, first pair only */
  shapes[4] = make_shape(72, 8, 2, 1, 10000.0f, 4, 1, 0);
  memset(&causal, 0, sizeof causal);
  causal.causal = 1;
  for (i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
    const layer_shape* s = &shapes[i];
    const size_t t = s->seq;
    float* buffer = s->seq == L_SEQ ? layer_buffer : buffer_b;
    const size_t floats =
        s->seq == L_SEQ ? sizeof layer_buffer / sizeof layer_buffer[0] : sizeof buffer_b / sizeof buffer_b[0];
    microattn_layer layer;
    microattn_view y;
    CHECK(microattn_layer_init_config(&layer, s->seq, s->dim, s->heads, s->kv_heads, &w, &s->config, buffer, floats) ==
              MICROATTN_OK,
          "init_config, shape %u", (unsigned)i);
    CHECK(layer.cached == 0 && layer.position == 0 && layer.cache == buffer &&
              layer.scratch == buffer + microattn_layer_cache_floats(s->seq, s->dim, s->heads, s->kv_heads),
          "layer fields, shape %u", (unsigned)i);
    fill(decode_x, t * s->dim, 1.0f);
    ref_decode(s, decode_x, t, decode_x, t, 1, 0, decode_want);
    append_in_chunks(&layer, s, decode_x, t, ones, 1, decode_want, "token by token");
    CHECK(microattn_layer_reset(&layer) == MICROATTN_OK && layer.cached == 0 && layer.position == 0, "reset");
    append_in_chunks(&layer, s, decode_x, t, mixed, sizeof mixed / sizeof mixed[0], decode_want, "chunks");
    /* one causal forward gives the same rows and leaves the cache full */
    arena_reset();
    y = arena_view(1, t, s->dim, 1);
    CHECK(microattn_layer_forward(&layer, cview(decode_x, t, s->dim, s->dim), y, &causal) == MICROATTN_OK &&
              decode_matches(y, decode_want, t, &s->config, t) && canaries_intact(y),
          "causal forward, shape %u", (unsigned)i);
    CHECK(layer.cached == t && layer.position == t, "forward's cache, shape %u", (unsigned)i);
  }
}

/* A window: from the call's options on a plain layer (forward), and the layer's own with the ring wrapping many
 * times past max_seq (append), against a causal sliding-window reference over the whole sequence. */
static void test_layer_window(void) {
  static const size_t chunks_a[] = {1, 3, 2, 8, 4, 1, 5}, chunks_b[] = {33, 7, 1, 53, 2};
  const microattn_layer_weights w = all_weights();
  microattn_attention_options opt;
  microattn_layer layer;
  microattn_view y;
  layer_shape s = make_shape(L_SEQ, L_DIM, L_HEADS, L_KV, 0.0f, 0, 0, 0);
  int mode;
  /* options.window reaches attention: causal and not */
  CHECK(microattn_layer_init(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &w, layer_buffer,
                             sizeof layer_buffer / sizeof layer_buffer[0]) == MICROATTN_OK,
        "init");
  fill(decode_x, L_SEQ * L_DIM, 1.0f);
  for (mode = 0; mode < 2; ++mode) {
    memset(&opt, 0, sizeof opt);
    opt.causal = mode == 0;
    opt.window = mode == 0 ? 3 : 2;
    ref_decode(&s, decode_x, L_SEQ, decode_x, L_SEQ, opt.causal, opt.window, decode_want);
    arena_reset();
    y = arena_view(4, L_SEQ, L_DIM, 0);
    CHECK(microattn_layer_forward(&layer, cview(decode_x, L_SEQ, L_DIM, L_DIM), y, &opt) == MICROATTN_OK &&
              decode_matches(y, decode_want, L_SEQ, &s.config, 0) && canaries_intact(y),
          "forward with options.window %u, causal %d", (unsigned)opt.window, opt.causal);
  }
  /* the ring: window 5 in 12 rows over 40 tokens, with rope; window 20 in 72 rows over 100 tokens */
  s = make_shape(L_SEQ, L_DIM, L_HEADS, L_KV, 10000.0f, 0, 1, 5);
  CHECK(microattn_layer_init_config(&layer, s.seq, s.dim, s.heads, s.kv_heads, &w, &s.config, layer_buffer,
                                    sizeof layer_buffer / sizeof layer_buffer[0]) == MICROATTN_OK,
        "init ring");
  fill(decode_x, 40 * L_DIM, 1.0f);
  ref_decode(&s, decode_x, 40, decode_x, 40, 1, 5, decode_want);
  append_in_chunks(&layer, &s, decode_x, 40, chunks_a, sizeof chunks_a / sizeof chunks_a[0], decode_want, "ring 5/12");
  s = make_shape(72, 8, 2, 1, 0.0f, 0, 0, 20);
  CHECK(microattn_layer_init_config(&layer, s.seq, s.dim, s.heads, s.kv_heads, &w, &s.config, buffer_b,
                                    sizeof buffer_b / sizeof buffer_b[0]) == MICROATTN_OK,
        "init ring b");
  fill(decode_x, T_MAX * 8, 1.0f);
  ref_decode(&s, decode_x, T_MAX, decode_x, T_MAX, 1, 20, decode_want);
  append_in_chunks(&layer, &s, decode_x, T_MAX, chunks_b, sizeof chunks_b / sizeof chunks_b[0], decode_want,
                   "ring 20/72");
}

/* Cross-attention decoding: forward_cross fills the cache with the context, attend reads it and leaves it. */
static void test_layer_attend(void) {
  const microattn_layer_weights w = all_weights();
  const layer_shape s = make_shape(L_SEQ, L_DIM, L_HEADS, L_KV, 10000.0f, 0, 0, 0);
  microattn_layer layer;
  microattn_view y;
  CHECK(microattn_layer_init_config(&layer, s.seq, s.dim, s.heads, s.kv_heads, &w, &s.config, layer_buffer,
                                    sizeof layer_buffer / sizeof layer_buffer[0]) == MICROATTN_OK,
        "init");
  fill(decode_x, L_SEQ * L_DIM, 1.0f); /* the context */
  fill(decode_q, 7 * L_DIM, 1.0f);
  ref_decode(&s, decode_q, 5, decode_x, L_SEQ, 0, 0, decode_want);
  arena_reset();
  y = arena_view(3, 5, L_DIM, 1);
  CHECK(microattn_layer_forward_cross(&layer, cview(decode_q, 5, L_DIM, L_DIM), cview(decode_x, L_SEQ, L_DIM, L_DIM), y,
                                      NULL) == MICROATTN_OK &&
            decode_matches(y, decode_want, L_SEQ, &s.config, L_SEQ) && canaries_intact(y),
        "forward_cross");
  CHECK(layer.cached == L_SEQ && layer.position == L_SEQ, "cross forward's cache");
  fill(decode_q, 7 * L_DIM, 1.0f);
  ref_decode(&s, decode_q, 7, decode_x, L_SEQ, 0, 0, decode_want);
  arena_reset();
  y = arena_view(9, 7, L_DIM, 4);
  CHECK(microattn_layer_attend(&layer, cview(decode_q, 7, L_DIM, L_DIM), y, NULL) == MICROATTN_OK &&
            decode_matches(y, decode_want, L_SEQ, &s.config, L_SEQ) && canaries_intact(y),
        "attend after forward_cross");
  CHECK(layer.cached == L_SEQ && layer.position == L_SEQ, "attend changed the cache");
  /* in place, twice: the cache did not move */
  y.data = decode_q;
  y.stride = L_DIM;
  CHECK(microattn_layer_attend(&layer, cview(decode_q, 7, L_DIM, L_DIM), y, NULL) == MICROATTN_OK &&
            decode_matches(y, decode_want, L_SEQ, &s.config, L_SEQ),
        "attend in place");
}

/* Two layers with their own caches and one scratch, decoding in turns. */
static void test_layer_shared_scratch(void) {
  const microattn_layer_weights w = all_weights();
  const layer_shape s = make_shape(L_SEQ, L_DIM, L_HEADS, L_KV, 10000.0f, 0, 0, 0);
  const size_t n_cache = sizeof cache_1 / sizeof cache_1[0],
               n_scratch = sizeof shared_scratch / sizeof shared_scratch[0];
  microattn_layer l1, l2, zeroed;
  size_t t, k;
  CHECK(microattn_layer_cache_floats(L_SEQ, L_DIM, L_HEADS, L_KV) ==
                MICROATTN_LAYER_CACHE_FLOATS(L_SEQ, L_DIM, L_HEADS, L_KV) &&
            microattn_layer_scratch_floats(L_DIM, L_HEADS) == MICROATTN_LAYER_SCRATCH_FLOATS(L_DIM, L_HEADS) &&
            microattn_layer_buffer_floats(L_SEQ, L_DIM, L_HEADS, L_KV) ==
                microattn_layer_cache_floats(L_SEQ, L_DIM, L_HEADS, L_KV) +
                    microattn_layer_scratch_floats(L_DIM, L_HEADS),
        "cache + scratch = buffer");
  CHECK(microattn_layer_cache_floats(L_SEQ, L_DIM, L_HEADS, 3) == 0 && microattn_layer_scratch_floats(L_DIM, 3) == 0 &&
            microattn_layer_scratch_floats(0, 1) == 0 && microattn_layer_cache_floats((size_t)-1 / 4, 64, 1, 1) == 0,
        "size functions: 0 for bad shapes and overflow");
  memset(&zeroed, 0, sizeof zeroed);
  l1 = zeroed;
  CHECK(microattn_layer_init_shared(&l1, L_SEQ, L_DIM, L_HEADS, L_KV, &w, &s.config, cache_1, n_cache, NULL,
                                    n_scratch) == MICROATTN_NULL_POINTER,
        "null scratch");
  CHECK(microattn_layer_init_shared(&l1, L_SEQ, L_DIM, L_HEADS, L_KV, &w, &s.config, cache_1, n_cache, shared_scratch,
                                    n_scratch - 1) == MICROATTN_WORKSPACE_TOO_SMALL,
        "scratch one float short");
  CHECK(microattn_layer_init_shared(&l1, L_SEQ, L_DIM, L_HEADS, L_KV, &w, &s.config, cache_1, n_cache - 1,
                                    shared_scratch, n_scratch) == MICROATTN_WORKSPACE_TOO_SMALL,
        "cache one float short");
  for (k = 1; k < 4; ++k)
    CHECK(microattn_layer_init_shared(&l1, L_SEQ, L_DIM, L_HEADS, L_KV, &w, &s.config, cache_1, n_cache,
                                      (float*)(void*)((char*)shared_scratch + k), n_scratch) == MICROATTN_MISALIGNED,
          "scratch misaligned by %u bytes", (unsigned)k);
  CHECK(microattn_layer_init_shared(&l1, L_SEQ, L_DIM, L_HEADS, L_KV, &w, &s.config, layer_buffer, n_cache,
                                    layer_buffer + n_cache - 1, n_scratch) == MICROATTN_ALIASING,
        "scratch over the cache");
  CHECK(microattn_layer_init_shared(&l1, L_SEQ, L_DIM, L_HEADS, L_KV, &w, &s.config, cache_1, n_cache, wq, n_scratch) ==
            MICROATTN_ALIASING,
        "scratch over a weight");
  CHECK(memcmp(&l1, &zeroed, sizeof l1) == 0, "init_shared wrote on error");
  CHECK(microattn_layer_init_shared(&l1, L_SEQ, L_DIM, L_HEADS, L_KV, &w, &s.config, cache_1, n_cache, shared_scratch,
                                    n_scratch) == MICROATTN_OK &&
            microattn_layer_init_shared(&l2, L_SEQ, L_DIM, L_HEADS, L_KV, &w, &s.config, cache_2, n_cache,
                                        shared_scratch, n_scratch) == MICROATTN_OK,
        "init_shared");
  CHECK(l1.scratch == shared_scratch && l2.scratch == shared_scratch && l1.cache == cache_1, "shared fields");
  fill(decode_x, L_SEQ * L_DIM, 1.0f);
  fill(decode_x2, L_SEQ * L_DIM, 1.0f);
  ref_decode(&s, decode_x, L_SEQ, decode_x, L_SEQ, 1, 0, decode_want);
  ref_decode(&s, decode_x2, L_SEQ, decode_x2, L_SEQ, 1, 0, decode_want2);
  for (t = 0; t < L_SEQ; ++t) {
    microattn_view y;
    arena_reset();
    y = arena_view(2, 1, L_DIM, 0);
    CHECK(microattn_layer_append(&l1, cview(decode_x + t * L_DIM, 1, L_DIM, L_DIM), y, NULL) == MICROATTN_OK &&
              decode_matches(y, decode_want + t * L_DIM, t + 1, &s.config, t + 1) && canaries_intact(y),
          "shared layer 1, token %u", (unsigned)t);
    arena_reset();
    y = arena_view(5, 1, L_DIM, 0);
    CHECK(microattn_layer_append(&l2, cview(decode_x2 + t * L_DIM, 1, L_DIM, L_DIM), y, NULL) == MICROATTN_OK &&
              decode_matches(y, decode_want2 + t * L_DIM, t + 1, &s.config, t + 1) && canaries_intact(y),
          "shared layer 2, token %u", (unsigned)t);
  }
  /* a view in the shared scratch is aliasing (the check of the C++ layer) */
  CHECK(microattn_layer_attend(&l1, cview(shared_scratch, 1, L_DIM, L_DIM), arena_view(0, 1, L_DIM, 0), NULL) ==
            MICROATTN_ALIASING,
        "query in the shared scratch");
}

/* Init checks every weight and bias pointer once, with the status the layer's calls return for it (a null q/k/v
 * weight or an out_bias without out_weight: NULL_POINTER; a weight or bias not aligned to float: MISALIGNED), and
 * writes nothing on error; a layer it accepted works. All three inits, every weight and bias, 1, 2 and 3 bytes. */
static float cache_copy[sizeof cache_1 / sizeof cache_1[0]],
    scratch_copy[sizeof shared_scratch / sizeof shared_scratch[0]];
static microattn_status init_with(int entry, microattn_layer* layer, const microattn_layer_weights* w) {
  if (entry == 0)
    return microattn_layer_init(layer, L_SEQ, L_DIM, L_HEADS, L_KV, w, layer_buffer,
                                sizeof layer_buffer / sizeof layer_buffer[0]);
  if (entry == 1)
    return microattn_layer_init_config(layer, L_SEQ, L_DIM, L_HEADS, L_KV, w, NULL, layer_buffer,
                                       sizeof layer_buffer / sizeof layer_buffer[0]);
  return microattn_layer_init_shared(layer, L_SEQ, L_DIM, L_HEADS, L_KV, w, NULL, cache_1,
                                     sizeof cache_1 / sizeof cache_1[0], shared_scratch,
                                     sizeof shared_scratch / sizeof shared_scratch[0]);
}
/* Canaries in the layer struct and the caller's blocks; whether they are all still there. */
static microattn_layer init_canary;
static void init_canaries(microattn_layer* layer) {
  const float c = canary();
  size_t i;
  memset(layer, 0xa5, sizeof *layer);
  init_canary = *layer;
  for (i = 0; i < sizeof layer_buffer / sizeof layer_buffer[0]; ++i) layer_buffer[i] = c;
  for (i = 0; i < sizeof cache_1 / sizeof cache_1[0]; ++i) cache_1[i] = c;
  for (i = 0; i < sizeof shared_scratch / sizeof shared_scratch[0]; ++i) shared_scratch[i] = c;
  memcpy(buffer_copy, layer_buffer, sizeof layer_buffer);
  memcpy(cache_copy, cache_1, sizeof cache_1);
  memcpy(scratch_copy, shared_scratch, sizeof shared_scratch);
}
static int init_wrote_nothing(const microattn_layer* layer) {
  return memcmp(layer, &init_canary, sizeof *layer) == 0 &&
         memcmp(buffer_copy, layer_buffer, sizeof layer_buffer) == 0 &&
         memcmp(cache_copy, cache_1, sizeof cache_1) == 0 &&
         memcmp(scratch_copy, shared_scratch, sizeof shared_scratch) == 0;
}
/* An initialised layer: forward matches the reference (for the full weights), and an append succeeds. */
static int layer_works(microattn_layer* layer, int full_weights) {
  static float x[3 * L_DIM];
  static double want[3 * L_DIM];
  microattn_view y;
  int ok;
  fill(x, 3 * L_DIM, 1.0f);
  arena_reset();
  y = arena_view(1, 3, L_DIM, 2);
  ok = microattn_layer_forward(layer, cview(x, 3, L_DIM, L_DIM), y, NULL) == MICROATTN_OK && canaries_intact(y);
  if (ok && full_weights) {
    ref_layer(x, 3, x, 3, 0, want);
    ok = layer_matches(y, want, 3);
  }
  return ok &&
         microattn_layer_append(layer, cview(x, 1, L_DIM, L_DIM), arena_view(0, 1, L_DIM, 0), NULL) == MICROATTN_OK &&
         layer->cached == 4;
}
static void test_layer_init_weights(void) {
  static const char* const names[] = {"q_weight", "k_weight", "v_weight",   "q_bias",
                                      "k_bias",   "v_bias",   "out_weight", "out_bias"};
  microattn_layer_weights w;
  microattn_layer layer;
  const float** slots[8];
  int entry, slot;
  size_t k;
  slots[0] = &w.q_weight;
  slots[1] = &w.k_weight;
  slots[2] = &w.v_weight;
  slots[3] = &w.q_bias;
  slots[4] = &w.k_bias;
  slots[5] = &w.v_bias;
  slots[6] = &w.out_weight;
  slots[7] = &w.out_bias;
  for (entry = 0; entry < 3; ++entry) {
    for (slot = 0; slot < 8; ++slot)
      for (k = 0; k < 4; ++k) { /* k = 0: aligned, the control */
        w = all_weights();
        *slots[slot] = (const float*)(const void*)((const char*)*slots[slot] + k);
        init_canaries(&layer);
        if (k == 0)
          CHECK(init_with(entry, &layer, &w) == MICROATTN_OK && layer_works(&layer, 1), "init %d, all weights", entry);
        else
          CHECK(init_with(entry, &layer, &w) == MICROATTN_MISALIGNED && init_wrote_nothing(&layer),
                "init %d: %s misaligned by %u bytes", entry, names[slot], (unsigned)k);
      }
    for (slot = 0; slot < 3; ++slot) {
      w = all_weights();
      *slots[slot] = NULL;
      init_canaries(&layer);
      CHECK(init_with(entry, &layer, &w) == MICROATTN_NULL_POINTER && init_wrote_nothing(&layer), "init %d: %s null",
            entry, names[slot]);
    }
    w = all_weights();
    w.out_weight = NULL;
    init_canaries(&layer);
    CHECK(init_with(entry, &layer, &w) == MICROATTN_NULL_POINTER && init_wrote_nothing(&layer),
          "init %d: out_bias without out_weight", entry);
    /* null before misaligned, as in the layer's calls */
    w.q_bias = (const float*)(const void*)((const char*)bq + 2);
    init_canaries(&layer);
    CHECK(init_with(entry, &layer, &w) == MICROATTN_NULL_POINTER && init_wrote_nothing(&layer),
          "init %d: out_bias without out_weight, q_bias misaligned", entry);
    w = all_weights();
    w.q_weight = NULL;
    w.k_weight = (const float*)(const void*)((const char*)wk + 1);
    init_canaries(&layer);
    CHECK(init_with(entry, &layer, &w) == MICROATTN_NULL_POINTER && init_wrote_nothing(&layer),
          "init %d: q_weight null, k_weight misaligned", entry);
    /* optional arrays left out: accepted, and the layer works */
    w = all_weights();
    w.out_bias = NULL;
    init_canaries(&layer);
    CHECK(init_with(entry, &layer, &w) == MICROATTN_OK && layer_works(&layer, 0), "init %d: out_weight, no out_bias",
          entry);
    w.out_weight = NULL;
    w.q_bias = w.k_bias = w.v_bias = NULL;
    init_canaries(&layer);
    CHECK(init_with(entry, &layer, &w) == MICROATTN_OK && layer_works(&layer, 0), "init %d: q/k/v weights only", entry);
  }
  /* misaligned before aliasing (the documented order): a misaligned bias and a buffer over a weight */
  w = all_weights();
  w.v_bias = (const float*)(const void*)((const char*)bv + 3);
  CHECK(microattn_layer_init(&layer, 1, 2, 1, 1, &w, wo, 100000) == MICROATTN_MISALIGNED, "misaligned before aliasing");
}

/* Every error of the decoding calls: the status, and nothing written (y, the cache, cached, position). */
static void test_layer_decode_errors(void) {
  const microattn_layer_weights w = all_weights();
  const size_t n_buffer = sizeof layer_buffer / sizeof layer_buffer[0];
  microattn_layer layer, saved, zeroed;
  microattn_attention_options opt;
  microattn_layer_config config;
  microattn_view y;
  const float* x = decode_x;
  size_t k;
  fill(decode_x, T_MAX * L_DIM, 1.0f);
  memset(&zeroed, 0, sizeof zeroed);
  memset(&opt, 0, sizeof opt);

  /* configurations the layer rejects: at init, nothing written */
  {
    /* odd or too many rope_dims; a base negative, NaN, infinite, below 1 or subnormal */
    static const float thetas[] = {10000.0f, 10000.0f, -1.0f, 0.0f, 0.0f, 0.5f, 1e-20f, 1e-45f};
    static const size_t dims[] = {3, 6, 0, 0, 0, 0, 0, 0};
    size_t i;
    for (i = 0; i < 8; ++i) {
      memset(&config, 0, sizeof config);
      config.rope_theta = i == 3 ? NAN : i == 4 ? INFINITY : thetas[i];
      config.rope_dims = dims[i];
      layer = zeroed;
      CHECK(microattn_layer_init_config(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &w, &config, layer_buffer, n_buffer) ==
                    MICROATTN_INVALID_SHAPE &&
                memcmp(&layer, &zeroed, sizeof layer) == 0,
            "bad configuration %u", (unsigned)i);
    }
  }
  for (k = 1; k < 4; ++k)
    CHECK(microattn_layer_init_config(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &w, NULL,
                                      (float*)(void*)((char*)layer_buffer + k), n_buffer) == MICROATTN_MISALIGNED,
          "buffer misaligned by %u bytes", (unsigned)k);
  CHECK(microattn_layer_reset(NULL) == MICROATTN_NULL_POINTER &&
            microattn_layer_reset(&zeroed) == MICROATTN_NULL_POINTER && microattn_layer_cached(NULL) == 0 &&
            microattn_layer_position(NULL) == 0,
        "reset, cached, position on NULL");

  CHECK(microattn_layer_init_config(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &w, NULL, layer_buffer, n_buffer) ==
            MICROATTN_OK,
        "init_config with NULL");
  arena_reset();
  CHECK(microattn_layer_attend(&layer, cview(x, 2, L_DIM, L_DIM), arena_view(0, 2, L_DIM, 0), NULL) ==
            MICROATTN_INVALID_SHAPE,
        "attend on an empty cache");
  CHECK(microattn_layer_append(&layer, cview(x, L_SEQ + 1, L_DIM, L_DIM), arena_view(0, L_SEQ + 1, L_DIM, 0), NULL) ==
            MICROATTN_INVALID_SHAPE,
        "append of more than max_seq rows");
  CHECK(microattn_layer_append(&layer, cview(x, 5, L_DIM, L_DIM), arena_view(0, 5, L_DIM, 0), NULL) == MICROATTN_OK,
        "append 5");

  /* from here on, every call fails and writes nothing */
  snapshot(&layer, &saved);
  y = arena_view(0, 2, L_DIM, 0);
#define UNTOUCHED                                                                                                 \
  (memcmp(arena, arena_copy, sizeof arena) == 0 && memcmp(buffer_copy, layer_buffer, sizeof layer_buffer) == 0 && \
   memcmp(&layer, &saved, sizeof layer) == 0)
  CHECK(microattn_layer_append(NULL, cview(x, 2, L_DIM, L_DIM), y, NULL) == MICROATTN_NULL_POINTER && UNTOUCHED,
        "append on NULL");
  CHECK(microattn_layer_attend(NULL, cview(x, 2, L_DIM, L_DIM), y, NULL) == MICROATTN_NULL_POINTER && UNTOUCHED,
        "attend on NULL");
  CHECK(microattn_layer_append(&zeroed, cview(x, 2, L_DIM, L_DIM), y, NULL) == MICROATTN_NULL_POINTER && UNTOUCHED,
        "append on an uninitialised layer");
  CHECK(microattn_layer_append(&layer, cview(NULL, 2, L_DIM, L_DIM), y, NULL) == MICROATTN_NULL_POINTER && UNTOUCHED,
        "append null x");
  y.data = NULL;
  CHECK(microattn_layer_attend(&layer, cview(x, 2, L_DIM, L_DIM), y, NULL) == MICROATTN_NULL_POINTER && UNTOUCHED,
        "attend null y");
  y.data = arena;
  for (k = 1; k < 4; ++k) {
    const float* x_off = (const float*)(const void*)((const char*)x + k);
    microattn_view y_off = y;
    y_off.data = (float*)(void*)((char*)(arena + 8) + k);
    CHECK(microattn_layer_append(&layer, cview(x_off, 2, L_DIM, L_DIM), y, NULL) == MICROATTN_MISALIGNED && UNTOUCHED,
          "append x misaligned by %u", (unsigned)k);
    CHECK(microattn_layer_attend(&layer, cview(x, 2, L_DIM, L_DIM), y_off, NULL) == MICROATTN_MISALIGNED && UNTOUCHED,
          "attend y misaligned by %u", (unsigned)k);
    CHECK(microattn_layer_forward(&layer, cview(x, 2, L_DIM, L_DIM), y_off, NULL) == MICROATTN_MISALIGNED && UNTOUCHED,
          "forward y misaligned by %u", (unsigned)k);
    /* alignment comes before the overlap with the cache */
    CHECK(microattn_layer_append(&layer,
                                 cview((const float*)(const void*)((const char*)layer.cache + k), 2, L_DIM, L_DIM), y,
                                 NULL) == MICROATTN_MISALIGNED &&
              UNTOUCHED,
          "misaligned x in the cache, by %u", (unsigned)k);
  }
  CHECK(microattn_layer_append(&layer, cview(x, 2, L_DIM - 1, L_DIM), arena_view(0, 2, L_DIM - 1, 0), NULL) ==
                MICROATTN_INVALID_SHAPE &&
            UNTOUCHED,
        "append cols != model_dim");
  CHECK(microattn_layer_append(&layer, cview(x, 3, L_DIM, L_DIM), y, NULL) == MICROATTN_INVALID_SHAPE && UNTOUCHED,
        "append y.rows != x.rows");
  CHECK(microattn_layer_attend(&layer, cview(x, 2, L_DIM, L_DIM - 1), y, NULL) == MICROATTN_INVALID_SHAPE && UNTOUCHED,
        "attend stride < cols");
  CHECK(
      microattn_layer_append(&layer, cview(layer.cache + 3, 2, L_DIM, L_DIM - 2), y, NULL) == MICROATTN_INVALID_SHAPE &&
          UNTOUCHED,
      "shape before the overlap with the cache");
  CHECK(microattn_layer_append(&layer, cview(x, 8, L_DIM, L_DIM), arena_view(0, 8, L_DIM, 0), NULL) ==
                MICROATTN_INVALID_SHAPE &&
            UNTOUCHED,
        "append past max_seq (5 + 8 > 12)");
  opt.mask = cview(x, 2, 6, 6); /* needs 2 × (5 + 2) */
  CHECK(microattn_layer_append(&layer, cview(x, 2, L_DIM, L_DIM), y, &opt) == MICROATTN_INVALID_SHAPE && UNTOUCHED,
        "append mask shape");
  opt.mask = cview(layer.cache + 1, 2, 7, 7);
  CHECK(microattn_layer_append(&layer, cview(x, 2, L_DIM, L_DIM), y, &opt) == MICROATTN_ALIASING && UNTOUCHED,
        "mask in the cache");
  memset(&opt, 0, sizeof opt);
  CHECK(microattn_layer_append(&layer, cview(layer.cache + 3, 2, L_DIM, L_DIM), y, NULL) == MICROATTN_ALIASING &&
            UNTOUCHED,
        "append x in the cache");
  CHECK(microattn_layer_attend(&layer, cview(layer.cache + layer.cache_floats / 2, 2, L_DIM, L_DIM), y, NULL) ==
                MICROATTN_ALIASING &&
            UNTOUCHED,
        "attend query in V");
  {
    microattn_view in_cache;
    in_cache.data = layer.cache + 40;
    in_cache.rows = 2;
    in_cache.cols = L_DIM;
    in_cache.stride = L_DIM;
    CHECK(microattn_layer_append(&layer, cview(x, 2, L_DIM, L_DIM), in_cache, NULL) == MICROATTN_ALIASING && UNTOUCHED,
          "append y in the cache");
    CHECK(microattn_layer_forward_cross(&layer, cview(x, 2, L_DIM, L_DIM), as_input(in_cache), y, NULL) ==
                  MICROATTN_ALIASING &&
              UNTOUCHED,
          "context in the cache");
    in_cache.data = layer.scratch + 7;
    CHECK(microattn_layer_attend(&layer, cview(x, 2, L_DIM, L_DIM), in_cache, NULL) == MICROATTN_ALIASING && UNTOUCHED,
          "attend y in the scratch");
  }
  CHECK(microattn_layer_append(&layer, as_input(y), arena_view(L_DIM, 2, L_DIM, 0), NULL) == MICROATTN_ALIASING &&
            UNTOUCHED,
        "append y overlaps x");

  /* a full cache: INVALID_SHAPE, nothing written */
  arena_reset();
  CHECK(microattn_layer_append(&layer, cview(x + 5 * L_DIM, 7, L_DIM, L_DIM), arena_view(0, 7, L_DIM, 0), NULL) ==
                MICROATTN_OK &&
            layer.cached == L_SEQ,
        "fill the cache");
  snapshot(&layer, &saved);
  CHECK(microattn_layer_append(&layer, cview(x, 1, L_DIM, L_DIM), arena_view(0, 1, L_DIM, 0), NULL) ==
                MICROATTN_INVALID_SHAPE &&
            UNTOUCHED,
        "append to a full cache");

  /* a ring (window 5 in 12 rows): at most 12 - 4 rows per append, no mask, no larger window */
  memset(&config, 0, sizeof config);
  config.window = 5;
  CHECK(microattn_layer_init_config(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &w, &config, layer_buffer, n_buffer) ==
                MICROATTN_OK &&
            microattn_layer_append(&layer, cview(x, 8, L_DIM, L_DIM), arena_view(0, 8, L_DIM, 0), NULL) == MICROATTN_OK,
        "ring");
  snapshot(&layer, &saved);
  CHECK(microattn_layer_append(&layer, cview(x, 9, L_DIM, L_DIM), arena_view(0, 9, L_DIM, 0), NULL) ==
                MICROATTN_INVALID_SHAPE &&
            UNTOUCHED,
        "ring: 4 + 9 > 12");
  opt.window = 6;
  CHECK(microattn_layer_append(&layer, cview(x, 1, L_DIM, L_DIM), arena_view(0, 1, L_DIM, 0), &opt) ==
                MICROATTN_INVALID_SHAPE &&
            UNTOUCHED,
        "ring: options.window > config.window");
  opt.window = 0;
  opt.mask = cview(x, 1, 9, 9);
  CHECK(microattn_layer_append(&layer, cview(x, 1, L_DIM, L_DIM), arena_view(0, 1, L_DIM, 0), &opt) ==
                MICROATTN_INVALID_SHAPE &&
            UNTOUCHED,
        "ring: a mask");
#undef UNTOUCHED
  opt.mask = cview(NULL, 0, 0, 0);
  opt.window = 3;
  CHECK(microattn_layer_append(&layer, cview(x, 8, L_DIM, L_DIM), arena_view(0, 8, L_DIM, 0), &opt) == MICROATTN_OK &&
            layer.cached == 12 && layer.position == 16,
        "ring: a smaller window, 8 rows into a full ring");
}

/* A layer from weight matrices: q in Q8 (one scale per row), k in F16, v in F32, out in Q8 with groups of 8 — the
 * dequantized values written back into wq, wk, wv, wo so that ref_layer is their double reference. x is on Q8's
 * grid (multiples of 2^-7 with ±127·2^-7 in every group), so the Q8 projections of x are exact; the out projection's
 * input (the heads) is not: it is F16 in the calls checked against the fp32 tolerance. Init's checks, once. */
static signed char mq_data[L_DIM * L_DIM + 1], mo_data[L_DIM * L_DIM];
static float mq_scales[L_DIM], mo_scales[L_DIM * L_DIM / 8];
static unsigned short mk_data[L_KVD * L_DIM + 1], mo_half[L_DIM * L_DIM];
static float m_cache[MICROATTN_LAYER_CACHE_FLOATS(L_SEQ, L_DIM, L_HEADS, L_KV) + 1];
static float m_scratch[MICROATTN_LAYER_SCRATCH_FLOATS(L_DIM, L_HEADS) + 1];
/* q·2^e as binary16 bits, for |q| < 2^10 (exact). */
static unsigned short half_bits(double v) {
  int e;
  double m;
  unsigned short sign = v < 0 ? 0x8000u : 0;
  if (v == 0) return 0;
  m = frexp(fabs(v), &e); /* v = m·2^e, m in [0.5, 1) */
  return (unsigned short)(sign | (unsigned)((e - 1 + 15) << 10) | (unsigned)((m * 2.0 - 1.0) * 1024.0));
}
static void grid_fill(float* x, size_t rows) {
  size_t i, c;
  for (i = 0; i < rows; ++i)
    for (c = 0; c < L_DIM; ++c) {
      const int q = c == 0 ? ((i % 2) ? 127 : -127) : (int)(uniform(-127.0f, 127.0f));
      x[i * L_DIM + c] = (float)ldexp((double)q, -7);
    }
}
static void test_layer_matrices(void) {
  static float x[L_SEQ * L_DIM], ctx[L_SEQ * L_DIM];
  static double want[L_SEQ * L_DIM];
  microattn_layer_weight_matrices m, bad;
  microattn_layer layer, zeroed;
  microattn_layer_config cfg;
  microattn_view y;
  const size_t cache_bytes = microattn_layer_cache_bytes(L_SEQ, L_DIM, L_HEADS, L_KV, MICROATTN_FORMAT_F32);
  const size_t n_scratch = microattn_layer_scratch_floats(L_DIM, L_HEADS);
  size_t i, n, t;
  CHECK(cache_bytes == 4 * microattn_layer_cache_floats(L_SEQ, L_DIM, L_HEADS, L_KV) &&
            microattn_layer_cache_bytes(L_SEQ, L_DIM, L_HEADS, L_KV, MICROATTN_FORMAT_F16) == cache_bytes / 2 &&
            microattn_layer_cache_bytes(L_SEQ, L_DIM, L_HEADS, L_KV, MICROATTN_FORMAT_Q8) ==
                cache_bytes / 4 + 4 * 2 * L_SEQ * L_KV &&
            microattn_layer_cache_bytes(L_SEQ, L_DIM, L_HEADS, L_KV, (microattn_format)7) == 0 &&
            microattn_layer_cache_bytes(L_SEQ, L_DIM, 3, 1, MICROATTN_FORMAT_F32) == 0 &&
            microattn_layer_cache_bytes((size_t)-1 / 4, 64, 1, 1, MICROATTN_FORMAT_F32) == 0,
        "microattn_layer_cache_bytes");
  /* weights: q8 q (per-row scales 2^-8 or 2^-9), f16 k, f32 v, q8 out (groups of 8) */
  for (i = 0; i < L_DIM; ++i) mq_scales[i] = i % 2 ? 0x1p-8f : 0x1p-9f;
  for (i = 0; i < L_DIM * L_DIM / 8; ++i) mo_scales[i] = i % 3 ? 0x1p-8f : 0x1p-10f;
  for (i = 0; i < L_DIM * L_DIM; ++i) {
    const int q = (int)uniform(-76.0f, 76.0f), o = (int)uniform(-127.0f, 127.0f);
    mq_data[1 + i] = (signed char)q; /* starts at an odd address: int8 needs no alignment */
    wq[i] = (float)(mq_scales[i / L_DIM] * q);
    mo_data[i] = (signed char)o;
    wo[i] = (float)(mo_scales[i / 8] * o);
    mo_half[i] = half_bits(wo[i]);
  }
  for (i = 0; i < L_KVD * L_DIM; ++i) {
    const double v = ldexp((double)(int)uniform(-76.0f, 76.0f), -8);
    mk_data[i] = half_bits(v);
    wk[i] = (float)v;
  }
  memset(&m, 0, sizeof m);
  m.q.format = MICROATTN_FORMAT_Q8;
  m.q.data = mq_data + 1;
  m.q.rows = L_DIM;
  m.q.cols = L_DIM;
  m.q.scales = mq_scales;
  m.q.group = L_DIM;
  m.k.format = MICROATTN_FORMAT_F16;
  m.k.data = mk_data;
  m.k.rows = L_KVD;
  m.k.cols = L_DIM;
  m.v.format = MICROATTN_FORMAT_F32;
  m.v.data = wv;
  m.v.rows = L_KVD;
  m.v.cols = L_DIM;
  m.out.format = MICROATTN_FORMAT_F16;
  m.out.data = mo_half;
  m.out.rows = L_DIM;
  m.out.cols = L_DIM;
  m.q_bias = bq;
  m.k_bias = bk;
  m.v_bias = bv;
  m.out_bias = bo;
  memset(&cfg, 0, sizeof cfg);
  memset(&zeroed, 0, sizeof zeroed);
  layer = zeroed;

#define INIT(w, fmt, c, cb, s, sf) \
  microattn_layer_init_matrices(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, w, &cfg, fmt, c, cb, s, sf)
#define BAD(field_edit, status, what)                                                                    \
  do {                                                                                                   \
    bad = m;                                                                                             \
    field_edit;                                                                                          \
    CHECK(INIT(&bad, MICROATTN_FORMAT_F32, m_cache, cache_bytes, m_scratch, n_scratch) == status, what); \
  } while (0)
  CHECK(microattn_layer_init_matrices(NULL, L_SEQ, L_DIM, L_HEADS, L_KV, &m, NULL, MICROATTN_FORMAT_F32, m_cache,
                                      cache_bytes, m_scratch, n_scratch) == MICROATTN_NULL_POINTER,
        "matrices: null layer");
  CHECK(INIT(NULL, MICROATTN_FORMAT_F32, m_cache, cache_bytes, m_scratch, n_scratch) == MICROATTN_NULL_POINTER,
        "matrices: null weights");
  CHECK(INIT(&m, MICROATTN_FORMAT_F32, NULL, cache_bytes, m_scratch, n_scratch) == MICROATTN_NULL_POINTER,
        "matrices: null cache");
  CHECK(INIT(&m, MICROATTN_FORMAT_F32, m_cache, cache_bytes, NULL, n_scratch) == MICROATTN_NULL_POINTER,
        "matrices: null scratch");
  BAD(bad.q.data = NULL, MICROATTN_NULL_POINTER, "matrices: q data null");
  BAD(bad.v.data = NULL, MICROATTN_NULL_POINTER, "matrices: v data null");
  BAD(bad.q.scales = NULL, MICROATTN_NULL_POINTER, "matrices: q8 scales null");
  BAD(bad.out.data = NULL, MICROATTN_NULL_POINTER, "matrices: out_bias without out");
  BAD((bad.q.data = NULL, bad.k.data = (const char*)mk_data + 1), MICROATTN_NULL_POINTER,
      "matrices: null before misaligned");
  BAD(bad.k.format = (microattn_format)3, MICROATTN_INVALID_SHAPE, "matrices: format outside the enum");
  BAD(bad.q.rows = L_KVD, MICROATTN_INVALID_SHAPE, "matrices: q rows");
  BAD(bad.k.rows = L_DIM, MICROATTN_INVALID_SHAPE, "matrices: k rows");
  BAD(bad.out.cols = L_DIM - 1, MICROATTN_INVALID_SHAPE, "matrices: out cols");
  BAD(bad.q.group = 0, MICROATTN_INVALID_SHAPE, "matrices: group 0");
  BAD(bad.q.group = 3, MICROATTN_INVALID_SHAPE, "matrices: group not dividing");
  BAD((bad.q.rows = 0, bad.k.data = (const char*)mk_data + 1), MICROATTN_INVALID_SHAPE,
      "matrices: invalid shape before misaligned");
  BAD(bad.k.data = (const char*)mk_data + 1, MICROATTN_MISALIGNED, "matrices: f16 data odd");
  BAD(bad.v.data = (const char*)wv + 2, MICROATTN_MISALIGNED, "matrices: f32 data misaligned");
  BAD(bad.q.scales = (const float*)(const void*)((const char*)mq_scales + 1), MICROATTN_MISALIGNED,
      "matrices: scales misaligned");
  BAD(bad.k_bias = (const float*)(const void*)((const char*)bk + 2), MICROATTN_MISALIGNED, "matrices: bias misaligned");
  CHECK(INIT(&m, (microattn_format)9, m_cache, cache_bytes, m_scratch, n_scratch) == MICROATTN_INVALID_SHAPE &&
            INIT(&m, (microattn_format)3, m_cache, cache_bytes, m_scratch, n_scratch) == MICROATTN_INVALID_SHAPE,
        "matrices: cache format outside the enum");
  CHECK(INIT(&m, MICROATTN_FORMAT_F16, m_cache, cache_bytes, m_scratch, n_scratch) == MICROATTN_WORKSPACE_TOO_SMALL,
        "matrices: an f16 cache needs the larger scratch (microattn_layer_cache_scratch_floats)");
  CHECK(microattn_layer_init_matrices(&layer, L_SEQ, L_DIM, 3, 1, &m, &cfg, MICROATTN_FORMAT_F32, m_cache, cache_bytes,
                                      m_scratch, n_scratch) == MICROATTN_INVALID_SHAPE,
        "matrices: 16 %% 3");
  cfg.rope_theta = 10000.0f;
  cfg.rope_dims = 3;
  CHECK(INIT(&m, MICROATTN_FORMAT_F32, m_cache, cache_bytes, m_scratch, n_scratch) == MICROATTN_INVALID_SHAPE,
        "matrices: odd rope_dims");
  cfg.rope_theta = 0.0f;
  cfg.rope_dims = 0;
  CHECK(
      INIT(&m, MICROATTN_FORMAT_F32, m_cache, cache_bytes - 1, m_scratch, n_scratch) == MICROATTN_WORKSPACE_TOO_SMALL &&
          INIT(&m, MICROATTN_FORMAT_F32, m_cache, cache_bytes, m_scratch, n_scratch - 1) ==
              MICROATTN_WORKSPACE_TOO_SMALL,
      "matrices: cache or scratch short");
  CHECK(INIT(&m, MICROATTN_FORMAT_F32, (char*)m_cache + 2, cache_bytes, m_scratch, n_scratch) == MICROATTN_MISALIGNED &&
            INIT(&m, MICROATTN_FORMAT_F32, m_cache, cache_bytes, (float*)(void*)((char*)m_scratch + 1), n_scratch) ==
                MICROATTN_MISALIGNED,
        "matrices: cache or scratch misaligned");
  CHECK(INIT(&m, MICROATTN_FORMAT_F32, (void*)mq_scales, cache_bytes, m_scratch, n_scratch) == MICROATTN_ALIASING &&
            INIT(&m, MICROATTN_FORMAT_F32, m_cache, cache_bytes, (float*)(void*)mk_data, n_scratch) ==
                MICROATTN_ALIASING &&
            INIT(&m, MICROATTN_FORMAT_F32, m_cache, cache_bytes, bo, n_scratch) == MICROATTN_ALIASING &&
            INIT(&m, MICROATTN_FORMAT_F32, m_cache, cache_bytes, m_cache + 1, n_scratch) == MICROATTN_ALIASING,
        "matrices: cache or scratch over scales, f16 data, a bias, each other");
  CHECK(memcmp(&layer, &zeroed, sizeof layer) == 0, "init_matrices wrote on error");
  CHECK(INIT(&m, MICROATTN_FORMAT_F32, m_cache, cache_bytes, m_scratch, n_scratch) == MICROATTN_OK, "init_matrices");
  CHECK(layer.weights.q_weight == NULL && layer.weight_matrices.q.data == mq_data + 1 && layer.cache == m_cache &&
            layer.scratch == m_scratch && layer.weight_reader != NULL,
        "init_matrices fields");
  for (n = 1; n <= L_SEQ; n += 4) {
    grid_fill(x, n);
    grid_fill(ctx, L_SEQ);
    arena_reset();
    y = arena_view(3, n, L_DIM, 2);
    CHECK(microattn_layer_forward(&layer, cview(x, n, L_DIM, L_DIM), y, NULL) == MICROATTN_OK, "matrices forward");
    ref_layer(x, n, x, n, 0, want);
    CHECK(layer_matches(y, want, n) && canaries_intact(y), "matrices forward n %u", (unsigned)n);
    arena_reset();
    CHECK(microattn_layer_forward_cross(&layer, cview(x, n, L_DIM, L_DIM), cview(ctx, L_SEQ, L_DIM, L_DIM), y, NULL) ==
              MICROATTN_OK,
          "matrices cross");
    ref_layer(x, n, ctx, L_SEQ, 0, want);
    CHECK(layer_matches(y, want, L_SEQ) && canaries_intact(y), "matrices cross n %u", (unsigned)n);
    arena_reset();
    CHECK(microattn_layer_attend(&layer, cview(x, n, L_DIM, L_DIM), y, NULL) == MICROATTN_OK &&
              layer_matches(y, want, L_SEQ) && canaries_intact(y),
          "matrices attend n %u", (unsigned)n);
  }
  /* append token by token: the causal forward */
  grid_fill(x, L_SEQ);
  ref_layer(x, L_SEQ, x, L_SEQ, 1, want);
  CHECK(microattn_layer_reset(&layer) == MICROATTN_OK, "matrices reset");
  for (t = 0; t < L_SEQ; ++t) {
    arena_reset();
    y = arena_view(1, 1, L_DIM, 0);
    CHECK(microattn_layer_append(&layer, cview(x + t * L_DIM, 1, L_DIM, L_DIM), y, NULL) == MICROATTN_OK &&
              layer_matches(y, want + t * L_DIM, t + 1) && canaries_intact(y),
          "matrices append token %u", (unsigned)t);
  }
  /* y over a weight's bytes: the calls' own check (the layer's every call) */
  CHECK(microattn_layer_forward(&layer, cview(x, 1, L_DIM, L_DIM), arena_view(0, 1, L_DIM, 0), NULL) == MICROATTN_OK,
        "matrices forward before the errors");
  {
    microattn_view over;
    over.data = (float*)(void*)mo_half;
    over.rows = 1;
    over.cols = L_DIM;
    over.stride = L_DIM;
    memcpy(arena_copy, mo_half, sizeof mo_half);
    CHECK(microattn_layer_forward(&layer, cview(x, 1, L_DIM, L_DIM), over, NULL) == MICROATTN_ALIASING &&
              memcmp(arena_copy, mo_half, sizeof mo_half) == 0 && layer.cached == 1,
          "matrices: y over the f16 out weights");
  }
  /* q8 out projection: runs (its accuracy is test_layers_formats.cpp's) */
  m.out.format = MICROATTN_FORMAT_Q8;
  m.out.data = mo_data;
  m.out.scales = mo_scales;
  m.out.group = 8;
  CHECK(
      INIT(&m, MICROATTN_FORMAT_F32, m_cache, cache_bytes, m_scratch, n_scratch) == MICROATTN_OK &&
          microattn_layer_forward(&layer, cview(x, 3, L_DIM, L_DIM), arena_view(0, 3, L_DIM, 0), NULL) == MICROATTN_OK,
      "matrices: q8 out");
#undef BAD
#undef INIT
}

/* F16 and Q8 caches through the C API. Their rounding and accuracy against a float64 reference are the C++
 * tests' (test_cache.cpp); here: the sizes, the checks, the layout the calls lend the C++ code, and that the
 * results are the f32-cache layer's within what rounding K and V costs, and the same whether the tokens come by
 * forward or one by one (the same stored rows). */
static microattn_view view(float* data, size_t rows, size_t cols, size_t stride) {
  microattn_view v;
  v.data = data;
  v.rows = rows;
  v.cols = cols;
  v.stride = stride;
  return v;
}
static float c_cache[MICROATTN_LAYER_CACHE_FLOATS(L_SEQ, L_DIM, L_HEADS, L_KV) + 1];
static float c_scratch[MICROATTN_LAYER_SCRATCH_FLOATS(L_DIM, L_HEADS) + 1024];
static float c_ref_cache[MICROATTN_LAYER_CACHE_FLOATS(L_SEQ, L_DIM, L_HEADS, L_KV)];
static float c_ref_scratch[MICROATTN_LAYER_SCRATCH_FLOATS(L_DIM, L_HEADS)];
static void test_layer_cache_formats(void) {
  static float x[L_SEQ * L_DIM], y32[L_SEQ * L_DIM], yc[L_SEQ * L_DIM], ya[L_SEQ * L_DIM];
  static const microattn_format formats[2] = {MICROATTN_FORMAT_F16, MICROATTN_FORMAT_Q8};
  static const double tolerance[2] = {4e-3, 4e-2}; /* of each row's largest |y| */
  microattn_layer_weight_matrices m;
  microattn_layer ref, layer, zeroed;
  size_t f, i, r, c, t;
  memset(&m, 0, sizeof m);
  for (i = 0; i < L_DIM * L_DIM; ++i) {
    wq[i] = uniform(-0.3f, 0.3f);
    wo[i] = uniform(-0.3f, 0.3f);
  }
  for (i = 0; i < L_KVD * L_DIM; ++i) {
    wk[i] = uniform(-0.3f, 0.3f);
    wv[i] = uniform(-0.3f, 0.3f);
  }
  m.q.format = m.k.format = m.v.format = m.out.format = MICROATTN_FORMAT_F32;
  m.q.data = wq;
  m.k.data = wk;
  m.v.data = wv;
  m.out.data = wo;
  m.q.rows = m.out.rows = m.q.cols = m.k.cols = m.v.cols = m.out.cols = L_DIM;
  m.k.rows = m.v.rows = L_KVD;
  memset(&zeroed, 0, sizeof zeroed);
  CHECK(microattn_layer_init_matrices(&ref, L_SEQ, L_DIM, L_HEADS, L_KV, &m, NULL, MICROATTN_FORMAT_F32, c_ref_cache,
                                      sizeof c_ref_cache, c_ref_scratch,
                                      sizeof c_ref_scratch / sizeof c_ref_scratch[0]) == MICROATTN_OK,
        "f32 reference layer");
  for (i = 0; i < L_SEQ * L_DIM; ++i) x[i] = uniform(-1.0f, 1.0f);
  CHECK(microattn_layer_forward(&ref, cview(x, L_SEQ, L_DIM, L_DIM), view(y32, L_SEQ, L_DIM, L_DIM), NULL) ==
            MICROATTN_OK,
        "f32 forward");
  CHECK(microattn_layer_cache_scratch_floats(L_DIM, L_HEADS, MICROATTN_FORMAT_F32) ==
                microattn_layer_scratch_floats(L_DIM, L_HEADS) &&
            microattn_layer_cache_scratch_floats(L_DIM, L_HEADS, MICROATTN_FORMAT_F16) >
                microattn_layer_scratch_floats(L_DIM, L_HEADS) &&
            microattn_layer_cache_scratch_floats(L_DIM, L_HEADS, (microattn_format)3) == 0 &&
            microattn_layer_cache_scratch_floats(L_DIM, 3, MICROATTN_FORMAT_Q8) == 0,
        "microattn_layer_cache_scratch_floats");
  for (f = 0; f < 2; ++f) {
    const microattn_format fmt = formats[f];
    const size_t cb = microattn_layer_cache_bytes(L_SEQ, L_DIM, L_HEADS, L_KV, fmt);
    const size_t sf = microattn_layer_cache_scratch_floats(L_DIM, L_HEADS, fmt);
    CHECK(cb <= sizeof c_cache && sf <= sizeof c_scratch / sizeof c_scratch[0], "blocks big enough");
    layer = zeroed;
    CHECK(microattn_layer_init_matrices(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &m, NULL, fmt, c_cache, cb - 1, c_scratch,
                                        sf) == MICROATTN_WORKSPACE_TOO_SMALL &&
              microattn_layer_init_matrices(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &m, NULL, fmt, c_cache, cb, c_scratch,
                                            sf - 1) == MICROATTN_WORKSPACE_TOO_SMALL &&
              microattn_layer_init_matrices(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &m, NULL, fmt, c_cache, cb,
                                            c_cache + cb / 4 - 1, sf) == MICROATTN_ALIASING &&
              memcmp(&layer, &zeroed, sizeof layer) == 0,
          "format %d: short blocks, overlapping blocks, nothing written", (int)fmt);
    CHECK(microattn_layer_init_matrices(&layer, L_SEQ, L_DIM, L_HEADS, L_KV, &m, NULL, fmt, c_cache, cb, c_scratch,
                                        sf) == MICROATTN_OK &&
              layer.cache_format == fmt && layer.cache_runner != NULL && layer.cache_floats == (cb + 3) / 4,
          "format %d: init", (int)fmt);
    CHECK(microattn_layer_forward(&layer, cview(x, L_SEQ, L_DIM, L_DIM), view(yc, L_SEQ, L_DIM, L_DIM), NULL) ==
              MICROATTN_OK,
          "format %d: forward", (int)fmt);
    CHECK(microattn_layer_reset(&layer) == MICROATTN_OK, "reset");
    for (t = 0; t < L_SEQ; ++t) {
      microattn_attention_options o;
      memset(&o, 0, sizeof o);
      CHECK(microattn_layer_append(&layer, cview(x + t * L_DIM, 1, L_DIM, L_DIM), view(ya + t * L_DIM, 1, L_DIM, L_DIM),
                                   &o) == MICROATTN_OK,
            "format %d: append %u", (int)fmt, (unsigned)t);
    }
    CHECK(layer.cached == L_SEQ && layer.position == L_SEQ, "format %d: cache state", (int)fmt);
    /* an output view over the cache block: ALIASING, nothing written */
    CHECK(microattn_layer_forward(&layer, cview(x, 1, L_DIM, L_DIM), view(c_cache + 3, 1, L_DIM, L_DIM), NULL) ==
                  MICROATTN_ALIASING &&
              layer.cached == L_SEQ,
          "format %d: y over the cache", (int)fmt);
    for (r = 0; r < L_SEQ; ++r) {
      double row_max = 0, err_ref = 0;
      /* the forward over the whole (non-causal) sequence against the f32 cache, within the format's rounding */
      for (c = 0; c < L_DIM; ++c) row_max = fabs(y32[r * L_DIM + c]) > row_max ? fabs(y32[r * L_DIM + c]) : row_max;
      for (c = 0; c < L_DIM; ++c) {
        const double e = fabs((double)yc[r * L_DIM + c] - y32[r * L_DIM + c]);
        err_ref = e > err_ref ? e : err_ref;
      }
      CHECK(err_ref <= tolerance[f] * row_max, "format %d: row %u off the f32 cache by %g of %g", (int)fmt, (unsigned)r,
            err_ref, row_max);
    }
  }
  /* append's last row saw every token, as the forward's rows do (non-causal forward): the same stored K/V */
  {
    double row_max = 0, err = 0;
    for (c = 0; c < L_DIM; ++c) {
      const double a = ya[(L_SEQ - 1) * L_DIM + c], b = yc[(L_SEQ - 1) * L_DIM + c];
      row_max = fabs(b) > row_max ? fabs(b) : row_max;
      err = fabs(a - b) > err ? fabs(a - b) : err;
    }
    CHECK(err <= 1e-5 * row_max + 1e-6, "q8: last appended row against forward's: %g", err);
  }
}

int main(void) {
  test_strings_and_build();
  test_size_formulas();
  test_size_limits();
  test_matmul();
  test_linear();
  test_linear_parallel();
  test_formats();
  test_blocks();
  test_softmax_and_exp();
  test_attention();
  test_bad_input();
  test_layer();
  test_layer_append();
  test_layer_window();
  test_layer_attend();
  test_layer_shared_scratch();
  test_layer_init_weights();
  test_layer_decode_errors();
  test_layer_matrices();      /* it overwrites the layer weights with dequantized values */
  test_layer_cache_formats(); /* last: it overwrites them with its own */
  printf("microattn %s C API (%s, %s): %d checks, %d failed\n", microattn_version(), microattn_simd_arch(),
         microattn_matmul_kernel_name(), checks, failures);
  return failures == 0 ? 0 : 1;
}
