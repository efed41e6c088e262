// reference/dequantize_ref.cpp -- the oracle: materialize the dense weight.
//   w[n, k] = fl( fl(e2m1[q] * float(|e4m3 scale|)) * tensor_scale ), then RNE to the output dtype.
// The first product is exact (<= 4 significant bits each); so w is one rounding of the exact
// value in fp32. Scalar and obvious on purpose: it is never optimised.
#include <cmath>
#include <string>

#include "dispatch/overlap.h"
#include "format/validate.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

namespace nvfp4 {

void dequantize_ref(const WeightView& w, const MatrixView& out) {
  const char* op = "dequantize";
  const std::string ws = "weight N=" + std::to_string(w.n) + " K=" + std::to_string(w.k);
  if (w.n < 0 || w.k < 0 || w.k % kBlockSize != 0)
    fail(op, ws + " is invalid (K must be a non-negative multiple of 16)");
  const detail::WeightBytes wb = detail::weight_bytes(op, w.n, w.k, ws);
  if (wb.packed > 0 && (!w.packed || !w.scales)) fail(op, ws + ": null packed/scales pointer");
  detail::check_tensor_scale(op, w.tensor_scale, ws);
  detail::check_dtype(op, out.dtype, "output");
  const std::string os = std::to_string(out.rows) + "x" + std::to_string(out.cols) + " " + dtype_name(out.dtype) +
                         " (stride " + std::to_string(out.stride) + ")";
  if (out.rows != w.n || out.cols != w.k || out.stride < out.cols)
    fail(op, "output is " + os + ", expected " + std::to_string(w.n) + "x" + std::to_string(w.k));
  if (wb.packed == 0) return;
  if (!out.data) fail(op, "output pointer is null (" + ws + ")");
  if (reinterpret_cast<std::uintptr_t>(out.data) % dtype_size(out.dtype) != 0)
    fail(op, "output pointer is not aligned to its " + std::to_string(dtype_size(out.dtype)) + "-byte element (" + os + ")");
  const std::uint64_t ob = detail::view_bytes(op, out, "output " + os);
  // Writing over the codes or scales while reading them would give a silently wrong result.
  if (byte_spans_overlap(out.data, ob, w.packed, wb.packed) || byte_spans_overlap(out.data, ob, w.scales, wb.scales))
    fail(op, "output " + os + " overlaps the packed weights or the scales of " + ws + " (in place is not supported)");
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
  // Checked before the output is allocated: a bad N or K must not become a huge allocation.
  detail::check_quantized_weight("dequantize", w, "weight");
  detail::check_dtype("dequantize", out_dtype, "output");
  Tensor out(out_dtype, {w.n, w.k});
  dequantize_ref(w.view(), MatrixView{out.data(), out_dtype, w.n, w.k, w.k});
  return out;
}

}  // namespace nvfp4
