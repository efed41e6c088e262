// kernels/cpu/tuning_cpu.h -- block sizes and thresholds of the CPU kernels.
// These change speed only, never results: every kernel computes each output as one fp32
// sum over K whose grouping does not depend on any value here except where noted (the K split
// of the GEMVs changes the summation order; the tests cover split and unsplit shapes).
#pragma once

#include <algorithm>
#include <cstdint>

#include "nvfp4/dtype.h"

namespace nvfp4::cpu {

// The host's defaults for CpuTuning::gemv_fma_dtypes and gemv_fma_max_m (matmul_cpu.cpp), and the
// gemv_fma_dtypes bit of a dtype.
std::int64_t gemv_fma_dtypes_default();
// The rule behind gemv_fma_dtypes_default, from the host's ISA (tested without such hosts):
// every dtype on Intel AVX512-BF16 + FP16 cores and on AVX-512 CPUs without BF16, none on the
// others (Zen 4 keeps the vdpbf16ps dot) or without the FMA dot's ISA.
std::int64_t gemv_fma_dtypes_rule(bool intel_bf16_fp16, bool bf16, bool fma_dot_isa);
std::int64_t gemv_fma_max_m_default();
std::int64_t gemm_bf16_fp32_min_m_default();
inline std::int64_t gemv_fma_dtype_bit(DType t) { return std::int64_t{1} << static_cast<int>(t); }

struct CpuTuning {
  // GEMV (weights streamed once for all rows of x) up to this M; GEMM above. At M=8 the GEMV
  // still runs 8 FMAs per decoded vector, which keeps it under the decode+stream cost.
  std::int64_t gemv_max_m = 8;
  // bf16 activations, M above gemv_max_m, where the CPU has no AMX GEMM: the vdpbf16ps GEMV (in
  // balanced groups of <= 8 rows, each group streaming the weights from L1/L2 again) up to this
  // M, the bf16 GEMM above. Measured (Zen 4 VM, 2 threads, cold, cpu_paths_bench, us median,
  // GEMV / GEMM with rows padded to 8, docs/perf-cpu.md 9; bench/results/cpu-2026-11-30-zen4-
  // gemm-row-padding.log): 9728 x 2560 M=12 2851 / 3462, M=16 3504 / 3506, M=20 4263 / 4428,
  // M=24 4809 / 4435; 4096 x 14336 M=16 6574 / 7757, M=24 9149 / 9726, M=40 15263 / 14097;
  // 2560 x 9728 M=16 2646 / 3312, M=24 4136 / 4627. AMX hosts keep their AMX GEMV and AMX GEMM.
  std::int64_t gemv_bf16_max_m = 24;
  // The same for fp16 / fp32 activations (the GEMV splits them exactly into 2 / 3 bf16 pieces;
  // above these M they take the Highway fp32 GEMM; hosts with AMX take the AMX GEMV and the AMX
  // GEMM, which splits them too, docs/perf-cpu.md 21). Measured (same VM and tool, 17:28-17:31 UTC, us median, split GEMV / fp32 GEMM,
  // bench/results/cpu-2026-11-30-zen4-mid-m-f16-f32.log): fp16 4096 x 14336 M=12 9183 / 20105,
  // M=16 12261 / 22141, M=24 18379 / 26881, M=32 25309 / 32074; 9728 x 2560 M=16 7485 / 9784,
  // M=24 10097 / 11620. fp32 4096 x 14336 M=12 13905 / 19883, M=16 19005 / 22467, M=24 30455 /
  // 29450 (the GEMM ahead).
  // Since the fp32 GEMM's panel decode was vectorized (2026-12-02, docs/perf-cpu.md 29) the GEMM
  // wins earlier: re-measured (Zen 4 dev VM, 2026-12-03, same tool, both paths in one process,
  // split GEMV / fp32 GEMM, docs/perf-cpu.md 39.6): fp32 4096 x 14336 M=8 9632 / 10047, M=12
  // 13665 / 11916, M=16 20886 / 15863, M=20 21208 / 15426; 9728 x 2560 M=12 6407 / 4761, M=20
  // 13361 / 7825; fp16 4096 x 14336 M=16 12510 / 14269, M=24 17798 / 18239, M=32 26907 / 25095;
  // 9728 x 2560 M=16 7212 / 6778, M=24 9604 / 8283. So fp32 has no mid range left (bound =
  // gemv_max_m) and fp16 keeps it to 16.
  std::int64_t gemv_f16_max_m = 16;
  std::int64_t gemv_f32_max_m = 8;
  // fp16 / fp32 activations with M <= gemv_max_m take the AVX512-BF16 GEMV (split exactly into
  // 2 / 3 bf16 pieces, i.e. 2M / 3M kernel rows) for the M whose bit (M-1) is set here, else the
  // Highway fp32 GEMV. Same results contract either way (oracle within the documented tolerance).
  // Measured (Zen 4 VM, 2 threads, cold, N=4096 K=14336, paired `nvfp4 compare`, split / Highway,
  // docs/perf-cpu.md section 5): fp16 M=1 0.72, M=4 0.68, M=8 0.60 (all M faster); fp32 M=1
  // 1.012 [1.002, 1.024] (3-row tile = Highway's compute: kept on Highway), M=2 0.87, M=3 0.998
  // (tie: Highway), M=4 0.80, M=8 0.89; M=5..7 0.81-0.96 (interleaved cpu_paths_bench).
  // fp32 M = 1 joined on 2026-12-03 (its 3 pieces now run in 64-row tasks; split / Highway 21-40%
  // faster, docs/perf-cpu.md 39.7). Where the dtype takes the FMA dot (gemv_fma_dtypes, which by
  // default holds fp32 on every host with this GEMV since 39.8), that comes first and this mask
  // applies only to a table that turns the FMA dot off.
  // M = 1 .. gemv_fma_max_m on the AVX512 GEMV with fp32 FMAs (vpermps decode; activations
  // converted exactly to fp32, no split) instead of vdpbf16ps, for the activation dtypes whose bit
  // (1 << DType value: 1 f32, 2 f16, 4 bf16) is set. Default (gemv_fma_dtypes_default): every dtype
  // on Intel CPUs with AVX512-BF16 and AVX512-FP16 (AMX exposed or not) and on AVX-512 CPUs
  // without BF16, fp32 only on Zen 4 (gemv_fma_dtypes_rule, matmul_cpu.cpp; docs/perf-cpu.md 39.8).
  // Measured (Emerald Rapids dev VM, 2 threads, cold, cpu_paths_bench, us medians per round,
  // docs/perf-cpu.md 14-16): with its own task size and K block (below), bf16 pre-split 1 x 4096
  // x 14336 1465 / 1610 against 1635 / 1826 on vdpbf16ps, 14336 x 4096 1606-1684 against
  // 1958-2004, 151936 x 2560 10861-12851 against 13591-17153;
  // fp32 1791 / 1868 against 3357-3496 on the Highway GEMV; fp16 1702 / 1868 against 3141-3301
  // split into 2 bf16 pieces. With the bf16 dot's task size (8 rows) it lost cold (§14).
  std::int64_t gemv_fma_dtypes = gemv_fma_dtypes_default();
  // The FMA dot for M = 1 .. this many rows (at most kGemvFmaMaxRows), for the dtypes in
  // gemv_fma_dtypes, ahead of the AMX GEMV. At M = 2 each decoded weight vector feeds two FMAs (4
  // port-0/5 uops per 16 weights against 3 at M = 1), while the AMX GEMV's speed follows the
  // host's TMUL, which on the dev VM halves from one second to the next (docs/perf-cpu.md 22).
  // Measured (Emerald Rapids dev VM, 2 threads, 2 x 4096 x 14336 bf16 pre-split, cpu_paths_bench,
  // us median, same process, 2026-12-01 18:18 UTC, docs/perf-cpu.md 23): FMA dot 2311 cold / 2312
  // hot, AMX GEMV 2776 / 3141, vdpbf16ps dot 2921 / 2845 (M = 1 FMA 1982 / 1757: 1.17x / 1.32x).
  // 1 thread, L2-resident 2 x 256 x 14336: FMA 4 rows x 2 356 us, 2 rows x 2 400, vdpbf16ps 372.
  // Default (gemv_fma_max_m_default): 2 where the AMX GEMV runs (it takes M = 3..16), 16 (in
  // groups of gemv_fma_group_rows) where it does not: there the alternatives are the vdpbf16ps
  // dot, whose 32 MACs per ~2 cycles are half the FMAs' 2 x 16 per cycle, and from M = 17 the
  // fp32 GEMM (gemm_bf16_fp32_min_m). Measured without AMX (Emerald Rapids VM, model 207, 2
  // threads, cold, bf16, cpu_paths_bench, us median, docs/perf-cpu.md 28-29): FMA dot / vdpbf16ps
  // dot at 4096 x 14336: M = 2 3548 / 4410, 4 3458 / 4421, 6 5228 / 6331, 16 12660 / 13984; FMA
  // dot / fp32 GEMM (its decode vectorized): 4096 x 14336 M = 8 6304 / 10606, 12 9757 / 13202, 16
  // 12061 / 13173, 24 20501 / 19340; 9728 x 2560 M = 8 3450 / 4886, 16 6734 / 6394.
  std::int64_t gemv_fma_max_m = gemv_fma_max_m_default();
  // The FMA dot's weight rows per task and activation bytes (fp32) per K block. Measured (same
  // VM and tool, docs/perf-cpu.md 16): 8 rows / no K blocks 2142-2300 us cold at 1 x 4096 x 14336
  // bf16; 64 rows 1695-1737; 128 rows + 16 KiB blocks 1690-1730; 256 rows 1660-1691 (fewer tasks
  // than threads x 4 below N = 2048 take the K split). The bf16 dot gained 0-3% from the same
  // values, so it keeps its own.
  // K blocks: none (1 MiB covers every row up to K = 262144 at M = 1) since 2026-12-02. On that
  // day's dev VM, whose read is 30 GB/s, 16 KiB blocks cut each weight row into 2 KiB runs, and
  // the cold call ran at 73-75% of the read (docs/perf-cpu.md 25-26). `cpu_paths_bench bf16 cold
  // thp`, 1 / 2 x 4096 x 14336, two rounds, us median: 16 KiB 1415-1463 / 1740-1751, 64 KiB
  // 1304-1333 / 1710-1715, 128 KiB 1294-1298 / 1656-1663; hot M = 1 1016-1022 for all,
  // M = 2 +1-1.5% without blocks.
  std::int64_t gemv_fma_rows_per_task = 128;
  std::int64_t gemv_fma_x_block_bytes = 1 << 20;
  // The FMA dot's software prefetch distance, in tiles of weight rows (prefetcht1, for M within
  // gemv_prefetch_min_m..max_m; the vdpbf16ps dot keeps gemv_prefetch_tiles, measured on Zen 4).
  // Measured on the 2026-12-02 dev VM (docs/perf-cpu.md 26): 1 tile against 2, no K blocks, cold
  // 1 / 2 x 4096 x 14336, three sweeps, us median: 1250-1262 against 1294-1314, 1575-1582 against
  // 1656-1663; hot within 1%. On the Emerald Rapids host, off against 2 tiles made no robust
  // difference (docs/perf-cpu.md 7).
  std::int64_t gemv_fma_prefetch_tiles = 1;
  // The FMA dot's activation rows per pass over the weights (1..kGemvFmaTileRows; M is split into
  // balanced groups of at most this many, each re-reading the task's weight rows from L1/L2).
  // Measured (same host and tool, bf16, us median): 8 x 4096 x 14336 as 8 x 1 tiles 11154, as
  // two 4 x 2 passes 7418 (vdpbf16ps dot 8302); 6 rows 4895 in one pass, 5353 in two of 3.
  std::int64_t gemv_fma_group_rows = 6;
  std::uint32_t gemv_split_f16_rows = 0xFF;        // M = 1..8
  std::uint32_t gemv_split_f32_rows = 0xFB;        // M = 1, 2, 4..8
  // Highway GEMV: weight rows (N) per task; several rows per task give independent FMA chains and
  // let one atomic per task amortise over >= 16 KiB of weights at K=4096.
  std::int64_t gemv_rows_per_task = 8;
  // ... and at least this many packed weight bytes per task (rows rounded up to a multiple of
  // gemv_rows_per_task), while N still gives every thread gemv_min_tasks_per_thread tasks. Short
  // rows in 8-row tasks cut each thread's stream into ~10 KiB pieces at K = 2560. Measured (AVX2
  // VM, 2 threads, cold M = 1, us median, 8 rows per task / the best of 16-256; docs/perf-cpu.md 46):
  // 22936 x 2560 4696 / 3157-3187 (64-256 rows), 1024 x 2560 171 / 140 (32-64), 2560 x 4096 710 /
  // 640 (64), 2560 x 9728 1474 / 1393-1405 (16-32), 4096 x 14336 3438 / 3545-3607 (32-128: within
  // noise).
  std::int64_t gemv_task_bytes = 128 * 1024;
  // Highway GEMV, M >= 2: a row stride of the permuted activations that is a multiple of 4 KiB is
  // padded by 512 B (gemv_nvfp4_hwy.cpp, x_row_stride; docs/perf-cpu.md 47); 0 keeps it at K (A/Bs).
  std::int64_t gemv_x_pad = 1;
  // AVX512-BF16 GEMV (the vdpbf16ps dot): weight rows per task at one virtual activation row (bf16
  // M = 1: one 8-row tile) and at more (M x pieces >= 2: tiles of 4 or 2 rows). Why they differ:
  // the prefetch (gemv_prefetch_tiles) reaches 2 tiles past the tile being computed, across task
  // boundaries. A task computes its first 2 tiles unprefetched and prefetches 2 tiles of the next
  // task, which the other thread may take: with 8 rows that is every tile of 4 or 2 rows, with 64
  // rows 2 of 16 or 32. At M = 1 a task is one tile, and with 2 threads taking tasks in turn the
  // prefetch 2 tasks ahead lands on the thread's own next task; longer tasks lost there. With the
  // prefetch off, 8 and 64 rows tie (M = 4: 2433 / 2440 us). Measured (Zen 4 dev VM, 2 threads,
  // cold, both in one process, 2026-12-03; the full table in docs/perf-cpu.md 39.1), 8 against 64
  // rows: 4 x 4096 x 14336 2006-2084 against 1849-1884, 4 x 9728 x 2560 1185-1503 against
  // 1006-1210; but M = 1 x 4096 x 14336 1075-1159 against 1223-1298. Qwen3-4B batched decode,
  // paired: B = 2 -23%, B = 4 -20%.
  std::int64_t gemv_avx512bf16_rows_per_task_m1 = 8;
  std::int64_t gemv_avx512bf16_rows_per_task = 64;
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
  // host-state dependent (M=2 -15% or +13..40%, M=1 1 tile ahead up to +90%). On Emerald Rapids
  // (the AMX host, 2 cores, M=1) off vs 2 tiles: 5-10% faster off in a first sweep, then within
  // +-2% in 8 more interleaved rounds (docs/perf-cpu.md 7): no robust difference, one default.
  // The upper bound (both dots) was 4; with 64-row tasks (gemv_avx512bf16_rows_per_task) M = 5 / 6
  // gain too (docs/perf-cpu.md 39.5, both bounds in one process, cold, 2 threads, us median): Zen 4
  // vdpbf16ps dot 5 x 4096 x 14336 3108 / 2921 -> 2415 / 2268, 6 x 4096 x 14336 3217 / 3133 ->
  // 2751 / 2901, 6 x 9728 x 2560 1746 / 2588 -> 1346 / 2165; M = 7 +2% / -3%, M = 8 +7..+12%
  // (compute-bound). Device host (Emerald Rapids), FMA dot: M = 5 -7% / -7%, M = 6 +2% / -9%,
  // 6 x 9728 x 2560 -14% / -22%; vdpbf16ps dot -2% to -14%.
  std::int64_t gemv_prefetch_tiles = 2;
  std::int64_t gemv_prefetch_min_m = 1;
  std::int64_t gemv_prefetch_max_m = 6;
  std::int64_t gemv_prefetch_l2 = 1;
  // The vdpbf16ps dot also prefetches up to gemv_prefetch_short_k_max_m virtual rows (M x pieces)
  // where K <= gemv_prefetch_short_k: there (K = 2560: rows of 1280 bytes) it gained 7-22% at
  // M = 7..12 and 2-10% at 13 / 14, lost at 15 / 16 and at fp16 M = 8 / 12 (16 / 24 virtual rows);
  // at K = 9728 / 14336 it costs M = 8 / 16 14-19% (Zen 4, both in one process, cold, 2 threads;
  // docs/perf-cpu.md 41).
  std::int64_t gemv_prefetch_short_k = 4096;
  std::int64_t gemv_prefetch_short_k_max_m = 14;
  // AMX GEMV (gemv_nvfp4_amx.cpp), where AMX is granted: taken for the M (1..16) whose bit (M-1)
  // is set, any dtype, before the gemv_max_m test. Measured (lead, Emerald Rapids, 2 cores pinned,
  // cold, N=4096 K=14336 bf16, cpu_paths_bench, us median, multiply/convert decode, n_tiles 2):
  // M=1 3217 vs vdpbf16ps GEMV 1723, M=2 4261 vs 2643, M=4 4786 vs 4589, M=8 3695 vs 7346,
  // M=16 4443 vs 14283. With the table decode (second run, 13:06 UTC, docs/perf-cpu.md 6.2, us
  // median / p10): M=2 3262 / 2327 vs 2931 / 2689, M=4 4687 / 3106 vs 4872 / 4685, M=8 5363 /
  // 3493 vs 9252 / 8290, M=16 4160 / 3402 vs 15921 / 14399. With k_block 256 (below), paired
  // `nvfp4 compare` M over M=1 (13:21-13:22 UTC, bench/results/cpu-2026-11-30-emr-m*-vs-m1-{kb256,amx}.json):
  // M=2 1.172 on AMX vs 1.467 on vdpbf16ps, M=3 1.277, M=4 1.215, M=8 1.345. So M = 2..16
  // (0xFFFE); M=1 stays on the vdpbf16ps GEMV (AMX M=1 2741 vs 1995 us, same sweep).
  std::uint32_t gemv_amx_rows = 0xFFFE;
  // AMX GEMV above M = 16 too, while M x pieces (1 bf16, 2 fp16, 3 fp32: the virtual rows) <= this;
  // the AMX GEMM above. The GEMV decodes the weights once per pass of <= 48 virtual rows, the GEMM
  // once per call but into panels it reloads per 32 rows. Measured (Emerald Rapids dev VM, 2
  // threads, cold, N=4096 K=14336, cpu_paths_bench, us median, GEMV / GEMM, 2026-12-01 16:46-16:48
  // UTC, docs/perf-cpu.md 21): bf16 M=24 3899 / 9214, M=32 4813 / 9439, M=48 13814 / 21559, M=64
  // 21274 / 21250, M=96 23832 / 19321; fp16 M=17 9527 / 16909, M=24 7053 / 11575, M=32 14250 /
  // 14881, M=48 32512 / 27844; fp32 M=17 11726 / 15576, M=64 56669 / 35856. Re-run at 2a69f5d:
  // bf16 M=64 13763 / 15508, fp16 M=24 12599 / 19005, M=48 33722 / 28731, fp32 M=24 23588 /
  // 28801, M=48 38433 / 25476 (bench/results/cpu-2026-12-01-emr-devvm-amx-mid-m.log). Faster up
  // to 51 virtual rows at this shape, ahead or even at 64 and 72, behind from 96. But above 48
  // virtual rows the GEMV makes 2 passes, decoding every weight twice, and on the Qwen3-4B decode
  // replay at B = 64 (its 151936 x 2560 lm_head included) a bound of 64 was 1.33x slower
  // end to end (CI [1.20, 1.48], docs/perf-cpu.md 21). So one pass: 48.
  std::int64_t gemv_amx_max_virtual_rows = 48;
  // AMX GEMV: 16-row C tiles per pass (1..6; capped at 2 when the virtual activation rows need
  // 2 C tiles per 16 weight rows, 1 for 3, to fit the 8 tile registers). A task = 16 * this many
  // weight rows; each B tile load feeds this many TDPBF16PS. Measured (same run as above): 2 beats
  // 4 at every M (M=1 3217 vs 4411 us, M=2 4261 vs 5282, M=4 4786 vs 5643, M=8 3695 vs 4890,
  // M=16 4443 vs 5555): half the rows streamed at once per task.
  std::int64_t gemv_amx_n_tiles = 2;
  // AMX GEMV: k decoded per weight row before its tile products (multiple of 32; the A buffers,
  // n_tiles * k_block / 32 KiB <= 32 KiB, stay in L1). Measured with n_tiles 4: 256 was 4-12%
  // faster than 128 at M=1..16 (e.g. M=8 4448 vs 4890 us); with n_tiles 2 and the table decode
  // (Emerald Rapids, 2 cores, one process, 13:20 UTC, bench/results/device-2026-11-30-emr-cpu-
  // amx-sweep.log, us median, 128 / 256 / 512): M=1 3088 / 2741 / 2995, M=4 2754 / 2381 / 2870,
  // M=8 2539 / 2290 / 2907, M=16 4100 / 3962 / 4398. n_tiles 1 / 3 and prefetch 0 / 512 were
  // no better than the defaults in the same run.
  std::int64_t gemv_amx_k_block = 256;
  // AMX GEMV: software prefetch (prefetcht1) of each weight row this many bytes ahead, 0 = off.
  // A task streams 16 * n_tiles rows at once, more than the L2 streamer tracks. Measured with
  // n_tiles 4 (run above): 0 vs 256 within -1..+7% (M=1 4354 vs 4411 us, M=16 5970 vs 5555): kept.
  std::int64_t gemv_amx_prefetch_bytes = 256;
  // AMX GEMV decode of the per-group LUT: 1 = [table[s0] | table[s1]] from an 8 KiB table of
  // e2m1 x |scale| (4 port-0/5 uops per 32 weights), 0 = 2 vmulps + vcvtne2ps2bf16 per group
  // (7 uops, the original). Same bits either way (tested); 0 exists for A/B timing in one process
  // (cpu_paths_bench gemv_amx:tab=0). Predicted ~1.75x faster decode (gemv_nvfp4_amx.cpp);
  // measured on Emerald Rapids (2 cores, same run as above): 18-28% faster (M=1 3361 vs 4080 us,
  // M=4 4687 vs 6469, M=8 5363 vs 7087, M=16 4160 vs 5236).
  std::int64_t gemv_amx_decode_table = 1;
  // bf16 activations above the GEMVs on a host without AMX, from this M: the fp32 GEMM (Highway
  // FMAs on panels decoded exactly to fp32) instead of the vdpbf16ps GEMM. Default
  // (gemm_bf16_fp32_min_m_default): 0 (every M) where vdpbf16ps is the slow unit (gemv_fma_dtypes
  // has bf16), else never (INT64_MAX). Measured (Emerald Rapids VM without AMX, 2 threads,
  // cpu_paths_bench, interleaved, cold, us median, fp32 / vdpbf16ps GEMM, docs/perf-cpu.md 29):
  // 4096 x 14336 M = 8 10606 / 11740, 16 13173 / 16869, 24 19340 / 24367, 32 19184 / 27466, 128
  // 53925 / 94194; 9728 x 2560 M = 16 6394 / 7613, 32 9551 / 12676.
  std::int64_t gemm_bf16_fp32_min_m = gemm_bf16_fp32_min_m_default();
  // GEMM blocking: NC columns of W decoded per panel (L2-resident: NC*KC*4 B = 256 KiB fp32,
  // 128 KiB bf16), KC depth per decoded panel, MC rows of x per task (C accumulator MC*NC*4 B =
  // 256 KiB). KC 512 vs 256: +3% on the bf16 GEMM (Zen 4, 1 thread, M=512 N=256 K=14336:
  // 201 vs 196 GFLOP/s; 1024: 203), fewer C tile reloads per decoded depth.
  std::int64_t gemm_nc = 128;
  std::int64_t gemm_kc = 512;
  std::int64_t gemm_mc = 512;
  // GEMMs (bf16, AMX, fp32): software prefetch of the weight rows their panel decode reads next (the
  // next 16 / 32-row group into L1 during a decode, the next KC slice into L2 during the microkernel),
  // 1 = on, 0 = off (for A/B timing in one process; docs/perf-cpu.md 40).
  std::int64_t gemm_prefetch = 1;
  // fp32 GEMM on AVX2, M <= this: the dot-form kernel (gemm_nvfp4_hwy.cpp, GemmDotAvx2), whose
  // panel decode costs ~0.6x the outer-product kernel's and whose 3 x 4 tile runs equal at M = 32
  // and 7% slower at 64 (AVX2 VM, 9728 x 2560, docs/perf-cpu.md 48). 0: never (A/Bs).
  std::int64_t gemm_dot_max_m = 24;
};

// The one table, read by every kernel call. Benchmarks and tests may change it through
// cpu_tuning_mutable() between calls (never during one) to compare settings in one process.
inline CpuTuning& cpu_tuning_mutable() {
  static CpuTuning t{};
  return t;
}
inline const CpuTuning& cpu_tuning() { return cpu_tuning_mutable(); }

// The FMA dot: at most M = 32 (gemv_fma_max_m), in groups of at most 6 activation rows (its
// compiled tiles, gemv_nvfp4_avx512bf16.cpp rows_any_m).
inline constexpr std::int64_t kGemvFmaMaxRows = 32;
inline constexpr std::int64_t kGemvFmaTileRows = 6;
// True when the AVX512 GEMV runs the FMA dot (gemv_fma_dtypes, gemv_fma_max_m) for M rows of
// dtype t: the one place the dispatcher, the kernel and the kernel names ask.
inline bool gemv_fma_dot(std::int64_t m, DType t) {
  return m >= 1 && m <= std::min(cpu_tuning().gemv_fma_max_m, kGemvFmaMaxRows) &&
         (cpu_tuning().gemv_fma_dtypes & gemv_fma_dtype_bit(t)) != 0;
}

}  // namespace nvfp4::cpu
