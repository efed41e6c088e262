// kernels/cuda/scratch.cpp -- see scratch.h.
#include "kernels/cuda/scratch.h"

#include <cstdint>
#include <mutex>
#include <string>

#include "nvfp4/cuda.h"
#include "nvfp4/error.h"

namespace nvfp4::cuda {
namespace {

constexpr int kMaxDevices = 64;

// The current device's pool; created on first use unless `create` is false (then *out may be
// null: nothing was ever allocated on this device).
cudaError_t device_pool(cudaMemPool_t* out, bool create = true) {
  static std::mutex mu;
  static cudaMemPool_t pools[kMaxDevices] = {};
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev < 0 || dev >= kMaxDevices) return cudaErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(mu);
  if (!pools[dev] && create) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool;
    e = cudaMemPoolCreate(&pool, &props);
    if (e != cudaSuccess) return e;
    std::uint64_t keep = UINT64_MAX;
    e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    if (e != cudaSuccess) {
      cudaMemPoolDestroy(pool);
      return e;
    }
    pools[dev] = pool;
  }
  *out = pools[dev];
  return cudaSuccess;
}

}  // namespace

cudaError_t scratch_alloc(void** p, std::size_t bytes, cudaStream_t stream) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(stream, &cs);
  if (e != cudaSuccess) return e;
  if (cs != cudaStreamCaptureStatusNone) return cudaMallocAsync(p, bytes, stream);
  cudaMemPool_t pool;
  e = device_pool(&pool);
  if (e != cudaSuccess) return e;
  return cudaMallocFromPoolAsync(p, bytes, pool, stream);
}

cudaError_t scratch_free(void* p, cudaStream_t stream) { return cudaFreeAsync(p, stream); }

std::size_t scratch_bytes() {
  cudaMemPool_t pool = nullptr;
  if (device_pool(&pool, false) != cudaSuccess || !pool) {
    cudaGetLastError();  // no device: nothing held
    return 0;
  }
  std::uint64_t held = 0;
  if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &held) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<std::size_t>(held);
}

void release_scratch() {
  cudaMemPool_t pool = nullptr;
  const cudaError_t e = device_pool(&pool, false);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  // Memory of frees still pending on a stream, and of calls in flight, stays in the pool.
  if (!pool) return;
  const cudaError_t t = cudaMemPoolTrimTo(pool, 0);
  if (t != cudaSuccess) fail("cuda::release_scratch", std::string("cudaMemPoolTrimTo: ") + cudaGetErrorString(t));
}

}  // namespace nvfp4::cuda
