// expect-error: MaxSeq·KvHeads·HeadDim overflows std::size_t
// The reproducer: on 64-bit targets MultiHeadAttention<(1ull << 62), 4, 1> wrapped to 10 752 bytes.
// SIZE_MAX / 2 rows of 4 floats overflow on 32-bit targets alike.
#include <microattn/microattn.hpp>

#include <cstdint>
namespace ma = microattn;
static const float w[64 * 64] = {};
ma::MultiHeadAttention<SIZE_MAX / 2, 4, 1> layer{{w, w, w}};
int main() { return static_cast<int>(layer.forward({w, 1, 4, 4}, {nullptr, 1, 4, 4})); }
