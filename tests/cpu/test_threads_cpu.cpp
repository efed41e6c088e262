// tests/cpu/test_threads_cpu.cpp -- the CPU backend called from several host threads at once, as
// an engine's request threads call it. The backend's parallel regions share one thread pool
// (kernels/cpu/parallel_for.cpp: one region at a time), the AMX paths keep per-thread tile state,
// and the fp16/fp32 paths per-thread scratch; none of that may leak from one caller to another.
// Every call must give, each of 6 times, the bits it gives when it runs alone, on the canonical
// and (where the CPU runs it) the pre-split layout, for the GEMV at M = 1, 2, 4, 8 and the GEMM at
// M = 40, in bf16, fp16 and fp32. Seeds: base seed + thread (NVFP4_TEST_SEED replays).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cpu/cpu_test_util.h"
#include "kernels/cpu/parallel_for.h"
#include "nvfp4/cpu.h"
#include "nvfp4/error.h"
#include "nvfp4/ops.h"
#include "test_util.h"

namespace nvfp4 {
namespace {

using cputest::Act;
using cputest::Out;
using cputest::Weight;

constexpr std::int64_t kN = 272, kK = 2064;  // N: not a multiple of the row tiles; K: a 16-tail past 2048

struct Call {
  DType dt;
  std::int64_t m;
  bool presplit;
};

std::string name_of(const Call& c) {
  return std::string(c.presplit ? "pre-split" : "canonical") + " " + dtype_name(c.dt) + " M=" + std::to_string(c.m);
}

// One caller's weight (both layouts), activations per call and the outputs of every round.
struct Caller {
  Weight w;
  std::vector<std::uint8_t> presplit;
  std::vector<Call> calls;
  std::vector<Act> x;
  std::vector<std::vector<Out>> y;  // [call][round]

  Caller(std::uint64_t seed, int rounds) : w(cputest::random_weight(kN, kK, seed)) {
    const bool ps = cpu::repack_for_gemv_cpu_supported();
    if (ps) {
      presplit.resize(static_cast<std::size_t>(kN * kK / 2));
      cpu::repack_for_gemv_cpu(w.view(), presplit.data());
    }
    for (const DType dt : {DType::kBF16, DType::kF16, DType::kF32})
      for (const std::int64_t m : {1, 2, 4, 8, 40})
        for (const bool p : {false, true})
          if (!p || (ps && m <= 8)) calls.push_back({dt, m, p});
    for (std::size_t c = 0; c < calls.size(); ++c) {
      x.push_back(cputest::random_x(calls[c].dt, calls[c].m, kK, kK, seed * 131 + c));
      y.emplace_back();
      for (int r = 0; r < rounds; ++r) y[c].push_back(cputest::poisoned(calls[c].dt, calls[c].m, kN, kN));
    }
  }
  void run(std::size_t c, int r) {
    if (calls[c].presplit)
      cpu::quantized_matmul_repacked(x[c].view, cpu::CpuRepackedWeightView{presplit.data(), w.scales.data(), w.ts, kN, kK},
                                     y[c][r].view);
    else
      quantized_matmul(x[c].view, w.view(), y[c][r].view, Backend::kCpu);
  }
};

TEST(CpuThreads, ConcurrentCallersGetTheBitsOfACallAlone) {
  constexpr int kThreads = 4, kRounds = 6;
  const std::uint64_t base = test::base_seed();
  std::vector<std::unique_ptr<Caller>> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.push_back(std::make_unique<Caller>(base + t, kRounds + 1));
    for (std::size_t c = 0; c < callers[t]->calls.size(); ++c) callers[t]->run(c, kRounds);  // alone: the last slot
  }
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int r = 0; r < kRounds; ++r)
          for (std::size_t c = 0; c < callers[t]->calls.size(); ++c) callers[t]->run(c, r);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(errors[t], "") << test::seed_note(base + t);
    const Caller& cl = *callers[t];
    for (std::size_t c = 0; c < cl.calls.size(); ++c) {
      const std::vector<std::uint8_t>& alone = cl.y[c][kRounds].bytes;
      for (int r = 0; r < kRounds; ++r)
        EXPECT_EQ(std::memcmp(alone.data(), cl.y[c][r].bytes.data(), alone.size()), 0)
            << name_of(cl.calls[c]) << ", round " << r << ": bits differ from the call alone; "
            << test::seed_note(base + t);
    }
  }
  // The bits alone are right bits: one caller's calls against the oracle.
  const Caller& cl = *callers[0];
  for (std::size_t c = 0; c < cl.calls.size(); ++c) {
    SCOPED_TRACE(name_of(cl.calls[c]) + ", " + test::seed_note(base));
    Out ref = cputest::poisoned(cl.calls[c].dt, cl.calls[c].m, kN, kN);
    quantized_matmul_ref(cl.x[c].view, cl.w.view(), ref.view);
    cputest::expect_matches_oracle(ref, cl.y[c][kRounds], cputest::abs_sums(cl.w, cl.x[c].view), cl.w);
  }
}

// parallel_for under load: every task of every region runs exactly once, and the region returns
// only after its tasks are done, while workers arrive late or not at all (busy threads hold the
// cores, regions of 1..64 tasks follow each other back to back, some tasks sleep). A worker that
// wakes for a region the caller has already closed must not run a later region's tasks as its own.
TEST(CpuThreads, ParallelForRunsEveryTaskOnceWithLateWorkers) {
  const std::uint64_t seed = test::base_seed();
  std::uint64_t state = seed;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  std::vector<std::atomic<int>> runs(64);
  for (const int hog_threads : {0, 2}) {  // idle cores first, then busy ones
    std::atomic<bool> stop{false};
    std::vector<std::thread> hogs;
    for (int h = 0; h < hog_threads; ++h)
      hogs.emplace_back([&] {
        while (!stop.load(std::memory_order_relaxed)) {
        }
      });
    for (int region = 0; region < 1500; ++region) {
      const std::int64_t n = 1 + static_cast<std::int64_t>(next() % 64);
      const std::uint64_t sleepy = next() % 4 == 0 ? next() % 64 : 64;  // often one slow task
      for (auto& r : runs) r.store(0, std::memory_order_relaxed);
      cpu::parallel_for(n, [&](std::int64_t t) {
        if (static_cast<std::uint64_t>(t) == sleepy) std::this_thread::sleep_for(std::chrono::microseconds(100));
        runs[static_cast<std::size_t>(t)].fetch_add(1, std::memory_order_relaxed);
      });
      for (std::int64_t t = 0; t < 64; ++t)
        ASSERT_EQ(runs[static_cast<std::size_t>(t)].load(), t < n ? 1 : 0)
            << hog_threads << " busy threads, region " << region << " of " << n << " tasks, task " << t << "; "
            << test::seed_note(seed);
    }
    stop = true;
    for (auto& h : hogs) h.join();
  }
}

// A task that throws (the kernels do not, but an allocation inside one may): before, an exception
// in a worker ended the process, and one in the caller left the workers running a destroyed
// function. Now no further task starts, the call returns once the running ones end, the first
// exception reaches the caller, and the pool serves the next call in full.
TEST(CpuThreads, ParallelForRethrowsATasksExceptionAndStaysUsable) {
  // (With one thread parallel_for runs the tasks in the caller: the same contract.)
  for (int round = 0; round < 200; ++round) {
    const std::int64_t bad = round % 64;
    std::atomic<int> ran{0};
    EXPECT_THROW(cpu::parallel_for(64,
                                   [&](std::int64_t t) {
                                     ran.fetch_add(1, std::memory_order_relaxed);
                                     if (t == bad) throw std::runtime_error("task " + std::to_string(t));
                                     std::this_thread::sleep_for(std::chrono::microseconds(t % 3 == 0 ? 20 : 0));
                                   }),
                 std::runtime_error)
        << "round " << round;
    EXPECT_GE(ran.load(), 1);
    EXPECT_LE(ran.load(), 64);
    std::vector<std::atomic<int>> runs(100);
    cpu::parallel_for(100, [&](std::int64_t t) { runs[static_cast<std::size_t>(t)].fetch_add(1); });
    for (std::size_t t = 0; t < runs.size(); ++t) ASSERT_EQ(runs[t].load(), 1) << "round " << round << " task " << t;
  }
}

// The default thread count follows what the process may use: a 2-of-16-cores taskset or cpuset
// must not get 16 threads (std::thread::hardware_concurrency counts the host's CPUs).
TEST(CpuThreads, DefaultCountFollowsTheAffinityMask) {
  const cpu_set_t mask = test::affinity_mask();
  const int allowed = CPU_COUNT(&mask);
  const int full = cpu::detail::count_available_cpus();
  EXPECT_GE(full, 1);
  EXPECT_LE(full, allowed);  // lower only where a cgroup quota is set
  const int first = test::first_allowed_cpu(mask);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const int confined = cpu::detail::count_available_cpus();
  ASSERT_EQ(sched_setaffinity(0, sizeof mask, &mask), 0);
  EXPECT_EQ(confined, 1) << "with the affinity mask cut to CPU " << first << " of " << allowed;
}

TEST(CpuThreads, CgroupQuotaParsing) {
  using cpu::detail::cpus_from_cgroup2_cpu_max;
  using cpu::detail::cpus_from_cgroup_quota;
  EXPECT_EQ(cpus_from_cgroup2_cpu_max("max 100000"), 0);
  EXPECT_EQ(cpus_from_cgroup2_cpu_max("200000 100000"), 2);
  EXPECT_EQ(cpus_from_cgroup2_cpu_max("150000 100000\n"), 2);  // 1.5 CPUs: 2 threads, rounded up
  EXPECT_EQ(cpus_from_cgroup2_cpu_max("50000 100000"), 1);
  for (const char* bad : {"", "max", "12x 100000", "100000 0", "100000 -5", "-1 100000", "abc def"})
    EXPECT_EQ(cpus_from_cgroup2_cpu_max(bad), 0) << "'" << bad << "'";
  EXPECT_EQ(cpus_from_cgroup_quota(-1, 100000), 0);  // cgroup v1: no quota
  EXPECT_EQ(cpus_from_cgroup_quota(250000, 100000), 3);
  EXPECT_EQ(cpus_from_cgroup_quota(100000, 100000), 1);
  EXPECT_EQ(cpus_from_cgroup_quota(100000, 0), 0);
}

}  // namespace
}  // namespace nvfp4
