// kernels/cuda/autotune_sm90.cpp -- `nvfp4 tune`: time every instantiated GEMV tile on the
// present GPU, per shape class, and return the fastest as a tuning table.
//
// Method (METHOD.md): random weights (never zeros), rotated through >= 256 MiB of distinct
// copies so each launch streams from HBM, not the 60 MB L2; back-to-back launches captured in a
// CUDA graph so the time is the kernel's, without launch gaps; median of several replays.
// Tuned at M = 1, bf16 activations (the decode case); M <= 16 runs the same weight stream.
// Each layout is timed with its own kernel: canonical weights through quantized_matmul_tile,
// and (repacked mode) the same random weights repacked on the device once per copy
// (repack_for_gemv_sm90, not timed) through quantized_matmul_repacked_tile (gemv_nvfp4_rp_kernel).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cuda/device_owned.h"
#include "kernels/cuda/gemv_nvfp4_sm90.h"
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

// Every instantiated tile. k_split above the number of K pieces a warp can own (64-k steps:
// canonical / 128-k chunk pairs: repacked) leaves warps idle: skipped.
std::vector<GemvTile> candidates(std::int64_t k, GemvLayout layout) {
  const std::int64_t pieces = layout == GemvLayout::kRepacked ? k / 128 : k / 64;
  std::vector<GemvTile> out;
  for (int cols : {16, 32})
    for (int warps : {1, 2, 4, 8, 16})
      for (int ks : {1, 2, 4, 8, 16})
        if (ks <= warps && warps % ks == 0 && (ks == 1 || ks <= pieces)) out.push_back({cols, warps, ks});
  return out;
}

}  // namespace

std::vector<GemvTableEntry> gemv_autotune(const TuneOptions& opts) {
  if (!available()) fail("tune", unavailable_reason());
  const int cc = device_cc();
  // Before Hopper: no overlapped launch to time, and fewer bytes of shared memory per block.
  const bool pdl = hopper_paths();
  int dev = 0, smem_optin = 0;
  ck(cudaGetDevice(&dev), "cudaGetDevice");
  ck(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "shared memory per block");
  std::vector<std::string> classes = opts.classes;
  if (classes.empty()) {
    // All classes, minus exact shapes that are a bucket's representative (tuned there already;
    // the bucket entry then serves that shape).
    for (const auto& c : gemv_shape_classes()) {
      bool dup = false;
      if (c.rfind("exact/", 0) == 0)
        for (const auto& b : gemv_shape_classes()) {
          std::int64_t bn = 0, bk = 0;
          if (b.rfind("exact/", 0) == 0) continue;
          gemv_class_representative(b, &bn, &bk);
          dup = dup || gemv_exact_class(bn, bk) == c;
        }
      if (!dup) classes.push_back(c);
    }
  }
  std::vector<GemvTableEntry> table;
  std::mt19937_64 rng(12345);
  for (const auto& cls : classes) {
    std::int64_t n = 0, k = 0;
    gemv_class_representative(cls, &n, &k);
    const std::size_t pb = static_cast<std::size_t>(n) * k / 2, sb = static_cast<std::size_t>(n) * k / 16;
    const std::size_t copies =
        std::max<std::size_t>(1, (static_cast<std::size_t>(std::max(1, opts.rotation_mib)) << 20) / (pb + sb) + 1);
    // Random packed bytes and valid scales (E4M3 0x20..0x4F: 2^-3 .. ~30), one host copy.
    std::vector<std::uint8_t> hp(pb), hs(sb);
    for (std::size_t i = 0; i < pb; i += 8) {
      const std::uint64_t r = rng();
      for (std::size_t b = 0; b < 8 && i + b < pb; ++b) hp[i + b] = static_cast<std::uint8_t>(r >> (8 * b));
    }
    for (auto& s : hs) s = static_cast<std::uint8_t>(0x20 + rng() % 0x30);
    // Owned (device_owned.h): a throw anywhere below (out of memory, a failed launch) frees them.
    std::vector<DeviceBuffer> dp, ds;
    for (std::size_t c = 0; c < copies; ++c) {
      dp.emplace_back(pb, "tune", "weights");
      ds.emplace_back(sb, "tune", "scales");
      ck(cudaMemcpy(dp[c].get(), hp.data(), pb, cudaMemcpyHostToDevice), "copy weights");
      ck(cudaMemcpy(ds[c].get(), hs.data(), sb, cudaMemcpyHostToDevice), "copy scales");
    }
    std::vector<std::uint16_t> hx(static_cast<std::size_t>(16 * k));  // up to 16 rows
    for (auto& v : hx) v = static_cast<std::uint16_t>(0x3C00 + rng() % 0x300);  // bf16 ~[0.0078, 1)
    const DeviceBuffer dxb(static_cast<std::size_t>(16 * k * 2), "tune", "activations");
    const DeviceBuffer dyb(static_cast<std::size_t>(16 * n * 2), "tune", "output");
    void* dx = dxb.get();
    void* dy = dyb.get();
    ck(cudaMemcpy(dx, hx.data(), 16 * k * 2, cudaMemcpyHostToDevice), "copy x");
    ck(cudaDeviceSynchronize(), "copy x");  // the timing stream is non-blocking
    const OwnedStream stream("tune");
    const cudaStream_t st = stream.get();
    const int launches = static_cast<int>(std::max<std::size_t>(copies, static_cast<std::size_t>(opts.reps)));

    for (const GemvLayout layout : opts.layouts) {
      const bool rp = layout == GemvLayout::kRepacked;
      if (rp && !repack_for_gemv_sm90_supported(n, k)) continue;  // repacked needs N%16, K%128
      std::vector<DeviceBuffer> rpk, rsc;
      for (std::size_t c = 0; rp && c < copies; ++c) {
        rpk.emplace_back(pb, "tune", "repacked weights");
        rsc.emplace_back(sb, "tune", "repacked scales");
        repack_for_gemv_sm90(WeightView{dp[c].as<const std::uint8_t>(), ds[c].as<const std::uint8_t>(), 1.0f, n, k},
                             rpk[c].as<std::uint8_t>(), rsc[c].as<std::uint8_t>(), st);
      }
      ck(cudaStreamSynchronize(st), "repack");
      // Repacked: M = 1 for the M <= 8 kernel (m_max 8), M = 16 for the M > 8 one (m_max 16).
      std::vector<int> ms = {1};
      if (rp && opts.repacked_m16) ms.push_back(16);
      for (const int m : ms) {
        const MatrixView xv{dx, DType::kBF16, m, k, k};
        const MatrixView yv{dy, DType::kBF16, m, n, n};
        GemvTableEntry best;
        best.cc = cc;
        best.cls = cls;
        best.layout = layout;
        best.m_max = rp ? (m == 1 ? 8 : 16) : 0;
        best.us = 1e30;
        // Repacked tiles are timed under every launch a caller can get (docs/perf-cuda.md 18):
        // plain, overlapped (PDL, the API default where the entry allows it) and, at M = 1,
        // overlapped with the weights read before the wait. A tile that leaves room on the SMs
        // lets the next GEMV's blocks become resident early, so the best tile depends on the
        // launch.
        // At M = 16 the early launch exists for 16 rows per warp only (32-row tiles are not
        // timed that way: the call would run their ordinary launch).
        const bool with_early = rp && pdl && opts.repacked_early;
        GemvTableEntry best_early = best;
        best_early.early = true;
        auto time_tile = [&](const GemvTile& tile, const RepackedMatmulOptions& o) {
          return graph_us_per_call(st, launches, 5, [&](int i) {
            const std::size_t c = static_cast<std::size_t>(i) % copies;
            if (rp) {
              const RepackedWeightView wv{rpk[c].as<const std::uint8_t>(), rsc[c].as<const std::uint8_t>(), 1.0f, n, k};
              quantized_matmul_repacked_tile(xv, wv, yv, st, &tile, nullptr, o);
            } else {
              const WeightView wv{dp[c].as<const std::uint8_t>(), ds[c].as<const std::uint8_t>(), 1.0f, n, k};
              quantized_matmul_tile(xv, wv, yv, st, &tile);
            }
          });
        };
        RepackedMatmulOptions plain, overlapped, early;
        plain.overlapped_launch = false;
        early.weights_read_early = true;
        GemvArgs la;  // the launch's shared memory: only the canonical M = 1 kernel's depends on the tile
        la.packed = dp[0].as<const std::uint8_t>();
        la.scales = ds[0].as<const std::uint8_t>();
        la.n = n;
        la.k = k;
        la.m_rows = m;
        for (GemvTile tile : candidates(k, layout)) {
          if (!rp && gemv_nvfp4_sm90_smem_bytes(la, tile) > static_cast<std::size_t>(smem_optin)) continue;
          const double p_us = time_tile(tile, plain);
          const double o_us = rp && pdl ? time_tile(tile, overlapped) : p_us;
          const bool early_here = with_early && (m == 1 || tile.cols_per_warp == 16);
          const double e_us = early_here ? time_tile(tile, early) : 1e30;
          // A 2% margin: near-ties (tiny shapes differ by ~0.01 us run to run) keep the
          // overlapped launch; only a measurably slower one is refused (on H200 a many-block
          // grid was 7-11% slower with it).
          tile.overlap_ok = !rp || o_us <= 1.02 * p_us;  // canonical: no overlapped launch, field unused
          const double eff = rp && tile.overlap_ok ? o_us : p_us;
          if (opts.verbose) {
            std::fprintf(stderr, "  %-9s %-18s M=%-2d N=%-6lld K=%-6lld cols/warp=%-2d warps=%-2d k_split=%-2d  plain %8.2f us  %6.0f GB/s",
                        gemv_layout_name(layout), cls.c_str(), m, static_cast<long long>(n), static_cast<long long>(k),
                        tile.cols_per_warp, tile.warps_per_block, tile.k_split, p_us, (pb + sb + 2.0 * (n + k)) / p_us / 1e3);
            if (rp) std::fprintf(stderr, "  overlapped %8.2f", o_us);
            if (early_here) std::fprintf(stderr, "  early %8.2f", e_us);
            std::fprintf(stderr, "\n");
          }
          if (eff < best.us) {
            best.us = eff;
            best.tile = tile;
          }
          if (with_early && e_us < best_early.us) {
            best_early.us = e_us;
            best_early.tile = tile;
            best_early.tile.overlap_ok = true;
          }
        }
        if (opts.verbose) {
          std::fprintf(stderr, "best %-9s %-18s M=%-2d cols/warp=%d warps=%d k_split=%d  %.2f us (%s launch)\n", gemv_layout_name(layout),
                      cls.c_str(), m, best.tile.cols_per_warp, best.tile.warps_per_block, best.tile.k_split, best.us,
                      rp ? (best.tile.overlap_ok ? "overlapped" : "plain") : "plain");
          if (with_early)
            std::fprintf(stderr, "best %-9s %-18s M=%-2d cols/warp=%d warps=%d k_split=%d  %.2f us (early launch: %s)\n",
                        gemv_layout_name(layout), cls.c_str(), m, best_early.tile.cols_per_warp,
                        best_early.tile.warps_per_block, best_early.tile.k_split, best_early.us,
                        best_early.us < 0.98 * best.us ? "entry written" : "not 2% faster, no entry");
        }
        std::fflush(stderr);
        table.push_back(best);
        // An early entry only where that launch is faster than the ordinary entry's by more than
        // the 2% margin; elsewhere an early request falls back to the ordinary entry and launch.
        if (with_early && best_early.us < 0.98 * best.us) table.push_back(best_early);
        else if (with_early && opts.early_rejected) opts.early_rejected->push_back(best_early);
      }
    }
  }
  return table;
}

}  // namespace nvfp4::cuda
