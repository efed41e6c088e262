// tests/cuda/cuda_test_util.h -- shared by the CUDA test files: the GPU skip, random canonical
// weights and activations (adversarial scales), NaN-poisoned outputs, device copies, the oracle
// comparison with the tolerance derived in test_gemv_cuda.cpp's header, one-hot exactness,
// stream-against-graph runs, non-finite rows, and repacked weights on the device. Only for builds
// with the CUDA backend (NVFP4_HAVE_CUDA).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_host.h"
#include "kernels/cuda/matmul_cuda.h"
#include "nvfp4/cuda.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"
#include "nvfp4/tensor.h"
#include "test_util.h"

namespace nvfp4 {
namespace cudatest {

#define REQUIRE_GPU()                                                                              \
  do {                                                                                             \
    int count_ = 0;                                                                                \
    const cudaError_t e_ = cudaGetDeviceCount(&count_);                                           \
    if (e_ != cudaSuccess || count_ == 0)                                                          \
      GTEST_SKIP() << "no CUDA device: " << (e_ != cudaSuccess ? cudaGetErrorString(e_) : "0 devices"); \
    if (!cuda::available()) GTEST_SKIP() << "no usable CUDA device: " << cuda::unavailable_reason(); \
  } while (0)

// The wgmma GEMM: sm_90 GPUs in builds with sm_90a code only (cuda::hopper_paths()).
#define REQUIRE_HOPPER_PATHS()                                                                     \
  do {                                                                                             \
    REQUIRE_GPU();                                                                                 \
    if (!cuda::hopper_paths())                                                                     \
      GTEST_SKIP() << "the wgmma GEMM needs an sm_90 GPU and a build with sm_90a code (NVFP4_CUDA_GENCODE); " \
                   << "this GPU has compute capability " << cuda::device_cc();                    \
  } while (0)

// Random canonical weight: every E2M1 code, scales from an adversarial set (zero, the smallest
// subnormal, the normal boundary, 1.0, the max 448) mixed with ordinary values.
inline QuantizedWeight random_weight(std::int64_t n, std::int64_t k, std::uint64_t seed, float ts = 0.0137f) {
  static const std::uint8_t special[] = {0x00, 0x01, 0x07, 0x08, 0x38, 0x7E, 0x80 | 0x38};
  return test::random_packed_weight(n, k, seed, ts, [](std::mt19937_64& rng) {
    const auto r = rng() % 16;
    return r < 3 ? special[rng() % 7] : static_cast<std::uint8_t>(0x18 + rng() % 0x40);
  });
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

// A one-hot run: y[r][j] must equal want(r, j) exactly for rows < rows, columns < n. Reports the
// first 5 mismatches (prefixed by `what`) and returns how many there were.
template <class Want>
int one_hot_mismatches(const Tensor& y, std::int64_t rows, std::int64_t n, Want want, const std::string& what) {
  int bad = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      const float w = want(r, j);
      if (!(y.get(r * n + j) == w) && ++bad <= 5)
        ADD_FAILURE() << what << " one-hot y[" << r << "," << j << "] = " << y.get(r * n + j) << ", want " << w;
    }
  return bad;
}

// One-hot rows recover the dequantized weights exactly: 16 one-hot rows per launch at the k's
// in `ks` (run(x, y, rows) computes y = x . W^T for that launch), every output == deq[n, k]
// (== treats +0 and -0 alike: the matmul sums 0 + -0 = +0 where dequantize gives -0).
template <class Run>
void expect_one_hot_exact(const Tensor& deq, std::int64_t n, std::int64_t k, const std::vector<std::int64_t>& ks,
                          Run run) {
  const DType dt = deq.dtype;
  for (std::size_t c = 0; c < ks.size(); c += 16) {
    const std::int64_t rows = std::min<std::int64_t>(16, static_cast<std::int64_t>(ks.size() - c));
    Tensor x(dt, {rows, k});
    for (std::int64_t r = 0; r < rows; ++r) x.set(r * k + ks[c + r], 1.0f);
    Tensor y = nan_tensor(dt, rows, n);
    run(x, y, rows);
    int bad = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < n; ++j) {
        const float got = y.get(r * n + j), want = deq.get(j * k + ks[c + r]);
        if (!(got == want) && ++bad <= 5)
          ADD_FAILURE() << "one-hot y[" << r << "," << j << "] (k=" << ks[c + r] << ") = " << got << ", dequantized " << want;
      }
    ASSERT_EQ(bad, 0);
  }
}

// Runs `work` (stream-ordered launches on st) directly, or captured into a CUDA graph that is
// then launched once; synchronizes st either way.
inline void run_direct_or_in_graph(cudaStream_t st, bool graph, const std::function<void()>& work) {
  if (!graph) {
    work();
    EXPECT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    return;
  }
  cudaGraph_t g;
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  work();
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
}

// Two calls into adjacent bf16 outputs, on a stream and then captured into a CUDA graph and
// replayed: all four results carry the same bits and match the oracle. call(x, y, stream) runs one.
inline void expect_stream_and_graph_identical(const QuantizedWeight& qw, const Tensor& x, const std::string& what,
                                       const std::function<void(const MatrixView&, const MatrixView&, cudaStream_t)>& call) {
  const std::int64_t m = x.shape[0], k = x.shape[1], n = qw.n;
  const DeviceCopy dx(x.data(), x.bytes.size());
  void* dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dy, 2 * m * n * 2), cudaSuccess);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  std::vector<std::uint8_t> first;
  for (const bool graph : {false, true}) {
    ASSERT_EQ(cudaMemset(dy, 0xFF, 2 * m * n * 2), cudaSuccess);
    run_direct_or_in_graph(st, graph, [&] {
      for (int i = 0; i < 2; ++i)
        call(MatrixView{dx.p, DType::kBF16, m, k, k}, MatrixView{static_cast<char*>(dy) + i * m * n * 2, DType::kBF16, m, n, n}, st);
    });
    std::vector<std::uint8_t> h(2 * m * n * 2);
    ASSERT_EQ(cudaMemcpy(h.data(), dy, h.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_TRUE(std::equal(h.begin(), h.begin() + m * n * 2, h.begin() + m * n * 2)) << what << " graph " << graph;
    if (first.empty()) first = h;
    ASSERT_TRUE(h == first) << what << ": the graph replay gave other bits than the stream";
    Tensor y(DType::kBF16, {m, n});
    std::memcpy(y.data(), h.data(), m * n * 2);
    Tensor xc = x;
    check_against_oracle(MatrixView{xc.data(), DType::kBF16, m, k, k}, qw, MatrixView{y.data(), DType::kBF16, m, n, n},
                         what + (graph ? " in a graph" : " on a stream"));
  }
  cudaStreamDestroy(st);
  cudaFree(dy);
}

// Rows 3, 17 and 29 of x (K >= 1024) get +Inf, NaN and -Inf at one k each.
inline Tensor with_non_finite_rows(Tensor x) {
  const std::int64_t k = x.shape[1];
  x.set(3 * k + 77, INFINITY);
  x.set(17 * k + 500, NAN);
  x.set(29 * k + 1000, -INFINITY);
  return x;
}

// y = x . W^T from a kernel, x from with_non_finite_rows: NaN exactly where the oracle has NaN
// (Inf x 0 included), the oracle's +-Inf where it has one, and the finite rows within tolerance.
inline void expect_non_finite_like_oracle(const QuantizedWeight& qw, const Tensor& x, const Tensor& y, const std::string& what) {
  const std::int64_t m = x.shape[0], k = x.shape[1], n = qw.n;
  const DType dt = x.dtype;
  Tensor xf(DType::kF32, {m, k}), ref(DType::kF32, {m, n});
  for (std::int64_t i = 0; i < x.numel(); ++i) xf.set(i, x.get(i));
  quantized_matmul_ref(MatrixView{xf.data(), DType::kF32, m, k, k}, qw.view(), MatrixView{ref.data(), DType::kF32, m, n, n});
  int bad = 0, nonfinite = 0;
  for (const std::int64_t r : {3, 17, 29})
    for (std::int64_t j = 0; j < n; ++j) {
      const float got = y.get(r * n + j), want = ref.get(r * n + j);
      ASSERT_FALSE(std::isfinite(want)) << "the oracle row " << r << " should not be finite";
      nonfinite += std::isnan(want) ? 0 : 1;
      const bool same = std::isnan(want) ? std::isnan(got) : got == want;
      if (!same && ++bad <= 5) ADD_FAILURE() << what << " y[" << r << "," << j << "] = " << got << ", oracle " << want;
    }
  EXPECT_EQ(bad, 0) << what;
  EXPECT_GT(nonfinite, 0) << "some outputs should be +-Inf, not NaN, for the test to mean anything";
  Tensor xs(dt, {m - 3, k}), ys(dt, {m - 3, n});  // the finite rows
  std::int64_t rr = 0;
  for (std::int64_t r = 0; r < m; ++r) {
    if (r == 3 || r == 17 || r == 29) continue;
    for (std::int64_t c = 0; c < k; ++c) xs.set(rr * k + c, x.get(r * k + c));
    for (std::int64_t c = 0; c < n; ++c) ys.set(rr * n + c, y.get(r * n + c));
    ++rr;
  }
  check_against_oracle(MatrixView{xs.data(), dt, m - 3, k, k}, qw, MatrixView{ys.data(), dt, m - 3, n, n},
                       what + ": finite rows next to non-finite ones");
}

// A weight on the device in both layouts: canonical (p, s) and repacked (rp, rs) with `codes`.
struct DevWeight {
  void *p = nullptr, *s = nullptr, *rp = nullptr, *rs = nullptr;
  std::int64_t n = 0, k = 0;
  float ts = 1.0f;
  cuda::RepackedCodes codes = cuda::RepackedCodes::bf16;
  explicit DevWeight(const QuantizedWeight& w, cuda::RepackedCodes c = cuda::RepackedCodes::bf16)
      : n(w.n), k(w.k), ts(w.tensor_scale()), codes(c) {
    cudaMalloc(&p, w.packed.size());
    cudaMalloc(&s, w.scales.size());
    cudaMalloc(&rp, w.packed.size());
    cudaMalloc(&rs, w.scales.size());
    cudaMemcpy(p, w.packed.data(), w.packed.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(s, w.scales.data(), w.scales.size(), cudaMemcpyHostToDevice);
    cudaMemset(rp, 0xCD, w.packed.size());
    cudaMemset(rs, 0xCD, w.scales.size());
    cuda::repack_for_gemv_sm90(WeightView{static_cast<std::uint8_t*>(p), static_cast<std::uint8_t*>(s), ts, n, k},
                               static_cast<std::uint8_t*>(rp), static_cast<std::uint8_t*>(rs), nullptr, codes);
    cudaDeviceSynchronize();
  }
  ~DevWeight() {
    cudaFree(p);
    cudaFree(s);
    cudaFree(rp);
    cudaFree(rs);
  }
  cuda::RepackedWeightView view() const {
    return {static_cast<std::uint8_t*>(rp), static_cast<std::uint8_t*>(rs), ts, n, k, codes};
  }
};

}  // namespace cudatest
}  // namespace nvfp4
