// tests/cuda/cuda_test_util.h -- shared by the CUDA test files: the GPU skip, random canonical
// weights and activations (adversarial scales), NaN-poisoned outputs, device copies and the
// oracle comparison with the tolerance derived in test_gemv_cuda.cpp's header. Only for builds
// with the CUDA backend (NVFP4_HAVE_CUDA).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_host.h"
#include "kernels/cuda/matmul_cuda.h"
#include "nvfp4/cuda.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"
#include "nvfp4/tensor.h"

namespace nvfp4 {
namespace cudatest {

#define REQUIRE_GPU()                                                                              \
  do {                                                                                             \
    int count_ = 0;                                                                                \
    const cudaError_t e_ = cudaGetDeviceCount(&count_);                                           \
    if (e_ != cudaSuccess || count_ == 0)                                                          \
      GTEST_SKIP() << "no CUDA device: " << (e_ != cudaSuccess ? cudaGetErrorString(e_) : "0 devices"); \
    if (!cuda::available()) GTEST_SKIP() << "no CUDA device: need compute capability 9.0 (sm_90a)"; \
  } while (0)

// Random canonical weight: every E2M1 code, scales from an adversarial set (zero, the smallest
// subnormal, the normal boundary, 1.0, the max 448) mixed with ordinary values.
inline QuantizedWeight random_weight(std::int64_t n, std::int64_t k, std::uint64_t seed, float ts = 0.0137f) {
  std::mt19937_64 rng(seed);
  QuantizedWeight w;
  w.n = n;
  w.k = k;
  w.packed.resize(static_cast<std::size_t>(n * k / 2));
  w.scales.resize(static_cast<std::size_t>(n * k / 16));
  for (auto& b : w.packed) b = static_cast<std::uint8_t>(rng());
  static const std::uint8_t special[] = {0x00, 0x01, 0x07, 0x08, 0x38, 0x7E, 0x80 | 0x38};
  for (auto& s : w.scales) {
    const auto r = rng() % 16;
    s = r < 3 ? special[rng() % 7] : static_cast<std::uint8_t>(0x18 + rng() % 0x40);
  }
  w.convention = ScaleConvention::kDequant;
  w.stored_scale = ts;
  return w;
}

inline Tensor random_x(DType dt, std::int64_t rows, std::int64_t stride, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  Tensor x(dt, {rows, stride});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, U(rng));
  return x;
}

inline Tensor nan_tensor(DType dt, std::int64_t rows, std::int64_t cols) {
  Tensor y(dt, {rows, cols});
  for (std::int64_t i = 0; i < y.numel(); ++i) y.set(i, NAN);
  return y;
}

inline double out_ulp(DType t) { return t == DType::kBF16 ? 1.0 / 128 : (t == DType::kF16 ? 1.0 / 1024 : 0.0); }
// Spacing of the output type's subnormals: results that small round on an absolute grid.
inline double out_min_step(DType t) { return t == DType::kF16 ? std::ldexp(1.0, -24) : (t == DType::kBF16 ? std::ldexp(1.0, -133) : 0.0); }

// Runs the CUDA path on host tensors (optionally with an explicit tile) through device memory.
// A device copy of `bytes` host bytes, freed at scope exit; back() copies it to the host.
struct DeviceCopy {
  void* p = nullptr;
  std::size_t bytes = 0;
  DeviceCopy(const void* host, std::size_t n) : bytes(n) {
    EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess);
    cudaMemcpy(p, host, n, cudaMemcpyHostToDevice);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  ~DeviceCopy() { cudaFree(p); }
  void back(void* host) const { cudaMemcpy(host, p, bytes, cudaMemcpyDeviceToHost); }
};

inline void run_cuda(const MatrixView& x, const WeightView& w, const MatrixView& y, const cuda::GemvTile* tile) {
  if (!tile) {
    cuda::quantized_matmul_host(x, w, y);
    return;
  }
  const int es = dtype_size(x.dtype);
  const DeviceCopy dx(x.data, static_cast<std::size_t>((x.rows - 1) * x.stride + x.cols) * es);
  const DeviceCopy dy(y.data, static_cast<std::size_t>((y.rows - 1) * y.stride + y.cols) * es);
  const DeviceCopy dp(w.packed, w.n * w.k / 2), ds(w.scales, w.n * w.k / 16);
  MatrixView dxv = x, dyv = y;
  dxv.data = dx.p;
  dyv.data = dy.p;
  WeightView dw = w;
  dw.packed = static_cast<const std::uint8_t*>(dp.p);
  dw.scales = static_cast<const std::uint8_t*>(ds.p);
  cuda::quantized_matmul_tile(dxv, dw, dyv, nullptr, tile);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dy.back(y.data);
}

// Checks y against the oracle within the documented tolerance; every element must be written.
inline void check_against_oracle(const MatrixView& x, const QuantizedWeight& qw, const MatrixView& y, const std::string& what) {
  const WeightView w = qw.view();
  // The oracle in fp32 (before the output rounding), on an exact fp32 copy of x, and on |x|, |W|
  // (sign bits cleared) for sum |x w|.
  Tensor xf(DType::kF32, {x.rows, x.cols}), ax(DType::kF32, {x.rows, x.cols});
  for (std::int64_t r = 0; r < x.rows; ++r)
    for (std::int64_t c = 0; c < x.cols; ++c) {
      const float v = load_as_f32(x.data, x.dtype, r * x.stride + c);
      xf.set(r * x.cols + c, v);
      ax.set(r * x.cols + c, std::fabs(v));
    }
  Tensor ref(DType::kF32, {x.rows, w.n}), absdot(DType::kF32, {x.rows, w.n});
  quantized_matmul_ref(MatrixView{xf.data(), DType::kF32, x.rows, x.cols, x.cols}, w,
                       MatrixView{ref.data(), DType::kF32, x.rows, w.n, w.n});
  QuantizedWeight aw = qw;
  for (auto& b : aw.packed) b &= 0x77;
  quantized_matmul_ref(MatrixView{ax.data(), DType::kF32, x.rows, x.cols, x.cols}, aw.view(),
                       MatrixView{absdot.data(), DType::kF32, x.rows, w.n, w.n});
  int bad = 0;
  for (std::int64_t m = 0; m < x.rows; ++m)
    for (std::int64_t n = 0; n < w.n; ++n) {
      const double got = load_as_f32(y.data, y.dtype, m * y.stride + n);
      const double r = ref.get(m * w.n + n);
      const double tol = out_ulp(y.dtype) * std::fabs(r) + 1e-5 * std::fabs(absdot.get(m * w.n + n)) +
                         out_min_step(y.dtype) + 1e-30;
      if (!(std::fabs(got - r) <= tol)) {
        if (++bad <= 5)
          ADD_FAILURE() << what << ": y[" << m << "," << n << "] = " << got << " oracle " << r << " tol " << tol;
      }
    }
  EXPECT_EQ(bad, 0) << what;
}

}  // namespace cudatest
}  // namespace nvfp4
