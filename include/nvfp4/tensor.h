// nvfp4/tensor.h -- the data the API passes around: a dense Tensor (fp32/fp16/bf16 bytes with
// a shape), a canonical NVFP4 weight (QuantizedWeight, owning) and the non-owning views that
// kernels receive (WeightView, MatrixView).
//
// QuantizedWeight is always in the canonical checkpoint layout (see format.h). It also keeps
// the tensor scale exactly as its producer stores it (ScaleConvention + stored_scale), so a
// checkpoint written back is byte-identical; tensor_scale() derives the dequant-direction
// value the kernels use.
#pragma once

#include <cstdint>
#include <vector>

#include "nvfp4/dtype.h"

namespace nvfp4 {

// A dense, contiguous, row-major tensor of fp32/fp16/bf16 values.
struct Tensor {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;  // numel() * dtype_size(dtype)

  Tensor() = default;
  Tensor(DType t, std::vector<std::int64_t> s);  // zero-filled; Error if it cannot be allocated
  std::int64_t numel() const;  // Error on a negative dimension or a count that overflows int64
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
  float get(std::int64_t i) const { return load_as_f32(bytes.data(), dtype, i); }
  void set(std::int64_t i, float v) { store_from_f32(bytes.data(), dtype, i, v); }
};

// How a producer stores the tensor scale in its checkpoint.
enum class ScaleConvention : std::uint8_t {
  kDequant,      // modelopt weight_scale_2 = amax / 2688: tensor_scale = stored
  kQuant,        // compressed-tensors weight_global_scale = 2688 / amax: tensor_scale = fl(1 / stored)
  kAmax,         // MLX global_scale = amax: tensor_scale = fl(stored / 2688)
  kNone,         // MLX without a global scale (what mlx-lm writes): tensor_scale = 1, nothing stored
};

// The dequant-direction tensor scale for a stored value (fp32 IEEE arithmetic, one rounding).
// A stored value of 0 in kQuant (global scale of an all-zero tensor policy) never occurs: the
// quantizers write 1.0 there (see quantize.h).
float tensor_scale_from_stored(ScaleConvention c, float stored);

// Non-owning view of a canonical weight. Kernels take this (host or device pointers).
struct WeightView {
  const std::uint8_t* packed = nullptr;  // [n, k/2]
  const std::uint8_t* scales = nullptr;  // [n, k/16], E4M3 bits
  float tensor_scale = 1.0f;             // dequant direction; finite and >= 0 (amax / 2688)
  std::int64_t n = 0;
  std::int64_t k = 0;                    // multiple of 16
};

// A canonical NVFP4 weight, owning its bytes.
struct QuantizedWeight {
  std::int64_t n = 0;
  std::int64_t k = 0;  // padded to a multiple of 16 (modelopt zero-pads K)
  std::vector<std::uint8_t> packed;  // [n, k/2]
  std::vector<std::uint8_t> scales;  // [n, k/16]
  ScaleConvention convention = ScaleConvention::kDequant;
  float stored_scale = 1.0f;

  float tensor_scale() const { return tensor_scale_from_stored(convention, stored_scale); }
  WeightView view() const { return {packed.data(), scales.data(), tensor_scale(), n, k}; }
};

// Non-owning 2-D view of activations or outputs: rows x cols, row stride in elements.
struct MatrixView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t stride = 0;  // elements between consecutive rows (>= cols)
};

}  // namespace nvfp4
