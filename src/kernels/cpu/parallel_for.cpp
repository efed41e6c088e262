// kernels/cpu/parallel_for.cpp -- persistent thread pool behind parallel_for.
//
// Workers spin briefly on a generation counter before sleeping on a condition variable: a
// decode GEMV call lasts ~0.1-2 ms, and a futex wake-up per call (tens of us) would be a
// visible share of it, while a short spin costs nothing when calls come back to back.
#include "kernels/cpu/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#include "io/file_util.h"
#include "nvfp4/error.h"

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
      const std::uint64_t g = generation_.load(std::memory_order_relaxed) + 1;
      region_.store(g << 32, std::memory_order_release);  // open, nobody inside
      generation_.store(g, std::memory_order_release);
    }
    cv_.notify_all();
    drain();
    // Every task has been handed out. Close the region, then wait only for the workers inside it
    // (they hold fn_ by pointer): a worker that has not entered yet (asleep, or runnable but not
    // running because other work holds its core) never will, and it has nothing left to do. The
    // caller used to wait for every worker to pass through: a time slice per call on a busy host
    // (a 184 us GEMV took 3.7 ms with a compile on the other core; docs/perf-cpu.md 36).
    region_.fetch_or(kClosed, std::memory_order_acq_rel);
    for (int spins = 0; (region_.load(std::memory_order_acquire) & kInside) != 0; ++spins) {
      // A worker inside may be queued on this very core: after a short spin, yield it the core
      // instead of spinning through the scheduler's time slice.
      if (spins < 256) NVFP4_CPU_RELAX();
      else std::this_thread::yield();
    }
    // No worker is inside any more, so error_ is settled; it is reset for the next region here.
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> lk(error_mu_);
      error = std::exchange(error_, nullptr);
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  // Runs tasks until none is left. A task that throws (the kernels do not, but an allocation
  // inside one may) ends the handing out: its exception is kept, the first one wins, and run()
  // rethrows it in the caller once no worker is inside. An exception escaping a worker thread
  // would end the process, and one unwinding the caller while workers still ran fn would leave
  // them a dangling function.
  void drain() {
    t_in_pool_task = true;
    try {
      for (;;) {
        const std::int64_t t = next_.fetch_add(1, std::memory_order_relaxed);
        if (t >= n_tasks_) break;
        (*fn_)(t);
      }
    } catch (...) {
      next_.store(n_tasks_, std::memory_order_relaxed);  // hand out nothing more
      std::lock_guard<std::mutex> lk(error_mu_);
      if (!error_) error_ = std::current_exception();
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
      // Enter region `seen` unless the caller has closed it (or started a later one): one atomic
      // word holds the region's generation, its closed bit and the count inside, so entering and
      // closing are ordered against each other.
      std::uint64_t r = region_.load(std::memory_order_acquire);
      bool inside = false;
      while (!inside && (r >> 32) == (seen & 0xFFFFFFFFu) && (r & kClosed) == 0)
        inside = region_.compare_exchange_weak(r, r + 1, std::memory_order_acq_rel, std::memory_order_acquire);
      if (!inside) continue;
      drain();
      region_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  int n_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_, mu_, error_mu_;
  std::exception_ptr error_;  // the region's first exception from a task (guarded by error_mu_)
  std::condition_variable cv_;
  // region_: the open region's generation (bits 63..32, its low 32 bits), kClosed, and the count
  // of workers inside it (bits 30..0).
  static constexpr std::uint64_t kClosed = std::uint64_t{1} << 31, kInside = kClosed - 1;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::uint64_t> region_{0};
  std::atomic<std::int64_t> next_{0};
  const std::function<void(std::int64_t)>* fn_ = nullptr;
  std::int64_t n_tasks_ = 0;
  bool stop_ = false;
};

#if defined(__linux__)
// The affinity mask's CPU count, 0 if unknown. A fixed cpu_set_t holds 1024 CPUs; larger hosts
// make sched_getaffinity fail with EINVAL, so the set grows until it fits.
int affinity_cpus() {
  for (int n = CPU_SETSIZE; n <= (1 << 20); n *= 4) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (set == nullptr) return 0;
    const std::size_t size = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(size, set);
    const int rc = sched_getaffinity(0, size, set);
    const int err = errno;
    const int count = rc == 0 ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    if (rc == 0) return count;
    if (err != EINVAL) return 0;
  }
  return 0;
}

// Calls fn(dir) for root + path and each of its parents up to root: a parent's quota limits its
// children too. Inside a container the path may name a cgroup the mount does not show (the
// container's own cgroup is the mount's root); the walk then still reaches the root.
template <class Fn>
void for_cgroup_and_parents(const std::string& root, const std::string& path, Fn fn) {
  std::string dir = root + (path == "/" ? "" : path);
  for (;;) {
    fn(dir);
    if (dir.size() <= root.size()) return;
    dir.resize(dir.rfind('/'));
  }
}

// The smallest CPU quota of this process's cgroups (v2, or v1's cpu controller), 0 if none.
int cgroup_quota_cpus() {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  int best = 0;
  auto take = [&](int c) {
    if (c > 0 && (best == 0 || c < best)) best = c;
  };
  while (std::getline(f, line)) {  // "hierarchy-id:controllers:path"
    const std::size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (path.empty() || path[0] != '/') continue;
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {  // cgroup v2
      for_cgroup_and_parents("/sys/fs/cgroup", path, [&](const std::string& dir) {
        take(detail::cpus_from_cgroup2_cpu_max(io::first_line_or_empty(dir + "/cpu.max")));
      });
      continue;
    }
    if (("," + controllers + ",").find(",cpu,") == std::string::npos) continue;
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuacct,cpu"})
      for_cgroup_and_parents(mount, path, [&](const std::string& dir) {
        const std::string q = io::first_line_or_empty(dir + "/cpu.cfs_quota_us");
        const std::string p = io::first_line_or_empty(dir + "/cpu.cfs_period_us");
        if (q.empty() || p.empty()) return;
        take(detail::cpus_from_cgroup_quota(std::atoll(q.c_str()), std::atoll(p.c_str())));
      });
  }
  return best;
}
#endif

constexpr int kMaxThreads = 1024;  // the pool's size limit (and a fixed cpu_set_t's)

int threads_from_env() {
  const char* s = std::getenv("NVFP4_NUM_THREADS");
  if (!s || !*s) return available_cpus();  // unset or empty: the default
  // Strict: atoi read "1x" and "1e9" as 1 and "abc" or "-1" as "unset", and clamped 5000 to a
  // 1024-thread pool on 2 CPUs, all silently.
  const std::string v = s;
  const bool digits = v.size() <= 4 && v.find_first_not_of("0123456789") == std::string::npos;
  const int n = digits ? std::atoi(s) : 0;
  if (n < 1 || n > kMaxThreads)
    fail("NVFP4_NUM_THREADS", "'" + v + "' is not a thread count in 1.." + std::to_string(kMaxThreads) +
                                  " (unset it for the default: the CPUs this process may use)");
  return n;
}

Pool& pool() {
  static Pool p(configured_threads());
  return p;
}

}  // namespace

int num_threads() { return pool().size(); }

int configured_threads() {
  static const int n = threads_from_env();
  return n;
}

int available_cpus() {
  static const int n = detail::count_available_cpus();
  return n;
}

namespace detail {

int count_available_cpus() {
  int n = 0;
#if defined(__linux__)
  n = affinity_cpus();
#endif
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
#if defined(__linux__)
  const int quota = cgroup_quota_cpus();
  if (quota > 0 && (n <= 0 || quota < n)) n = quota;
#endif
  return std::max(n, 1);
}

int cpus_from_cgroup_quota(long long quota_us, long long period_us) {
  if (quota_us <= 0 || period_us <= 0) return 0;
  const long long cpus = quota_us / period_us + (quota_us % period_us != 0);
  return static_cast<int>(std::min<long long>(cpus, INT_MAX));
}

int cpus_from_cgroup2_cpu_max(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota, period;
  if (!(in >> quota >> period) || quota == "max") return 0;
  char* end = nullptr;
  const long long q = std::strtoll(quota.c_str(), &end, 10);
  if (*end != '\0') return 0;
  const long long p = std::strtoll(period.c_str(), &end, 10);
  if (*end != '\0') return 0;
  return cpus_from_cgroup_quota(q, p);
}

}  // namespace detail

void parallel_for(std::int64_t n_tasks, const std::function<void(std::int64_t)>& fn) {
  if (n_tasks <= 0) return;
  if (n_tasks == 1 || t_in_pool_task || pool().size() == 1) {
    for (std::int64_t t = 0; t < n_tasks; ++t) fn(t);
    return;
  }
  pool().run(n_tasks, fn);
}

}  // namespace nvfp4::cpu
