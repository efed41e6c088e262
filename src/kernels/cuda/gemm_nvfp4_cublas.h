// kernels/cuda/gemm_nvfp4_cublas.h -- prefill (large M) on Hopper without FP4 tensor cores:
// materialize the NVFP4 weight to a dense 16-bit (or fp32) panel in a stream-ordered
// workspace, then one cuBLAS GEMM per panel with alpha = tensor_scale.
//
// Why this design: at M >= ~64 the GEMM is compute-bound (2048 x 4096 x 14336 is 240 GFLOP, 304 us
// at cuBLAS's ~790 TFLOP/s on H200), while decoding the panel costs one read of the packed weight
// plus one write + read of the dense panel (2.56 B/weight over 4.45 TB/s: ~34 us at that shape).
// So the dequantize-then-GEMM path runs near the dense bf16 rate (the seeds' "materialize to dense"
// oracle, made fast) and is bit-exact in its dequantization: e2m1 * scale is exact in bf16/fp16.
// The tensor scale is cuBLAS's alpha: applied once to the fp32 accumulator, as the seeds do.
// Panels are bounded (kGemmPanelBytes) so lm_head (151936 x 2560) does not need a 780 MB workspace.
#pragma once

#include <cstdint>

#include "nvfp4/tensor.h"

namespace nvfp4::cuda {

// Largest dense panel decoded at once: big enough that each GEMM fills the GPU (>= 4096 rows of
// a 4096-wide K at bf16), small enough to bound the workspace. Measured on H200 (docs/perf-cuda.md
// 17.3): panels small enough to stay in the 60 MiB L2 between decode and GEMM (16-48 MB) made the
// Llama-3-8B prefill 1-6% slower, not faster.
inline constexpr std::int64_t kGemmPanelBytes = 256ll << 20;

// y = x . dequant(w)^T on device pointers, any M >= 1 (run above kWgemmMaxRows, or for fp32 rows, or
// shapes the wgmma GEMM does not take: matmul_cuda.cu). Arguments arrive
// validated. Throws nvfp4::Error on CUDA/cuBLAS failure. panel_bytes bounds the dense panel
// (rounded down to whole multiples of 64 weight rows, at least 64); tests lower it to run the
// several-panel path on small weights.
void gemm_nvfp4_dequant_cublas(const MatrixView& x, const WeightView& w, const MatrixView& y, void* stream,
                               std::int64_t panel_bytes = kGemmPanelBytes);

// Decode rows [0, w.n) of w (device pointers) to dense dtype `out_dtype` (f32/f16/bf16) WITHOUT
// the tensor scale: out[n * ld + k] = e2m1 * |e4m3|. Exact for every dtype. Asynchronous.
void dequantize_rows_device(const WeightView& w, DType out_dtype, void* out, std::int64_t ld, void* stream);

}  // namespace nvfp4::cuda
