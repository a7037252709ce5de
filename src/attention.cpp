#include "microattn/attention.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "attention_run.hpp"
#include "check.hpp"
#include "kernels/scalar_math.hpp"

namespace microattn {
namespace detail {
namespace {

constexpr float log2e = 1.44269504088896341f;

inline std::size_t min_size(std::size_t a, std::size_t b) noexcept { return a < b ? a : b; }

// No NaN or ±inf among x[0..n): an all-ones exponent field marks both. Integer ORs, no dependency on a
// floating-point chain, so the compiler vectorizes it (the check runs over all of v on every call).
inline bool row_finite(const float* x, std::size_t n) noexcept {
  std::uint32_t nonfinite = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    nonfinite |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return nonfinite == 0;
}

// Whether some element of m has |x| >= the float whose bits are `threshold` (positive, normal), or is NaN or
// ±inf (their magnitude bits are larger still). (threshold − 1) − |x|bits, both in [0, 2^31), is negative exactly
// when |x| >= threshold: the differences are ORed and the sign tested once per row — no dependency chain
// through a maximum, so the compiler vectorizes it like row_finite, and four elements a step (GCC does not
// unroll at -Os) make it about 5 instructions an element on Cortex-M: the pass over v that every call makes.
bool any_magnitude_at_least(MatrixView<const float> m, std::uint32_t threshold) noexcept {
  std::size_t rows = m.rows, cols = m.cols;
  if (m.stride == cols) {  // contiguous rows: one run (shape_ok: rows·cols fits)
    cols *= rows;
    rows = 1;
  }
  const std::int32_t below = static_cast<std::int32_t>(threshold - 1);
  auto magnitude = [](const float* x) {
    std::uint32_t bits;
    std::memcpy(&bits, x, sizeof bits);
    return static_cast<std::int32_t>(bits & 0x7fffffffu);
  };
  for (std::size_t r = 0; r < rows; ++r) {
    const float* x = m.data + r * m.stride;
    const float* const end = x + cols;
    std::int32_t hit = 0;
    for (std::size_t n = cols / 4; n != 0; --n, x += 4)
      hit |=
          (below - magnitude(x)) | (below - magnitude(x + 1)) | (below - magnitude(x + 2)) | (below - magnitude(x + 3));
    for (; x != end; ++x) hit |= below - magnitude(x);
    if (hit < 0) return true;
  }
  return false;
}

bool all_finite(MatrixView<const float> m) noexcept { return !any_magnitude_at_least(m, 0x7f800000u); }

// P·V of one key block when some rows of V hold NaN or ±inf. A hidden key has probability exactly 0, and
// 0·NaN would leak its NaN into queries that never see it: such rows are applied lane by lane, skipping the
// zeros, and the finite runs between them go through the kernel as usual.
void pv_with_nonfinite_rows(const Kernels& kern, float* p, std::size_t bk, const float* v, std::size_t ldv,
                            std::size_t d_v, float* alpha, float* ot, std::size_t nq) noexcept {
  constexpr std::size_t br = attention_block_q;
  bool alpha_pending = true;  // ot still needs its rescale by alpha (the kernel applies it on its first call)
  for (std::size_t j = 0; j < bk;) {
    if (row_finite(v + j * ldv, d_v)) {
      std::size_t run = 1;
      while (j + run < bk && row_finite(v + (j + run) * ldv, d_v)) ++run;
      kern.attn_pv(p + j * br, run, v + j * ldv, ldv, d_v, alpha, ot, nq);
      for (std::size_t i = 0; i < nq; ++i) alpha[i] = 1.0f;
      alpha_pending = false;
      j += run;
      continue;
    }
    if (alpha_pending) {
      for (std::size_t c = 0; c < d_v; ++c)
        for (std::size_t i = 0; i < nq; ++i) ot[c * br + i] *= alpha[i];
      for (std::size_t i = 0; i < nq; ++i) alpha[i] = 1.0f;
      alpha_pending = false;
    }
    const float* vj = v + j * ldv;
    for (std::size_t i = 0; i < nq; ++i) {
      const float pij = p[j * br + i];
      if (pij != 0.0f)  // a NaN probability (the query saw a NaN score) still contributes, as it must
        for (std::size_t c = 0; c < d_v; ++c) ot[c * br + i] += pij * vj[c];
    }
    ++j;
  }
}

// ---- the exact path ------------------------------------------------------------------------------------
// The fused loop runs in float with the scores pre-multiplied by scale·log2(e). For finite inputs that can
// overflow where the true result is finite (q·scale·log2 e, the score in log2 units, mask·log2 e, the
// un-normalised Σ p·v) or lose its precision (a subnormal scale·log2 e). Such rows are recomputed here, one
// at a time, in float again but with power-of-two rescaling so that no intermediate overflows or underflows.
// The same routine decides every row that involves a non-finite value, so the rules of README "Non-finite
// values" have one implementation. Only rows the fused loop flags come here: finite inputs never pay.

constexpr float float_max = 3.40282347e38f;

inline bool is_finite(float x) noexcept { return (float_bits(x) & 0x7f800000u) != 0x7f800000u; }

// floor(log2 |x|) for a normal x, −126 for subnormals and zero (finite x).
inline int exponent_of(float x) noexcept {
  const int e = static_cast<int>((float_bits(x) >> 23) & 0xffu);
  return e == 0 ? -126 : e - 127;
}

// 2^e for e in [−149, 127], exactly.
inline float pow2(int e) noexcept {
  return e >= -126 ? bits_float(static_cast<std::uint32_t>(e + 127) << 23)
                   : bits_float(std::uint32_t{1} << static_cast<unsigned>(e + 149));
}

// x·2^e for a finite x, saturated at ±FLT_MAX (the result is finite whenever x is); steps of 2^±126.
inline float times_pow2(float x, int e) noexcept {
  e = e > 400 ? 400 : (e < -400 ? -400 : e);
  for (; e > 126; e -= 126) x *= pow2(126);
  for (; e < -126; e += 126) x *= pow2(-126);
  x *= pow2(e);
  return is_finite(x) ? x : std::copysign(float_max, x);
}

// a + b for finite a and b, saturated at ±FLT_MAX.
inline float saturating_add(float a, float b) noexcept {
  const float t = a + b;
  return is_finite(t) ? t : std::copysign(float_max, t);
}

inline int max_exponent(const float* x, std::size_t n) noexcept {
  int e = -126;
  for (std::size_t i = 0; i < n; ++i) {
    const int ei = exponent_of(x[i]);
    e = ei > e ? ei : e;
  }
  return e;
}

// scale·(q·k) in natural units. Finite inputs: q and k are brought to [1, 2) by powers of two (so every product
// is < 4 and the sum cannot overflow), scale is split as mantissa·2^exponent, and the exponents are applied
// last, once: a scale of 2^−149 or a product of 1e44 is no problem. The result saturates at ±FLT_MAX.
// Anything non-finite: plain IEEE arithmetic (NaN stays NaN, ±inf stays infinite).
struct ExactScale {
  float value;     // the scale itself
  float mantissa;  // value = mantissa·2^exponent, |mantissa| in [1, 2); valid when finite
  int exponent;
  bool finite;
};

inline ExactScale split_scale(float scale) noexcept {
  ExactScale s{scale, 1.0f, 0, is_finite(scale) && scale != 0.0f};
  if (s.finite) {
    const bool subnormal = std::fabs(scale) < pow2(-126);
    const float a = std::fabs(scale) * (subnormal ? pow2(23) : 1.0f);  // exact, and normal
    const int e = exponent_of(a);
    s.exponent = subnormal ? e - 23 : e;
    s.mantissa = std::copysign(a * pow2(-e), scale);
  }
  return s;
}

float exact_score(const float* q, bool q_finite, int q_exp, const float* kj, std::size_t d_k,
                  const ExactScale& sc) noexcept {
  if (!q_finite || !sc.finite || !row_finite(kj, d_k)) {
    float dot = 0.0f;
    for (std::size_t p = 0; p < d_k; ++p) dot += q[p] * kj[p];
    return dot * sc.value;
  }
  const int k_exp = max_exponent(kj, d_k);
  const float fq = pow2(-q_exp), fk = pow2(-k_exp);
  float dot = 0.0f;
  for (std::size_t p = 0; p < d_k; ++p) dot = fmadd(q[p] * fq, kj[p] * fk, dot);
  return times_pow2(dot * sc.mantissa, q_exp + k_exp + sc.exponent);
}

// Row i of attention, exactly as README "Numerical contract" and "Non-finite values" define it:
//  - key j is hidden when the causal rule or the window hides it (j outside `keys`) or its mask entry is −inf;
//    hidden keys are never read;
//  - t_j = score_j + mask_ij (saturated at ±FLT_MAX when both are finite); any NaN or +inf t_j: the row is NaN;
//  - p_j = e^(t_j − max t), out = Σ p_j·v_j / Σ p_j; no key with t_j > −inf: zeros;
//  - then every column c in which a visible key has a NaN or ±inf v_jc is NaN, whatever p_j (even 0).
// scratch: 2·d_v floats.
inline void attention_row_exact(const float* q, std::size_t d_k, const MatrixView<const float>& k,
                                const MatrixView<const float>& v, const float* mask_row, KeyRange keys,
                                const ExactScale& sc, float* out, float* scratch) noexcept {
  const std::size_t d_v = v.cols;
  float* acc = scratch;            // Σ p_j·v_jc·2^−e_c
  float* col_exp = scratch + d_v;  // e_c, or NaN for a column that must come out NaN
  const bool q_finite = row_finite(q, d_k);
  const int q_exp = q_finite ? max_exponent(q, d_k) : 0;
  auto visible = [&](std::size_t j) { return mask_row == nullptr || mask_row[j] != -INFINITY; };
  auto score = [&](std::size_t j) {
    const float s = exact_score(q, q_finite, q_exp, k.data + j * k.stride, d_k, sc);
    if (mask_row == nullptr) return s;
    return is_finite(s) && is_finite(mask_row[j]) ? saturating_add(s, mask_row[j]) : s + mask_row[j];
  };

  // Pass 1: the max score, and per column of v the largest exponent (accumulating v·2^−e_c cannot overflow).
  for (std::size_t c = 0; c < d_v; ++c) col_exp[c] = -126.0f;
  float m = -INFINITY;
  bool row_nan = false;
  for (std::size_t j = keys.lo; j < keys.hi; ++j) {
    if (!visible(j)) continue;
    const float t = score(j);
    row_nan = row_nan || !(t < INFINITY);  // NaN or +inf
    m = t > m ? t : m;
    const float* vj = v.data + j * v.stride;
    for (std::size_t c = 0; c < d_v; ++c) {
      const float e = is_finite(vj[c]) ? static_cast<float>(exponent_of(vj[c])) : NAN;
      col_exp[c] = e > col_exp[c] || e != e ? e : col_exp[c];  // NaN sticks
    }
  }
  if (row_nan) {
    for (std::size_t c = 0; c < d_v; ++c) out[c] = NAN;
    return;
  }
  // Pass 2: probabilities and the weighted sum. Columns below 2^60 are not rescaled (nothing can overflow).
  for (std::size_t c = 0; c < d_v; ++c) {
    acc[c] = 0.0f;
    if (col_exp[c] < 60.0f) col_exp[c] = 0.0f;
  }
  float l = 0.0f;
  if (m > -INFINITY)
    for (std::size_t j = keys.lo; j < keys.hi; ++j) {
      if (!visible(j)) continue;
      const float t = score(j);
      if (t == -INFINITY) continue;
      const float p = exp2_nonpositive_call((t - m) * log2e);  // t − m <= 0; below −FLT_MAX it is −inf: p = 0
      l += p;
      const float* vj = v.data + j * v.stride;
      for (std::size_t c = 0; c < d_v; ++c)
        if (col_exp[c] == col_exp[c]) acc[c] = fmadd(p, vj[c] * pow2(-static_cast<int>(col_exp[c])), acc[c]);
    }
  for (std::size_t c = 0; c < d_v; ++c) {
    if (col_exp[c] != col_exp[c]) {
      out[c] = NAN;
    } else {
      out[c] = l == 0.0f ? 0.0f : times_pow2(acc[c] / l, static_cast<int>(col_exp[c]));
    }
  }
}

// Lanes [a, a + nl) of the tile at query i0 that see (causal rule, window, mask) a key of [j0, j0 + bk) whose value row
// holds NaN or ±inf get a NaN in their accumulator (no rescaling removes it), which sends them to the exact path.
__attribute__((noinline, cold)) void mark_rows_seeing_nonfinite_v(const MatrixView<const float>& v, std::size_t j0,
                                                                  std::size_t bk, std::size_t i0, std::size_t a,
                                                                  std::size_t nl, const AttentionOptions& options,
                                                                  const KeyBand& band, float* ot) noexcept {
  for (std::size_t j = 0; j < bk; ++j) {
    if (row_finite(v.data + (j0 + j) * v.stride, v.cols)) continue;
    const MatrixView<const float>& mask = options.mask;
    for (std::size_t i = a; i < a + nl; ++i) {
      const KeyRange keys = visible_keys(i0 + i, v.rows, band);
      const bool band_hidden = j0 + j < keys.lo || j0 + j >= keys.hi;
      const bool mask_hidden = mask.data != nullptr && mask.data[(i0 + i) * mask.stride + j0 + j] == -INFINITY;
      if (!band_hidden && !mask_hidden) ot[i] = NAN;
    }
  }
}

// Scores of lanes [a, a + nl) (queries first_row + a …) for keys [j0, j0 + bk) that the band hides, set to −inf.
// Ranges only grow with the lane, so the lanes that do not see key j are a prefix (their range ended) and a
// suffix (theirs has not begun), both moving up with j: two pointers, and only hidden scores are touched.
// Out of line: its frame sits beside the kernels', not under them.
__attribute__((noinline)) void hide_outside_band(float* s, std::size_t nl, std::size_t first_query, std::size_t j0,
                                                 std::size_t bk, const KeyBand& band, std::size_t n_kv) noexcept {
  constexpr std::size_t br = attention_block_q;
  if (key_bound(first_query, band.hi, n_kv) >= j0 + bk && key_bound(first_query + nl - 1, band.lo, n_kv) <= j0)
    return;  // every lane sees the whole block
  const std::size_t a = 0, first_row = first_query;
  const std::size_t end_lane = a + nl;
  std::size_t ended = a, begun = a;  // lanes [a, ended) end at or before j; lanes [begun, end_lane) start after j
  std::size_t ended_hi = key_bound(first_row + a, band.hi, n_kv), begun_lo = key_bound(first_row + a, band.lo, n_kv);
  for (std::size_t j = j0; j < j0 + bk; ++j) {
    while (ended < end_lane && ended_hi <= j)
      if (++ended < end_lane) ended_hi = key_bound(first_row + ended, band.hi, n_kv);
    while (begun < end_lane && begun_lo <= j)
      if (++begun < end_lane) begun_lo = key_bound(first_row + begun, band.lo, n_kv);
    float* sj = s + (j - j0) * br;
    for (std::size_t i = a; i < ended; ++i) sj[i] = -INFINITY;
    for (std::size_t i = begun; i < end_lane; ++i) sj[i] = -INFINITY;
  }
}

}  // namespace

KeyBand visible_band(const AttentionOptions& options) noexcept {
  // In an integer twice as wide as ptrdiff_t nothing overflows; then saturate.
#if PTRDIFF_MAX > 0x7fffffffL
  __extension__ typedef __int128 wide;
#else
  typedef long long wide;
#endif
  const wide off = options.causal_offset, w = static_cast<wide>(options.window), sat = visibility_saturation;
  const wide lo = w == 0 ? -sat : off - w + 1;
  const wide hi = options.causal ? off + 1 : (w == 0 ? sat : off + w);
  return {static_cast<std::ptrdiff_t>(lo < -sat ? -sat : (lo > sat ? sat : lo)),
          static_cast<std::ptrdiff_t>(hi < -sat ? -sat : (hi > sat ? sat : hi))};
}

namespace {

// The few-query path's state, held once (a lambda capturing it by reference would copy every address into its
// closure, on the stack path of every layer call).
struct FewQueryRun {
  const Kernels& kern;
  const QueryHeads& qh;
  const MatrixView<const float>& k;
  const MatrixView<const float>& v;
  const AttentionOptions& options;
  float* qs;  // rows_max × d_k: queries pre-multiplied by scale·log2(e)
  float* o;   // rows_max × d_v: un-normalised outputs
  float* s;   // rows_max × bc: scores of a key block, then probabilities
  float* m;   // rows_max each: running max, running sum, rescale factor
  float q_factor;

  static constexpr std::size_t bc = attention_block_kv;
  float* l() const noexcept { return m + attention_block_q; }
  float* alpha() const noexcept { return m + 2 * attention_block_q; }
  // Row r: head r / n_q, query r % n_q.
  const float* q_row(std::size_t r) const noexcept {
    return qh.q.data + (r / qh.q.rows) * qh.q_head_offset + (r % qh.q.rows) * qh.q.stride;
  }
  float* out_row(std::size_t r) const noexcept {
    return qh.out.data + (r / qh.q.rows) * qh.out_head_offset + (r % qh.q.rows) * qh.out.stride;
  }

  // Rows [r0, r0 + nr) over the keys they see: scores, mask, hiding outside each row's [lo, hi), online softmax,
  // P·V. Rows this may get wrong (finite extremes, non-finite values) are flagged afterwards, as on the tile path.
  void run_rows(std::size_t r0, std::size_t nr) const noexcept {
    const std::size_t n_kv = k.rows, d_k = qh.q.cols, d_v = v.cols;
    std::size_t first = n_kv, last = 0;
    for (std::size_t r = 0; r < nr; ++r) {
      const float* src = q_row(r0 + r);
      for (std::size_t p = 0; p < d_k; ++p) qs[r * d_k + p] = src[p] * q_factor;
      for (std::size_t c = 0; c < d_v; ++c) o[r * d_v + c] = 0.0f;
      m[r] = -INFINITY;
      l()[r] = 0.0f;
      const KeyRange seen = visible_keys((r0 + r) % qh.q.rows, n_kv, options);
      if (seen.lo < seen.hi) {
        first = min_size(first, seen.lo);
        last = seen.hi > last ? seen.hi : last;
      }
    }
    const MatrixView<const float>& mask = options.mask;
    // The score buffer holds rows_max × bc floats: fewer rows take wider key blocks (1 row: rows_max·bc keys), so
    // the per-block costs (a softmax step's reductions and rescale, the calls) are paid less often; K and V are
    // streamed once either way. Cortex-M keeps bc (its instruction counts are budgeted).
    const std::size_t bw = target_is_mcu ? bc : attention_block_q * bc / nr / bc * bc;
    for (std::size_t j0 = first; j0 < last; j0 += bw) {
      const std::size_t bk = min_size(bw, last - j0);
      kern.rows_dot(qs, d_k, nr, d_k, k.data + j0 * k.stride, k.stride, bk, s, bw);
      for (std::size_t r = 0; r < nr; ++r) {
        float* sr = s + r * bw;
        const std::size_t i = (r0 + r) % qh.q.rows;
        if (mask.data != nullptr) {
          const float* mrow = mask.data + i * mask.stride + j0;
          // −inf hides the key outright (assigned, not added: a NaN score of a hidden key must not show); a −inf
          // sum from a finite entry (overflow) becomes NaN, which sends the row to the exact path.
          for (std::size_t j = 0; j < bk; ++j) {
            const float t = sr[j] + mrow[j] * log2e;
            sr[j] = t > -INFINITY ? t : (mrow[j] == -INFINITY ? -INFINITY : (t == t ? NAN : t));
          }
        }
        const KeyRange seen = visible_keys(i, n_kv, options);
        if (seen.lo > j0 || seen.hi < j0 + bk)
          for (std::size_t j = 0; j < bk; ++j)
            if (j0 + j < seen.lo || j0 + j >= seen.hi) sr[j] = -INFINITY;
      }
      kern.rows_softmax(s, bw, nr, bk, m, l(), alpha());
      kern.rows_axpy(s, bw, nr, bk, v.data + j0 * v.stride, v.stride, d_v, alpha(), o, d_v);
    }
  }

  // Row r (head r / n_q, query r % n_q) through the exact path, with o as its scratch (2·d_v <= rows_max·d_v).
  void exact_row(std::size_t r, float scale) const noexcept {
    const std::size_t i = r % qh.q.rows;
    const MatrixView<const float>& mask = options.mask;
    attention_row_exact(q_row(r), qh.q.cols, k, v, mask.data != nullptr ? mask.data + i * mask.stride : nullptr,
                        visible_keys(i, k.rows, options), split_scale(scale), out_row(r), o);
  }

  // Normalise row index (in the buffers) into out row r; a query that saw no key (l == 0) gets zeros, not 0/0.
  void store_row(std::size_t r, std::size_t index) const noexcept {
    float* dst = out_row(r);
    const float lr = l()[index];
    const float inv = lr == 0.0f ? 0.0f : 1.0f / lr;
    for (std::size_t c = 0; c < v.cols; ++c) dst[c] = lr == 0.0f ? 0.0f : o[index * v.cols + c] * inv;
  }
};

// Inlined into attention_run_heads (attention_run's one head calls that too): one frame less on the stack path.
inline __attribute__((always_inline)) void run_heads(const Kernels& kern, const QueryHeads& qh,
                                                     const MatrixView<const float>& k, const MatrixView<const float>& v,
                                                     float* workspace, const AttentionOptions& options) noexcept {
  constexpr std::size_t rows_max = attention_block_q;  // rows per pass over K and V
  const std::size_t d_k = qh.q.cols, d_v = v.cols, rows = qh.heads * qh.q.rows;
  // The workspace of the tile path, carved by rows instead of lanes: rows_max × (d_k + d_v + bc + 3) floats.
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(workspace);
  float* ws = workspace + ((64 - addr % 64) % 64) / sizeof(float);
  const float scale = options.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(d_k)) : options.scale;
  const FewQueryRun run{kern,
                        qh,
                        k,
                        v,
                        options,
                        ws,
                        ws + rows_max * d_k,
                        ws + rows_max * (d_k + d_v),
                        ws + rows_max * (d_k + d_v + FewQueryRun::bc),
                        scale * log2e};
  // A scale whose log2 factor is not a normal float: every row takes the exact path (as on the tile path).
  const bool exact_rows_only = !(std::fabs(run.q_factor) >= pow2(-126) && std::fabs(run.q_factor) <= float_max);
  for (std::size_t r0 = 0; r0 < rows; r0 += rows_max) {
    const std::size_t nr = min_size(rows_max, rows - r0);
    if (!exact_rows_only) run.run_rows(r0, nr);
    for (std::size_t r = 0; r < nr; ++r) {
      // The exact path takes a row whose sum is not a positive finite number (a NaN or +inf score, or no key
      // seen) or whose output is not finite (Σ p·v overflowed, a non-finite value, or a hidden key's 0·NaN):
      // d_v floats checked per row, instead of a scan of all of V per call.
      bool exact = exact_rows_only || !(run.l()[r] > 0.0f && run.l()[r] <= float_max);
      if (!exact) {
        run.store_row(r0 + r, r);
        exact = !row_finite(run.out_row(r0 + r), d_v);
      }
      run.alpha()[r] = exact ? 1.0f : 0.0f;
    }
    for (std::size_t r = 0; r < nr; ++r)  // after every store: the row buffers are scratch now
      if (run.alpha()[r] != 0.0f) run.exact_row(r0 + r, scale);
  }
}

}  // namespace

void attention_run_heads(const Kernels& kern, const QueryHeads& qh, const MatrixView<const float>& k,
                         const MatrixView<const float>& v, float* workspace, const AttentionOptions& options) noexcept {
  run_heads(kern, qh, k, v, workspace, options);
}

Status attention_check_shapes(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                              MatrixView<float> out, const AttentionOptions& options, const float* workspace) noexcept {
  if (q.data == nullptr || k.data == nullptr || v.data == nullptr || out.data == nullptr) return Status::null_pointer;
  if (!all_aligned(q, k, v, out, options.mask, workspace)) return Status::misaligned;
  if (!shape_ok(q) || !shape_ok(k) || !shape_ok(v) || !shape_ok(out)) return Status::invalid_shape;
  if (k.cols != q.cols || v.rows != k.rows || out.rows != q.rows || out.cols != v.cols) return Status::invalid_shape;
  if (q.cols > attention_max_head_dim || v.cols > attention_max_head_dim) return Status::invalid_shape;
  const MatrixView<const float>& mask = options.mask;
  if (mask.data != nullptr && (!shape_ok(mask) || mask.rows != q.rows || mask.cols != k.rows))
    return Status::invalid_shape;
  return Status::ok;
}

bool attention_out_overlaps(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                            MatrixView<float> out, const AttentionOptions& options) noexcept {
  return views_overlap(out, q) || views_overlap(out, k) || views_overlap(out, v) ||
         (options.mask.data != nullptr && views_overlap(out, options.mask));
}

Status attention_check(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v,
                       MatrixView<float> out, const AttentionOptions& options) noexcept {
  const Status st = attention_check_shapes(q, k, v, out, options);
  if (st != Status::ok) return st;
  return attention_out_overlaps(q, k, v, out, options) ? Status::aliasing : Status::ok;
}

namespace {

// Whether v is finite, and whether Σ p·v may overflow: |ot| <= l·max|v| <= n_kv·max|v|, so with every |v| below
// 2^(125 − bits of n_kv) nothing can, and the accumulator need not be checked (only the row sums, which are
// cheap). One pass over v tells; only when some value is that large (or not finite) does a second one tell
// whether v is finite. Out of line: attention_run's frame is on the deepest stack path of the layers.
struct ValueScan {
  bool finite, sum_can_overflow;
};
__attribute__((noinline)) ValueScan scan_values(MatrixView<const float> v) noexcept {
  int kv_bits = 0;
  for (std::size_t n = v.rows; n != 0; n >>= 1) ++kv_bits;
  const bool big = any_magnitude_at_least(v, static_cast<std::uint32_t>(125 - kv_bits + 127) << 23);
  return {!big || all_finite(v), big};
}

// Flags (1.0f in flags[i]) the rows of a finished tile the fused loop may have got wrong: a row sum that is not
// a positive finite number (NaN from a NaN or +inf score, or 0: no key seen — the exact path tells "hidden"
// from "underflowed"), or a non-finite accumulator (Σ p·v overflowed, or a NaN/inf value was seen), which
// only a non-finite or huge v can cause (then one pass over it). Whether any is flagged.
__attribute__((noinline)) bool flag_rows_for_exact(const float* ot, const float* l, std::size_t bq, std::size_t d_v,
                                                   bool check_ot, float* flags) noexcept {
  constexpr std::size_t br = attention_block_q;
  const bool ot_finite = !check_ot || row_finite(ot, d_v * br);
  bool any = false;
  for (std::size_t i = 0; i < bq; ++i) {
    bool bad = !(l[i] > 0.0f && l[i] <= float_max);
    for (std::size_t c = 0; c < d_v && !ot_finite && !bad; ++c) bad = !is_finite(ot[c * br + i]);
    flags[i] = bad ? 1.0f : 0.0f;
    any = any || bad;
  }
  return any;
}

// The workspace of the tile path, 64-byte aligned (the formula reserves 16 floats for this):
// qt d_k × br, ot d_v × br, s bc × br, then m, l and alpha, br each.
inline float* tile_workspace(float* workspace) noexcept {
  const std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(workspace);
  return workspace + ((64 - addr % 64) % 64) / sizeof(float);
}

inline float tile_scale(const AttentionOptions& options, std::size_t d_k) noexcept {
  return options.scale == 0.0f ? 1.0f / std::sqrt(static_cast<float>(d_k)) : options.scale;
}

// Rows [i0, i0 + br) ∩ [0, n_q) whose flag (tile_flags) is nonzero, through the exact path, with the tile's
// accumulator as scratch. Called once the tile loop has returned (attention_run_tiles): the exact path's frames
// sit beside the fused loop's, not under them.
__attribute__((noinline, cold)) void exact_tile_rows(const MatrixView<const float>& q, const MatrixView<const float>& k,
                                                     const MatrixView<const float>& v, const MatrixView<float>& out,
                                                     float* workspace, const AttentionOptions& options,
                                                     std::size_t i0) noexcept {
  constexpr std::size_t br = attention_block_q;
  float* ot = tile_workspace(workspace) + q.cols * br;
  const float* flags = ot + (v.cols + attention_block_kv + 2) * br;  // alpha
  const ExactScale sc = split_scale(tile_scale(options, q.cols));
  const KeyBand band = visible_band(options);
  const MatrixView<const float>& mask = options.mask;
  for (std::size_t i = i0; i < i0 + br && i < q.rows; ++i) {
    if (flags[i - i0] == 0.0f) continue;
    attention_row_exact(q.data + i * q.stride, q.cols, k, v,
                        mask.data != nullptr ? mask.data + i * mask.stride : nullptr, visible_keys(i, k.rows, band), sc,
                        out.data + i * out.stride, ot);
  }
}

static_assert(attention_block_q >= 2, "the exact path borrows 2·d_v floats of the tile's accumulator");

// The tile path from row i0_from on, until a tile has rows the fused loop may have got wrong: returns that
// tile's first row, with its rows flagged (1.0f) in the workspace's alpha (exact_tile_rows takes them over), or
// n_q when every tile is done. Its own function (not inlined into attention_run), so the stack of a call is the
// larger of the paths, not their sum.
// Views by reference: copies of them would sit in attention_run's frame, on every layer call's stack path.
__attribute__((noinline)) std::size_t run_tiles_from(const Kernels& kern, const MatrixView<const float>& q,
                                                     const MatrixView<const float>& k, const MatrixView<const float>& v,
                                                     const MatrixView<float>& out, float* workspace,
                                                     const AttentionOptions& options, std::size_t i0_from) noexcept {
  constexpr std::size_t br = attention_block_q;
  constexpr std::size_t bc = attention_block_kv;
  const std::size_t n_q = q.rows, n_kv = k.rows, d_k = q.cols, d_v = v.cols;

  float* qt = tile_workspace(workspace);  // d_k × br
  float* ot = qt + d_k * br;              // d_v × br
  float* s = ot + d_v * br;               // bc × br
  float* m = s + bc * br;                 // br
  float* l = m + br;                      // br
  float* alpha = l + br;                  // br

  const float q_factor = tile_scale(options, d_k) * log2e;  // scores in log2 units: the exp becomes a bare 2^x
  // A scale whose log2 factor is not a normal float (subnormal: rounded to a few bits; or overflowing, or not a
  // number at all) would make the fused loop wrong: every row takes the exact path.
  if (!(std::fabs(q_factor) >= pow2(-126) && std::fabs(q_factor) <= float_max)) {
    for (std::size_t i = 0; i < br; ++i) alpha[i] = 1.0f;
    return i0_from;
  }
  const MatrixView<const float>& mask = options.mask;
  // One pass over v (n_kv·d_v reads, against n_q·n_kv·d_v FMAs) decides whether the guarded P·V is needed
  // and whether the accumulator must be checked.
  const ValueScan v_scan = scan_values(v);
  const bool v_finite = v_scan.finite, ot_can_overflow = v_scan.sum_can_overflow;
  const KeyBand band = visible_band(options);
  const bool banded = options.causal || options.window != 0;

  // Lane groups of the staircase: one vector wide (4 lanes for the scalar kernels).
  const std::size_t group = kern.vector_floats > 1 ? kern.vector_floats : 4;

  for (std::size_t i0 = i0_from; i0 < n_q; i0 += br) {
    const std::size_t bq = min_size(br, n_q - i0);
    // One key block [j0, j0 + bk) for lanes [a, a + nl) of the tile: scores, mask, hiding (only where a
    // lane's visible range ends or starts inside the block), online-softmax update, P·V.
    // Inlined (one call site): its own frame would sit on every layer call's deepest stack path.
    auto run_block = [&](std::size_t a, std::size_t nl, std::size_t j0, std::size_t bk) __attribute__((always_inline)) {
      kern.attn_scores(qt + a, d_k, k.data + j0 * k.stride, k.stride, bk, s + a, nl);
      if (mask.data != nullptr)
        for (std::size_t i = a; i < a + nl; ++i) {
          const float* mrow = mask.data + (i0 + i) * mask.stride + j0;
          // −inf hides the key outright (assigned, not added: a NaN score of a hidden key must not show). A
          // −inf sum from a finite mask entry (mask·log2 e or the sum overflowed, or q·k was −inf) becomes NaN,
          // which sends the row to the exact path instead of silently hiding the key.
          for (std::size_t j = 0; j < bk; ++j) {
            const float t = s[j * br + i] + mrow[j] * log2e;
            s[j * br + i] = t > -INFINITY ? t : (mrow[j] == -INFINITY ? -INFINITY : (t == t ? NAN : t));
          }
        }
      // Only where a lane's visible range ends or starts inside the block (the first lane has the smallest end,
      // the last the largest start).
      if (banded) hide_outside_band(s + a, nl, i0 + a, j0, bk, band, n_kv);
      // A visible key (not hidden by the causal rule, the window or a −inf mask entry) whose value row holds NaN or
      // ±inf sends the query to the exact path, whatever its probability (which may underflow to 0): marked by a NaN in
      // its accumulator, which no rescaling removes.
      if (!v_finite) mark_rows_seeing_nonfinite_v(v, j0, bk, i0, a, nl, options, band, ot);
      kern.attn_softmax(s + a, bk, m + a, l + a, alpha + a, nl);
      if (v_finite)
        kern.attn_pv(s + a, bk, v.data + j0 * v.stride, v.stride, d_v, alpha + a, ot + a, nl);
      else
        pv_with_nonfinite_rows(kern, s + a, bk, v.data + j0 * v.stride, v.stride, d_v, alpha + a, ot + a, nl);
    };
    kern.attn_pack_q(q.data + i0 * q.stride, q.stride, bq, d_k, q_factor, qt);
    for (std::size_t i = 0; i < d_v * br; ++i) ot[i] = 0.0f;
    for (std::size_t i = 0; i < br; ++i) {
      m[i] = -INFINITY;
      l[i] = 0.0f;
    }

    // A staircase over lane groups of one vector. Group g's last query's keys end at end(g), its first query's
    // start at first(g), and both only grow with g: lanes from group g on all need the keys from the larger of
    // first(g) and end(g − 1) up to end(g), so that segment runs once for lanes [g·group, bq) — full width as
    // far as possible, one vector on the last step. Keys no lane of the tile sees are never computed; the
    // waste is one vector-wide triangle at the end (causal) and at the start (window) of each group's keys.
    // (The per-lane online softmax does not care that lanes consumed different keys.) Dense: one segment, all
    // keys, all lanes.
    std::size_t seg_start = 0;
    for (std::size_t g0 = 0; g0 < bq; g0 += group) {
      const std::size_t g_end = banded ? min_size(g0 + group, bq) : bq;
      const std::size_t first = key_bound(i0 + g0, band.lo, n_kv);
      const std::size_t seg_end = key_bound(i0 + g_end - 1, band.hi, n_kv);
      seg_start = first > seg_start ? first : seg_start;
      for (std::size_t j0 = seg_start; j0 < seg_end; j0 += bc) run_block(g0, bq - g0, j0, min_size(bc, seg_end - j0));
      seg_start = seg_end > seg_start ? seg_end : seg_start;
      if (!banded) break;
    }

    // Rows the fused loop may have got wrong go to the exact path: a row sum that is not a positive finite
    // number (NaN from a NaN or +inf score, or 0: no key seen — the exact path tells "hidden" from
    // "underflowed"), or a non-finite accumulator (Σ p·v overflowed, or a NaN/inf value was seen), which only
    // a non-finite or huge v can cause (then one pass over it). Flags kept in alpha (free now).
    const bool any_exact = flag_rows_for_exact(ot, l, bq, d_v, ot_can_overflow, alpha);

    // Normalise and transpose back. A query that saw no key (l == 0) gets zeros, not 0/0.
    kern.attn_store_out(ot, l, bq, d_v, out.data + i0 * out.stride, out.stride);
    if (any_exact) return i0;
  }
  return n_q;
}

// The tiles, and after each tile that has some, its flagged rows through the exact path (outside
// run_tiles_from's frame). Inlined into attention_run: no frame of its own on the layers' stack path.
inline __attribute__((always_inline)) void run_tiles(const Kernels& kern, const MatrixView<const float>& q,
                                                     const MatrixView<const float>& k, const MatrixView<const float>& v,
                                                     const MatrixView<float>& out, float* workspace,
                                                     const AttentionOptions& options) noexcept {
  for (std::size_t i0 = 0; (i0 = run_tiles_from(kern, q, k, v, out, workspace, options, i0)) < q.rows;
       i0 += attention_block_q)
    exact_tile_rows(q, k, v, out, workspace, options, i0);
}

}  // namespace

__attribute__((noinline)) void attention_run_tiles(const Kernels& kern, const MatrixView<const float>& q,
                                                   const MatrixView<const float>& k, const MatrixView<const float>& v,
                                                   const MatrixView<float>& out, float* workspace,
                                                   const AttentionOptions& options) noexcept {
  run_tiles(kern, q, k, v, out, workspace, options);
}

namespace {

// One head on the few-query path (one copy of it in flash: attention_run_heads); its QueryHeads lives here, off the
// tile path's stack.
__attribute__((noinline)) void attention_run_one_head(const Kernels& kern, const MatrixView<const float>& q,
                                                      const MatrixView<const float>& k,
                                                      const MatrixView<const float>& v, const MatrixView<float>& out,
                                                      float* workspace, const AttentionOptions& options) noexcept {
  attention_run_heads(kern, {q, 0, out, 0, 1}, k, v, workspace, options);
}

}  // namespace

void attention_run(const Kernels& kern, const MatrixView<const float>& q, const MatrixView<const float>& k,
                   const MatrixView<const float>& v, const MatrixView<float>& out, float* workspace,
                   const AttentionOptions& options) noexcept {
  // Few queries: one query per row instead of per lane (a tile would fill one lane of a vector per query).
  if (q.rows <= kern.few_query_max)
    attention_run_one_head(kern, q, k, v, out, workspace, options);
  else
    run_tiles(kern, q, k, v, out, workspace, options);
}

}  // namespace detail

Status attention(MatrixView<const float> q, MatrixView<const float> k, MatrixView<const float> v, MatrixView<float> out,
                 float* workspace, std::size_t workspace_floats, const AttentionOptions& options) noexcept {
  // The documented order: null pointers, alignment, shapes, workspace size, then overlaps.
  if (workspace == nullptr) return Status::null_pointer;
  const Status st = detail::attention_check_shapes(q, k, v, out, options, workspace);
  if (st != Status::ok) return st;
  const std::size_t needed = attention_workspace_floats(q.cols, v.cols);
  if (workspace_floats < needed) return Status::workspace_too_small;
  if (detail::attention_out_overlaps(q, k, v, out, options)) return Status::aliasing;
  // Only the first `needed` floats are used, so only they must not overlap anything (the same tests as for out).
  const MatrixView<float> ws{workspace, 1, needed, needed};
  if (detail::attention_out_overlaps(q, k, v, ws, options) || detail::views_overlap(ws, out)) return Status::aliasing;
  detail::attention_run(detail::selected_kernels(), q, k, v, out, workspace, options);
  return Status::ok;
}

}  // namespace microattn
