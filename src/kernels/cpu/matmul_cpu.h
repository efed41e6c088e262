// kernels/cpu/matmul_cpu.h -- internal entry of the CPU backend (SIMD + threads).
// Arguments arrive validated (validate_matmul); host pointers.
#pragma once

#include "nvfp4/tensor.h"

namespace nvfp4::cpu {

// y = x . dequant(w)^T for any M; picks GEMV (small M) or GEMM (large M) and the best ISA
// compiled in and supported by this CPU.
void quantized_matmul(const MatrixView& x, const WeightView& w, const MatrixView& y);

}  // namespace nvfp4::cpu
