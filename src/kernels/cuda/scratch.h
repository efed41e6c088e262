// kernels/cuda/scratch.h -- stream-ordered scratch memory for the CUDA API layer (activation
// pieces, prefill panels).
//
// Why not plain cudaMallocAsync: the device's default pool has a release threshold of 0, so
// memory freed with cudaFreeAsync goes back to the driver at the next synchronisation and the
// next call maps it again -- a synced fp16/fp32 GEMV call cost ~120 us against ~48 us for bf16
// rows read in place (docs/perf-cuda.md 10.1). nvfp4 therefore allocates from its own pool per
// device that keeps what it has (release threshold = max; it holds the largest scratch used so
// far). Inside a stream capture the allocation goes through cudaMallocAsync (a graph memory node,
// owned by the graph), as before.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace nvfp4::cuda {

cudaError_t scratch_alloc(void** p, std::size_t bytes, cudaStream_t stream);
cudaError_t scratch_free(void* p, cudaStream_t stream);

}  // namespace nvfp4::cuda
