/* The encoder firmware example through the C API (C99): the same model, header and checks as main.cpp, with
 * microattn_encoder_layer over static caches and one shared scratch (no heap). Prints main.cpp's summary lines. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <microattn/microattn.h>

#include ENCODER_WEIGHTS_H /* scripts/export_weights.py model.npz --heads 4 --activation gelu --format ... */
#include "encoder_io.h"

#define FRAMES ENCODER_FRAMES
#define DIM MODEL_MODEL_DIM
#define CACHE_FLOATS MICROATTN_LAYER_CACHE_FLOATS(FRAMES, DIM, MODEL_HEADS, MODEL_HEADS)
#define SCRATCH_FLOATS MICROATTN_ENCODER_LAYER_SCRATCH_FLOATS(FRAMES, DIM, MODEL_HEADS, MODEL_FEED_FORWARD)

static float caches[MODEL_ENCODER_LAYERS][CACHE_FLOATS];
static float scratch[SCRATCH_FLOATS];
static microattn_encoder_layer layers[MODEL_ENCODER_LAYERS];
static float x[FRAMES * DIM];

int main(void) {
  const int q8 = MODEL_FORMAT == MICROATTN_FORMAT_Q8, f16 = MODEL_FORMAT == MICROATTN_FORMAT_F16;
  const double u = 1.0 / 16777216.0;
  const double* const reference = f16 ? encoder_expected_f16 : encoder_expected;
  double max_error = 0.0, max_ratio = 0.0, max_vs_torch = 0.0;
  int mismatches = 0, right = 0;
  size_t b, i, l;
  for (l = 0; l < MODEL_ENCODER_LAYERS; ++l) {
    const microattn_status s = microattn_encoder_layer_init(&layers[l], FRAMES, DIM, MODEL_HEADS, MODEL_FEED_FORWARD,
                                                            &model_c_encoder_weights[l], &model_c_encoder_config,
                                                            caches[l], CACHE_FLOATS, scratch, SCRATCH_FLOATS);
    if (s != MICROATTN_OK) {
      printf("init failed: %s\n", microattn_status_string(s));
      return 1;
    }
  }
  for (b = 0; b < ENCODER_BATCH; ++b) {
    const microattn_cview in = {x, FRAMES, DIM, DIM};
    const microattn_view out = {x, FRAMES, DIM, DIM};
    float pooled[DIM] = {0};
    float logits[ENCODER_CLASSES];
    const microattn_weight_matrix head = {MICROATTN_FORMAT_F32, encoder_head_weight, ENCODER_CLASSES, DIM, NULL, 0};
    const microattn_cview pooled_view = {pooled, 1, DIM, DIM};
    const microattn_view logits_view = {logits, 1, ENCODER_CLASSES, ENCODER_CLASSES};
    size_t best = 0, c, t;
    microattn_status s;
    memcpy(x, encoder_input + b * FRAMES * DIM, sizeof x);
    for (l = 0; l < MODEL_ENCODER_LAYERS; ++l) {
      s = microattn_encoder_layer_forward(&layers[l], in, out, NULL);
      if (s != MICROATTN_OK) {
        printf("forward failed: %s\n", microattn_status_string(s));
        return 1;
      }
    }
    for (i = 0; i < FRAMES * DIM; ++i) { /* main.cpp's tolerances */
      const size_t k = b * FRAMES * DIM + i;
      const double tolerance = 8.0 * u * encoder_kappa[k] + (q8 ? 6.0 * sqrt(2.0) * encoder_sigma_q8[k] : 0.0);
      const double error = fabs((double)x[i] - reference[k]);
      const double vs_torch = fabs((double)x[i] - encoder_expected[k]);
      if (!(error <= tolerance)) ++mismatches;
      if (error > max_error) max_error = error;
      if (error / tolerance > max_ratio) max_ratio = error / tolerance;
      if (vs_torch > max_vs_torch) max_vs_torch = vs_torch;
    }
    for (t = 0; t < FRAMES; ++t)
      for (c = 0; c < DIM; ++c) pooled[c] += x[t * DIM + c] / (float)FRAMES;
    s = microattn_linear(pooled_view, &head, encoder_head_bias, logits_view);
    if (s != MICROATTN_OK) {
      printf("head failed: %s\n", microattn_status_string(s));
      return 1;
    }
    for (c = 1; c < ENCODER_CLASSES; ++c)
      if (logits[c] > logits[best]) best = c;
    right += (int)best == encoder_labels[b];
    printf("window %u: class %u (label %d)\n", (unsigned)b, (unsigned)best, encoder_labels[b]);
  }
  printf("max |y - torch float64| %.3g; against the %s: max error %.3g, max error / tolerance %.3g: %s\n", max_vs_torch,
         f16 ? "f16-weight reference" : "reference", max_error, max_ratio,
         mismatches == 0 && right == ENCODER_BATCH ? "PASS" : "FAIL");
  return mismatches == 0 && right == ENCODER_BATCH ? 0 : 1;
}
