// microattn — work on the caller's workers. The library starts no threads: an entry point that can split its work
// takes a Parallel, the caller's hook over its own threads (pthreads, FreeRTOS or Zephyr tasks, an ESP-IDF task pair;
// microattn/posix_pool.hpp is one for POSIX threads).
#pragma once

#include <cstddef>

namespace microattn {

// The library's work over items [begin, end) of a range. It writes only what those items own, so any two ranges
// may run at once.
using ParallelTask = void (*)(void* ctx, std::size_t begin, std::size_t end) noexcept;

// The caller's hook. run(pool, task, ctx, count) runs task over every item of [0, count) exactly once, in ranges it
// chooses, on up to `workers` workers (the calling thread may be one), and returns once every item is done. It
// returns false when it cannot (no pool, a worker that failed to start) without having run any item: the entry
// point then runs them all on the calling thread. run null or workers <= 1: the calling thread alone, run is not
// called.
//
// The result does not depend on the workers: an entry point cuts its work into items from the shape alone, never
// from `workers`, and each item is computed alike whichever worker runs it and whatever range it comes in. So every
// worker count (and the absent hook) gives the same output, bit for bit. Each worker needs the stack the entry point
// documents; the items of one call share no scratch (none is lent).
struct Parallel {
  bool (*run)(void* pool, ParallelTask task, void* ctx, std::size_t count) noexcept;
  void* pool;
  std::size_t workers;
};

}  // namespace microattn
