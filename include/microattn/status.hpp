// microattn — status codes returned by every entry point.
//
// Modelled on CMSIS-NN's arm_cmsis_nn_status: a plain enum, no exceptions. Every public function checks its
// arguments first and, on any error, returns the code below WITHOUT writing a single byte of its outputs.
#pragma once

namespace microattn {

enum class Status : int {
  ok = 0,               // success, outputs written
  null_pointer,         // a required pointer is null
  invalid_shape,        // zero or mismatched dimension, stride < cols, sequence longer than a layer's capacity
  workspace_too_small,  // caller workspace smaller than the documented *_workspace_floats() value
  aliasing,             // an output overlaps an input (except where an entry point documents in-place use)
  misaligned,           // a float pointer is not alignof(float)-aligned (4 bytes); nothing further is required
};

// A short, static, human-readable name ("ok", "null_pointer", ...). Never returns null.
const char* to_string(Status s) noexcept;

}  // namespace microattn
