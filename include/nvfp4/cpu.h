// nvfp4/cpu.h -- CPU entry points on host pointers beyond the canonical quantized_matmul (ops.h).
#pragma once

#include <cstdint>

#include "nvfp4/tensor.h"

namespace nvfp4::cpu {

// ---- Pre-split weights for the AVX512-BF16 GEMV (explicit, tested; the canonical path stays) ----
// A kernel-private order of the same N*K/2 packed bytes. The decode GEMV on AVX512-BF16 + VBMI
// reads each 256-k chunk of a weight row (128 bytes) as two 64-byte loads and splits them with two
// vpermt2d into the even and the odd u32 words (one whole 16-code block per lane). When the
// weights are cache resident that kernel is shuffle-port bound, and storing the chunks already
// split removes those two shuffles per chunk and row (the ablation in docs/perf-cpu.md section 7
// predicted -15..-19% of a hot M=1 call on Zen 4). Measured (Zen 4 dev VM, 2026-11-30, bf16 M=1,
// tests/cpu/cpu_paths_bench, canonical vs pre-split in one process, us median, two rounds):
// 1 thread hot N=256 K=14336 99.8 -> 81.3 / 79.1 (-19..-21%); 2 threads hot N=1024 (L3-resident)
// 214 -> 166 / 211 -> 175 (-17..-22%); 2 threads N=4096 K=14336 cold 1127 -> 1093 / 1211 -> 1151
// (-3..-5%, both next to the streaming read) and "hot" (33 MB, more than the 32 MiB L3) 0..-10%,
// noisy. On the Emerald Rapids host (AMX, 2 cores, 2026-11-30 15:43 UTC, same process): M=1 cold
// 1956 -> 1856 us (-5%), hot (L3-resident) 1887 -> 1835 and 1743 -> 1690 us (-3%), i.e. less
// than on Zen 4 there. So it pays where the weights are cache resident; DRAM-streamed decode
// gains 3-5%. Use it wherever the canonical path runs that GEMV: M = 1, and on CPUs without AMX
// bf16 M <= 24, fp16 M <= 16, fp32 M <= 8 (cpu_path_for; docs/perf-cpu.md 9, 39.6). Where the canonical path runs
// the AMX GEMV (M >= 2 on AMX hosts) the two trade places (same run, cold / hot us: M=2 pre-split
// 2892 / 2720 vs AMX 2968 / 4187; M=4 4832 / 4503 vs 4545 / 4433; M=8 7356 / 7102 vs 2884 / 1982).
//
// Layout "gemv_avx512 pre-split", per weight row (row stride K/2 bytes, as canonical): for every
// full 256-k chunk c (canonical bytes p = row + 128c, u32 words w_0..w_31 little-endian), the 16
// even words w_0, w_2, .., w_30 then the 16 odd words w_1, w_3, .., w_31; i.e. repacked byte
// 128c + 4j + b = p[8j + b] and 128c + 64 + 4j + b = p[8j + 4 + b] for j < 16, b < 4 (the first
// and the second half of each 16-code block). The K % 256 tail bytes stay where they are. The
// block scales are not repacked: the kernel reads the canonical [N, K/16] scales.
struct CpuRepackedWeightView {
  const std::uint8_t* packed = nullptr;  // N*K/2 bytes, pre-split layout (repack_for_gemv_cpu)
  const std::uint8_t* scales = nullptr;  // N*K/16 bytes, the canonical scales (E4M3)
  float tensor_scale = 1.0f;             // unchanged (dequant direction)
  std::int64_t n = 0;
  std::int64_t k = 0;                    // multiple of 16
};

// True when this CPU runs the AVX512-BF16 + AVX512-VBMI GEMV that reads the pre-split layout
// (Zen 4, Sapphire Rapids and later); quantized_matmul_repacked throws elsewhere.
bool repack_for_gemv_cpu_supported();

// Host repack, canonical -> pre-split (a byte permutation; runs on every CPU). Any N >= 1,
// K a positive multiple of 16; packed_out receives N*K/2 bytes and must not overlap the canonical
// packed bytes or scales. Bad arguments throw nvfp4::Error naming the operation and the shape.
void repack_for_gemv_cpu(const WeightView& canonical, std::uint8_t* packed_out);

// y = x . dequant(w)^T on pre-split weights, any M (the GEMV runs activation rows in passes of
// <= 8; above the bounds named above the canonical quantized_matmul takes a GEMM instead, and on
// AMX hosts an AMX GEMV from M = 2: see the measurements above).
// Activations bf16, fp16 or fp32 (x.cols in (K-16, K]); output in the activation dtype. Same
// validation (validate_matmul), tolerance and exactness as the canonical CPU path: the results
// are bit-identical to the canonical AVX512-BF16 GEMV on the same weights (same summation order;
// one-hot rows recover dequantize_ref exactly). Activations it cannot split exactly into bf16
// pieces (NaN/Inf, fp32 outside [2^-102, 2^120)) and non-finite outputs take the canonical
// fallbacks on a temporary canonical copy of the weights, as quantized_matmul does. Throws
// nvfp4::Error when !repack_for_gemv_cpu_supported(). The output must not overlap x or w.
void quantized_matmul_repacked(const MatrixView& x, const CpuRepackedWeightView& w, const MatrixView& y);

}  // namespace nvfp4::cpu
