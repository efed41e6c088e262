// tests/cpu/cpu_paths_bench.cpp -- manual side-by-side timing of the CPU kernel paths (not a test).
// Each round calls every path once (interleaved), so load from other processes hits all paths
// alike; cold calls rotate through weight copies totalling >= 512 MiB (16x the 32 MiB L3 of
// the dev machine), and "stream" reads the same bytes of the next copy with every thread
// (the read ceiling of the same run). Prints median, p10, p90 per path.
// Usage: cpu_paths_bench [bf16|f16|f32] [hot|cold] [thp] [avx2] [reps=N] M,N,K ... [paths...]
//   avx2: the Highway paths (gemv, gemm_f32) run their AVX2 code, as on a CPU without AVX-512
//   paths: gemv gemv_bf16 avx512bf16_presplit gemv_amx gemm_f32 gemm_bf16 gemm_amx stream (default:
//   all supported), each
//   optionally with tuning overrides, e.g. gemv_bf16:rpt=16:xb=16384 gemm_bf16:kc=512:nc=128
//   (rpt gemv_rows_per_task, tb gemv_task_bytes / xpad gemv_x_pad (Highway GEMV), brpt/brpt1 gemv_avx512bf16_rows_per_task/_m1, xb gemv_x_block_bytes, grp gemv_group_rows, pf/pfm/pfx/pfl2
//   gemv_prefetch_tiles/_min_m/_max_m/_l2, pfsk/sk gemv_prefetch_short_k_max_m/_short_k, kc/nc/mc gemm_*, gpf gemm_prefetch, dotm gemm_dot_max_m, amxn/amxkb/amxpf/tab gemv_amx_n_tiles/
//   _k_block/_prefetch_bytes/_decode_table, fma gemv_fma_dtypes: dtype mask 1 f32 2 f16 4 bf16, fmam gemv_fma_max_m, frpt/fxb/fpf/fgrp gemv_fma_rows_per_task/_x_block_bytes/_prefetch_tiles/_group_rows), and dt=bf16|f16|f32 to run that path
//   on activations of another dtype (same values, rounded), e.g. to time the fp32 split GEMV next
//   to the bf16 GEMV in one process: `f32 ... gemv_bf16 gemv_bf16:dt=bf16 gemv`.
// avx512bf16_presplit: the vdpbf16ps GEMV on pre-split weights (nvfp4/cpu.h): every weight copy
// is repacked once, untimed, into a second pool of the same layout (packed then scales per copy),
// and the call is cpu::quantized_matmul_repacked on the copy of the same rotation slot.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include <memory>

#include <sys/mman.h>

#include "hwy/targets.h"
#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tuning_cpu.h"
#include "nvfp4/cpu.h"
#include "nvfp4/dtype.h"
#include "nvfp4/format.h"

using namespace nvfp4;

static double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  DType dt = DType::kBF16;
  bool cold = true;
  bool thp = false;  // "thp": back the weight pool with transparent huge pages (madvise)
  int reps = 30;
  struct S { std::int64_t m, n, k; };
  std::vector<S> shapes;
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    S s{};
    if (a == "bf16" || a == "f16" || a == "f32") dt = dtype_from_name(a);
    else if (a == "hot") cold = false;
    else if (a == "cold") cold = true;
    else if (a == "thp") thp = true;
    else if (a == "avx2") hwy::SetSupportedTargetsForTest(HWY_AVX2);  // the Highway paths on their AVX2 code
    else if (a.rfind("reps=", 0) == 0) reps = std::atoi(a.c_str() + 5);
    else if (std::sscanf(a.c_str(), "%ld,%ld,%ld", &s.m, &s.n, &s.k) == 3) shapes.push_back(s);
    else names.push_back(a);
  }
  const std::vector<std::pair<std::string, cpu::CpuPath>> all = {
      {"gemv", cpu::CpuPath::kGemv},           {"gemv_bf16", cpu::CpuPath::kGemvAvx512Bf16},
      {"avx512bf16_presplit", cpu::CpuPath::kGemvAvx512Bf16},
      {"gemv_amx", cpu::CpuPath::kGemvAmx},
      {"gemm_f32", cpu::CpuPath::kGemmF32},    {"gemm_bf16", cpu::CpuPath::kGemmAvx512Bf16},
      {"gemm_amx", cpu::CpuPath::kGemmAmx},    {"stream", cpu::CpuPath::kAuto}};
  std::printf("threads=%d dtype=%s %s hwy=%s\n", cpu::num_threads(), dtype_name(dt), cold ? "cold" : "hot",
              cpu::hwy_target_name());
  std::printf("%-5s %-6s %-6s %-22s %10s %10s %10s %8s %9s\n", "M", "N", "K", "path", "us_med", "us_p10", "us_p90",
              "GB/s", "GFLOP/s");
  for (const S& s : shapes) {
    std::mt19937_64 rng(7);
    const std::int64_t pb = s.n * s.k / 2, sb = s.n * s.k / 16, wb = (pb + sb + 4095) / 4096 * 4096;
    const int copies = cold ? static_cast<int>(std::max<std::int64_t>(2, ((512ll << 20) + wb - 1) / wb)) : 1;
    // The pool: 2 MiB aligned; with "thp" madvise(MADV_HUGEPAGE) before the first touch, so
    // cold calls are measured without 4 KiB-page TLB misses (THP is madvise-only here).
    const std::size_t pool_bytes = (static_cast<std::size_t>(wb * copies) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    std::unique_ptr<std::uint8_t, decltype(&std::free)> pool_mem(
        static_cast<std::uint8_t*>(std::aligned_alloc(2u << 20, pool_bytes)), &std::free);
    if (thp) madvise(pool_mem.get(), pool_bytes, MADV_HUGEPAGE);
    struct PoolView {
      std::uint8_t* p;
      std::uint8_t* data() const { return p; }
      std::uint8_t& operator[](std::size_t i) const { return p[i]; }
    } pool{pool_mem.get()};
    for (std::int64_t i = 0; i < pb; ++i) pool[i] = static_cast<std::uint8_t>(rng());
    for (std::int64_t i = 0; i < sb; ++i) pool[pb + i] = static_cast<std::uint8_t>(0x28 + rng() % 0x30);
    for (int c = 1; c < copies; ++c) std::memcpy(pool.data() + c * wb, pool.data(), static_cast<std::size_t>(wb));
    // The same normal values in every dtype (index = DType value), y likewise.
    std::vector<std::uint8_t> xs[3], ys[3];
    std::normal_distribution<float> nd;
    std::vector<float> xf(static_cast<std::size_t>(s.m * s.k));
    for (auto& v : xf) v = nd(rng);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      auto& xb = xs[static_cast<int>(t)];
      xb.resize(static_cast<std::size_t>(s.m * s.k * dtype_size(t)));
      for (std::int64_t i = 0; i < s.m * s.k; ++i) store_from_f32(xb.data(), t, i, xf[static_cast<std::size_t>(i)]);
      ys[static_cast<int>(t)].resize(static_cast<std::size_t>(s.m * s.n * dtype_size(t)));
    }
    struct P {
      std::string label;
      cpu::CpuPath path;
      cpu::CpuTuning tune;
      bool stream;
      DType dt;
      bool presplit;
    };
    std::vector<P> paths;
    std::vector<std::string> want = names;
    if (want.empty())
      for (const auto& p : all) want.push_back(p.first);
    for (const std::string& w : want) {
      const std::string base = w.substr(0, w.find(':'));
      auto it = std::find_if(all.begin(), all.end(), [&](const auto& p) { return p.first == base; });
      if (it == all.end()) { std::fprintf(stderr, "unknown path %s\n", w.c_str()); return 2; }
      P p{w, it->second, cpu::CpuTuning{}, base == "stream", dt, base == "avx512bf16_presplit"};
      for (std::size_t pos = w.find(':'); pos != std::string::npos; pos = w.find(':', pos + 1)) {
        const std::string kv = w.substr(pos + 1, w.find(':', pos + 1) - pos - 1);
        const std::string key = kv.substr(0, kv.find('='));
        if (key == "dt") { p.dt = dtype_from_name(kv.substr(3)); continue; }
        const std::int64_t val = std::atoll(kv.c_str() + kv.find('=') + 1);
        if (key == "rpt") p.tune.gemv_rows_per_task = val;
        else if (key == "tb") p.tune.gemv_task_bytes = val;
        else if (key == "xpad") p.tune.gemv_x_pad = val;
        else if (key == "dotm") p.tune.gemm_dot_max_m = val;
        else if (key == "brpt") p.tune.gemv_avx512bf16_rows_per_task = val;
        else if (key == "brpt1") p.tune.gemv_avx512bf16_rows_per_task_m1 = val;
        else if (key == "xb") p.tune.gemv_x_block_bytes = val;
        else if (key == "grp") p.tune.gemv_group_rows = val;
        else if (key == "pf") p.tune.gemv_prefetch_tiles = val;
        else if (key == "pfm") p.tune.gemv_prefetch_min_m = val;
        else if (key == "pfx") p.tune.gemv_prefetch_max_m = val;
        else if (key == "pfl2") p.tune.gemv_prefetch_l2 = val;
        else if (key == "pfsk") p.tune.gemv_prefetch_short_k_max_m = val;
        else if (key == "sk") p.tune.gemv_prefetch_short_k = val;
        else if (key == "kc") p.tune.gemm_kc = val;
        else if (key == "nc") p.tune.gemm_nc = val;
        else if (key == "mc") p.tune.gemm_mc = val;
        else if (key == "gpf") p.tune.gemm_prefetch = val;
        else if (key == "amxn") p.tune.gemv_amx_n_tiles = val;
        else if (key == "amxkb") p.tune.gemv_amx_k_block = val;
        else if (key == "amxpf") p.tune.gemv_amx_prefetch_bytes = val;
        else if (key == "tab") p.tune.gemv_amx_decode_table = val;
        else if (key == "fma") p.tune.gemv_fma_dtypes = val;
        else if (key == "fmam") p.tune.gemv_fma_max_m = val;
        else if (key == "fgrp") p.tune.gemv_fma_group_rows = val;
        else if (key == "frpt") p.tune.gemv_fma_rows_per_task = val;
        else if (key == "fxb") p.tune.gemv_fma_x_block_bytes = val;
        else if (key == "fpf") p.tune.gemv_fma_prefetch_tiles = val;
        else { std::fprintf(stderr, "unknown tuning key %s\n", key.c_str()); return 2; }
      }
      if (!p.stream && !cpu::cpu_path_supported(p.path, p.dt)) continue;
      if (p.presplit && !cpu::repack_for_gemv_cpu_supported()) continue;
      paths.push_back(p);
    }
    // Pre-split copies, only if a path reads them (same size and THP treatment as the pool).
    std::unique_ptr<std::uint8_t, decltype(&std::free)> split_mem(nullptr, &std::free);
    if (std::any_of(paths.begin(), paths.end(), [](const P& p) { return p.presplit; })) {
      split_mem.reset(static_cast<std::uint8_t*>(std::aligned_alloc(2u << 20, pool_bytes)));
      if (thp) madvise(split_mem.get(), pool_bytes, MADV_HUGEPAGE);
      for (int c = 0; c < copies; ++c) {
        std::uint8_t* dst = split_mem.get() + c * wb;
        const std::uint8_t* src = pool.data() + c * wb;
        cpu::repack_for_gemv_cpu(WeightView{src, src + pb, 1.0f, s.n, s.k}, dst);
        std::memcpy(dst + pb, src + pb, static_cast<std::size_t>(sb));
      }
    }
    std::vector<std::uint64_t> sink(4096);
    auto run = [&](std::size_t pi, int c) {
      const std::uint8_t* base = pool.data() + c * wb;
      if (paths[pi].stream) {
        const std::int64_t chunk = 1 << 18, nch = (pb + sb) / chunk;
        cpu::parallel_for(nch, [&](std::int64_t t) {
          const std::uint64_t* q = reinterpret_cast<const std::uint64_t*>(base + t * chunk);
          std::uint64_t a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          for (std::int64_t i = 0; i < chunk / 8; i += 8)
            for (int j = 0; j < 8; ++j) a[j] += q[i + j];
          sink[static_cast<std::size_t>(t % 4096)] += a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
        });
        return;
      }
      const WeightView wv{base, base + pb, 1.0f, s.n, s.k};
      cpu::cpu_tuning_mutable() = paths[pi].tune;
      const DType pdt = paths[pi].dt;
      const MatrixView xv{xs[static_cast<int>(pdt)].data(), pdt, s.m, s.k, s.k};
      const MatrixView yv{ys[static_cast<int>(pdt)].data(), pdt, s.m, s.n, s.n};
      if (paths[pi].presplit) {
        const std::uint8_t* sp = split_mem.get() + c * wb;
        cpu::quantized_matmul_repacked(xv, cpu::CpuRepackedWeightView{sp, sp + pb, 1.0f, s.n, s.k}, yv);
        return;
      }
      cpu::quantized_matmul_path(xv, wv, yv, paths[pi].path);
    };
    std::vector<std::vector<double>> t(paths.size());
    int c = 0;
    for (int r = 0; r < reps + 2; ++r)
      for (std::size_t pi = 0; pi < paths.size(); ++pi) {
        const double t0 = now_us();
        run(pi, c);
        const double dt_us = now_us() - t0;
        c = (c + 1) % copies;
        if (r >= 2) t[pi].push_back(dt_us);
      }
    const double bytes = static_cast<double>(pb + sb) + static_cast<double>(s.m) * (s.k + s.n) * dtype_size(dt);
    for (std::size_t pi = 0; pi < paths.size(); ++pi) {
      auto v = t[pi];
      std::sort(v.begin(), v.end());
      auto q = [&](double p) { return v[static_cast<std::size_t>(p * (v.size() - 1) + 0.5)]; };
      const double b = paths[pi].stream ? static_cast<double>((pb + sb) / (1 << 18) * (1 << 18)) : bytes;
      std::printf("%-5ld %-6ld %-6ld %-22s %10.1f %10.1f %10.1f %8.2f %9.1f\n", s.m, s.n, s.k, paths[pi].label.c_str(),
                  q(0.5), q(0.1), q(0.9), b / (q(0.5) * 1e3), 2.0 * s.m * s.n * s.k / (q(0.5) * 1e3));
    }
    std::uint64_t acc = 0;
    for (auto v : sink) acc += v;
    if (acc == 42) std::printf(" \n");
  }
  return 0;
}
