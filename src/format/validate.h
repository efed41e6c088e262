// format/validate.h -- internal: the argument checks that several public entry points share
// (matmul, dequantize, quantize, the repacks, the checkpoint writer), so each rule is written
// once and every entry point refuses the same inputs with an Error naming itself.
//
// Sizes are int64 in the API. Products such as N * K / 2, numel * element size and
// (rows - 1) * stride + cols can exceed 64 bits for absurd arguments; wrapped, they would pass
// a size check and let a kernel read out of bounds (found by an audit on 2026-12-03), so every
// such product is computed here with an overflow check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nvfp4/dtype.h"
#include "nvfp4/tensor.h"

namespace nvfp4::detail {

// a * b for a, b >= 0; fails with "[op] what: ... does not fit in 64 bits" when it overflows.
std::int64_t mul_or_fail(const char* op, std::int64_t a, std::int64_t b, const std::string& what);

// The enum holds one of kF32, kF16, kBF16 (a cast integer may hold anything).
bool dtype_valid(DType t);
void check_dtype(const char* op, DType t, const std::string& what);

// Elements of `shape` (1 for an empty shape); fails on a negative dimension or when the count
// times elem_bytes does not fit in int64.
std::int64_t checked_numel(const char* op, const std::vector<std::int64_t>& shape, int elem_bytes,
                           const std::string& what);

// A dense Tensor as the API documents it: a valid dtype and bytes.size() == numel * size.
void check_tensor(const char* op, const Tensor& t, const std::string& what);

// Bytes of an N x K canonical weight's packed codes (N * K / 2) and block scales (N * K / 16).
// Needs n >= 0 and k >= 0; fails when either does not fit in int64.
struct WeightBytes {
  std::uint64_t packed = 0, scales = 0;
};
WeightBytes weight_bytes(const char* op, std::int64_t n, std::int64_t k, const std::string& what);

// The tensor-scale rule of the checkpoint reader, for writers and owning weights: finite, and
// positive for kQuant (compressed-tensors divides by it), non-negative otherwise (0 is the
// all-zero tensor's policy, quantize.h); the convention must be a known one.
void check_stored_scale(const char* op, ScaleConvention c, float stored, const std::string& what);

// A view's dequant-direction tensor scale: finite and not negative. NVFP4's tensor scale is
// amax / 2688 >= 0, and the checkpoint reader refuses a negative stored one (check_stored_scale);
// a negative one in a hand-built WeightView would flip every output's sign. -0 passes as 0.
void check_tensor_scale(const char* op, float tensor_scale, const std::string& what);

// An owning canonical weight: N, K > 0, K % 16 == 0, the stored scale as above, and buffers of
// exactly N * K / 2 and N * K / 16 bytes. Does not scan the block scales (see first_nan_scale).
void check_quantized_weight(const char* op, const QuantizedWeight& w, const std::string& what);

// Index of the first E4M3 NaN byte (0x7F / 0xFF) in scales[0, n), or -1.
std::int64_t first_nan_scale(const std::uint8_t* scales, std::uint64_t n);

// Bytes a row-major view spans: ((rows - 1) * stride + cols) * element size, 0 for rows == 0.
// Needs rows >= 0, cols > 0, stride >= cols and a valid dtype (the caller checks them); fails
// when the span does not fit in int64 or runs past the end of the address space.
std::uint64_t view_bytes(const char* op, const MatrixView& v, const std::string& what);
// The same without an error: false when the span does not fit (for hot paths that format the
// message only when it is needed: validate_matmul runs on every call).
bool view_bytes_fit(const MatrixView& v, std::uint64_t* bytes);

}  // namespace nvfp4::detail
