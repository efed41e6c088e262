// Uses only the installed public API (<nvfp4/nvfp4.h>): quantize a weight, run the matmul on the
// best backend and on the oracle. One-hot fp32 rows must recover the dequantized weight exactly
// (every path's dequantization is the oracle's, bit for bit); random rows must agree within fp32
// summation-order error. Exit 0 on success, 1 with a message otherwise.
#include <nvfp4/nvfp4.h>

#include <cmath>
#include <cstdint>
#include <cstdio>

int main() {
  using nvfp4::DType;
  using nvfp4::Tensor;
  const std::int64_t n = 48, k = 320;
  std::uint64_t state = 20261203;  // fixed LCG seed: the same inputs on every run
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<std::int64_t>(state >> 40) - (1 << 23)) / (1 << 22);
  };
  Tensor w(DType::kF32, {n, k});
  for (std::int64_t i = 0; i < w.numel(); ++i) w.set(i, next());
  const nvfp4::QuantizedWeight q = nvfp4::quantize(w);
  const Tensor dense = nvfp4::dequantize(q, DType::kF32);

  Tensor onehot(DType::kF32, {k, k});
  for (std::int64_t i = 0; i < k; ++i) onehot.set(i * k + i, 1.0f);
  const Tensor y1 = nvfp4::quantized_matmul(onehot, q);  // [k, n]: row i = column i of dense
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      if (y1.get(i * n + j) != dense.get(j * k + i)) {
        std::printf("consumer: one-hot row %lld, output %lld: %g, dequantized weight %g\n",
                    static_cast<long long>(i), static_cast<long long>(j), y1.get(i * n + j), dense.get(j * k + i));
        return 1;
      }

  const std::int64_t m = 5;
  Tensor x(DType::kBF16, {m, k});
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, next());
  const Tensor y = nvfp4::quantized_matmul(x, q);
  const Tensor yr = nvfp4::quantized_matmul(x, q, nvfp4::Backend::kReference);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      double mag = 0;
      for (std::int64_t c = 0; c < k; ++c) mag += std::fabs(x.get(r * k + c) * dense.get(j * k + c));
      // Both round the fp32 sum to bf16 once: one bf16 ulp of the result plus fp32 order error.
      const double tol = std::ldexp(std::fabs(yr.get(r * n + j)), -7) + 1e-5 * mag;
      if (std::fabs(y.get(r * n + j) - yr.get(r * n + j)) > tol) {
        std::printf("consumer: row %lld, output %lld: %g, oracle %g (tolerance %g)\n", static_cast<long long>(r),
                    static_cast<long long>(j), y.get(r * n + j), yr.get(r * n + j), tol);
        return 1;
      }
    }
  std::printf("consumer: quantized_matmul (Backend::%s) matches the oracle (%lld x %lld weight)\n",
              nvfp4::backend_name(nvfp4::Backend::kAuto), static_cast<long long>(n), static_cast<long long>(k));
  return 0;
}
