// linear(): checks, the choice of kernel table, and q8's stack-bounded quantization of x in column chunks.
#include <cassert>
#include <cstdint>
#include <cstring>

#include "check.hpp"
#include "linear.hpp"
#include "microattn/weights.hpp"

namespace microattn {
namespace detail {
namespace {

constexpr std::uint32_t inf_bits = 0x7f800000u;
// Below this max|x| (127·FLT_MIN) the group's scale max|x|/127 would be subnormal, whose lost bits would break the
// range of q and the error bound: such rows go to the float path.
constexpr float min_quantizable = 0x1.fcp-120f;

std::size_t element_bytes(Format f) noexcept { return f == Format::f32 ? 4 : f == Format::f16 ? 2 : 1; }

// Whether y shares a byte with the dense range [p, p + bytes): exact for a strided y, unlike a span test, so that
// y's rows may interleave with other data.
bool view_overlaps_bytes(const MatrixView<float>& y, const void* p, std::size_t bytes) noexcept {
  const std::uintptr_t p0 = reinterpret_cast<std::uintptr_t>(p), p1 = p0 + bytes;
  const std::uintptr_t y0 = reinterpret_cast<std::uintptr_t>(y.data);
  if (p1 <= y0) return false;
  // The last row of y starting below p1 is the only one that can reach p0 (rows start and end in order).
  const std::size_t row_bytes = y.stride * sizeof(float);
  std::size_t r = (p1 - 1 - y0) / row_bytes;
  if (r > y.rows - 1) r = y.rows - 1;
  return p0 < y0 + r * row_bytes + y.cols * sizeof(float);
}

// run_chunk(w, ldw, n, chunk) runs the chunk's kernel over the n weight rows at w: t.q8_chunk, or (a parallel
// linear()) over items of them on the workers, x quantized once per chunk on the calling thread.
template <class RunChunk>
[[gnu::always_inline]] inline void q8_quantized(const LinearKernels& t, const LinearArgs& a, std::int8_t* q, float* sx,
                                                const RunChunk& run_chunk) noexcept {
  const std::size_t k = a.k, group = a.group;
  const std::size_t seg_len = group < k ? group : k;
  const std::size_t rows_per_scale = group > k ? group / k : 1;
  const std::size_t sw_stride = group < k ? k / group : 1;
  const std::size_t rows_max = t.q8_chunk_rows < linear_q8_rows ? t.q8_chunk_rows : linear_q8_rows;
  // Columns per chunk: whole segments, or one piece of a segment longer than the buffer.
  const bool long_segments = seg_len > linear_q8_chunk_bytes;
  std::size_t segs_per_chunk = long_segments ? 1 : linear_q8_chunk_bytes / seg_len;
  if (segs_per_chunk > linear_q8_chunk_groups) segs_per_chunk = linear_q8_chunk_groups;

  float long_sx[linear_q8_rows] = {};  // the scale of the current long segment, per row
  const auto* w = static_cast<const std::int8_t*>(a.w);

  for (std::size_t i0 = 0; i0 < a.m; i0 += rows_max) {
    const std::size_t rows = a.m - i0 < rows_max ? a.m - i0 : rows_max;
    unsigned float_rows = 0;  // bit i: row i0 + i is computed in float afterwards
    std::size_t len = 0;
    for (std::size_t c0 = 0; c0 < k; c0 += len) {
      std::size_t seg;
      if (long_segments) {
        const std::size_t seg_end = (c0 / seg_len + 1) * seg_len;
        len = seg_end - c0 < linear_q8_chunk_bytes ? seg_end - c0 : linear_q8_chunk_bytes;
        seg = len;
      } else {
        const std::size_t segs = (k - c0) / seg_len < segs_per_chunk ? (k - c0) / seg_len : segs_per_chunk;
        len = segs * seg_len;
        seg = seg_len;
      }
      for (std::size_t i = 0; i < rows; ++i) {
        const float* xr = a.x + (i0 + i) * a.ldx;
        std::int8_t* qr = q + i * linear_q8_chunk_bytes;
        for (std::size_t s = 0; s * seg < len; ++s) {
          const std::size_t c = c0 + s * seg;
          float scale;
          if (long_segments && c % seg_len != 0) {
            scale = long_sx[i];  // a later piece of the segment: its scale is known
          } else {
            // The scale of a whole segment, from all its columns (also when only a piece of it is in this chunk).
            const std::uint32_t bits = t.absmax_bits(xr + c, seg_len);
            float amax;
            std::memcpy(&amax, &bits, sizeof amax);
            if (bits >= inf_bits || (bits != 0 && amax < min_quantizable)) float_rows |= 1u << i;
            scale = (float_rows >> i) & 1u ? 0.0f : amax / 127.0f;
            long_sx[i] = scale;
          }
          sx[i * linear_q8_chunk_groups + s] = scale;
          if (scale == 0.0f) {
            std::memset(qr + s * seg, 0, seg);  // zeros (or a row left to the float path) add nothing
          } else {
            t.quantize(xr + c, seg, scale, qr + s * seg);
          }
        }
      }
      const Q8Chunk chunk{q,
                          linear_q8_chunk_bytes,
                          sx,
                          linear_q8_chunk_groups,
                          rows,
                          len,
                          seg,
                          a.scales + c0 / group,
                          sw_stride,
                          rows_per_scale,
                          a.bias,
                          c0 == 0,
                          a.y + i0 * a.ldy,
                          a.ldy};
      run_chunk(w + c0, k, a.n, chunk);
    }
    for (std::size_t i = 0; i < rows; ++i)
      if ((float_rows >> i) & 1u) linear_q8_float_row(a, i0 + i);
  }
}

// A function of its own, apart from the parallel path's (which calls the pool): the static stack analysis of every
// serial entry then sees only the kernels here.
__attribute__((noinline)) void run_q8_quantized(const LinearKernels& t, const LinearArgs& a, std::int8_t* q,
                                                float* sx) noexcept {
  q8_quantized(t, a, q, sx, [&t](const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& c) {
    t.q8_chunk(w, ldw, n, c);
  });
}

// The quantized chunk in a q8 workspace (linear_q8_workspace_bytes, float-aligned): 64-byte aligned, as the kernels
// load it best.
std::int8_t* q8_chunk_in(float* workspace) noexcept {
  return reinterpret_cast<std::int8_t*>((reinterpret_cast<std::uintptr_t>(workspace) + 63) &
                                        ~static_cast<std::uintptr_t>(63));
}

// q8 with the chunk in `workspace` (linear_q8_workspace_bytes, float-aligned).
void linear_q8_in(const LinearKernels& t, const LinearArgs& a, float* workspace) noexcept {
  assert(a.group > 0 && (a.n * a.k) % a.group == 0);
  if (a.k % a.group == 0 || a.group % a.k == 0) {
    std::int8_t* q = q8_chunk_in(workspace);  // its scales after it
    run_q8_quantized(t, a, q, reinterpret_cast<float*>(q + linear_q8_rows * linear_q8_chunk_bytes));
  } else {
    for (std::size_t i = 0; i < a.m; ++i) linear_q8_float_row(a, i);
  }
}

// A one-row view's stride addresses nothing: the kernels get its column count instead (see matmul).
LinearArgs linear_args(const float* x, std::size_t ldx, std::size_t m, const WeightMatrix& w, const float* bias,
                       float* y, std::size_t ldy) noexcept {
  return {w.data, w.scales, w.group, x, m == 1 ? w.cols : ldx, bias, y, m == 1 ? w.rows : ldy, m, w.rows, w.cols};
}

// linear's one plan: format F resolved into its kernel, from the selected table (on Cortex-M the kernel itself, or
// a q8 table without the f16 kernel), and q8's chunk in `workspace` (linear_workspace_bytes(F), float-aligned). Every
// entry runs it, so linear() and the layers' projections give the same floats.
template <class F>
[[gnu::always_inline]] inline void linear_plan(const LinearArgs& a, float* workspace) noexcept {
  assert(a.m > 0 && a.n > 0 && a.k > 0);
  if constexpr (F::value == Format::f32) {
    linear_f32_gemm(a);
  } else if constexpr (F::value == Format::f16) {
    selected_linear_f16()(a);
  } else {
    static_assert(F::value == Format::q8);
    assert(workspace != nullptr);
    linear_q8_in(selected_linear_q8_kernels(), a, workspace);
  }
}

// q8 with its chunk on the stack, in a frame of its own (see run_q8_quantized: not in the caller's, under f32's gemm).
__attribute__((noinline)) void linear_q8_on_stack(const LinearKernels& t, const LinearArgs& a) noexcept {
  float workspace[linear_q8_workspace_bytes / sizeof(float)];
  linear_q8_in(t, a, workspace);
}

// The plan of a format known at run time: q8's chunk in `workspace`, or on the stack (OnStack; workspace unused).
template <bool OnStack>
[[gnu::always_inline]] inline void linear_plan_for(Format f, const LinearArgs& a, float* workspace) noexcept {
  switch (f) {
    case Format::f32:
      linear_plan<f32_format>(a, nullptr);
      return;
    case Format::f16:
      linear_plan<f16_format>(a, nullptr);
      return;
    case Format::q8:
      if constexpr (OnStack) {
        linear_q8_on_stack(selected_linear_q8_kernels(), a);
      } else {
        linear_plan<q8_format>(a, workspace);
      }
      return;
  }
}

}  // namespace

void linear_run(const LinearKernels& t, Format format, const LinearArgs& a) noexcept {
  assert(a.m > 0 && a.n > 0 && a.k > 0);
  switch (format) {
    case Format::f32:
      t.f32(a);
      return;
    case Format::f16:
      t.f16(a);
      return;
    case Format::q8:
      linear_q8_on_stack(t, a);
      return;
  }
}

template <class F>
void linear_checked(const float* x, std::size_t ldx, std::size_t m, const WeightMatrix& w, const float* bias, float* y,
                    std::size_t ldy, float* workspace) noexcept {
  assert(w.format == F::value);
  linear_plan<F>(linear_args(x, ldx, m, w, bias, y, ldy), workspace);
}
template void linear_checked<f32_format>(const float*, std::size_t, std::size_t, const WeightMatrix&, const float*,
                                         float*, std::size_t, float*) noexcept;
template void linear_checked<f16_format>(const float*, std::size_t, std::size_t, const WeightMatrix&, const float*,
                                         float*, std::size_t, float*) noexcept;
template void linear_checked<q8_format>(const float*, std::size_t, std::size_t, const WeightMatrix&, const float*,
                                        float*, std::size_t, float*) noexcept;

// A mix of formats: each matrix's own plan (a switch per matrix, not an indirect call, so that footprint.py's
// stack analysis follows it).
void linear_checked_mixed(const float* x, std::size_t ldx, std::size_t m, const WeightMatrix& w, const float* bias,
                          float* y, std::size_t ldy, float* workspace) noexcept {
  linear_plan_for<false>(w.format, linear_args(x, ldx, m, w, bias, y, ldy), workspace);
}

unsigned weight_problems(const WeightMatrix& w, const float* bias, std::size_t rows, std::size_t cols,
                         const MatrixView<float>& y) noexcept {
  const bool q8 = w.format == Format::q8;
  unsigned p = 0;
  if (w.data == nullptr || (q8 && w.scales == nullptr)) p |= weight_null;
  if (!aligned(bias) || (w.format == Format::f32 && !aligned(w.data)) ||
      (w.format == Format::f16 && reinterpret_cast<std::uintptr_t>(w.data) % 2 != 0) || (q8 && !aligned(w.scales)))
    p |= weight_misaligned;
  const std::size_t n = w.rows, k = w.cols;
  if ((w.format != Format::f32 && w.format != Format::f16 && !q8) || n != rows || k != cols || n == 0 || k == 0 ||
      n > static_cast<std::size_t>(PTRDIFF_MAX) / element_bytes(w.format) / k ||
      (q8 && (w.group == 0 || (n * k) % w.group != 0)))
    p |= weight_shape;
  // The overlaps only where the sizes they are computed from are valid (the caller reports the rest first).
  if (p == 0 && y.data != nullptr && shape_ok(y) &&
      (view_overlaps_bytes(y, w.data, n * k * element_bytes(w.format)) ||
       (q8 && view_overlaps_bytes(y, w.scales, n * k / w.group * sizeof(float))) ||
       (bias != nullptr && view_overlaps_bytes(y, bias, n * sizeof(float)))))
    p |= weight_aliasing;
  return p;
}

}  // namespace detail

namespace detail {

// linear()'s checks in the documented order, for every format.
Status linear_checks(const MatrixView<const float>& x, const WeightMatrix& w, const float* bias,
                     const MatrixView<float>& y) noexcept {
  const unsigned p = weight_problems(w, bias, w.rows, w.cols, y);
  if (x.data == nullptr || y.data == nullptr || (p & weight_null) != 0) return Status::null_pointer;
  if (!all_aligned(x, y) || (p & weight_misaligned) != 0) return Status::misaligned;
  if ((p & weight_shape) != 0 || !shape_ok(x) || !shape_ok(y)) return Status::invalid_shape;
  if (x.cols != w.cols || y.cols != w.rows || y.rows != x.rows) return Status::invalid_shape;
  if (views_overlap(y, x) || (p & weight_aliasing) != 0) return Status::aliasing;
  return Status::ok;
}

// One entry point per format, each reaching only its own kernels (kernels/linear.hpp): its checks, then its plan.
template <class F>
Status linear_entry(const MatrixView<const float>& x, const WeightMatrix& w, const float* bias,
                    const MatrixView<float>& y) noexcept {
  const Status st = linear_checks(x, w, bias, y);
  if (st == Status::ok) {
    const LinearArgs a = linear_args(x.data, x.stride, x.rows, w, bias, y.data, y.stride);
    if constexpr (linear_workspace_bytes(F::value) == 0) {
      linear_plan<F>(a, nullptr);
    } else {
      linear_q8_on_stack(selected_linear_q8_kernels(), a);
    }
  }
  return st;
}
template Status linear_entry<f32_format>(const MatrixView<const float>&, const WeightMatrix&, const float*,
                                         const MatrixView<float>&) noexcept;
template Status linear_entry<f16_format>(const MatrixView<const float>&, const WeightMatrix&, const float*,
                                         const MatrixView<float>&) noexcept;
template Status linear_entry<q8_format>(const MatrixView<const float>&, const WeightMatrix&, const float*,
                                        const MatrixView<float>&) noexcept;

}  // namespace detail

namespace detail {
namespace {

// The weight rows of items [begin, end) of count over n: item i is rows [i·linear_parallel_rows, …) of w,
// linear_parallel_rows of them, the last item the rest (linear_parallel_rows up to twice that less one, or all of w's
// when the call is one item). No item is shorter than a kernel's row tile: a kernel may compute a call with fewer rows
// differently (the Helium f16 kernel's tail overlaps its last four rows where a call of four or more has them, and is
// scalar below), never rows inside one; so consecutive items run as one kernel call (one call's overhead per range).
struct ItemRows {
  std::size_t r0, rows;
};
ItemRows item_rows(std::size_t begin, std::size_t end, std::size_t count, std::size_t n) noexcept {
  const std::size_t r0 = begin * linear_parallel_rows;
  return {r0, (end == count ? n : end * linear_parallel_rows) - r0};
}

// The items of a parallel linear(), each through its format's plan.
struct LinearItems {
  LinearArgs a;
  Format format;
  std::size_t elem_bytes;
  std::size_t count;
};

void linear_items(void* ctx, std::size_t begin, std::size_t end) noexcept {
  const LinearItems& items = *static_cast<const LinearItems*>(ctx);
  if (begin >= end) return;
  LinearArgs a = items.a;
  const ItemRows it = item_rows(begin, end, items.count, a.n);
  const std::size_t r0 = it.r0;
  a.n = it.rows;
  a.w = static_cast<const unsigned char*>(a.w) + r0 * a.k * items.elem_bytes;
  if (a.scales != nullptr) a.scales += r0 * a.k / a.group;
  if (a.bias != nullptr) a.bias += r0;
  a.y += r0;
  if (a.m == 1) a.ldy = a.n;  // as linear_args: a one-row y's stride is its column count
  linear_plan_for<true>(items.format, a, nullptr);
}

#if !MICROATTN_LINEAR_ARMV7EM && !MICROATTN_LINEAR_HELIUM
#define MICROATTN_LINEAR_Q8_PARALLEL 1
// A parallel linear()'s q8 chunk: the chunk's kernel over items of linear_parallel_rows weight rows (each item's
// rows as the whole call computes them), on the workers or, when the pool cannot, on the calling thread.
struct Q8ChunkItems {
  const LinearKernels* t;
  const std::int8_t* w;
  std::size_t ldw, n, count;
  const Q8Chunk* chunk;
};

void q8_chunk_items(void* ctx, std::size_t begin, std::size_t end) noexcept {
  const Q8ChunkItems& items = *static_cast<const Q8ChunkItems*>(ctx);
  if (begin >= end) return;
  const ItemRows it = item_rows(begin, end, items.count, items.n);
  Q8Chunk c = *items.chunk;
  c.sw = row_scales(c, it.r0);  // r0 is a multiple of rows_per_scale (linear's split rule)
  if (c.bias != nullptr) c.bias += it.r0;
  c.y += it.r0;
  items.t->q8_chunk(items.w + it.r0 * items.ldw, items.ldw, it.rows, c);
}

// q8 where the groups cut every row alike, x quantized once per chunk: a second copy of the chunk loop, so on
// Cortex-M, where flash counts, each range of items quantizes x itself instead (linear_items).
__attribute__((noinline)) void linear_q8_parallel(const LinearArgs& a, const Parallel& p, std::size_t count) noexcept {
  float workspace[linear_q8_workspace_bytes / sizeof(float)];
  std::int8_t* q = q8_chunk_in(workspace);
  const LinearKernels& t = selected_linear_q8_kernels();
  q8_quantized(t, a, q, reinterpret_cast<float*>(q + linear_q8_rows * linear_q8_chunk_bytes),
               [&t, &p, count](const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& c) {
                 Q8ChunkItems items{&t, w, ldw, n, count, &c};
                 if (!p.run(p.pool, q8_chunk_items, &items, count))
                   t.q8_chunk(w, ldw, n, c);  // all rows, the same floats
               });
}
#else
#define MICROATTN_LINEAR_Q8_PARALLEL 0
inline void linear_q8_parallel(const LinearArgs&, const Parallel&, std::size_t) noexcept {}
#endif

}  // namespace

}  // namespace detail

Status linear(MatrixView<const float> x, const WeightMatrix& w, const float* bias, MatrixView<float> y,
              const Parallel& parallel) noexcept {
  using namespace detail;
  const Status st = linear_checks(x, w, bias, y);
  if (st != Status::ok) return st;
  // The shape alone decides the items (never the workers): small products are one item, and so are fewer than two
  // items' rows and q8 weights whose groups would not start at an item's first row.
  const std::size_t wk = w.rows * w.cols;  // fits: linear_checks bounded it
  // q8's multiply-adds cost a fraction of fp32's: twice the threshold.
  const std::size_t min_macs = w.format == Format::q8 ? 2 * linear_parallel_min_macs : linear_parallel_min_macs;
  const bool small = wk < min_macs && x.rows < (min_macs + wk - 1) / wk;
  const bool one = small || (w.format == Format::q8 && (linear_parallel_rows * w.cols) % w.group != 0);
  const std::size_t count = one || w.rows < 2 * linear_parallel_rows ? 1 : w.rows / linear_parallel_rows;
  LinearItems items{linear_args(x.data, x.stride, x.rows, w, bias, y.data, y.stride), w.format, element_bytes(w.format),
                    count};
  const bool workers = parallel.run != nullptr && parallel.workers > 1;
  if (MICROATTN_LINEAR_Q8_PARALLEL && count > 1 && workers && w.format == Format::q8 &&
      (w.cols % w.group == 0 || w.group % w.cols == 0)) {
    linear_q8_parallel(items.a, parallel, count);
    return Status::ok;
  }
  if (count > 1 && workers && parallel.run(parallel.pool, linear_items, &items, count)) return Status::ok;
  items.count = 1;  // on the calling thread: all of w in one item, the same floats as the items' (linear() itself)
  linear_items(&items, 0, 1);
  return Status::ok;
}

const char* linear_kernel_name(Format format) noexcept {
  const detail::LinearKernels& t = detail::selected_linear_kernels();
  switch (format) {
    case Format::f32:
      return t.f32_name;
    case Format::f16:
      return t.f16_name;
    case Format::q8:
      return t.q8_name;
  }
  return "";
}

}  // namespace microattn
