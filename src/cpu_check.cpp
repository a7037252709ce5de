// cpu_supported(), cpu_missing() and their C forms. Built without the library's arch flags (sources.txt
// "portable:"), so that it runs on any CPU of the target and can tell that the rest of the library would not (a
// SIGILL otherwise). It includes no header with inline functions the arch-compiled sources also define: the linker
// could otherwise keep their AVX-512 copies of those.
#include "cpu_features.hpp"
#include "microattn/microattn.h"
#include "microattn/version.hpp"

#if MICROATTN_CPU_CHECK_X86
#include <cpuid.h>
#elif MICROATTN_CPU_CHECK_HWCAP
#include <sys/auxv.h>
#endif

namespace microattn {
namespace detail {
namespace {

#if MICROATTN_CPU_CHECK_X86
enum Reg : unsigned { reg_eax, reg_ebx, reg_ecx, reg_edx };
enum State : unsigned { state_none, state_ymm, state_zmm };
struct Feature {
  const char* name;
  unsigned leaf, subleaf;
  Reg reg;
  unsigned bit;
  State state;
};
#define MICROATTN_CPU_ENTRY(name, macro, leaf, subleaf, reg, bit, state) \
  {name, leaf, subleaf, reg_##reg, bit, state_##state},
#elif MICROATTN_CPU_CHECK_HWCAP
enum Word : unsigned char { word_hwcap, word_hwcap2 };  // getauxval(AT_HWCAP), getauxval(AT_HWCAP2)
struct Feature {
  const char* name;
  Word word;
  unsigned bit;
};
#define MICROATTN_CPU_ENTRY(name, macro, word, bit) {name, word_##word, bit},
#else
struct Feature {
  const char* name;
};
#endif

// A first entry that is no feature keeps the array non-empty where the table is; feature i is features[i + 1].
#ifdef MICROATTN_CPU_ENTRY
constexpr Feature features[] = {{}, MICROATTN_CPU_FEATURES(MICROATTN_CPU_ENTRY)};
#undef MICROATTN_CPU_ENTRY
#else
constexpr Feature features[] = {{}};
#endif
constexpr unsigned feature_count = sizeof features / sizeof features[0] - 1;
static_assert(feature_count <= 64, "a feature mask has 64 bits");

bool same(const char* a, const char* b) noexcept {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

#if MICROATTN_CPU_CHECK_X86
// The CPUID leaves the table reads, each queried once per check.
struct Leaf {
  unsigned leaf, subleaf;
  bool valid;
  unsigned r[4];
};

unsigned xcr0() noexcept {
  unsigned lo = 0, hi = 0;
  __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return lo;
}
#endif

}  // namespace

std::uint64_t cpu_present_features() noexcept {
  std::uint64_t present = 0;
#if MICROATTN_CPU_CHECK_X86
  Leaf leaves[8] = {};  // the table reads four leaves: 1, 7.0, 7.1, 0x80000001
  unsigned n_leaves = 0;
  unsigned a = 0, b = 0, c = 0, d = 0;
  unsigned max_subleaf_7 = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) max_subleaf_7 = a;
  // The OS saves the AVX registers (XCR0 bits 1, 2: SSE and upper ymm halves), and also the AVX-512 ones (bits
  // 5-7: opmask, upper zmm halves, zmm16-31). macOS enables the AVX-512 state at a thread's first use, so XCR0
  // does not show it beforehand: there CPUID alone tells.
  unsigned state = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) && (c >> 27 & 1u) != 0) state = xcr0();  // OSXSAVE
  const bool ymm = (state & 0x6u) == 0x6u;
#if defined(__APPLE__)
  const bool zmm = ymm;
#else
  const bool zmm = ymm && (state & 0xe0u) == 0xe0u;
#endif
  for (unsigned i = 0; i < feature_count; ++i) {
    const Feature& f = features[i + 1];
    Leaf* l = nullptr;
    for (unsigned j = 0; j < n_leaves && l == nullptr; ++j)
      if (leaves[j].leaf == f.leaf && leaves[j].subleaf == f.subleaf) l = &leaves[j];
    Leaf uncached{};
    if (l == nullptr) {
      l = n_leaves < sizeof leaves / sizeof leaves[0] ? &leaves[n_leaves++] : &uncached;
      l->leaf = f.leaf;
      l->subleaf = f.subleaf;
      // __get_cpuid_count is false past the highest leaf (and without CPUID at all); leaf 7 has its own limit.
      l->valid = (f.leaf != 7 || f.subleaf <= max_subleaf_7) &&
                 __get_cpuid_count(f.leaf, f.subleaf, &l->r[0], &l->r[1], &l->r[2], &l->r[3]) != 0;
    }
    const bool cpu = l->valid && (l->r[f.reg] >> f.bit & 1u) != 0;
    const bool os = f.state == state_none || (f.state == state_ymm ? ymm : zmm);
    if (cpu && os) present |= std::uint64_t{1} << i;
  }
#elif MICROATTN_CPU_CHECK_HWCAP
  const unsigned long hwcap = getauxval(AT_HWCAP);
#ifdef AT_HWCAP2
  const unsigned long hwcap2 = getauxval(AT_HWCAP2);
#else
  const unsigned long hwcap2 = 0;
#endif
  for (unsigned i = 0; i < feature_count; ++i) {
    const Feature& f = features[i + 1];
    if (((f.word == word_hwcap ? hwcap : hwcap2) >> f.bit & 1u) != 0) present |= std::uint64_t{1} << i;
  }
#endif
  return present;
}

const char* cpu_missing_from(std::uint64_t required, std::uint64_t present) noexcept {
  const std::uint64_t missing = required & ~present;
  for (unsigned i = 0; i < 64; ++i)
    if ((missing >> i & 1u) != 0) return i < feature_count ? features[i + 1].name : "unknown";
  return "";
}

const char* cpu_feature_name(unsigned bit) noexcept { return bit < feature_count ? features[bit + 1].name : ""; }

int cpu_feature_bit(const char* name) noexcept {
  for (unsigned i = 0; i < feature_count; ++i)
    if (same(features[i + 1].name, name)) return static_cast<int>(i);
  return -1;
}

unsigned cpu_feature_count() noexcept { return feature_count; }

}  // namespace detail

const char* cpu_missing() noexcept {
  return detail::cpu_missing_from(detail::compiled_cpu_features, detail::cpu_present_features());
}
bool cpu_supported() noexcept { return cpu_missing()[0] == '\0'; }

}  // namespace microattn

// The C forms live here rather than in capi.cpp, which is compiled with the arch flags.
extern "C" {
int microattn_cpu_supported(void) { return microattn::cpu_supported() ? 1 : 0; }
const char* microattn_cpu_missing(void) { return microattn::cpu_missing(); }
}
