// Minimal Cortex-M startup for the QEMU boards the tests and the firmware example run on (MPS2 AN386/AN500,
// MPS3 AN547): vector table, reset handler, and fault handlers that stop QEMU with exit status 1.
//
// Reset: enable the FPU, copy .data from flash, zero .bss, open the semihosting console (newlib's rdimon),
// run the C++ constructors, take argc/argv from the semihosting command line, then exit(main(argc, argv)).
// newlib's exit reports the status through semihosting, so it becomes QEMU's exit status.
// No interrupts are used: the table holds the 16 system exceptions only.
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" {
// From the linker script (mcu/cortex-m.ld).
extern std::uint32_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[], __stack_top[];
// newlib / librdimon.
void initialise_monitor_handles();
void __libc_init_array();
int program_main(int argc, char** argv) asm("main");  // ISO C++ forbids calling main by name
[[noreturn]] void reset_handler();
void fault_handler();
[[noreturn]] void fault_report(const std::uint32_t* frame);
}

namespace {

// Arm semihosting: BKPT 0xAB with the operation in r0 and its argument in r1.
int semihost(int op, const void* arg) {
  register int r0 asm("r0") = op;
  register const void* r1 asm("r1") = arg;
  asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}
constexpr int sys_write0 = 0x04;       // print a NUL-terminated string
constexpr int sys_get_cmdline = 0x15;  // the arg=... list of -semihosting-config, space-separated
constexpr int sys_exit = 0x18;         // stop; any reason but ApplicationExit gives exit status 1
constexpr std::uintptr_t adp_stopped_run_time_error_unknown = 0x20023;

[[noreturn]] void stop_with_failure() {
  semihost(sys_exit, reinterpret_cast<const void*>(adp_stopped_run_time_error_unknown));
  for (;;) {
  }
}

void put_hex(char* out, std::uint32_t v) {
  for (int i = 7; i >= 0; --i, v >>= 4) out[i] = "0123456789abcdef"[v & 0xf];
}

int split_command_line(char* line, char** argv, int max_args) {
  int argc = 0;
  for (char* p = line; *p != '\0' && argc < max_args;) {
    while (*p == ' ') *p++ = '\0';
    if (*p == '\0') break;
    argv[argc++] = p;
    while (*p != '\0' && *p != ' ') ++p;
  }
  return argc;
}

char command_line[1024];
char* arguments[32];

}  // namespace

extern "C" [[noreturn]] void reset_handler() {
#if defined(__ARM_FP)
  // CPACR: full access to CP10 and CP11 (the FPU, and MVE on Armv8.1-M) before any floating-point instruction.
  *reinterpret_cast<volatile std::uint32_t*>(0xE000ED88u) |= 0xFu << 20;
  asm volatile("dsb\n\tisb" ::: "memory");
#endif
  std::memcpy(__data_start, __data_load, static_cast<std::size_t>(__data_end - __data_start) * 4);
  std::memset(__bss_start, 0, static_cast<std::size_t>(__bss_end - __bss_start) * 4);
  initialise_monitor_handles();
  __libc_init_array();

  struct {
    char* buffer;
    int size;
  } block{command_line, sizeof command_line - 1};
  const int argc = semihost(sys_get_cmdline, &block) == 0 ? split_command_line(command_line, arguments, 31) : 0;
  std::exit(program_main(argc, arguments));
}

// Every fault (and an unexpected NMI, SVC or SysTick) lands here: report the exception number, the faulting
// PC and the fault status registers, then stop QEMU with a non-zero status.
extern "C" [[noreturn]] void fault_report(const std::uint32_t* frame) {
  std::uint32_t ipsr;
  asm volatile("mrs %0, ipsr" : "=r"(ipsr));
  const volatile std::uint32_t* scb = reinterpret_cast<const volatile std::uint32_t*>(0xE000ED28u);
  char msg[] = "\n*** fault: exception xxxxxxxx pc xxxxxxxx cfsr xxxxxxxx hfsr xxxxxxxx\n";
  put_hex(msg + 22, ipsr & 0x1ff);
  put_hex(msg + 34, frame[6]);
  put_hex(msg + 48, scb[0]);  // CFSR
  put_hex(msg + 62, scb[1]);  // HFSR
  semihost(sys_write0, msg);
  stop_with_failure();
}

// The stacked exception frame is on the main stack (nothing here uses the process stack).
extern "C" __attribute__((naked)) void fault_handler() { asm volatile("mrs r0, msp\n\tb fault_report"); }

namespace {
using Handler = void (*)();
struct VectorTable {
  const void* initial_stack;
  Handler exceptions[15];
};
}  // namespace

// Reset, NMI, HardFault, MemManage, BusFault, UsageFault, SecureFault (Armv8-M), 3 reserved, SVCall,
// DebugMonitor, reserved, PendSV, SysTick.
extern "C" __attribute__((section(".vectors"), used)) const VectorTable vector_table = {
    __stack_top,
    {reset_handler, fault_handler, fault_handler, fault_handler, fault_handler, fault_handler, fault_handler, nullptr,
     nullptr, nullptr, fault_handler, fault_handler, nullptr, fault_handler, fault_handler}};
