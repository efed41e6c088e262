// reference/dequantize_ref.cpp -- the oracle: materialize the dense weight.
//   w[n, k] = fl( fl(e2m1[q] * float(|e4m3 scale|)) * tensor_scale ), then RNE to the output dtype.
// The first product is exact (<= 4 significant bits each); so w is one rounding of the exact
// value in fp32. Scalar and obvious on purpose: it is never optimised.
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

namespace nvfp4 {

void dequantize_ref(const WeightView& w, const MatrixView& out) {
  const char* op = "dequantize";
  if (w.n < 0 || w.k < 0 || w.k % kBlockSize != 0)
    fail(op, "weight shape N=" + std::to_string(w.n) + " K=" + std::to_string(w.k) +
                 " is invalid (K must be a non-negative multiple of 16)");
  if (w.n * w.k > 0 && (!w.packed || !w.scales)) fail(op, "weight has null packed/scales pointer");
  if (out.rows != w.n || out.cols != w.k || out.stride < out.cols)
    fail(op, "output is " + std::to_string(out.rows) + "x" + std::to_string(out.cols) + " (stride " +
                 std::to_string(out.stride) + "), expected " + std::to_string(w.n) + "x" + std::to_string(w.k));
  if (w.n * w.k > 0 && !out.data) fail(op, "output pointer is null");
  const std::int64_t kb = w.k / kBlockSize;
  for (std::int64_t n = 0; n < w.n; ++n) {
    for (std::int64_t k = 0; k < w.k; ++k) {
      const std::uint8_t byte = w.packed[n * (w.k / 2) + k / 2];
      const std::uint8_t code = (k % 2 == 0) ? e2m1_low(byte) : e2m1_high(byte);
      const std::uint8_t scale = w.scales[n * kb + k / kBlockSize];
      const float v = e2m1_times_scale(code, scale) * w.tensor_scale;
      store_from_f32(out.data, out.dtype, n * out.stride + k, v);
    }
  }
}

Tensor dequantize(const QuantizedWeight& w, DType out_dtype) {
  Tensor out(out_dtype, {w.n, w.k});
  if (static_cast<std::int64_t>(w.packed.size()) != w.n * w.k / 2 ||
      static_cast<std::int64_t>(w.scales.size()) != w.n * w.k / kBlockSize)
    fail("dequantize", "weight buffers do not match N=" + std::to_string(w.n) + " K=" + std::to_string(w.k));
  dequantize_ref(w.view(), MatrixView{out.data(), out_dtype, w.n, w.k, w.k});
  return out;
}

}  // namespace nvfp4
