// linear()'s Helium (MVE-F) kernels: the table Cortex-M55 selects; empty elsewhere.
//
// q8: four weight rows per pass share each 16-byte vector of x; VMLADAVA.S8 sums 16 int8 products into an int32
// (exact: a 256-column segment stays below 2²³), the last seg % 16 columns through predicated loads (inactive
// lanes read nothing and give zeros). The four rows' sums are scaled as one vector per segment.
// f16: the scalar FPU's kernel of linear_armv7em.cpp. MVE's own VCVTB.F32.F16 (Q registers) is what a Helium f16
// kernel would use, but QEMU 7.2 faults on it as undefined (and objdump does not decode GCC 12's encoding), so it
// could not be tested here.
// Quantization: absmax on the float bits in vectors; x / s by the scalar FPU's division (MVE has none), rounded
// by VCVTA (to nearest, ties away from zero: quantize_one's rule).
#include "kernels/linear_kernels.hpp"

#if MICROATTN_LINEAR_HELIUM

#include <arm_mve.h>

#pragma GCC optimize("O2")

#include <cassert>
#include <cstring>

#include "kernels/scalar_math.hpp"

namespace microattn {
namespace detail {
namespace {

#define MICROATTN_LINEAR_HELIUM_INLINE inline __attribute__((always_inline))

// Rows [r, r + 4) of a tile; rows past n (a last, partial tile) repeat row n − 1 and are not stored.
MICROATTN_LINEAR_HELIUM_INLINE std::size_t clamp_row(std::size_t r, std::size_t n) noexcept {
  return r < n ? r : n - 1;
}

// y[0..rows) = base + v, base = bias (or 0) when first, else y itself.
MICROATTN_LINEAR_HELIUM_INLINE void store_rows(float* y, const float* bias, bool first, float32x4_t v,
                                               std::size_t rows) noexcept {
  const mve_pred16_t p = vctp32q(static_cast<std::uint32_t>(rows));
  const float32x4_t base = first ? (bias != nullptr ? vldrwq_z_f32(bias, p) : vdupq_n_f32(0.0f)) : vldrwq_z_f32(y, p);
  vstrwq_p_f32(y, vaddq_f32(base, v), p);
}

// ---- q8 -------------------------------------------------------------------------------------------------------

std::uint32_t absmax_bits_helium(const float* x, std::size_t n) noexcept {
  // The doubled bits (sign shifted out) order |x| as unsigned integers, NaN and inf above every finite value.
  uint32x4_t m = vdupq_n_u32(0);
  const auto* p = reinterpret_cast<const std::uint32_t*>(x);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4, p += 4) m = vmaxq_u32(m, vshlq_n_u32(vldrwq_u32(p), 1));
  if (i < n) m = vmaxq_u32(m, vshlq_n_u32(vldrwq_z_u32(p, vctp32q(static_cast<std::uint32_t>(n - i))), 1));
  return vmaxvq_u32(0, m) >> 1;
}

MICROATTN_LINEAR_HELIUM_INLINE std::int8_t quantize_helium_one(float x, float s) noexcept {
  float r = x / s;
  asm("vcvta.s32.f32 %0, %0" : "+t"(r));  // round to nearest, ties away from zero
  std::int32_t v;
  std::memcpy(&v, &r, sizeof v);
  return static_cast<std::int8_t>(v);
}

void quantize_helium(const float* x, std::size_t n, float s, std::int8_t* q) noexcept {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {  // four at a time: one loop test per four divisions
    q[i] = quantize_helium_one(x[i], s);
    q[i + 1] = quantize_helium_one(x[i + 1], s);
    q[i + 2] = quantize_helium_one(x[i + 2], s);
    q[i + 3] = quantize_helium_one(x[i + 3], s);
  }
  for (; i < n; ++i) q[i] = quantize_helium_one(x[i], s);
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

// The weight scales of rows r..r + 3 (clamped) at segment s, as a vector.
MICROATTN_LINEAR_HELIUM_INLINE float32x4_t scales4(const float* const sw[4], std::size_t s) noexcept {
  float32x4_t v = vdupq_n_f32(sw[0][s]);
  v = vsetq_lane_f32(sw[1][s], v, 1);
  v = vsetq_lane_f32(sw[2][s], v, 2);
  return vsetq_lane_f32(sw[3][s], v, 3);
}

// What quads_x16 reads from memory (its registers hold the four rows, their sums and the loop count).
struct QuadParams {
  std::size_t steps;     // 16-column vectors per row
  const std::int8_t* x;  // the segment's quantized x
  std::size_t ldw;       // weight row stride
  std::size_t advance;   // 4·ldw − 16·steps... from the end of a quad's first row to the next quad's
  std::int32_t* sums;    // where the next quad's four sums go (advanced)
  const std::int32_t* sums_end;
};

// The int32 sums of consecutive quads of rows from p0, one segment of 16·steps columns each, in order: the whole
// loop in asm (a quad costs about 17 instructions besides its dot products).
void quads_x16(const std::int8_t* p0, QuadParams& prm) noexcept {
  register std::int32_t a0 asm("r0"), a1 asm("r2"), a2 asm("r4"), a3 asm("r6");
  register std::size_t count asm("lr");
  const std::int8_t *p1, *p2, *p3, *xp;
  std::uint32_t t;
  asm volatile(
      "2:\n\t"
      "ldrd %[n], %[xp], [%[P]]\n\t"
      "ldr %[t], [%[P], #8]\n\t"
      "add %[p1], %[p0], %[t]\n\t"
      "add %[p2], %[p1], %[t]\n\t"
      "add %[p3], %[p2], %[t]\n\t"
      "movs %[a0], #0\n\t"
      "movs %[a1], #0\n\t"
      "movs %[a2], #0\n\t"
      "movs %[a3], #0\n\t"
      "dls lr, %[n]\n"
      "1:\n\t"
      "vldrb.u8 q0, [%[xp]], #16\n\t"
      "vldrb.u8 q1, [%[p0]], #16\n\t"
      "vmlava.s8 %[a0], q0, q1\n\t"
      "vldrb.u8 q1, [%[p1]], #16\n\t"
      "vmlava.s8 %[a1], q0, q1\n\t"
      "vldrb.u8 q1, [%[p2]], #16\n\t"
      "vmlava.s8 %[a2], q0, q1\n\t"
      "vldrb.u8 q1, [%[p3]], #16\n\t"
      "vmlava.s8 %[a3], q0, q1\n\t"
      "le lr, 1b\n\t"
      "ldrd %[t], %[xp], [%[P], #12]\n\t"
      "add %[p0], %[p0], %[t]\n\t"
      "strd %[a0], %[a1], [%[xp]], #8\n\t"
      "strd %[a2], %[a3], [%[xp]], #8\n\t"
      "ldr %[t], [%[P], #20]\n\t"
      "str %[xp], [%[P], #16]\n\t"
      "cmp %[xp], %[t]\n\t"
      "bne 2b\n\t"
      : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [n] "=&r"(count), [p0] "+r"(p0), [p1] "=&r"(p1),
        [p2] "=&r"(p2), [p3] "=&r"(p3), [xp] "=&r"(xp), [t] "=&r"(t)
      : [P] "r"(&prm)
      : "q0", "q1", "cc", "memory");
}

// Segments of whole 16-column vectors: quads of rows through quads_x16, the rest (n % 4 rows) through dot16_x4
// (clamped rows), then the scaling as vectors of four rows.
void q8_rows_x16(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch) noexcept {
  constexpr std::size_t block = 32;  // rows whose sums are kept at a time (stack: 256 B with their floats)
  const std::size_t seg = ch.seg, segs = ch.len / seg, steps = seg / 16;
  const bool per_row = ch.rows_per_scale == 1;
  const std::size_t st = ch.sw_stride;
  const uint32x4_t sw_offsets = vmulq_n_u32(vidupq_n_u32(0, 1), static_cast<std::uint32_t>(st));
  for (std::size_t r0 = 0; r0 < n; r0 += block) {
    const std::size_t rows = n - r0 < block ? n - r0 : block, quads = rows / 4;
    alignas(16) float f[block];
    for (std::size_t s = 0; s < segs; ++s) {
      alignas(16) std::int32_t sums[block];
      const std::int8_t* p0 = w + r0 * ldw + s * seg;
      const std::int8_t* xs = ch.q + s * seg;
      if (quads != 0) {
        QuadParams prm{steps, xs, ldw, 4 * ldw - seg, sums, sums + 4 * quads};
        quads_x16(p0, prm);
      }
      if (rows % 4 != 0) {
        const std::size_t i = 4 * quads;
        const std::int8_t* q0 = p0 + i * ldw;
        const std::int8_t* q1 = p0 + clamp_row(i + 1, rows) * ldw;
        const std::int8_t* q2 = p0 + clamp_row(i + 2, rows) * ldw;
        const std::int8_t* q3 = p0 + clamp_row(i + 3, rows) * ldw;
        const std::int8_t* xp = xs;
        std::int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        dot16_x4(xp, q0, q1, q2, q3, steps, a0, a1, a2, a3);
        sums[i] = a0;
        sums[i + 1] = a1;  // rows past `rows` are written into the buffer and never read
        sums[i + 2] = a2;
        sums[i + 3] = a3;
      }
      // Scaling, four rows at a time: y directly when there is one segment, else into f.
      const float sxs = ch.sx[s];
      const float* const swb = ch.sw + r0 * st + s;
      float* const y = ch.y + r0;
      const float* const base = ch.first ? (ch.bias != nullptr ? ch.bias + r0 : nullptr) : y;
      std::size_t i = 0;
      for (; i + 4 <= rows; i += 4) {
        float32x4_t sw;
        if (per_row) {
          sw = st == 1 ? vldrwq_f32(swb + i) : vldrwq_gather_shifted_offset_f32(swb + i * st, sw_offsets);
        } else {
          const float* const p[4] = {row_scales(ch, r0 + i), row_scales(ch, r0 + i + 1), row_scales(ch, r0 + i + 2),
                                     row_scales(ch, r0 + i + 3)};
          sw = scales4(p, s);
        }
        const float32x4_t v = vmulq_n_f32(vmulq_f32(vcvtq_f32_s32(vldrwq_s32(sums + i)), sw), sxs);
        if (segs == 1) {
          vstrwq_f32(y + i, base != nullptr ? vaddq_f32(vldrwq_f32(base + i), v) : vaddq_f32(vdupq_n_f32(0.0f), v));
        } else {
          vstrwq_f32(f + i, s == 0 ? v : vaddq_f32(vldrwq_f32(f + i), v));
        }
      }
      if (i < rows) {  // the last rows % 4 (rows past `rows` repeat the last one and are not stored)
        const mve_pred16_t pr = vctp32q(static_cast<std::uint32_t>(rows - i));
        const float* const p[4] = {row_scales(ch, r0 + i), row_scales(ch, r0 + clamp_row(i + 1, rows)),
                                   row_scales(ch, r0 + clamp_row(i + 2, rows)),
                                   row_scales(ch, r0 + clamp_row(i + 3, rows))};
        const float32x4_t v = vmulq_n_f32(vmulq_f32(vcvtq_f32_s32(vldrwq_s32(sums + i)), scales4(p, s)), sxs);
        if (segs == 1) {
          store_rows(y + i, base != nullptr ? base + i : nullptr, ch.first, v, rows - i);
        } else {
          vstrwq_p_f32(f + i, s == 0 ? v : vaddq_f32(vldrwq_f32(f + i), v), pr);
        }
      }
    }
    if (segs != 1)
      for (std::size_t i = 0; i < rows; i += 4)
        store_rows(ch.y + r0 + i, ch.bias != nullptr ? ch.bias + r0 + i : nullptr, ch.first, vldrwq_f32(f + i),
                   rows - i < 4 ? rows - i : 4);
  }
}

void q8_chunk_helium(const std::int8_t* w, std::size_t ldw, std::size_t n, const Q8Chunk& ch) noexcept {
  assert(ch.rows == 1);
  if (ch.seg % 16 == 0) {
    q8_rows_x16(w, ldw, n, ch);
    return;
  }
  const std::size_t seg = ch.seg, segs = ch.len / seg, full = seg / 16, rem = seg % 16;
  const mve_pred16_t tail = vctp8q(static_cast<std::uint32_t>(rem));
  // One scale per row per segment (rows_per_scale 1): the four rows' scales are one gather at these offsets.
  const bool per_row = ch.rows_per_scale == 1;
  const uint32x4_t sw_offsets = vmulq_n_u32(vidupq_n_u32(0, 1), static_cast<std::uint32_t>(ch.sw_stride));
  for (std::size_t r = 0; r < n; r += 4) {
    const std::size_t rows = n - r < 4 ? n - r : 4;
    const std::int8_t* w0 = w + r * ldw;
    const std::int8_t* w1 = w + clamp_row(r + 1, n) * ldw;
    const std::int8_t* w2 = w + clamp_row(r + 2, n) * ldw;
    const std::int8_t* w3 = w + clamp_row(r + 3, n) * ldw;
    const std::int8_t* xp = ch.q;
    float32x4_t f = vdupq_n_f32(0.0f);
    for (std::size_t s = 0; s < segs; ++s) {
      std::int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      if (full != 0) dot16_x4(xp, w0, w1, w2, w3, full, a0, a1, a2, a3);
      if (rem != 0) {
        const int8x16_t xv = vldrbq_z_s8(xp, tail);
        a0 = vmladavaq_s8(a0, xv, vldrbq_z_s8(w0, tail));
        a1 = vmladavaq_s8(a1, xv, vldrbq_z_s8(w1, tail));
        a2 = vmladavaq_s8(a2, xv, vldrbq_z_s8(w2, tail));
        a3 = vmladavaq_s8(a3, xv, vldrbq_z_s8(w3, tail));
        xp += rem;
        w0 += rem;
        w1 += rem;
        w2 += rem;
        w3 += rem;
      }
      int32x4_t acc = vdupq_n_s32(a0);
      acc = vsetq_lane_s32(a1, acc, 1);
      acc = vsetq_lane_s32(a2, acc, 2);
      acc = vsetq_lane_s32(a3, acc, 3);
      float32x4_t sw;
      if (per_row && rows == 4) {
        sw = vldrwq_gather_shifted_offset_f32(ch.sw + r * ch.sw_stride + s, sw_offsets);
      } else {
        const float* const p[4] = {row_scales(ch, r), row_scales(ch, clamp_row(r + 1, n)),
                                   row_scales(ch, clamp_row(r + 2, n)), row_scales(ch, clamp_row(r + 3, n))};
        sw = scales4(p, s);
      }
      f = vfmaq_n_f32(f, vmulq_f32(vcvtq_f32_s32(acc), sw), ch.sx[s]);
    }
    store_rows(ch.y + r, ch.bias != nullptr ? ch.bias + r : nullptr, ch.first, f, rows);
  }
}

constexpr LinearKernels table{"helium",
                              "linear_f32_gemm_helium",  // matmul's Helium gemm
                              "linear_f16_1x4_armv7em",  // the scalar FPU's VCVTB/VCVTT (see above)
                              "linear_q8_1x4_helium",
                              linear_f32_gemm,
                              linear_f16_1x4_armv7em,
                              q8_chunk_helium,
                              1,
                              absmax_bits_helium,
                              quantize_helium};

}  // namespace

const LinearKernels& helium_linear_kernels() noexcept { return table; }

}  // namespace detail
}  // namespace microattn

#endif
