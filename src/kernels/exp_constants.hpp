// Constants of microattn's exp, shared by the scalar and the xsimd kernels (no xsimd include here).
//
// e^x = 2^n · e^r with n = round(x / ln2) and r = x − n·ln2 in [−ln2/2, ln2/2]:
//  - n is rounded with the "magic number" trick (add 1.5·2²³, the float's integer bits then hold n);
//  - r uses a Cody–Waite split of ln2 whose high part has 8+ trailing zero bits, so n·ln2_hi is exact for
//    |n| <= 150 even without FMA (i686 SSE2, some Cortex-M builds);
//  - e^r is a degree-6 polynomial, minimax in relative error on [−ln2/2, ln2/2] (scripts/fit_exp_poly.py 6:
//    1.7e-8 relative with these float coefficients, i.e. < 0.3 ULP before the rounding of the evaluation);
//  - 2^n is applied as 2^(n>>1) · 2^(n−(n>>1)): both factors stay normal for n in [−150, 128], so results in
//    the subnormal range are rounded once and e^x up to FLT_MAX needs no special case.
#pragma once

namespace microattn {
namespace detail {
namespace exp_constants {

constexpr float log2e = 1.44269504088896341f;
constexpr float ln2_hi = 0.693359375f;  // 0x3F318000, 8 trailing zeros in the significand
constexpr float ln2_lo = -2.12194440054690583e-4f;
constexpr float round_magic = 12582912.0f;  // 1.5·2²³
constexpr float x_min = -104.0f;            // below: e^x rounds to 0 (and −inf lands here)
constexpr float x_max = 89.0f;              // above: e^x overflows to +inf
constexpr float c0 = 1.0f;
constexpr float c1 = 1.0f;
constexpr float c2 = 4.999999106e-01f;  // 0x3efffffd
constexpr float c3 = 1.666641980e-01f;  // 0x3e2aaa05
constexpr float c4 = 4.166822508e-02f;  // 0x3d2aac4d
constexpr float c5 = 8.374815807e-03f;  // 0x3c093686
constexpr float c6 = 1.383684576e-03f;  // 0x3ab55cc0

}  // namespace exp_constants
}  // namespace detail
}  // namespace microattn
