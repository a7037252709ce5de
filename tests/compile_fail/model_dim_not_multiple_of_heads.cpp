// expect-error: ModelDim must be a multiple of Heads
#include <microattn/microattn.hpp>
namespace ma = microattn;
static const float w[64 * 64] = {};
ma::MultiHeadAttention<8, 64, 3> layer{{w, w, w}};
int main() { return static_cast<int>(layer.forward({w, 1, 64, 64}, {nullptr, 1, 64, 64})); }
