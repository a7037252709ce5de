// Independent double-precision reference for the tests. Written from the definitions, straight loops,
// sharing no code with the library.
#pragma once

#include <cstddef>
#include <vector>

namespace ref {

// c[i][j] = Σ_p a[i][p]·b[p][j] (or b[j][p] when transpose_b), in double; abs_c[i][j] = Σ_p |a·b|, the
// magnitude a float result's rounding error scales with. c, abs_c: m×n, row-major, contiguous.
void matmul(const float* a, std::size_t lda, const float* b, std::size_t ldb, bool transpose_b, std::size_t m,
            std::size_t n, std::size_t k, std::vector<double>& c, std::vector<double>& abs_c);

// Softmax of one row in long double, following the definition: exp(x_j − max) / Σ exp(x_i − max),
// with −inf → 0, all −inf → zeros, any NaN or +inf → NaN.
void softmax_row(const float* x, std::size_t n, std::vector<double>& y);

// e^x correctly rounded to double from long double (x87 80-bit: 64-bit significand).
double exp(float x);

// Scaled dot-product attention in double / long double, from the definition:
//   out[i] = Σ_j softmax_j(scale·q_i·k_j + mask[i][j]) · v_j over the keys j visible to query i
// (causal: i + causal_offset − window < j <= i + causal_offset; not causal with a window:
// |j − (i + causal_offset)| < window; window 0: no such limit). No visible key, or all −inf → zeros; NaN or +inf in a
// row's scores → NaN. Also returns, for the tolerance policy, weighted_abs[i][c] = Σ_j p_ij·|v_jc| (what the error of
// out[i][c] scales with) and score_abs[i] = max_j scale·Σ_p |q_ip·k_jp| + |mask_ij| (what a score's float rounding
// scales with). out, weighted_abs: n_q × d_v contiguous; score_abs: n_q.
struct AttentionCase {
  const float* q;
  std::size_t ldq;
  const float* k;
  std::size_t ldk;
  const float* v;
  std::size_t ldv;
  std::size_t n_q, n_kv, d_k, d_v;
  double scale;  // 0: 1/sqrt(d_k)
  bool causal;
  long long causal_offset;
  const float* mask;  // n_q × n_kv with row stride ldm, or nullptr
  std::size_t ldm;
  std::size_t window = 0;
};
// Whether query i sees key j under (causal, causal_offset, window), from the definition, in exact integers.
bool visible(std::size_t i, std::size_t j, bool causal, long long causal_offset, std::size_t window);
void attention(const AttentionCase& c, std::vector<double>& out, std::vector<double>& weighted_abs,
               std::vector<double>& score_abs);

// PyTorch nn.MultiheadAttention math (batch_first, one sequence), double precision, with grouped-query heads:
//   Q = query·Wqᵀ + bq, K = context·Wkᵀ + bk, V = context·Wvᵀ + bv; head h attends with K/V head
//   h / (heads / kv_heads); y = concat(heads)·Woᵀ + bo, or the concatenation when wo is null.
// Every pointer to a bias may be null. y: n_q × d contiguous. Visibility as attention() above (with the window).
// Rotary embeddings (rope_theta != 0): Q and K of each head, after projection and bias, are rotated by rotate()
// with query row i at position q_position + i·position_step and context row j at kv_position + j·position_step.
struct MhaCase {
  std::size_t d, heads, kv_heads;
  const float *wq, *wk, *wv, *bq, *bk, *bv, *wo, *bo;
  const float* query;
  std::size_t n_q, ldq;
  const float* context;
  std::size_t n_kv, ldc;
  bool causal;
  long long causal_offset;
  const float* mask;
  std::size_t ldm;
  std::size_t window = 0;
  double rope_theta = 0.0;
  std::size_t rope_dims = 0;  // 0: all of the head
  bool rope_interleaved = false;
  std::size_t q_position = 0, kv_position = 0;
  std::size_t position_step = 1;
};
void multihead_attention(const MhaCase& c, std::vector<double>& y);

// Rotary position embedding of `rows` rows of m (row stride ld, `heads` heads of head_dim each), in double from
// the definition: in each head, pair p < dims/2 — dims (p, p + dims/2), or (2p, 2p + 1) when interleaved —
// turns by the angle (first_position + row · step) · theta^(−2p/dims): (x, z) → (x·cos − z·sin, x·sin + z·cos).
void rotate(double* m, std::size_t rows, std::size_t ld, std::size_t heads, std::size_t head_dim, double theta,
            std::size_t dims, bool interleaved, std::size_t first_position, std::size_t step = 1);

}  // namespace ref
