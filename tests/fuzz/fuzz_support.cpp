#include "fuzz_support.hpp"

#include <cfloat>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace fuzz {

namespace {
char g_context[512] = "";
constexpr std::size_t margin = 64;  // guard floats before the first and after the last matrix
}  // namespace

void fail(const char* format, ...) {
  std::fprintf(stderr, "\nFUZZ CHECK FAILED: %s\n  ", g_context);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}

void set_context(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(g_context, sizeof g_context, format, args);
  va_end(args);
}

Plant plant() {
  static const Plant p = [] {
    const char* e = std::getenv("MICROATTN_FUZZ_PLANT");
    if (e == nullptr || *e == '\0') return Plant::none;
    if (std::strcmp(e, "value") == 0) return Plant::value;
    if (std::strcmp(e, "status") == 0) return Plant::status;
    if (std::strcmp(e, "canary") == 0) return Plant::canary;
    std::fprintf(stderr, "MICROATTN_FUZZ_PLANT=%s: expected value, status or canary\n", e);
    std::abort();
  }();
  return p;
}

// ---- decoding ---------------------------------------------------------------------------------------------------

std::size_t dim(Reader& in, bool big) {
  static constexpr std::size_t edges[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 70};
  static constexpr std::size_t big_edges[] = {127, 128, 129, 255, 256, 257};
  const std::size_t b = in.byte();
  if (b < 128) return edges[b % (sizeof edges / sizeof edges[0])];
  if (b < 248) return 1 + (b - 128) % 70;
  if (b < 254) return big ? big_edges[b - 248] : edges[b % (sizeof edges / sizeof edges[0])];
  return 0;
}

std::size_t pad(Reader& in) {
  static constexpr std::size_t pads[] = {0, 0, 0, 0, 1, 2, 3, 5, 8, 16};
  return pads[in.below(sizeof pads / sizeof pads[0])];
}

std::size_t gap(Reader& in) { return in.below(20); }

// ---- geometry -------------------------------------------------------------------------------------------------

unsigned __int128 extent(const Mat& m) {
  if (m.rows == 0 || m.cols == 0) return 0;
  return static_cast<unsigned __int128>(m.rows - 1) * m.stride + m.cols;
}

bool shape_ok(const Mat& m) {
  constexpr auto pmax = static_cast<unsigned __int128>(std::numeric_limits<std::ptrdiff_t>::max());
  return m.rows != 0 && m.cols != 0 && m.stride >= m.cols &&
         static_cast<unsigned __int128>(m.stride) * sizeof(float) <= pmax && extent(m) * sizeof(float) <= pmax;
}

bool spans_meet(const Mat& a, const Mat& b) {
  const unsigned __int128 a0 = a.offset, b0 = b.offset;
  return a0 < b0 + extent(b) && b0 < a0 + extent(a);
}

bool shares_element(const Mat& a, const Mat& b) {
  // Every element of b, located in a's layout: it is a's element when its row and column fall inside a.
  for (std::size_t r = 0; r < b.rows; ++r)
    for (std::size_t c = 0; c < b.cols; ++c) {
      const std::size_t x = b.offset + r * b.stride + c;
      if (x < a.offset) continue;
      const std::size_t d = x - a.offset;
      if (d / a.stride < a.rows && d % a.stride < a.cols) return true;
    }
  return false;
}

bool overlaps(const Mat& a, const Mat& b) { return a.stride == b.stride ? shares_element(a, b) : spans_meet(a, b); }

bool meets_array(const Mat& a, std::size_t offset, std::size_t floats) {
  Mat array;
  array.offset = offset;
  array.rows = 1;
  array.cols = floats;
  array.stride = floats;
  return floats != 0 && spans_meet(a, array);
}

Mat place(std::size_t& cursor, std::size_t rows, std::size_t cols, std::size_t row_pad, std::size_t gap_floats) {
  Mat m;
  m.offset = (cursor < margin ? margin : cursor) + gap_floats;
  m.rows = rows;
  m.cols = cols;
  m.stride = cols + row_pad;
  cursor = m.offset + static_cast<std::size_t>(extent(m));
  return m;
}

bool place_over(Mat& m, const Mat& target, std::size_t mode, int delta) {
  if (mode == 0 || mode > 4) return false;
  const std::ptrdiff_t base = static_cast<std::ptrdiff_t>(target.offset);
  std::ptrdiff_t start = base;
  if (mode == 2 || mode == 4) start = base + delta;
  if (mode == 3) start = base + static_cast<std::ptrdiff_t>(target.cols);
  m.offset = start < 0 ? 0 : static_cast<std::size_t>(start);
  if (mode != 4 && target.stride >= m.cols) m.stride = target.stride;
  return true;
}

std::size_t mutate(Reader& in, const std::vector<Mat*>& targets, bool allow_null) {
  const std::size_t b = in.byte();
  const std::size_t count = b < 176 ? 0 : 1 + b % 3;
  constexpr std::size_t huge = std::size_t{1} << 62;
  for (std::size_t i = 0; i < count; ++i) {
    Mat& m = *targets[in.below(targets.size())];
    switch (in.below(13)) {
      case 0:
        if (allow_null)
          m.null = true;
        else
          m.rows = 0;
        break;
      case 1:
        m.rows = 0;
        break;
      case 2:
        m.cols = 0;
        break;
      case 3:
        m.rows += 1;
        break;
      case 4:
        m.rows -= m.rows > 0 ? 1 : 0;
        break;
      case 5:
        m.cols += 1;
        break;
      case 6:
        m.cols -= m.cols > 0 ? 1 : 0;
        break;
      case 7:
        m.stride = m.cols > 0 ? m.cols - 1 : 0;
        break;
      case 8:
        m.rows = huge;
        break;
      case 9:
        m.cols = m.stride = huge;
        break;
      case 10:
        m.rows = std::numeric_limits<std::size_t>::max();
        break;
      case 11:
        m.stride = huge;
        break;
      default:
        m.cols = m.stride = ma::attention_max_head_dim + 1;
        break;
    }
  }
  return count;
}

bool has_bits(float f, std::uint32_t bits) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u == bits;
}

float from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// ---- arena ------------------------------------------------------------------------------------------------------

void Arena::reset(std::size_t floats) {
  data_.assign(floats + margin, from_bits(guard_bits));
  saved_.clear();
  writable_.assign(data_.size(), 0);
}

bool Arena::contains(const Mat& m) const {
  return static_cast<unsigned __int128>(m.offset) + extent(m) <= data_.size();
}

void Arena::fill_value(const Mat& m, float v) {
  for (std::size_t r = 0; r < m.rows; ++r)
    for (std::size_t c = 0; c < m.cols; ++c) elem(m, r, c) = v;
}

void Arena::snapshot() { saved_ = data_; }
void Arena::restore() { data_ = saved_; }

void Arena::clear_writable() { writable_.assign(data_.size(), 0); }

void Arena::writable(const Mat& m) {
  for (std::size_t r = 0; r < m.rows; ++r)
    for (std::size_t c = 0; c < m.cols; ++c) writable_[m.offset + r * m.stride + c] = 1;
}

void Arena::writable(std::size_t offset, std::size_t floats) {
  for (std::size_t i = 0; i < floats && offset + i < writable_.size(); ++i) writable_[offset + i] = 1;
}

void Arena::expect_untouched(const char* what) {
  if (plant() == Plant::canary)  // a stray write into the first float nothing may write
    for (std::size_t i = 0; i < data_.size(); ++i)
      if (writable_[i] == 0) {
        std::uint32_t u;
        std::memcpy(&u, &data_[i], sizeof u);
        data_[i] = from_bits(u ^ 1u);
        break;
      }
  for (std::size_t i = 0; i < data_.size(); ++i) {
    if (writable_[i] != 0) continue;
    if (std::memcmp(&data_[i], &saved_[i], sizeof(float)) != 0)
      fail("%s: arena float %zu changed from %g to %g (written outside the output)", what, i,
           static_cast<double>(saved_[i]), static_cast<double>(data_[i]));
  }
}

std::size_t arena_floats(const std::vector<const Mat*>& mats) {
  std::size_t end = margin;
  for (const Mat* m : mats) {
    const unsigned __int128 e = extent(*m);
    if (e >= (1u << 20)) continue;  // a huge shape, rejected before anything is read
    const std::size_t last = m->offset + static_cast<std::size_t>(e);
    if (last > end) end = last;
  }
  return end + margin;
}

// ---- values -----------------------------------------------------------------------------------------------------

Values values(Reader& in, const float* ranges, std::size_t n_ranges) {
  Values v;
  v.style = in.below(4);
  v.range = ranges[in.below(n_ranges)];
  return v;
}

void fill(Arena& arena, const Mat& m, Rng& rng, const Values& v) {
  const double range = v.range;
  const double constant = (2.0 * rng.unit() - 1.0) * range;
  for (std::size_t r = 0; r < m.rows; ++r)
    for (std::size_t c = 0; c < m.cols; ++c) {
      double x;
      switch (v.style) {
        case 0:
          x = (2.0 * rng.unit() - 1.0) * range;
          break;
        case 1:
          x = std::floor(rng.unit() * 17.0 - 8.0) / 8.0 * range;
          break;
        case 2:
          x = constant;
          break;
        default: {
          const double sign = (rng.next() & 1u) != 0 ? -1.0 : 1.0;
          x = sign * std::ldexp(range, -static_cast<int>(rng.next() % 31));
          break;
        }
      }
      arena.elem(m, r, c) = static_cast<float>(x);
    }
}

float special_value(std::size_t kind) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  switch (kind % 12) {
    case 0:
      return std::numeric_limits<float>::quiet_NaN();
    case 1:
      return inf;
    case 2:
      return -inf;
    case 3:
      return 1e30f;
    case 4:
      return -1e30f;
    case 5:
      return FLT_MAX;
    case 6:
      return -FLT_MAX;
    case 7:
      return 1e-40f;
    case 8:
      return -0.0f;
    case 9:
      return 0.0f;
    case 10:
      return 1e4f;
    default:
      return -1e4f;
  }
}

void write_specials(Reader& in, Arena& arena, const std::vector<const Mat*>& targets) {
  const std::size_t b = in.byte();
  const std::size_t count = b < 160 ? 0 : 1 + b % 3;
  for (std::size_t i = 0; i < count; ++i) {
    const Mat& m = *targets[in.below(targets.size())];
    const std::size_t row = in.byte(), col = in.byte(), kind = in.byte();
    if (m.rows == 0 || m.cols == 0) continue;
    const float v = special_value(kind);
    const std::size_t r = row % m.rows, c = col % m.cols;
    switch ((kind >> 4) & 3u) {
      case 1:
        for (std::size_t cc = 0; cc < m.cols; ++cc) arena.elem(m, r, cc) = v;
        break;
      case 2:
        for (std::size_t rr = 0; rr < m.rows; ++rr) arena.elem(m, rr, c) = v;
        break;
      default:
        arena.elem(m, r, c) = v;
        break;
    }
  }
}

// ---- checks -------------------------------------------------------------------------------------------------------

void expect_status(ma::Status got, ma::Status want, const char* what) {
  if (plant() == Plant::status) want = want == ma::Status::ok ? ma::Status::aliasing : ma::Status::ok;
  if (got != want) fail("%s: returned %s, the contract says %s", what, ma::to_string(got), ma::to_string(want));
}

void expect_within(float got, double want, double scale, Tolerance tol, const char* what, std::size_t row,
                   std::size_t col) {
  if (plant() == Plant::value && std::isfinite(want)) {
    const double allowed = tol.rel * std::fabs(scale) + tol.abs;
    want += 2.0 * allowed + 1e-6 * std::fmax(std::fmax(std::fabs(want), allowed), 1e-300);
  }
  if (!testing_support::within(got, want, scale, tol))
    fail("%s (%zu, %zu): got %.9g, reference %.17g, allowed +-%.3g (scale %.3g)", what, row, col,
         static_cast<double>(got), want, tol.rel * std::fabs(scale) + tol.abs, scale);
}

void expect_written(Arena& arena, const Mat& m, const char* what) {
  for (std::size_t r = 0; r < m.rows; ++r)
    for (std::size_t c = 0; c < m.cols; ++c)
      if (has_bits(arena.elem(m, r, c), poison_bits)) fail("%s (%zu, %zu): never written", what, r, c);
}

}  // namespace fuzz
