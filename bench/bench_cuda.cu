// bench/bench_cuda.cu -- the CUDA rows of `nvfp4 bench`: the NVFP4 GEMV through the public
// device API, and cuBLAS bf16 at the same shape in the same run.
//
// Per shape: (1) validate the GPU result against the oracle (quantized_matmul_ref on the first
// and last 256 output columns, random weights and activations); (2) rotate through distinct
// weight copies totalling >= 256 MiB (> 3x the 60 MB L2) so every call streams from HBM
// (cold=false: one copy); (3) per-call time: CUDA events around one public-API call, synced
// each time, so host validation + launch + kernel are all in (us_median/p10/p90, samples_us);
// (4) kernel time without launch gaps: the same calls captured in a CUDA graph, replayed,
// time / calls (us_graph). cuBLAS bf16 (cublasGemmEx, fp32 compute) gets the same treatment.
// ceiling_gbps: a 1 GiB device-to-device copy in the same run (bytes read + written).
// Yardsticks per N x K, same rotation: "read_floor" (a plain streaming read of the same packed +
// scale bytes, best of 48 kernels and launch shapes) and "launch_floor" (an empty kernel, same graph timing).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/cublas_handle.h"
#include "kernels/cuda/device_owned.h"
#include "kernels/cuda/gemv_nvfp4_sm90.h"
#include "kernels/cuda/gemv_sm90_device.cuh"
#include "kernels/cuda/graph_timing.h"
#include "kernels/cuda/matmul_cuda.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

namespace nvfp4::bench {
namespace {

void ck(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) fail("bench", "cuda: " + what + ": " + cudaGetErrorString(e));
}
void ckb(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("bench", "cublas: " + what + " failed (status " + std::to_string(s) + ")");
}

__device__ __forceinline__ std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// kind 0: random bytes; 1: E4M3 scales in [2^-3, ~30] (no NaN); 2: bf16 uniform in (-1, 1).
__global__ void fill_random(std::uint8_t* p, std::size_t bytes, std::uint64_t seed, int kind) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < bytes / 2;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t h = mix(seed * 0x100000001B3ull + i);
    std::uint16_t v;
    if (kind == 0) {
      v = static_cast<std::uint16_t>(h);
    } else if (kind == 1) {
      v = static_cast<std::uint16_t>((0x20 + h % 0x30) | ((0x20 + (h >> 16) % 0x30) << 8));
    } else {
      const float f = static_cast<float>(static_cast<std::int64_t>(h >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
      v = f32_to_bf16(f);
    }
    reinterpret_cast<std::uint16_t*>(p)[i] = v;
  }
}

using cuda::DeviceBuffer;  // device memory, freed on every path out (kernels/cuda/device_owned.h)

void fill(void* p, std::size_t bytes, std::uint64_t seed, int kind) {
  fill_random<<<1024, 256>>>(static_cast<std::uint8_t*>(p), bytes, seed, kind);
  ck(cudaGetLastError(), "fill");
}

double quant(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * (v.size() - 1);
  const std::size_t i = static_cast<std::size_t>(pos);
  return i + 1 < v.size() ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[i];
}

// Times `call(i)` (i = rotation index): per call with sync, then inside a graph.
template <class F>
void time_calls(Row& row, const Options& opts, std::size_t copies, cudaStream_t st, F call) {
  const cuda::OwnedEvent ev0("bench"), ev1("bench");
  const cudaEvent_t e0 = ev0.get(), e1 = ev1.get();
  for (int i = 0; i < 3; ++i) call(static_cast<std::size_t>(i) % copies);  // warm-up
  ck(cudaStreamSynchronize(st), "warm-up");
  std::vector<double> us;
  double spent = 0;
  for (int i = 0; (i < opts.min_reps || spent < opts.min_seconds * 1e6) && i < 5000; ++i) {
    ck(cudaEventRecord(e0, st), "record");
    call(static_cast<std::size_t>(i) % copies);
    ck(cudaEventRecord(e1, st), "record");
    ck(cudaEventSynchronize(e1), "sync");
    float ms = 0;
    ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    us.push_back(ms * 1000.0);
    spent += ms * 1000.0 + 5.0;  // + host round trip
  }
  row.samples_us = us;
  row.us_median = quant(us, 0.5);
  row.us_p10 = quant(us, 0.1);
  row.us_p90 = quant(us, 0.9);
  // Graph: back-to-back calls over the rotation, no launch gaps.
  const int per_graph = static_cast<int>(std::max<std::size_t>(copies, 20));
  row.us_graph = cuda::graph_us_per_call(st, per_graph, 7, [&](int i) { call(static_cast<std::size_t>(i) % copies); });
}

double copy_ceiling_gbps() {
  const std::size_t bytes = std::size_t{1} << 30;
  DeviceBuffer a(bytes, "bench"), b(bytes, "bench");
  fill(a.get(), bytes, 7, 0);
  const cuda::OwnedEvent ev0("bench"), ev1("bench");
  const cudaEvent_t e0 = ev0.get(), e1 = ev1.get();
  ck(cudaMemcpy(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice), "copy warm-up");
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    ck(cudaEventRecord(e0), "record");
    ck(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice), "copy");
    ck(cudaEventRecord(e1), "record");
    ck(cudaEventSynchronize(e1), "sync");
    float ms = 0;
    ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    t.push_back(ms);
  }
  return 2.0 * bytes / (quant(t, 0.5) * 1e6);
}

// The oracle check every validated row uses: the device output dy ([m, n], dtype dt) against
// quantized_matmul_ref on the first and last 256 output columns of the canonical weight
// (wp0, ws0), with an exact fp32 copy of the activations. Returns the max error relative to
// the largest oracle value (over those columns), +Inf if any output is not finite.
double oracle_rel_err(const Shape& s, DType dt, const Tensor& hx, const void* wp0, const void* ws0, float ts, const void* dy) {
  Tensor hy(dt, {s.m, s.n});
  ck(cudaMemcpy(hy.data(), dy, hy.bytes.size(), cudaMemcpyDeviceToHost), "copy y");
  const std::int64_t part = std::min<std::int64_t>(s.n, 256);
  Tensor xf(DType::kF32, {s.m, s.k});
  for (std::int64_t i = 0; i < xf.numel(); ++i) xf.set(i, hx.get(i));
  double max_err = 0, max_ref = 0;
  for (std::int64_t n0 : {std::int64_t{0}, s.n - part}) {
    std::vector<std::uint8_t> hp(static_cast<std::size_t>(part) * s.k / 2), hs(static_cast<std::size_t>(part) * s.k / 16);
    ck(cudaMemcpy(hp.data(), static_cast<const std::uint8_t*>(wp0) + n0 * s.k / 2, hp.size(), cudaMemcpyDeviceToHost), "copy w");
    ck(cudaMemcpy(hs.data(), static_cast<const std::uint8_t*>(ws0) + n0 * s.k / 16, hs.size(), cudaMemcpyDeviceToHost), "copy s");
    Tensor ref(DType::kF32, {s.m, part});
    quantized_matmul_ref(MatrixView{xf.data(), DType::kF32, s.m, s.k, s.k}, WeightView{hp.data(), hs.data(), ts, part, s.k},
                         MatrixView{ref.data(), DType::kF32, s.m, part, part});
    for (std::int64_t m = 0; m < s.m; ++m)
      for (std::int64_t j = 0; j < part; ++j) {
        const double a = hy.get(m * s.n + n0 + j), b = ref.get(m * part + j);
        if (!std::isfinite(a)) {
          std::fprintf(stderr, "bench: non-finite output y[%ld,%ld] = %g (oracle %g)\n", static_cast<long>(m),
                       static_cast<long>(n0 + j), a, b);
          return INFINITY;
        }
        max_err = std::max(max_err, std::fabs(a - b));
        max_ref = std::max(max_ref, std::fabs(b));
      }
  }
  return max_ref > 0 ? max_err / max_ref : max_err;
}

// Output rounding dominates: bf16 2^-8, fp16 2^-11 relative; fp32 sums ~1e-6.
double oracle_tolerance(DType dt) { return dt == DType::kBF16 ? 1e-2 : (dt == DType::kF16 ? 2e-3 : 1e-5); }

// Read floor (row "read_floor"): how fast a plain streaming read of the bytes this shape's GEMV
// must read (packed + scales of one rotated copy) runs in the same run and rotation -- the
// yardstick for "as fast as reading the weights" (docs/bench.md). 16-byte non-caching loads, U
// in flight per thread, over packed and scales as one index range; the tail is predicated so
// that every round keeps all U loads in flight. Two orders: grid-stride (kSlices false: the
// grid sweeps the bytes together) and the GEMV's (each warp streams one contiguous slice).
// Launched plainly or overlapped the way the GEMV is by default (PDL: launch_dependents, then
// wait before any read), so that at small shapes, where the launch is a third of the call, the
// floor pays what the GEMV pays. Each block writes the XOR of its words to sink[block] (plain
// stores: one atomic per warp on one word serialises in L2: 5.9 against 3.8 us per call at 4096 x
// 4096, 2026-12-02), validated against the host before timing. The bench keeps the best of 48
// kernels and launch shapes.
template <int U, bool kSlices>
__global__ void read_floor_kernel(const uint4* a, std::size_t na, const uint4* b, std::size_t nb, unsigned* sink) {
  cuda::pdl_launch_dependents();
  cuda::pdl_wait();
  const std::size_t n = na + nb;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::size_t begin = tid, end = n, apart = threads;  // apart: between one thread's U loads
  if constexpr (kSlices) {
    const std::size_t warp = tid / 32, per_warp = (n + threads / 32 - 1) / (threads / 32);
    begin = warp * per_warp + (tid & 31);
    end = std::min(n, (warp + 1) * per_warp);
    apart = 32;
  }
  unsigned x = 0;
  for (std::size_t i = begin; i < end; i += U * apart) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::size_t j = i + u * apart;
      v[u] = make_uint4(0, 0, 0, 0);
      if (j < end)
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                     : "l"(j < na ? a + j : b + (j - na)));
    }
#pragma unroll
    for (int u = 0; u < U; ++u) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  __shared__ unsigned warp_x[32];
  for (int o = 16; o > 0; o >>= 1) x ^= __shfl_xor_sync(0xffffffffu, x, o);
  if ((threadIdx.x & 31) == 0) warp_x[threadIdx.x / 32] = x;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned w = 1; w < blockDim.x / 32; ++w) x ^= warp_x[w];
    sink[blockIdx.x] = x;
  }
}

// Launch floor (row "launch_floor"): an empty kernel of 264 blocks x 512 threads (two 16-warp
// blocks per SM, as the large GEMV tiles) back to back in the same CUDA graph timing.
__global__ void empty_kernel() {}

unsigned host_xor(const void* dev, std::size_t bytes) {
  std::vector<unsigned> h(bytes / 4);
  ck(cudaMemcpy(h.data(), dev, bytes, cudaMemcpyDeviceToHost), "copy for xor");
  unsigned x = 0;
  for (unsigned v : h) x ^= v;
  return x;
}

void poison(void* dy, std::size_t bytes) {
  std::vector<std::uint8_t> nan(bytes, 0xFF);
  ck(cudaMemcpy(dy, nan.data(), nan.size(), cudaMemcpyHostToDevice), "poison");
  // A pageable cudaMemcpy may return before its DMA lands, and the bench stream does not wait
  // for the legacy stream (found on H200: the poison overwrote a finished result).
  ck(cudaDeviceSynchronize(), "poison");
}

}  // namespace

std::vector<Row> run_cuda(const Options& opts) {
  if (!cuda::available()) fail("bench", "backend cuda: " + cuda::unavailable_reason());
  std::vector<Row> rows;
  const double ceiling = copy_ceiling_gbps();
  const cuda::OwnedStream stream("bench");
  const cudaStream_t st = stream.get();
  cublasHandle_t blas = nullptr;
  ckb(cublasCreate(&blas), "create");
  const CublasHandle blas_owner(blas);
  ckb(cublasSetStream(blas, st), "set stream");
  std::mt19937_64 rng(opts.seed);
  const DType dt = opts.dtype;
  const int es = dtype_size(dt);
  const std::size_t target = std::size_t{256} << 20;
  std::vector<cuda::GemvTableEntry> tuned;  // NVFP4_BENCH_TUNED=FILE: a second table, repacked rows
  if (const char* tf = std::getenv("NVFP4_BENCH_TUNED"); tf && *tf) {
    std::FILE* f = std::fopen(tf, "rb");
    if (!f) fail("bench", std::string("cannot read NVFP4_BENCH_TUNED file '") + tf + "'");
    std::string text;
    char buf[4096];
    for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, got);
    std::fclose(f);
    tuned = cuda::gemv_table_from_json(text, tf);
  }

  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<Row>> floors;  // N x K -> read/launch floor rows
  for (const Shape& s : opts.shapes) {
    {
      // Lower bound of the device memory this shape takes: one copy of the packed weights and
      // scales, the dense bf16 baseline's weights, bf16 activations and an fp32-sized output.
      const double nk = static_cast<double>(s.n) * static_cast<double>(s.k);
      std::size_t free_b = 0, total_b = 0;
      const double avail = cudaMemGetInfo(&free_b, &total_b) == cudaSuccess ? static_cast<double>(free_b) : 0.0;
      check_shape("CUDA", s, nk * 9 / 16 + nk * 2 + static_cast<double>(s.m) * s.k * 2 + static_cast<double>(s.m) * s.n * 4,
                  avail, "the GPU (cudaMemGetInfo free)", "packed weights and scales, dense bf16 weights, activations, output");
    }
    const std::size_t pb = static_cast<std::size_t>(s.n) * s.k / 2, sb = static_cast<std::size_t>(s.n) * s.k / 16;
    const std::size_t copies = opts.cold ? std::max<std::size_t>(1, (target + pb + sb - 1) / (pb + sb)) : 1;
    std::vector<DeviceBuffer> wp, ws;
    for (std::size_t c = 0; c < copies; ++c) {
      wp.emplace_back(pb, "bench", "packed weights");
      ws.emplace_back(sb, "bench", "scales");
      fill(wp.back().get(), pb, opts.seed * 1000 + 2 * c, 0);
      fill(ws.back().get(), sb, opts.seed * 1000 + 2 * c + 1, 1);
    }
    // The fills run on the legacy stream; `st` is non-blocking and would not wait for them
    // (found on H200: a GEMV read half-filled weights).
    ck(cudaDeviceSynchronize(), "fill");
    // Activations: random in [-1, 1) in the bench dtype.
    Tensor hx(dt, {s.m, s.k});
    std::uniform_real_distribution<float> U(-1.0f, 1.0f);
    for (std::int64_t i = 0; i < hx.numel(); ++i) hx.set(i, U(rng));
    DeviceBuffer dx(hx.bytes.size(), "bench", "activations"), dy(static_cast<std::size_t>(s.m) * s.n * es, "bench", "output");
    ck(cudaMemcpy(dx.get(), hx.data(), hx.bytes.size(), cudaMemcpyHostToDevice), "copy x");
    const float ts = 0.0123f;
    auto wview = [&](std::size_t c) {
      return WeightView{static_cast<const std::uint8_t*>(wp[c].get()), static_cast<const std::uint8_t*>(ws[c].get()), ts,
                        s.n, s.k};
    };
    const MatrixView xv{dx.get(), dt, s.m, s.k, s.k};
    const MatrixView yv{dy.get(), dt, s.m, s.n, s.n};

    Row r;
    r.backend = "cuda";
    r.variant = "nvfp4";
    r.shape = s;
    r.dtype = dt;
    r.cold = opts.cold;
    r.bytes = nvfp4_matmul_bytes(s, dt);
    r.ceiling_gbps = ceiling;
    const std::size_t ybytes = static_cast<std::size_t>(s.m) * s.n * es;
    auto validate = [&](Row& row, const std::string& what) {
      row.max_rel_err = oracle_rel_err(s, dt, hx, wp[0].get(), ws[0].get(), ts, dy.get());
      row.validated = row.max_rel_err <= oracle_tolerance(dt);
      if (!row.validated)
        fail("bench", "cuda " + what + " result does not match the oracle at M=" + std::to_string(s.m) + " N=" +
                          std::to_string(s.n) + " K=" + std::to_string(s.k) + " (max rel err " +
                          std::to_string(row.max_rel_err) + ")");
    };
    {
      // Validate first: poisoned output, full GPU run, oracle on the first/last columns.
      poison(dy.get(), ybytes);
      std::string kname;
      cuda::quantized_matmul_tile(xv, wview(0), yv, st, nullptr, &kname);
      r.kernel = kname;
      ck(cudaStreamSynchronize(st), "validation run");
      validate(r, "nvfp4");
    }
    time_calls(r, opts, copies, st, [&](std::size_t c) { cuda::quantized_matmul(xv, wview(c), yv, st); });
    r.gbps = r.bytes / r.us_median / 1e3;  // bench.h: bytes / us_median (graph GB/s = bytes / us_graph)
    r.gflops = 2.0 * s.m * s.n * s.k / r.us_median / 1e3;
    rows.push_back(r);
    // One variant row: validate (poisoned output, oracle), then time over the rotation.
    // call(c, kname) runs the variant on copy c; kname (validation call only) gets the kernel
    // that ran, `suffix` is appended to it in the row.
    auto variant_row = [&](const std::string& variant, const std::string& suffix, const auto& call) {
      Row q = r;
      q.variant = variant;
      poison(dy.get(), ybytes);
      std::string kname;
      call(std::size_t{0}, &kname);
      ck(cudaStreamSynchronize(st), variant + " run");
      q.kernel = kname + suffix;
      validate(q, variant + " (" + q.kernel + ")");
      time_calls(q, opts, copies, st, [&](std::size_t c) { call(c, nullptr); });
      q.gbps = q.bytes / q.us_median / 1e3;
      q.gflops = 2.0 * s.m * s.n * s.k / q.us_median / 1e3;
      rows.push_back(q);
    };
    if (s.m > 16) {
      // Side by side above 16 rows: the dense-panel path (decode + cuBLAS, the default before the
      // wgmma GEMM) and (NVFP4_BENCH_WG_SWEEP=1) every wgmma-GEMM block shape and K split, each
      // validated like the rest (rows "nvfp4_ws_sweep").
      variant_row("nvfp4_panel", "", [&](std::size_t c, std::string* kname) {
        cuda::quantized_matmul_panel(xv, wview(c), yv, st);
        if (kname) *kname = "gemm_nvfp4_dequant_cublas";
      });
      const char* sw = std::getenv("NVFP4_BENCH_WG_SWEEP");
      const bool wgemm_ok = sw && dt != DType::kF32 && cuda::hopper_paths() &&
                            cuda::wgemm_supported(wview(0).packed, wview(0).scales, s.n, s.k);
      // NVFP4_BENCH_WG_SWEEP=pick: only the block shape wgemm_pick_tile chooses, at any M (row
      // "nvfp4_ws_pick"; above kWgemmMaxRows, or where wgemm_preferred says no, the default route is the panel).
      if (wgemm_ok && std::strcmp(sw, "pick") == 0)
        variant_row("nvfp4_ws_pick", "", [&](std::size_t c, std::string* kname) {
          cuda::quantized_matmul_wgemm(xv, wview(c), yv, st, nullptr, kname);
        });
      if (wgemm_ok && (*sw == '1' || std::strcmp(sw, "ws") == 0) && dt == DType::kBF16)
        for (const int consumers : {2, 3})
          for (const int bn : {64, 128, 160, 192, 224, 256})
            for (const int ks : {1, 2, 3, 4, 6, 8}) {
              const cuda::WgemmTile t{bn, ks, consumers};
              if (!cuda::wgemm_tile_valid(t) || (ks > 1 && ks * 8 > s.k / 64)) continue;  // < 8 stages per split
              if (consumers == 2 && (ks == 3 || ks == 6)) continue;  // the built-in rule gives them powers of two
              variant_row("nvfp4_ws_sweep", "_ks" + std::to_string(ks),
                          [&](std::size_t c, std::string* kname) { cuda::quantized_matmul_wgemm(xv, wview(c), yv, st, &t, kname); });
            }
    }
    if (const char* lg = std::getenv("NVFP4_BENCH_LEGACY"); lg && *lg == '1') {
      // Side-by-side: the first (B = weights) kernel with the same table tile, same weights and
      // rotation, in the same run (docs/perf-cuda.md, before/after).
      Row l = r;
      cuda::GemvTile tile = cuda::gemv_lookup_tile(cuda::device_cc(), s.n, s.k);
      tile.legacy = true;
      std::string kname;
      poison(dy.get(), ybytes);
      cuda::quantized_matmul_tile(xv, wview(0), yv, st, &tile, &kname);
      ck(cudaStreamSynchronize(st), "legacy run");
      l.variant = "nvfp4_legacy";
      l.kernel = kname;
      validate(l, "nvfp4_legacy");
      time_calls(l, opts, copies, st, [&](std::size_t c) { cuda::quantized_matmul_tile(xv, wview(c), yv, st, &tile); });
      l.gbps = l.bytes / l.us_median / 1e3;
      l.gflops = 2.0 * s.m * s.n * s.k / l.us_median / 1e3;
      rows.push_back(l);
    }
    // NVFP4_BENCH_REPACKED=0 leaves out the repacked rows below (prefill sweeps: at M in the
    // thousands they are not what runs, and the GEMV in launches of 16 rows takes most of the time).
    const char* rp_env = std::getenv("NVFP4_BENCH_REPACKED");
    if (!(rp_env && *rp_env == '0') && cuda::repack_for_gemv_sm90_supported(s.n, s.k)) {
      // Side-by-side: the same weights repacked once (cuda::repack_for_gemv_sm90, not timed)
      // into the gemv_sm90 layout, same rotation; each variant validated against the oracle
      // like the canonical row (docs/perf-cuda.md 7, 9). fp16 rows get fp16 codes, as an fp16
      // engine would repack (docs/perf-cuda.md 49).
      const cuda::RepackedCodes codes = dt == DType::kF16 ? cuda::RepackedCodes::fp16 : cuda::RepackedCodes::bf16;
      std::vector<DeviceBuffer> rpk, rsc;
      for (std::size_t c = 0; c < copies; ++c) {
        rpk.emplace_back(pb, "bench", "packed weights");
        rsc.emplace_back(sb, "bench", "scales");
        cuda::repack_for_gemv_sm90(wview(c), static_cast<std::uint8_t*>(rpk.back().get()),
                                   static_cast<std::uint8_t*>(rsc.back().get()), st, codes);
      }
      ck(cudaStreamSynchronize(st), "repack");
      auto rview = [&](std::size_t c) {
        return cuda::RepackedWeightView{static_cast<const std::uint8_t*>(rpk[c].get()),
                                        static_cast<const std::uint8_t*>(rsc[c].get()), ts, s.n, s.k, codes};
      };
      auto repacked_row = [&](const std::string& variant, const cuda::GemvTile* tile, const cuda::RepackedMatmulOptions& o) {
        variant_row(variant,
                    tile ? "_w" + std::to_string(tile->warps_per_block) + "_ks" + std::to_string(tile->k_split) : "",
                    [&](std::size_t c, std::string* kname) {
                      cuda::quantized_matmul_repacked_tile(xv, rview(c), yv, st, tile, kname, o);
                    });
      };
      // The default call (overlapped launch where the table allows it: back-to-back calls in
      // the graph overlap one kernel's tail with the next one's launch), and the plain launch.
      // From 25 virtual rows the default call is the repacked GEMM (17..32 on weights of at most
      // 4096 x 4096: one GEMV launch, cuda::kRpWideMaxWeights).
      // Before Hopper every launch is the plain one (no PDL): no second and third row of it.
      const bool pdl = cuda::hopper_paths();
      repacked_row("nvfp4_repacked", nullptr, {});
      cuda::RepackedMatmulOptions plain;
      plain.overlapped_launch = false;
      if (pdl) repacked_row("nvfp4_repacked_plain", nullptr, plain);
      const std::int64_t vrows_all = s.m * cuda::repacked_pieces(dt);
      if (vrows_all > 16) {
        // Side by side above 16 virtual rows: the GEMV in launches of 16 rows (its table tile;
        // the default call from 25 rows on is the GEMM or the wide GEMV) and (NVFP4_BENCH_RGEMM_SWEEP=1) every
        // GEMM block shape and K split, each validated like the rest.
        const cuda::GemvTile t16 = cuda::gemv_lookup_tile(cuda::device_cc(), s.n, s.k, cuda::GemvLayout::kRepacked, 16);
        repacked_row("nvfp4_repacked_gemv16", &t16, {});
        if (const char* sw = std::getenv("NVFP4_BENCH_RGEMM_SWEEP"); sw && *sw == '1')
          for (const int nb : {4, 8})
            for (const int ks : {1, 2, 4, 8, 16}) {
              const cuda::RgemmTile t{nb, ks};
              if (ks > 1 && ks * 4 > s.k / 128) continue;  // < 4 chunk pairs per split
              variant_row("nvfp4_rgemm_sweep", "_ks" + std::to_string(ks), [&](std::size_t c, std::string* kname) {
                cuda::quantized_matmul_repacked_rgemm(xv, rview(c), yv, st, &t, kname);
              });
            }
      }
      // Weights read before the PDL wait (RepackedMatmulOptions::weights_read_early; the rotated
      // weights here are never written, which that option requires). The API honours it at <= 8
      // virtual rows (bf16 M <= 8) where the table has an early entry: the row is the call a
      // decode engine with fixed weights makes.
      cuda::RepackedMatmulOptions early;
      early.weights_read_early = true;
      const bool early_applies = pdl && vrows_all <= cuda::kEarlyMaxVirtualRows;
      if (early_applies) repacked_row("nvfp4_repacked_early", nullptr, early);
      if (!tuned.empty()) {
        // The tile of another table (NVFP4_BENCH_TUNED=FILE, e.g. a fresh `nvfp4 tune`) on the
        // same repacked weights and rotation, same run.
        const std::int64_t vrows = std::min<std::int64_t>(vrows_all, 16);  // per launch
        const cuda::GemvTableEntry* e =
            cuda::gemv_find_entry(tuned, cuda::device_cc(), s.n, s.k, cuda::GemvLayout::kRepacked, vrows);
        const cuda::GemvTile tile =
            e ? e->tile : cuda::gemv_lookup_tile(cuda::device_cc(), s.n, s.k, cuda::GemvLayout::kRepacked, vrows);
        repacked_row("nvfp4_repacked_tuned", &tile, {});
        if (early_applies)
          if (const cuda::GemvTableEntry* ee =
                  cuda::gemv_find_entry(tuned, cuda::device_cc(), s.n, s.k, cuda::GemvLayout::kRepacked, vrows_all, true);
              ee && ee->early)
            repacked_row("nvfp4_repacked_tuned_early", &ee->tile, early);
      }
    }
    if (pb % 16 == 0 && sb % 16 == 0) {
      // Read and launch floors, measured once per N x K in a run (the weights do not depend on M).
      if (floors.count({s.n, s.k}) == 0) {
        const unsigned want = host_xor(wp[0].get(), pb) ^ host_xor(ws[0].get(), sb);
        int sms = 0;
        ck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
        const std::size_t sink_bytes = static_cast<std::size_t>(sms) * 16 * 4;  // a word per block, <= 16 blocks per SM
        DeviceBuffer sink(sink_bytes, "bench", "read floor sink");
        using Kern = void (*)(const uint4*, std::size_t, const uint4*, std::size_t, unsigned*);
        struct ReadKern {
          const char* name;
          int u;
          Kern kern;
        };
        const ReadKern kerns[] = {{"read16", 1, read_floor_kernel<1, false>},  {"read16", 4, read_floor_kernel<4, false>},
                                  {"read16", 8, read_floor_kernel<8, false>},  {"slices16", 1, read_floor_kernel<1, true>},
                                  {"slices16", 4, read_floor_kernel<4, true>}, {"slices16", 8, read_floor_kernel<8, true>}};
        double best = 1e30;
        std::function<void(std::size_t)> best_launch;
        std::string best_name;
        // Overlapped only where the GEMV may be (Hopper): sm_80 code has no griddepcontrol.wait.
        const std::vector<bool> pdls = cuda::hopper_paths() ? std::vector<bool>{false, true} : std::vector<bool>{false};
        for (const bool pdl : pdls) {
          for (const int bps : {2, 4, 8, 16}) {
            for (const ReadKern& rk : kerns) {
              std::function<void(std::size_t)> launch = [&, bps, pdl, kern = rk.kern](std::size_t c) {
                const uint4* a = static_cast<const uint4*>(wp[c].get());
                const uint4* b = static_cast<const uint4*>(ws[c].get());
                std::size_t na = pb / 16, nb = sb / 16;
                unsigned* sp = static_cast<unsigned*>(sink.get());
                void* args[] = {&a, &na, &b, &nb, &sp};
                ck(cuda::launch_pdl(reinterpret_cast<const void*>(kern), dim3(sms * bps), dim3(512), 0, pdl, st, args),
                   "read floor launch");
              };
              ck(cudaMemsetAsync(sink.get(), 0, sink_bytes, st), "read floor sink");
              launch(0);
              ck(cudaStreamSynchronize(st), "read floor run");
              if (host_xor(sink.get(), sink_bytes) != want)
                fail("bench", "read floor kernel: checksum mismatch at N=" + std::to_string(s.n) + " K=" + std::to_string(s.k));
              const int per_graph = static_cast<int>(std::max<std::size_t>(copies, 20));
              const double us = cuda::graph_us_per_call(st, per_graph, 5, [&](int i) { launch(static_cast<std::size_t>(i) % copies); });
              if (us < best) {
                best = us;
                best_launch = launch;
                best_name = std::string(rk.name) + "_b" + std::to_string(bps) + "_u" + std::to_string(rk.u) + (pdl ? "_pdl" : "");
              }
            }
          }
        }
        Row f = r;
        f.variant = "read_floor";
        f.kernel = best_name;
        f.bytes = static_cast<double>(pb + sb);
        time_calls(f, opts, copies, st, best_launch);
        f.validated = true;  // the checksum above
        f.max_rel_err = 0;
        f.gbps = f.bytes / f.us_median / 1e3;
        f.gflops = 0;
        Row e = f;
        e.variant = "launch_floor";
        e.kernel = "empty_264x512";
        e.bytes = 0;
        time_calls(e, opts, copies, st, [&](std::size_t) { empty_kernel<<<264, 512, 0, st>>>(); });
        e.gbps = 0;
        floors[{s.n, s.k}] = {f, e};
      }
      for (Row fr : floors[{s.n, s.k}]) {
        fr.shape = s;
        fr.dtype = dt;
        rows.push_back(fr);
      }
    }
    wp.clear();
    ws.clear();

    // cuBLAS bf16 dense baseline at the same shape, same rotation rule (unless --no-dense).
    if (!opts.dense) continue;
    Row b;
    b.backend = "cuda";
    b.kernel = "cublasGemmEx";
    b.variant = "cublas_bf16";
    b.shape = s;
    b.dtype = DType::kBF16;
    b.cold = opts.cold;
    const std::size_t wb = static_cast<std::size_t>(s.n) * s.k * 2;
    b.bytes = wb + 2.0 * s.m * s.k + 2.0 * s.m * s.n;
    b.ceiling_gbps = ceiling;
    const std::size_t bcopies = opts.cold ? std::max<std::size_t>(1, (target + wb - 1) / wb) : 1;
    std::vector<DeviceBuffer> bw;
    for (std::size_t c = 0; c < bcopies; ++c) {
      bw.emplace_back(wb, "bench", "dense weights");
      fill(bw.back().get(), wb, opts.seed * 7777 + c, 2);
    }
    DeviceBuffer bx(static_cast<std::size_t>(s.m) * s.k * 2, "bench", "activations"),
        by(static_cast<std::size_t>(s.m) * s.n * 2, "bench", "output");
    fill(bx.get(), static_cast<std::size_t>(s.m) * s.k * 2, opts.seed * 31, 2);
    ck(cudaDeviceSynchronize(), "fill");
    const float alpha = 1.0f, beta = 0.0f;
    auto gemm = [&](std::size_t c) {
      // y[M,N] = x[M,K] . W[N,K]^T in column-major terms: Y^T (N x M) = W (op T of K x N) . X^T (K x M).
      ckb(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(s.n), static_cast<int>(s.m),
                       static_cast<int>(s.k), &alpha, bw[c].get(), CUDA_R_16BF, static_cast<int>(s.k), bx.get(), CUDA_R_16BF,
                       static_cast<int>(s.k), &beta, by.get(), CUDA_R_16BF, static_cast<int>(s.n), CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT),
          "gemm");
    };
    gemm(0);
    ck(cudaStreamSynchronize(st), "cublas run");
    b.validated = true;  // cuBLAS is the reference library here; its output is not checked
    time_calls(b, opts, bcopies, st, gemm);
    b.gbps = b.bytes / b.us_median / 1e3;
    b.gflops = 2.0 * s.m * s.n * s.k / b.us_median / 1e3;
    rows.push_back(b);
  }
  return rows;
}

}  // namespace nvfp4::bench
