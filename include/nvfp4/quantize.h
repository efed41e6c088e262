// nvfp4/quantize.h -- producer-exact NVFP4 weight quantizers.
//
// Each recipe reproduces its producer's operation order in fp32 IEEE arithmetic (every
// rounding point matters for bit-exactness; see docs/format.md and src/quantize/*.cpp):
//   kModelopt          TensorRT Model Optimizer (nvidia/*-FP4 checkpoints), the default.
//   kCompressedTensors compressed-tensors "nvfp4-pack-quantized" (llm-compressor).
//   kMlx               mx.quantize(w, mode="nvfp4", global_scale=amax) (Metal kernels).
// Sources read for the operation orders: modelopt NVFP4QTensor (qtensor/nvfp4_tensor.py),
// compressed-tensors calculate_qparams/_quantize/pack_fp4_to_uint8, MLX fp_quantized.h.
// Input: a 2-D weight [N, K] in fp32/fp16/bf16 (leading dims are flattened into N). K that is
// not a multiple of 16 is zero-padded to the next multiple (as modelopt does).
//
// Policies where producers would divide by zero or emit NaN (documented in docs/format.md):
//   * NaN or Inf anywhere in a weight: nvfp4::Error naming the tensor and the first bad index.
//   * all-zero tensor (amax == 0): codes 0, tensor scale chosen so nothing is NaN/Inf:
//     modelopt weight_scale_2 = 0 with block scales 1.0 (0x38); compressed-tensors
//     weight_global_scale = 1 (its own nan_to_num rule) with block scales 0.125 (0x20);
//     MLX global_scale = 0, scales 0.
#pragma once

#include <string>
#include <vector>

#include "nvfp4/tensor.h"

namespace nvfp4 {

enum class Recipe : std::uint8_t { kModelopt, kCompressedTensors, kMlx };

const char* recipe_name(Recipe r);          // "modelopt", "compressed-tensors", "mlx"
Recipe recipe_from_name(const std::string& name);  // throws Error listing the valid names
ScaleConvention recipe_convention(Recipe r);

struct QuantizeOptions {
  Recipe recipe = Recipe::kModelopt;
  // modelopt releases 0.35-0.44, before the 2^-9 block-scale clamp of 0.45 on (checked against
  // each release: docs/format.md): a block whose scale underflows E4M3 gets scale byte 0 (its
  // codes then come from x / 0 -> +-Inf -> +-6 or NaN -> policy).
  bool modelopt_legacy = false;
  // MLX: quantize with global_scale = amax (stored as ScaleConvention::kAmax). false gives what
  // mlx-lm's QuantizedLinear writes: no global scale (ScaleConvention::kNone, tensor scale 1).
  bool mlx_global_scale = true;
  std::string name = "weight";  // tensor name, used in error messages
};

// max |w| over all elements. Throws Error naming `name` and the first NaN/Inf index.
float weight_amax(const Tensor& w, const std::string& name);

// The tensor scale a recipe stores for a given amax (the value written to the checkpoint).
// compressed-tensors computes it in the weight's dtype (src), see quantize_compressed_tensors.cpp.
float stored_scale_for_amax(Recipe r, float amax, DType src = DType::kF32);

// Quantize with the tensor's own amax.
QuantizedWeight quantize(const Tensor& w, const QuantizeOptions& opts = {});

// Quantize with an externally chosen amax (a group of weights sharing one tensor scale).
// amax must be >= the tensor's own amax.
QuantizedWeight quantize_with_amax(const Tensor& w, float amax, const QuantizeOptions& opts);

// Quantize weights that read the same input (q/k/v, gate/up) with one shared tensor scale,
// derived from the largest amax of the group, as modelopt exports do. Each weight keeps its
// own block scales.
std::vector<QuantizedWeight> quantize_group(const std::vector<const Tensor*>& weights,
                                            const std::vector<std::string>& names,
                                            const QuantizeOptions& opts);

}  // namespace nvfp4
