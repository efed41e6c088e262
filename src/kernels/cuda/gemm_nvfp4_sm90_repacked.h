// kernels/cuda/gemm_nvfp4_sm90_repacked.h -- internal launch interface of the repacked-weight
// GEMM ("rg") for batched decode and small prefill (more than 16 virtual activation rows) on
// Hopper. Same weights as the repacked GEMV (layout: repack_nvfp4_sm90.h), read once for up to
// 64 virtual rows instead of once per 16. No validation here: the API layer (matmul_cuda.cu)
// validates once and throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "kernels/cuda/gemv_nvfp4_sm90.h"

namespace nvfp4::cuda {

// Block shape of the rg kernel: 8 warps of 16 weight rows each (a block owns 128 rows; every
// warp runs the block's whole K range), and
//   nb:      4 or 8 n8 tiles: a block covers 8 * nb virtual activation rows (one "m-block"); more
//            rows take more m-blocks, each reading the weights again (from L2: neighbouring blocks).
//   k_split: blocks per output tile along K, 1..64; > 1 writes fp32 partials to a workspace that
//            a second kernel sums in split order (deterministic).
// 4-warp blocks and 32 rows per warp were measured too (docs/perf-cuda.md 21) and not kept: they
// were never more than 3% ahead, and mostly behind.
struct RgemmTile {
  int nb = 8;
  int k_split = 1;
};

bool rgemm_tile_valid(const RgemmTile& t);

// The built-in choice for `vrows` virtual rows on a GPU with `sms` SMs (measured on H200:
// docs/perf-cuda.md 21).
RgemmTile rgemm_pick_tile(int sms, std::int64_t n, std::int64_t k, std::int64_t vrows);

// Device workspace the launch needs (0 when k_split == 1): the fp32 partials.
std::size_t rgemm_workspace_bytes(const GemvArgs& a, const RgemmTile& t);

// y = A . dequant(w)^T for a.pieces * a.m_rows virtual rows (any count; GemvArgs as for the
// repacked GEMV: bf16 rows, 16-byte aligned, row stride a multiple of 8; N % 16 == 0,
// K % 128 == 0). `workspace` holds rgemm_workspace_bytes(a, t) bytes (may be null when 0).
// a.pdl: overlapped launch, nothing read before the wait.
cudaError_t gemm_nvfp4_sm90_repacked(const GemvArgs& a, const RgemmTile& t, void* workspace, cudaStream_t stream);
std::string gemm_nvfp4_sm90_repacked_name(const RgemmTile& t);

}  // namespace nvfp4::cuda
