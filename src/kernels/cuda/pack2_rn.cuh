// kernels/cuda/pack2_rn.cuh -- one device helper shared by the wgmma GEMM's epilogue
// (gemm_nvfp4_sm90_wgmma.cu) and the dense panel's decode (gemm_nvfp4_cublas.cu), kept apart from
// gemv_sm90_device.cuh so that the panel's file does not instantiate that header's kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace nvfp4::cuda {

// Two fp32 values rounded (RNE) to fp16 or bf16 and packed, `lo` in the low half: what a
// 16-bit output's vector stores write (the wgmma GEMM's epilogue, the dense panel's decode).
template <bool F16>
__device__ __forceinline__ std::uint32_t pack2_rn(float lo, float hi) {
  if constexpr (F16) {
    const __half2 p = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&p);
  } else {
    const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&p);
  }
}

}  // namespace nvfp4::cuda
