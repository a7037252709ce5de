// linear()'s Helium (MVE-F) kernels: the table Cortex-M55 selects; empty elsewhere.
//
// q8: four weight rows per pass share each 16-byte vector of x; VMLADAVA.S8 sums 16 int8 products into an int32
// (exact: a 256-column segment stays below 2²³), the last seg % 16 columns through predicated loads (inactive
// lanes read nothing and give zeros). The four rows' sums are scaled as one vector per segment.
// f16: four weight rows per pass share each de-interleaved 8 columns of x; MVE's VCVTB/VCVTT.F32.F16 widen the
// halves exactly (emitted by encoding: GNU as 2.40 mis-encodes their registers); rows of x with a subnormal
// element, which vector arithmetic would flush, on the scalar FPU.
// Quantization: absmax on the float bits in vectors; x / s rounded by VCVTA (to nearest, ties away from zero:
// q8_round's rule) through x·(1/s) in vectors where that provably rounds alike, else the scalar FPU's division
// (MVE has none).
#include "kernels/linear.hpp"

#if MICROATTN_LINEAR_HELIUM

#include <arm_mve.h>

#pragma GCC optimize("O2")

#include <cassert>
#include <cstddef>
#include <cstring>

#include "kernels/scalar_math.hpp"

namespace microattn {
namespace detail {
namespace {

#define MICROATTN_LINEAR_HELIUM_INLINE inline __attribute__((always_inline))

// ---- q8 -------------------------------------------------------------------------------------------------------

std::uint32_t linear_absmax_bits_helium(const float* x, std::size_t n) noexcept {
  // The doubled bits (sign shifted out) order |x| as unsigned integers, NaN and inf above every finite value. A
  // tail-predicated loop: the last n % 4 lanes are neither loaded nor compared.
  std::uint32_t m = 0;
  asm volatile(
      "vmov.i32 q1, #0\n\t"
      "dlstp.32 lr, %[n]\n"
      "1:\n\t"
      "vldrw.u32 q0, [%[x]], #16\n\t"
      "vshl.i32 q0, q0, #1\n\t"
      "vmax.u32 q1, q1, q0\n\t"
      "letp lr, 1b\n\t"
      "vmaxv.u32 %[m], q1\n\t"
      : [m] "+r"(m), [x] "+r"(x)
      : [n] "r"(n)
      : "q0", "q1", "lr", "memory");
  return m >> 1;
}

MICROATTN_LINEAR_HELIUM_INLINE std::int8_t quantize_helium_one(float x, float s) noexcept {
  float r = x / s;
  asm("vcvta.s32.f32 %0, %0" : "+t"(r));  // round to nearest, ties away from zero
  std::int32_t v;
  std::memcpy(&v, &r, sizeof v);
  return static_cast<std::int8_t>(v);
}

constexpr std::uint32_t quantize_near_half = 0x3efff800u;  // ½ − 2⁻¹⁴ as bits (the distances are non-negative)

// linear_quantize_helium's vectors: returns the largest distance of the last n % 16 products to their integers (as
// bits).
MICROATTN_LINEAR_HELIUM_INLINE std::uint32_t quantize_vectors(const float* x, std::size_t n, float s,
                                                              std::int8_t* q) noexcept {
  const float r = 1.0f / s;
  std::uint32_t rb, d, k;
  std::memcpy(&rb, &r, sizeof rb);
  const float* xp = x;
  std::int8_t* qp = q;
#define MICROATTN_QUANTIZE_4      \
  "vldrw.u32 q0, [%[x]], #16\n\t" \
  "vmul.f32 q0, q0, %[r]\n\t"     \
  "vcvta.s32.f32 q1, q0\n\t"      \
  "vcvt.f32.s32 q2, q1\n\t"       \
  "vsub.f32 q2, q0, q2\n\t"       \
  "vmaxnmav.f32 %[d], q2\n\t"     \
  "vstrb.32 q1, [%[q]], #4\n\t"
  asm volatile(
      "movs %[d], #0\n\t"
      "lsrs %[k], %[n], #4\n\t"
      "beq 3f\n\t"
      "dls lr, %[k]\n"
      "1:\n\t" MICROATTN_QUANTIZE_4 MICROATTN_QUANTIZE_4 MICROATTN_QUANTIZE_4 MICROATTN_QUANTIZE_4
      "cmp %[d], %[thr]\n\t"
      "bhs 4f\n"
      "2:\n\t"
      "le lr, 1b\n"
      "3:\n\t"
      "ands %[k], %[n], #15\n\t"
      "beq 6f\n\t"
      "dlstp.32 lr, %[k]\n"
      "5:\n\t" MICROATTN_QUANTIZE_4
      "letp lr, 5b\n\t"
      "b 6f\n"
      "4:\n\t"  // the block just done, again with the division
      "sub %[x], %[x], #64\n\t"
      "sub %[q], %[q], #16\n\t"
      "movs %[k], #16\n"
      "7:\n\t"
      "vldmia %[x]!, {s0}\n\t"
      "vdiv.f32 s0, s0, %[s]\n\t"
      "vcvta.s32.f32 s0, s0\n\t"
      "vmov %[d], s0\n\t"
      "strb %[d], [%[q]], #1\n\t"
      "subs %[k], #1\n\t"
      "bne 7b\n\t"
      "movs %[d], #0\n\t"
      "b 2b\n"
      "6:\n\t"
      : [d] "=&r"(d), [k] "=&r"(k), [x] "+r"(xp), [q] "+l"(qp)
      : [n] "r"(n), [r] "r"(rb), [s] "t"(s), [thr] "r"(quantize_near_half)
      : "q0", "q1", "q2", "lr", "cc", "memory");
#undef MICROATTN_QUANTIZE_4
  return d;
}

void linear_quantize_helium(const float* x, std::size_t n, float s, std::int8_t* q) noexcept {
  // In vectors, x·(1/s) rounded by VCVTA stands for the rounding of x / s unless it lies near a half integer:
  // |x / s| <= 127 + 2⁻¹⁷, so the product (two roundings) and the quotient (one) are within 2⁻¹⁵ of each other
  // and round alike when the product's distance to its nearest integer is below ½ − 2⁻¹⁴. The largest distance of
  // each block of 16 is checked, and a block beyond it (about one in 500 for random x) redone with the division.
  // A tiny s (whose x may be subnormal, flushed by vector arithmetic where the FPU keeps them) takes the division.
  std::size_t divide_from = 0;  // the division from here on
  if (s >= 0x1p-100f)
    divide_from = quantize_vectors(x, n, s, q) < quantize_near_half ? n : n & ~static_cast<std::size_t>(15);
  for (std::size_t i = divide_from; i < n; ++i) q[i] = quantize_helium_one(x[i], s);
}

// Four rows' int32 sums over `steps` vectors of 16 columns; the pointers advance past them. asm: VMLADAVA's
// accumulators must be even registers, and GCC -Os spilled the row pointers inside the loop.
MICROATTN_LINEAR_HELIUM_INLINE void dot16_x4(const std::int8_t*& xp, const std::int8_t*& w0, const std::int8_t*& w1,
                                             const std::int8_t*& w2, const std::int8_t*& w3, std::size_t steps,
                                             std::int32_t& a0, std::int32_t& a1, std::int32_t& a2,
                                             std::int32_t& a3) noexcept {
  register std::int32_t r0 asm("r0") = a0, r2 asm("r2") = a1, r4 asm("r4") = a2, r6 asm("r6") = a3;
  register std::size_t count asm("lr") = steps;
  asm volatile(
      "dls lr, lr\n"
      "1:\n\t"
      "vldrb.u8 q0, [%[xp]], #16\n\t"
      "vldrb.u8 q1, [%[w0]], #16\n\t"
      "vmlava.s8 %[a0], q0, q1\n\t"
      "vldrb.u8 q1, [%[w1]], #16\n\t"
      "vmlava.s8 %[a1], q0, q1\n\t"
      "vldrb.u8 q1, [%[w2]], #16\n\t"
      "vmlava.s8 %[a2], q0, q1\n\t"
      "vldrb.u8 q1, [%[w3]], #16\n\t"
      "vmlava.s8 %[a3], q0, q1\n\t"
      "le lr, 1b\n\t"
      : [a0] "+r"(r0), [a1] "+r"(r2), [a2] "+r"(r4), [a3] "+r"(r6), [xp] "+r"(xp), [w0] "+r"(w0), [w1] "+r"(w1),
        [w2] "+r"(w2), [w3] "+r"(w3), "+r"(count)
      :
      : "q0", "q1", "memory");
  a0 = r0;
  a1 = r2;
  a2 = r4;
  a3 = r6;
}

// The four sums as a vector, through memory: the dual-lane VMOV (two general registers to lanes 0/2 or 1/3) is
// avoided because QEMU 7.2 and the assemblers disagree on which register goes to which lane.
MICROATTN_LINEAR_HELIUM_INLINE int32x4_t sums4(std::int32_t a0, std::int32_t a1, std::int32_t a2,
                                               std::int32_t a3) noexcept {
  alignas(8) const std::int32_t t[4] = {a0, a1, a2, a3};
  return vldrwq_s32(t);
}

// The weight scales of rows r..r + 3 (clamped) at segment s, as a vector.
MICROATTN_LINEAR_HELIUM_INLINE float32x4_t scales4(const float* const sw[4], std::size_t s) noexcept {
  float32x4_t v = vdupq_n_f32(sw[0][s]);
  v = vsetq_lane_f32(sw[1][s], v, 1);
  v = vsetq_lane_f32(sw[2][s], v, 2);
  return vsetq_lane_f32(sw[3][s], v, 3);
}

// What the quad kernels read from memory besides their registers (byte offsets fixed: the asm names them).
struct QuadJob {
  const std::int8_t* q;     // 0: the chunk's int8 x
  const float* sx;          // 4: its scales, one per segment
  const float* sx_end;      // 8
  std::uint32_t blocks;     // 12: 64-column blocks per segment
  std::uint32_t rest;       // 16: 16-column steps after them
  std::uint32_t ldw;        // 20: weight row stride
  std::uint32_t advance;    // 24: 4·ldw − len: from the first row's end to the next quad's first row
  std::uint32_t sw_step;    // 28: 16·sw_stride − 4·segs: the scale addresses from one quad to the next
  const float* y_end;       // 32
  std::int32_t sums[4];     // 36: the four sums on their way into a vector
  std::uint32_t pred;       // 52: VPR.P0 while loading the base: all lanes, or none (the base is zero)
  std::uint32_t saved_vpr;  // 56: the caller's VPR, restored at the end (GCC has no name for it in a clobber list)
};
static_assert(offsetof(QuadJob, sums) == 36 && offsetof(QuadJob, saved_vpr) == 56, "the asm's offsets");

// Quads of rows from w0 until y reaches y_end, any segments of whole 16-column vectors: per segment the four
// sums in a vector, converted, times the scales (gathered at the lane addresses sw_addr, pre-incremented by 4),
// times the segment's sx, added to the quad's sum (from −0, which leaves every value as it is); then the base
// (gathered from y at the byte offsets base_off, all zeros when job.pred is 0) plus the sum stored at y.
void quads_x16(const std::int8_t* w0, float* y, QuadJob& job, uint32x4_t sw_addr, uint32x4_t base_off) noexcept {
  register std::int32_t a0 asm("r0"), a1 asm("r2"), a2 asm("r4"), a3 asm("r6");
  const std::int8_t *w1, *w2, *w3, *xp;
  const float* sxp;
#define MICROATTN_Q8_STEP(offset)  \
  "vldrb.u8 q0, [%[xp], #" #offset \
  "]\n\t"                          \
  "vldrb.u8 q1, [%[w0], #" #offset \
  "]\n\t"                          \
  "vmlava.s8 %[a0], q0, q1\n\t"    \
  "vldrb.u8 q1, [%[w1], #" #offset \
  "]\n\t"                          \
  "vmlava.s8 %[a1], q0, q1\n\t"    \
  "vldrb.u8 q1, [%[w2], #" #offset \
  "]\n\t"                          \
  "vmlava.s8 %[a2], q0, q1\n\t"    \
  "vldrb.u8 q1, [%[w3], #" #offset \
  "]\n\t"                          \
  "vmlava.s8 %[a3], q0, q1\n\t"
#define MICROATTN_Q8_STEP_NEXT(bytes) \
  "vldrb.u8 q0, [%[xp]], #" #bytes    \
  "\n\t"                              \
  "vldrb.u8 q1, [%[w0]], #" #bytes    \
  "\n\t"                              \
  "vmlava.s8 %[a0], q0, q1\n\t"       \
  "vldrb.u8 q1, [%[w1]], #" #bytes    \
  "\n\t"                              \
  "vmlava.s8 %[a1], q0, q1\n\t"       \
  "vldrb.u8 q1, [%[w2]], #" #bytes    \
  "\n\t"                              \
  "vmlava.s8 %[a2], q0, q1\n\t"       \
  "vldrb.u8 q1, [%[w3]], #" #bytes    \
  "\n\t"                              \
  "vmlava.s8 %[a3], q0, q1\n\t"
  asm volatile(
      "vmrs %[a0], p0\n\t"
      "str %[a0], [%[P], #56]\n\t"
      "ldr %[a0], [%[P], #52]\n\t"
      "vmsr p0, %[a0]\n"
      "1:\n\t"
      "ldr %[a0], [%[P], #20]\n\t"
      "add %[w1], %[w0], %[a0]\n\t"
      "add %[w2], %[w1], %[a0]\n\t"
      "add %[w3], %[w2], %[a0]\n\t"
      "ldrd %[xp], %[sxp], [%[P]]\n\t"
      "vmov.i32 q2, #0x80000000\n"
      "2:\n\t"
      "movs %[a0], #0\n\t"
      "movs %[a1], #0\n\t"
      "movs %[a2], #0\n\t"
      "movs %[a3], #0\n\t"
      "ldr lr, [%[P], #12]\n\t"
      "wls lr, lr, 4f\n"
      "3:\n\t"
      MICROATTN_Q8_STEP(16) MICROATTN_Q8_STEP(32) MICROATTN_Q8_STEP(48) MICROATTN_Q8_STEP_NEXT(64)
      "le lr, 3b\n"
      "4:\n\t"
      "ldr lr, [%[P], #16]\n\t"
      "wls lr, lr, 6f\n"
      "5:\n\t"
      MICROATTN_Q8_STEP_NEXT(16)
      "le lr, 5b\n"
      "6:\n\t"
      "strd %[a0], %[a1], [%[P], #36]\n\t"
      "strd %[a2], %[a3], [%[P], #44]\n\t"
      "vldrw.u32 q3, [%[P], #36]\n\t"
      "vcvt.f32.s32 q3, q3\n\t"
      "vldrw.u32 q1, [%q[swa], #4]!\n\t"
      "vmul.f32 q3, q3, q1\n\t"
      "ldr %[a0], [%[sxp]], #4\n\t"
      "vmul.f32 q3, q3, %[a0]\n\t"
      "vadd.f32 q2, q2, q3\n\t"
      "ldr %[a0], [%[P], #8]\n\t"
      "cmp %[sxp], %[a0]\n\t"
      "bne 2b\n\t"
      "vpst\n\t"
      "vldrwt.u32 q3, [%[y], %q[bo]]\n\t"
      "vadd.f32 q3, q3, q2\n\t"
      "vstrw.32 q3, [%[y]], #16\n\t"
      "ldr %[a0], [%[P], #24]\n\t"
      "add %[w0], %[w0], %[a0]\n\t"
      "ldr %[a0], [%[P], #28]\n\t"
      "vadd.i32 %q[swa], %q[swa], %[a0]\n\t"
      "ldr %[a0], [%[P], #32]\n\t"
      "cmp %[y], %[a0]\n\t"
      "bne 1b\n\t"
      "ldr %[a0], [%[P], #56]\n\t"
      "vmsr p0, %[a0]\n\t"
      : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [w0] "+r"(w0), [w1] "=&r"(w1),
        [w2] "=&r"(w2), [w3] "=&r"(w3), [xp] "=&r"(xp), [sxp] "=&r"(sxp), [y] "+r"(y), [swa] "+w"(sw_addr)
      : [P] "r"(&job), [bo] "w"(base_off)
      : "q0", "q1", "q2", "q3", "lr", "cc", "memory");
}

// quads_x16 for one segment of 64 columns with one scale per row (sw_stride 1): x's four vectors stay in
// registers, each quad's 16 products fully unrolled (the first of each row without accumulating), one loop
// pass per quad.
void quads_x64(const std::int8_t* w0, float* y, std::size_t quads, QuadJob& job, uint32x4_t sw_addr,
               uint32x4_t base_off, float sx) noexcept {
  register std::int32_t a0 asm("r0"), a1 asm("r2"), a2 asm("r4"), a3 asm("r6");
  register std::size_t count asm("lr") = quads;
  const std::int8_t* w1 = w0 + job.ldw;
  const std::int8_t* w2 = w1 + job.ldw;
  const std::int8_t* w3 = w2 + job.ldw;
  const std::size_t ld4 = 4 * job.ldw;
#define MICROATTN_Q8_ROWS(op, xq, offset)                   \
  "vldrb.u8 q1, [%[w0], #" #offset "]\n\t" op " %[a0], " xq \
  ", q1\n\t"                                                \
  "vldrb.u8 q1, [%[w1], #" #offset "]\n\t" op " %[a1], " xq \
  ", q1\n\t"                                                \
  "vldrb.u8 q1, [%[w2], #" #offset "]\n\t" op " %[a2], " xq \
  ", q1\n\t"                                                \
  "vldrb.u8 q1, [%[w3], #" #offset "]\n\t" op " %[a3], " xq ", q1\n\t"
  asm volatile(
      "vmrs %[a0], p0\n\t"
      "str %[a0], [%[P], #56]\n\t"
      "ldr %[a0], [%[P], #52]\n\t"
      "vmsr p0, %[a0]\n\t"
      "vldrb.u8 q0, [%[x]]\n\t"
      "vldrb.u8 q2, [%[x], #16]\n\t"
      "vldrb.u8 q6, [%[x], #32]\n\t"
      "vldrb.u8 q7, [%[x], #48]\n\t"
      "dls lr, lr\n"
      "1:\n\t"
      MICROATTN_Q8_ROWS("vmladav.s8", "q0", 0) MICROATTN_Q8_ROWS("vmladava.s8", "q2", 16)
      MICROATTN_Q8_ROWS("vmladava.s8", "q6", 32) MICROATTN_Q8_ROWS("vmladava.s8", "q7", 48)
      "add %[w0], %[w0], %[ld4]\n\t"
      "add %[w1], %[w1], %[ld4]\n\t"
      "add %[w2], %[w2], %[ld4]\n\t"
      "add %[w3], %[w3], %[ld4]\n\t"
      "strd %[a0], %[a1], [%[P], #36]\n\t"
      "strd %[a2], %[a3], [%[P], #44]\n\t"
      "vldrw.u32 q3, [%[P], #36]\n\t"
      "vcvt.f32.s32 q3, q3\n\t"
      "vldrw.u32 q1, [%q[swa], #16]!\n\t"
      "vmul.f32 q3, q3, q1\n\t"
      "vmul.f32 q3, q3, %[sx]\n\t"
      "vpst\n\t"
      "vldrwt.u32 q1, [%[y], %q[bo]]\n\t"
      "vadd.f32 q1, q1, q3\n\t"
      "vstrw.32 q1, [%[y]], #16\n\t"
      "le lr, 1b\n\t"
      "ldr %[a0], [%[P], #56]\n\t"
      "vmsr p0, %[a0]\n\t"
      : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [w0] "+r"(w0), [w1] "+r"(w1),
        [w2] "+r"(w2), [w3] "+r"(w3), [y] "+r"(y), [swa] "+w"(sw_addr), "+r"(count)
      : [P] "r"(&job), [x] "r"(job.q), [ld4] "r"(ld4), [bo] "w"(base_off), [sx] "r"(sx)
      : "q0", "q1", "q2", "q3", "q6", "q7", "cc", "memory");
#undef MICROATTN_Q8_ROWS
#undef MICROATTN_Q8_STEP
#undef MICROATTN_Q8_STEP_NEXT
}

// Four rows at a time: each segment's four sums scaled as one vector (times the weight scales, times sx), the
// segments added in order, then the bias, y, or 0 added. Whole quads of segments of whole 16-column vectors with
// one scale per row go through the asm kernels: there the segments are summed from −0 (which leaves every value
// as it is) by adds. The other rows and layouts are done here: a segment's last seg % 16 columns through
// predicated loads (inactive lanes read nothing and give zeros), and where there are such columns the segments
// are summed from 0 by fused multiply-adds (as they always were, so that each layout keeps its results).
void linear_q8_1x4_helium(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch) noexcept {
  assert(ch.rows == 1);
  const std::size_t seg = ch.seg, segs = ch.len / seg, full = seg / 16, rem = seg % 16, st = ch.sw_stride;
  const bool per_row = ch.rows_per_scale == 1, fused = rem != 0;
  const float* base = ch.first ? ch.bias : ch.y;
  std::size_t r = 0;
  if (!fused && per_row && n >= 4) {
    const std::size_t quads = n / 4;
    QuadJob job{ch.q,
                ch.sx,
                ch.sx + segs,
                static_cast<std::uint32_t>(full / 4),
                static_cast<std::uint32_t>(full % 4),
                static_cast<std::uint32_t>(ldw),
                static_cast<std::uint32_t>(4 * ldw - ch.len),
                static_cast<std::uint32_t>(16 * st - 4 * segs),
                ch.y + 4 * quads,
                {},
                base != nullptr ? 0xffffu : 0u,
                0};
    const uint32x4_t lanes = vidupq_n_u32(0, 4);
    const auto addr = [](const void* p) { return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(p)); };
    const uint32x4_t base_off = vaddq_n_u32(lanes, base != nullptr ? addr(base) - addr(ch.y) : 0u);
    if (segs == 1 && full == 4 && st == 1) {
      quads_x64(w, ch.y, quads, job, vaddq_n_u32(lanes, addr(ch.sw) - 16), base_off, ch.sx[0]);
    } else {
      quads_x16(w, ch.y, job, vaddq_n_u32(vmulq_n_u32(lanes, static_cast<std::uint32_t>(st)), addr(ch.sw) - 4),
                base_off);
    }
    r = 4 * quads;
    if (r == n) return;
  }
  const float zero[4] = {};
  std::size_t base_step = 4;
  if (base == nullptr) {
    base = zero;
    base_step = 0;
  } else {
    base += r;
  }
  const mve_pred16_t tail = vctp8q(static_cast<std::uint32_t>(rem));
  for (; r < n; r += 4) {
    // Rows past n repeat row n − 1 and are not stored.
    const std::size_t last = n - r < 4 ? n - 1 - r : 3;
    const std::size_t d1 = last < 1 ? 0 : ldw, d2 = last < 2 ? d1 : 2 * ldw, d3 = last * ldw;
    const uint32x4_t sw_offsets = vmulq_n_u32(
        vminq_u32(vidupq_n_u32(0, 1), vdupq_n_u32(static_cast<std::uint32_t>(last))), static_cast<std::uint32_t>(st));
    const std::int8_t* p0 = w + r * ldw;
    const std::int8_t *p1 = p0 + d1, *p2 = p0 + d2, *p3 = p0 + d3;
    const std::int8_t* xp = ch.q;
    const float* sw = ch.sw + r * st;
    float32x4_t f = vdupq_n_f32(fused ? 0.0f : -0.0f);
    for (std::size_t s = 0; s < segs; ++s) {
      std::int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      if (full != 0) dot16_x4(xp, p0, p1, p2, p3, full, a0, a1, a2, a3);
      if (rem != 0) {
        const int8x16_t xv = vldrbq_z_s8(xp, tail);
        a0 = vmladavaq_s8(a0, xv, vldrbq_z_s8(p0, tail));
        a1 = vmladavaq_s8(a1, xv, vldrbq_z_s8(p1, tail));
        a2 = vmladavaq_s8(a2, xv, vldrbq_z_s8(p2, tail));
        a3 = vmladavaq_s8(a3, xv, vldrbq_z_s8(p3, tail));
        xp += rem;
        p0 += rem;
        p1 += rem;
        p2 += rem;
        p3 += rem;
      }
      float32x4_t swv;
      if (per_row) {
        swv = vldrwq_gather_shifted_offset_f32(sw + s, sw_offsets);
      } else {
        const float* const p[4] = {row_scales(ch, r), row_scales(ch, r + (last < 1 ? last : 1)),
                                   row_scales(ch, r + (last < 2 ? last : 2)), row_scales(ch, r + last)};
        swv = scales4(p, s);
      }
      const float32x4_t t = vmulq_f32(vcvtq_f32_s32(sums4(a0, a1, a2, a3)), swv);
      f = fused ? vfmaq_n_f32(f, t, ch.sx[s]) : vaddq_f32(f, vmulq_n_f32(t, ch.sx[s]));
    }
    const mve_pred16_t pr = vctp32q(static_cast<std::uint32_t>(n - r));
    vstrwq_p_f32(ch.y + r, vaddq_f32(vldrwq_z_f32(base, pr), f), pr);
    base += base_step;
  }
}

// ---- f16 ------------------------------------------------------------------------------------------------------

// The f16 code at -Os: GCC's -O2 unrolled and duplicated its checks and scalar loops (1.1 KiB) for nothing the
// counts showed.
#pragma GCC push_options
#pragma GCC optimize("Os")

// MVE's VCVTB/VCVTT.F32.F16 (Q registers) by encoding: GNU as 2.40 encodes the f32.f16 direction with both
// register numbers doubled (vcvtb.f32.f16 q0, q1 comes out as q0, q2; q4 and up as undefined encodings), which
// objdump and QEMU decode as the architecture says. Encoding T1: 0xfe3f0e01 | Qd << 13 | T << 12 | Qm << 1.
// clang-format off
#define MICROATTN_VCVT_F32_F16(top, qd, qm) ".inst.w 0xfe3f0e01 | (" #qd " << 13) | (" #top " << 12) | (" #qm " << 1)\n\t"
// clang-format on

// Quads of rows of binary16 weights against x, k8 columns (a multiple of 8): per 8 columns of a row one VLDRH.U16
// of 8 halves, VCVTT (the odd columns) and VCVTB (the even ones) to floats, two VFMAs against x loaded
// de-interleaved (VLD20/VLD21) once for the four rows. The conversions are exact for every half (subnormals too:
// FZ16 does not apply to them; inf and NaN stay inf and NaN).
// What f16_quads_helium reads from memory besides its registers (byte offsets fixed: the asm names them).
struct alignas(16) F16Job {
  float acc[16];         // 0: the four rows' accumulators, read back transposed (VLD40..43) to be summed as one vector
  const float* x;        // 64
  std::uint32_t pairs;   // 68: 16-column steps per row after its first 8 columns
  std::uint32_t single;  // 72: 1 when an 8-column step follows them
};
static_assert(offsetof(F16Job, x) == 64 && offsetof(F16Job, single) == 72, "the asm's offsets");

// The quads of rows from w0 until y reaches y_end (ldw: the row stride in bytes; advance: ldw − 2·k8, from the end
// of a quad's last row to the next quad), one loop pass per quad: the four accumulators summed lane-wise after a
// transpose, the base added (the bias, base_step 16, or four zeros, base_step 0), one vector store of the four
// sums. asm: GCC -Os spilled the driver's pointers around the quads.
void f16_quads_helium(const std::uint16_t* w0, float* y, const float* y_end, const float* base, std::uint32_t base_step,
                      std::uint32_t ldw, std::uint32_t advance, F16Job& job) noexcept {
  const std::uint16_t *w1, *w2, *w3;
  const float* xp;
// clang-format off
#define MICROATTN_F16_ROW(p, acc)                                          \
  "vldrh.u16 q6, [%[" p "]], #16\n\t" MICROATTN_VCVT_F32_F16(1, 7, 6)     \
      MICROATTN_VCVT_F32_F16(0, 6, 6) "vfma.f32 " acc ", q1, q7\n\t"       \
      "vfma.f32 " acc ", q0, q6\n\t"
#define MICROATTN_F16_FIRST(p, acc)                                        \
  "vldrh.u16 q6, [%[" p "]], #16\n\t" MICROATTN_VCVT_F32_F16(1, 7, 6)     \
      MICROATTN_VCVT_F32_F16(0, 6, 6) "vmul.f32 " acc ", q1, q7\n\t"       \
      "vfma.f32 " acc ", q0, q6\n\t"
#define MICROATTN_F16_X                \
  "vld20.32 {q0, q1}, [%[xp]]\n\t"     \
  "vld21.32 {q0, q1}, [%[xp]]!\n\t"
#define MICROATTN_F16_STEP                                                                                  \
  MICROATTN_F16_X MICROATTN_F16_ROW("w0", "q2") MICROATTN_F16_ROW("w1", "q3") MICROATTN_F16_ROW("w2", "q4") \
      MICROATTN_F16_ROW("w3", "q5")
  // clang-format on
  asm volatile(
      "1:\n\t"
      "add %[w1], %[w0], %[ldw]\n\t"
      "add %[w2], %[w1], %[ldw]\n\t"
      "add %[w3], %[w2], %[ldw]\n\t"
      "ldrd %[xp], lr, [%[P], #64]\n\t"
      MICROATTN_F16_X MICROATTN_F16_FIRST("w0", "q2") MICROATTN_F16_FIRST("w1", "q3")
      MICROATTN_F16_FIRST("w2", "q4") MICROATTN_F16_FIRST("w3", "q5")
      "wls lr, lr, 3f\n"
      "2:\n\t" MICROATTN_F16_STEP MICROATTN_F16_STEP
      "le lr, 2b\n"
      "3:\n\t"
      "ldr lr, [%[P], #72]\n\t"
      "wls lr, lr, 4f\n\t" MICROATTN_F16_STEP
      "4:\n\t"
      "vstrw.32 q2, [%[P]]\n\t"
      "vstrw.32 q3, [%[P], #16]\n\t"
      "vstrw.32 q4, [%[P], #32]\n\t"
      "vstrw.32 q5, [%[P], #48]\n\t"
      "vld40.32 {q0, q1, q2, q3}, [%[P]]\n\t"
      "vld41.32 {q0, q1, q2, q3}, [%[P]]\n\t"
      "vld42.32 {q0, q1, q2, q3}, [%[P]]\n\t"
      "vld43.32 {q0, q1, q2, q3}, [%[P]]\n\t"
      "vadd.f32 q0, q0, q1\n\t"
      "vadd.f32 q2, q2, q3\n\t"
      "vadd.f32 q0, q0, q2\n\t"
      "vldrw.u32 q1, [%[b]]\n\t"
      "add %[b], %[b], %[bs]\n\t"
      "vadd.f32 q0, q1, q0\n\t"
      "vstrw.32 q0, [%[y]], #16\n\t"
      "add %[w0], %[w3], %[adv]\n\t"
      "cmp %[y], %[ye]\n\t"
      "bne 1b\n\t"
      : [xp] "=&r"(xp), [w0] "+r"(w0), [w1] "=&r"(w1), [w2] "=&r"(w2), [w3] "=&r"(w3), [y] "+r"(y), [b] "+r"(base)
      : [P] "r"(&job), [ye] "r"(y_end), [bs] "r"(base_step), [ldw] "r"(ldw), [adv] "r"(advance)
      : "q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "lr", "cc", "memory");
#undef MICROATTN_F16_STEP
#undef MICROATTN_F16_X
#undef MICROATTN_F16_FIRST
#undef MICROATTN_F16_ROW
}

// Whether none of x_0..x_n−1 (n > 0) is subnormal (vector arithmetic would flush it): as doubled bits u, the
// smallest u − 1 (which skips zeros) at least FLT_MIN's − 1. A tail-predicated loop, as linear_absmax_bits_helium.
bool f16_x_plain(const float* x, std::size_t n) noexcept {
  std::uint32_t m = 0xffffffffu;
  asm volatile(
      "vmov.i8 q1, #0xff\n\t"
      "dlstp.32 lr, %[n]\n"
      "1:\n\t"
      "vldrw.u32 q0, [%[x]], #16\n\t"
      "vshl.i32 q0, q0, #1\n\t"
      "vsub.i32 q0, q0, %[one]\n\t"
      "vmin.u32 q1, q1, q0\n\t"
      "letp lr, 1b\n\t"
      "vminv.u32 %[m], q1\n\t"
      : [m] "+r"(m), [x] "+r"(x)
      : [n] "r"(n), [one] "r"(1u)
      : "q0", "q1", "lr", "memory");
  return m >= 0x00ffffffu;
}

// Σ x_c·w_c over c in [c0, k) in order on the scalar FPU, each half converted by VCVTB (exact for every pattern;
// FPSCR.FZ does not apply to half-precision conversions).
__attribute__((noinline)) float f16_dot_scalar(const float* x, const std::uint16_t* w, std::size_t c0,
                                               std::size_t k) noexcept {
  float s = 0.0f;
  for (std::size_t c = c0; c < k; ++c) {
    float h;
    const std::uint32_t bits = w[c];
    std::memcpy(&h, &bits, sizeof h);
    asm("vcvtb.f32.f16 %0, %0" : "+t"(h));
    s += x[c] * h;
  }
  return s;
}

// f16 in vectors when n >= 4 and x has no subnormal element among the columns' whole groups of 8: the quads of
// rows (the last n % 4 rows in a last quad that overlaps the one before: its rows are computed alike and stored
// again), then the last k % 8 columns of each row in scalar. Else every row in scalar.
void linear_f16_1x4_helium(const LinearArgs& a) noexcept {
  const auto* w = static_cast<const std::uint16_t*>(a.w);
  const std::size_t n = a.n, k = a.k, k8 = k & ~static_cast<std::size_t>(7), n4 = n & ~static_cast<std::size_t>(3);
  static const float zeros[4] = {};
  const float* const base = a.bias != nullptr ? a.bias : zeros;
  const std::uint32_t base_step = a.bias != nullptr ? 16u : 0u, ldw = static_cast<std::uint32_t>(2 * k),
                      advance = static_cast<std::uint32_t>(2 * (k - k8));
  for (std::size_t i = 0; i < a.m; ++i) {
    const float* x = a.x + i * a.ldx;
    float* y = a.y + i * a.ldy;
    if (n >= 4 && k8 != 0 && f16_x_plain(x, k8)) {
      // The first 8 columns start the sums (VMUL), the rest go in pairs of 8, then the last 8 when their count is odd.
      F16Job job{{}, x, static_cast<std::uint32_t>((k8 - 8) / 16), static_cast<std::uint32_t>((k8 - 8) / 8 % 2)};
      f16_quads_helium(w, y, y + n4, base, base_step, ldw, advance, job);
      if (n4 != n)
        f16_quads_helium(w + (n - 4) * k, y + n - 4, y + n, base + (n - 4) * base_step / 16, 0, ldw, advance, job);
      if (k8 != k)
        for (std::size_t r = 0; r < n; ++r) y[r] += f16_dot_scalar(x, w + r * k, k8, k);
    } else {
      for (std::size_t r = 0; r < n; ++r)
        y[r] = (a.bias != nullptr ? a.bias[r] : 0.0f) + f16_dot_scalar(x, w + r * k, 0, k);
    }
  }
}

#pragma GCC pop_options

}  // namespace

MICROATTN_LINEAR_CORTEX_M_TABLES("helium", "linear_f32_gemm_helium", "linear_f16_1x4_helium", "linear_q8_1x4_helium",
                                 linear_f16_1x4_helium, linear_q8_1x4_helium, linear_absmax_bits_helium,
                                 linear_quantize_helium)
LinearF16Kernel vector_linear_f16() noexcept { return linear_f16_1x4_helium; }

}  // namespace detail
}  // namespace microattn

#endif
