// kernels/cuda/gemv_nvfp4_sm90.h -- internal launch interface of the Hopper NVFP4 GEMV.
// Raw pointers, sizes, strides and a stream in; a cudaError_t out. No validation here: the
// API layer (matmul_cuda.cu) validates once and throws.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kernels/cuda/tuning_sm90.h"

namespace nvfp4::cuda {

// The kernel's activation operand "A": up to 48 virtual rows of 16-bit values (bf16 or fp16),
// row stride a_stride elements (a multiple of 8, base 16-byte aligned), k columns, values past
// the real K already zero. A real output row m is the sum of `pieces` virtual rows
// p*m_rows + m (fp32 activations are split exactly into 3 bf16 pieces).
struct GemvArgs {
  const std::uint8_t* packed = nullptr;  // [n, k/2] canonical
  const std::uint8_t* scales = nullptr;  // [n, k/16] E4M3
  float tensor_scale = 1.0f;
  std::int64_t n = 0, k = 0;
  const void* a = nullptr;
  std::int64_t a_stride = 0;
  bool a_f16 = false;   // fp16 operand (else bf16)
  bool f16_codes = false;  // repacked kernels: the weights' codes at fp16 bit positions (needs a_f16)
  int pieces = 1;       // 1 (bf16, fp16) or 3 (fp32 as 3 exact bf16 pieces)
  int m_rows = 1;       // real rows (GEMV launches: pieces * m_rows <= 48, <= 16 when pieces == 1; the repacked GEMM: any)
  void* y = nullptr;
  int y_dtype = 0;      // nvfp4::DType as int
  std::int64_t y_stride = 0;
  // Repacked kernel only: overlapped (programmatic dependent) launch, RepackedMatmulOptions in
  // nvfp4/cuda.h; the kernel waits for the previous kernel before any global read.
  bool pdl = false;
  // With pdl, M <= 8: weights loaded before the wait (RepackedMatmulOptions::weights_read_early).
  bool early_weights = false;
};

// True when the 16-byte weight path applies (K % 32 == 0 and packed 16-byte aligned);
// otherwise the 8-byte path runs (K % 16 == 0, packed 8-byte aligned).
bool gemv_vec16_ok(const GemvArgs& a);

cudaError_t gemv_nvfp4_sm90(const GemvArgs& args, const GemvTile& tile, cudaStream_t stream);

// Name of the kernel variant that gemv_nvfp4_sm90 runs for these arguments (for bench rows).
const char* gemv_nvfp4_sm90_name(const GemvArgs& args, const GemvTile& tile);
// Dynamic shared memory per block that gemv_nvfp4_sm90's launch asks for (up to 196 KB).
std::size_t gemv_nvfp4_sm90_smem_bytes(const GemvArgs& args, const GemvTile& tile);

// Repacked weights (layout: repack_nvfp4_sm90.h): GEMV with packed/scales in the gemv_sm90
// layout (N % 16 == 0, K % 128 == 0, bf16 or fp16 (a_f16) operand rows, pieces * m_rows <= 32 with one row
// tile per warp above 16, 16-byte aligned activation rows), and the device repack
// (canonical -> gemv_sm90).
cudaError_t gemv_nvfp4_sm90_repacked(const GemvArgs& args, const GemvTile& tile, cudaStream_t stream);
const char* gemv_nvfp4_sm90_repacked_name(const GemvArgs& args, const GemvTile& tile);
cudaError_t repack_nvfp4_sm90(const std::uint8_t* packed, const std::uint8_t* scales, std::int64_t n, std::int64_t k,
                              bool f16_codes, std::uint8_t* out_packed, std::uint8_t* out_scales, cudaStream_t stream);

}  // namespace nvfp4::cuda
