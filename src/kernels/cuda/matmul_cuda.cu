// kernels/cuda/matmul_cuda.cu -- the CUDA backend's API layer: validate once, pick the tile from
// the tuning table, prepare activations when the kernel cannot read them directly, launch,
// turn CUDA errors into nvfp4::Error. Also the host-tensor path (copies in and out).
//
// Activation paths:
//   direct   bf16/fp16, x.cols == K, 16-byte aligned base and row stride: the GEMV reads x itself.
//   prepared anything else (fp32, odd strides, unaligned, K' < K padding): one small kernel
//            writes 16-bit rows (fp32 -> 3 exact bf16 pieces, zero padding past K') into a
//            stream-ordered workspace (scratch.h: a retained pool; cudaMallocAsync when captured).
// M = 17..1024 with bf16/fp16 rows: the wgmma GEMM (gemm_nvfp4_sm90_wgmma.cu; kWgemmAllRows), and
// up to 2048 where its grid fills the GPU (wgemm_preferred); other M (prefill) and fp32 rows:
// gemm_nvfp4_cublas.cu (decode to a dense panel + cuBLAS, near the dense rate: see its header).
// With an explicit tile (tests, tuner) the GEMV runs once per chunk of 16 rows instead, so every
// tile can be checked at any M. Repacked weights from 25 virtual rows (kRgemmMinVirtualRows): the
// repacked GEMM (gemm_nvfp4_sm90_repacked.cu), except 17..32 on small weights (kRpWideMaxWeights):
// one GEMV launch of four n8 tiles.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <mutex>
#include <string>

#include "kernels/cuda/cuda_host.h"
#include "kernels/cuda/device_owned.h"
#include "kernels/cuda/gemm_nvfp4_cublas.h"
#include "kernels/cuda/gemm_nvfp4_sm90_repacked.h"
#include "kernels/cuda/gemm_nvfp4_sm90_wgmma.h"
#include "kernels/cuda/gemv_nvfp4_sm90.h"
#include "kernels/cuda/repack_nvfp4_sm90.h"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/matmul_cuda.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

namespace nvfp4::cuda {
namespace {

constexpr int kMaxRows = 16;  // rows per GEMV launch (one m16 mma tile)

void check(cudaError_t e, const char* op, const std::string& what) {
  if (e == cudaSuccess) return;
  // Clear the thread's last error before throwing: the kernel launches read cudaGetLastError(),
  // so an error reported here (a workspace allocation out of memory, caught by the caller) would
  // otherwise fail the next call, whose own launch succeeded. A sticky error stays (CUDA keeps it).
  (void)cudaGetLastError();
  fail(op, what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

std::string shape_of(const MatrixView& x, const WeightView& w) {
  return "M=" + std::to_string(x.rows) + " N=" + std::to_string(w.n) + " K=" + std::to_string(w.k) +
         " dtype=" + dtype_name(x.dtype);
}

// Converts rows [0, m_rows) of x into `pieces` 16-bit virtual rows each, [pieces*m_rows][k],
// zero past x's columns. fp32 (3 pieces): x = hi + mid + lo exactly (each a bf16 rounding of
// the rest: 8 + 8 + 8 significant bits cover fp32's 24). bf16 and fp16 (1 piece): copied in their
// own format (fp16: the kernels' fp16 mma). (Until 2026-12-02 the repacked kernels took fp16 as
// 2 pieces, hi + mid, through the same arithmetic; docs/perf-cuda.md 48.)
__global__ void prep_activations(const void* x, int dtype, std::int64_t x_stride, std::int64_t x_cols,
                                 int m_rows, int pieces, std::int64_t k, std::uint16_t* out) {
  const std::int64_t total = static_cast<std::int64_t>(pieces) * m_rows * k;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t vr = i / k, kk = i % k;
    const int pc = static_cast<int>(vr / m_rows), m = static_cast<int>(vr % m_rows);
    const DType t = static_cast<DType>(dtype);
    const float v = kk < x_cols ? load_as_f32(x, t, m * x_stride + kk) : 0.0f;
    std::uint16_t o;
    if (t == DType::kF16 && pieces == 1) {
      o = f32_to_f16(v);  // exact: v came from fp16
    } else if (t == DType::kBF16 || pieces == 1) {
      o = f32_to_bf16(v);
    } else {
      const std::uint16_t hi = f32_to_bf16(v);
      const float fhi = bf16_to_f32(hi);
      if (pc == 0) {
        o = hi;
      } else if (!isfinite(fhi)) {
        o = 0;  // Inf/NaN ride in hi alone (Inf - Inf would make NaN)
      } else {
        const float r1 = v - fhi;  // exact (Sterbenz / same binade)
        const std::uint16_t mid = f32_to_bf16(r1);
        o = pc == 1 ? mid : f32_to_bf16(r1 - bf16_to_f32(mid));
      }
    }
    out[i] = o;
  }
}

struct DeviceInfo {
  int cc = 0;
  int sms = 0;
  int smem_optin = 0;  // shared memory one block may opt in to (H200 227 KB, A100 163 KB, Ada 99 KB)
  bool has_code = false;  // build_has_code_for(cc, this build's targets), worked out once
};

}  // namespace

// True when this build holds device code a GPU of compute capability `cc` runs (CUDA
// programming guide, "binary compatibility"): SASS for sm_XY runs on X.Z with Z >= Y; PTX for
// compute_XY is compiled by the driver for any cc >= XY; arch-specific code (sm_XYa, compute_XYa)
// runs on X.Y only. `codes` is the
// build's list, e.g. "sm_90a,sm_80,compute_80" (CMakeLists.txt, NVFP4_CUDA_CODES). Read from the
// build rather than probed through the driver, which would load a module on first use (perhaps
// inside a caller's stream capture).
bool build_has_code_for(int cc, const std::string& codes) {
  std::size_t at = 0;
  while (at <= codes.size()) {
    const std::size_t end = std::min(codes.find(',', at), codes.size());
    const std::string c = codes.substr(at, end - at);
    at = end + 1;
    const bool sass = c.rfind("sm_", 0) == 0, ptx = c.rfind("compute_", 0) == 0;
    if (!sass && !ptx) continue;
    const std::string num = c.substr(sass ? 3 : 8);
    if (num.size() < 2) continue;
    const int v = std::atoi(num.c_str());
    const bool arch_specific = num.back() == 'a';
    if (arch_specific ? cc == v : (ptx ? cc >= v : (cc / 10 == v / 10 && cc >= v))) return true;
  }
  return false;
}

namespace {

// Per device, filled on first use. Guarded: engines call the API from several host threads (one
// per GPU or per request stream), and unsynchronised writes of the cache would be a data race.
DeviceInfo device_info() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return {};
  static std::mutex mu;
  static DeviceInfo cache[64];
  if (dev < 0 || dev >= 64) return {};
  std::lock_guard<std::mutex> lock(mu);
  if (cache[dev].cc == 0) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return {};
    cache[dev].sms = prop.multiProcessorCount;
    cache[dev].smem_optin = static_cast<int>(prop.sharedMemPerBlockOptin);
    cache[dev].cc = prop.major * 10 + prop.minor;
    cache[dev].has_code = build_has_code_for(cache[dev].cc, NVFP4_CUDA_CODES);
  }
  return cache[dev];
}

// Device memory of the current device (or managed memory). Memory of another GPU is refused by
// name: the kernels would read it over the peer path at best, and without peer access the launch
// faults and takes the whole CUDA context down with it.
struct NamedPointer {
  const void* p;
  const char* name;
};
void require_device_pointers(const char* op, const std::string& shape, std::initializer_list<NamedPointer> ptrs) {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) cudaGetLastError();  // then only the checks below
  for (const NamedPointer& n : ptrs) {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, n.p) != cudaSuccess) {
      cudaGetLastError();  // clear
      fail(op, std::string(n.name) + " pointer is not a CUDA pointer (" + shape + ")");
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
      fail(op, std::string(n.name) + " must be device memory (got a host pointer; use the host API) (" + shape + ")");
    if (attr.type == cudaMemoryTypeDevice && dev >= 0 && attr.device != dev)
      fail(op, std::string(n.name) + " is memory of device " + std::to_string(attr.device) +
                   " but the current device is " + std::to_string(dev) + " (call cudaSetDevice first) (" + shape + ")");
  }
}

// The four pointers of a matmul call.
void require_device_pointers(const char* op, const std::string& shape, const void* packed, const void* scales,
                             const void* x, const void* y) {
  require_device_pointers(op, shape, {{packed, "packed"}, {scales, "scales"}, {x, "activation"}, {y, "output"}});
}

// Refuses a call when the current device cannot run the kernels, saying why.
void require_available(const char* op, const std::string& shape) {
  if (!available()) fail(op, unavailable_reason() + " (" + shape + ")");
}

void require_valid_tile(const char* op, const GemvTile* t) {
  if (t && !gemv_tile_valid(*t))
    fail(op, "invalid tile cols_per_warp=" + std::to_string(t->cols_per_warp) + " warps_per_block=" +
                 std::to_string(t->warps_per_block) + " k_split=" + std::to_string(t->k_split));
}

// The weight fields of the kernels' arguments.
GemvArgs weight_args(const WeightView& w) {
  GemvArgs a;
  a.packed = w.packed;
  a.scales = w.scales;
  a.tensor_scale = w.tensor_scale;
  a.n = w.n;
  a.k = w.k;
  return a;
}

// True when the kernels can read x's rows in place as 16-bit operand rows: all K columns,
// 16-byte aligned base and row pitch (the 16-byte activation loads).
bool rows_readable_in_place(const MatrixView& x, std::int64_t k) {
  return x.cols == k && reinterpret_cast<std::uintptr_t>(x.data) % 16 == 0 &&
         (x.rows == 1 || (x.stride * dtype_size(x.dtype)) % 16 == 0);
}

// One kernel launch per chunk of `chunk` real rows of x. `a` comes with the weight fields set;
// each launch gets its output rows and its activation rows as the kernel reads them: x itself
// when `direct`, else prep_activations' `pieces` 16-bit rows per real row in a stream-ordered
// workspace (sized for the largest chunk, freed after the last launch). launch(a) returns the
// kernel's error; the first error ends the loop and is thrown with the shape.
template <class Launch>
void run_row_chunks(const char* op, const std::string& shape, const MatrixView& x, const MatrixView& y, int pieces,
                    bool direct, int chunk, cudaStream_t stream, GemvArgs a, Launch launch) {
  const std::int64_t k = a.k;
  std::uint16_t* work = nullptr;
  if (!direct) {
    const std::size_t bytes = static_cast<std::size_t>(pieces) * std::min<std::int64_t>(x.rows, chunk) * k * 2;
    check(scratch_alloc(reinterpret_cast<void**>(&work), bytes, stream), op, "workspace for " + shape);
  }
  a.pieces = pieces;
  a.a_f16 = x.dtype == DType::kF16 && pieces == 1;  // fp16 rows as they are: the fp16 mma (canonical kernels)
  a.y_dtype = static_cast<int>(y.dtype);
  a.y_stride = y.stride;
  cudaError_t err = cudaSuccess;
  // launch() may throw (a tile the GPU cannot run, a bad tuning table): the workspace goes back
  // to the pool (or, inside a capture, gets its free node) either way.
  struct FreeWork {
    std::uint16_t*& work;
    cudaStream_t stream;
    bool armed = true;
    ~FreeWork() {
      if (armed && work) (void)scratch_free(work, stream);
    }
  } guard{work, stream};
  for (std::int64_t m0 = 0; m0 < x.rows && err == cudaSuccess; m0 += chunk) {
    a.m_rows = static_cast<int>(std::min<std::int64_t>(chunk, x.rows - m0));
    a.y = static_cast<char*>(y.data) + m0 * y.stride * dtype_size(y.dtype);
    const void* xrows = static_cast<const char*>(x.data) + m0 * x.stride * dtype_size(x.dtype);
    if (direct) {
      a.a = xrows;
      a.a_stride = x.stride;
    } else {
      const std::int64_t total = static_cast<std::int64_t>(pieces) * a.m_rows * k;
      const int threads = 256;
      const int blocks = static_cast<int>(std::min<std::int64_t>((total + threads - 1) / threads, 4096));
      prep_activations<<<blocks, threads, 0, stream>>>(xrows, static_cast<int>(x.dtype), x.stride, x.cols, a.m_rows,
                                                       pieces, k, work);
      err = cudaGetLastError();
      if (err != cudaSuccess) break;
      a.a = work;
      a.a_stride = k;  // K % 16 == 0: rows stay 32-byte aligned
    }
    err = launch(a);
  }
  guard.armed = false;
  if (work) {
    const cudaError_t e2 = scratch_free(work, stream);
    if (err == cudaSuccess) err = e2;
  }
  check(err, op, "kernel launch for " + shape);
}

// Runs launch(ws) with `bytes` of stream-ordered scratch (ws null when 0: a GEMM without a K
// split), freed after it on the same stream; the first error wins.
template <class Launch>
cudaError_t with_scratch(std::size_t bytes, cudaStream_t stream, Launch launch) {
  void* ws = nullptr;
  if (bytes > 0) {
    const cudaError_t e = scratch_alloc(&ws, bytes, stream);
    if (e != cudaSuccess) return e;
  }
  const cudaError_t e = launch(ws);
  const cudaError_t e2 = ws ? scratch_free(ws, stream) : cudaSuccess;
  return e != cudaSuccess ? e : e2;
}

// The wgmma GEMM (gemm_nvfp4_sm90_wgmma.cu) reads bf16 or fp16 rows and canonical weights whose
// shape and alignment it supports; everything else keeps the dense-panel path.
bool wgemm_applies(const MatrixView& x, const WeightView& w) {
  return (x.dtype == DType::kBF16 || x.dtype == DType::kF16) && wgemm_supported(w.packed, w.scales, w.n, w.k);
}

// The wgmma GEMM over all rows of x in one launch: rows read in place when they can be, else
// copied (padded to K) into a workspace first; then its K-split workspace from the scratch pool.
void run_wgemm(const char* op, const std::string& shape, const MatrixView& x, const WeightView& w, const MatrixView& y,
               cudaStream_t stream, const WgemmTile* tile_in, std::string* kernel_name) {
  const bool direct = rows_readable_in_place(x, w.k);
  const WgemmTile tile = tile_in ? *tile_in : wgemm_pick_tile(device_info().sms, w.n, w.k, x.rows);
  run_row_chunks(op, shape, x, y, 1, direct, static_cast<int>(std::min<std::int64_t>(x.rows, 1 << 30)), stream,
                 weight_args(w), [&](const GemvArgs& la) {
    return with_scratch(wgemm_workspace_bytes(la, tile), stream,
                        [&](void* ws) { return gemm_nvfp4_sm90_wgmma(la, tile, ws, stream); });
  });
  if (kernel_name) *kernel_name = gemm_nvfp4_sm90_wgmma_name(tile);
}

}  // namespace

bool compiled() { return true; }

// Every kernel but the wgmma GEMM is also built for sm_80 (SASS, which Ampere and Ada run) and
// as compute_80 PTX (JIT-compiled by the driver for newer GPUs): CMakeLists.txt. Checked on every
// call, so no string is built here; unavailable_reason() says why.
bool available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return false;
  }
  const DeviceInfo d = device_info();
  return d.cc >= 80 && d.has_code;
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return std::string("no CUDA device (") + (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + ")";
  }
  const DeviceInfo d = device_info();
  const std::string cc = std::to_string(d.cc / 10) + "." + std::to_string(d.cc % 10);
  if (d.cc < 80) return "the current GPU has compute capability " + cc + "; nvfp4 needs 8.0 or newer (mma.sync bf16, cp.async)";
  if (!d.has_code)
    return "this build has no device code for compute capability " + cc +
           " (it has " NVFP4_CUDA_CODES "; rebuild with NVFP4_CUDA_GENCODE covering it, e.g. the default)";
  return "";
}

bool hopper_paths() {
#if NVFP4_CUDA_SM90A
  // The sm_90a SASS runs on compute capability 9.0 only (arch-specific code, HOPPER.md).
  return device_info().cc == 90;  // 0 without a device
#else
  return false;  // a build without sm_90a code (NVFP4_CUDA_GENCODE): the portable kernels only
#endif
}

int device_cc() { return device_info().cc; }

void quantized_matmul_tile(const MatrixView& x, const WeightView& w, const MatrixView& y, void* stream_v,
                           const GemvTile* tile_in, std::string* kernel_name) {
  const char* op = "cuda::quantized_matmul";
  validate_matmul(op, x, w, y);
  if (x.rows == 0) return;
  const std::string shape = shape_of(x, w);
  require_available(op, shape);
  if (reinterpret_cast<std::uintptr_t>(w.packed) % 8 != 0)
    fail(op, "packed weight pointer must be 8-byte aligned (" + shape + ")");
  if (w.n > (std::int64_t{1} << 31) || w.k > (std::int64_t{1} << 30))
    fail(op, "shape too large for the GEMV's launch grid (" + shape + ")");
  require_device_pointers(op, shape, w.packed, w.scales, x.data, y.data);
  require_valid_tile(op, tile_in);
  cudaStream_t stream = static_cast<cudaStream_t>(stream_v);
  if (!tile_in && x.rows > kMaxRows) {
    if (x.rows <= kWgemmMaxRows && hopper_paths() && wgemm_applies(x, w) &&
        (x.rows <= kWgemmAllRows || wgemm_preferred(device_info().sms, w.n, w.k, x.rows))) {
      run_wgemm(op, shape, x, w, y, stream, nullptr, kernel_name);
      return;
    }
    gemm_nvfp4_dequant_cublas(x, w, y, stream_v);
    if (kernel_name) *kernel_name = "gemm_nvfp4_dequant_cublas";
    return;
  }
  const GemvTile tile = tile_in ? *tile_in : gemv_lookup_tile(device_cc(), w.n, w.k);
  // 16-bit rows the kernel can read in place go direct; fp32 becomes 3 exact bf16 pieces (48
  // virtual rows for 16 real rows: one launch per 16 rows either way).
  const bool direct = x.dtype != DType::kF32 && rows_readable_in_place(x, w.k);
  const int smem_optin = device_info().smem_optin;
  std::string name;
  run_row_chunks(op, shape, x, y, x.dtype == DType::kF32 ? 3 : 1, direct, kMaxRows, stream, weight_args(w),
                 [&](const GemvArgs& la) {
    // A tile whose shared memory this GPU cannot give (an explicit one, or a table written for
    // another GPU) is refused by name rather than failing in the launch.
    const std::size_t smem = gemv_nvfp4_sm90_smem_bytes(la, tile);
    if (smem > static_cast<std::size_t>(smem_optin))
      fail(op, "tile cols_per_warp=" + std::to_string(tile.cols_per_warp) + " warps_per_block=" +
                   std::to_string(tile.warps_per_block) + " k_split=" + std::to_string(tile.k_split) + " needs " +
                   std::to_string(smem) + " bytes of shared memory per block; this GPU allows " +
                   std::to_string(smem_optin) + " (" + shape + ")");
    if (name.empty()) name = gemv_nvfp4_sm90_name(la, tile);
    return gemv_nvfp4_sm90(la, tile, stream);
  });
  if (kernel_name) *kernel_name = name;
}

void quantized_matmul(const MatrixView& x, const WeightView& w, const MatrixView& y, void* stream) {
  quantized_matmul_tile(x, w, y, stream, nullptr, nullptr);
}

namespace {

// Checks shared by the entry points that force one path (tests, bench): arguments, and for a
// non-empty call a usable device and device pointers. Returns the shape string for messages.
std::string validate_forced_path(const char* op, const MatrixView& x, const WeightView& w, const MatrixView& y) {
  validate_matmul(op, x, w, y);
  const std::string shape = shape_of(x, w);
  if (x.rows == 0) return shape;
  require_available(op, shape);
  require_device_pointers(op, shape, w.packed, w.scales, x.data, y.data);
  return shape;
}

}  // namespace

void quantized_matmul_wgemm(const MatrixView& x, const WeightView& w, const MatrixView& y, void* stream,
                            const WgemmTile* tile, std::string* kernel_name) {
  const char* op = "cuda::quantized_matmul (wgmma GEMM)";
  const std::string shape = validate_forced_path(op, x, w, y);
  if (x.rows == 0) return;
  if (!hopper_paths())
    fail(op, "needs an sm_90 GPU (H100 / H200) and a build with sm_90a code; this device has compute capability " +
                 std::to_string(device_cc()) + " (" + shape + ")");
  if (!wgemm_applies(x, w))
    fail(op, "needs bf16 or fp16 activations, K % 64 == 0, a 16-byte aligned packed and 4-byte aligned scale base, N <= 8388480 (" +
                 shape + ")");
  if (tile && !wgemm_tile_valid(*tile))
    fail(op, "invalid GEMM tile bn=" + std::to_string(tile->bn) + " k_split=" + std::to_string(tile->k_split));
  run_wgemm(op, shape, x, w, y, static_cast<cudaStream_t>(stream), tile, kernel_name);
}

void quantized_matmul_panel(const MatrixView& x, const WeightView& w, const MatrixView& y, void* stream) {
  validate_forced_path("cuda::quantized_matmul (dense panel)", x, w, y);
  if (x.rows == 0) return;
  gemm_nvfp4_dequant_cublas(x, w, y, stream);
}

void repack_for_gemv_sm90(const WeightView& w, std::uint8_t* packed_out, std::uint8_t* scales_out, void* stream_v,
                          RepackedCodes codes) {
  const char* op = "cuda::repack_for_gemv_sm90";
  const std::string shape = "N=" + std::to_string(w.n) + " K=" + std::to_string(w.k);
  repack::check_repack_arguments(op, w, packed_out, scales_out, codes, shape);
  require_available(op, shape);
  require_device_pointers(op, shape, {{w.packed, "packed"}, {w.scales, "scales"}, {packed_out, "packed output"},
                                     {scales_out, "scales output"}});
  if (reinterpret_cast<std::uintptr_t>(packed_out) % 16 != 0 || reinterpret_cast<std::uintptr_t>(scales_out) % 4 != 0)
    fail(op, "outputs must be 16-byte (packed) and 4-byte (scales) aligned (" + shape + ")");
  check(repack_nvfp4_sm90(w.packed, w.scales, w.n, w.k, codes == RepackedCodes::fp16, packed_out, scales_out,
                          static_cast<cudaStream_t>(stream_v)), op,
        "kernel launch for " + shape);
}

namespace {

// The repacked bytes under the canonical view's fields (shape, tensor scale; the layout differs).
WeightView as_weight_view(const RepackedWeightView& w) { return {w.packed, w.scales, w.tensor_scale, w.n, w.k}; }
GemvArgs repacked_args(const RepackedWeightView& w) {
  GemvArgs a = weight_args(as_weight_view(w));
  a.f16_codes = w.codes == RepackedCodes::fp16;
  return a;
}

// Checks shared by the repacked entry points; returns the shape string for messages.
std::string validate_repacked(const char* op, const MatrixView& x, const RepackedWeightView& w, const MatrixView& y) {
  const WeightView wv = as_weight_view(w);
  validate_matmul(op, x, wv, y);
  const std::string shape = shape_of(x, wv);
  if (!repack_for_gemv_sm90_supported(w.n, w.k)) fail(op, "repacked weights need N % 16 == 0 and K % 128 == 0 (" + shape + ")");
  repack::require_known_codes(op, w.codes, shape);
  if (w.codes == RepackedCodes::fp16 && x.dtype != DType::kF16)
    fail(op, "weights repacked with fp16 codes take fp16 activations only; repack with RepackedCodes::bf16 for " +
                 std::string(dtype_name(x.dtype)) + " rows (" + shape + ")");
  if (x.rows == 0) return shape;
  require_available(op, shape);
  if (reinterpret_cast<std::uintptr_t>(w.packed) % 16 != 0 || reinterpret_cast<std::uintptr_t>(w.scales) % 4 != 0)
    fail(op, "repacked packed/scales must be 16/4-byte aligned (" + shape + ")");
  if (w.n > (std::int64_t{1} << 30) || w.k > (std::int64_t{1} << 26)) fail(op, "shape too large (" + shape + ")");
  require_device_pointers(op, shape, w.packed, w.scales, x.data, y.data);
  return shape;
}

// The repacked GEMM copies scales 16 bytes at a time (cp.async): their base must be 16-byte
// aligned (the GEMV needs 4; a view that is not runs the GEMV in launches of 16 rows instead).
// Its row blocks (128 rows) are the launch grid's y dimension, at most 65535: N <= 8,388,480.
bool rgemm_supported(const RepackedWeightView& w) {
  return reinterpret_cast<std::uintptr_t>(w.scales) % 16 == 0 && w.n <= std::int64_t{65535} * 128;
}

// The repacked GEMM (gemm_nvfp4_sm90_repacked.cu) over all rows of x in one launch: activations
// prepared as for the GEMV (all rows at once), then its K-split workspace from the scratch pool.
void run_rgemm(const char* op, const std::string& shape, const MatrixView& x, const RepackedWeightView& w,
               const MatrixView& y, cudaStream_t stream, const RgemmTile* tile_in, std::string* kernel_name,
               const RepackedMatmulOptions& options) {
  const int pieces = repacked_pieces(x.dtype);
  const bool direct = pieces == 1 && rows_readable_in_place(x, w.k);
  GemvArgs a = repacked_args(w);
  a.pdl = options.overlapped_launch && hopper_paths();  // PDL is sm_90+
  const RgemmTile tile = tile_in ? *tile_in : rgemm_pick_tile(device_info().sms, w.n, w.k, pieces * x.rows);
  run_row_chunks(op, shape, x, y, pieces, direct, static_cast<int>(std::min<std::int64_t>(x.rows, 1 << 30)), stream, a,
                 [&](const GemvArgs& la) {
    return with_scratch(rgemm_workspace_bytes(la, tile), stream,
                        [&](void* ws) { return gemm_nvfp4_sm90_repacked(la, tile, ws, stream); });
  });
  if (kernel_name) *kernel_name = gemm_nvfp4_sm90_repacked_name(tile);
}

}  // namespace

void quantized_matmul_repacked_tile(const MatrixView& x, const RepackedWeightView& w, const MatrixView& y, void* stream_v,
                                    const GemvTile* tile_in, std::string* kernel_name,
                                    const RepackedMatmulOptions& options) {
  const char* op = "cuda::quantized_matmul_repacked";
  const std::string shape = validate_repacked(op, x, w, y);
  if (x.rows == 0) return;
  require_valid_tile(op, tile_in);
  cudaStream_t stream = static_cast<cudaStream_t>(stream_v);
  const int pieces = repacked_pieces(x.dtype);
  const std::int64_t vrows_all = std::int64_t{pieces} * x.rows;
  // 17..32 virtual rows on small weights: one wide GEMV launch (kRpWideMaxWeights).
  const bool wide = !tile_in && vrows_all > kMaxRows && vrows_all <= kRpWideMaxVirtualRows &&
                    w.n * w.k <= kRpWideMaxWeights;
  // From kRgemmMinVirtualRows virtual rows: the repacked GEMM reads the weights once for up to 64
  // of them (docs/perf-cuda.md 21). An explicit GEMV tile (tests, tuner) keeps the GEMV in
  // launches of 16 virtual rows, so every GEMV tile can be checked at any M.
  if (!tile_in && !wide && vrows_all >= kRgemmMinVirtualRows && rgemm_supported(w)) {
    run_rgemm(op, shape, x, w, y, stream, nullptr, kernel_name, options);
    return;
  }
  // The GEMV reads bf16 and fp16 rows (fp16: the fp16 mma). Rows it can read in place go direct;
  // everything else (fp32 -> 3 exact bf16 pieces, padded or unaligned bf16 / fp16 -> 1 row of
  // their dtype) is prepared into a stream-ordered workspace. At most 16 virtual rows per launch
  // (the kernel's two n8 tiles), or one wide launch of up to 32.
  const bool direct = pieces == 1 && rows_readable_in_place(x, w.k);
  GemvArgs a = repacked_args(w);
  a.pdl = options.overlapped_launch && hopper_paths();  // PDL is sm_90+: elsewhere the plain launch
  a.early_weights = options.weights_read_early;
  const int cc = tile_in ? 0 : device_cc();
  std::string name;
  const int chunk = static_cast<int>((wide ? kRpWideMaxVirtualRows : kMaxRows) / pieces);
  run_row_chunks(op, shape, x, y, pieces, direct, chunk, stream, a, [&](const GemvArgs& la) {
    // The table has separate repacked tiles for <= 8 and 9..16 virtual rows per launch (two
    // kernel instantiations): looked up per launch. A wide launch takes the 9..16 tile.
    const std::int64_t vrows = std::int64_t{la.pieces} * la.m_rows;
    // The early-weights launch at <= 8 virtual rows (the M <= 8 kernel; its entries are tuned at
    // M = 1). Back to back with itself it measured 3-5% slower at M = 4 and 8 (4096 x 14336, 16384^2;
    // bench/results/cuda-2026-11-30-h200-bench-9905bfc.json.gz), but in the batched decode that
    // launch serves it is faster: Llama-3-8B at B = 4 sequences -4.93% per step with this gate,
    // -5.09% in the run of the final code; early at every shape B = 2 / 4 / 8 -5.45% / -5.15% /
    // -4.71% (`nvfp4 compare --batch B`, H200, 2026-12-01; docs/perf-cuda.md 19.2). At 9..16 virtual
    // rows the M = 9..16 kernel at 16 rows per warp, where its own entries (tuned at M = 16) allow
    // it: B = 12 / 16 -1.84% / -0.91% (docs/perf-cuda.md 33).
    const bool early = la.pdl && la.early_weights && vrows <= kEarlyMaxVirtualRows;
    // (The wide kernel runs one row tile per warp whatever the tile's cols_per_warp says.)
    const GemvTile tile =
        tile_in ? *tile_in
                : gemv_lookup_tile(cc, w.n, w.k, GemvLayout::kRepacked, std::min<std::int64_t>(vrows, kMaxRows), early);
    GemvArgs l2 = la;
    l2.pdl = la.pdl && tile.overlap_ok;  // the table's per-shape verdict on the overlapped launch
    l2.early_weights = early && tile.early_ok;  // and on the early-weights one
    if (name.empty()) name = gemv_nvfp4_sm90_repacked_name(l2, tile);  // the launch that runs
    return gemv_nvfp4_sm90_repacked(l2, tile, stream);
  });
  if (kernel_name) *kernel_name = name;
}

void quantized_matmul_repacked_rgemm(const MatrixView& x, const RepackedWeightView& w, const MatrixView& y, void* stream,
                                     const RgemmTile* tile, std::string* kernel_name, const RepackedMatmulOptions& options) {
  const char* op = "cuda::quantized_matmul_repacked";
  const std::string shape = validate_repacked(op, x, w, y);
  if (x.rows == 0) return;
  if (!rgemm_supported(w)) fail(op, "the repacked GEMM needs 16-byte aligned scales and N <= 8388480 (" + shape + ")");
  if (tile && !rgemm_tile_valid(*tile))
    fail(op, "invalid GEMM tile nb=" + std::to_string(tile->nb) +
                 " k_split=" + std::to_string(tile->k_split));
  run_rgemm(op, shape, x, w, y, static_cast<cudaStream_t>(stream), tile, kernel_name, options);
}

void quantized_matmul_repacked(const MatrixView& x, const RepackedWeightView& w, const MatrixView& y, void* stream,
                               const RepackedMatmulOptions& options) {
  quantized_matmul_repacked_tile(x, w, y, stream, nullptr, nullptr, options);
}

void quantized_matmul_host(const MatrixView& x, const WeightView& w, const MatrixView& y, const GemvTile* tile) {
  const char* op = "quantized_matmul";
  validate_matmul(op, x, w, y);
  if (x.rows == 0) return;
  if (!available()) fail(op, "backend=cuda requested, but " + unavailable_reason() + " (" + shape_of(x, w) + ")");
  const int es = dtype_size(x.dtype);
  const std::size_t xb = static_cast<std::size_t>((x.rows - 1) * x.stride + x.cols) * es;
  const std::size_t yb = static_cast<std::size_t>((y.rows - 1) * y.stride + y.cols) * es;
  const std::size_t pb = static_cast<std::size_t>(w.n) * (w.k / 2);
  const std::size_t sb = static_cast<std::size_t>(w.n) * (w.k / kBlockSize);
  const DeviceBuffer dx(xb, op, "activations"), dy(yb, op, "output"), dp(pb, op, "packed weights"),
      ds(sb, op, "scales");
  check(cudaMemcpy(dx.get(), x.data, xb, cudaMemcpyHostToDevice), op, "copy activations");
  check(cudaMemcpy(dy.get(), y.data, yb, cudaMemcpyHostToDevice), op, "copy output");  // keeps gaps between rows
  check(cudaMemcpy(dp.get(), w.packed, pb, cudaMemcpyHostToDevice), op, "copy packed weights");
  check(cudaMemcpy(ds.get(), w.scales, sb, cudaMemcpyHostToDevice), op, "copy scales");
  MatrixView dxv = x, dyv = y;
  dxv.data = dx.get();
  dyv.data = dy.get();
  WeightView dw = w;
  dw.packed = dp.as<const std::uint8_t>();
  dw.scales = ds.as<const std::uint8_t>();
  quantized_matmul_tile(dxv, dw, dyv, nullptr, tile);
  check(cudaDeviceSynchronize(), op, "kernel execution for " + shape_of(x, w));
  check(cudaMemcpy(y.data, dy.get(), yb, cudaMemcpyDeviceToHost), op, "copy result");
}

}  // namespace nvfp4::cuda
