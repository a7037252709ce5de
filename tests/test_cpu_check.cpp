// cpu_supported() / cpu_missing(): true on the machine that runs the suite (it runs the library), and the check's
// logic, cpu_missing_from(required, present), on feature masks no CPU here has.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "cpu_features.hpp"
#include "microattn/version.hpp"

namespace ma = microattn;
using ma::detail::compiled_cpu_features;
using ma::detail::cpu_feature_bit;
using ma::detail::cpu_feature_count;
using ma::detail::cpu_feature_name;
using ma::detail::cpu_missing_from;

namespace {

std::uint64_t bit(const char* name) {
  const int b = cpu_feature_bit(name);
  EXPECT_GE(b, 0) << name << " is not in the table";
  return b < 0 ? 0 : std::uint64_t{1} << b;
}

// The compiled features' names, space-separated in table order (microattn.pc's simd_features).
std::string compiled_names() {
  std::string s;
  for (unsigned i = 0; i < 64; ++i)
    if ((compiled_cpu_features >> i & 1u) != 0) s += (s.empty() ? "" : " ") + std::string(cpu_feature_name(i));
  return s;
}

}  // namespace

TEST(CpuCheck, TheMachineRunningTheSuiteIsSupported) {
  EXPECT_TRUE(ma::cpu_supported()) << "missing: " << ma::cpu_missing();
  EXPECT_STREQ(ma::cpu_missing(), "");
  EXPECT_EQ(compiled_cpu_features & ~ma::detail::cpu_present_features(), 0u);
}

TEST(CpuCheck, RecordsTheFeaturesOfTheLibrarysFlags) {
#ifdef MICROATTN_TEST_SIMD_FEATURES
  // What meson.build put in microattn.pc, from the same list under the same flags.
  EXPECT_EQ(compiled_names(), MICROATTN_TEST_SIMD_FEATURES);
#endif
  const std::string arch = ma::simd_arch();
  if (cpu_feature_count() == 0) {
    EXPECT_EQ(compiled_cpu_features, 0u);  // bare metal: nothing to check
    return;
  }
  EXPECT_EQ(compiled_cpu_features >> cpu_feature_count(), 0u);
  if (arch.rfind("avx512", 0) == 0) {
    EXPECT_NE(compiled_cpu_features & bit("avx512f"), 0u) << arch;
  }
  if (arch.find("avx2") != std::string::npos) {
    EXPECT_NE(compiled_cpu_features & bit("avx2"), 0u) << arch;
  }
  if (arch.find("fma3") != std::string::npos) {
    EXPECT_NE(compiled_cpu_features & bit("fma"), 0u) << arch;
  }
#if defined(__x86_64__)
  EXPECT_NE(compiled_cpu_features & bit("sse2"), 0u);  // the x86-64 baseline
#endif
  if (arch == "neon") {
    EXPECT_NE(compiled_cpu_features & bit("neon"), 0u);
  }
}

TEST(CpuCheck, ReportsTheFirstMissingFeature) {
  EXPECT_STREQ(cpu_missing_from(0, 0), "");
  EXPECT_STREQ(cpu_missing_from(0, ~std::uint64_t{0}), "");
  EXPECT_STREQ(cpu_missing_from(compiled_cpu_features, compiled_cpu_features), "");
  const unsigned n = cpu_feature_count();
  for (unsigned i = 0; i < n; ++i) {
    const std::uint64_t b = std::uint64_t{1} << i;
    ASSERT_STRNE(cpu_feature_name(i), "");
    EXPECT_EQ(cpu_feature_bit(cpu_feature_name(i)), static_cast<int>(i));
    EXPECT_STREQ(cpu_missing_from(b, 0), cpu_feature_name(i));
    EXPECT_STREQ(cpu_missing_from(b, b), "");
    // A CPU that has every feature but this one: reported whatever else the build requires.
    EXPECT_STREQ(cpu_missing_from(~std::uint64_t{0} >> (64 - n), ~b), cpu_feature_name(i));
    if ((compiled_cpu_features & b) != 0) {
      EXPECT_STREQ(cpu_missing_from(compiled_cpu_features, ~b), cpu_feature_name(i));
    }
  }
  EXPECT_STREQ(cpu_feature_name(n), "");
  EXPECT_EQ(cpu_feature_bit("no such feature"), -1);
  if (n < 64) {
    EXPECT_STREQ(cpu_missing_from(std::uint64_t{1} << 63, 0), "unknown");
  }
}

#if MICROATTN_CPU_CHECK_X86
TEST(CpuCheck, AnAvx512BuildOnAnAvx2Machine) {
  // -march=x86-64-v4's features against an x86-64-v3 CPU (Haswell to Raptor Lake), then a v2 one.
  std::uint64_t v2 = 0, v3 = 0, v4 = 0;
  for (const char* f : {"sse", "sse2", "sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16", "sahf"}) v2 |= bit(f);
  v3 = v2;
  for (const char* f : {"avx", "f16c", "fma", "avx2", "bmi", "bmi2", "lzcnt", "movbe"}) v3 |= bit(f);
  v4 = v3;
  for (const char* f : {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}) v4 |= bit(f);
  EXPECT_STREQ(cpu_missing_from(v4, v3), "avx512f");
  EXPECT_STREQ(cpu_missing_from(v4, v3 | bit("avx512f") | bit("avx512cd")), "avx512bw");
  EXPECT_STREQ(cpu_missing_from(v4, v2), "avx");  // the lowest level short of: v3
  EXPECT_STREQ(cpu_missing_from(v3, v2 | bit("avx") | bit("f16c") | bit("fma")), "avx2");
  EXPECT_STREQ(cpu_missing_from(v4 | bit("avx512vnni"), v4), "avx512vnni");
  EXPECT_STREQ(cpu_missing_from(v4, v4), "");
  EXPECT_STREQ(cpu_missing_from(v3, v4), "");
}
#endif
