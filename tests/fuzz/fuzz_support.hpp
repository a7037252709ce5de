// Shared machinery of the libFuzzer targets in tests/fuzz/ (no GoogleTest): a reader that decodes the fuzzer's
// bytes, a guarded arena in which every matrix of a call lives, the documented argument rules (shape validity,
// overlap) written out independently of the library, value generation, and fail().
//
// Every target lays its matrices out in one Arena of floats. Each matrix is a Mat: its first element's offset in
// the arena, rows, cols, stride, and whether the pointer handed to the library is null. Everything in the arena
// that is not an element of an input holds a NaN canary (guard_bits); outputs and workspaces start as another NaN
// (poison_bits). After each call the arena is compared bit for bit with its snapshot from before the call: on an
// error nothing may differ, on success only the elements of the output (and the workspace) may.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "microattn/microattn.hpp"
#include "tolerance.hpp"

namespace fuzz {

namespace ma = microattn;
using testing_support::Tolerance;

// ---- failing -----------------------------------------------------------------------------------------------

// Prints "FUZZ CHECK FAILED: <context>: <message>" and aborts, so libFuzzer saves the input as a crash artifact.
[[noreturn]] void fail(const char* format, ...) __attribute__((format(printf, 1, 2)));
// A one-line description of the call being checked, printed by fail() (each target sets it once decoded).
void set_context(const char* format, ...) __attribute__((format(printf, 1, 2)));

// MICROATTN_FUZZ_PLANT=value|status|canary plants a discrepancy into every check of that kind: a reference value
// moved just out of its tolerance, a wrong expected Status, a stray write outside the output. It proves the checks
// can fail (tests/fuzz/meson.build runs the seed corpus with each and expects a failure). Unset: none.
enum class Plant { none, value, status, canary };
Plant plant();

// ---- input decoding -----------------------------------------------------------------------------------------

// Reads the fuzzer's bytes front to back; past the end every read gives 0, so any prefix decodes to a call.
class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}
  std::uint8_t byte() { return p_ < end_ ? *p_++ : 0; }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(byte()) << (8 * i);
    return v;
  }
  std::size_t below(std::size_t n) { return byte() % n; }
  bool flag() { return (byte() & 1u) != 0; }

 private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

// splitmix64: the bulk of the float values comes from a generator seeded by the input.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

// A dimension: mostly 1..70 with the vector, register-tile and attention-tile edges (1, 4, 8, 16, 31..33, 63..65),
// sometimes 0; with `big`, also the matmul block edges (127..129, 255..257).
std::size_t dim(Reader& in, bool big = false);
// Row padding (stride − cols) and the gap before a matrix (which also misaligns it), in floats.
std::size_t pad(Reader& in);
std::size_t gap(Reader& in);

// ---- matrices in an arena ------------------------------------------------------------------------------------

struct Mat {
  std::size_t offset = 0;  // arena index of element (0, 0)
  std::size_t rows = 0, cols = 0, stride = 0;
  bool null = false;  // the library gets a null data pointer
};

// Elements spanned, (rows − 1)·stride + cols, exactly (no overflow); 0 for an empty shape.
unsigned __int128 extent(const Mat& m);
// The documented shape rule: non-zero dimensions, stride >= cols, and an extent that fits the address space
// (in bytes, at most PTRDIFF_MAX). The targets only make extents far beyond that, never borderline ones.
bool shape_ok(const Mat& m);
// Whether the spans [first element, last element] of two matrices meet.
bool spans_meet(const Mat& a, const Mat& b);
// Whether two matrices (shape_ok, inside the arena) share an element, by enumeration.
bool shares_element(const Mat& a, const Mat& b);
// The documented overlap rule: matrices with equal strides alias when they share an element; with different
// strides, when their spans meet (the conservative rule of src/check.hpp).
bool overlaps(const Mat& a, const Mat& b);
// Whether the span of `a` meets the contiguous array [offset, offset + floats) (the layers' weight rule).
bool meets_array(const Mat& a, std::size_t offset, std::size_t floats);

// Lays a rows × cols matrix out after `cursor` (and its gap), advancing the cursor past it.
Mat place(std::size_t& cursor, std::size_t rows, std::size_t cols, std::size_t row_pad, std::size_t gap_floats);
// Moves `m` onto or next to `target` (aliasing and interleaving): mode 0 leaves it; 1 same start and stride;
// 2 start shifted by delta, target's stride; 3 just after target's columns, target's stride (interleaved heads);
// 4 start shifted by delta, own stride. Starts before the arena are clamped to 0. Returns whether it moved.
bool place_over(Mat& m, const Mat& target, std::size_t mode, int delta);

// Argument mutations, decoded from the input: null pointer, zero / ±1 / huge dimensions, stride < cols, a head
// size above attention_max_head_dim. Returns the number applied. Most inputs decode to none.
std::size_t mutate(Reader& in, const std::vector<Mat*>& targets, bool allow_null);

constexpr std::uint32_t guard_bits = 0x7fc0deadu;   // every float that belongs to no matrix
constexpr std::uint32_t poison_bits = 0x7fc0beefu;  // outputs and workspaces before the call
bool has_bits(float f, std::uint32_t bits);
float from_bits(std::uint32_t bits);

class Arena {
 public:
  // `floats` elements of guard, plus a margin of guard on each side.
  void reset(std::size_t floats);
  std::size_t size() const { return data_.size(); }
  float* at(std::size_t offset) { return data_.data() + offset; }
  float& elem(const Mat& m, std::size_t r, std::size_t c) { return data_[m.offset + r * m.stride + c]; }
  // Whether every element of m (shape_ok) lies inside the arena.
  bool contains(const Mat& m) const;
  template <class T>
  ma::MatrixView<T> view(const Mat& m) {
    return {m.null ? nullptr : at(m.offset), m.rows, m.cols, m.stride};
  }
  void fill_value(const Mat& m, float v);

  void snapshot();
  void restore();
  // After a call: every float outside the writable set still holds its snapshot's bits, else fail(what).
  void clear_writable();
  void writable(const Mat& m);
  void writable(std::size_t offset, std::size_t floats);
  void expect_untouched(const char* what);

 private:
  std::vector<float> data_, saved_;
  std::vector<std::uint8_t> writable_;
};

// Smallest arena holding every matrix (with a small extent) plus a trailing guard.
std::size_t arena_floats(const std::vector<const Mat*>& mats);

// ---- values ---------------------------------------------------------------------------------------------------

// Finite values of one matrix: style 0 uniform in [−range, range], 1 multiples of range/8 (ties, exact zeros),
// 2 one constant, 3 magnitudes spread over 2⁰..2⁻³⁰ of range with random signs.
struct Values {
  std::size_t style = 0;
  float range = 1.0f;
};
Values values(Reader& in, const float* ranges, std::size_t n_ranges);
void fill(Arena& arena, const Mat& m, Rng& rng, const Values& v);

// Special values the fuzzer writes over the regular ones: NaN, ±inf, ±1e30, ±FLT_MAX (all "wild": they void
// the accuracy checks of what they reach), and 1e-40 (subnormal), −0, 0, ±1e4 (tame).
float special_value(std::size_t kind);
// Decodes up to 3 specials, each at a (row, col) of one of `targets`, or over a whole row or column.
void write_specials(Reader& in, Arena& arena, const std::vector<const Mat*>& targets);

// A tame value: finite and at most `limit` in magnitude (the accuracy bounds are stated for those).
inline bool tame(float x, float limit) { return x - x == 0.0f && x <= limit && x >= -limit; }

// ---- checks -----------------------------------------------------------------------------------------------------

void expect_status(ma::Status got, ma::Status want, const char* what);
// |got − want| within the tolerance, or fail(what) at (row, col). Plant::value moves want out of it.
void expect_within(float got, double want, double scale, Tolerance tol, const char* what, std::size_t row,
                   std::size_t col);
// Every element of `m` was written (no poison left).
void expect_written(Arena& arena, const Mat& m, const char* what);

}  // namespace fuzz
