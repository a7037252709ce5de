// microattn demo: the worked example of the tutorial "从头理解self-attention机制" (Understanding the
// self-attention mechanism from scratch) through the public API, printed step by step.
// X = [[0.1, 0.5], [0.3, 0.4], [0.8, 0.0]] — three tokens with two features each.
#include <cmath>
#include <cstdio>

#include <microattn/microattn.hpp>

namespace ma = microattn;

static void print(const char* title, const float* m, int rows, int cols) {
  std::printf("%s\n", title);
  for (int r = 0; r < rows; ++r) {
    std::printf("  [");
    for (int c = 0; c < cols; ++c) std::printf("%s%.4f", c ? ", " : "", static_cast<double>(m[r * cols + c]));
    std::printf("]\n");
  }
}

int main() {
  std::printf("microattn %d.%d.%d, kernels: %s (%s)\n\n", MICROATTN_VERSION_MAJOR, MICROATTN_VERSION_MINOR,
              MICROATTN_VERSION_PATCH, ma::simd_arch(), ma::matmul_kernel_name());

  const float x[3 * 2] = {0.1f, 0.5f, 0.3f, 0.4f, 0.8f, 0.0f};
  float scores[3 * 3];
  const auto xv = ma::make_view(x, 3, 2);

  // Similarity of every token with every other: X·Xᵀ (b transposed, as a PyTorch Linear weight).
  ma::Status s = ma::matmul(xv, xv, ma::make_view(scores, 3, 3), /*transpose_b=*/true);
  if (s != ma::Status::ok) {
    std::printf("matmul failed: %s\n", ma::to_string(s));
    return 1;
  }
  print("X·Xᵀ (expected [[0.26, 0.23, 0.08], [0.23, 0.25, 0.24], [0.08, 0.24, 0.64]]):", scores, 3, 3);

  // Each row becomes a probability distribution.
  s = ma::softmax_rows(ma::make_view(scores, 3, 3));
  if (s != ma::Status::ok) {
    std::printf("softmax_rows failed: %s\n", ma::to_string(s));
    return 1;
  }
  print("softmax rows:", scores, 3, 3);

  // The same steps fused, as attention() runs them: softmax(Q·Kᵀ/√d_k)·V with Q = K = V = X (the tutorial's
  // example before it adds projections), without the 3×3 score matrix and with a workspace of the caller's.
  float y[3 * 2];
  float workspace[ma::attention_workspace_floats(2, 2)];
  s = ma::attention(xv, xv, xv, ma::make_view(y, 3, 2), workspace, sizeof workspace / sizeof workspace[0]);
  if (s != ma::Status::ok) {
    std::printf("attention failed: %s\n", ma::to_string(s));
    return 1;
  }
  print("\nattention(X, X, X) = softmax(X·Xᵀ/√2)·X:", y, 3, 2);
  // The same in double precision, written out, to show how close fp32 is.
  double worst = 0;
  for (int i = 0; i < 3; ++i) {
    double p[3], sum = 0, top = -INFINITY;
    for (int j = 0; j < 3; ++j) {
      p[j] = (double(x[i * 2]) * x[j * 2] + double(x[i * 2 + 1]) * x[j * 2 + 1]) / std::sqrt(2.0);
      top = p[j] > top ? p[j] : top;
    }
    for (double& e : p) sum += (e = std::exp(e - top));
    for (int c = 0; c < 2; ++c) {
      double o = 0;
      for (int j = 0; j < 3; ++j) o += p[j] / sum * x[j * 2 + c];
      worst = std::fmax(worst, std::fabs(o - y[i * 2 + c]));
    }
  }
  std::printf("largest difference from float64: %.2g\n", worst);
  if (!(worst < 1e-6)) return 1;

  // Bad input is reported, never a crash: a 3×2 times a 3×2 (not transposed) does not chain.
  s = ma::matmul(xv, xv, ma::make_view(scores, 3, 2));
  std::printf("\nmatmul of mismatched shapes -> Status::%s\n", ma::to_string(s));
  return s == ma::Status::invalid_shape ? 0 : 1;
}
