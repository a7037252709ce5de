// The C API of the blocks (microattn.h): its own object, so that C++ firmware, and C firmware that calls none of
// these, links none of it.
#include "microattn/blocks.hpp"
#include "microattn/microattn.h"

namespace ma = microattn;

static_assert(static_cast<int>(ma::Activation::relu) == MICROATTN_ACTIVATION_RELU, "activation values differ");
static_assert(static_cast<int>(ma::Activation::gelu) == MICROATTN_ACTIVATION_GELU, "activation values differ");
static_assert(static_cast<int>(ma::Activation::gelu_tanh) == MICROATTN_ACTIVATION_GELU_TANH,
              "activation values differ");
static_assert(static_cast<int>(ma::Activation::silu) == MICROATTN_ACTIVATION_SILU, "activation values differ");

namespace {
ma::MatrixView<const float> cpp(microattn_cview v) noexcept { return {v.data, v.rows, v.cols, v.stride}; }
ma::MatrixView<float> cpp(microattn_view v) noexcept { return {v.data, v.rows, v.cols, v.stride}; }
microattn_status c(ma::Status s) noexcept { return static_cast<microattn_status>(static_cast<int>(s)); }
}  // namespace

extern "C" {

microattn_status microattn_layer_norm_rows(microattn_cview x, const float* weight, const float* bias, float eps,
                                           microattn_view y) {
  return c(ma::layer_norm_rows(cpp(x), weight, bias, eps, cpp(y)));
}

microattn_status microattn_rms_norm_rows(microattn_cview x, const float* weight, float eps, microattn_view y) {
  return c(ma::rms_norm_rows(cpp(x), weight, eps, cpp(y)));
}

microattn_status microattn_activate_rows(microattn_view x, microattn_activation a) {
  // The C enum may hold any int: one outside the four becomes 0xff, which activate_rows rejects (invalid_shape)
  // after its pointer checks, as for a C++ caller; a plain narrowing to uint8_t could turn 256 into relu.
  const int v = static_cast<int>(a);
  const bool known = v >= MICROATTN_ACTIVATION_RELU && v <= MICROATTN_ACTIVATION_SILU;
  return c(ma::activate_rows(cpp(x), static_cast<ma::Activation>(known ? v : 0xff)));
}

}  // extern "C"
