// The bad-input contract, one test per row of docs/errors.md "Bad arguments": every entry point, every class of bad
// argument, the Status it returns — and, on every error, not one byte written: each call is followed by a
// bitwise comparison of the whole output buffer, its row gaps and the guard zones around it (and of the
// workspace and the layer's caller-visible buffers).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "microattn/microattn.h"
#include "test_support.hpp"

namespace ma = microattn;
using namespace testing_support;
using S = ma::Status;

namespace {

// Records snapshots of some buffers and checks, after each call, that the call returned `want` and that
// every buffer is bit-for-bit as before.
class Untouched {
 public:
  explicit Untouched(std::initializer_list<const Guarded*> buffers) : buffers_(buffers) {
    for (const Guarded* b : buffers_) before_.push_back(b->snapshot());
  }
  void expect(S got, S want, const char* what) const {
    EXPECT_EQ(got, want) << what << ": got " << ma::to_string(got);
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      EXPECT_EQ(buffers_[i]->snapshot(), before_[i]) << what << ": buffer " << i << " written on error";
  }

 private:
  std::vector<const Guarded*> buffers_;
  std::vector<std::vector<std::uint32_t>> before_;
};

// p moved by `bytes` (1, 2 or 3): a float pointer that is not 4-byte aligned, as into a uint8_t model blob.
template <class T>
T* shifted(T* p, std::size_t bytes) {
  using Byte = std::conditional_t<std::is_const<T>::value, const unsigned char, unsigned char>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(p) + bytes);
}
template <class T>
ma::MatrixView<T> shifted(ma::MatrixView<T> v, std::size_t bytes) {
  return {shifted(v.data, bytes), v.rows, v.cols, v.stride};
}
constexpr std::size_t byte_offsets[] = {1, 2, 3};

// ---- matmul -----------------------------------------------------------------------------------------------

struct MatmulArgs {
  Guarded a{4, 3, 5}, b{3, 5, 6}, c{4, 5, 7};
  MatmulArgs() {
    Uniform u(1);
    a.fill(u);
    b.fill(u);
    c.fill(u);
  }
};

TEST(BadInput, MatmulNullPointer) {
  MatmulArgs m;
  const Untouched t{&m.c};
  t.expect(ma::matmul({nullptr, 4, 3, 5}, m.b.cview(), m.c.view()), S::null_pointer, "a null");
  t.expect(ma::matmul(m.a.cview(), {nullptr, 3, 5, 6}, m.c.view()), S::null_pointer, "b null");
  t.expect(ma::matmul(m.a.cview(), m.b.cview(), {nullptr, 4, 5, 7}), S::null_pointer, "c null");
}

TEST(BadInput, MatmulMisaligned) {
  MatmulArgs m;
  const Untouched t{&m.a, &m.b, &m.c};
  for (std::size_t off : byte_offsets) {
    SCOPED_TRACE(off);
    t.expect(ma::matmul(shifted(m.a.cview(), off), m.b.cview(), m.c.view()), S::misaligned, "a");
    t.expect(ma::matmul(m.a.cview(), shifted(m.b.cview(), off), m.c.view(), false), S::misaligned, "b");
    t.expect(ma::matmul(m.a.cview(), m.b.cview(), shifted(m.c.view(), off)), S::misaligned, "c");
    // Order: null pointers first, then alignment, then shapes.
    t.expect(ma::matmul({nullptr, 4, 3, 5}, m.b.cview(), shifted(m.c.view(), off)), S::null_pointer, "null first");
    t.expect(ma::matmul(m.a.cview(), m.b.cview(), {shifted(m.c.data(), off), 4, 4, 7}), S::misaligned,
             "before the shape");
  }
}

TEST(BadInput, MatmulZeroDimension) {
  MatmulArgs m;
  const Untouched t{&m.c};
  t.expect(ma::matmul({m.a.data(), 0, 3, 5}, m.b.cview(), {m.c.data(), 0, 5, 7}), S::invalid_shape, "m = 0");
  t.expect(ma::matmul({m.a.data(), 4, 0, 5}, {m.b.data(), 0, 5, 6}, m.c.view()), S::invalid_shape, "k = 0");
  t.expect(ma::matmul(m.a.cview(), {m.b.data(), 3, 0, 6}, {m.c.data(), 4, 0, 7}), S::invalid_shape, "n = 0");
}

TEST(BadInput, MatmulMismatchedDimension) {
  MatmulArgs m;
  const Untouched t{&m.c};
  t.expect(ma::matmul(m.a.cview(), {m.b.data(), 2, 5, 6}, m.c.view()), S::invalid_shape, "b rows != a cols");
  t.expect(ma::matmul(m.a.cview(), m.b.cview(), {m.c.data(), 3, 5, 7}), S::invalid_shape, "c rows != m");
  t.expect(ma::matmul(m.a.cview(), m.b.cview(), {m.c.data(), 4, 4, 7}), S::invalid_shape, "c cols != n");
  t.expect(ma::matmul(m.a.cview(), m.b.cview(), m.c.view(), true), S::invalid_shape, "transpose_b: b not n×k");
}

TEST(BadInput, MatmulStrideSmallerThanCols) {
  MatmulArgs m;
  const Untouched t{&m.c};
  t.expect(ma::matmul({m.a.data(), 4, 3, 2}, m.b.cview(), m.c.view()), S::invalid_shape, "a");
  t.expect(ma::matmul(m.a.cview(), {m.b.data(), 3, 5, 4}, m.c.view()), S::invalid_shape, "b");
  t.expect(ma::matmul(m.a.cview(), m.b.cview(), {m.c.data(), 4, 5, 4}), S::invalid_shape, "c");
}

TEST(BadInput, MatmulExtentOverflows) {
  MatmulArgs m;
  const Untouched t{&m.c};
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 2;
  t.expect(ma::matmul(m.a.cview(), m.b.cview(), {m.c.data(), huge, 5, 7}), S::invalid_shape, "rows·stride");
  t.expect(ma::matmul({m.a.data(), 4, huge, huge}, m.b.cview(), m.c.view()), S::invalid_shape, "cols");
}

TEST(BadInput, MatmulOutputOverlapsAnInput) {
  Guarded buf(8, 8);
  Uniform u(2);
  buf.fill(u);
  const Untouched t{&buf};
  float* d = buf.data();
  t.expect(ma::matmul({d, 4, 4, 8}, {d + 32, 4, 4, 8}, {d, 4, 4, 8}), S::aliasing, "c is a");
  t.expect(ma::matmul({d, 2, 2, 8}, {d + 16, 2, 2, 8}, {d + 25, 2, 2, 8}), S::aliasing, "c shares one element of b");
  t.expect(ma::matmul({d, 2, 2, 8}, {d + 16, 2, 2, 8}, {d + 9, 2, 2, 3}), S::aliasing, "other stride, spans meet");
}

// ---- softmax_rows, exp_elements ------------------------------------------------------------------------

TEST(BadInput, SoftmaxRows) {
  Guarded x(3, 4, 5);
  Uniform u(3);
  x.fill(u);
  const Untouched t{&x};
  t.expect(ma::softmax_rows({nullptr, 3, 4, 5}), S::null_pointer, "null");
  t.expect(ma::softmax_rows({x.data(), 0, 4, 5}), S::invalid_shape, "0 rows");
  t.expect(ma::softmax_rows({x.data(), 3, 0, 5}), S::invalid_shape, "0 cols");
  t.expect(ma::softmax_rows({x.data(), 3, 4, 3}), S::invalid_shape, "stride < cols");
  t.expect(ma::softmax_rows({x.data(), std::numeric_limits<std::size_t>::max(), 4, 5}), S::invalid_shape,
           "extent overflows");
}

TEST(BadInput, SoftmaxAndExpMisaligned) {
  Guarded x(3, 4, 5), y(1, 40);
  Uniform u(3);
  x.fill(u);
  y.fill(u);
  const Untouched t{&x, &y};
  for (std::size_t off : byte_offsets) {
    SCOPED_TRACE(off);
    t.expect(ma::softmax_rows(shifted(x.view(), off)), S::misaligned, "softmax x");
    t.expect(ma::softmax_rows({shifted(x.data(), off), 3, 4, 3}), S::misaligned, "softmax: before the shape");
    t.expect(ma::exp_elements(shifted(x.data(), off), y.data(), 5), S::misaligned, "exp x");
    t.expect(ma::exp_elements(x.data(), shifted(y.data(), off), 5), S::misaligned, "exp y");
    t.expect(ma::exp_elements(shifted(y.data(), off), shifted(y.data(), off), 5), S::misaligned, "exp in place");
    t.expect(ma::exp_elements(shifted(x.data(), off), nullptr, 5), S::null_pointer, "exp: null first");
  }
  t.expect(ma::exp_elements(shifted(x.data(), 1), shifted(y.data(), 2), 0), S::ok, "n = 0 reads no pointer");
}

TEST(BadInput, ExpElements) {
  Guarded x(1, 40), y(1, 40);
  Uniform u(4);
  x.fill(u);
  y.fill(u);
  const Untouched t{&x, &y};
  t.expect(ma::exp_elements(nullptr, y.data(), 3), S::null_pointer, "x null");
  t.expect(ma::exp_elements(x.data(), nullptr, 3), S::null_pointer, "y null");
  t.expect(ma::exp_elements(nullptr, nullptr, 0), S::ok, "n = 0 is a valid empty call");
  t.expect(ma::exp_elements(x.data(), x.data() + 1, 5), S::aliasing, "y overlaps x, shifted");
  t.expect(ma::exp_elements(x.data(), y.data(), std::numeric_limits<std::size_t>::max() / 2), S::invalid_shape,
           "n overflows");
}

// ---- attention ---------------------------------------------------------------------------------------------

struct AttentionArgs {
  static constexpr std::size_t n_q = 6, n_kv = 9, d_k = 4, d_v = 5;
  Guarded q{n_q, d_k}, k{n_kv, d_k}, v{n_kv, d_v}, mask{n_q, n_kv}, out{n_q, d_v, d_v + 2};
  Guarded ws{1, ma::attention_workspace_floats(d_k, d_v)};
  std::size_t need = ma::attention_workspace_floats(d_k, d_v);
  AttentionArgs() {
    Uniform u(5);
    q.fill(u);
    k.fill(u);
    v.fill(u);
    mask.fill(u);
    out.fill(u);
    ws.fill(u);
  }
  S call(ma::MatrixView<const float> Q, ma::MatrixView<const float> K, ma::MatrixView<const float> V,
         ma::MatrixView<float> O, const ma::AttentionOptions& o = {}) {
    return ma::attention(Q, K, V, O, ws.data(), need, o);
  }
};

TEST(BadInput, AttentionNullPointer) {
  AttentionArgs a;
  const Untouched t{&a.out, &a.ws};
  t.expect(a.call({nullptr, 6, 4, 4}, a.k.cview(), a.v.cview(), a.out.view()), S::null_pointer, "q");
  t.expect(a.call(a.q.cview(), {nullptr, 9, 4, 4}, a.v.cview(), a.out.view()), S::null_pointer, "k");
  t.expect(a.call(a.q.cview(), a.k.cview(), {nullptr, 9, 5, 5}, a.out.view()), S::null_pointer, "v");
  t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), {nullptr, 6, 5, 7}), S::null_pointer, "out");
  t.expect(ma::attention(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), nullptr, a.need), S::null_pointer,
           "workspace");
}

TEST(BadInput, AttentionMisaligned) {
  AttentionArgs a;
  const Untouched t{&a.out, &a.ws, &a.q, &a.k, &a.v, &a.mask};
  ma::AttentionOptions o;
  o.mask = a.mask.cview();
  for (std::size_t off : byte_offsets) {
    SCOPED_TRACE(off);
    t.expect(a.call(shifted(a.q.cview(), off), a.k.cview(), a.v.cview(), a.out.view(), o), S::misaligned, "q");
    t.expect(a.call(a.q.cview(), shifted(a.k.cview(), off), a.v.cview(), a.out.view(), o), S::misaligned, "k");
    t.expect(a.call(a.q.cview(), a.k.cview(), shifted(a.v.cview(), off), a.out.view(), o), S::misaligned, "v");
    t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), shifted(a.out.view(), off), o), S::misaligned, "out");
    ma::AttentionOptions om = o;
    om.mask = shifted(a.mask.cview(), off);
    t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), om), S::misaligned, "mask");
    // The workspace: the AVX builds' aligned stores once crashed on it. Any 4-byte-aligned address is fine
    // (AttentionWorkspaceAtEvery4ByteOffsetIsFine); anything else is refused, even with room to spare.
    t.expect(
        ma::attention(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), shifted(a.ws.data(), off), a.need - 1, o),
        S::misaligned, "workspace (checked before its size)");
    // Order: null pointers, alignment, shapes, workspace size, overlaps.
    t.expect(ma::attention(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), nullptr, a.need, om), S::null_pointer,
             "a null workspace before a misaligned mask");
    t.expect(a.call(a.q.cview(), {a.k.data(), 9, 3, 4}, a.v.cview(), shifted(a.out.view(), off)), S::misaligned,
             "before the shape");
    t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), {shifted(a.v.data(), off), 6, 5, 5}), S::misaligned,
             "before the overlap");
  }
}

TEST(BadInput, AttentionWorkspaceAtEvery4ByteOffsetIsFine) {
  // The AVX builds carve 64-byte-aligned tiles out of the workspace: every float-aligned start (the 16 offsets
  // within a cache line) must work, and give the same bits (a 1-3 byte offset is `misaligned`, above).
  AttentionArgs a;
  std::vector<float> block(a.need + 16), first;
  for (std::size_t off = 0; off < 16; ++off) {
    ASSERT_EQ(ma::attention(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), block.data() + off, a.need), S::ok)
        << off;
    if (off == 0) {
      for (std::size_t i = 0; i < 6; ++i)
        for (std::size_t c = 0; c < 5; ++c) first.push_back(a.out.at(i, c));
    }
    for (std::size_t i = 0; i < 6; ++i)
      for (std::size_t c = 0; c < 5; ++c) ASSERT_EQ(a.out.at(i, c), first[i * 5 + c]) << off;
  }
  EXPECT_TRUE(a.out.canaries_intact());
}

TEST(BadInput, AttentionZeroDimension) {
  AttentionArgs a;
  const Untouched t{&a.out, &a.ws};
  t.expect(a.call({a.q.data(), 0, 4, 4}, a.k.cview(), a.v.cview(), {a.out.data(), 0, 5, 7}), S::invalid_shape,
           "n_q = 0");
  t.expect(a.call(a.q.cview(), {a.k.data(), 0, 4, 4}, {a.v.data(), 0, 5, 5}, a.out.view()), S::invalid_shape,
           "n_kv = 0");
  t.expect(a.call({a.q.data(), 6, 0, 4}, {a.k.data(), 9, 0, 4}, a.v.cview(), a.out.view()), S::invalid_shape,
           "d_k = 0");
  t.expect(a.call(a.q.cview(), a.k.cview(), {a.v.data(), 9, 0, 5}, {a.out.data(), 6, 0, 7}), S::invalid_shape,
           "d_v = 0");
}

TEST(BadInput, AttentionMismatchedDimension) {
  AttentionArgs a;
  const Untouched t{&a.out, &a.ws};
  t.expect(a.call(a.q.cview(), {a.k.data(), 9, 3, 4}, a.v.cview(), a.out.view()), S::invalid_shape, "k.cols != d_k");
  t.expect(a.call(a.q.cview(), a.k.cview(), {a.v.data(), 8, 5, 5}, a.out.view()), S::invalid_shape, "v.rows != n_kv");
  t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), {a.out.data(), 5, 5, 7}), S::invalid_shape, "out.rows != n_q");
  t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), {a.out.data(), 6, 4, 7}), S::invalid_shape, "out.cols != d_v");
}

TEST(BadInput, AttentionStrideSmallerThanCols) {
  AttentionArgs a;
  const Untouched t{&a.out, &a.ws};
  t.expect(a.call({a.q.data(), 6, 4, 3}, a.k.cview(), a.v.cview(), a.out.view()), S::invalid_shape, "q");
  t.expect(a.call(a.q.cview(), {a.k.data(), 9, 4, 2}, a.v.cview(), a.out.view()), S::invalid_shape, "k");
  t.expect(a.call(a.q.cview(), a.k.cview(), {a.v.data(), 9, 5, 4}, a.out.view()), S::invalid_shape, "v");
  t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), {a.out.data(), 6, 5, 4}), S::invalid_shape, "out");
}

TEST(BadInput, AttentionHeadDimensionTooLarge) {
  AttentionArgs a;
  const Untouched t{&a.out, &a.ws};
  const std::size_t big = ma::attention_max_head_dim + 1;
  // Views claiming a huge head size over the small buffers: rejected on the size before anything is read.
  t.expect(a.call({a.q.data(), 1, big, big}, {a.k.data(), 1, big, big}, {a.v.data(), 1, 5, 5}, {a.out.data(), 1, 5, 7}),
           S::invalid_shape, "d_k > attention_max_head_dim");
}

TEST(BadInput, AttentionMaskOfTheWrongShape) {
  AttentionArgs a;
  const Untouched t{&a.out, &a.ws};
  ma::AttentionOptions o;
  o.mask = {a.mask.data(), 6, 8, 9};
  t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), o), S::invalid_shape, "mask cols != n_kv");
  o.mask = {a.mask.data(), 5, 9, 9};
  t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), o), S::invalid_shape, "mask rows != n_q");
  o.mask = {a.mask.data(), 6, 9, 8};
  t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), o), S::invalid_shape, "mask stride < cols");
}

TEST(BadInput, AttentionWorkspaceTooSmall) {
  AttentionArgs a;
  const Untouched t{&a.out, &a.ws};
  t.expect(ma::attention(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), a.ws.data(), a.need - 1),
           S::workspace_too_small, "one float short");
  t.expect(ma::attention(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), a.ws.data(), 0), S::workspace_too_small,
           "size 0");
}

TEST(BadInput, AttentionOutputOverlapsAnInput) {
  AttentionArgs a;
  const Untouched t{&a.out, &a.ws, &a.v, &a.mask, &a.k};
  ma::AttentionOptions o;
  o.mask = a.mask.cview();
  t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), {a.v.data(), 6, 5, 5}), S::aliasing, "out is v");
  t.expect(a.call(a.q.cview(), a.k.cview(), a.v.cview(), {a.mask.data() + 1, 6, 5, 9}, o), S::aliasing,
           "out inside the mask");
  t.expect(ma::attention(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), a.k.data(), a.need), S::aliasing,
           "workspace overlaps k");
  t.expect(ma::attention(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), a.out.data() - 3, a.need), S::aliasing,
           "workspace overlaps out");
  // The order of the checks: a too-small workspace is reported before any overlap (found by the fuzzer).
  t.expect(ma::attention(a.q.cview(), a.k.cview(), a.v.cview(), {a.v.data(), 6, 5, 5}, a.ws.data(), a.need - 1),
           S::workspace_too_small, "out is v and the workspace is short");
}

TEST(BadInput, AttentionCausalOffsetHidingEveryKeyIsValidAndGivesZeros) {
  AttentionArgs a;
  for (std::ptrdiff_t off : {std::ptrdiff_t{-6}, std::ptrdiff_t{-100}, std::numeric_limits<std::ptrdiff_t>::min()}) {
    ma::AttentionOptions o;
    o.causal = true;
    o.causal_offset = off;
    ASSERT_EQ(a.call(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), o), S::ok);
    for (std::size_t i = 0; i < 6; ++i)
      for (std::size_t c = 0; c < 5; ++c) EXPECT_EQ(a.out.at(i, c), 0.0f);
    EXPECT_TRUE(a.out.canaries_intact());
  }
}

TEST(BadInput, AttentionWorkspaceFloatsIsAFormulaNotACheck) {
  // attention_workspace_floats never fails (constexpr); attention() itself rejects head sizes it cannot take.
  static_assert(ma::attention_workspace_floats(0, 0) ==
                    3 * ma::attention_block_q + 16 + ma::attention_block_q * ma::attention_block_kv,
                "defined for every input");
  static_assert(ma::attention_workspace_floats(64, 64) > ma::attention_workspace_floats(64, 32), "grows with d_v");
  // Past size_t it saturates (it once wrapped: (SIZE_MAX, 0) gave 2128), so no workspace is ever big enough.
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  static_assert(ma::attention_workspace_floats(max, 0) == max, "saturates");
  static_assert(ma::attention_workspace_floats(0, max) == max, "saturates");
  static_assert(ma::attention_workspace_floats(max / 2, max / 2) == max, "saturates");
  static_assert(ma::attention_workspace_floats(max / ma::attention_block_q, 0) == max, "saturates");
  EXPECT_EQ(ma::attention_workspace_floats(max - ma::attention_block_kv - 3, 0), max);
  AttentionArgs a;
  const Untouched t{&a.out, &a.ws};
  const std::size_t big = ma::attention_max_head_dim + 1;
  t.expect(ma::attention({a.q.data(), 1, big, big}, {a.k.data(), 1, big, big}, {a.v.data(), 1, 5, 5},
                         {a.out.data(), 1, 5, 7}, a.ws.data(), max),
           S::invalid_shape, "a head size attention() cannot take, even with a SIZE_MAX workspace");
}

TEST(BadInput, AttentionOutLaterInTheCallersWorkspaceIsNotChecked) {
  // Only the first attention_workspace_floats(d_k, d_v) floats are used, so only they are overlap-checked:
  // `out` placed after them, inside a larger block the caller calls its workspace, is fine (and harmless).
  AttentionArgs a;
  std::vector<float> block(a.need + 6 * 5);
  ma::MatrixView<float> out_after{block.data() + a.need, 6, 5, 5};
  EXPECT_EQ(ma::attention(a.q.cview(), a.k.cview(), a.v.cview(), out_after, block.data(), block.size()), S::ok);
  ma::MatrixView<float> out_inside{block.data() + a.need - 1, 6, 5, 5};
  EXPECT_EQ(ma::attention(a.q.cview(), a.k.cview(), a.v.cview(), out_inside, block.data(), block.size()), S::aliasing);
}

TEST(BadInput, AttentionScaleMinusZeroIsTheDefault) {
  // scale == 0 (+0.0f or −0.0f, which compare equal) selects 1/sqrt(d_k): documented, not an error.
  AttentionArgs a, b;
  ma::AttentionOptions plus, minus;
  plus.scale = 0.0f;
  minus.scale = -0.0f;
  ASSERT_EQ(a.call(a.q.cview(), a.k.cview(), a.v.cview(), a.out.view(), plus), S::ok);
  ASSERT_EQ(b.call(b.q.cview(), b.k.cview(), b.v.cview(), b.out.view(), minus), S::ok);
  EXPECT_EQ(a.out.snapshot(), b.out.snapshot());
}

// ---- layers ------------------------------------------------------------------------------------------------

struct LayerArgs {
  std::vector<float> w = std::vector<float>(64 * 64, 0.01f);
  ma::MultiHeadAttention<64, 64, 4> layer{
      {w.data(), w.data(), w.data(), w.data(), w.data(), w.data(), w.data(), w.data()}};
  Guarded x{65, 64}, y{65, 64}, mask{10, 10};
  ma::MatrixView<const float> x10{};
  ma::MatrixView<float> y10{};
  LayerArgs() {
    Uniform u(6);
    x.fill(u);
    y.fill(u);
    mask.fill(u);
    x10 = {x.data(), 10, 64, 64};
    y10 = {y.data(), 10, 64, 64};
  }
};

TEST(BadInput, LayerNullPointer) {
  LayerArgs l;
  const Untouched t{&l.y};
  t.expect(l.layer.forward({nullptr, 10, 64, 64}, l.y10), S::null_pointer, "x");
  t.expect(l.layer.forward(l.x10, {nullptr, 10, 64, 64}), S::null_pointer, "y");
  t.expect(l.layer.forward(l.x10, {nullptr, 10, 64, 64}, l.y10), S::null_pointer, "context");
  for (int which = 0; which < 3; ++which) {
    ma::LayerWeights w = l.layer.weights();
    (which == 0 ? w.q_weight : which == 1 ? w.k_weight : w.v_weight) = nullptr;
    ma::MultiHeadAttention<64, 64, 4> broken{w};
    t.expect(broken.forward(l.x10, l.y10), S::null_pointer, "a q/k/v weight");
  }
}

TEST(BadInput, LayerMisaligned) {
  LayerArgs l;
  Guarded ctx(10, 64);
  Uniform u(8);
  ctx.fill(u);
  const Untouched t{&l.y, &l.x, &ctx, &l.mask};
  for (std::size_t off : byte_offsets) {
    SCOPED_TRACE(off);
    t.expect(l.layer.forward(shifted(l.x10, off), l.y10), S::misaligned, "x");
    t.expect(l.layer.forward(l.x10, shifted(l.y10, off)), S::misaligned, "y");
    t.expect(l.layer.forward(l.x10, shifted(ctx.cview(), off), l.y10), S::misaligned, "context");
    ma::AttentionOptions o;
    o.mask = shifted(l.mask.cview(), off);
    t.expect(l.layer.forward(l.x10, l.y10, o), S::misaligned, "mask");
    for (int which = 0; which < 8; ++which) {  // each weight and bias array
      ma::LayerWeights w = l.layer.weights();
      const float** slot[] = {&w.q_weight, &w.k_weight, &w.v_weight,   &w.q_bias,
                              &w.k_bias,   &w.v_bias,   &w.out_weight, &w.out_bias};
      *slot[which] = shifted(*slot[which], off);
      ma::MultiHeadAttention<64, 64, 4> moved{w};
      t.expect(moved.forward(l.x10, l.y10), S::misaligned, "a weight or bias");
    }
    t.expect(l.layer.forward({shifted(l.x.data(), off), 65, 64, 64}, l.y.view()), S::misaligned,
             "before the capacity check");
    t.expect(l.layer.forward(shifted(l.x10, off), {nullptr, 10, 64, 64}), S::null_pointer, "null first");
  }
}

TEST(BadInput, LayerOutBiasWithoutOutWeight) {
  // A bias for a projection that is not there: refused (it used to be ignored, yet overlap-checked).
  LayerArgs l;
  const Untouched t{&l.y};
  ma::LayerWeights w = l.layer.weights();
  w.out_weight = nullptr;
  ma::MultiHeadAttention<64, 64, 4> broken{w};
  t.expect(broken.forward(l.x10, l.y10), S::null_pointer, "out_bias without out_weight");
  w.out_bias = nullptr;
  ma::MultiHeadAttention<64, 64, 4> heads_only{w};
  EXPECT_EQ(heads_only.forward(l.x10, l.y10), S::ok);
}

TEST(BadInput, LayerSequenceLongerThanCapacity) {
  LayerArgs l;
  const Untouched t{&l.y};
  t.expect(l.layer.forward(l.x.cview(), l.y.view()), S::invalid_shape, "65 rows > MaxSeq 64");
  t.expect(l.layer.forward(l.x10, {l.x.data(), 65, 64, 64}, l.y10), S::invalid_shape, "context 65 rows");
}

TEST(BadInput, LayerZeroOrMismatchedDimension) {
  LayerArgs l;
  const Untouched t{&l.y};
  t.expect(l.layer.forward({l.x.data(), 0, 64, 64}, {l.y.data(), 0, 64, 64}), S::invalid_shape, "0 rows");
  t.expect(l.layer.forward({l.x.data(), 10, 63, 64}, {l.y.data(), 10, 63, 64}), S::invalid_shape, "cols != ModelDim");
  t.expect(l.layer.forward(l.x10, {l.y.data(), 9, 64, 64}), S::invalid_shape, "y rows != x rows");
  t.expect(l.layer.forward(l.x10, {l.x.data(), 10, 32, 64}, l.y10), S::invalid_shape, "context cols");
  t.expect(l.layer.forward({l.x.data(), 10, 64, 60}, l.y10), S::invalid_shape, "stride < cols");
}

TEST(BadInput, LayerMaskOfTheWrongShape) {
  LayerArgs l;
  const Untouched t{&l.y};
  ma::AttentionOptions o;
  o.mask = {l.mask.data(), 10, 9, 10};
  t.expect(l.layer.forward(l.x10, l.y10, o), S::invalid_shape, "10×9 mask for 10×10 scores");
  o.mask = {l.mask.data(), 9, 10, 10};
  t.expect(l.layer.forward(l.x10, l.y10, o), S::invalid_shape, "9×10 mask");
}

TEST(BadInput, LayerOutputOverlapsAnInput) {
  LayerArgs l;
  const Untouched t{&l.y, &l.x};
  t.expect(l.layer.forward({l.y.data() + 64, 10, 64, 64}, l.y10), S::aliasing, "y overlaps x by 9 rows");
  t.expect(l.layer.forward({l.y.data(), 10, 64, 64}, {l.y.data(), 10, 64, 65}), S::aliasing,
           "same start, other stride");
  t.expect(l.layer.forward(l.x10, {l.y.data() + 1, 10, 64, 64}, l.y10), S::aliasing, "y overlaps the context");
  ma::AttentionOptions o;
  o.mask = {l.y.data(), 10, 10, 10};
  t.expect(l.layer.forward(l.x10, l.y10, o), S::aliasing, "y overlaps the mask");
  // y over a weight array
  std::vector<float> w = l.w;
  ma::MultiHeadAttention<16, 64, 4> over{{w.data(), w.data(), w.data()}};
  const auto before = w;
  EXPECT_EQ(over.forward(l.x10, {w.data(), 10, 64, 64}), S::aliasing);
  EXPECT_EQ(w, before);
}

TEST(BadInput, LayerInPlaceIsNotAnError) {
  LayerArgs l;
  EXPECT_EQ(l.layer.forward(l.x10, {l.x.data(), 10, 64, 64}), S::ok);
  EXPECT_EQ(l.layer.forward(l.x10, {l.y.data(), 10, 64, 64}, {l.y.data(), 10, 64, 64}), S::ok);  // y == context
}

TEST(BadInput, LayerCausalOffsetHidingEveryKeyGivesTheOutputBias) {
  // Every head outputs zeros, so y is exactly the output projection's bias.
  LayerArgs l;
  ma::AttentionOptions o;
  o.causal = true;
  o.causal_offset = -10;
  ASSERT_EQ(l.layer.forward(l.x10, l.y10, o), S::ok);
  for (std::size_t i = 0; i < 10; ++i)
    for (std::size_t c = 0; c < 64; ++c) EXPECT_EQ(l.y.at(i, c), 0.01f);
}

// ---- append / attend (the decoding entry points): every bad argument, and the cache untouched ---------------

// A layer holding 60 of its 64 rows, and whether a call changed its cache bookkeeping.
struct DecodeArgs : LayerArgs {
  DecodeArgs() { EXPECT_EQ(layer.append({x.data(), 60, 64, 64}, {y.data(), 60, 64, 64}), S::ok); }
  void expect_cache_unchanged(const char* what) const {
    EXPECT_EQ(layer.cached(), 60u) << what;
    EXPECT_EQ(layer.position(), 60u) << what;
  }
};

TEST(BadInput, AppendAndAttendNullPointer) {
  DecodeArgs l;
  const Untouched t{&l.y};
  t.expect(l.layer.append({nullptr, 1, 64, 64}, l.y10), S::null_pointer, "append x");
  t.expect(l.layer.append(l.x10, {nullptr, 10, 64, 64}), S::null_pointer, "append y");
  t.expect(l.layer.attend({nullptr, 1, 64, 64}, l.y10), S::null_pointer, "attend query");
  t.expect(l.layer.attend(l.x10, {nullptr, 10, 64, 64}), S::null_pointer, "attend y");
  ma::LayerWeights w = l.layer.weights();
  w.k_weight = nullptr;
  ma::MultiHeadAttention<64, 64, 4> broken{w};
  t.expect(broken.append(l.x10, l.y10), S::null_pointer, "append, a missing k weight");
  t.expect(broken.attend(l.x10, l.y10), S::null_pointer, "attend, a missing k weight");
  l.expect_cache_unchanged("null pointers");
}

TEST(BadInput, AppendAndAttendShapes) {
  DecodeArgs l;
  const Untouched t{&l.y};
  t.expect(l.layer.append({l.x.data(), 0, 64, 64}, {l.y.data(), 0, 64, 64}), S::invalid_shape, "append 0 rows");
  t.expect(l.layer.append({l.x.data(), 2, 63, 64}, {l.y.data(), 2, 63, 64}), S::invalid_shape, "cols != ModelDim");
  t.expect(l.layer.append(l.x10, {l.y.data(), 9, 64, 64}), S::invalid_shape, "append y rows != x rows");
  t.expect(l.layer.append({l.x.data(), 2, 64, 60}, {l.y.data(), 2, 64, 64}), S::invalid_shape, "stride < cols");
  t.expect(l.layer.append({l.x.data(), 5, 64, 64}, {l.y.data(), 5, 64, 64}), S::invalid_shape, "60 + 5 > MaxSeq");
  t.expect(l.layer.append(l.x.cview(), l.y.view()), S::invalid_shape, "65 rows > MaxSeq");
  t.expect(l.layer.attend({l.x.data(), 0, 64, 64}, {l.y.data(), 0, 64, 64}), S::invalid_shape, "attend 0 rows");
  t.expect(l.layer.attend(l.x10, {l.y.data(), 10, 32, 64}), S::invalid_shape, "attend y cols");
  ma::AttentionOptions o;
  o.mask = {l.mask.data(), 2, 61, 61};
  t.expect(l.layer.append({l.x.data(), 2, 64, 64}, {l.y.data(), 2, 64, 64}, o), S::invalid_shape,
           "append mask 2×61, needs 2×62");
  o.mask = {l.mask.data(), 10, 10, 10};
  t.expect(l.layer.attend(l.x10, l.y10, o), S::invalid_shape, "attend mask 10×10, needs 10×60");
  l.expect_cache_unchanged("shapes");
  // An empty cache has nothing to attend to.
  l.layer.reset();
  t.expect(l.layer.attend(l.x10, l.y10), S::invalid_shape, "attend, empty cache");
}

TEST(BadInput, AppendAndAttendConfiguration) {
  // A rope configuration that cannot be: odd or too many rope_dims (HeadDim is 16); a base that is negative, NaN,
  // infinite, or below 1 (frequencies up to 1/θ: position · frequency can overflow, and sin/cos of inf is NaN),
  // down to subnormal (1e−38, 1e−45: the layer's logarithm reads the exponent field).
  LayerArgs l;
  const Untouched t{&l.y};
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const struct {
    float theta;
    std::size_t dims;
  } bad_configs[] = {{10000.0f, 3},    {10000.0f, 18}, {-1.0f, 0},  {nan, 0},    {inf, 0},   {-inf, 0},
                     {0.99999994f, 0}, {0.5f, 0},      {1e-20f, 0}, {1e-38f, 0}, {1e-45f, 0}};
  for (const auto& b : bad_configs) {
    SCOPED_TRACE(::testing::Message() << "theta " << b.theta << " dims " << b.dims);
    ma::LayerConfig cfg;
    cfg.rope_theta = b.theta;
    cfg.rope_dims = b.dims;
    ma::MultiHeadAttention<64, 64, 4> bad{l.layer.weights(), cfg};
    t.expect(bad.forward(l.x10, l.y10), S::invalid_shape, "forward, bad rope");
    t.expect(bad.append(l.x10, l.y10), S::invalid_shape, "append, bad rope");
    EXPECT_EQ(bad.cached(), 0u);
  }
  // The extremes of the bases accepted, 1 and FLT_MAX, compute (finite outputs of finite inputs).
  for (float theta : {1.0f, std::numeric_limits<float>::max()}) {
    ma::LayerConfig cfg;
    cfg.rope_theta = theta;
    auto edge = std::make_unique<ma::MultiHeadAttention<64, 64, 4>>(l.layer.weights(), cfg);
    Guarded y(10, 64);
    ASSERT_EQ(edge->append(l.x10, y.view()), S::ok) << theta;
    ASSERT_EQ(edge->attend(l.x10, y.view()), S::ok) << theta;
    for (std::size_t i = 0; i < 10; ++i)
      for (std::size_t c = 0; c < 64; ++c) EXPECT_TRUE(std::isfinite(y.at(i, c))) << theta;
  }
  // A ring layer (config.window) takes no mask in append, and no options.window wider than its own.
  ma::LayerConfig ring;
  ring.window = 8;
  ma::MultiHeadAttention<64, 64, 4> r{l.layer.weights(), ring};
  ma::AttentionOptions o;
  o.mask = {l.mask.data(), 1, 1, 1};
  t.expect(r.append({l.x.data(), 1, 64, 64}, {l.y.data(), 1, 64, 64}, o), S::invalid_shape, "ring: mask");
  o.mask = {};
  o.window = 9;
  t.expect(r.append({l.x.data(), 1, 64, 64}, {l.y.data(), 1, 64, 64}, o), S::invalid_shape, "ring: wider window");
  t.expect(r.append({l.x.data(), 58, 64, 64}, {l.y.data(), 58, 64, 64}), S::invalid_shape, "ring: 7 + 58 > 64");
  EXPECT_EQ(r.position(), 0u);
  EXPECT_EQ(r.append({l.x.data(), 57, 64, 64}, {l.y.data() + 64 * 4, 1, 64, 64}), S::invalid_shape);  // y rows
}

TEST(BadInput, AppendAndAttendOverlaps) {
  DecodeArgs l;
  const Untouched t{&l.y, &l.x};
  t.expect(l.layer.append({l.y.data() + 64, 2, 64, 64}, {l.y.data(), 2, 64, 64}), S::aliasing, "append y overlaps x");
  t.expect(l.layer.append({l.y.data(), 2, 64, 64}, {l.y.data(), 2, 64, 65}), S::aliasing, "same start, other stride");
  t.expect(l.layer.attend({l.y.data() + 1, 10, 64, 64}, l.y10), S::aliasing, "attend y overlaps the query");
  ma::AttentionOptions o;
  o.mask = {l.y.data(), 2, 62, 62};
  t.expect(l.layer.append({l.x.data(), 2, 64, 64}, {l.y.data() + 64, 2, 64, 64}, o), S::aliasing,
           "append y overlaps the mask");
  l.expect_cache_unchanged("overlaps");
  std::vector<float> w = l.w;
  ma::MultiHeadAttention<16, 64, 4> over{{w.data(), w.data(), w.data()}};
  const auto before = w;
  EXPECT_EQ(over.append({l.x.data(), 1, 64, 64}, {w.data(), 1, 64, 64}), S::aliasing);
  EXPECT_EQ(over.cached(), 0u);
  EXPECT_EQ(w, before);
  // In place is fine: y exactly x (append) or exactly the query (attend).
  EXPECT_EQ(l.layer.attend(l.y10, {l.y.data(), 10, 64, 64}), S::ok);
  EXPECT_EQ(l.layer.append({l.x.data(), 1, 64, 64}, {l.x.data(), 1, 64, 64}), S::ok);
}

// ---- the C API's layer init and size functions -----------------------------------------------------------------

TEST(BadInput, CApiInitRejectsTheWeightsTheLayerRejects) {
  // microattn_layer_init checks the weights once, returning the status MultiHeadAttention::forward returns for
  // them on every call, and writes nothing on error (neither *layer nor the buffer): a C layer that init accepted
  // never fails on its weights.
  LayerArgs l;
  std::vector<float> buffer(MICROATTN_LAYER_BUFFER_FLOATS(64, 64, 4, 4), 0.5f);
  const std::vector<float> buffer_before = buffer;
  microattn_layer layer, before;  // canaries: 0xa5 bytes
  std::memset(&before, 0xa5, sizeof before);
  const Untouched t{&l.y};
  auto init = [&](const ma::LayerWeights& w) {
    const microattn_layer_weights c{w.q_weight, w.k_weight, w.v_weight,   w.q_bias,
                                    w.k_bias,   w.v_bias,   w.out_weight, w.out_bias};
    return static_cast<S>(microattn_layer_init(&layer, 64, 64, 4, 4, &c, buffer.data(), buffer.size()));
  };
  auto expect_same = [&](const ma::LayerWeights& w, S want, const char* what) {
    ma::MultiHeadAttention<64, 64, 4> cpp{w};
    t.expect(cpp.forward(l.x10, l.y10), want, what);
    std::memcpy(&layer, &before, sizeof layer);
    const S got = init(w);
    EXPECT_EQ(got, want) << what << ": init returned " << ma::to_string(got);
    EXPECT_EQ(std::memcmp(&layer, &before, sizeof layer), 0) << what << ": init wrote the layer";
    EXPECT_EQ(buffer, buffer_before) << what << ": init wrote the buffer";
  };
  for (std::size_t off : byte_offsets) {
    SCOPED_TRACE(off);
    for (int which = 0; which < 8; ++which) {
      ma::LayerWeights w = l.layer.weights();
      const float** slot[] = {&w.q_weight, &w.k_weight, &w.v_weight,   &w.q_bias,
                              &w.k_bias,   &w.v_bias,   &w.out_weight, &w.out_bias};
      *slot[which] = shifted(*slot[which], off);
      expect_same(w, S::misaligned, "a weight or bias misaligned");
    }
  }
  for (int which = 0; which < 3; ++which) {
    ma::LayerWeights w = l.layer.weights();
    (which == 0 ? w.q_weight : which == 1 ? w.k_weight : w.v_weight) = nullptr;
    expect_same(w, S::null_pointer, "a q/k/v weight null");
  }
  ma::LayerWeights w = l.layer.weights();
  w.out_weight = nullptr;
  expect_same(w, S::null_pointer, "out_bias without out_weight");
  w.q_bias = shifted(w.q_bias, 2);
  expect_same(w, S::null_pointer, "out_bias without out_weight before a misaligned bias");
  // Accepted: then the C layer's calls succeed too.
  ASSERT_EQ(init(l.layer.weights()), S::ok);
  EXPECT_EQ(microattn_layer_forward(&layer, {l.x.data(), 10, 64, 64}, {l.y.data(), 10, 64, 64}, nullptr), MICROATTN_OK);
  EXPECT_EQ(microattn_layer_append(&layer, {l.x.data(), 1, 64, 64}, {l.y.data(), 1, 64, 64}, nullptr), MICROATTN_OK);
}

TEST(BadInput, CApiSizesAreZeroWhereTheTemplateDoesNotCompile) {
  // microattn_layer_buffer_floats returns 0 exactly for the shapes whose MultiHeadAttention<...> fails its
  // static_asserts: the buffer's bytes past PTRDIFF_MAX (4·(SIZE_MAX / 8) floats of K/V fit a size_t, not its
  // bytes). The boundary from the formula: (PTRDIFF_MAX / 4 − scratch) / (2·kv_dim) rows.
  constexpr std::size_t max_floats = static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(float);
  const struct { std::size_t dim, heads, kv_heads; } shapes[] = {{1, 1, 1}, {2, 1, 1}, {64, 4, 2}, {48, 6, 3}};
  for (const auto& sh : shapes) {
    const std::size_t kv_dim = sh.kv_heads * (sh.dim / sh.heads);
    const std::size_t last = (max_floats - ma::layer_scratch_floats(sh.dim, sh.heads)) / (2 * kv_dim);
    for (std::size_t seq : {last - 1, last, last + 1}) {
      SCOPED_TRACE(testing::Message() << sh.dim << "/" << sh.heads << "/" << sh.kv_heads << " max_seq " << seq);
      const bool compiles = ma::detail::layer_kv_fits(seq, sh.dim, sh.heads, sh.kv_heads) &&
                            ma::detail::layer_tiles_fit(sh.dim) &&
                            ma::detail::layer_bytes_fit(seq, sh.dim, sh.heads, sh.kv_heads);
      EXPECT_EQ(compiles, seq <= last);
      EXPECT_EQ(microattn_layer_buffer_floats(seq, sh.dim, sh.heads, sh.kv_heads),
                compiles ? ma::layer_cache_floats(seq, sh.dim, sh.heads, sh.kv_heads) +
                               ma::layer_scratch_floats(sh.dim, sh.heads)
                         : 0);
    }
  }
  EXPECT_EQ(microattn_layer_buffer_floats(SIZE_MAX / 8, 2, 1, 1), 0u);
  EXPECT_FALSE(ma::detail::layer_bytes_fit(SIZE_MAX / 8, 2, 1, 1));
  // Where C++'s attention_workspace_floats saturates at SIZE_MAX, the C function returns 0 like the others.
  EXPECT_EQ(ma::attention_workspace_floats(SIZE_MAX, 0), SIZE_MAX);
  EXPECT_EQ(microattn_attention_workspace_floats(SIZE_MAX, 0), 0u);
}

}  // namespace
