// Small non-inline pieces of the format/dtype/tensor headers.
#include <algorithm>
#include <cctype>

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
  for (std::int64_t d : shape) {
    if (d < 0) fail("Tensor", "negative dimension in shape");
  }
  bytes.assign(static_cast<std::size_t>(numel()) * dtype_size(t), 0);
}

std::int64_t Tensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

float tensor_scale_from_stored(ScaleConvention c, float stored) {
  switch (c) {
    case ScaleConvention::kDequant: return stored;
    case ScaleConvention::kQuant: return 1.0f / stored;
    case ScaleConvention::kAmax: return stored / kE2M1xE4M3Max;
    default: return 1.0f;
  }
}

}  // namespace nvfp4
