#include "microattn/status.hpp"

namespace microattn {

const char* to_string(Status s) noexcept {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::null_pointer:
      return "null_pointer";
    case Status::invalid_shape:
      return "invalid_shape";
    case Status::workspace_too_small:
      return "workspace_too_small";
    case Status::aliasing:
      return "aliasing";
    case Status::misaligned:
      return "misaligned";
  }
  return "unknown_status";
}

}  // namespace microattn
