// kernels/cpu/hwy_register_block.h -- the Highway kernels' register blocks as named variables.
// SVE vectors are sizeless types, which cannot be array elements (nor struct members), so a
// register block of up to 8 vectors is written as 8 named variables, each use expanded by
// NVFP4_X8(X) -> X(0) ... X(7) and guarded with `if constexpr (i < count)` (gemm_nvfp4_hwy.cpp,
// gemv_nvfp4_hwy.cpp). On the fixed-width targets this compiles to what arrays did.
#pragma once

#define NVFP4_X8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
