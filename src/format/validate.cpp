// format/validate.cpp -- see validate.h.
#include "format/validate.h"

#include <cmath>

#include "nvfp4/error.h"
#include "nvfp4/format.h"

namespace nvfp4::detail {

std::int64_t mul_or_fail(const char* op, std::int64_t a, std::int64_t b, const std::string& what) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    fail(op, what + ": " + std::to_string(a) + " x " + std::to_string(b) + " does not fit in 64 bits");
  return r;
}

bool dtype_valid(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

void check_dtype(const char* op, DType t, const std::string& what) {
  if (!dtype_valid(t))
    fail(op, what + ": unknown DType value " + std::to_string(static_cast<int>(t)) + " (expected f32, f16 or bf16)");
}

namespace {
std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}
}  // namespace

std::int64_t checked_numel(const char* op, const std::vector<std::int64_t>& shape, int elem_bytes,
                           const std::string& what) {
  // Called by Tensor::numel(), which loops may call per element: nothing is formatted unless
  // the shape is bad.
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) fail(op, what + ": shape " + shape_text(shape) + " has a negative dimension");
    if (__builtin_mul_overflow(n, d, &n))
      fail(op, what + ": shape " + shape_text(shape) + " has more elements than fit in 64 bits");
  }
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<std::int64_t>(elem_bytes), &bytes))
    fail(op, what + ": shape " + shape_text(shape) + " needs more bytes than fit in 64 bits");
  return n;
}

void check_tensor(const char* op, const Tensor& t, const std::string& what) {
  check_dtype(op, t.dtype, what);
  const std::int64_t n = checked_numel(op, t.shape, dtype_size(t.dtype), what);
  const std::uint64_t want = static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(dtype_size(t.dtype));
  if (t.bytes.size() != want)
    fail(op, what + ": holds " + std::to_string(t.bytes.size()) + " bytes, its shape and dtype " +
                 dtype_name(t.dtype) + " need " + std::to_string(want));
}

WeightBytes weight_bytes(const char* op, std::int64_t n, std::int64_t k, const std::string& what) {
  // N * K / 2 can overflow where N * (K / 2) does not; K % 16 == 0 is the caller's check, so
  // N * (K / 2) and N * (K / 16) are the exact byte counts. Messages are formatted only on
  // failure (validate_matmul calls this on every matmul).
  std::int64_t p = 0, s = 0;
  if (n < 0 || k < 0 || __builtin_mul_overflow(n, k / 2, &p))
    mul_or_fail(op, n, k / 2, what + " (packed bytes N x K/2)");  // throws
  if (__builtin_mul_overflow(n, k / kBlockSize, &s)) mul_or_fail(op, n, k / kBlockSize, what + " (scale bytes N x K/16)");
  return {static_cast<std::uint64_t>(p), static_cast<std::uint64_t>(s)};
}

void check_stored_scale(const char* op, ScaleConvention c, float stored, const std::string& what) {
  switch (c) {
    case ScaleConvention::kNone: return;  // nothing stored; tensor scale 1
    case ScaleConvention::kQuant:
      if (!(std::isfinite(stored) && stored > 0.0f))
        fail(op, what + ": stored tensor scale " + std::to_string(stored) + " (compressed-tensors global scale) must be finite and positive");
      return;
    case ScaleConvention::kDequant:
    case ScaleConvention::kAmax:
      if (!(std::isfinite(stored) && stored >= 0.0f))
        fail(op, what + ": stored tensor scale " + std::to_string(stored) + " must be finite and non-negative");
      return;
  }
  fail(op, what + ": unknown ScaleConvention value " + std::to_string(static_cast<int>(c)));
}

void check_tensor_scale(const char* op, float tensor_scale, const std::string& what) {
  if (!std::isfinite(tensor_scale))
    fail(op, what + ": tensor scale " + std::to_string(tensor_scale) + " is not finite");
  if (tensor_scale < 0.0f)
    fail(op, what + ": tensor scale " + std::to_string(tensor_scale) +
                 " is negative (an NVFP4 tensor scale is amax / 2688 >= 0)");
}

void check_quantized_weight(const char* op, const QuantizedWeight& w, const std::string& what) {
  const std::string ws = what + " (N=" + std::to_string(w.n) + " K=" + std::to_string(w.k) + ")";
  if (w.n <= 0) fail(op, ws + ": N must be positive");
  if (w.k <= 0 || w.k % kBlockSize != 0) fail(op, ws + ": K must be a positive multiple of 16");
  check_stored_scale(op, w.convention, w.stored_scale, ws);
  const WeightBytes b = weight_bytes(op, w.n, w.k, ws);
  if (w.packed.size() != b.packed || w.scales.size() != b.scales)
    fail(op, ws + ": buffers hold " + std::to_string(w.packed.size()) + " packed and " +
                 std::to_string(w.scales.size()) + " scale bytes, the shape needs " + std::to_string(b.packed) +
                 " and " + std::to_string(b.scales));
}

std::int64_t first_nan_scale(const std::uint8_t* scales, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i)
    if (e4m3_is_nan(scales[i])) return static_cast<std::int64_t>(i);
  return -1;
}

bool view_bytes_fit(const MatrixView& v, std::uint64_t* bytes) {
  *bytes = 0;
  if (v.rows == 0) return true;
  std::int64_t elems = 0, b = 0;
  if (__builtin_mul_overflow(v.rows - 1, v.stride, &elems) || __builtin_add_overflow(elems, v.cols, &elems) ||
      __builtin_mul_overflow(elems, static_cast<std::int64_t>(dtype_size(v.dtype)), &b))
    return false;
  const auto begin = reinterpret_cast<std::uintptr_t>(v.data);
  if (begin + static_cast<std::uint64_t>(b) < begin) return false;  // past the end of the address space
  *bytes = static_cast<std::uint64_t>(b);
  return true;
}

std::uint64_t view_bytes(const char* op, const MatrixView& v, const std::string& what) {
  std::uint64_t bytes = 0;
  if (!view_bytes_fit(v, &bytes))
    fail(op, what + " spans more bytes than fit in 64 bits or in the address space (rows " + std::to_string(v.rows) +
                 ", stride " + std::to_string(v.stride) + ", cols " + std::to_string(v.cols) + ")");
  return bytes;
}

}  // namespace nvfp4::detail
