// tests/cuda/test_wgemm_cuda.cpp -- the wgmma GEMM on canonical weights
// (gemm_nvfp4_sm90_wgmma.cu): every tile against the oracle, its epilogue edges, its route and
// tile rule, non-finite rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/tuning_sm90.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
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

// ------------------------------------------------------------------------------------------
// The wgmma GEMM on canonical weights (gemm_nvfp4_sm90_wgmma.cu): bf16 activations, M > 16.
// ------------------------------------------------------------------------------------------

// Canonical weights on the device (no repack: N need not be a multiple of 16).
struct CanonWeight {
  DeviceCopy p, s;
  std::int64_t n, k;
  float ts;
  explicit CanonWeight(const QuantizedWeight& w)
      : p(w.packed.data(), w.packed.size()), s(w.scales.data(), w.scales.size()), n(w.n), k(w.k), ts(w.tensor_scale()) {}
  WeightView view() const { return {static_cast<const std::uint8_t*>(p.p), static_cast<const std::uint8_t*>(s.p), ts, n, k}; }
};

// x (host) times the device weights w into y (host), through the ws kernel.
void run_wgemm(const WeightView& w, const Tensor& x, Tensor& y, std::int64_t m, const cuda::WgemmTile* tile,
               std::int64_t x_cols = -1, std::int64_t x_stride = -1) {
  const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
  const std::int64_t cols = x_cols < 0 ? w.k : x_cols, stride = x_stride < 0 ? w.k : x_stride;
  std::string name;
  cuda::quantized_matmul_wgemm(MatrixView{dx.p, x.dtype, m, cols, stride}, w, MatrixView{dy.p, y.dtype, m, w.n, w.n},
                               nullptr, tile, &name);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE(name.rfind("gemm_nvfp4_sm90_ws_", 0) == 0) << name;
  dy.back(y.data());
}
void run_wgemm(const CanonWeight& dw, const Tensor& x, Tensor& y, std::int64_t m, const cuda::WgemmTile* tile,
               std::int64_t x_cols = -1, std::int64_t x_stride = -1) {
  run_wgemm(dw.view(), x, y, m, tile, x_cols, x_stride);
}

std::string wg_tile_name(const cuda::WgemmTile* t) {
  return t ? "bn" + std::to_string(t->bn) + "/ks" + std::to_string(t->k_split) + "/c" + std::to_string(t->consumers)
           : std::string("built-in");
}

// One-hot bf16 / fp16 rows recover dequantize_ref (bf16 / fp16) exactly for every block shape and
// K split (the decode is exact and each output has one nonzero product); random bf16 rows match
// the oracle for M = 17..200 (300 at bn 256: a second, partial activation block) and fp16 rows
// for M = 17 and 65 (partial activation and weight blocks: N = 300, 1040); a second call and a
// graph replay give the same bits (bn 64 and 256); padded strided rows go through the prepared
// copy.
TEST(CudaWgemm, OneHotOracleEveryTileDeterministic) {
  REQUIRE_HOPPER_PATHS();
  // bn 64 / 128 / 256, K splits 1..64, two or three consumer warpgroups (tiles[2]: the padded
  // rows; [3], [7], [9]: graphs).
  const cuda::WgemmTile tiles[] = {{64, 1},   {64, 64}, {128, 3}, {64, 7},    {128, 64},
                                   {128, 1},  {256, 1}, {256, 3}, {64, 5},    {128, 6, 3},
                                   {64, 1, 3}, {64, 6, 3}, {128, 1, 3}, {192, 1}, {192, 5}, {160, 1},
                                   {224, 3}};
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{16, 64}, {48, 256}, {300, 4096}, {1040, 1024}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 9090 + n * 7 + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const CanonWeight dw(qw);
    const std::int64_t rows = 72;
    for (const DType dt : {DType::kBF16, DType::kF16}) {
      Tensor deq(dt, {n, k});
      dequantize_ref(qw.view(), MatrixView{deq.data(), dt, n, k, k});
      Tensor xo(dt, {rows, k});
      for (std::int64_t r = 0; r < rows; ++r) xo.set(r * k + (r * 131 + 7) % k, 1.0f);
      std::vector<const cuda::WgemmTile*> ts{nullptr};
      for (const cuda::WgemmTile& t : tiles) ts.push_back(&t);
      for (const cuda::WgemmTile* t : ts) {
        const std::string what = std::string(dtype_name(dt)) + " " + wg_tile_name(t);
        Tensor y = nan_tensor(dt, rows, n);
        run_wgemm(dw, xo, y, rows, t);
        const int bad = one_hot_mismatches(
            y, rows, n, [&](std::int64_t r, std::int64_t j) { return deq.get(j * k + (r * 131 + 7) % k); }, what);
        ASSERT_EQ(bad, 0) << what;
        for (const std::int64_t m : {17, 64, 65, 200, 300}) {
          if (dt == DType::kF16 && (m == 64 || m == 200 || m == 300)) continue;  // fp16: M = 17 and 65
          if (m == 300 && !(t && t->bn >= 160)) continue;  // two activation blocks of 160..256, the second partial
          Tensor x = random_x(dt, m, k, seed + m);
          Tensor yb = nan_tensor(dt, m, n);
          run_wgemm(dw, x, yb, m, t);
          check_against_oracle(MatrixView{x.data(), dt, m, k, k}, qw, MatrixView{yb.data(), dt, m, n, n},
                               "wgemm " + what + " M=" + std::to_string(m));
          Tensor y2 = nan_tensor(dt, m, n);
          run_wgemm(dw, x, y2, m, t);
          ASSERT_TRUE(yb.bytes == y2.bytes) << what << " M=" << m << ": a second call gave other bits";
        }
      }
    }
    // Padded, strided bf16 / fp16 rows (x.cols = K - 8, row stride K + 24): through the prepared rows.
    for (const DType dt : {DType::kBF16, DType::kF16}) {
      const std::int64_t m = 33, stride = k + 24, cols = k - 8;
      Tensor x = random_x(dt, m, stride, seed + 99);
      Tensor y = nan_tensor(dt, m, n);
      run_wgemm(dw, x, y, m, &tiles[2], cols, stride);
      check_against_oracle(MatrixView{x.data(), dt, m, cols, stride}, qw, MatrixView{y.data(), dt, m, n, n},
                           std::string("wgemm padded strided rows ") + dtype_name(dt));
    }
    // A graph replay gives the direct call's bits.
    expect_stream_and_graph_identical(qw, random_x(DType::kBF16, 48, k, seed + 5), "wgemm",
                                      [&](const MatrixView& xv, const MatrixView& yv, cudaStream_t st) {
                                        cuda::quantized_matmul_wgemm(xv, dw.view(), yv, st, &tiles[3]);
                                      });
    expect_stream_and_graph_identical(qw, random_x(DType::kBF16, 48, k, seed + 6), "wgemm ws",
                                      [&](const MatrixView& xv, const MatrixView& yv, cudaStream_t st) {
                                        cuda::quantized_matmul_wgemm(xv, dw.view(), yv, st, &tiles[7]);
                                      });
    expect_stream_and_graph_identical(qw, random_x(DType::kBF16, 48, k, seed + 7), "wgemm ws 3 consumers",
                                      [&](const MatrixView& xv, const MatrixView& yv, cudaStream_t st) {
                                        cuda::quantized_matmul_wgemm(xv, dw.view(), yv, st, &tiles[9]);
                                      });
  }
  // A bad block shape, fp32 rows, K % 64 != 0 and a misaligned packed base are errors naming the call.
  const QuantizedWeight qw = random_weight(32, 128, 3);
  const CanonWeight dw(qw);
  const Tensor x = random_x(DType::kBF16, 20, 128, 3);
  Tensor y = nan_tensor(DType::kBF16, 20, 32);
  for (const cuda::WgemmTile bad : {cuda::WgemmTile{96, 1}, cuda::WgemmTile{64, 0}, cuda::WgemmTile{64, 65},
                                    cuda::WgemmTile{32, 1}, cuda::WgemmTile{512, 1}, cuda::WgemmTile{256, 65},
                                    cuda::WgemmTile{256, 1, 3}, cuda::WgemmTile{64, 1, 4}, cuda::WgemmTile{64, 1, 1}})
    EXPECT_THROW(run_wgemm(dw, x, y, 20, &bad), Error);
  const Tensor xf = random_x(DType::kF32, 20, 128, 3);
  Tensor yf = nan_tensor(DType::kF32, 20, 32);
  EXPECT_THROW(run_wgemm(dw, xf, yf, 20, nullptr), Error);
  const QuantizedWeight q80 = random_weight(32, 80, 4);
  const CanonWeight d80(q80);
  const Tensor x80 = random_x(DType::kBF16, 20, 80, 4);
  EXPECT_THROW(run_wgemm(d80, x80, y, 20, nullptr), Error);
  try {
    WeightView v = dw.view();
    v.packed += 8;  // 8-byte aligned: the GEMV accepts it, the GEMM needs 16
    const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
    cuda::quantized_matmul_wgemm(MatrixView{dx.p, DType::kBF16, 20, 128, 128}, v, MatrixView{dy.p, DType::kBF16, 20, 32, 32},
                                 nullptr, nullptr);
    ADD_FAILURE() << "a misaligned packed base was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wgmma"), std::string::npos) << e.what();
  }
}

// A small run of each compiled block shape, with and without the K split's second kernel:
// sized for compute-sanitizer racecheck (scripts/device_cuda.sh sanitize), which checks the
// ring's barrier discipline.
TEST(CudaWgemm, SmallRunsForTheSanitizers) {
  REQUIRE_HOPPER_PATHS();
  const std::uint64_t seed = 7007;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 200, k = 1024, m = 70;
  const QuantizedWeight qw = random_weight(n, k, seed);
  const CanonWeight dw(qw);
  for (const DType dt : {DType::kBF16, DType::kF16}) {
    const Tensor x = random_x(dt, m, k, seed + 1);
    // K split 3 (6 stages, the ring does not wrap) and 1 (16 stages: every ring wraps, so the
    // slots are refilled behind the consumers' releases).
    for (const cuda::WgemmTile t : {cuda::WgemmTile{64, 3}, cuda::WgemmTile{64, 1}, cuda::WgemmTile{128, 3},
                                    cuda::WgemmTile{128, 1}, cuda::WgemmTile{160, 1}, cuda::WgemmTile{192, 1},
                                    cuda::WgemmTile{224, 1}, cuda::WgemmTile{256, 1},
                                    cuda::WgemmTile{64, 1, 3},
                                    cuda::WgemmTile{128, 3, 3}}) {
      Tensor y = nan_tensor(dt, m, n);
      run_wgemm(dw, x, y, m, &t);
      Tensor xc = x;
      check_against_oracle(MatrixView{xc.data(), dt, m, k, k}, qw, MatrixView{y.data(), dt, m, n, n},
                           std::string("wgemm ") + dtype_name(dt) + " " + wg_tile_name(&t));
    }
  }
}

// With two consumer warpgroups the producer copies the scales in groups of 4 stages (16 bytes) per
// row where K % 256 == 0 and the scale base is 16-byte aligned, else 4 bytes per stage (always with
// three). Every route matches the oracle and gives the same bits: K = 1024 (grouped; split 3
// starts its blocks at stages 0 / 6 / 12, inside a group), 1280 (grouped, 20 stages), 1088 (17
// stages, per stage), and each K again with the scales 4 bytes past a 16-byte boundary (per
// stage). N = 200 leaves a block's last rows past N (zero-filled scales).
TEST(CudaWgemm, ScalesCopiedInGroupsOrPerStage) {
  REQUIRE_HOPPER_PATHS();
  for (const std::int64_t k : {1024, 1280, 1088}) {
    const std::int64_t n = 200, m = 70;
    const std::uint64_t seed = 5150 + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const CanonWeight dw(qw);
    std::vector<std::uint8_t> shifted(qw.scales.size() + 4, 0);
    std::copy(qw.scales.begin(), qw.scales.end(), shifted.begin() + 4);
    const DeviceCopy ds(shifted.data(), shifted.size());
    WeightView off = dw.view();
    off.scales = static_cast<const std::uint8_t*>(ds.p) + 4;
    for (const DType dt : {DType::kBF16, DType::kF16}) {
      const Tensor x = random_x(dt, m, k, seed + 1);
      for (const cuda::WgemmTile t : {cuda::WgemmTile{64, 1}, cuda::WgemmTile{64, 3}, cuda::WgemmTile{64, 3, 3},
                                      cuda::WgemmTile{128, 1}, cuda::WgemmTile{128, 3, 3}, cuda::WgemmTile{256, 2}}) {
        const std::string what = std::string(dtype_name(dt)) + " " + wg_tile_name(&t);
        Tensor y = nan_tensor(dt, m, n), y_off = nan_tensor(dt, m, n);
        {
          SCOPED_TRACE(what);
          run_wgemm(dw.view(), x, y, m, &t);
          run_wgemm(off, x, y_off, m, &t);
        }
        Tensor xc = x;
        check_against_oracle(MatrixView{xc.data(), dt, m, k, k}, qw, MatrixView{y.data(), dt, m, n, n}, "wgemm " + what);
        ASSERT_TRUE(y.bytes == y_off.bytes) << what << ": the scales 4 bytes off 16-byte alignment gave other bits";
      }
    }
  }
}

// The wgmma GEMM's staged epilogue (no K split) at its edges: N not a multiple of 4 (the last
// 4-output group of a row partly past N), with a row stride that is a multiple of 4 (vector
// stores, then the partial group element by element) and with strides that are not, or an output
// base 2 bytes off 8-byte alignment (no vector stores); a partial activation block. Every output
// matches the oracle and nothing outside the output view is written (the sentinel fills each
// row's padding too).
TEST(CudaWgemm, EpilogueEdgesAndStrides) {
  REQUIRE_HOPPER_PATHS();
  const cuda::WgemmTile tiles[] = {{64, 1}, {128, 1}, {160, 1}, {192, 1}, {224, 1}, {256, 1}, {64, 1, 3}, {128, 1, 3}};
  for (const std::int64_t n : {130, 257}) {
    const std::int64_t k = 256;
    const std::uint64_t seed = 5150 + n;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const CanonWeight dw(qw);
    for (const DType dt : {DType::kBF16, DType::kF16}) {
      for (const cuda::WgemmTile& t : tiles) {
        // (rows, output row stride, output offset in elements)
        for (const auto& [m, ys, off] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{17, (n + 3) / 4 * 4, 0},
                                          {100, n + 3, 0}, {t.bn >= 160 ? 300 : 65, n + 1, 1}}) {
          const std::string what = std::string(dtype_name(dt)) + " " + wg_tile_name(&t) + " M=" + std::to_string(m) +
                                   " y stride " + std::to_string(ys) + " offset " + std::to_string(off);
          const Tensor x = random_x(dt, m, k, seed + m);
          const std::int64_t total = off + (m - 1) * ys + n + 5;
          Tensor ybuf(dt, {1, total});
          for (std::int64_t i = 0; i < total; ++i) ybuf.set(i, -3.25f);  // the sentinel outside the view
          const DeviceCopy dx(x.data(), x.bytes.size()), dy(ybuf.data(), ybuf.bytes.size());
          std::string name;
          cuda::quantized_matmul_wgemm(MatrixView{dx.p, dt, m, k, k}, dw.view(),
                                       MatrixView{static_cast<char*>(dy.p) + off * dtype_size(dt), dt, m, n, ys}, nullptr, &t,
                                       &name);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
          dy.back(ybuf.data());
          int outside = 0;
          for (std::int64_t i = 0; i < total; ++i) {
            const std::int64_t j = i - off, r = j / ys, c = j % ys;
            const bool inside = j >= 0 && r < m && c < n;
            if (!inside && ybuf.get(i) != -3.25f && ++outside <= 3) ADD_FAILURE() << what << ": wrote element " << i;
          }
          EXPECT_EQ(outside, 0) << what;
          check_against_oracle(MatrixView{const_cast<void*>(x.data()), dt, m, k, k}, qw,
                               MatrixView{static_cast<char*>(ybuf.data()) + off * dtype_size(dt), dt, m, n, ys}, what);
        }
      }
    }
  }
}

// The public call at M > 16: bf16 and fp16 rows with K % 64 == 0 run the wgmma GEMM up to
// kWgemmAllRows (above it only where wgemm_preferred, never at N = 96: PreferredOverPanelRule);
// fp32 rows, K % 64 != 0 and larger M keep the dense-panel path. Results match the oracle either
// way.
TEST(CudaWgemm, PublicRoute) {
  REQUIRE_GPU();
  const std::uint64_t seed = 4242;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t big = cuda::kWgemmAllRows;
  for (const auto& [dt, k, m, want_gemm] :
       {std::tuple<DType, std::int64_t, std::int64_t, bool>{DType::kBF16, 512, 17, true}, {DType::kBF16, 512, big, true},
        {DType::kBF16, 512, big + 1, false}, {DType::kF16, 512, 17, true}, {DType::kF16, 512, big + 1, false},
        {DType::kF32, 512, 17, false},
        {DType::kBF16, 528, 17, false}}) {
    const std::int64_t n = 96;
    const QuantizedWeight qw = random_weight(n, k, seed + k);
    const CanonWeight dw(qw);
    const Tensor x = random_x(dt, m, k, seed + m);
    Tensor y = nan_tensor(dt, m, n);
    const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
    std::string name;
    cuda::quantized_matmul_tile(MatrixView{dx.p, dt, m, k, k}, dw.view(), MatrixView{dy.p, dt, m, n, n}, nullptr, nullptr, &name);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    // Before Hopper (or without sm_90a code) these rows take the dense panel + cuBLAS.
    EXPECT_EQ(name.rfind("gemm_nvfp4_sm90_ws_", 0) == 0, want_gemm && cuda::hopper_paths())
        << dtype_name(dt) << " M=" << m << " K=" << k << " ran " << name;
    dy.back(y.data());
    Tensor xc = x;
    check_against_oracle(MatrixView{xc.data(), dt, m, k, k}, qw, MatrixView{y.data(), dt, m, n, n},
                         std::string("route ") + dtype_name(dt) + " M=" + std::to_string(m) + " K=" + std::to_string(k));
  }
}

// The built-in wgmma-GEMM choice (host code, runs without a GPU): bn 64 up to 64 rows, 128 up to
// 128 and 256 above (128 where a bn 256 grid fills under half the SMs and bn 128 fills more; 160,
// 192 or 224 where its waves cost less: less padding at M = 129, 192, 320, 384, 448, 640, a fuller
// last wave at 1280 / 1536 rows; docs/perf-cuda.md 57, 58);
// the K split fills one block per SM with >= 8 stages per split; three consumer warpgroups where
// they fill the GPU much better (6144 x 4096). The choices are the ones the H200 sweeps and A/Bs
// measured best (docs/perf-cuda.md 25-26, 28).
TEST(CudaWgemm, PickTileRule) {
  struct Case {
    std::int64_t m, n, k;
    int bn, k_split, consumers;
  };
  const Case cases[] = {
      {17, 4096, 4096, 64, 4, 2},      {64, 4096, 4096, 64, 4, 2},     {64, 14336, 4096, 64, 1, 2},
      {64, 4096, 14336, 64, 4, 2},     {64, 1024, 4096, 64, 8, 2},     {56, 6144, 4096, 64, 4, 3},
      {65, 4096, 4096, 128, 4, 2},     {128, 4096, 4096, 128, 4, 2},   {128, 14336, 4096, 128, 1, 2},
      {128, 1024, 4096, 128, 8, 2},    {129, 4096, 4096, 160, 4, 2},   {256, 4096, 14336, 256, 4, 2},
      {256, 14336, 4096, 256, 1, 2},   {200, 4096, 512, 128, 1, 2},    {128, 128256, 4096, 128, 1, 2},
      {256, 1024, 4096, 128, 8, 2},    {96, 6144, 4096, 128, 4, 3},    {256, 6144, 4096, 256, 2, 2},
      {64, 28672, 4096, 64, 1, 2},     {64, 128256, 4096, 64, 1, 2},
      {1024, 14336, 4096, 256, 1, 2},  {1024, 1024, 4096, 256, 4, 2},
      {192, 4096, 4096, 192, 4, 2},    {384, 14336, 4096, 192, 1, 2},  {384, 4096, 14336, 192, 2, 2},
      {768, 4096, 4096, 192, 1, 2},    {768, 14336, 4096, 256, 1, 2},  {1536, 4096, 4096, 192, 1, 2},
      {1536, 14336, 4096, 224, 1, 2},  {1280, 4096, 4096, 160, 1, 2},  {2048, 4096, 4096, 256, 1, 2},
      {2048, 14336, 4096, 256, 1, 2},  {512, 4096, 4096, 256, 2, 2},    {320, 4096, 4096, 160, 2, 2},
      {448, 14336, 4096, 224, 1, 2},   {640, 4096, 4096, 160, 1, 2},
  };
  for (const Case& c : cases) {
    const cuda::WgemmTile t = cuda::wgemm_pick_tile(132, c.n, c.k, c.m);
    const std::string what = std::to_string(c.m) + " x " + std::to_string(c.n) + " x " + std::to_string(c.k);
    EXPECT_TRUE(cuda::wgemm_tile_valid(t)) << what;
    EXPECT_EQ(t.bn, c.bn) << what;
    EXPECT_EQ(t.k_split, c.k_split) << what;
    EXPECT_EQ(t.consumers, c.consumers) << what;
  }
}

// Where the built-in route takes the wgmma GEMM over the dense panel at 1025..2048 rows (host
// code, runs without a GPU): grids that fill >= 90% of their last wave, N >= 4096. The cases are
// the Llama-3-8B prefill linears the H200 A/Bs measured (docs/perf-cuda.md 55, 57): at 2048 rows q / o,
// gate / up, down and the fused q/k/v fill 97% and take the GEMM, k / v (N = 1024) the panel; at
// 1536 rows bn 192 / 224 fill 97% / 99% (bn 256 filled 73-85%, the panel ran) and take them too;
// at 1280 rows 4096 weight rows get bn 160 (97%, but slower than the panel: never above 1024 rows),
// 14336 bn 192 (99%, GEMM) (docs/perf-cuda.md 57, 58).
TEST(CudaWgemm, PreferredOverPanelRule) {
  struct Case {
    std::int64_t m, n, k;
    bool gemm;
  };
  const Case cases[] = {
      {2048, 4096, 4096, true},   {2048, 14336, 4096, true},  {2048, 4096, 14336, true},  {2048, 6144, 4096, true},
      {2048, 28672, 4096, true},  {2048, 1024, 4096, false},  {1536, 4096, 4096, true},   {1536, 14336, 4096, true},
      {1536, 4096, 14336, true},  {1536, 1024, 4096, false},  {1280, 4096, 4096, false},  {1280, 14336, 4096, true},
      {2048, 2048, 4096, false},
  };
  for (const Case& c : cases)
    EXPECT_EQ(cuda::wgemm_preferred(132, c.n, c.k, c.m), c.gemm)
        << c.m << " x " << c.n << " x " << c.k;
}

// Non-finite activations: rows with +Inf, NaN and -Inf at one k each give NaN exactly where the
// oracle does (Inf x 0 included) and the oracle's +-Inf elsewhere; the finite rows stay within
// tolerance. With and without a K split.
TEST(CudaWgemm, NonFiniteActivationsPropagateLikeTheOracle) {
  REQUIRE_HOPPER_PATHS();
  const std::uint64_t seed = 3232;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 272, k = 1024, m = 40;
  const QuantizedWeight qw = random_weight(n, k, seed);
  const CanonWeight dw(qw);
  for (const DType dt : {DType::kBF16, DType::kF16})
    for (const cuda::WgemmTile t : {cuda::WgemmTile{64, 1}, cuda::WgemmTile{128, 3}, cuda::WgemmTile{256, 2},
                                    cuda::WgemmTile{64, 2, 3}}) {
      const Tensor x = with_non_finite_rows(random_x(dt, m, k, seed + 1));
      Tensor y = nan_tensor(dt, m, n);
      run_wgemm(dw, x, y, m, &t);
      expect_non_finite_like_oracle(qw, x, y, std::string("wgemm ") + dtype_name(dt) + " " + wg_tile_name(&t));
    }
}
#endif  // NVFP4_HAVE_CUDA

}  // namespace
}  // namespace nvfp4
