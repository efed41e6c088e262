// tests/core/test_validation.cpp -- bad arguments to the public API end in nvfp4::Error, never
// in a crash, a sanitizer report or a silently wrong result. Each case is one an audit of the
// API found on 2026-12-03 (before the fix it read out of bounds, wrapped a size check, crashed on
// a null pointer or returned wrong values); the ASan/UBSan build (scripts/sanitize_cpu.sh) runs
// them too. Shapes are tiny: the products that overflow come from the sizes, not from data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "nvfp4/checkpoint.h"
#include "nvfp4/cpu.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"
#include "nvfp4/ops.h"
#include "nvfp4/quantize.h"
#include "test_util.h"

namespace nvfp4 {
namespace {

using test::error_of;

#define EXPECT_ERROR(stmt, op, text)                                                 \
  do {                                                                               \
    const std::string m_ = error_of([&] { stmt; });                                  \
    EXPECT_NE(m_.find(std::string("[") + (op) + "]"), std::string::npos) << m_;      \
    EXPECT_NE(m_.find(text), std::string::npos) << m_;                               \
  } while (0)

constexpr std::int64_t kHuge = std::int64_t{1} << 62;

// A valid 32 x 64 weight (all codes 1 = 0.5, scales 1.0) and f32 buffers around it.
struct Fixture {
  std::vector<std::uint8_t> packed = std::vector<std::uint8_t>(32 * 32, 0x11);
  std::vector<std::uint8_t> scales = std::vector<std::uint8_t>(32 * 4, 0x38);
  std::vector<float> x = std::vector<float>(2 * 64, 1.0f);
  std::vector<float> y = std::vector<float>(2 * 32, 0.0f);
  WeightView w() const { return {packed.data(), scales.data(), 1.0f, 32, 64}; }
  MatrixView xv() { return {x.data(), DType::kF32, 2, 64, 64}; }
  MatrixView yv() { return {y.data(), DType::kF32, 2, 32, 32}; }
};

// Strides, rows and weight sizes whose byte spans wrap 64 bits. Before: a stride of 2^62 f32
// elements (2^64 bytes) wrapped to 0, so every row read row 0 without an error; a stride of
// INT64_MAX read before the buffer; huge rows or N overflowed signed arithmetic (UB).
TEST(ApiValidation, ByteSpansThatOverflowAreRefused) {
  for (Backend b : {Backend::kCpu, Backend::kReference}) {
    SCOPED_TRACE(backend_name(b));
    Fixture f;
    MatrixView x = f.xv();
    x.stride = kHuge;
    EXPECT_ERROR(quantized_matmul(x, f.w(), f.yv(), b), "quantized_matmul", "spans more bytes than fit in 64 bits");
    x.stride = std::numeric_limits<std::int64_t>::max();
    EXPECT_ERROR(quantized_matmul(x, f.w(), f.yv(), b), "quantized_matmul", "spans more bytes");
    MatrixView y = f.yv();
    y.stride = kHuge;
    EXPECT_ERROR(quantized_matmul(f.xv(), f.w(), y, b), "quantized_matmul", "output");
    x = f.xv();
    y = f.yv();
    x.rows = y.rows = kHuge;
    EXPECT_ERROR(quantized_matmul(x, f.w(), y, b), "quantized_matmul", "spans more bytes");
    WeightView w = f.w();
    w.n = kHuge;
    y = f.yv();
    y.cols = y.stride = kHuge;
    EXPECT_ERROR(quantized_matmul(f.xv(), w, y, b), "quantized_matmul", "does not fit in 64 bits");
    w = f.w();
    w.k = kHuge;
    x = f.xv();
    x.cols = x.stride = kHuge;
    EXPECT_ERROR(quantized_matmul(x, w, f.yv(), b), "quantized_matmul", "does not fit in 64 bits");
  }
  // The same shapes through the pre-split CPU repack: N * K / 2 wrapped past its overlap check.
  std::vector<std::uint8_t> buf(1 << 16, 0x21);
  EXPECT_ERROR(cpu::repack_for_gemv_cpu({buf.data() + 8192, buf.data() + 16384, 1.0f, (std::int64_t{1} << 56) + 4, 512},
                                        buf.data()),
               "cpu::repack_for_gemv_cpu", "does not fit in 64 bits");
}

// Tensor's size is numel * dtype size; a hand-built Tensor need not keep it. Before: read past
// the bytes (ASan heap-buffer-overflow), or dereferenced null for an empty Tensor.
TEST(ApiValidation, TensorsWhoseBytesDoNotMatchTheirShape) {
  const QuantizedWeight q = quantize(test::random_tensor({4, 64}, DType::kF32, 11));
  Tensor x;
  x.shape = {3, 64};
  x.bytes.resize(4);
  EXPECT_ERROR(quantized_matmul(x, q), "quantized_matmul", "holds 4 bytes");
  EXPECT_ERROR(quantize(Tensor{}), "quantize", "holds 0 bytes");
  EXPECT_ERROR(weight_amax(Tensor{}, "w"), "quantize", "tensor 'w'");
  Tensor bad_dtype(DType::kF32, {4, 64});
  bad_dtype.dtype = static_cast<DType>(7);
  EXPECT_ERROR(quantize(bad_dtype), "quantize", "unknown DType value 7");
  // numel itself: an overflowing count was a wrapped (wrong) number.
  Tensor wrap;
  wrap.shape = {kHuge + 1, 64};
  EXPECT_ERROR(wrap.numel(), "Tensor", "more elements than fit in 64 bits");
  EXPECT_ERROR(Tensor(DType::kF32, {std::int64_t{1} << 40, std::int64_t{1} << 40}), "Tensor", "more elements");
  EXPECT_ERROR(Tensor(DType::kF32, {4, -1}), "Tensor", "negative dimension");
  EXPECT_ERROR(quantized_matmul(wrap, q), "quantized_matmul", "more elements");
}

// An owning weight whose N * K wraps to its (small) buffer sizes passed the size check and read
// out of bounds; one with huge N and K made dequantize try a 4 TiB allocation before checking.
TEST(ApiValidation, QuantizedWeightSizesAreCheckedWithoutOverflow) {
  QuantizedWeight q;
  q.n = kHuge + 1;
  q.k = 64;
  q.packed.resize(32);
  q.scales.resize(4);
  EXPECT_ERROR(dequantize(q), "dequantize", "does not fit in 64 bits");
  EXPECT_ERROR(quantized_matmul(Tensor(DType::kF32, {1, 64}), q), "quantized_matmul", "does not fit in 64 bits");
  q.n = q.k = std::int64_t{1} << 20;
  q.packed.clear();
  q.scales.clear();
  EXPECT_ERROR(dequantize(q), "dequantize", "buffers hold 0 packed");
  // The reader's tensor-scale rule for owning weights: a compressed-tensors global scale of 0
  // (a division by zero) or a negative one, and a convention that does not exist.
  QuantizedWeight ok = quantize(test::random_tensor({4, 64}, DType::kF32, 12));
  QuantizedWeight ct = ok;
  ct.convention = ScaleConvention::kQuant;
  ct.stored_scale = 0.0f;
  EXPECT_ERROR(dequantize(ct), "dequantize", "finite and positive");
  ct.stored_scale = -2.0f;
  EXPECT_ERROR(quantized_matmul(Tensor(DType::kF32, {1, 64}), ct), "quantized_matmul", "finite and positive");
  QuantizedWeight bad = ok;
  bad.convention = static_cast<ScaleConvention>(9);
  EXPECT_ERROR(dequantize(bad), "dequantize", "unknown ScaleConvention value 9");
  EXPECT_ERROR(bad.tensor_scale(), "tensor scale", "unknown ScaleConvention value 9");
  EXPECT_ERROR(dequantize(ok, static_cast<DType>(9)), "dequantize", "unknown DType value 9");
}

// dequantize_ref (the oracle's public form) now checks what validate_matmul checks. Before: a
// misaligned output was UB, an output over the codes gave silently wrong values, a huge stride
// wrote out of bounds, and a NaN tensor scale passed.
TEST(ApiValidation, DequantizeRefChecksItsOutput) {
  Fixture f;
  std::vector<float> out(32 * 64 + 1);
  const WeightView w = f.w();
  EXPECT_ERROR(dequantize_ref(w, {reinterpret_cast<char*>(out.data()) + 1, DType::kF32, 32, 64, 64}), "dequantize",
               "not aligned");
  EXPECT_ERROR(dequantize_ref(w, {out.data(), DType::kF32, 32, 64, std::numeric_limits<std::int64_t>::max()}),
               "dequantize", "spans more bytes");
  EXPECT_ERROR(dequantize_ref(w, {out.data(), static_cast<DType>(5), 32, 64, 64}), "dequantize", "unknown DType");
  // In place over the packed codes (a buffer large enough to hold the output).
  std::vector<float> big(32 * 64);
  std::memcpy(big.data(), f.packed.data(), f.packed.size());
  const WeightView in_place{reinterpret_cast<const std::uint8_t*>(big.data()), f.scales.data(), 1.0f, 32, 64};
  EXPECT_ERROR(dequantize_ref(in_place, {big.data(), DType::kF32, 32, 64, 64}), "dequantize", "overlaps the packed");
  WeightView nan_scale = w;
  nan_scale.tensor_scale = NAN;
  EXPECT_ERROR(dequantize_ref(nan_scale, {out.data(), DType::kF32, 32, 64, 64}), "dequantize", "not finite");
  WeightView negative_scale = w;
  negative_scale.tensor_scale = -0.5f;
  EXPECT_ERROR(dequantize_ref(negative_scale, {out.data(), DType::kF32, 32, 64, 64}), "dequantize", "is negative");
  WeightView minus_zero = w;  // -0 is 0: every output 0 (of either sign)
  minus_zero.tensor_scale = -0.0f;
  dequantize_ref(minus_zero, {out.data(), DType::kF32, 32, 64, 64});
  EXPECT_EQ(out[0], 0.0f);
  // And a valid call still gives 0.5 everywhere.
  dequantize_ref(w, {out.data(), DType::kF32, 32, 64, 64});
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[32 * 64 - 1], 0.5f);
}

// Enums cast from out-of-range integers used to fall into a default branch (a backend, a
// recipe, a dtype) and run something the caller did not ask for.
TEST(ApiValidation, OutOfRangeEnumsAreRefused) {
  Fixture f;
  EXPECT_ERROR(quantized_matmul(f.xv(), f.w(), f.yv(), static_cast<Backend>(9)), "quantized_matmul",
               "unknown Backend value 9");
  MatrixView x = f.xv(), y = f.yv();
  x.dtype = y.dtype = static_cast<DType>(7);
  EXPECT_ERROR(quantized_matmul(x, f.w(), y), "quantized_matmul", "unknown DType value 7");
  QuantizeOptions o;
  o.recipe = static_cast<Recipe>(9);
  EXPECT_ERROR(quantize(test::random_tensor({4, 64}, DType::kF32, 13), o), "quantize", "unknown Recipe value 9");
  EXPECT_STREQ(recipe_name(static_cast<Recipe>(9)), "unknown");
  EXPECT_STREQ(dtype_name(static_cast<DType>(9)), "unknown");
  EXPECT_STREQ(backend_name(static_cast<Backend>(9)), "unknown");
}

TEST(ApiValidation, SmallerEntryPoints) {
  // quantize_group with a null weight pointer: was a null dereference.
  EXPECT_ERROR(quantize_group({nullptr}, {"a"}, {}), "quantize_group", "weight 0 ('a') is a null pointer");
  // stored_scale_for_amax returned NaN for a NaN amax.
  EXPECT_ERROR(stored_scale_for_amax(Recipe::kModelopt, NAN), "quantize", "not a finite non-negative value");
  // parse_byte_size with more digits than a double holds: was std::out_of_range from stod.
  EXPECT_ERROR(parse_byte_size(std::string(400, '9')), "size", "cannot parse size");
  // The host reference repack in place (an output over its input) gave wrong bytes silently;
  // the device repack already refused it.
  const QuantizedWeight q = quantize(test::random_tensor({16, 128}, DType::kF32, 14));
  std::vector<std::uint8_t> packed = q.packed, scales = q.scales, s_out(scales.size());
  const WeightView w{packed.data(), scales.data(), 1.0f, 16, 128};
  EXPECT_ERROR(cuda::repack_for_gemv_sm90_ref(w, packed.data(), s_out.data()), "cuda::repack_for_gemv_sm90_ref",
               "must not overlap");
  std::vector<std::uint8_t> p_out(packed.size());
  EXPECT_ERROR(cuda::repack_for_gemv_sm90_ref(w, p_out.data(), scales.data()), "cuda::repack_for_gemv_sm90_ref",
               "must not overlap");
  EXPECT_ERROR(cuda::repack_for_gemv_sm90_ref(w, p_out.data(), p_out.data()), "cuda::repack_for_gemv_sm90_ref",
               "must not overlap");
  EXPECT_NO_THROW(cuda::repack_for_gemv_sm90_ref(w, p_out.data(), s_out.data()));
}

}  // namespace
}  // namespace nvfp4
