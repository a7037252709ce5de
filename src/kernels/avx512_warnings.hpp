// Included first by the kernel files that use AVX-512 intrinsics (directly or through xsimd). GCC 12 flags the
// deliberately undefined pass-through operand of its own _mm512_undefined_*() (`__m512 __Y = __Y;`, inside max,
// min, …) as "(may be) used uninitialized" once inlined: a false positive, silenced for the rest of the file.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
