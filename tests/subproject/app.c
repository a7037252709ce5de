/* The parent project's program: one call of each kind through the C API, checked against values computed by hand. */
#include <math.h>
#include <stdio.h>

#include <microattn/microattn.h>

int main(void) {
  /* q = k = [[1, 0], [0, 1]], v = [[1, 2], [3, 4]], scale 1: row 0 weights (e, 1)/(e + 1). */
  static const float q[4] = {1, 0, 0, 1}, v[4] = {1, 2, 3, 4};
  static float out[4], ws[MICROATTN_ATTENTION_WORKSPACE_FLOATS(2, 2)];
  const microattn_cview qv = {q, 2, 2, 2}, vv = {v, 2, 2, 2};
  const microattn_view ov = {out, 2, 2, 2};
  microattn_attention_options opt = {1.0f, 0, 0, {NULL, 0, 0, 0}, 0};
  const double p = exp(1.0) / (exp(1.0) + 1.0);
  const microattn_status s = microattn_attention(qv, qv, vv, ov, ws, sizeof ws / sizeof ws[0], &opt);
  const double want0 = p * 1 + (1 - p) * 3;
  printf("%s %s: out[0] = %.7f (want %.7f)\n", microattn_version(), microattn_status_string(s), (double)out[0], want0);
  return s == MICROATTN_OK && fabs(out[0] - want0) < 1e-6 ? 0 : 1;
}
