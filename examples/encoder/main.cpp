// Encoder firmware example: the keyword-spotting model trained by scripts/train_tiny_encoder.py (a 2-layer
// nn.TransformerEncoder, d 32, 4 heads, feed-forward 64, GELU) run on its committed input windows and checked
// against PyTorch's float64 outputs for them.
//
// The pattern to copy into a firmware project:
//  - the weights header comes from scripts/export_weights.py (f32, f16 or q8 weights in flash, never copied);
//  - the layers are static objects that share one scratch block: .bss sized at compile time, no heap;
//  - every call returns a Status (the library is built -fno-exceptions -fno-rtti).
// Built once per weight format (ENCODER_WEIGHTS_H names the exported header). Under QEMU, printf goes to the host
// through semihosting and main's return value becomes QEMU's exit status.
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include <microattn/microattn.hpp>

#include ENCODER_WEIGHTS_H  // scripts/export_weights.py model.npz --heads 4 --activation gelu [--format ...]
#include "encoder_io.h"     // io_header.py: input windows, PyTorch's outputs, the classifier head

namespace ma = microattn;

constexpr std::size_t frames = ENCODER_FRAMES;
constexpr std::size_t dim = MODEL_MODEL_DIM;
static_assert(ENCODER_DIM == MODEL_MODEL_DIM, "the test data and the model disagree");
static_assert(MODEL_ENCODER_LAYERS == 2, "this example lists its two layers");

using Layer = ma::TransformerEncoderLayerSharedScratch<frames, dim, MODEL_HEADS, MODEL_FEED_FORWARD>;
static ma::LayerScratch<ma::encoder_layer_scratch_floats(frames, dim, MODEL_HEADS, MODEL_FEED_FORWARD)> scratch;
static Layer layers[MODEL_ENCODER_LAYERS] = {{model_encoder_weights[0], scratch, model_encoder_config},
                                             {model_encoder_weights[1], scratch, model_encoder_config}};
static float x[frames * dim];

// Tolerances (docs in the example's text; kappa and sigma come from PyTorch's autograd in float64):
//  f32: 8·u·kappa_i, kappa_i = Σ|∂y_i/∂p|·|p| over every weight and input: each of them off by a relative 8u;
//  f16: the same against PyTorch on the f16-rounded weights (binary16 converts exactly, so the layers compute
//       the fp32 forward of those values);
//  q8:  6·sqrt(2)·sigma_i + 8·u·kappa_i, sigma_i the first-order standard deviation of y_i for independent
//       weight rounding errors (per row |W − scale·q| <= max|W_r| / 254), doubled in variance for the
//       activations' rounding (per row, the same relative step).
constexpr bool q8 = MODEL_FORMAT == MICROATTN_FORMAT_Q8;
constexpr bool f16 = MODEL_FORMAT == MICROATTN_FORMAT_F16;
constexpr double u = 1.0 / 16777216.0;
constexpr const char* format_name = q8 ? "q8" : (f16 ? "f16" : "f32");
static const char* const names[ENCODER_CLASSES] = {"rising", "falling", "steady", "alternating"};

int main() {
  const double* const reference = f16 ? encoder_expected_f16 : encoder_expected;
  int mismatches = 0, right = 0;
  double max_error = 0.0, max_ratio = 0.0, max_vs_torch = 0.0;
  for (std::size_t b = 0; b < ENCODER_BATCH; ++b) {
    std::memcpy(x, encoder_input + b * frames * dim, sizeof x);
    for (Layer& layer : layers) {
      const ma::Status status = layer.forward(ma::make_view(x, frames, dim), ma::make_view(x, frames, dim));
      if (status != ma::Status::ok) {
        std::printf("forward failed: %s\n", ma::to_string(status));
        return 1;
      }
    }
    for (std::size_t i = 0; i < frames * dim; ++i) {
      const std::size_t k = b * frames * dim + i;
      const double tolerance = 8.0 * u * encoder_kappa[k] + (q8 ? 6.0 * std::sqrt(2.0) * encoder_sigma_q8[k] : 0.0);
      const double error = std::fabs(double{x[i]} - reference[k]);
      if (!(error <= tolerance)) ++mismatches;  // NaN fails
      if (error > max_error) max_error = error;
      if (error / tolerance > max_ratio) max_ratio = error / tolerance;
      const double vs_torch = std::fabs(double{x[i]} - encoder_expected[k]);
      if (vs_torch > max_vs_torch) max_vs_torch = vs_torch;
    }
    // The classifier: mean over the frames, then the head (an nn.Linear(32, 4) of the same state_dict).
    float pooled[dim] = {};
    for (std::size_t t = 0; t < frames; ++t)
      for (std::size_t c = 0; c < dim; ++c) pooled[c] += x[t * dim + c] / float{frames};
    float logits[ENCODER_CLASSES];
    const ma::Status status = ma::linear(ma::make_view(static_cast<const float*>(pooled), 1, dim),
                                         ma::weights_f32(encoder_head_weight, ENCODER_CLASSES, dim), encoder_head_bias,
                                         ma::make_view(logits, 1, ENCODER_CLASSES));
    if (status != ma::Status::ok) {
      std::printf("head failed: %s\n", ma::to_string(status));
      return 1;
    }
    std::size_t best = 0;
    for (std::size_t c = 1; c < ENCODER_CLASSES; ++c)
      if (logits[c] > logits[best]) best = c;
    right += static_cast<int>(static_cast<int>(best) == encoder_labels[b]);
    std::printf("window %u: %s (label %s)\n", static_cast<unsigned>(b), names[best], names[encoder_labels[b]]);
  }
  std::printf("microattn %s: 2 x TransformerEncoderLayer<%u, %u, %u, %u>, %s weights, %u + %u bytes of RAM in .bss\n",
              ma::simd_arch(), unsigned{frames}, unsigned{dim}, unsigned{MODEL_HEADS}, unsigned{MODEL_FEED_FORWARD},
              format_name, unsigned{MODEL_ENCODER_LAYERS * Layer::ram_bytes}, unsigned{sizeof scratch});
  std::printf("max |y - torch float64| %.3g; against the %s: max error %.3g, max error / tolerance %.3g: %s\n",
              max_vs_torch, f16 ? "f16-weight reference" : "reference", max_error, max_ratio,
              mismatches == 0 && right == ENCODER_BATCH ? "PASS" : "FAIL");
  return mismatches == 0 && right == ENCODER_BATCH ? 0 : 1;
}
