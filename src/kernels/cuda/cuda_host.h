// kernels/cuda/cuda_host.h -- internal: the Backend::kCuda path for *host* tensors (copies
// x and w to the device, runs nvfp4::cuda::quantized_matmul, copies y back). Throws
// nvfp4::Error when CUDA is not compiled in or no device is present.
#pragma once

#include "nvfp4/tensor.h"

namespace nvfp4::cuda {

struct GemvTile;

// `tile` (tests): run that GEMV tile, as quantized_matmul_tile does, instead of the dispatch's choice.
void quantized_matmul_host(const MatrixView& x, const WeightView& w, const MatrixView& y,
                           const GemvTile* tile = nullptr);

}  // namespace nvfp4::cuda
