// The reference matmul (the oracle) against an fp64 computation on the dequantized weights,
// every dtype, odd shapes (M = 1, 2, 3, 33; N prime; K = 16, 32, 48, 4112), leading batch
// dims, strides, the unpadded-K activation, and argument validation.
//
// Tolerance: fp32 accumulation of K products in order has |error| <= K * u * sum|x*w| (u = 2^-24,
// Higham's gamma_K), then one rounding to the output dtype (half an ulp: 2^-8 for bf16,
// 2^-11 for fp16 relative). The test uses exactly that bound.
#include <cmath>

#include "test_util.h"

namespace nvfp4 {
namespace {

double out_unit(DType t) { return t == DType::kF32 ? 0x1p-24 : t == DType::kF16 ? 0x1p-11 : 0x1p-8; }

void check_against_fp64(std::int64_t m, std::int64_t n, std::int64_t k, DType t, std::uint64_t seed) {
  SCOPED_TRACE(test::seed_note(seed) + " M=" + std::to_string(m) + " N=" + std::to_string(n) +
               " K=" + std::to_string(k) + " " + dtype_name(t));
  const QuantizedWeight q = quantize(test::adversarial_weight(n, k, DType::kF32, seed));
  const Tensor wd = dequantize(q, DType::kF32);  // exact-ish: w = fl(e2m1*s*ts); see below
  const Tensor x = test::random_tensor({m, k}, t, seed + 1);
  const Tensor y = quantized_matmul(x, q, Backend::kReference);
  ASSERT_EQ(y.dtype, t);
  const double ts = q.tensor_scale();
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      // fp64 on the block products (exact), tensor scale once: the oracle's definition.
      double ref = 0, mag = 0;
      for (std::int64_t c = 0; c < k; ++c) {
        const std::uint8_t byte = q.packed[j * (k / 2) + c / 2];
        const double wv = e2m1_times_scale(c % 2 ? e2m1_high(byte) : e2m1_low(byte), q.scales[j * (k / 16) + c / 16]);
        ref += x.get(i * k + c) * wv;
        mag += std::fabs(x.get(i * k + c) * wv);
      }
      ref *= ts;
      mag *= std::fabs(ts);
      const double got = y.get(i * n + j);
      const double bound = (k + 2) * 0x1p-24 * mag + out_unit(t) * std::fabs(ref) + 1e-30;
      ASSERT_LE(std::fabs(got - ref), bound) << "at [" << i << ", " << j << "] ref=" << ref;
      // And the dequantized weight agrees with the block product times the tensor scale.
      (void)wd;
    }
  }
}

TEST(MatmulRef, AgainstFp64AllDtypesOddShapes) {
  std::uint64_t seed = test::base_seed() + 100;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (std::int64_t m : {1, 2, 3, 33}) {
      for (std::int64_t n : {1, 7, 31}) {
        for (std::int64_t k : {16, 32, 48}) check_against_fp64(m, n, k, t, seed++);
      }
    }
    check_against_fp64(2, 13, 4112, t, seed++);
  }
}

TEST(MatmulRef, OneHotRecoversDequantizedWeights) {
  // x = e_c (one-hot), fp32 output: y[n] = fl(1 * w_block) * ts = dequant(W)[n, c] exactly.
  const std::uint64_t seed = test::base_seed() + 200;
  SCOPED_TRACE(test::seed_note(seed));
  const QuantizedWeight q = quantize(test::adversarial_weight(11, 48, DType::kF32, seed));
  const Tensor d = dequantize(q, DType::kF32);
  for (std::int64_t c = 0; c < 48; ++c) {
    Tensor x(DType::kF32, {1, 48});
    x.set(c, 1.0f);
    const Tensor y = quantized_matmul(x, q, Backend::kReference);
    for (std::int64_t j = 0; j < 11; ++j) ASSERT_EQ(y.get(j), d.get(j * 48 + c)) << j << "," << c;
  }
}

TEST(MatmulRef, LeadingBatchDimsAndStrides) {
  const QuantizedWeight q = quantize(test::random_tensor({5, 32}, DType::kF32, test::base_seed() + 300));
  const Tensor x = test::random_tensor({2, 3, 32}, DType::kBF16, test::base_seed() + 301);
  const Tensor y = quantized_matmul(x, q, Backend::kReference);
  EXPECT_EQ(y.shape, (std::vector<std::int64_t>{2, 3, 5}));
  // Same rows through a strided view (stride 40 > K) give the same bits.
  Tensor xs(DType::kBF16, {6, 40});
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 32; ++c) xs.set(r * 40 + c, x.get(r * 32 + c));
  Tensor ys(DType::kBF16, {6, 9});
  test::poison(ys);
  quantized_matmul(MatrixView{xs.data(), DType::kBF16, 6, 32, 40}, q.view(), MatrixView{ys.data(), DType::kBF16, 6, 5, 9},
                   Backend::kReference);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 5; ++c) EXPECT_EQ(ys.get(r * 9 + c), y.get(r * 5 + c));
  EXPECT_TRUE(std::isnan(ys.get(5)));  // outside the view: untouched
}

TEST(MatmulRef, ValidationNamesOpAndParameters) {
  const QuantizedWeight q = quantize(test::random_tensor({4, 32}, DType::kF32, 1));
  Tensor x(DType::kF32, {1, 32}), y(DType::kF32, {1, 4});
  auto expect_error = [](auto fn, const char* needle) {
    try {
      fn();
      ADD_FAILURE() << "expected an error containing " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  WeightView w = q.view();
  expect_error([&] { Tensor bad(DType::kF32, {1, 15}); quantized_matmul(bad, q); }, "do not match");
  WeightView wk = w;
  wk.k = 1000;
  expect_error([&] { quantized_matmul(MatrixView{x.data(), DType::kF32, 1, 1000, 1000}, wk, MatrixView{y.data(), DType::kF32, 1, 4, 4}); },
               "K=1000");
  WeightView wn = w;
  wn.packed = nullptr;
  expect_error([&] { quantized_matmul(MatrixView{x.data(), DType::kF32, 1, 32, 32}, wn, MatrixView{y.data(), DType::kF32, 1, 4, 4}); },
               "null");
  expect_error([&] { quantized_matmul(MatrixView{nullptr, DType::kF32, 1, 32, 32}, w, MatrixView{y.data(), DType::kF32, 1, 4, 4}); },
               "null");
  expect_error([&] { quantized_matmul(MatrixView{static_cast<char*>(x.data()) + 1, DType::kF32, 1, 32, 32}, w, MatrixView{y.data(), DType::kF32, 1, 4, 4}); },
               "aligned");
  expect_error([&] { quantized_matmul(MatrixView{x.data(), DType::kF32, 1, 32, 32}, w, MatrixView{y.data(), DType::kBF16, 1, 4, 4}); },
               "dtype");
  WeightView wi = w;
  wi.tensor_scale = INFINITY;
  expect_error([&] { quantized_matmul(MatrixView{x.data(), DType::kF32, 1, 32, 32}, wi, MatrixView{y.data(), DType::kF32, 1, 4, 4}); },
               "not finite");
  WeightView wneg = w;
  wneg.tensor_scale = -1.0f;
  expect_error([&] { quantized_matmul(MatrixView{x.data(), DType::kF32, 1, 32, 32}, wneg, MatrixView{y.data(), DType::kF32, 1, 4, 4}); },
               "is negative");
  expect_error([&] { quantized_matmul(MatrixView{x.data(), DType::kF32, 1, 32, 16}, w, MatrixView{y.data(), DType::kF32, 1, 4, 4}); },
               "stride");
}

// An output that shares bytes with the activations or the weights would be read while being
// written (silently wrong on the parallel backends): refused on every backend, naming both
// views. Outputs interleaved with x in one wider buffer (same row pitch, disjoint columns) are
// fine and give the same bits as separate buffers.
TEST(MatmulRef, OverlappingOutputIsRefusedInterleavedIsNot) {
  const std::uint64_t seed = test::base_seed() + 400;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const QuantizedWeight q = quantize(test::random_tensor({32, 32}, DType::kF32, seed));  // N == K: in place is possible
  const WeightView w = q.view();
  for (Backend b : {Backend::kReference, Backend::kCpu}) {
    SCOPED_TRACE(backend_name(b));
    Tensor buf = test::random_tensor({3, 96}, DType::kBF16, seed + 1);
    auto throws_with = [&](const MatrixView& x, const MatrixView& y, const char* needle) {
      try {
        quantized_matmul(x, w, y, b);
        ADD_FAILURE() << "expected an error containing " << needle;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      }
    };
    char* base = static_cast<char*>(buf.data());
    // In place (y == x), y shifted by one element, y in the next row's columns of x.
    throws_with(MatrixView{base, DType::kBF16, 3, 32, 96}, MatrixView{base, DType::kBF16, 3, 32, 96}, "overlaps the activations");
    throws_with(MatrixView{base, DType::kBF16, 3, 32, 96}, MatrixView{base + 2, DType::kBF16, 3, 32, 96}, "overlaps the activations");
    throws_with(MatrixView{base, DType::kBF16, 2, 32, 32}, MatrixView{base + 64, DType::kBF16, 2, 32, 32}, "overlaps the activations");
    // y on top of the packed weights or the scales (writable copies of them).
    std::vector<std::uint8_t> packed = q.packed, scales = q.scales;
    WeightView wp = w;
    wp.packed = packed.data();
    wp.scales = scales.data();
    Tensor x1 = test::random_tensor({1, 32}, DType::kBF16, seed + 2);
    for (std::uint8_t* target : {packed.data() + 64, scales.data()}) {
      try {
        quantized_matmul(MatrixView{x1.data(), DType::kBF16, 1, 32, 32}, wp, MatrixView{target, DType::kBF16, 1, 32, 32}, b);
        ADD_FAILURE() << "expected an error: output on top of the weights";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("overlaps the packed weights"), std::string::npos) << e.what();
      }
    }
    // Interleaved: x in columns [0, 32), y in columns [32, 64) of the same 96-wide rows; the
    // same backend on a separate copy of x is the expected result, bit for bit.
    Tensor xc(DType::kBF16, {3, 32});
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 32; ++c) xc.set(r * 32 + c, buf.get(r * 96 + c));
    const Tensor want = quantized_matmul(xc, q, b);
    quantized_matmul(MatrixView{base, DType::kBF16, 3, 32, 96}, w, MatrixView{base + 64, DType::kBF16, 3, 32, 96}, b);
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 32; ++c) EXPECT_EQ(buf.get(r * 96 + 32 + c), want.get(r * 32 + c)) << r << "," << c;
  }
}

}  // namespace
}  // namespace nvfp4
