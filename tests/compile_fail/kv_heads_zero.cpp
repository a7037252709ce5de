// expect-error: KvHeads must be at least 1
#include <microattn/microattn.hpp>
namespace ma = microattn;
static const float w[64 * 64] = {};
ma::MultiHeadAttention<8, 64, 4, 0> layer{{w, w, w}};
int main() { return static_cast<int>(layer.forward({w, 1, 64, 64}, {nullptr, 1, 64, 64})); }
