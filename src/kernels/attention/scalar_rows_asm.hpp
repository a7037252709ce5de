// The scalar row kernels' loops in asm for a head dim of 8 on Cortex-M with a single-precision FPU and FMA: part
// of scalar.cpp's translation unit, included there alone, where these definitions stood.
#pragma once

#include <cstddef>

namespace microattn {
namespace detail {
namespace {

#if defined(__arm__) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M' && defined(__ARM_FP) && \
    (__ARM_FP & 4) && defined(__FP_FAST_FMAF)
#define MICROATTN_ROWS_ASM 1  // the row kernels' loops in asm (Cortex-M with a single-precision FPU and FMA)
// A head dim of 8 (d = 64 with 8 heads: the small llama2.c shapes) on Cortex-M: the two rows of q, or of o, stay in
// s0–s15 for a whole block and each row of k or v comes in two VLDMs, 1.4 instructions per multiply-add where the
// 2x4 kernels below take 2.5. Each sum runs over p (dot) or over the keys (axpy) in order, one fused multiply-add per
// term after a first product, as in the C kernels: the same floats. One asm statement each, so that nothing of GCC's
// runs while the registers hold the sums; of the callee-saved registers only s16–s21 are used (24 bytes of stack:
// these kernels sit on the deepest stack path). A single row passes itself as both rows, as the C kernels do.
constexpr std::size_t rows_d8 = 8;

// clang-format off
// Scores: four elements of the key in s16–s19 times q_a's (s<a0>…) into s20 and q_b's (s<a0 + 8>…) into s21, the
// first instruction op0 (vmul for the key's first element), then vfma.
#define MICROATTN_DOT4(op0, a0, a1, a2, a3, b0, b1, b2, b3) \
  "vldmia %[k]!, {s16-s19}\n\t" \
  op0 ".f32 s20, s" #a0 ", s16\n\t" \
  op0 ".f32 s21, s" #b0 ", s16\n\t" \
  "vfma.f32 s20, s" #a1 ", s17\n\t" \
  "vfma.f32 s21, s" #b1 ", s17\n\t" \
  "vfma.f32 s20, s" #a2 ", s18\n\t" \
  "vfma.f32 s21, s" #b2 ", s18\n\t" \
  "vfma.f32 s20, s" #a3 ", s19\n\t" \
  "vfma.f32 s21, s" #b3 ", s19\n\t"
// P·V: four columns of the value row in s16–s19 times p_a (s20) into o_a's s<a0>… and p_b (s21) into o_b's.
#define MICROATTN_PV4(op, a0, a1, a2, a3, b0, b1, b2, b3) \
  "vldmia %[v]!, {s16-s19}\n\t" \
  op ".f32 s" #a0 ", s20, s16\n\t" \
  op ".f32 s" #b0 ", s21, s16\n\t" \
  op ".f32 s" #a1 ", s20, s17\n\t" \
  op ".f32 s" #b1 ", s21, s17\n\t" \
  op ".f32 s" #a2 ", s20, s18\n\t" \
  op ".f32 s" #b2 ", s21, s18\n\t" \
  op ".f32 s" #a3 ", s20, s19\n\t" \
  op ".f32 s" #b3 ", s21, s19\n\t"
// One value row (op vmul: the first, a product; vfma: the rest), then the count.
#define MICROATTN_PV_ROW(op) \
  "vldmia %[pa]!, {s20}\n\t" \
  "vldmia %[pb]!, {s21}\n\t" \
  MICROATTN_PV4(op, 0, 1, 2, 3, 8, 9, 10, 11) \
  MICROATTN_PV4(op, 4, 5, 6, 7, 12, 13, 14, 15) \
  "add %[v], %[v], %[step]\n\t" \
  "subs %[n], %[n], #1\n\t"
// clang-format on

// s_a[j] = q_a·k_j and s_b[j] = q_b·k_j for n >= 1 keys k_j = k + j·ldk (s_b may be s_a when q_b is q_a).
__attribute__((noinline)) void rows_dot_2xn_d8(const float* qa, const float* qb, const float* k, std::size_t ldk,
                                               std::size_t n, float* sa, float* sb) noexcept {
  const std::size_t step = (ldk - rows_d8) * sizeof(float);
  asm volatile(MICROATTN_D8_DOT_LOOP(MICROATTN_DOT4("vmul", 0, 1, 2, 3, 8, 9, 10, 11)
                                         MICROATTN_DOT4("vfma", 4, 5, 6, 7, 12, 13, 14, 15),
                                     "s20", "s21")
               : [k] "+r"(k), [sa] "+r"(sa), [sb] "+r"(sb), [n] "+r"(n)
               : [qa] "r"(qa), [qb] "r"(qb), [step] "r"(step)
               : MICROATTN_D8_CLOBBERS, "s16", "s17", "s18", "s19", "s20", "s21", "cc", "memory");
}

// o_a = o_a·alpha_a + Σ_j p_a[j]·v_j over n >= 1 rows v_j = v + j·ldv (alpha_a, alpha_b null: Σ_j alone, its first
// term a product), and the same for b (o_b may be o_a when p_b is p_a and alpha_b alpha_a: a's sums land last).
__attribute__((noinline)) void rows_axpy_2xn_d8(const float* pa, const float* pb, std::size_t n, const float* v,
                                                std::size_t ldv, const float* alpha_a, const float* alpha_b, float* oa,
                                                float* ob) noexcept {
  const std::size_t step = (ldv - rows_d8) * sizeof(float);
  asm volatile(
      MICROATTN_D8_AXPY_LOOP("%[ala]", "%[alb]", "s20", "s21", MICROATTN_PV_ROW("vmul"), MICROATTN_PV_ROW("vfma"))
      : [v] "+r"(v), [pa] "+r"(pa), [pb] "+r"(pb), [n] "+r"(n)
      : [ala] "r"(alpha_a), [alb] "r"(alpha_b), [oa] "r"(oa), [ob] "r"(ob), [step] "r"(step)
      : MICROATTN_D8_CLOBBERS, "s16", "s17", "s18", "s19", "s20", "s21", "cc", "memory");
}
#undef MICROATTN_DOT4
#undef MICROATTN_PV4
#undef MICROATTN_PV_ROW
#endif

}  // namespace
}  // namespace detail
}  // namespace microattn
