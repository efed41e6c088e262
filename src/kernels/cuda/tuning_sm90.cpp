// kernels/cuda/tuning_sm90.cpp -- the GEMV tuning table: built-in entries, JSON I/O, lookup.
// The entries change speed only, never the function computed (see tuning_sm90.h).
#include "kernels/cuda/tuning_sm90.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <fstream>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/file_util.h"
#include "io/json_util.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"

namespace nvfp4::cuda {
namespace {

const char* kBuckets[] = {"n_small/k_small", "n_small/k_mid", "n_small/k_large",
                          "n_mid/k_small",   "n_mid/k_mid",   "n_mid/k_large",
                          "n_large/k_small", "n_large/k_mid", "n_large/k_large"};

// Exact classes: the decode shapes (q/k/v/o, fused qkv, gate/up, fused gate+up, down, lm_head)
// of the built-in models (models/*.json): Llama-3-8B (K = 4096 / 14336), Llama-3-70B (K = 8192 /
// 28672), Qwen3-32B (K = 5120 / 8192 / 25600), Qwen3-4B (K = 2560 / 4096 / 9728), Qwen3.5-4B-like
// (its own: 9216 / 18432 x 2560, 2560 x 9216, 248320 x 2560). Why per shape: the buckets'
// entries were tuned at one representative each, and on 2026-12-04 the exact entries of the
// last four models made their decode 13-30% faster than the buckets' tiles (kBuiltin).
// 151936 x 2560 (Qwen3-4B's lm_head) is n_large/k_mid's representative, tuned there.
const std::int64_t kExact[][2] = {
    {1024, 4096},  {4096, 4096},  {6144, 4096},  {14336, 4096},  {28672, 4096},  {4096, 14336}, {128256, 4096},
    {1024, 8192},  {8192, 8192},  {10240, 8192}, {28672, 8192},  {57344, 8192},  {8192, 28672}, {128256, 8192},
    {1024, 5120},  {8192, 5120},  {10240, 5120}, {5120, 8192},   {25600, 5120},  {51200, 5120}, {5120, 25600},
    {151936, 5120}, {1024, 2560}, {4096, 2560},  {6144, 2560},   {2560, 4096},   {9728, 2560},  {19456, 2560},
    {2560, 9728},   {9216, 2560}, {2560, 9216},  {18432, 2560},  {248320, 2560}};

// A repacked tile with which the opt-in overlapped (PDL) launch measured more than 2% slower
// than the plain one: the request is not honoured for that class (tuning_sm90.h, overlap_ok).
constexpr GemvTile no_overlap(GemvTile t) {
  t.overlap_ok = false;
  return t;
}

// Built-in table for Hopper (cc 90), written by `nvfp4 tune` on an H200 (docs/perf-cuda.md
// has the run). Changes speed only. The overlap verdicts (no_overlap) are from `nvfp4 tune
// --layout repacked` on an H200, 2026-11-30 14:21 UTC (bench/results/cuda-2026-11-30-h200-
// tuning-overlap.json): overlapped / plain us, 28672x4096 22.71 / 20.47, 6144x4096 7.05 / 6.84,
// 14336x4096 12.55 / 11.86; M=16: 4096x512 3.68 / 3.13, 65536x12288 180.55 / 147.83.
const GemvTableEntry kBuiltin[] = {
    // `nvfp4 tune` on an H200, 2026-11-30 (M=1 bf16, rotated weights, CUDA graph medians, us).
    {90, "n_small/k_small", {16, 4, 4}, 3.29},   // 4096 x 512
    {90, "n_small/k_mid", {16, 8, 8}, 8.64},     // 4096 x 4096
    {90, "n_small/k_large", {16, 8, 8}, 21.90},  // 4096 x 14336
    {90, "n_mid/k_small", {32, 8, 4}, 8.00},     // 16384 x 1024
    {90, "n_mid/k_mid", {32, 4, 4}, 37.76},      // 28672 x 4096
    {90, "n_mid/k_large", {32, 8, 4}, 75.50},    // 16384 x 16384
    {90, "n_large/k_small", {32, 1, 1}, 41.67},  // 131072 x 1024
    {90, "n_large/k_mid", {32, 4, 2}, 106.65},   // 151936 x 2560
    {90, "n_large/k_large", {32, 4, 4}, 216.20}, // 65536 x 12288
    // Repacked layout (quantized_matmul_repacked, gemv_nvfp4_rp_kernel). M <= 8: `nvfp4 tune
    // --layout repacked` on an H200, 2026-11-30 (M=1 bf16, rotated weights, graph medians, us;
    // bench/results/cuda-2026-11-30-h200-tuning-rp.json.gz). Every winner has 16 rows per warp.
    {90, "n_small/k_small", {16, 4, 4}, 2.63, GemvLayout::kRepacked, 8},      // 4096 x 512
    {90, "n_small/k_mid", {16, 16, 16}, 5.34, GemvLayout::kRepacked, 8},     // 4096 x 4096
    {90, "n_small/k_large", {16, 16, 16}, 11.63, GemvLayout::kRepacked, 8},  // 4096 x 14336
    {90, "n_mid/k_small", {16, 8, 4}, 5.26, GemvLayout::kRepacked, 8},       // 16384 x 1024
    {90, "n_mid/k_mid", no_overlap({16, 4, 2}), 20.49, GemvLayout::kRepacked, 8},        // 28672 x 4096
    {90, "n_mid/k_large", {16, 16, 4}, 40.67, GemvLayout::kRepacked, 8},     // 16384 x 16384
    {90, "n_large/k_small", {16, 4, 1}, 23.78, GemvLayout::kRepacked, 8},    // 131072 x 1024
    {90, "n_large/k_mid", {16, 4, 2}, 59.07, GemvLayout::kRepacked, 8},      // 151936 x 2560
    {90, "n_large/k_large", {16, 4, 4}, 116.72, GemvLayout::kRepacked, 8},   // 65536 x 12288
    {90, "exact/1024x4096", {16, 16, 16}, 4.10, GemvLayout::kRepacked, 8},   // Llama-3-8B k/v
    {90, "exact/6144x4096", no_overlap({16, 8, 8}), 6.92, GemvLayout::kRepacked, 8},     // fused qkv
    {90, "exact/14336x4096", no_overlap({16, 4, 4}), 11.89, GemvLayout::kRepacked, 8},   // gate / up
    {90, "exact/128256x4096", {16, 4, 2}, 77.75, GemvLayout::kRepacked, 8},  // lm_head
    // Early-weights launch (RepackedMatmulOptions::weights_read_early, used at <= 8 virtual rows;
    // keyed m_max 8 like the kernel they run, tuned at M = 1): `nvfp4 tune
    // --layout repacked` on an H200, 2026-11-30 22:40 UTC, commit 9905bfc (M=1 bf16, rotated
    // weights, graph medians, us; bench/results/cuda-2026-11-30-h200-tuning-early-9905bfc.json).
    // Only the classes where that launch beat the ordinary entry by more than 2% (in brackets the
    // ordinary overlapped launch, same run); elsewhere an early request runs the entry above.
    {90, "n_small/k_small", {16, 8, 4}, 1.71, GemvLayout::kRepacked, 8, true},      // 4096 x 512 [2.46]
    {90, "n_small/k_large", {16, 16, 16}, 9.51, GemvLayout::kRepacked, 8, true},    // 4096 x 14336 [9.87]
    // k/v: 16 rows per warp since the re-tune of 2026-12-02 09:44 UTC (commit 985ba2d; bench/results/
    // cuda-2026-12-02-h200-tuning-rp-985ba2d.json): 2.70 against 3.02 us for the 32-row tile in
    // that run. Against the 32-row entry (`nvfp4 compare`, one H200 run, 8c17680 against 985ba2d):
    // -7.28% per call, Llama-3-8B decode B = 1 / 4 / 8 -2.02% / -2.95% / -2.65%, B = 16 / 32 no
    // difference. The rest of that re-tune was not taken: it slowed 16384 x 28672, 151936 x 2560
    // and batched decode at B = 16 / 32, and its other M <= 8 entries measured no decode gain
    // (docs/perf-cuda.md 45).
    {90, "exact/1024x4096", {16, 16, 16}, 2.70, GemvLayout::kRepacked, 8, true},    // k/v [3.53]
    {90, "exact/6144x4096", {16, 16, 8}, 5.84, GemvLayout::kRepacked, 8, true},     // fused qkv [6.07]
    {90, "exact/14336x4096", {16, 16, 4}, 10.25, GemvLayout::kRepacked, 8, true},   // gate / up [10.90]
    // Added by the re-tune after the M <= 8 epilogue change (7ad5b34, 23:12 UTC; bench/results/
    // cuda-2026-11-30-h200-tuning-early-7ad5b34.json), which made the early launch pay off on
    // multi-wave grids too. In the bench of that run: 28672 x 4096 17.80 against 18.50 us,
    // 151936 x 2560 53.66 against 56.66 us.
    {90, "n_mid/k_mid", {16, 16, 2}, 17.85, GemvLayout::kRepacked, 8, true},       // 28672 x 4096 [18.56 plain]
    {90, "n_large/k_small", {16, 16, 1}, 19.83, GemvLayout::kRepacked, 8, true},   // 131072 x 1024 [21.05]
    {90, "n_large/k_mid", {16, 4, 2}, 55.12, GemvLayout::kRepacked, 8, true},      // 151936 x 2560 [56.69]
    // Back to back with itself the early launch measured 6.5% slower here (4.57 against 4.29
    // us), but inside the Llama-3-8B decode sequence, where other shapes precede it, this entry
    // took the decode gain of the early launch from -1.60% to -3.79% (`nvfp4 compare`, same H200,
    // 22:50 UTC; bench/results/compare-2026-11-30-h200-early-table-*); without it the decode is
    // 2.43% slower (06c9cf0). `nvfp4 tune`'s decode check writes the same entry (566d8ea, 8-layer
    // decode 428.1 -> 420.4 us; bench/results/device-2026-11-30-h200-tune-decode-check-566d8ea.log.gz).
    {90, "n_small/k_mid", {16, 16, 16}, 4.57, GemvLayout::kRepacked, 8, true},     // 4096 x 4096 [4.29]
    // Early-weights launch of the M = 9..16 kernel (16 rows per warp; docs/perf-cuda.md 33):
    // `nvfp4 tune --layout repacked` on an H200, 2026-12-02 00:37 UTC, commit a6e938a (M = 16 bf16,
    // rotated weights, graph medians, us; bench/results/cuda-2026-12-02-h200-early-m16-a6e938a.json.gz).
    // Only the 4 of 13 classes where it beat the ordinary entry by more than 2% (in brackets the
    // ordinary best, same run). With that run's table, Llama-3-8B batched decode with the early
    // launch against without: B = 16 -0.91% [-1.15, -0.87], B = 12 -1.84% (`nvfp4 compare`); with
    // this built-in table (d60d304): B = 16 -2.75% [-2.83, -2.54], B = 12 -3.09% [-3.32, -2.91].
    {90, "n_small/k_small", {16, 16, 4}, 2.92, GemvLayout::kRepacked, 16, true},   // 4096 x 512 [3.14]
    {90, "n_mid/k_small", {16, 8, 4}, 6.70, GemvLayout::kRepacked, 16, true},      // 16384 x 1024 [6.95]
    {90, "n_large/k_small", {16, 2, 1}, 33.31, GemvLayout::kRepacked, 16, true},   // 131072 x 1024 [34.10]
    {90, "exact/1024x4096", {16, 16, 16}, 3.99, GemvLayout::kRepacked, 16, true},  // k/v [4.41]
    // M = 9..16 per launch (the NB = 2 kernel): `nvfp4 tune --layout repacked` on an H200,
    // 2026-11-30 16:45 UTC, after rp<1,2> went to two buffers / 64 registers (M=16 bf16, rotated
    // weights, graph medians, us; overlap verdicts from the same run; bench/results/
    // cuda-2026-11-30-h200-tuning-rp12-2buf.json). Kept from the earlier run: the no_overlap of
    // n_large/k_large (180.55 / 147.83 us there; rp<2,2> is unchanged since).
    {90, "n_small/k_small", no_overlap({16, 4, 4}), 3.13, GemvLayout::kRepacked, 16},         // 4096 x 512
    {90, "n_small/k_mid", no_overlap({16, 8, 8}), 6.40, GemvLayout::kRepacked, 16},           // 4096 x 4096
    {90, "n_small/k_large", {16, 16, 16}, 13.59, GemvLayout::kRepacked, 16},                 // 4096 x 14336
    {90, "n_mid/k_small", {16, 4, 4}, 6.91, GemvLayout::kRepacked, 16},                      // 16384 x 1024
    {90, "n_mid/k_mid", no_overlap({16, 4, 2}), 23.91, GemvLayout::kRepacked, 16},            // 28672 x 4096
    {90, "n_mid/k_large", {32, 8, 4}, 44.90, GemvLayout::kRepacked, 16},                     // 16384 x 16384
    {90, "n_large/k_small", {16, 4, 1}, 33.93, GemvLayout::kRepacked, 16},                   // 131072 x 1024
    {90, "n_large/k_mid", {32, 4, 2}, 77.30, GemvLayout::kRepacked, 16},                     // 151936 x 2560
    {90, "n_large/k_large", no_overlap({32, 1, 1}), 144.08, GemvLayout::kRepacked, 16},       // 65536 x 12288
    {90, "exact/1024x4096", no_overlap({16, 16, 16}), 4.39, GemvLayout::kRepacked, 16},       // 1024 x 4096
    {90, "exact/6144x4096", no_overlap({16, 8, 8}), 7.57, GemvLayout::kRepacked, 16},         // 6144 x 4096
    {90, "exact/14336x4096", no_overlap({16, 4, 4}), 13.64, GemvLayout::kRepacked, 16},       // 14336 x 4096
    {90, "exact/128256x4096", {32, 1, 1}, 95.33, GemvLayout::kRepacked, 16},                 // 128256 x 4096
    // The decode shapes of Llama-3-70B, Qwen3-32B and Qwen3-4B (repacked layout, M <= 8, M = 9..16
    // and their early-weights entries): `nvfp4 tune --layout repacked --shapes exact/...
    // --decode-model <model> --decode-layers 8 (Qwen3-4B: 36) --verify-batches 1 16` on an H200,
    // 2026-12-04 04:37-04:39 UTC, commit 04f6bd7 (M = 1 / 16 bf16, rotated weights, graph medians,
    // us; bench/results/cuda-2026-12-04-h200-tuning-{llama-3-70b,llama-3-70b-fused,qwen3-32b,
    // qwen3-4b}-04f6bd7.json). Before, these shapes took the buckets' tiles; the tuner's A/B of
    // its table against this table's buckets, in each model's decode replay (B/A - 1, 95% CI):
    // Llama-3-70B B = 1 -30.17% [-30.47, -29.96], B = 16 -24.39%; Qwen3-32B -12.95% / -15.88%;
    // Qwen3-4B -14.70% / -22.87%. (The bucket n_mid/k_mid, tuned at 28672 x 4096, put 8192 x 8192
    // on 4-warp blocks: 256 blocks, a quarter of the warps the GPU holds.) The fused 70B shapes
    // were tuned the same way; their A/B ran the unfused replay (no difference, as it must be).
    // Llama-3-70B (8 of 80 layers in the check):
    {90, "exact/8192x8192", {16, 16, 8}, 11.02, GemvLayout::kRepacked, 8},                  // q / o
    {90, "exact/8192x8192", {16, 16, 8}, 10.09, GemvLayout::kRepacked, 8, true},
    {90, "exact/8192x8192", {32, 8, 8}, 14.25, GemvLayout::kRepacked, 16},
    {90, "exact/1024x8192", no_overlap({16, 16, 16}), 4.68, GemvLayout::kRepacked, 8},      // k / v
    {90, "exact/1024x8192", {16, 16, 16}, 3.77, GemvLayout::kRepacked, 8, true},
    {90, "exact/1024x8192", no_overlap({16, 16, 16}), 6.21, GemvLayout::kRepacked, 16},
    {90, "exact/1024x8192", {16, 16, 16}, 5.39, GemvLayout::kRepacked, 16, true},
    {90, "exact/10240x8192", no_overlap({16, 4, 4}), 14.73, GemvLayout::kRepacked, 8},      // fused qkv
    {90, "exact/10240x8192", no_overlap({16, 4, 4}), 18.33, GemvLayout::kRepacked, 16},
    {90, "exact/28672x8192", no_overlap({16, 4, 2}), 33.67, GemvLayout::kRepacked, 8},      // gate / up
    {90, "exact/28672x8192", {16, 4, 4}, 32.92, GemvLayout::kRepacked, 8, true},
    {90, "exact/28672x8192", no_overlap({32, 8, 2}), 42.37, GemvLayout::kRepacked, 16},
    {90, "exact/57344x8192", no_overlap({16, 1, 1}), 63.88, GemvLayout::kRepacked, 8},      // fused gate+up
    {90, "exact/57344x8192", no_overlap({32, 8, 1}), 81.38, GemvLayout::kRepacked, 16},
    {90, "exact/8192x28672", {16, 8, 8}, 32.10, GemvLayout::kRepacked, 8},                  // down
    {90, "exact/8192x28672", {16, 16, 8}, 31.46, GemvLayout::kRepacked, 8, true},  // decode check: -0.82%
    {90, "exact/8192x28672", {32, 8, 8}, 38.38, GemvLayout::kRepacked, 16},
    {90, "exact/128256x8192", {16, 1, 1}, 136.89, GemvLayout::kRepacked, 8},                // lm_head
    {90, "exact/128256x8192", no_overlap({32, 1, 1}), 175.50, GemvLayout::kRepacked, 16},
    // Qwen3-32B (8 of 64 layers):
    {90, "exact/8192x5120", {16, 16, 8}, 7.45, GemvLayout::kRepacked, 8},                   // q
    {90, "exact/8192x5120", {16, 16, 8}, 6.83, GemvLayout::kRepacked, 8, true},
    {90, "exact/8192x5120", {32, 8, 8}, 10.17, GemvLayout::kRepacked, 16},
    {90, "exact/1024x5120", {16, 16, 16}, 3.99, GemvLayout::kRepacked, 8},                  // k / v
    {90, "exact/1024x5120", {16, 16, 16}, 3.12, GemvLayout::kRepacked, 8, true},
    {90, "exact/1024x5120", no_overlap({16, 16, 16}), 5.16, GemvLayout::kRepacked, 16},
    {90, "exact/1024x5120", {16, 16, 16}, 4.80, GemvLayout::kRepacked, 16, true},
    {90, "exact/5120x8192", no_overlap({16, 8, 8}), 8.96, GemvLayout::kRepacked, 8},        // o
    {90, "exact/5120x8192", no_overlap({16, 8, 8}), 11.68, GemvLayout::kRepacked, 16},
    {90, "exact/25600x5120", no_overlap({16, 4, 2}), 20.29, GemvLayout::kRepacked, 8},      // gate / up
    {90, "exact/25600x5120", {16, 4, 4}, 19.85, GemvLayout::kRepacked, 8, true},
    {90, "exact/25600x5120", no_overlap({16, 2, 2}), 27.45, GemvLayout::kRepacked, 16},
    {90, "exact/5120x25600", no_overlap({16, 8, 8}), 21.42, GemvLayout::kRepacked, 8},      // down
    {90, "exact/5120x25600", no_overlap({16, 8, 8}), 29.58, GemvLayout::kRepacked, 16},
    {90, "exact/151936x5120", {16, 4, 4}, 105.18, GemvLayout::kRepacked, 8},                // lm_head
    {90, "exact/151936x5120", no_overlap({16, 2, 2}), 141.40, GemvLayout::kRepacked, 16},
    // Qwen3-4B (all 36 layers; its lm_head is the n_large/k_mid bucket's shape):
    {90, "exact/4096x2560", {16, 16, 16}, 3.36, GemvLayout::kRepacked, 8},                  // q
    {90, "exact/4096x2560", {16, 16, 16}, 3.36, GemvLayout::kRepacked, 8, true},  // decode check: -1.57%
    {90, "exact/4096x2560", {16, 16, 16}, 4.64, GemvLayout::kRepacked, 16},
    {90, "exact/4096x2560", {16, 16, 16}, 4.49, GemvLayout::kRepacked, 16, true},
    {90, "exact/1024x2560", {16, 16, 16}, 2.85, GemvLayout::kRepacked, 8},                  // k / v
    {90, "exact/1024x2560", {16, 16, 16}, 2.25, GemvLayout::kRepacked, 8, true},
    {90, "exact/1024x2560", {16, 16, 16}, 3.83, GemvLayout::kRepacked, 16},
    {90, "exact/1024x2560", {16, 16, 16}, 3.39, GemvLayout::kRepacked, 16, true},
    {90, "exact/2560x4096", {16, 16, 16}, 3.78, GemvLayout::kRepacked, 8},                  // o
    {90, "exact/2560x4096", {16, 16, 16}, 3.30, GemvLayout::kRepacked, 8, true},
    {90, "exact/2560x4096", {16, 16, 16}, 5.91, GemvLayout::kRepacked, 16},
    {90, "exact/2560x4096", {16, 16, 16}, 4.84, GemvLayout::kRepacked, 16, true},
    {90, "exact/9728x2560", no_overlap({16, 4, 4}), 6.15, GemvLayout::kRepacked, 8},        // gate / up
    {90, "exact/9728x2560", {16, 16, 4}, 6.02, GemvLayout::kRepacked, 8, true},
    {90, "exact/9728x2560", no_overlap({16, 4, 4}), 8.12, GemvLayout::kRepacked, 16},
    {90, "exact/2560x9728", {16, 16, 16}, 6.51, GemvLayout::kRepacked, 8},                  // down
    {90, "exact/2560x9728", {16, 16, 16}, 6.01, GemvLayout::kRepacked, 8, true},
    {90, "exact/2560x9728", {32, 16, 16}, 9.32, GemvLayout::kRepacked, 16},
    {90, "exact/2560x9728", {16, 16, 16}, 8.73, GemvLayout::kRepacked, 16, true},
    // The fused Qwen shapes (qkv, gate+up), tuned after the entries above went in: `nvfp4 tune
    // --layout repacked --shapes exact/10240x5120 exact/51200x5120 exact/6144x2560
    // exact/19456x2560 --decode-model none --no-verify` on an H200, 2026-12-04 04:46 UTC, commit
    // e5704f2 (bench/results/cuda-2026-12-04-h200-tuning-qwen3-fused-e5704f2.json). In the fused
    // decode replays, this table (B, through NVFP4_CUDA_TUNING) against e5704f2's built-in one
    // (`nvfp4 compare`, same call): Qwen3-32B B = 1 -8.61%, B = 16 -10.45%; Qwen3-4B B = 1
    // -12.70%, B = 16 -1.27%.
    {90, "exact/10240x5120", no_overlap({16, 4, 4}), 9.97, GemvLayout::kRepacked, 8},       // 32B fused qkv
    {90, "exact/10240x5120", no_overlap({16, 4, 4}), 12.71, GemvLayout::kRepacked, 16},
    {90, "exact/51200x5120", no_overlap({16, 1, 1}), 38.06, GemvLayout::kRepacked, 8},      // 32B fused gate+up
    {90, "exact/51200x5120", no_overlap({16, 1, 1}), 49.09, GemvLayout::kRepacked, 16},
    {90, "exact/6144x2560", {16, 8, 8}, 4.59, GemvLayout::kRepacked, 8},                    // 4B fused qkv
    {90, "exact/6144x2560", {16, 8, 8}, 3.99, GemvLayout::kRepacked, 8, true},
    {90, "exact/6144x2560", no_overlap({16, 8, 8}), 6.00, GemvLayout::kRepacked, 16},
    {90, "exact/6144x2560", {16, 8, 8}, 5.84, GemvLayout::kRepacked, 16, true},
    {90, "exact/19456x2560", {32, 4, 4}, 9.82, GemvLayout::kRepacked, 8},                   // 4B fused gate+up
    {90, "exact/19456x2560", {32, 4, 4}, 8.72, GemvLayout::kRepacked, 8, true},
    {90, "exact/19456x2560", no_overlap({16, 4, 2}), 13.51, GemvLayout::kRepacked, 16},
    // Qwen3.5-4B-like's own shapes (the rest are Qwen3-4B's, above): `nvfp4 tune --layout repacked
    // --model-shapes --decode-model qwen3.5-4b-like --decode-layers 32 --verify-batches 1 16` on an
    // H200, 2026-12-04 05:05 UTC, commit dc5a5ed (bench/results/cuda-2026-12-04-h200-tuning-
    // qwen3.5-4b-like-dc5a5ed.json): against dc5a5ed's built-in table in its decode, B = 1
    // -12.72% [-13.30, -12.36], B = 16 -14.57%; fused decode -7.70% (`nvfp4 compare`, same call).
    {90, "exact/9216x2560", no_overlap({16, 4, 4}), 6.08, GemvLayout::kRepacked, 8},        // gate / up
    {90, "exact/9216x2560", {16, 16, 4}, 6.01, GemvLayout::kRepacked, 8, true},  // decode check: -1.99%
    {90, "exact/9216x2560", no_overlap({16, 4, 4}), 8.04, GemvLayout::kRepacked, 16},
    {90, "exact/2560x9216", {16, 16, 16}, 6.53, GemvLayout::kRepacked, 8},                  // down
    {90, "exact/2560x9216", {16, 16, 16}, 6.09, GemvLayout::kRepacked, 8, true},
    {90, "exact/2560x9216", {32, 16, 16}, 9.13, GemvLayout::kRepacked, 16},
    {90, "exact/2560x9216", {16, 16, 16}, 8.45, GemvLayout::kRepacked, 16, true},
    {90, "exact/18432x2560", {32, 4, 4}, 9.72, GemvLayout::kRepacked, 8},                   // fused gate+up
    {90, "exact/18432x2560", {32, 4, 4}, 8.39, GemvLayout::kRepacked, 8, true},
    {90, "exact/18432x2560", no_overlap({16, 2, 2}), 13.24, GemvLayout::kRepacked, 16},
    {90, "exact/248320x2560", {16, 1, 1}, 87.10, GemvLayout::kRepacked, 8},                 // lm_head
    {90, "exact/248320x2560", no_overlap({16, 1, 1}), 117.79, GemvLayout::kRepacked, 16},
};

std::mutex g_mu;
bool g_user_loaded = false;
std::vector<GemvTableEntry> g_user;

// Marked loaded only once it has loaded: a bad NVFP4_CUDA_TUNING file used to fail the first call
// only, and every later call then ran on the built-in table without a word. Now each call fails
// with the file's error.
void load_env_table_locked() {
  if (g_user_loaded) return;
  const char* path = std::getenv("NVFP4_CUDA_TUNING");
  if (path && *path) {
    if (!io::path_exists(path)) fail("cuda tuning", std::string("NVFP4_CUDA_TUNING file '") + path + "' does not exist");
    g_user = gemv_table_from_json(io::read_text_file(path, "cuda tuning"), path);  // a regular file only
  }
  g_user_loaded = true;
}

const GemvTableEntry* find(const std::vector<GemvTableEntry>& t, int cc, const std::string& cls, GemvLayout layout,
                           int m_max, bool early) {
  for (const auto& e : t)
    if (e.cc == cc && e.layout == layout && e.m_max == m_max && e.early == early && e.cls == cls) return &e;
  return nullptr;
}

bool parse_exact(const std::string& cls, std::int64_t* n, std::int64_t* k) {
  if (cls.rfind("exact/", 0) != 0) return false;
  long long a = 0, b = 0;
  char tail = 0;
  if (std::sscanf(cls.c_str() + 6, "%lldx%lld%c", &a, &b, &tail) != 2 || a <= 0 || b <= 0) return false;
  if (gemv_exact_class(a, b) != cls) return false;  // canonical spelling only (no "+1", "01")
  *n = a;
  *k = b;
  return true;
}

// The tile of a table entry: the early-weights launch only with an entry tuned for it.
GemvTile tile_of(const GemvTableEntry& e) {
  GemvTile t = e.tile;
  t.early_ok = e.early;
  return t;
}

}  // namespace

const char* gemv_layout_name(GemvLayout l) { return l == GemvLayout::kRepacked ? "repacked" : "canonical"; }

std::string gemv_exact_class(std::int64_t n, std::int64_t k) {
  return "exact/" + std::to_string(n) + "x" + std::to_string(k);
}

bool gemv_class_known(const std::string& cls) {
  for (const char* b : kBuckets)
    if (cls == b) return true;
  std::int64_t n = 0, k = 0;
  return parse_exact(cls, &n, &k);
}

std::string gemv_class_problem(const std::string& cls) {
  if (!gemv_class_known(cls)) return "unknown class '" + cls + "' (a bucket such as n_small/k_mid, or exact/NxK)";
  std::int64_t n = 0, k = 0;
  if (parse_exact(cls, &n, &k) && k % kBlockSize != 0)
    return "class '" + cls + "': K = " + std::to_string(k) +
           " is not a multiple of 16 (NVFP4 scales one block of 16 values along K)";
  return "";
}

const GemvTableEntry* gemv_find_entry(const std::vector<GemvTableEntry>& table, int cc, std::int64_t n, std::int64_t k,
                                      GemvLayout layout, std::int64_t m, bool early) {
  const int mb = m <= 8 ? 8 : 16;
  // Class first, then launch: an exact class tuned without an early entry (the tuner found that
  // launch no faster there) keeps its ordinary entry rather than a bucket's early one.
  for (const std::string& cls : {gemv_exact_class(n, k), gemv_shape_class(n, k)})
    for (const bool ee : {true, false}) {
      if (ee && !early) continue;
      for (int mm : {mb, 0})
        if (const auto* e = find(table, cc, cls, layout, mm, ee)) return e;
    }
  return nullptr;
}

std::string gemv_shape_class(std::int64_t n, std::int64_t k) {
  const char* nb = n <= 6144 ? "n_small" : (n <= 32768 ? "n_mid" : "n_large");
  const char* kb = k <= 1024 ? "k_small" : (k <= 8192 ? "k_mid" : "k_large");
  return std::string(nb) + "/" + kb;
}

std::vector<std::string> gemv_shape_classes() {
  std::vector<std::string> out(std::begin(kBuckets), std::end(kBuckets));
  for (const auto& e : kExact) out.push_back(gemv_exact_class(e[0], e[1]));
  return out;
}

void gemv_class_representative(const std::string& cls, std::int64_t* n, std::int64_t* k) {
  // LLM-like shapes inside each bucket (hardware.md's table where one fits).
  struct R { const char* c; std::int64_t n, k; };
  static const R reps[] = {{"n_small/k_small", 4096, 512},    {"n_small/k_mid", 4096, 4096},
                           {"n_small/k_large", 4096, 14336},  {"n_mid/k_small", 16384, 1024},
                           {"n_mid/k_mid", 28672, 4096},      {"n_mid/k_large", 16384, 16384},
                           {"n_large/k_small", 131072, 1024}, {"n_large/k_mid", 151936, 2560},
                           {"n_large/k_large", 65536, 12288}};
  for (const auto& r : reps)
    if (cls == r.c) { *n = r.n; *k = r.k; return; }
  if (parse_exact(cls, n, k)) return;
  fail("cuda tuning", "unknown shape class '" + cls + "'");
}

bool gemv_tile_valid(const GemvTile& t) {
  return (t.cols_per_warp == 16 || t.cols_per_warp == 32) && t.warps_per_block >= 1 &&
         t.warps_per_block <= 16 && t.k_split >= 1 && t.warps_per_block % t.k_split == 0;
}

GemvTile gemv_lookup_tile(int cc, std::int64_t n, std::int64_t k, GemvLayout layout, std::int64_t m, bool early) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    load_env_table_locked();
    if (const auto* e = gemv_find_entry(g_user, cc, n, k, layout, m, early)) return tile_of(*e);
  }
  static const std::vector<GemvTableEntry> builtin = gemv_builtin_table();
  if (const auto* e = gemv_find_entry(builtin, cc, n, k, layout, m, early)) return tile_of(*e);
  // Rule of thumb for GPUs without an entry: split K more when there are few columns, so
  // every SM gets enough 16-byte loads in flight. At most 8 warps per block: the canonical M = 1
  // kernel's shared memory (~83 KB at 8 warps of 32 columns) then fits every GPU it runs on, the
  // 99 KB per block of sm_86 / sm_89 included (gemv_nvfp4_sm90.cu).
  GemvTile t;
  t.cols_per_warp = 32;
  const std::int64_t col_tiles = (n + 31) / 32;
  t.k_split = col_tiles >= 1024 ? 1 : (col_tiles >= 256 ? 4 : 8);
  if (t.k_split * 128 > k) t.k_split = 1;
  t.warps_per_block = t.k_split < 4 ? 4 : t.k_split;
  t.early_ok = false;  // never measured
  return t;
}

std::vector<GemvTableEntry> gemv_builtin_table() { return {std::begin(kBuiltin), std::end(kBuiltin)}; }

std::string gemv_table_to_json(const std::vector<GemvTableEntry>& entries, const std::string& comment) {
  nlohmann::json j;
  j["version"] = 1;
  j["comment"] = comment;
  j["entries"] = nlohmann::json::array();
  for (const auto& e : entries) {
    nlohmann::json o = {{"cc", e.cc},
                        {"layout", gemv_layout_name(e.layout)},
                        {"m_max", e.m_max},
                        {"class", e.cls},
                        {"cols_per_warp", e.tile.cols_per_warp},
                        {"warps_per_block", e.tile.warps_per_block},
                        {"k_split", e.tile.k_split},
                        {"overlap", e.tile.overlap_ok},
                        {"us", e.us}};
    if (e.early) o["launch"] = "early";
    j["entries"].push_back(o);
  }
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::vector<GemvTableEntry> gemv_table_from_json(const std::string& text, const std::string& what) {
  const char* op = "cuda tuning";
  nlohmann::json j = io::parse_json(text, op, "'" + what + "'");
  if (!j.is_object() || !j.contains("entries") || !j["entries"].is_array())
    fail(op, "'" + what + "' has no \"entries\" array");
  std::vector<GemvTableEntry> out;
  for (const auto& [key, v] : j.items())
    if (key != "version" && key != "comment" && key != "entries")
      fail(op, "'" + what + "': unknown key \"" + key + "\" (a table has version, comment, entries)");
  if (j.contains("version") && !(j["version"].is_number_integer() && j["version"].get<int>() == 1))
    fail(op, "'" + what + "': version " + io::json_excerpt(j["version"]) + " (this build reads version 1)");
  // Strict fields: nlohmann's get<int>() truncates 32.9 to 32, reads true as 1 and wraps
  // 4294967386 to 90 (then matching sm_90), and unknown keys (a typo such as "lauch") were
  // ignored, silently giving another entry than the one written.
  auto int_of = [](const nlohmann::json& e, const char* key) {
    const auto& v = e.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 1000000)
      throw std::runtime_error(std::string(key) + " " + io::json_excerpt(v) + " is not an integer in 0..1000000");
    return v.get<int>();
  };
  static const char* kKeys[] = {"cc", "class", "cols_per_warp", "warps_per_block", "k_split", "overlap",
                                "us", "m_max", "layout", "launch"};
  int idx = 0;
  for (const auto& e : j["entries"]) {
    GemvTableEntry t;
    try {
      if (!e.is_object()) throw std::runtime_error("is not an object");
      for (const auto& item : e.items()) {  // (not a structured binding: clang < 16 cannot capture one)
        const std::string& key = item.key();
        if (std::find_if(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; }) == std::end(kKeys))
          throw std::runtime_error("unknown key \"" + key + "\"");
      }
      t.cc = int_of(e, "cc");
      t.cls = e.at("class").get<std::string>();
      t.tile.cols_per_warp = int_of(e, "cols_per_warp");
      t.tile.warps_per_block = int_of(e, "warps_per_block");
      t.tile.k_split = int_of(e, "k_split");
      if (e.contains("overlap")) {
        if (!e["overlap"].is_boolean()) throw std::runtime_error("overlap " + io::json_excerpt(e["overlap"]) + " is not true or false");
        t.tile.overlap_ok = e["overlap"].get<bool>();
      }
      if (e.contains("us")) t.us = e["us"].get<double>();
      if (e.contains("m_max")) {
        t.m_max = int_of(e, "m_max");
        if (t.m_max != 0 && t.m_max != 8 && t.m_max != 16)
          throw std::runtime_error("m_max " + std::to_string(t.m_max) + " is not 0, 8 or 16");
      }
      if (e.contains("layout")) {
        const std::string l = e["layout"].get<std::string>();
        if (l == "repacked") t.layout = GemvLayout::kRepacked;
        else if (l != "canonical") throw std::runtime_error("layout '" + l + "' is not canonical|repacked");
      }
      if (e.contains("launch")) {
        const std::string l = e["launch"].get<std::string>();
        if (l != "early" && l != "default") throw std::runtime_error("launch '" + l + "' is not early|default");
        t.early = l == "early";
        if (t.early && (t.layout != GemvLayout::kRepacked || t.m_max == 0))
          throw std::runtime_error("launch \"early\" needs layout repacked and m_max 8 or 16");
      }
    } catch (const std::exception& ex) {
      fail(op, "'" + what + "' entry " + std::to_string(idx) + ": " + ex.what());
    }
    if (const std::string why = gemv_class_problem(t.cls); !why.empty())
      fail(op, "'" + what + "' entry " + std::to_string(idx) + ": " + why);
    if (!gemv_tile_valid(t.tile))
      fail(op, "'" + what + "' entry " + std::to_string(idx) + " (" + t.cls + "): cols_per_warp=" +
                   std::to_string(t.tile.cols_per_warp) + " warps_per_block=" +
                   std::to_string(t.tile.warps_per_block) + " k_split=" + std::to_string(t.tile.k_split) +
                   " is not valid (cols_per_warp 16|32, warps 1..16, k_split divides warps)");
    out.push_back(t);
    ++idx;
  }
  return out;
}

void gemv_set_user_table(const std::vector<GemvTableEntry>& entries) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_user_loaded = true;
  g_user = entries;
}

void gemv_clear_user_table(bool read_env_again) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_user_loaded = !read_env_again;
  g_user.clear();
}

}  // namespace nvfp4::cuda
