// kernels/cpu/tuning_cpu.h -- block sizes and thresholds of the CPU kernels.
// These change speed only, never results: every kernel computes each output as one fp32
// sum over K whose grouping does not depend on any value here except where noted (the K split
// of the GEMV changes the summation order; the tests cover split and unsplit shapes).
#pragma once

#include <cstdint>

namespace nvfp4::cpu {

struct CpuTuning {
  // GEMV (weights streamed once for all rows of x) up to this M; GEMM above. At M=8 the GEMV
  // still runs 8 FMAs per decoded vector, which keeps it under the decode+stream cost.
  std::int64_t gemv_max_m = 8;
  // fp16 / fp32 activations with M <= gemv_max_m take the AVX512-BF16 GEMV (split exactly into
  // 2 / 3 bf16 pieces, i.e. 2M / 3M kernel rows) for the M whose bit (M-1) is set here, else the
  // Highway fp32 GEMV. Same results contract either way (oracle within the documented tolerance).
  // Measured (Zen 4 VM, 2 threads, cold, N=4096 K=14336, paired `nvfp4 compare`, split / Highway,
  // docs/perf-cpu.md section 5): fp16 M=1 0.72, M=4 0.68, M=8 0.60 (all M faster); fp32 M=1
  // 1.012 [1.002, 1.024] (3-row tile = Highway's compute: kept on Highway), M=2 0.87, M=3 0.998
  // (tie: Highway), M=4 0.80, M=8 0.89; M=5..7 0.81-0.96 (interleaved cpu_paths_bench).
  std::uint32_t gemv_split_f16_rows = 0xFF;        // M = 1..8
  std::uint32_t gemv_split_f32_rows = 0xFA;        // M = 2, 4..8
  // Weight rows (N) per GEMV task; several rows per task give independent FMA chains and let
  // one atomic per task amortise over >= 16 KiB of weights at K=4096.
  std::int64_t gemv_rows_per_task = 8;
  // Split K into segments when N alone gives fewer than this many tasks per thread.
  std::int64_t gemv_min_tasks_per_thread = 4;
  // AVX512-BF16 GEMV: bytes of (permuted bf16) activations per K block, all rows of the group;
  // every weight row of a task passes over one block before the next. Measured (Zen 4, K=14336,
  // docs/perf-cpu.md): with <= 4-row groups an L1-sized block (16 KiB) is 3-5% slower than none
  // (M=8 cold 3.98 vs 3.78 ms, 1 thread hot 92.8 vs 88.8 us), so the default is effectively off.
  std::int64_t gemv_x_block_bytes = 1 << 20;
  // AVX512-BF16 GEMV: activation rows per pass over the weights (1..8; M is split into balanced
  // groups of at most this many rows). Same per-output summation order for every value.
  std::int64_t gemv_group_rows = 8;
  // AVX512-BF16 GEMV: software prefetch of the weight rows `gemv_prefetch_tiles` tiles (NR rows
  // each) ahead, for gemv_prefetch_min_m <= M <= gemv_prefetch_max_m, into L2 (prefetcht1) if
  // gemv_prefetch_l2, else into L1. Measured (Zen 4 VM, 2 threads, cold, N=4096 K=14336, 5 runs
  // interleaved, docs/perf-cpu.md 2.5): prefetcht1 2 tiles ahead: M=1 -20%, M=2 -26%, M=4 -19%
  // (3 tiles -22%), M=8 +4..9% (compute-bound: the prefetches only cost); prefetcht0 was
  // host-state dependent (M=2 -15% or +13..40%, M=1 1 tile ahead up to +90%).
  std::int64_t gemv_prefetch_tiles = 2;
  std::int64_t gemv_prefetch_min_m = 1;
  std::int64_t gemv_prefetch_max_m = 4;
  std::int64_t gemv_prefetch_l2 = 1;
  // GEMM blocking: NC columns of W decoded per panel (L2-resident: NC*KC*4 B = 256 KiB fp32,
  // 128 KiB bf16), KC depth per decoded panel, MC rows of x per task (C accumulator MC*NC*4 B =
  // 256 KiB). KC 512 vs 256: +3% on the bf16 GEMM (Zen 4, 1 thread, M=512 N=256 K=14336:
  // 201 vs 196 GFLOP/s; 1024: 203), fewer C tile reloads per decoded depth.
  std::int64_t gemm_nc = 128;
  std::int64_t gemm_kc = 512;
  std::int64_t gemm_mc = 512;
};

// The one table, read by every kernel call. Benchmarks and tests may change it through
// cpu_tuning_mutable() between calls (never during one) to compare settings in one process.
inline CpuTuning& cpu_tuning_mutable() {
  static CpuTuning t{};
  return t;
}
inline const CpuTuning& cpu_tuning() { return cpu_tuning_mutable(); }

}  // namespace nvfp4::cpu
