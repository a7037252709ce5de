// GoogleTest main for the Cortex-M targets. A test that cannot run on a board is excluded here, by name and
// with its reason; every test program prints the exclusions that apply to its board before it runs, and
// README "Cortex-M targets" lists them too. MICROATTN_MCU_BOARD is the cross file's mcu_board property.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

struct Exclusion {
  const char* test;    // SuiteName.TestName (a parameterised test matches in every instantiation)
  const char* boards;  // board names it applies to, space-separated
  const char* reason;
};

constexpr Exclusion exclusions[] = {
    {"ExpKernel.WholeFloatRangeWithinTheDocumentedBound", "mps2-an386 mps2-an500",
     "its sweep grows a std::vector of 4.3 million inputs by doubling and then allocates the results: about "
     "51 MB of heap at peak, and the MPS2 boards (Cortex-M4, M7) have 16 MiB of RAM. It runs on mps3-an547 "
     "(Cortex-M55: the same scalar kernel, the same single-precision FMA) and natively on the scalar kernel table"},
    {"ExpKernel.Exp2OfAttentionWithinOneAndAHalfUlp", "mps2-an386 mps2-an500",
     "the same for its sweep of 1.1 million inputs: about 17 MB of heap at peak, more than the 16 MiB of the "
     "MPS2 boards. It runs on mps3-an547 and natively, as above"},
};

bool applies_here(const Exclusion& e) {
  const std::size_t n = std::strlen(MICROATTN_MCU_BOARD);
  for (const char* b = std::strstr(e.boards, MICROATTN_MCU_BOARD); b != nullptr;
       b = std::strstr(b + 1, MICROATTN_MCU_BOARD))
    if ((b == e.boards || b[-1] == ' ') && (b[n] == '\0' || b[n] == ' ')) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string negative;
  for (const Exclusion& e : exclusions) {
    if (!applies_here(e)) continue;
    std::printf("[ EXCLUDED ] %s on %s: %s\n", e.test, MICROATTN_MCU_BOARD, e.reason);
    negative += std::string(":") + e.test + ":*/" + e.test + "/*";
  }
  if (!negative.empty()) {
    std::string filter = GTEST_FLAG_GET(filter);
    filter += filter.find('-') == std::string::npos ? "-" + negative.substr(1) : negative;
    GTEST_FLAG_SET(filter, filter);
  }
  return RUN_ALL_TESTS();
}
