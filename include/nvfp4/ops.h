// nvfp4/ops.h -- the operations, named as MLX names them: quantize (quantize.h), dequantize,
// quantized_matmul. Host tensors in, host tensors out; a Backend picks the implementation.
//
//   y[M, N] = x[M, K] . dequant(W)^T,   W canonical NVFP4 [N, K]
// Leading batch dims of x are flattened into M. fp32 accumulation; the tensor scale is applied
// once to the fp32 accumulator; the output has the activation's dtype. x may have K equal to
// W.k or to any K' in (W.k - 16, W.k] (the quantizer's zero padding; the missing activations
// count as zero).
// NaN/Inf activations propagate as IEEE arithmetic says (as in any BLAS): checking every call
// would cost a pass over x on the hot path. Non-finite *weights* cannot occur: the quantizers
// reject them, and checkpoints with NaN scale bytes or non-finite tensor scales are rejected when
// loaded; a non-finite tensor scale passed here is an error.
#pragma once

#include <string>

#include "nvfp4/tensor.h"

namespace nvfp4 {

enum class Backend : std::uint8_t {
  kAuto,       // best available on the host: kCpu when built, else kReference
  kReference,  // the scalar oracle (never optimised)
  kCpu,        // SIMD + threads (src/kernels/cpu)
  kCuda,       // GPU (src/kernels/cuda): host tensors are copied to the device and back
};

const char* backend_name(Backend b);
Backend backend_from_name(const std::string& name);
bool backend_available(Backend b);  // kCuda: built with CUDA and a device is present

// The oracle: materialize the dense weight, w = e2m1 * float(e4m3) * tensor_scale, computed in
// fp32 in that order and rounded once to `out` (RNE). Shape [N, K].
Tensor dequantize(const QuantizedWeight& w, DType out = DType::kF32);
void dequantize_ref(const WeightView& w, const MatrixView& out);

// Reference matmul on views (host pointers). Validates like the public entry.
void quantized_matmul_ref(const MatrixView& x, const WeightView& w, const MatrixView& y);

// The matmul on the chosen backend. Any host thread may call it, several at once: on the CPU
// their parallel regions take turns on one thread pool, and each call gives the bits it gives
// alone (tests/cpu/test_threads_cpu.cpp).
Tensor quantized_matmul(const Tensor& x, const QuantizedWeight& w, Backend backend = Backend::kAuto);
void quantized_matmul(const MatrixView& x, const WeightView& w, const MatrixView& y,
                      Backend backend = Backend::kAuto);

// Shared argument validation (null pointers, strides, shapes, K % 16, dtype agreement, an
// output that overlaps the activations or the weights: no in-place matmul); throws
// Error("[op] ...") naming every parameter. Used by every backend's entry point.
void validate_matmul(const char* op, const MatrixView& x, const WeightView& w, const MatrixView& y);

}  // namespace nvfp4
