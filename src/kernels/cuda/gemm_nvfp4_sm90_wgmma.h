// kernels/cuda/gemm_nvfp4_sm90_wgmma.h -- internal launch interface of the wgmma GEMM ("ws": a
// producer warpgroup and two or three consumer warpgroups) on the canonical checkpoint layout:
// batched decode and prefills (M = 17..1024, and up to 2048 where wgemm_preferred; matmul_cuda.h)
// with bf16 or fp16 activations on Hopper. The weights are read as they are stored (no repack) and decoded in
// registers straight into wgmma's A fragments; the activations are wgmma's B operand in shared
// memory. No validation here: the API layer (matmul_cuda.cu) validates once
// and throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "kernels/cuda/gemv_nvfp4_sm90.h"

namespace nvfp4::cuda {

// Block shape: a block owns 64 weight rows (output columns) per consumer warpgroup and
//   bn:      activation rows per block (the wgmma's N): 64, 128, 160, 192, 224 (two consumers only) or 256;
//   k_split: blocks per output tile along K, 1..64; > 1 writes fp32 partials that a second
//            kernel sums in split order (deterministic), as the repacked GEMM does;
//   consumers: consumer warpgroups, 2 (128 weight rows per block) or, at bn 64 / 128, 3 (192).
struct WgemmTile {
  int bn = 64;
  int k_split = 1;
  int consumers = 2;
};

bool wgemm_tile_valid(const WgemmTile& t);

// What the kernel reads, beyond GemvArgs' rules: K % 64 == 0 (one pipeline stage), packed rows
// 16-byte aligned (K % 32 == 0 and a 16-byte aligned base), a 4-byte aligned scale base, and N
// within the grid's y dimension (65535 blocks of 128 rows).
bool wgemm_supported(const std::uint8_t* packed, const std::uint8_t* scales, std::int64_t n, std::int64_t k);

// The built-in choice for M activation rows on a GPU with `sms` SMs.
WgemmTile wgemm_pick_tile(int sms, std::int64_t n, std::int64_t k, std::int64_t m);

// Whether the built-in route takes this GEMM over the dense panel + cuBLAS at 1025..2048 rows
// (up to 1024 it always does): where the built-in tile's grid fills at least 90% of its last wave
// and N >= 4096. Why: at 2048 rows the GEMM wins by 3-4% where its grid fills 97% of its waves
// (14336 x 4096, 4096 x 4096, 4096 x 14336, 6144 x 4096); Llama-3-8B prefill P = 1536, whose
// grids fill 73-85%, ran 4.3% slower on it than on the panel, and at 2048 rows a rotation of
// mostly N = 1024 (k / v) calls 7% slower (H200, 2026-12-03, docs/perf-cuda.md 55). Since the
// bn 160 / 192 / 224 tiles (docs/perf-cuda.md 57, 58): at 1536 rows bn 192 / 224 fill 97-99% and
// beat the panel; bn 160 is never taken here (at 1280 rows it lost to the panel).
bool wgemm_preferred(int sms, std::int64_t n, std::int64_t k, std::int64_t m);

// Device workspace the launch needs (0 when k_split == 1): the fp32 partials.
std::size_t wgemm_workspace_bytes(const GemvArgs& a, const WgemmTile& t);

// y = A . dequant(w)^T for a.m_rows bf16 rows, fp16 with a.a_f16 (a.pieces == 1; rows 16-byte aligned, row stride a
// multiple of 8, values past the real K zero), canonical packed/scales as wgemm_supported says.
// `workspace` holds wgemm_workspace_bytes(a, t) bytes (may be null when 0).
cudaError_t gemm_nvfp4_sm90_wgmma(const GemvArgs& a, const WgemmTile& t, void* workspace, cudaStream_t stream);
std::string gemm_nvfp4_sm90_wgmma_name(const WgemmTile& t);

}  // namespace nvfp4::cuda
