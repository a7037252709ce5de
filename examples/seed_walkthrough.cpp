// The tutorial's self-attention walk-through, step by step, with microattn.
//
// X holds three tokens with two features each. Self-attention compares every token with every other by a
// dot product (X·Xᵀ), turns each row of similarities into weights with a softmax, and mixes the tokens
// with those weights: Y = softmax(X·Xᵀ/√d_k)·X. Dividing by √d_k (here √2) keeps the softmax from saturating
// as d_k grows: a dot product of d_k unit-variance terms has variance d_k. A trained layer first projects
// X three times (Q = X·W_qᵀ, K = X·W_kᵀ, V = X·W_vᵀ); with identity weights, as here, Q = K = V = X.
//
// tests/check_seed_walkthrough.py recomputes every printed number independently and compares.
#include <cstdio>

#include <microattn/microattn.hpp>

namespace ma = microattn;

static void print(const char* key, const char* title, const float* m, int rows, int cols) {
  std::printf("%s: %s\n", key, title);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) std::printf(" %10.6f", static_cast<double>(m[r * cols + c]));
    std::printf("\n");
  }
  std::printf("\n");
}

static bool ok(ma::Status s, const char* what) {
  if (s != ma::Status::ok) std::printf("%s failed: %s\n", what, ma::to_string(s));
  return s == ma::Status::ok;
}

int main() {
  const float x[3 * 2] = {0.1f, 0.5f, 0.3f, 0.4f, 0.8f, 0.0f};
  const auto xv = ma::make_view(x, 3, 2);
  print("x", "X, three tokens × two features", x, 3, 2);

  // 1. Similarity: X·Xᵀ (the tutorial: [[0.26, 0.23, 0.08], [0.23, 0.25, 0.24], [0.08, 0.24, 0.64]]).
  float s[3 * 3];
  if (!ok(ma::matmul(xv, xv, ma::make_view(s, 3, 3), /*transpose_b=*/true), "matmul")) return 1;
  print("similarity", "X·Xᵀ", s, 3, 3);

  // 2. Each row of similarities becomes weights that sum to 1 (max subtracted first, for stability).
  float p[3 * 3];
  for (int i = 0; i < 9; ++i) p[i] = s[i];
  if (!ok(ma::softmax_rows(ma::make_view(p, 3, 3)), "softmax_rows")) return 1;
  print("softmax", "softmax(X·Xᵀ), row by row", p, 3, 3);

  // 3. The scaled version: divide by √d_k = √2 before the softmax.
  float ps[3 * 3];
  for (int i = 0; i < 9; ++i) ps[i] = s[i] * 0.70710678f;
  if (!ok(ma::softmax_rows(ma::make_view(ps, 3, 3)), "softmax_rows")) return 1;
  print("scaled_softmax", "softmax(X·Xᵀ/√2)", ps, 3, 3);

  // 4. Y = softmax(X·Xᵀ/√2)·X, fused: the 3×3 weights above are never stored by attention().
  float y[3 * 2];
  float workspace[ma::attention_workspace_floats(2, 2)];
  if (!ok(ma::attention(xv, xv, xv, ma::make_view(y, 3, 2), workspace, sizeof workspace / sizeof workspace[0]),
          "attention"))
    return 1;
  print("output", "Y = softmax(X·Xᵀ/√2)·X (attention)", y, 3, 2);

  // 5. The same through a layer object with identity projections (W_q = W_k = W_v = I, no out projection).
  static const float identity[2 * 2] = {1.0f, 0.0f, 0.0f, 1.0f};
  static ma::SelfAttention<3, 2> layer{{identity, identity, identity}};
  float y_layer[3 * 2];
  if (!ok(layer.forward(xv, ma::make_view(y_layer, 3, 2)), "SelfAttention::forward")) return 1;
  print("layer_output", "Y from SelfAttention<3, 2> with identity weights", y_layer, 3, 2);
  return 0;
}
