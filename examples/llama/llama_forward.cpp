#include "llama_forward.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>

#include <microattn/softmax.hpp>
#include <microattn/weights.hpp>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() (`__Y = __Y`), which -Wmaybe-uninitialized flags.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define LLAMA_WIDE 1
#define LLAMA_AVX512 __attribute__((target("avx512f,fma")))
#else
#define LLAMA_WIDE 0
#endif

namespace llama {

namespace ma = microattn;

namespace {

// The shapes are checked once, when the weights are prepared, so an error from the library is a bug here.
void check(ma::Status st, const char* what) {
  if (st != ma::Status::ok) {
    std::fprintf(stderr, "llama_run: %s failed: %s\n", what, ma::to_string(st));
    std::abort();
  }
}

// y (rows floats) = w·x (cols floats), on the state's workers.
void project(const RunState& s, const ma::WeightMatrix& w, const float* x, float* y) {
  check(ma::linear(ma::make_view(x, 1, w.cols), w, nullptr, ma::make_view(y, 1, w.rows), s.parallel), "linear");
}
void project(const RunState& s, const ma::WeightMatrix& w, const PackedMatrix& packed, const float* x, float* y) {
  if (packed.data != nullptr)
    packed_gemv(packed, x, y);
  else
    project(s, w, x, y);
}

// As llama2.c: pairs (2i, 2i+1) of every head turn by pos · 10000^(-2i / head_dim).
void set_rope(const Config& p, std::size_t pos, RunState& s) {
  const int hd = p.head_dim();
  for (int i = 0; i < hd; i += 2) {
    const float freq = 1.0f / std::pow(10000.0f, static_cast<float>(i) / static_cast<float>(hd));
    const float angle = static_cast<float>(pos) * freq;
    s.rope_cos[static_cast<std::size_t>(i / 2)] = std::cos(angle);
    s.rope_sin[static_cast<std::size_t>(i / 2)] = std::sin(angle);
  }
}

void rotate(float* v, std::size_t n, std::size_t head_dim, const RunState& s) {
  const float* cs = s.rope_cos.data();
  const float* sn = s.rope_sin.data();
  for (std::size_t h = 0; h < n; h += head_dim)  // per head: no division per pair
    for (std::size_t i = 0; i < head_dim; i += 2) {
      const float c = cs[i / 2], sv = sn[i / 2], v0 = v[h + i], v1 = v[h + i + 1];
      v[h + i] = v0 * c - v1 * sv;
      v[h + i + 1] = v0 * sv + v1 * c;
    }
}

// Whether linear quantizes x for w (groups tile every row alike) rather than computing in float.
bool q8_quantized(const ma::WeightMatrix& w) { return w.cols % w.group == 0 || w.group % w.cols == 0; }

// Element i of a weight matrix as linear's float path reads it (q8: scale · value, rounded once).
float weight_at(const ma::WeightMatrix& w, std::size_t i) {
  if (w.format == ma::Format::f32) return static_cast<const float*>(w.data)[i];
  return w.scales[i / w.group] * static_cast<float>(static_cast<const std::int8_t*>(w.data)[i]);
}

// The rows of `parts` (same cols, same format) as one matrix: q8 stays q8 where every part's groups divide its
// rows (whole groups per row, so the values and the scales concatenate); otherwise f32 (dequantized). One part
// that linear computes in float is dequantized; any other single part is used as it is.
ma::WeightMatrix concat(const ma::WeightMatrix* parts, std::size_t count, RunState& s) {
  bool all_q8_rows = parts[0].format == ma::Format::q8;
  std::size_t rows = 0;
  for (std::size_t i = 0; i < count; ++i) {
    rows += parts[i].rows;
    all_q8_rows = all_q8_rows && parts[i].format == ma::Format::q8 && parts[i].group == parts[0].group &&
                  parts[i].cols % parts[i].group == 0;
  }
  const std::size_t cols = parts[0].cols;
  if (count == 1 && (parts[0].format != ma::Format::q8 || q8_quantized(parts[0]))) return parts[0];
  if (all_q8_rows) {
    const std::size_t group = parts[0].group;
    s.owned_q8.emplace_back(rows * cols);
    s.owned_f32.emplace_back(rows * cols / group);
    std::int8_t* q = s.owned_q8.back().data();
    float* sc = s.owned_f32.back().data();
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t n = parts[i].rows * cols;
      std::memcpy(q, parts[i].data, n);
      std::memcpy(sc, parts[i].scales, n / group * sizeof(float));
      q += n;
      sc += n / group;
    }
    return ma::weights_q8(s.owned_q8.back().data(), s.owned_f32.back().data(), rows, cols, group);
  }
  s.owned_f32.emplace_back(rows * cols);
  float* out = s.owned_f32.back().data();
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t n = parts[i].rows * cols;
    if (parts[i].format == ma::Format::f32) {
      std::memcpy(out, parts[i].data, n * sizeof(float));
    } else {
      for (std::size_t j = 0; j < n; ++j) out[j] = weight_at(parts[i], j);
    }
    out += n;
  }
  return ma::weights_f32(s.owned_f32.back().data(), rows, cols);
}

// A copy of w in the state's 64-byte-aligned storage (a checkpoint's tensors start wherever the file puts them).
ma::WeightMatrix aligned_copy(const ma::WeightMatrix& w, RunState& s) {
  const std::size_t n = w.rows * w.cols;
  if (w.format == ma::Format::q8) {
    s.owned_q8.emplace_back(n);
    std::memcpy(s.owned_q8.back().data(), w.data, n);
    s.owned_f32.emplace_back(n / w.group);
    std::memcpy(s.owned_f32.back().data(), w.scales, n / w.group * sizeof(float));
    return ma::weights_q8(s.owned_q8.back().data(), s.owned_f32.back().data(), w.rows, w.cols, w.group);
  }
  if (w.format != ma::Format::f32) return w;
  s.owned_f32.emplace_back(n);
  std::memcpy(s.owned_f32.back().data(), w.data, n * sizeof(float));
  return ma::weights_f32(s.owned_f32.back().data(), w.rows, w.cols);
}

// An f32 matrix as an f16 copy (others as they are).
ma::WeightMatrix to_f16(const ma::WeightMatrix& w, RunState& s) {
  if (w.format != ma::Format::f32 || w.data == nullptr) return w;
  const std::size_t n = w.rows * w.cols;
  const auto* src = static_cast<const float*>(w.data);
  s.owned_f16.emplace_back(n);
  std::uint16_t* out = s.owned_f16.back().data();
  for (std::size_t i = 0; i < n; ++i) out[i] = ma::f16_from_float(src[i]);
  return ma::weights_f16(out, w.rows, w.cols);
}

bool fits_f16_matrix(const ma::WeightMatrix& w) {
  if (w.format != ma::Format::f32) return true;
  const auto* src = static_cast<const float*>(w.data);
  for (std::size_t i = 0, n = w.rows * w.cols; i < n; ++i)
    if (!(std::fabs(src[i]) < 65520.0f)) return false;
  return true;
}

// Splits an f32 w (see PreparedLayer) into head and tail; false where it is left whole.
bool split_columns(const ma::WeightMatrix& w, ma::WeightMatrix& head, ma::WeightMatrix& tail, RunState& s) {
  const std::size_t cols = w.cols, head_cols = cols - cols % 128, tail_cols = cols - head_cols;
  if (w.format != ma::Format::f32 || head_cols == 0 || tail_cols == 0) return false;
  const std::size_t padded = (tail_cols + 15) / 16 * 16;
  const auto* src = static_cast<const float*>(w.data);
  s.owned_f32.emplace_back(w.rows * head_cols);
  float* h = s.owned_f32.back().data();
  s.owned_f32.emplace_back(w.rows * padded, 0.0f);
  float* t = s.owned_f32.back().data();
  for (std::size_t r = 0; r < w.rows; ++r) {
    std::memcpy(h + r * head_cols, src + r * cols, head_cols * sizeof(float));
    std::memcpy(t + r * padded, src + r * cols + head_cols, tail_cols * sizeof(float));
  }
  head = ma::weights_f32(h, w.rows, head_cols);
  tail = ma::weights_f32(t, w.rows, padded);
  return true;
}

// Keys (and, where values_transposed, values) in blocks of 16 positions: kv head × cap / 16 blocks × hd × 16, so
// that dimension d of a block's positions is one vector at 16·d floats from the block's start (cap: a multiple of
// 16).
inline std::size_t cache_positions(std::size_t capacity) { return (capacity + 15) / 16 * 16; }
inline std::size_t blocked_index(std::size_t g, std::size_t d, std::size_t t, std::size_t hd, std::size_t cap) {
  return (g * cap + (t & ~std::size_t{15})) * hd + d * 16 + (t & 15);
}

// The attention of every query head at one position, over n cached positions: scores against the keys (kt:
// blocked), softmax, weighted sum of the values (vc: kv head × cap × hd, position-major; blocked on the fused path).
// The sums follow llama2.c's loops as GCC vectorizes them at -Ofast (run.c / runq.c, where the text is compared):
// each score sums q_d·k_d in eight lanes (d mod 8), folded (0+4, 2+6), (1+5, 3+7), then the last hd mod 8 terms in
// order; each output element of the values is one fused multiply-add chain over the positions in order.
struct AttentionArgs {
  const float* q;  // n_heads × hd
  const float* kt;
  const float* vc;
  float* att;  // n_heads × n
  float* out;  // n_heads × hd
  std::size_t heads, group, hd, n, cap;
};

void attention_scalar(const AttentionArgs& a) {
  const float root = std::sqrt(static_cast<float>(a.hd));
  for (std::size_t h = 0; h < a.heads; ++h) {
    const float* qh = a.q + h * a.hd;
    float* sr = a.att + h * a.n;
    for (std::size_t t = 0; t < a.n; ++t) {
      float acc = 0.0f;
      for (std::size_t d = 0; d < a.hd; ++d) acc += qh[d] * a.kt[blocked_index(h / a.group, d, t, a.hd, a.cap)];
      sr[t] = acc / root;
    }
  }
  check(ma::softmax_rows(ma::MatrixView<float>{a.att, a.heads, a.n, a.n}), "softmax");
  for (std::size_t h = 0; h < a.heads; ++h) {
    const float* vc = a.vc + (h / a.group) * a.cap * a.hd;
    float* o = a.out + h * a.hd;
    for (std::size_t d = 0; d < a.hd; ++d) o[d] = 0.0f;
    for (std::size_t t = 0; t < a.n; ++t) {
      const float pt = a.att[h * a.n + t];
      for (std::size_t d = 0; d < a.hd; ++d) o[d] += pt * vc[t * a.hd + d];
    }
  }
}

#if LLAMA_WIDE
__mmask16 tail_mask(std::size_t left) {
  return static_cast<__mmask16>((1u << (left < 16 ? left : 16)) - 1u);  // branch-free
}

// Scores of H heads (rows of q, hd apart) sharing one KV head for the 16 positions of the key block kb (mask m),
// each key vector loaded once for the H heads: lanes of d mod 8, folded as GCC folds a vector sum, then the last
// hd mod 8 terms.
template <std::size_t H>
LLAMA_AVX512 inline void score16(const float* q, const float* kb, std::size_t hd, __mmask16 m, __m512 (&score)[H]) {
  const std::size_t hd8 = hd - hd % 8;
  for (std::size_t h = 0; h < H; ++h) score[h] = _mm512_setzero_ps();
  if (hd8 > 0) {
    __m512 l[H][8];
    for (std::size_t j = 0; j < 8; ++j) {
      const __m512 k = _mm512_maskz_loadu_ps(m, kb + j * 16);
      for (std::size_t h = 0; h < H; ++h) l[h][j] = _mm512_mul_ps(_mm512_set1_ps(q[h * hd + j]), k);
    }
    for (std::size_t d = 8; d < hd8; d += 8)
      for (std::size_t j = 0; j < 8; ++j) {
        const __m512 k = _mm512_maskz_loadu_ps(m, kb + (d + j) * 16);
        for (std::size_t h = 0; h < H; ++h) l[h][j] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * hd + d + j]), k, l[h][j]);
      }
    for (std::size_t h = 0; h < H; ++h)
      score[h] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(l[h][0], l[h][4]), _mm512_add_ps(l[h][2], l[h][6])),
                               _mm512_add_ps(_mm512_add_ps(l[h][1], l[h][5]), _mm512_add_ps(l[h][3], l[h][7])));
  }
  for (std::size_t d = hd8; d < hd; ++d) {
    const __m512 k = _mm512_maskz_loadu_ps(m, kb + d * 16);
    for (std::size_t h = 0; h < H; ++h) score[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * hd + d]), k, score[h]);
  }
}

template <std::size_t H>
LLAMA_AVX512 void scores_avx512(const AttentionArgs& a, std::size_t h0) {
  const __m512 root = _mm512_set1_ps(std::sqrt(static_cast<float>(a.hd)));
  const float* kt = a.kt + (h0 / a.group) * a.hd * a.cap;
  for (std::size_t t = 0; t < a.n; t += 16) {
    const __mmask16 m = tail_mask(a.n - t);
    __m512 score[H];
    score16<H>(a.q + h0 * a.hd, kt + t * a.hd, a.hd, m, score);
    for (std::size_t h = 0; h < H; ++h)
      _mm512_mask_storeu_ps(a.att + (h0 + h) * a.n + t, m, _mm512_div_ps(score[h], root));
  }
}

// The weighted values of B heads from h0, 16 (or, with Half, 8 unmasked) dimensions from d0: B chains over the
// positions, interleaved. Half: 256-bit operations (Zen 4 splits 512-bit ones; half a mask wastes half of each).
template <std::size_t B, bool Half>
LLAMA_AVX512 inline void values_block(const AttentionArgs& a, std::size_t h0, std::size_t d0) {
  // One pointer per operand stream, stepped once per position (the shape's fields in locals: the loop must not
  // reload them), and each head's offset from it.
  const std::size_t n = a.n, hd = a.hd;
  std::size_t v_off[B], p_off[B];
  for (std::size_t i = 0; i < B; ++i) {
    v_off[i] = ((h0 + i) / a.group) * a.cap * hd + d0;
    p_off[i] = i * n;
  }
  const float* vt = a.vc;
  const float* pt = a.att + h0 * n;
  if constexpr (Half) {
    __m256 acc[B];
    for (std::size_t i = 0; i < B; ++i) acc[i] = _mm256_setzero_ps();
    for (std::size_t t = 0; t < n; ++t, vt += hd, ++pt)
      for (std::size_t i = 0; i < B; ++i)
        acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(pt + p_off[i]), _mm256_loadu_ps(vt + v_off[i]), acc[i]);
    for (std::size_t i = 0; i < B; ++i) _mm256_storeu_ps(a.out + (h0 + i) * hd + d0, acc[i]);
  } else {
    const __mmask16 m = tail_mask(hd - d0);
    __m512 acc[B];
    for (std::size_t i = 0; i < B; ++i) acc[i] = _mm512_setzero_ps();
    for (std::size_t t = 0; t < n; ++t, vt += hd, ++pt)
      for (std::size_t i = 0; i < B; ++i)
        acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(pt[p_off[i]]), _mm512_maskz_loadu_ps(m, vt + v_off[i]), acc[i]);
    for (std::size_t i = 0; i < B; ++i) _mm512_mask_storeu_ps(a.out + (h0 + i) * hd + d0, m, acc[i]);
  }
}

template <bool Half>
LLAMA_AVX512 void values_avx512(const AttentionArgs& a) {
  const std::size_t step = Half ? 8 : 16;
  for (std::size_t d0 = 0; d0 < a.hd; d0 += step) {
    std::size_t h = 0;
    for (; h + 4 <= a.heads; h += 4) values_block<4, Half>(a, h, d0);
    for (; h < a.heads; ++h) values_block<1, Half>(a, h, d0);
  }
}

// run.c's softmax of each of `rows` rows of n (contiguous): max subtracted, exp, divided by the sum; the exp of
// all rows in one exp_elements call (the library's vector exp: one call per layer instead of one per row). Up to
// eight rows go through each pass together: their max and sum chains are independent (one row alone waits on each
// add's latency), and each row's own order of operations is run.c's vectorized one.
LLAMA_AVX512 void softmax_avx512(float* x, std::size_t rows, std::size_t n) {
  constexpr std::size_t group = 8;
  for (std::size_t r0 = 0; r0 < rows; r0 += group) {
    const std::size_t g = rows - r0 < group ? rows - r0 : group;
    float* xg = x + r0 * n;
    __m512 acc[group];
    for (std::size_t r = 0; r < g; ++r) acc[r] = _mm512_set1_ps(-INFINITY);
    for (std::size_t t = 0; t < n; t += 16) {
      const __mmask16 k = tail_mask(n - t);
      for (std::size_t r = 0; r < g; ++r)
        acc[r] = _mm512_max_ps(acc[r], _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), k, xg + r * n + t));
    }
    for (std::size_t r = 0; r < g; ++r) acc[r] = _mm512_set1_ps(_mm512_reduce_max_ps(acc[r]));
    for (std::size_t t = 0; t < n; t += 16) {
      const __mmask16 k = tail_mask(n - t);
      for (std::size_t r = 0; r < g; ++r)
        _mm512_mask_storeu_ps(xg + r * n + t, k, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, xg + r * n + t), acc[r]));
    }
  }
  check(ma::exp_elements(x, x, rows * n), "exp");
  for (std::size_t r0 = 0; r0 < rows; r0 += group) {
    const std::size_t g = rows - r0 < group ? rows - r0 : group;
    float* xg = x + r0 * n;
    __m512 acc[group];
    for (std::size_t r = 0; r < g; ++r) acc[r] = _mm512_setzero_ps();
    for (std::size_t t = 0; t < n; t += 16) {
      const __mmask16 k = tail_mask(n - t);
      for (std::size_t r = 0; r < g; ++r) acc[r] = _mm512_add_ps(acc[r], _mm512_maskz_loadu_ps(k, xg + r * n + t));
    }
    for (std::size_t r = 0; r < g; ++r) acc[r] = _mm512_set1_ps(_mm512_reduce_add_ps(acc[r]));
    for (std::size_t t = 0; t < n; t += 16) {
      const __mmask16 k = tail_mask(n - t);
      for (std::size_t r = 0; r < g; ++r)
        _mm512_mask_storeu_ps(xg + r * n + t, k, _mm512_div_ps(_mm512_maskz_loadu_ps(k, xg + r * n + t), acc[r]));
    }
  }
}

// The lane sums of 16 vectors, lane l = Σ lanes of v[l]: pairs of vectors added lane-block by lane-block, 45
// operations for the 16 sums.
LLAMA_AVX512 inline __m512 lane_sums16(const __m512* v) {
  __m512 u[8], t[4], h[2];
  for (int p = 0; p < 8; ++p)
    u[p] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * p], v[2 * p + 1]), _mm512_unpackhi_ps(v[2 * p], v[2 * p + 1]));
  for (int q = 0; q < 4; ++q)
    t[q] =
        _mm512_add_ps(_mm512_shuffle_ps(u[2 * q], u[2 * q + 1], 0x44), _mm512_shuffle_ps(u[2 * q], u[2 * q + 1], 0xee));
  for (int r = 0; r < 2; ++r)
    h[r] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], 0x88),
                         _mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], 0xdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(h[0], h[1], 0x88), _mm512_shuffle_f32x4(h[0], h[1], 0xdd));
}

// e^x for x <= 0 (and -inf), lane by lane: 2^n · e^r with n = round(x·log2 e), r = x − n·ln 2 in two parts, e^r
// by its Taylor polynomial to r^7 (|r| <= ln2 / 2: truncation below 6e-9 relative), 2^n by vscalefps (gradual
// underflow to 0).
LLAMA_AVX512 inline __m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // e^-104 is 0 in float; -inf stays finite, NaN stays NaN
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);  // ln 2's first 16 bits: n·hi exact
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// Heads sharing a K/V head one or two at a time (G), where hd is a whole number of DC = 16 / G dimensions: the
// values in blocks of 16 positions like the keys, so that the weighted sum runs over 16 positions a vector:
// per block of 16 positions, G·DC accumulators (one vector of sums after a lane tree), instead of one broadcast
// and one multiply-add per position, head and 8 dimensions. Three passes per K/V head: scores with their running
// max, e^(s − max) with its sum, the values (normalized once at the end: Σ e·v / Σ e). The scores are run.c's
// (score16); the exponentials, the order of the values' sums and the late division differ from run.c in the last
// bits (its text: up to a near-tie).
bool fused_shape(std::size_t group, std::size_t hd) { return (group == 1 || group == 2) && hd % (16 / group) == 0; }

template <std::size_t G>
LLAMA_AVX512 void attention_fused_avx512(const AttentionArgs& a) {
  constexpr std::size_t DC = 16 / G;
  const __m512 scale = _mm512_set1_ps(1.0f / std::sqrt(static_cast<float>(a.hd)));
  const std::size_t n = a.n, hd = a.hd, cap = a.cap;
  for (std::size_t h0 = 0; h0 < a.heads; h0 += G) {
    const std::size_t g = h0 / G;
    const float* kt = a.kt + g * hd * cap;
    const float* vt = a.vc + g * hd * cap;
    float* att = a.att + h0 * cap;  // rows cap apart: whole vectors, stored and loaded unmasked
    __m512 mx[G];
    for (std::size_t i = 0; i < G; ++i) mx[i] = _mm512_set1_ps(-INFINITY);
    for (std::size_t t = 0; t < n; t += 16) {
      const __mmask16 m = tail_mask(n - t);
      __m512 score[G];
      score16<G>(a.q + h0 * hd, kt + t * hd, hd, m, score);
      for (std::size_t i = 0; i < G; ++i) {
        const __m512 sc = _mm512_mul_ps(score[i], scale);
        mx[i] = _mm512_mask_max_ps(mx[i], m, mx[i], sc);
        _mm512_store_ps(att + i * cap + t, sc);
      }
    }
    __m512 sum[G];
    for (std::size_t i = 0; i < G; ++i) {
      mx[i] = _mm512_set1_ps(_mm512_reduce_max_ps(mx[i]));
      sum[i] = _mm512_setzero_ps();
    }
    for (std::size_t t = 0; t < n; t += 16) {
      const __mmask16 m = tail_mask(n - t);
      for (std::size_t i = 0; i < G; ++i) {
        const __m512 e =
            _mm512_maskz_mov_ps(m, exp_nonpositive(_mm512_sub_ps(_mm512_load_ps(att + i * cap + t), mx[i])));
        sum[i] = _mm512_add_ps(sum[i], e);
        _mm512_store_ps(att + i * cap + t, e);
      }
    }
    alignas(64) float per_lane[16];  // lane i·DC + d: head i's sum
    for (std::size_t i = 0; i < G; ++i) {
      const float total = _mm512_reduce_add_ps(sum[i]);
      for (std::size_t d = 0; d < DC; ++d) per_lane[i * DC + d] = total;
    }
    const __m512 totals = _mm512_load_ps(per_lane);
    for (std::size_t d0 = 0; d0 < hd; d0 += DC) {
      __m512 acc[16];
      for (std::size_t l = 0; l < 16; ++l) acc[l] = _mm512_setzero_ps();
      for (std::size_t t = 0; t < n; t += 16) {
        const __mmask16 m = tail_mask(n - t);
        const float* vb = vt + t * hd + d0 * 16;
        __m512 pv[G];
        for (std::size_t i = 0; i < G; ++i) pv[i] = _mm512_load_ps(att + i * cap + t);  // 0 beyond n
        for (std::size_t d = 0; d < DC; ++d) {
          const __m512 v = _mm512_maskz_loadu_ps(m, vb + d * 16);
          for (std::size_t i = 0; i < G; ++i) acc[i * DC + d] = _mm512_fmadd_ps(pv[i], v, acc[i * DC + d]);
        }
      }
      alignas(64) float out[16];
      _mm512_store_ps(out, _mm512_div_ps(lane_sums16(acc), totals));
      for (std::size_t i = 0; i < G; ++i) std::memcpy(a.out + (h0 + i) * hd + d0, out + i * DC, DC * sizeof(float));
    }
  }
}

LLAMA_AVX512 void attention_avx512(const AttentionArgs& a) {
  // Heads of one KV head two at a time (the group is a whole number of pairs), else one at a time.
  if (a.group % 2 == 0) {
    for (std::size_t h = 0; h < a.heads; h += 2) scores_avx512<2>(a, h);
  } else {
    for (std::size_t h = 0; h < a.heads; ++h) scores_avx512<1>(a, h);
  }
  softmax_avx512(a.att, a.heads, a.n);
  if (a.hd % 8 == 0)
    values_avx512<true>(a);
  else
    values_avx512<false>(a);
}
#endif

// One decoder layer at position pos over s.x (dim floats, updated in place), with its K/V cache: x +=
// wo·attention(rope(wq·n), rope(wk·n), wv·n), n = rms_norm(x); then x += w2·(silu(w1·n) ⊙ w3·n), n = rms_norm(x).
void decoder_layer(const Config& p, const PreparedLayer& w, std::size_t pos, float* key_cache, float* value_cache,
                   RunState& s) {
  const std::size_t dim = static_cast<std::size_t>(p.dim), hd = static_cast<std::size_t>(p.head_dim()),
                    kv_heads = static_cast<std::size_t>(p.n_kv_heads), hidden = static_cast<std::size_t>(p.hidden_dim),
                    group = static_cast<std::size_t>(p.n_heads / p.n_kv_heads), cap = cache_positions(s.capacity),
                    n = pos + 1;
  float* x = s.x.data();
  float* q = s.qkv.data();
  float* k = q + dim;
  float* v = k + hd * kv_heads;

  rms_norm(s.xb.data(), x, w.attention_norm, dim);
  if (w.qkv_packed.data != nullptr)
    packed_gemv(w.qkv_packed, s.xb.data(), q);
  else
    for (std::size_t i = 0, row = 0; i < w.qkv_parts; row += w.qkv[i].rows, ++i)
      project(s, w.qkv[i], s.xb.data(), q + row);
  rotate(q, dim, hd, s);
  rotate(k, hd * kv_heads, hd, s);

  for (std::size_t g = 0; g < kv_heads; ++g) {
    for (std::size_t d = 0; d < hd; ++d) key_cache[blocked_index(g, d, pos, hd, cap)] = k[g * hd + d];
    if (s.values_transposed)
      for (std::size_t d = 0; d < hd; ++d) value_cache[blocked_index(g, d, pos, hd, cap)] = v[g * hd + d];
    else
      std::memcpy(value_cache + (g * cap + pos) * hd, v + g * hd, hd * sizeof(float));
  }
  const AttentionArgs args{q, key_cache, value_cache, s.att.data(), s.xb.data(), kv_heads * group, group, hd, n, cap};
#if LLAMA_WIDE
  if (s.values_transposed && group == 2)
    attention_fused_avx512<2>(args);
  else if (s.values_transposed)
    attention_fused_avx512<1>(args);
  else if (s.wide)
    attention_avx512(args);
  else
#endif
    attention_scalar(args);
  project(s, w.wo, w.wo_packed, s.xb.data(), s.xb2.data());
  for (std::size_t i = 0; i < dim; ++i) x[i] += s.xb2[i];

  rms_norm(s.xb.data(), x, w.ffn_norm, dim);
  float* h1 = s.hb.data();
  const float* h3 = h1 + hidden;
  if (w.w13_packed.data != nullptr)
    packed_gemv(w.w13_packed, s.xb.data(), h1);
  else
    for (std::size_t i = 0, row = 0; i < w.w13_parts; row += w.w13[i].rows, ++i)
      project(s, w.w13[i], s.xb.data(), h1 + row);
  // silu(g) = g / (1 + e^-g) as run.c writes it, with the library's vectorized exp (within 1.5 ULP of expf's).
  float* e = s.hb.data() + 2 * hidden;
  for (std::size_t i = 0; i < hidden; ++i) e[i] = -h1[i];
  check(ma::exp_elements(e, e, hidden), "exp");
  for (std::size_t i = 0; i < hidden; ++i) h1[i] = h1[i] * (1.0f / (1.0f + e[i])) * h3[i];
  project(s, w.w2, w.w2_packed, h1, s.xb.data());
  if (w.w2_tail.data != nullptr) {
    std::memcpy(s.tail.data(), h1 + w.w2.cols, (hidden - w.w2.cols) * sizeof(float));
    project(s, w.w2_tail, s.tail.data(), s.xb2.data());
    for (std::size_t i = 0; i < dim; ++i) s.xb[i] += s.xb2[i];
  }
  for (std::size_t i = 0; i < dim; ++i) x[i] += s.xb[i];
}

// Buffers from this size on get pages of their own; AddressSanitizer builds keep every buffer on its heap, which
// checks the bytes around each.
#if defined(__SANITIZE_ADDRESS__)
#define LLAMA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLAMA_ASAN 1
#endif
#endif
#ifdef LLAMA_ASAN
constexpr std::size_t mapped_bytes = SIZE_MAX;
#else
constexpr std::size_t mapped_bytes = std::size_t{64} << 10;
#endif
constexpr std::align_val_t cache_line{64};

}  // namespace

void* allocate_aligned(std::size_t bytes) {
  if (bytes < mapped_bytes) return ::operator new(bytes, cache_line);
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_POPULATE
  flags |= MAP_POPULATE;
#endif
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void deallocate_aligned(void* p, std::size_t bytes) noexcept {
  if (bytes < mapped_bytes)
    ::operator delete(p, cache_line);
  else
    munmap(p, bytes);
}

void rms_norm(float* o, const float* x, const float* weight, std::size_t n) noexcept {
  // The sum of squares as run.c's loop vectorized at -Ofast: eight lanes (j mod 8), folded (0+4, 2+6), (1+5,
  // 3+7), then the last n mod 8 terms in order; independent lanes instead of one chain of n dependent adds.
  const std::size_t n8 = n - n % 8;
  float ss = 0.0f;
  if (n8 > 0) {
    float l[8] = {};
    for (std::size_t j = 0; j < n8; j += 8)
      for (std::size_t i = 0; i < 8; ++i) l[i] += x[j + i] * x[j + i];
    ss = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
  }
  for (std::size_t j = n8; j < n; ++j) ss += x[j] * x[j];
  ss /= static_cast<float>(n);
  ss += 1e-5f;
  ss = 1.0f / std::sqrt(ss);
  for (std::size_t j = 0; j < n; ++j) o[j] = weight[j] * (ss * x[j]);
}

// Bytes of a weight matrix as stored (q8: values and scales).
std::size_t stored_bytes(const ma::WeightMatrix& w) {
  const std::size_t n = w.rows * w.cols;
  return w.format == ma::Format::f32 ? n * sizeof(float) : n + n / w.group * sizeof(float);
}

bool fits_f16(const Model& m) noexcept {
  for (const LayerWeights& lw : m.layers)
    for (const ma::WeightMatrix* w : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w1, &lw.w2, &lw.w3})
      if (!fits_f16_matrix(*w)) return false;
  return fits_f16_matrix(m.classifier);
}

bool init_state(const Model& m, std::size_t capacity, RunState& s, std::size_t fuse_limit_bytes, Storage storage) {
  const Config& p = m.config;
  const bool f16 = storage == Storage::f16 && p.version == 0;  // version 2's matrices are all q8: kept
  if (f16 && !fits_f16(m)) return false;
  const std::size_t dim = static_cast<std::size_t>(p.dim), hidden = static_cast<std::size_t>(p.hidden_dim),
                    kv = static_cast<std::size_t>(p.kv_dim()), layers = static_cast<std::size_t>(p.n_layers);
  if (capacity == 0 || capacity > static_cast<std::size_t>(p.seq_len)) return false;
  std::size_t cache = 0;
  if (__builtin_mul_overflow(layers, cache_positions(capacity), &cache) || __builtin_mul_overflow(cache, kv, &cache))
    return false;
  try {
    s = RunState{};
    s.capacity = capacity;
    s.x.assign(dim, 0.0f);
    s.xb.assign(dim, 0.0f);
    s.xb2.assign(dim, 0.0f);
    s.hb.assign(3 * hidden, 0.0f);  // w1·n, w3·n, e^-(w1·n)
    s.qkv.assign(dim + 2 * kv, 0.0f);
    s.att.assign(static_cast<std::size_t>(p.n_heads) * cache_positions(capacity), 0.0f);
    s.logits.assign(static_cast<std::size_t>(p.vocab_size), 0.0f);
    s.key_cache.assign(cache, 0.0f);
    s.value_cache.assign(cache, 0.0f);
    s.rope_cos.assign(static_cast<std::size_t>(p.head_dim() / 2), 0.0f);
    s.rope_sin.assign(static_cast<std::size_t>(p.head_dim() / 2), 0.0f);
    // Every owned matrix is a vector of its own, reserved so that the pointers into them stay valid.
    s.owned_f32.reserve(10 * layers + 2);
    s.owned_q8.reserve(3 * layers + 1);
    s.owned_f16.reserve(7 * layers + 1);
    auto stored = [&](const ma::WeightMatrix& w) { return f16 ? to_f16(w, s) : w; };
    std::size_t weight_bytes = 0;
    for (const LayerWeights& lw : m.layers)
      for (const ma::WeightMatrix* w : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w1, &lw.w2, &lw.w3})
        weight_bytes += stored_bytes(*w);
    const bool fuse = weight_bytes <= fuse_limit_bytes;
    const bool pack = fuse && !f16 && p.version == 0 && avx512_loops();  // version 0: every matrix f32
    auto packed = [&](const ma::WeightMatrix* parts, std::size_t count) {
      std::size_t rows = 0;
      for (std::size_t i = 0; i < count; ++i) rows += parts[i].rows;
      s.owned_f32.emplace_back(packed_floats(rows, parts[0].cols));
      pack_rows(parts, count, s.owned_f32.back().data());
      return PackedMatrix{s.owned_f32.back().data(), rows, parts[0].cols};
    };
    // A matrix still in the file: converted (f16), or in a small model copied to aligned storage.
    auto placed = [&](const ma::WeightMatrix& w, const ma::WeightMatrix& in_file) {
      if (w.data != in_file.data) return stored(w);
      return f16 ? stored(w) : fuse ? aligned_copy(w, s) : w;
    };
    for (const LayerWeights& lw : m.layers) {
      const ma::WeightMatrix qkv[3] = {lw.wq, lw.wk, lw.wv}, w13[2] = {lw.w1, lw.w3};
      PreparedLayer pl{};
      pl.attention_norm = lw.attention_norm;
      pl.ffn_norm = lw.ffn_norm;
      if (pack) {
        pl.qkv_packed = packed(qkv, 3);
        pl.w13_packed = packed(w13, 2);
        pl.wo_packed = packed(&lw.wo, 1);
        pl.w2_packed = packed(&lw.w2, 1);
        pl.qkv_parts = pl.w13_parts = 1;
        s.layers.push_back(pl);
        continue;
      }
      if (fuse) {
        pl.qkv[0] = stored(concat(qkv, 3, s));
        pl.w13[0] = stored(concat(w13, 2, s));
        pl.qkv_parts = pl.w13_parts = 1;
      } else {
        for (std::size_t i = 0; i < 3; ++i) pl.qkv[i] = stored(concat(qkv + i, 1, s));
        for (std::size_t i = 0; i < 2; ++i) pl.w13[i] = stored(concat(w13 + i, 1, s));
        pl.qkv_parts = 3;
        pl.w13_parts = 2;
      }
      pl.wo = placed(concat(&lw.wo, 1, s), lw.wo);
      pl.w2 = stored(concat(&lw.w2, 1, s));  // f16: not split (split_columns takes f32 only)
      ma::WeightMatrix head{}, tail{};
      if (split_columns(pl.w2, head, tail, s)) {
        pl.w2 = head;
        pl.w2_tail = tail;
        if (s.tail.empty()) s.tail.assign(tail.cols, 0.0f);
      }
      s.layers.push_back(pl);
    }
    if (pack)
      s.classifier_packed = packed(&m.classifier, 1);
    else
      s.classifier = placed(m.classifier, m.classifier);
  } catch (const std::bad_alloc&) {
    return false;
  }
#if LLAMA_WIDE
  s.wide = avx512_loops();
  s.values_transposed =
      s.wide && fused_shape(static_cast<std::size_t>(p.n_heads / p.n_kv_heads), static_cast<std::size_t>(p.head_dim()));
#endif
  return true;
}

const float* forward(const Model& m, RunState& s, int token, std::size_t pos) {
  const Config& p = m.config;
  const std::size_t per_layer = cache_positions(s.capacity) * static_cast<std::size_t>(p.kv_dim());
  m.embedding_row(token, s.x.data());
  set_rope(p, pos, s);
  for (std::size_t l = 0; l < s.layers.size(); ++l)
    decoder_layer(p, s.layers[l], pos, s.key_cache.data() + l * per_layer, s.value_cache.data() + l * per_layer, s);
  rms_norm(s.x.data(), s.x.data(), m.final_norm, static_cast<std::size_t>(p.dim));
  project(s, s.classifier, s.classifier_packed, s.x.data(), s.logits.data());
  return s.logits.data();
}

}  // namespace llama
