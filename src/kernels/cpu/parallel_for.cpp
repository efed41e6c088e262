// kernels/cpu/parallel_for.cpp -- persistent thread pool behind parallel_for.
//
// Workers spin briefly on a generation counter before sleeping on a condition variable: a
// decode GEMV call lasts ~0.1-2 ms, and a futex wake-up per call (tens of us) would be a
// visible share of it, while a short spin costs nothing when calls come back to back.
#include "kernels/cpu/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NVFP4_CPU_RELAX() _mm_pause()
#else
#define NVFP4_CPU_RELAX() ((void)0)
#endif

namespace nvfp4::cpu {
namespace {

thread_local bool t_in_pool_task = false;

// How long an idle worker spins before sleeping. By the clock, not a count of pauses: PAUSE is
// far slower on recent Intel cores than on Zen, and 20000 of them (the count this replaced, meant
// as 50 us) took 390-430 us on the Emerald Rapids dev VM (2026-12-01). Spinning that long after
// every call took a core from whatever ran next: in `nvfp4 compare`, the other variant's process
// (with the caller's wait below, the cause of its 20-27x slower 0.4 ms samples; docs/perf-cpu.md 20).
constexpr std::chrono::microseconds kSpin{50};

class Pool {
 public:
  explicit Pool(int n) : n_(n) {
    for (int i = 1; i < n_; ++i) workers_.emplace_back([this] { worker(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return n_; }

  void run(std::int64_t n_tasks, const std::function<void(std::int64_t)>& fn) {
    std::lock_guard<std::mutex> call_lock(call_mu_);  // one parallel region at a time
    {
      std::lock_guard<std::mutex> lk(mu_);
      fn_ = &fn;
      n_tasks_ = n_tasks;
      next_.store(0, std::memory_order_relaxed);
      active_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    drain();
    // Wait until every worker has left this region (they hold fn_ by pointer).
    // A worker that is runnable but not running may be queued on this very core: after a short
    // spin, yield it the core instead of spinning through the scheduler's time slice.
    for (int spins = 0; active_.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < 256) NVFP4_CPU_RELAX();
      else std::this_thread::yield();
    }
  }

 private:
  void drain() {
    t_in_pool_task = true;
    for (;;) {
      const std::int64_t t = next_.fetch_add(1, std::memory_order_relaxed);
      if (t >= n_tasks_) break;
      (*fn_)(t);
    }
    t_in_pool_task = false;
  }

  void worker() {
    std::uint64_t seen = 0;
    for (;;) {
      // Spin up to kSpin by the clock, yielding now and then, then sleep (see the file comment).
      const auto until = std::chrono::steady_clock::now() + kSpin;
      for (int spins = 1; generation_.load(std::memory_order_acquire) == seen; ++spins) {
        NVFP4_CPU_RELAX();
        if (spins % 64 == 0) {
          if (std::chrono::steady_clock::now() >= until) break;
          std::this_thread::yield();
        }
      }
      if (generation_.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      }
      {
        std::lock_guard<std::mutex> lk(mu_);
        seen = generation_.load(std::memory_order_acquire);
        if (stop_) return;
      }
      drain();
      active_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  int n_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_, mu_;
  std::condition_variable cv_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::int64_t> next_{0};
  std::atomic<int> active_{0};
  const std::function<void(std::int64_t)>* fn_ = nullptr;
  std::int64_t n_tasks_ = 0;
  bool stop_ = false;
};

int threads_from_env() {
  if (const char* s = std::getenv("NVFP4_NUM_THREADS")) {
    const int v = std::atoi(s);
    if (v >= 1) return std::min(v, 1024);
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

Pool& pool() {
  static Pool p(threads_from_env());
  return p;
}

}  // namespace

int num_threads() { return pool().size(); }

void parallel_for(std::int64_t n_tasks, const std::function<void(std::int64_t)>& fn) {
  if (n_tasks <= 0) return;
  if (n_tasks == 1 || t_in_pool_task || pool().size() == 1) {
    for (std::int64_t t = 0; t < n_tasks; ++t) fn(t);
    return;
  }
  pool().run(n_tasks, fn);
}

}  // namespace nvfp4::cpu
