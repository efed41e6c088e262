// nvfp4/cuda.h -- the GPU entry points on device pointers. No CUDA headers: the stream is
// passed as void* (a cudaStream_t); nullptr is the legacy default stream.
//
// Built without CUDA (or with no device present) available() is false and every call throws
// nvfp4::Error saying so.
#pragma once

#include "nvfp4/tensor.h"

namespace nvfp4::cuda {

bool compiled();   // this build contains the CUDA kernels
bool available();  // compiled() and a CUDA device is present

// y = x . dequant(w)^T on device pointers, asynchronous on `stream`. Validates the arguments
// (throws nvfp4::Error) and checks launch errors.
void quantized_matmul(const MatrixView& x, const WeightView& w, const MatrixView& y,
                      void* stream = nullptr);

}  // namespace nvfp4::cuda
