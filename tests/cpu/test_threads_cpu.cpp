// tests/cpu/test_threads_cpu.cpp -- the CPU backend called from several host threads at once, as
// an engine's request threads call it. The backend's parallel regions share one thread pool
// (kernels/cpu/parallel_for.cpp: one region at a time), the AMX paths keep per-thread tile state,
// and the fp16/fp32 paths per-thread scratch; none of that may leak from one caller to another.
// Every call must give, each of 6 times, the bits it gives when it runs alone, on the canonical
// and (where the CPU runs it) the pre-split layout, for the GEMV at M = 1, 2, 4, 8 and the GEMM at
// M = 40, in bf16, fp16 and fp32. Seeds: base seed + thread (NVFP4_TEST_SEED replays).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cpu/cpu_test_util.h"
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

}  // namespace
}  // namespace nvfp4
