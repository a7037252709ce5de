// The painted-stack measurement of the stack tests (test_small_stack.cpp, test_blocks_stack.cpp): a job runs on a
// thread whose stack is painted first; the deepest byte that changed, less what an empty job changes, is its use.
// Linux targets only (pthreads).
#pragma once

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

#include "microattn/microattn.hpp"

namespace stack_probe {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool sanitized = true;  // AddressSanitizer's redzones make every frame larger: run, do not measure
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif

// 64 KiB, or the platform's minimum where that is larger (glibc on AArch64: PTHREAD_STACK_MIN is 128 KiB).
inline std::size_t thread_stack_bytes() {
  const long min = sysconf(_SC_THREAD_STACK_MIN);
  const std::size_t want = sanitized ? 1024 * 1024 : 64 * 1024;
  return min > 0 && static_cast<std::size_t>(min) > want ? static_cast<std::size_t>(min) : want;
}
inline constexpr unsigned char paint = 0xa5;
alignas(65536) inline unsigned char stack_block[1024 * 1024];

using Job = void (*)();
inline microattn::Status job_status = microattn::Status::ok;

inline void* trampoline(void* job) {
  (*reinterpret_cast<Job*>(job))();
  return nullptr;
}

// Bytes of the painted stack the job touched (from the top, where the stack starts on every Linux target).
inline std::size_t touched_by(Job job) {
  const std::size_t size = thread_stack_bytes();
  std::memset(stack_block, paint, size);
  pthread_attr_t attr;
  bool ran = pthread_attr_init(&attr) == 0 && pthread_attr_setstack(&attr, stack_block, size) == 0;
  pthread_t t;
  ran = ran && pthread_create(&t, &attr, trampoline, &job) == 0 && pthread_join(t, nullptr) == 0;
  pthread_attr_destroy(&attr);
  EXPECT_TRUE(ran) << "could not run a thread on a " << size << "-byte stack";
  if (!ran) return size;
  std::size_t untouched = 0;
  while (untouched < size && stack_block[untouched] == paint) ++untouched;
  return size - untouched;
}

inline std::size_t stack_use(Job job) {
  const std::size_t base = touched_by([] {});
  const std::size_t used = touched_by(job);
  return used > base ? used - base : 0;
}

}  // namespace stack_probe
