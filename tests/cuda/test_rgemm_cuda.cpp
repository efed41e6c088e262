// tests/cuda/test_rgemm_cuda.cpp -- the repacked-weight GEMM for batched decode
// (gemm_nvfp4_sm90_repacked.cu) and the route between it and the repacked GEMV.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/tuning_sm90.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"
#include "nvfp4/ops.h"

#if defined(NVFP4_HAVE_CUDA)
#include <cuda_runtime.h>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/matmul_cuda.h"
#endif

namespace nvfp4 {
namespace {
#if defined(NVFP4_HAVE_CUDA)
using namespace cudatest;  // NOLINT: the shared helpers (cuda_test_util.h)

// The repacked GEMM (more than 16 virtual rows, gemm_nvfp4_sm90_repacked.cu), every block shape:
// one-hot fp32 rows (3 pieces each: m-blocks of 21 or 10 real rows) recover dequantize_ref
// exactly, one-hot fp16 rows (the fp16 mma) its fp16 rounding; random rows match the oracle for every dtype, at M that fill an m-block, leave one
// row over, and span several; a K split that does not divide the chunk pairs (3, 7) and one
// with more splits than pairs (64) give the same function; N not a multiple of the block's rows
// (272 = 17 tiles); padded strided rows; repeated calls and a graph replay are bit-identical
// (the split's partials are summed in a fixed order); a block shape that is not compiled is an error.
void run_rgemm(const DevWeight& dw, const Tensor& x, Tensor& y, std::int64_t m, const cuda::RgemmTile* tile,
               std::int64_t x_cols = -1, std::int64_t x_stride = -1) {
  const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
  const std::int64_t cols = x_cols < 0 ? dw.k : x_cols, stride = x_stride < 0 ? dw.k : x_stride;
  std::string name;
  cuda::quantized_matmul_repacked_rgemm(MatrixView{dx.p, x.dtype, m, cols, stride}, dw.view(),
                                        MatrixView{dy.p, y.dtype, m, dw.n, dw.n}, nullptr, tile, &name);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(name.rfind("gemm_nvfp4_sm90_rg_", 0), 0u) << name;
  dy.back(y.data());
}

TEST(CudaRgemm, OneHotOracleEveryTileDeterministic) {
  REQUIRE_GPU();
  const cuda::RgemmTile tiles[] = {{4, 1}, {8, 1}, {4, 3}, {8, 7}, {8, 64}};
  auto tile_name = [](const cuda::RgemmTile* t) {
    return t ? "nb" + std::to_string(t->nb) + "/ks" + std::to_string(t->k_split)
             : std::string("built-in");
  };
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{16, 128}, {48, 256}, {272, 2560}, {1040, 1024}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 5150 + n * 7 + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const DevWeight dw(qw);
    Tensor deq(DType::kF32, {n, k});
    dequantize_ref(qw.view(), MatrixView{deq.data(), DType::kF32, n, k, k});
    const std::int64_t rows = 40;
    Tensor xo(DType::kF32, {rows, k});
    for (std::int64_t r = 0; r < rows; ++r) xo.set(r * k + (r * 131 + 7) % k, 1.0f);
    for (const cuda::RgemmTile* t : {static_cast<const cuda::RgemmTile*>(nullptr), &tiles[0], &tiles[1], &tiles[2], &tiles[3], &tiles[4]}) {
      Tensor y = nan_tensor(DType::kF32, rows, n);
      run_rgemm(dw, xo, y, rows, t);
      const int bad = one_hot_mismatches(
          y, rows, n, [&](std::int64_t r, std::int64_t j) { return deq.get(j * k + (r * 131 + 7) % k); }, tile_name(t));
      ASSERT_EQ(bad, 0) << tile_name(t);
      {
        Tensor xh(DType::kF16, {rows, k});
        for (std::int64_t r = 0; r < rows; ++r) xh.set(r * k + (r * 131 + 7) % k, 1.0f);
        Tensor yh = nan_tensor(DType::kF16, rows, n);
        run_rgemm(dw, xh, yh, rows, t);
        const int bad16 = one_hot_mismatches(
            yh, rows, n,
            [&](std::int64_t r, std::int64_t j) { return f16_to_f32(f32_to_f16(deq.get(j * k + (r * 131 + 7) % k))); },
            "fp16 " + tile_name(t));
        ASSERT_EQ(bad16, 0) << tile_name(t);
      }
      for (const std::int64_t m : {17, 64, 65, 130}) {
        Tensor x = random_x(DType::kBF16, m, k, seed + m);
        Tensor yb = nan_tensor(DType::kBF16, m, n);
        run_rgemm(dw, x, yb, m, t);
        check_against_oracle(MatrixView{x.data(), DType::kBF16, m, k, k}, qw, MatrixView{yb.data(), DType::kBF16, m, n, n},
                             "rgemm bf16 " + tile_name(t) + " M=" + std::to_string(m));
        Tensor y2 = nan_tensor(DType::kBF16, m, n);
        run_rgemm(dw, x, y2, m, t);
        ASSERT_TRUE(yb.bytes == y2.bytes) << tile_name(t) << " M=" << m << ": a second call gave other bits";
      }
      for (const DType dt : {DType::kF16, DType::kF32}) {
        const std::int64_t m = 23;  // 23 / 69 virtual rows
        Tensor x = random_x(dt, m, k, seed + 3 * m);
        if (dt == DType::kF32)
          for (std::int64_t i = 0; i < x.numel(); i += 3) x.set(i, x.get(i) * (1.0f + 0x1p-20f));
        Tensor yr = nan_tensor(dt, m, n);
        run_rgemm(dw, x, yr, m, t);
        check_against_oracle(MatrixView{x.data(), dt, m, k, k}, qw, MatrixView{yr.data(), dt, m, n, n},
                             std::string("rgemm ") + dtype_name(dt) + " " + tile_name(t));
      }
    }
    // Padded, strided bf16 rows (x.cols = K - 8, row stride K + 24): through the prepared rows.
    {
      const std::int64_t m = 33, stride = k + 24, cols = k - 8;
      Tensor x = random_x(DType::kBF16, m, stride, seed + 99);
      Tensor y = nan_tensor(DType::kBF16, m, n);
      run_rgemm(dw, x, y, m, &tiles[2], cols, stride);
      check_against_oracle(MatrixView{x.data(), DType::kBF16, m, cols, stride}, qw, MatrixView{y.data(), DType::kBF16, m, n, n},
                           "rgemm padded strided rows");
    }
    // A graph replay gives the direct call's bits.
    expect_stream_and_graph_identical(qw, random_x(DType::kBF16, 48, k, seed + 5), "rgemm",
                                      [&](const MatrixView& xv, const MatrixView& yv, cudaStream_t st) {
                                        cuda::quantized_matmul_repacked_rgemm(xv, dw.view(), yv, st, &tiles[3]);
                                      });
  }
  // A bad block shape is an error naming it.
  const QuantizedWeight qw = random_weight(16, 128, 3);
  const DevWeight dw(qw);
  const Tensor x = random_x(DType::kBF16, 20, 128, 3);
  Tensor y = nan_tensor(DType::kBF16, 20, 16);
  for (const cuda::RgemmTile bad : {cuda::RgemmTile{6, 1}, cuda::RgemmTile{8, 0}, cuda::RgemmTile{4, 65}})
    EXPECT_THROW(run_rgemm(dw, x, y, 20, &bad), Error);
}

// A small GEMM run of each compiled block shape, with and without the K split's second kernel:
// sized for compute-sanitizer racecheck (scripts/device_cuda.sh sanitize), which checks the
// cp.async ring's barrier discipline and the reuse of the stages for the epilogue.
TEST(CudaRgemm, SmallRunsForTheSanitizers) {
  REQUIRE_GPU();
  const std::uint64_t seed = 6006;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 272, k = 1024, m = 70;
  const QuantizedWeight qw = random_weight(n, k, seed);
  const DevWeight dw(qw);
  const Tensor x = random_x(DType::kBF16, m, k, seed + 1);
  for (const cuda::RgemmTile t : {cuda::RgemmTile{4, 3}, cuda::RgemmTile{8, 1}}) {
    Tensor y = nan_tensor(DType::kBF16, m, n);
    run_rgemm(dw, x, y, m, &t);
    Tensor xc = x;
    check_against_oracle(MatrixView{xc.data(), DType::kBF16, m, k, k}, qw, MatrixView{y.data(), DType::kBF16, m, n, n},
                         "rgemm nb" + std::to_string(t.nb) + " ks" + std::to_string(t.k_split));
  }
}

// The public repacked call's route by virtual rows. Large weights (N x K > kRpWideMaxWeights):
// the GEMV in launches of 16 up to 24 virtual rows, the GEMM from 25 (kRgemmMinVirtualRows):
// bf16 and fp16 M = 24 / 25 (the GEMV reads fp16 rows as they are), fp32 M = 8 / 9 (3 pieces).
// Small weights: one wide GEMV launch for 17..32 virtual rows, the GEMM from 33: bf16 and fp16
// M = 16 / 17 / 32 / 33, fp32 M = 5 / 6 / 10 / 11. Scales that are only 4-byte aligned keep the
// GEMV. Results match the oracle on the small weights (the large ones check the route only).
TEST(CudaRgemm, PublicRouteByVirtualRows) {
  REQUIRE_GPU();
  const std::uint64_t seed = 2525;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 64, k = 256;
  const QuantizedWeight qw = random_weight(n, k, seed);
  const DevWeight dw(qw);
  ASSERT_GT(std::int64_t{4112} * 4096, cuda::kRpWideMaxWeights);
  const QuantizedWeight big = random_weight(4112, 4096, seed + 1);
  const DevWeight dbig(big);
  auto route = [&](const DevWeight& d, DType dt, std::int64_t m, const QuantizedWeight* check) {
    const Tensor x = random_x(dt, m, d.k, seed + m);
    Tensor y = nan_tensor(dt, m, d.n);
    const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
    std::string name;
    cuda::quantized_matmul_repacked_tile(MatrixView{dx.p, dt, m, d.k, d.k}, d.view(), MatrixView{dy.p, dt, m, d.n, d.n},
                                         nullptr, nullptr, &name);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (check) {
      dy.back(y.data());
      Tensor xc = x;
      check_against_oracle(MatrixView{xc.data(), dt, m, d.k, d.k}, *check, MatrixView{y.data(), dt, m, d.n, d.n},
                           std::string("route ") + dtype_name(dt) + " M=" + std::to_string(m));
    }
    return name;
  };
  for (const auto& [dt, m_gemv] : {std::pair<DType, std::int64_t>{DType::kBF16, 24}, {DType::kF16, 24}, {DType::kF32, 8}}) {
    const std::string a = route(dbig, dt, m_gemv, nullptr), b = route(dbig, dt, m_gemv + 1, nullptr);
    EXPECT_EQ(a.rfind("gemv_nvfp4_sm90_rp_", 0), 0u) << dtype_name(dt) << " M=" << m_gemv << " ran " << a;
    EXPECT_NE(a, "gemv_nvfp4_sm90_rp_r16_m32") << dtype_name(dt) << " M=" << m_gemv;
    EXPECT_EQ(b.rfind("gemm_nvfp4_sm90_rg_", 0), 0u) << dtype_name(dt) << " M=" << m_gemv + 1 << " ran " << b;
  }
  for (const auto& [dt, m16] : {std::pair<DType, std::int64_t>{DType::kBF16, 16}, {DType::kF16, 16}, {DType::kF32, 5}}) {
    const std::int64_t m32 = 32 / cuda::repacked_pieces(dt);
    const std::string a = route(dw, dt, m16, &qw), b = route(dw, dt, m16 + 1, &qw), c = route(dw, dt, m32, &qw),
                      d = route(dw, dt, m32 + 1, &qw);
    EXPECT_EQ(a.rfind("gemv_nvfp4_sm90_rp_", 0), 0u) << dtype_name(dt) << " M=" << m16 << " ran " << a;
    EXPECT_NE(a, "gemv_nvfp4_sm90_rp_r16_m32");
    EXPECT_EQ(b, "gemv_nvfp4_sm90_rp_r16_m32") << dtype_name(dt) << " M=" << m16 + 1;
    EXPECT_EQ(c, "gemv_nvfp4_sm90_rp_r16_m32") << dtype_name(dt) << " M=" << m32;
    EXPECT_EQ(d.rfind("gemm_nvfp4_sm90_rg_", 0), 0u) << dtype_name(dt) << " M=" << m32 + 1 << " ran " << d;
  }
  // Scales at a 4-byte (not 16-byte) offset: the GEMV runs, the GEMM entry point refuses.
  void* s4 = nullptr;
  ASSERT_EQ(cudaMalloc(&s4, qw.scales.size() + 16), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(static_cast<char*>(s4) + 4, dw.rs, qw.scales.size(), cudaMemcpyDeviceToDevice), cudaSuccess);
  cuda::RepackedWeightView v = dw.view();
  v.scales = static_cast<const std::uint8_t*>(s4) + 4;
  const Tensor x = random_x(DType::kBF16, 40, k, seed);
  Tensor y = nan_tensor(DType::kBF16, 40, n);
  const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
  std::string name;
  cuda::quantized_matmul_repacked_tile(MatrixView{dx.p, DType::kBF16, 40, k, k}, v, MatrixView{dy.p, DType::kBF16, 40, n, n},
                                       nullptr, nullptr, &name);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(name.rfind("gemv_", 0), 0u) << name;
  dy.back(y.data());
  Tensor xc = x;
  check_against_oracle(MatrixView{xc.data(), DType::kBF16, 40, k, k}, qw, MatrixView{y.data(), DType::kBF16, 40, n, n},
                       "4-byte aligned scales");
  EXPECT_THROW(cuda::quantized_matmul_repacked_rgemm(MatrixView{dx.p, DType::kBF16, 40, k, k}, v,
                                                     MatrixView{dy.p, DType::kBF16, 40, n, n}, nullptr, nullptr),
               Error);
  cudaFree(s4);
}

// Non-finite activations through the repacked GEMM: a row with +Inf at one k and a row with NaN
// at another give, like the oracle, NaN wherever the oracle has NaN (Inf x 0 included) and the
// oracle's +-Inf where it has one; the other rows stay within tolerance. bf16 and fp32 (whose
// Inf/NaN ride in the first bf16 piece), with and without a K split.
TEST(CudaRgemm, NonFiniteActivationsPropagateLikeTheOracle) {
  REQUIRE_GPU();
  const std::uint64_t seed = 3131;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 272, k = 1024, m = 40;
  const QuantizedWeight qw = random_weight(n, k, seed);
  const DevWeight dw(qw);
  for (const DType dt : {DType::kBF16, DType::kF32})
    for (const cuda::RgemmTile t : {cuda::RgemmTile{8, 1}, cuda::RgemmTile{4, 3}}) {
      const Tensor x = with_non_finite_rows(random_x(dt, m, k, seed + 1));
      Tensor y = nan_tensor(dt, m, n);
      run_rgemm(dw, x, y, m, &t);
      expect_non_finite_like_oracle(qw, x, y, std::string("rgemm ") + dtype_name(dt) + " nb" + std::to_string(t.nb) + " ks" +
                                                  std::to_string(t.k_split));
    }
}

#endif  // NVFP4_HAVE_CUDA

}  // namespace
}  // namespace nvfp4
