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

// c0 + c1·r + … + c6·r⁶: the polynomial of each exp, evaluated in Horner form (horner6) by every kernel.
struct Poly6 {
  float c0, c1, c2, c3, c4, c5, c6;
};

namespace exp_constants {

constexpr float log2e = 1.44269504088896341f;
constexpr float ln2_hi = 0.693359375f;  // 0x3F318000, 8 trailing zeros in the significand
constexpr float ln2_lo = -2.12194440054690583e-4f;
constexpr float round_magic = 12582912.0f;  // 1.5·2²³
constexpr float x_min = -104.0f;            // below: e^x rounds to 0 (and −inf lands here)
constexpr float x_max = 89.0f;              // above: e^x overflows to +inf
// e^r; c2 … c6 are the floats 0x3efffffd, 0x3e2aaa05, 0x3d2aac4d, 0x3c093686, 0x3ab55cc0.
constexpr Poly6 poly{
    1.0f, 1.0f, 4.999999106e-01f, 1.666641980e-01f, 4.166822508e-02f, 8.374815807e-03f, 1.383684576e-03f};

}  // namespace exp_constants

// 2^x for x <= 0 (or NaN), the exp of attention's online softmax, where scores arrive pre-multiplied by
// scale·log2(e) and the running max is already subtracted: n = round(x), r = x − n in [−1/2, 1/2], 2^r by a
// degree-6 minimax polynomial (scripts/fit_exp_poly.py 6 --base2: 1.6e-8 relative with these float
// coefficients, and c0 = 1 exactly, so 2^0 = 1: degree 5 was 2 FMAs cheaper per 16 scores but 3 ULP off
// just below 1). x is clamped at −127, where 2^n's exponent field becomes 0, so −inf and anything below
// 2^−127 give exactly 0 (flushing results under 2^−126, which no probability needs).
namespace exp2_constants {

constexpr float x_min = -127.0f;
constexpr float round_magic = 12582912.0f;  // 1.5·2²³
// 2^r; c1 … c6 are the floats 0x3f317218, 0x3e75fded, 0x3d63576a, 0x3c1d96de, 0x3aafa2b5, 0x3920e99a.
constexpr Poly6 poly{
    1.0f, 6.931471825e-01f, 2.402264625e-01f, 5.550328642e-02f, 9.618489072e-03f, 1.339993090e-03f, 1.534581243e-04f};

}  // namespace exp2_constants
}  // namespace detail
}  // namespace microattn
