// kernels/cuda/gemm_nvfp4_cublas.cu -- see gemm_nvfp4_cublas.h for the design and its arithmetic.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/cuda/gemm_nvfp4_cublas.h"
#include "kernels/cuda/pack2_rn.cuh"
#include "kernels/cuda/scratch.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"

namespace nvfp4::cuda {
namespace {

constexpr const char* kOp = "cuda::quantized_matmul (gemm)";
void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) fail(kOp, what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
void check(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(kOp, what + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

// One cuBLAS handle per device, created on first use (handles are costly), and a lock that the
// caller holds for as long as it uses the handle. The handle's stream and workspace are state
// shared by every thread that uses it (cuBLAS guide, "Thread Safety"): without the lock, thread
// A's GEMM could be enqueued on thread B's stream, ahead of the panel A's own stream is writing.
struct LockedHandle {
  cublasHandle_t h;
  std::unique_lock<std::mutex> lock;
};
LockedHandle handle_for_current_device() {
  static std::mutex mu[64];
  static cublasHandle_t handles[64] = {};
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev < 0 || dev >= 64) fail(kOp, "device index " + std::to_string(dev) + " out of range");
  std::unique_lock<std::mutex> lock(mu[dev]);
  if (!handles[dev]) {
    // cublasCreate allocates device memory, which CUDA refuses while a stream is being captured in
    // the global mode (CUDA programming guide, "Prohibited and unhandled operations"). The first
    // panel call of a process can come inside a capture: a Llama-3-8B prefill graph whose first
    // linears ran the wgmma GEMM failed with "cublasCreate: cuBLAS status 1" (H200, 2026-12-03).
    // This thread's relaxed mode allows the allocation, which is not part of the graph.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    check(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode");
    const cublasStatus_t created = cublasCreate(&handles[dev]);
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (created != CUBLAS_STATUS_SUCCESS) handles[dev] = nullptr;
    check(created, "cublasCreate");
  }
  return {handles[dev], std::move(lock)};
}

// cuBLAS's workspace for one call, stream-ordered on the call's stream. With its own workspace per
// call the GEMM's bits do not depend on what runs on other streams: cuBLAS otherwise picks
// workspace (and with it possibly the algorithm) per concurrently active stream, and is bitwise
// reproducible only with one active stream (cuBLAS guide, "Results reproducibility"). 32 MiB is
// the guide's recommended size for Hopper (cublasSetWorkspace).
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;

// Stream-ordered scratch, given back on every exit (an error thrown mid-call included).
struct Scratch {
  void* p = nullptr;
  cudaStream_t stream;
  Scratch(std::size_t bytes, cudaStream_t s, const char* what) : stream(s) {
    check(scratch_alloc(&p, bytes, s), std::string("scratch_alloc(") + what + ")");
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { scratch_free(p, stream); }
};

// E2M1 code -> fp32 value, branch-free: the 3 magnitude bits placed at fp32 bits [24:22] read as
// code_value * 2^-126 (0.5 becomes the subnormal 2^-127; nvcc does not flush without -ftz), and
// the multiply by 2^126 is exact. 3 integer ops + 1 FMUL instead of a switch.
__device__ __forceinline__ float e2m1_value(std::uint32_t nib) {
  return __uint_as_float(((nib & 7u) << 22) | ((nib & 8u) << 28)) * 0x1p126f;
}

// Each thread decodes 8 packed bytes (16 codes, one scale block) of one row into 16 outputs:
// e2m1 * scale in fp32 (exact: <= 6 significant bits), stored as fp32 or packed to 16-bit with
// the hardware round-to-nearest conversion (exact too). Measured on H200 (2026-11-30) the first
// version (switch decode + software rounding) cost ~118 us at 4096 x 14336, ~3x its bytes.
template <int kDtype>
__global__ void dequantize_rows_kernel(const std::uint8_t* __restrict__ packed, const std::uint8_t* __restrict__ scales,
                                       std::int64_t n, std::int64_t k, void* __restrict__ out, std::int64_t ld) {
  const std::int64_t kb = k / kBlockSize;
  const std::int64_t total = n * kb;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / kb, b = i % kb;
    // 8 bytes = one 16-element block; the row stride (k/2 bytes) is a multiple of 8.
    const uint2 bytes = __ldg(reinterpret_cast<const uint2*>(packed + row * (k / 2) + b * 8));
    const float s = e4m3_to_float(static_cast<std::uint8_t>(__ldg(scales + i) & 0x7F));
    float v[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) v[j] = e2m1_value(((j < 8 ? bytes.x : bytes.y) >> (4 * (j & 7))) & 0xF) * s;
    const std::int64_t base = row * ld + b * kBlockSize;
    if (kDtype == static_cast<int>(DType::kF32)) {
      float4* o = reinterpret_cast<float4*>(static_cast<float*>(out) + base);
#pragma unroll
      for (int q = 0; q < 4; ++q) o[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
    } else {
      std::uint32_t h[8];
#pragma unroll
      for (int q = 0; q < 8; ++q) h[q] = pack2_rn<kDtype == static_cast<int>(DType::kF16)>(v[2 * q], v[2 * q + 1]);
      uint4* o = reinterpret_cast<uint4*>(static_cast<std::uint16_t*>(out) + base);
      o[0] = make_uint4(h[0], h[1], h[2], h[3]);
      o[1] = make_uint4(h[4], h[5], h[6], h[7]);
    }
  }
}

int grid_for(std::int64_t items) {
  return static_cast<int>(std::min<std::int64_t>((items + 255) / 256, 132 * 16));
}

}  // namespace

void dequantize_rows_device(const WeightView& w, DType out_dtype, void* out, std::int64_t ld, void* stream) {
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  const std::int64_t items = w.n * (w.k / kBlockSize);
  if (items == 0) return;
  switch (out_dtype) {
    case DType::kF32:
      dequantize_rows_kernel<static_cast<int>(DType::kF32)><<<grid_for(items), 256, 0, st>>>(w.packed, w.scales, w.n, w.k, out, ld);
      break;
    case DType::kF16:
      dequantize_rows_kernel<static_cast<int>(DType::kF16)><<<grid_for(items), 256, 0, st>>>(w.packed, w.scales, w.n, w.k, out, ld);
      break;
    default:
      dequantize_rows_kernel<static_cast<int>(DType::kBF16)><<<grid_for(items), 256, 0, st>>>(w.packed, w.scales, w.n, w.k, out, ld);
      break;
  }
  check(cudaGetLastError(), "dequantize launch");
}

void gemm_nvfp4_dequant_cublas(const MatrixView& x, const WeightView& w, const MatrixView& y, void* stream,
                               std::int64_t panel_bytes) {
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  const int es = dtype_size(x.dtype);
  // The dense panel has the activations' K (x.cols may be the unpadded K' < w.k: the padded
  // columns' weights simply are not read). Row stride w.k keeps every decoded block aligned.
  // Panels of whole multiples of 64 rows, so that every panel's output columns (y + n0) keep the
  // alignment of y: measured on H200 (docs/perf-cuda.md 17.3), panels of an odd row count (e.g.
  // 48 MB at K = 14336: 1755 rows) made the Llama-3-8B prefill 2.2x slower.
  const std::int64_t panel_rows =
      std::min<std::int64_t>(w.n, std::max<std::int64_t>(64, panel_bytes / (w.k * es) / 64 * 64));
  const Scratch panel_buf(static_cast<std::size_t>(panel_rows * w.k * es), st, "panel");
  const Scratch workspace_buf(kCublasWorkspaceBytes, st, "cuBLAS workspace");
  void* const panel = panel_buf.p;
  LockedHandle lh = handle_for_current_device();
  const cublasHandle_t h = lh.h;
  check(cublasSetStream(h, st), "cublasSetStream");  // resets the workspace: set it after
  check(cublasSetWorkspace(h, workspace_buf.p, kCublasWorkspaceBytes), "cublasSetWorkspace");
  const float alpha = w.tensor_scale, beta = 0.0f;
  cudaDataType_t t = x.dtype == DType::kF32 ? CUDA_R_32F : x.dtype == DType::kF16 ? CUDA_R_16F : CUDA_R_16BF;
  // fp32 activations: plain fp32 GEMM (no TF32: the reference accumulates exact fp32 products).
  const cublasComputeType_t ct = x.dtype == DType::kF32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  for (std::int64_t n0 = 0; n0 < w.n; n0 += panel_rows) {
    const std::int64_t nr = std::min(panel_rows, w.n - n0);
    WeightView part = w;
    part.packed = w.packed + n0 * (w.k / 2);
    part.scales = w.scales + n0 * (w.k / kBlockSize);
    part.n = nr;
    dequantize_rows_device(part, x.dtype, panel, w.k, stream);
    // Column-major view: Y^T[nr, M] = Wpanel[nr, K'] . X^T[K', M]; Wpanel row-major [nr, w.k] is
    // column-major [w.k, nr] (op T), X row-major [M, ldx] is column-major [K', M] (op N).
    check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(nr), static_cast<int>(x.rows),
                       static_cast<int>(x.cols), &alpha, panel, t, static_cast<int>(w.k), x.data, t,
                       static_cast<int>(x.stride), &beta, static_cast<char*>(y.data) + n0 * es, t,
                       static_cast<int>(y.stride), ct, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  }
}

}  // namespace nvfp4::cuda
