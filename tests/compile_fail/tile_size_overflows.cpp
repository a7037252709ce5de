// expect-error: ModelDim overflows std::size_t
// HeadDim 65536 (the largest), Heads = SIZE_MAX >> 18: two query tiles of ModelDim floats wrap on any size_t.
#include <microattn/microattn.hpp>

#include <cstdint>
namespace ma = microattn;
static const float w[64 * 64] = {};
constexpr std::size_t heads = SIZE_MAX >> 18;
ma::MultiHeadAttention<1, heads * 65536, heads, 1> layer{{w, w, w}};
int main() { return static_cast<int>(layer.forward({w, 1, 4, 4}, {nullptr, 1, 4, 4})); }
