// kernels/cuda/matmul_cuda.h -- internal entry points of the CUDA backend beyond nvfp4/cuda.h:
// the same quantized_matmul with an explicit tile (tests, tuner, bench), and device facts.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/gemm_nvfp4_sm90_repacked.h"
#include "kernels/cuda/gemm_nvfp4_sm90_wgmma.h"
#include "kernels/cuda/tuning_sm90.h"
#include "nvfp4/cuda.h"
#include "nvfp4/tensor.h"

namespace nvfp4::cuda {

// As nvfp4::cuda::quantized_matmul, but with the given tile instead of the table's
// (nullptr: the table's). `kernel_name`, when given, receives the variant that ran.
void quantized_matmul_tile(const MatrixView& x, const WeightView& w, const MatrixView& y, void* stream,
                           const GemvTile* tile, std::string* kernel_name = nullptr);

// As quantized_matmul, always through the wgmma GEMM (bf16 or fp16 activations, any M; the shapes
// wgemm_supported accepts), with an explicit block shape (nullptr: wgemm_pick_tile's).
void quantized_matmul_wgemm(const MatrixView& x, const WeightView& w, const MatrixView& y, void* stream,
                            const WgemmTile* tile, std::string* kernel_name = nullptr);

// As quantized_matmul, always through the dense-panel path (decode to bf16/fp16/fp32 + cuBLAS).
void quantized_matmul_panel(const MatrixView& x, const WeightView& w, const MatrixView& y, void* stream);

// As nvfp4::cuda::quantized_matmul_repacked, with an explicit tile (nullptr: the table's).
void quantized_matmul_repacked_tile(const MatrixView& x, const RepackedWeightView& w, const MatrixView& y, void* stream,
                                    const GemvTile* tile, std::string* kernel_name = nullptr,
                                    const RepackedMatmulOptions& options = {});

// As quantized_matmul_repacked, always through the repacked GEMM (any M), with an explicit
// block shape (nullptr: the built-in choice, rgemm_pick_tile).
void quantized_matmul_repacked_rgemm(const MatrixView& x, const RepackedWeightView& w, const MatrixView& y, void* stream,
                                     const RgemmTile* tile, std::string* kernel_name = nullptr,
                                     const RepackedMatmulOptions& options = {});

// The repacked kernels (GEMV and GEMM) read bf16 and fp16 rows (fp16: the fp16 mma since
// 2026-12-02; before, fp16 ran as 2 exact bf16 pieces prepared by a kernel of its own per call:
// Llama-3-8B decode 2.101 ms per token against 1.409 with bf16, docs/perf-cuda.md 48). fp32 rows
// run as 3 exact bf16 pieces (virtual rows).
inline int repacked_pieces(DType t) { return t == DType::kF32 ? 3 : 1; }
// Repacked calls with at least this many virtual rows run the repacked GEMM; fewer run the GEMV
// in launches of 16. Below it the GEMV's second launch holds <= 8 rows (the M <= 8 kernel, near
// the M = 1 time) and wins; H200, 2026-12-01, graph us, GEMM / GEMV launches: bf16 M = 20
// 4096 x 4096 13.07 / 10.60, 14336 x 4096 29.88 / 23.92; M = 24 4096 x 14336 22.94 / 21.99;
// M = 32 4096 x 4096 12.04 / 12.05, 16384^2 77.08 / 92.28; fp32 M = 9 (27 rows) 16384^2 81.25 /
// 94.0 (bench/results/cuda-2026-12-01-h200-rgemm-*.json; docs/perf-cuda.md 21).
constexpr std::int64_t kRgemmMinVirtualRows = 25;
// Except on small weights (N x K <= kRpWideMaxWeights): there 17..32 virtual rows run one GEMV
// launch with four n8 tiles (rp<1,4>), which reads the weights once. It takes 90 registers, so a
// 16-warp block fits once per SM and large weights stream 30-40% slower than on the GEMM; on
// small ones the single launch wins. H200, 2026-12-01, graph us, rp<1,4> / GEMM (or GEMV
// launches of 16 + 8): M = 32 4096 x 4096 9.83 / 12.13, 1024 x 4096 6.42 / 8.11, 6144 x 4096
// 18.04 / 15.92, 14336 x 4096 34.96 / 25.84; M = 24 4096 x 4096 9.00 / 10.06, 16384^2 90.0 /
// 81.7 (bench/results/cuda-2026-12-01-h200-rp-m32-experiment-*.json; docs/perf-cuda.md 30).
// Tile: the table's 9..16-row entry, at 16 rows per warp.
constexpr std::int64_t kRpWideMaxVirtualRows = 32;
constexpr std::int64_t kRpWideMaxWeights = std::int64_t{4096} * 4096;
// Canonical weights, bf16/fp16 rows: from 17 up to kWgemmAllRows rows the wgmma GEMM; up to
// kWgemmMaxRows where wgemm_preferred (gemm_nvfp4_sm90_wgmma.h) says its grid fills the GPU;
// otherwise the dense panel + cuBLAS. The panel decodes every weight to bf16 once per call,
// whatever M; the GEMM decodes each weight once per 256 rows, in registers. H200, 2026-12-01, us,
// GEMM / panel (docs/perf-cuda.md 29, since the GEMM's epilogue goes through shared memory):
// M = 1024 14336 x 4096 219 / 232-236, 28672 x 4096 414 / 457, 4096 x 14336 197 / 226, 6144 x
// 4096 109 / 106. Llama-3-8B prefill with the GEMM at every M against this rule's predecessor
// (panel above 256): P = 512 -23.6%, P = 1024 -3.6%, P = 2048 +2.8% (then).
constexpr std::int64_t kWgemmAllRows = 1024;
constexpr std::int64_t kWgemmMaxRows = 2048;
// RepackedMatmulOptions::weights_read_early is honoured in launches of at most this many virtual
// rows: the M <= 8 kernel (docs/perf-cuda.md 19.2) and, at 16 rows per warp, the M = 9..16 one
// (§33), each where the table has an entry tuned for it.
constexpr std::int64_t kEarlyMaxVirtualRows = 16;

// Compute capability (major*10+minor) of the current device; 0 without one.
int device_cc();

// True when device code listed in `codes` ("sm_90a,sm_80,compute_80": the build's
// NVFP4_CUDA_GENCODE targets) runs on a GPU of compute capability `cc` (matmul_cuda.cu).
bool build_has_code_for(int cc, const std::string& codes);

}  // namespace nvfp4::cuda
