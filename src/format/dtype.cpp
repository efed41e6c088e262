// Small non-inline pieces of the format/dtype/tensor headers.
#include <algorithm>
#include <cctype>
#include <exception>

#include "format/validate.h"
#include "nvfp4/dtype.h"
#include "nvfp4/error.h"
#include "nvfp4/tensor.h"

namespace nvfp4 {

void fail(const char* op, const std::string& message) {
  throw Error(std::string("[") + op + "] " + message);
}

DType dtype_from_name(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "f32" || s == "fp32" || s == "float32" || s == "float") return DType::kF32;
  if (s == "f16" || s == "fp16" || s == "float16" || s == "half") return DType::kF16;
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  fail("dtype", "unknown dtype '" + name + "' (expected f32, f16 or bf16)");
}

Tensor::Tensor(DType t, std::vector<std::int64_t> s) : dtype(t), shape(std::move(s)) {
  detail::check_dtype("Tensor", t, "new tensor");
  const std::int64_t n = detail::checked_numel("Tensor", shape, dtype_size(t), "new tensor");
  const std::uint64_t nbytes = static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(dtype_size(t));
  try {
    bytes.assign(static_cast<std::size_t>(nbytes), 0);
  } catch (const std::exception&) {  // std::bad_alloc / std::length_error: say which tensor
    fail("Tensor", "cannot allocate " + std::to_string(nbytes) + " bytes for a " + dtype_name(t) + " tensor of " +
                       std::to_string(n) + " elements");
  }
}

std::int64_t Tensor::numel() const {
  // Overflow-checked: a wrapped count would let a shape pass a size check it fails (validate.h).
  static const std::string kWhat = "numel";
  return detail::checked_numel("Tensor", shape, 1, kWhat);
}

float tensor_scale_from_stored(ScaleConvention c, float stored) {
  switch (c) {
    case ScaleConvention::kDequant: return stored;
    case ScaleConvention::kQuant: return 1.0f / stored;
    case ScaleConvention::kAmax: return stored / kE2M1xE4M3Max;
    case ScaleConvention::kNone: return 1.0f;
  }
  fail("tensor scale", "unknown ScaleConvention value " + std::to_string(static_cast<int>(c)));
}

}  // namespace nvfp4
