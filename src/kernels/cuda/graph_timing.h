// kernels/cuda/graph_timing.h -- one way to time kernels without launch gaps, shared by the
// autotuner and the benchmark: capture `calls` back-to-back launches into a CUDA graph, replay it
// `reps` times between two events, report the median time per launch. Host code (no kernels).
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace nvfp4::cuda {

// launch(i), i = 0..calls-1, must enqueue its work on `stream` (which must not be the legacy
// default stream: capture needs a real stream). Throws nvfp4::Error on any CUDA failure.
double graph_us_per_call(cudaStream_t stream, int calls, int reps, const std::function<void(int)>& launch);

}  // namespace nvfp4::cuda
