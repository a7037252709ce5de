// microattn — a Parallel (microattn/parallel.hpp) over POSIX threads, for edge Linux boards and hosts. Optional: not
// included by microattn.hpp and not part of the library; link with -pthread (Meson: dependency('threads')).
//
//   microattn::PosixPool<8> pool(4);                       // 3 threads started here, the caller is the 4th worker
//   microattn::linear(x, w, bias, y, pool.parallel());
//
// Each run wakes the threads, gives worker i the items [i·count/workers, (i+1)·count/workers), runs worker 0's on the
// calling thread and returns when every worker is done (spinning: the caller's part takes as long as the others'). One
// run at a time: the pool is not for several callers at once. Thread stacks are the system's default (8 MiB on glibc),
// far above what any entry point needs. No heap.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstddef>

#include "microattn/parallel.hpp"

namespace microattn {
namespace detail {

inline void posix_pool_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || (defined(__arm__) && defined(__ARM_ARCH) && __ARM_ARCH >= 7)
  asm volatile("yield");
#endif
}

// The pool's logic, shared by every MaxWorkers; the template below holds the threads' storage. Between runs the
// threads spin a while on the run counter (posix_pool_spins polls, about a millisecond) and then sleep on a condition
// variable: a decoder's back-to-back calls find them awake (a wake-up costs tens of microseconds, more than a small
// product), an idle pool costs nothing.
class PosixPoolBase {
 public:
  PosixPoolBase(const PosixPoolBase&) = delete;
  PosixPoolBase& operator=(const PosixPoolBase&) = delete;

  // The hook: `workers` is 1 (and run is not called) when no thread could be started.
  Parallel parallel() noexcept { return Parallel{&run_hook, this, started_ + 1}; }
  std::size_t workers() const noexcept { return started_ + 1; }

 protected:
  static constexpr unsigned posix_pool_spins = 1u << 14;
  struct Slot {
    PosixPoolBase* pool;
    std::size_t index;
  };
  PosixPoolBase() noexcept {
    pthread_mutex_init(&mutex_, nullptr);
    pthread_cond_init(&wake_, nullptr);
  }
  ~PosixPoolBase() {
    pthread_cond_destroy(&wake_);
    pthread_mutex_destroy(&mutex_);
  }
  // Starts workers − 1 threads over the caller's storage; those that fail to start are left out.
  void start(std::size_t workers, pthread_t* threads, Slot* slots) noexcept {
    threads_ = threads;
    for (std::size_t i = 0; i + 1 < workers; ++i) {
      slots[i] = Slot{this, i + 1};
      if (pthread_create(&threads[i], nullptr, &thread_main, &slots[i]) != 0) break;
      ++started_;
    }
  }
  // Stops and joins the threads (before the storage start() was given goes away).
  void stop() noexcept {
    pthread_mutex_lock(&mutex_);
    stop_.store(true);
    pthread_cond_broadcast(&wake_);
    pthread_mutex_unlock(&mutex_);
    for (std::size_t i = 0; i < started_; ++i) pthread_join(threads_[i], nullptr);
    started_ = 0;
  }

 private:
  void range(std::size_t index) const noexcept {
    const std::size_t workers = started_ + 1;
    const std::size_t begin = index * count_ / workers, end = (index + 1) * count_ / workers;
    if (begin < end) task_(ctx_, begin, end);
  }
  static bool run_hook(void* p, ParallelTask task, void* ctx, std::size_t count) noexcept {
    auto& pool = *static_cast<PosixPoolBase*>(p);
    if (pool.started_ == 0) return false;
    pool.task_ = task;  // published by the counter's increment below
    pool.ctx_ = ctx;
    pool.count_ = count;
    pool.pending_.store(pool.started_);
    pool.generation_.fetch_add(1);
    // A thread that counts itself asleep has not yet read the counter or is waiting: the lock orders the two.
    if (pool.sleepers_.load() != 0) {
      pthread_mutex_lock(&pool.mutex_);
      pthread_cond_broadcast(&pool.wake_);
      pthread_mutex_unlock(&pool.mutex_);
    }
    pool.range(0);
    for (unsigned spins = 0; pool.pending_.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < posix_pool_spins) {
        posix_pool_relax();
      } else {
        sched_yield();
      }
    }
    return true;
  }
  static void* thread_main(void* arg) {
    const Slot slot = *static_cast<Slot*>(arg);
    PosixPoolBase& pool = *slot.pool;
    unsigned long seen = 0;
    for (;;) {
      unsigned spins = 0;
      while (pool.generation_.load(std::memory_order_acquire) == seen && !pool.stop_.load() &&
             spins < posix_pool_spins) {
        posix_pool_relax();
        ++spins;
      }
      if (pool.generation_.load() == seen && !pool.stop_.load()) {
        pthread_mutex_lock(&pool.mutex_);
        pool.sleepers_.fetch_add(1);
        while (pool.generation_.load() == seen && !pool.stop_.load()) pthread_cond_wait(&pool.wake_, &pool.mutex_);
        pool.sleepers_.fetch_sub(1);
        pthread_mutex_unlock(&pool.mutex_);
      }
      if (pool.stop_.load()) break;
      seen = pool.generation_.load();
      pool.range(slot.index);
      pool.pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
    return nullptr;
  }

  pthread_mutex_t mutex_;
  pthread_cond_t wake_;
  pthread_t* threads_ = nullptr;
  std::size_t started_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<unsigned long> generation_{0};
  std::atomic<std::size_t> pending_{0};
  std::atomic<unsigned> sleepers_{0};
  ParallelTask task_ = nullptr;
  void* ctx_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace detail

// Up to MaxWorkers workers (the calling thread one of them); `workers` is clamped to [1, MaxWorkers].
template <std::size_t MaxWorkers>
class PosixPool : public detail::PosixPoolBase {
  static_assert(MaxWorkers >= 1, "a pool has at least the calling thread");

 public:
  explicit PosixPool(std::size_t workers) noexcept {
    start(workers < 1 ? 1 : workers > MaxWorkers ? MaxWorkers : workers, thread_storage_, slot_storage_);
  }
  ~PosixPool() { stop(); }

 private:
  pthread_t thread_storage_[MaxWorkers];
  Slot slot_storage_[MaxWorkers];
};

}  // namespace microattn
