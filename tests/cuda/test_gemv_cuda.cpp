// tests/cuda/test_gemv_cuda.cpp -- the canonical-layout CUDA GEMV and the dense panel + cuBLAS path
// against the oracle (quantized_matmul_ref / dequantize_ref). The other kernels' tests are beside
// it: test_tuning_cuda.cpp, test_repack_cuda.cpp, test_rgemm_cuda.cpp, test_wgemm_cuda.cpp; the
// helpers are in cuda_test_util.h. Without a GPU every GPU test skips with "no CUDA device: ..."; the tuning
// table tests need no GPU and always run.
//
// Tolerance (documented in docs/perf-cuda.md): the kernel dequantizes exactly and sums in fp32
// on the tensor cores in another order than the oracle, so
//   |y - ref| <= out_ulp * |ref| + 1e-5 * sum_k |x_k w_k|
//                 + out_min_step
// with out_ulp = 2^-7 (bf16 output), 2^-10 (fp16), 0 (fp32): both sides round their fp32 sum once
// to the output type and may land one ulp apart; out_min_step (2^-24 fp16) covers results in the
// output's subnormal range (found on H200: fp16 y = 3.2e-6 rounds on the 2^-24 grid).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/gemm_nvfp4_cublas.h"
#include "kernels/cuda/tuning_sm90.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

#if defined(NVFP4_HAVE_CUDA)
#include <cuda_runtime.h>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/cuda_host.h"
#include "kernels/cuda/graph_timing.h"
#include "kernels/cuda/matmul_cuda.h"
#endif

namespace nvfp4 {
namespace {
#if !defined(NVFP4_HAVE_CUDA)
TEST(Cuda, Backend) {
  EXPECT_FALSE(cuda::compiled());
  GTEST_SKIP() << "this build has no CUDA backend (nvcc not found at configure time): CUDA tests not compiled";
}
#else


using namespace cudatest;  // NOLINT: the shared helpers (cuda_test_util.h)

// A launch that throws while graph_us_per_call captures (the tuner's and the bench's timing):
// the capture is ended and the stream takes work again. Before, it stayed capturing, and every
// later operation on it, or a cudaFree from this thread, was refused.
TEST(CudaGraphTiming, ALaunchThatThrowsEndsTheCapture) {
  REQUIRE_GPU();
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 1024), cudaSuccess);
  EXPECT_THROW(cuda::graph_us_per_call(st, 4, 2,
                                       [&](int i) {
                                         if (i == 2) fail("test", "launch 2 throws");
                                         ASSERT_EQ(cudaMemsetAsync(buf, i, 1024, st), cudaSuccess);
                                       }),
               Error);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  ASSERT_EQ(cudaStreamIsCapturing(st, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EXPECT_EQ(cudaMemsetAsync(buf, 7, 1024, st), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  EXPECT_GT(cuda::graph_us_per_call(st, 2, 2, [&](int) { cudaMemsetAsync(buf, 1, 1024, st); }), 0.0);
  EXPECT_EQ(cudaFree(buf), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(st), cudaSuccess);
}

TEST(CudaGemv, OneHotRecoversDequantizedWeightsExactly) {
  REQUIRE_GPU();
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (auto nk : {std::pair<std::int64_t, std::int64_t>{37, 48}, {131, 4112}, {64, 16}, {40, 256}}) {
      const std::int64_t n = nk.first, k = nk.second;
      const std::uint64_t seed = 1000 + n * 7 + k;
      SCOPED_TRACE("seed " + std::to_string(seed) + " dtype " + dtype_name(dt) + " N=" + std::to_string(n) +
                   " K=" + std::to_string(k));
      const QuantizedWeight qw = random_weight(n, k, seed);
      Tensor deq(dt, {n, k});
      dequantize_ref(qw.view(), MatrixView{deq.data(), dt, n, k, k});
      // 16 one-hot rows per launch; every k for small K, a spread of k otherwise.
      std::vector<std::int64_t> ks;
      for (std::int64_t kk = 0; kk < k; kk += (k <= 256 ? 1 : 7)) ks.push_back(kk);
      ks.push_back(k - 1);
      ASSERT_NO_FATAL_FAILURE(expect_one_hot_exact(deq, n, k, ks, [&](Tensor& x, Tensor& y, std::int64_t rows) {
        cuda::quantized_matmul_host(MatrixView{x.data(), dt, rows, k, k}, qw.view(), MatrixView{y.data(), dt, rows, n, n});
      }));
    }
  }
}

TEST(CudaGemv, MatchesOracleAcrossShapesAndDtypes) {
  REQUIRE_GPU();
  const std::int64_t ms[] = {1, 2, 3, 8, 16, 33};
  const std::pair<std::int64_t, std::int64_t> nks[] = {{1, 16}, {7, 32}, {37, 48}, {131, 4112}, {257, 1024}, {4099, 512}, {61, 192}};
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32})
    for (const auto& nk : nks)
      for (std::int64_t m : ms) {
        const std::uint64_t seed = 77 + 13 * m + nk.first * 3 + nk.second;
        const std::string what = std::string("seed ") + std::to_string(seed) + " " + dtype_name(dt) + " M=" +
                                 std::to_string(m) + " N=" + std::to_string(nk.first) + " K=" + std::to_string(nk.second);
        SCOPED_TRACE(what);
        const QuantizedWeight qw = random_weight(nk.first, nk.second, seed);
        Tensor x = random_x(dt, m, nk.second, seed + 1);
        Tensor y = nan_tensor(dt, m, nk.first);
        const MatrixView xv{x.data(), dt, m, nk.second, nk.second}, yv{y.data(), dt, m, nk.first, nk.first};
        cuda::quantized_matmul_host(xv, qw.view(), yv);
        check_against_oracle(xv, qw, yv, what);
      }
}

// Regression guard for the H200 bench run where N=151936 K=2560 produced non-finite outputs.
TEST(CudaGemv, LargeNLmHeadShape) {
  REQUIRE_GPU();
  const std::int64_t n = 151936, k = 2560;
  const QuantizedWeight qw = random_weight(n, k, 151936);
  for (DType dt : {DType::kBF16}) {
    Tensor x = random_x(dt, 1, k, 7);
    Tensor y = nan_tensor(dt, 1, n);
    const MatrixView xv{x.data(), dt, 1, k, k}, yv{y.data(), dt, 1, n, n};
    cuda::quantized_matmul_host(xv, qw.view(), yv);
    check_against_oracle(xv, qw, yv, "seed 151936 N=151936 K=2560 M=1");
  }
}

TEST(CudaGemv, StridedPaddedActivationsAndOutputGaps) {
  REQUIRE_GPU();
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32})
    for (std::int64_t m : {1, 5, 17}) {
      const std::int64_t n = 97, k = 4112, kx = k - 5, xs = k + 3, ys = n + 2;
      const std::uint64_t seed = 4242 + m;
      const std::string what = std::string("seed ") + std::to_string(seed) + " " + dtype_name(dt) + " M=" + std::to_string(m);
      SCOPED_TRACE(what);
      const QuantizedWeight qw = random_weight(n, k, seed);
      Tensor x = random_x(dt, m, xs, seed + 1);
      Tensor y = nan_tensor(dt, m, ys);
      const MatrixView xv{x.data(), dt, m, kx, xs}, yv{y.data(), dt, m, n, ys};
      cuda::quantized_matmul_host(xv, qw.view(), yv);
      check_against_oracle(xv, qw, yv, what);
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t j = n; j < ys; ++j) EXPECT_TRUE(std::isnan(y.get(r * ys + j))) << "gap written at " << r << "," << j;
    }
}

TEST(CudaGemv, EveryTileGivesTheSameFunction) {
  REQUIRE_GPU();
  // K = 4096, 192 (a partial last 128-k step) at M = 1: the weights-as-A kernel; M > 1 and
  // K = 4112, 160 (K % 64 != 0): the first kernel. legacy = true forces the first kernel at M = 1.
  for (std::int64_t k : {4096, 192, 4112, 160}) {
    for (std::int64_t m : {1, 4, 16}) {
      const std::int64_t n = 203;
      const std::uint64_t seed = 9000 + k + m;
      const QuantizedWeight qw = random_weight(n, k, seed);
      Tensor x = random_x(DType::kBF16, m, k, seed + 1);
      for (int cols : {16, 32})
        for (int warps : {1, 2, 4, 8, 16})
          for (int ks : {1, 2, 4, 8, 16})
            for (bool legacy : {false, true}) {
            if (ks > warps || warps % ks) continue;
            if (legacy && (k != 4096 || m != 1)) continue;
            cuda::GemvTile tile{cols, warps, ks};
            tile.legacy = legacy;
            const std::string what = "seed " + std::to_string(seed) + " K=" + std::to_string(k) + " M=" + std::to_string(m) +
                                     " tile " + std::to_string(cols) + "/" + std::to_string(warps) + "/" + std::to_string(ks) +
                                     (legacy ? " legacy" : "");
            SCOPED_TRACE(what);
            Tensor y = nan_tensor(DType::kBF16, m, n);
            const MatrixView xv{x.data(), DType::kBF16, m, k, k}, yv{y.data(), DType::kBF16, m, n, n};
            cuda::quantized_matmul_host(xv, qw.view(), yv, &tile);
            check_against_oracle(xv, qw, yv, what);
          }
    }
  }
}

TEST(CudaGemv, DeviceApiOnAStreamAndBadInput) {
  REQUIRE_GPU();
  const std::int64_t m = 2, n = 300, k = 512;
  const QuantizedWeight qw = random_weight(n, k, 5);
  Tensor x = random_x(DType::kBF16, m, k, 6);
  Tensor y = nan_tensor(DType::kBF16, m, n);
  void *dx, *dy, *dp, *ds;
  ASSERT_EQ(cudaMalloc(&dx, x.bytes.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, y.bytes.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dp, qw.packed.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ds, qw.scales.size()), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), y.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dp, qw.packed.data(), qw.packed.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(ds, qw.scales.data(), qw.scales.size(), cudaMemcpyHostToDevice);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  const WeightView dw{static_cast<std::uint8_t*>(dp), static_cast<std::uint8_t*>(ds), qw.tensor_scale(), n, k};
  cuda::quantized_matmul(MatrixView{dx, DType::kBF16, m, k, k}, dw, MatrixView{dy, DType::kBF16, m, n, n}, st);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  cudaMemcpy(y.data(), dy, y.bytes.size(), cudaMemcpyDeviceToHost);
  check_against_oracle(MatrixView{x.data(), DType::kBF16, m, k, k}, qw, MatrixView{y.data(), DType::kBF16, m, n, n}, "stream");
  // Bad input: errors, never a crash.
  EXPECT_THROW(cuda::quantized_matmul(MatrixView{dx, DType::kBF16, m, k, k}, WeightView{dw.packed, dw.scales, 1.0f, n, 500},
                                      MatrixView{dy, DType::kBF16, m, n, n}, st),
               Error);  // K not a multiple of 16
  EXPECT_THROW(cuda::quantized_matmul(MatrixView{x.data(), DType::kBF16, m, k, k}, dw, MatrixView{dy, DType::kBF16, m, n, n}, st),
               Error);  // host activation pointer
  EXPECT_THROW(cuda::quantized_matmul(MatrixView{dx, DType::kBF16, m, k, k}, dw, MatrixView{dy, DType::kF16, m, n, n}, st),
               Error);  // dtype mismatch
  EXPECT_THROW(cuda::quantized_matmul(MatrixView{dx, DType::kBF16, m, k, k}, dw, MatrixView{dx, DType::kBF16, m, n, n}, st),
               Error);  // output on top of the activations (in place)
  EXPECT_THROW(cuda::quantized_matmul(MatrixView{dx, DType::kBF16, m, k, k}, dw, MatrixView{dp, DType::kBF16, m, n, n}, st),
               Error);  // output on top of the packed weights
  const cuda::GemvTile bad{24, 4, 1};
  EXPECT_THROW(cuda::quantized_matmul_tile(MatrixView{dx, DType::kBF16, m, k, k}, dw, MatrixView{dy, DType::kBF16, m, n, n}, st,
                                           &bad),
               Error);
  // M = 0: nothing to do, nothing touched.
  EXPECT_NO_THROW(cuda::quantized_matmul(MatrixView{dx, DType::kBF16, 0, k, k}, dw, MatrixView{dy, DType::kBF16, 0, n, n}, st));
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  cudaStreamDestroy(st);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dp);
  cudaFree(ds);
}

TEST(CudaGemv, PublicBackendRoute) {
  REQUIRE_GPU();
  const QuantizedWeight qw = random_weight(64, 64, 3);
  Tensor x = random_x(DType::kF32, 3, 64, 4);
  const Tensor y = quantized_matmul(x, qw, Backend::kCuda);
  check_against_oracle(MatrixView{const_cast<void*>(x.data()), DType::kF32, 3, 64, 64}, qw,
                       MatrixView{const_cast<void*>(y.data()), DType::kF32, 3, 64, 64}, "Backend::kCuda");
}

// Runs everywhere (CI has no GPU): available() and its reason agree, and without a usable GPU a
// call that asks for the CUDA backend fails with that reason, not with a CUDA error code.
TEST(CudaGemv, UnavailableSaysWhy) {
  const std::string why = cuda::unavailable_reason();
  EXPECT_EQ(cuda::available(), why.empty()) << why;
  std::printf("cuda::available() %d%s%s\n", cuda::available(), why.empty() ? "" : ": ", why.c_str());
  if (cuda::available()) return;
  const QuantizedWeight qw = random_weight(32, 64, 11);
  const Tensor x = random_x(DType::kBF16, 1, 64, 12);
  try {
    (void)quantized_matmul(x, qw, Backend::kCuda);
    ADD_FAILURE() << "Backend::kCuda ran without a usable GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

// Host code, runs everywhere: which GPUs a build's device code runs on (CUDA programming guide,
// binary and PTX compatibility).
TEST(CudaGemv, BuildTargetsAndTheGpusTheyRunOn) {
  const std::string dflt = "sm_90a,sm_80,compute_80";  // the default NVFP4_CUDA_GENCODE
  for (const int cc : {80, 86, 87, 89, 90, 100, 120}) EXPECT_TRUE(cuda::build_has_code_for(cc, dflt)) << cc;
  for (const int cc : {0, 61, 70, 75}) EXPECT_FALSE(cuda::build_has_code_for(cc, dflt)) << cc;
  EXPECT_TRUE(cuda::build_has_code_for(90, "sm_90a"));
  EXPECT_FALSE(cuda::build_has_code_for(86, "sm_90a"));   // a Hopper-only build on an A10
  EXPECT_FALSE(cuda::build_has_code_for(100, "sm_90a"));  // arch-specific: 9.0 only
  EXPECT_FALSE(cuda::build_has_code_for(100, "compute_90a"));
  EXPECT_TRUE(cuda::build_has_code_for(89, "sm_80"));     // same major, newer minor
  EXPECT_FALSE(cuda::build_has_code_for(90, "sm_80"));
  EXPECT_FALSE(cuda::build_has_code_for(80, "sm_86"));
  EXPECT_TRUE(cuda::build_has_code_for(90, "compute_80"));  // the portable check build on an H200
  EXPECT_TRUE(cuda::build_has_code_for(86, "sm_90a,compute_86"));
  EXPECT_FALSE(cuda::build_has_code_for(90, ""));
}

// The wgmma GEMM and the PDL launches run exactly where they can: an sm_90 GPU and a build with
// sm_90a code. Everywhere else (GPUs before Hopper, the portable build of scripts/device_cuda.sh
// "portable") the same calls take the portable kernels, which the other tests then check.
TEST(CudaGemv, HopperPathsExactlyOnSm90WithSm90aCode) {
  REQUIRE_GPU();
  const bool want = NVFP4_CUDA_SM90A == 1 && cuda::device_cc() == 90;
  EXPECT_EQ(cuda::hopper_paths(), want) << "compute capability " << cuda::device_cc() << ", sm_90a code "
                                        << NVFP4_CUDA_SM90A;
  std::printf("compute capability %d, build with sm_90a code: %d -> %s\n", cuda::device_cc(), NVFP4_CUDA_SM90A,
              want ? "Hopper paths (wgmma GEMM, PDL launches)" : "portable kernels only");
}

// Prefill (M > 16) goes through gemm_nvfp4_cublas.cu: dequantize to a dense panel + cuBLAS with
// alpha = tensor scale. One-hot rows must still recover the dequantized weights exactly, and
// random rows must match the oracle.
TEST(CudaGemm, PrefillPathOneHotAndOracle) {
  REQUIRE_GPU();
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    const std::int64_t n = 300, k = 4112, m = 40;
    const std::uint64_t seed = 5150 + static_cast<int>(dt);
    const std::string what = std::string("seed ") + std::to_string(seed) + " " + dtype_name(dt) + " M=40 N=300 K=4112";
    SCOPED_TRACE(what);
    const QuantizedWeight qw = random_weight(n, k, seed);
    Tensor deq(dt, {n, k});
    dequantize_ref(qw.view(), MatrixView{deq.data(), dt, n, k, k});
    Tensor x(dt, {m, k});
    for (std::int64_t r = 0; r < m; ++r) x.set(r * k + (r * 103) % k, 1.0f);
    Tensor y = nan_tensor(dt, m, n);
    cuda::quantized_matmul_host(MatrixView{x.data(), dt, m, k, k}, qw.view(), MatrixView{y.data(), dt, m, n, n});
    int bad = 0;
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t j = 0; j < n; ++j)
        if (!(y.get(r * n + j) == deq.get(j * k + (r * 103) % k)) && ++bad <= 5)
          ADD_FAILURE() << "one-hot y[" << r << "," << j << "] = " << y.get(r * n + j);
    ASSERT_EQ(bad, 0);
    Tensor xr = random_x(dt, 64, k, seed + 1);
    Tensor yr = nan_tensor(dt, 64, n);
    const MatrixView xv{xr.data(), dt, 64, k, k}, yv{yr.data(), dt, 64, n, n};
    cuda::quantized_matmul_host(xv, qw.view(), yv);
    check_against_oracle(xv, qw, yv, what + " random M=64");
  }
}

// The scratch pool keeps what a call used (here the panel + cuBLAS path: a dense panel and 32 MiB
// of cuBLAS workspace), release_scratch() gives it back once nothing is in flight, and the next
// call still works and takes it again.
TEST(CudaGemm, ScratchIsKeptAndCanBeReleased) {
  REQUIRE_GPU();
  const std::int64_t n = 300, k = 4112, m = 40;
  const QuantizedWeight qw = random_weight(n, k, 8080);
  Tensor x = random_x(DType::kF32, m, k, 8081);
  auto run = [&] {
    Tensor y = nan_tensor(DType::kF32, m, n);
    cuda::quantized_matmul_host(MatrixView{x.data(), DType::kF32, m, k, k}, qw.view(), MatrixView{y.data(), DType::kF32, m, n, n});
    check_against_oracle(MatrixView{x.data(), DType::kF32, m, k, k}, qw, MatrixView{y.data(), DType::kF32, m, n, n}, "seed 8080");
  };
  run();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_GE(cuda::scratch_bytes(), std::size_t{32} << 20) << "the pool keeps cuBLAS's workspace and the panel";
  cuda::release_scratch();
  EXPECT_EQ(cuda::scratch_bytes(), 0u) << "nothing in flight: everything goes back";
  run();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_GE(cuda::scratch_bytes(), std::size_t{32} << 20);
}

// Prefill weights larger than one dense panel: the same GEMM path with the panel lowered to 64
// and 128 weight rows (N = 300: 5 and 3 panels, the last one partial), against the oracle. The
// 256 MB default panel never splits at test sizes.
TEST(CudaGemm, PrefillInSeveralPanels) {
  REQUIRE_GPU();
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    const std::int64_t n = 300, k = 4112, m = 40;
    const int es = dtype_size(dt);
    const std::uint64_t seed = 6160 + static_cast<int>(dt);
    const QuantizedWeight qw = random_weight(n, k, seed);
    Tensor x = random_x(dt, m, k, seed + 1);
    const DeviceCopy dx(x.data(), static_cast<std::size_t>(m * k * es));
    const DeviceCopy dp(qw.packed.data(), qw.packed.size()), ds(qw.scales.data(), qw.scales.size());
    WeightView dw = qw.view();
    dw.packed = static_cast<const std::uint8_t*>(dp.p);
    dw.scales = static_cast<const std::uint8_t*>(ds.p);
    for (std::int64_t rows : {1, 64, 128}) {  // 1: rounded up to the 64-row minimum
      const std::string what = std::string("seed ") + std::to_string(seed) + " " + dtype_name(dt) +
                               " M=40 N=300 K=4112 panel of " + std::to_string(rows) + " rows";
      SCOPED_TRACE(what);
      Tensor y = nan_tensor(dt, m, n);
      const DeviceCopy dy(y.data(), static_cast<std::size_t>(m * n * es));
      cuda::gemm_nvfp4_dequant_cublas(MatrixView{dx.p, dt, m, k, k}, dw, MatrixView{dy.p, dt, m, n, n}, nullptr,
                                      rows * k * es);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      dy.back(y.data());
      check_against_oracle(MatrixView{x.data(), dt, m, k, k}, qw, MatrixView{y.data(), dt, m, n, n}, what);
    }
  }
}

#endif  // NVFP4_HAVE_CUDA

}  // namespace
}  // namespace nvfp4
