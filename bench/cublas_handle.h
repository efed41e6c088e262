// bench/cublas_handle.h -- internal: the cuBLAS handle that the dense bf16 baselines (the shape
// bench, bench_cuda.cu, and the replay, replay_cuda.cu) own, destroyed on every way out, a thrown
// validation failure included. The stream, events, graphs and device memory have their owners in
// kernels/cuda/device_owned.h, which stays free of cuBLAS.
#pragma once

#include <cublas_v2.h>

#include <memory>
#include <type_traits>

namespace nvfp4::bench {

struct CublasDestroy {
  void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};
using CublasHandle = std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDestroy>;

}  // namespace nvfp4::bench
