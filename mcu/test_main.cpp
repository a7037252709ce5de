// GoogleTest main for the Cortex-M targets. A test that cannot run on a board is excluded here, by name and
// with its reason; every test program prints the exclusions that apply to its board before it runs, and
// docs/testing.md lists them too. MICROATTN_MCU_BOARD is the cross file's mcu_board property.
#include <gtest/gtest.h>

#include <cstdio>
#include <array>
#include <cstring>
#include <string>

namespace {

struct Exclusion {
  const char* test;    // SuiteName.TestName (a parameterised test matches in every instantiation)
  const char* boards;  // board names it applies to, space-separated
  const char* reason;
};

// None at present: the exp sweeps once needed ~51 MB of heap (more than the MPS2 boards' 16 MiB) and were
// excluded on Cortex-M4/M7; they now stream their inputs in 1024-value chunks and run everywhere.
constexpr std::array<Exclusion, 0> exclusions{};

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
