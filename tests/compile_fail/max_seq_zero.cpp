// expect-error: MaxSeq must be at least 1
#include <microattn/microattn.hpp>
namespace ma = microattn;
static const float w[64 * 64] = {};
ma::MultiHeadAttention<0, 64, 4> layer{{w, w, w}};
int main() { return static_cast<int>(layer.forward({w, 1, 64, 64}, {nullptr, 1, 64, 64})); }
