// expect-error: the layer's buffer exceeds the largest object
// 2·MaxSeq floats fit std::size_t but not in bytes (nor in a ptrdiff_t).
#include <microattn/microattn.hpp>

#include <cstdint>
namespace ma = microattn;
static const float w[64 * 64] = {};
ma::MultiHeadAttention<SIZE_MAX / 4, 1, 1> layer{{w, w, w}};
int main() { return static_cast<int>(layer.forward({w, 1, 1, 1}, {nullptr, 1, 1, 1})); }
