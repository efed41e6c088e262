// kernels/cuda/autotune_sm90.cpp -- `nvfp4 tune`: time every instantiated GEMV tile on the
// present GPU, per shape class, and return the fastest as a tuning table.
//
// Method (METHOD.md): random weights (never zeros), rotated through >= 256 MiB of distinct
// copies so each launch streams from HBM, not the 60 MB L2; back-to-back launches captured in a
// CUDA graph so the time is the kernel's, without launch gaps; median of several replays.
// Tuned at M = 1, bf16 activations (the decode case); M <= 16 runs the same weight stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cuda/graph_timing.h"
#include "kernels/cuda/matmul_cuda.h"
#include "kernels/cuda/tuning_sm90.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"

namespace nvfp4::cuda {
namespace {

void ck(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) fail("tune", what + ": " + cudaGetErrorString(e));
}

std::vector<GemvTile> candidates() {
  std::vector<GemvTile> out;
  for (int cols : {16, 32})
    for (int warps : {1, 2, 4, 8, 16})
      for (int ks : {1, 2, 4, 8, 16})
        if (ks <= warps && warps % ks == 0) out.push_back({cols, warps, ks});
  return out;
}

}  // namespace

std::vector<GemvTableEntry> gemv_autotune(const TuneOptions& opts) {
  if (!available()) fail("tune", "no usable CUDA device (need compute capability 9.0)");
  const int cc = device_cc();
  std::vector<std::string> classes = opts.classes.empty() ? gemv_shape_classes() : opts.classes;
  std::vector<GemvTableEntry> table;
  std::mt19937_64 rng(12345);
  for (const auto& cls : classes) {
    std::int64_t n = 0, k = 0;
    gemv_class_representative(cls, &n, &k);
    const std::size_t pb = static_cast<std::size_t>(n) * k / 2, sb = static_cast<std::size_t>(n) * k / 16;
    const std::size_t copies = std::max<std::size_t>(1, (std::size_t{256} << 20) / (pb + sb) + 1);
    // Random packed bytes and valid scales (E4M3 0x20..0x4F: 2^-3 .. ~30), one host copy.
    std::vector<std::uint8_t> hp(pb), hs(sb);
    for (std::size_t i = 0; i < pb; i += 8) {
      const std::uint64_t r = rng();
      for (std::size_t b = 0; b < 8 && i + b < pb; ++b) hp[i + b] = static_cast<std::uint8_t>(r >> (8 * b));
    }
    for (auto& s : hs) s = static_cast<std::uint8_t>(0x20 + rng() % 0x30);
    std::vector<void*> dp(copies), ds(copies);
    for (std::size_t c = 0; c < copies; ++c) {
      ck(cudaMalloc(&dp[c], pb), "cudaMalloc weights");
      ck(cudaMalloc(&ds[c], sb), "cudaMalloc scales");
      ck(cudaMemcpy(dp[c], hp.data(), pb, cudaMemcpyHostToDevice), "copy weights");
      ck(cudaMemcpy(ds[c], hs.data(), sb, cudaMemcpyHostToDevice), "copy scales");
    }
    std::vector<std::uint16_t> hx(static_cast<std::size_t>(k));
    for (auto& v : hx) v = static_cast<std::uint16_t>(0x3C00 + rng() % 0x300);  // bf16 ~[0.0078, 1)
    void *dx = nullptr, *dy = nullptr;
    ck(cudaMalloc(&dx, k * 2), "cudaMalloc x");
    ck(cudaMalloc(&dy, n * 2), "cudaMalloc y");
    ck(cudaMemcpy(dx, hx.data(), k * 2, cudaMemcpyHostToDevice), "copy x");
    ck(cudaDeviceSynchronize(), "copy x");  // the timing stream is non-blocking
    cudaStream_t st;
    ck(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
    const MatrixView xv{dx, DType::kBF16, 1, k, k};
    const MatrixView yv{dy, DType::kBF16, 1, n, n};
    const int launches = static_cast<int>(std::max<std::size_t>(copies, static_cast<std::size_t>(opts.reps)));

    GemvTableEntry best;
    best.cc = cc;
    best.cls = cls;
    best.us = 1e30;
    for (const GemvTile& tile : candidates()) {
      const double med = graph_us_per_call(st, launches, 5, [&](int i) {
        const std::size_t c = static_cast<std::size_t>(i) % copies;
        WeightView wv{static_cast<const std::uint8_t*>(dp[c]), static_cast<const std::uint8_t*>(ds[c]), 1.0f, n, k};
        quantized_matmul_tile(xv, wv, yv, st, &tile);
      });
      if (opts.verbose)
        std::printf("  %-16s N=%-6lld K=%-6lld cols/warp=%-2d warps=%-2d k_split=%-2d  %9.2f us  %7.0f GB/s\n",
                    cls.c_str(), static_cast<long long>(n), static_cast<long long>(k), tile.cols_per_warp,
                    tile.warps_per_block, tile.k_split, med, (pb + sb + 2.0 * (n + k)) / med / 1e3);
      if (med < best.us) {
        best.us = med;
        best.tile = tile;
      }
    }
    if (opts.verbose)
      std::printf("best %-16s cols/warp=%d warps=%d k_split=%d  %.2f us\n", cls.c_str(), best.tile.cols_per_warp,
                  best.tile.warps_per_block, best.tile.k_split, best.us);
    std::fflush(stdout);
    table.push_back(best);
    cudaStreamDestroy(st);
    cudaFree(dx);
    cudaFree(dy);
    for (std::size_t c = 0; c < copies; ++c) {
      cudaFree(dp[c]);
      cudaFree(ds[c]);
    }
  }
  return table;
}

}  // namespace nvfp4::cuda
