#include "microattn/status.hpp"

namespace microattn {

const char* to_string(Status s) noexcept {
  // One name per enumerator, in the order of their values 0, 1, … (status.hpp).
  static constexpr const char* names[] = {"ok",       "null_pointer", "invalid_shape", "workspace_too_small",
                                          "aliasing", "misaligned"};
  static_assert(static_cast<int>(Status::misaligned) + 1 == sizeof names / sizeof names[0], "a name per Status");
  const unsigned i = static_cast<unsigned>(s);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown_status";
}

}  // namespace microattn
