// quantize/recipes.h -- internal: the per-producer block quantizers. Each recipe is two pure
// functions, both in the producer's operation order and rounding points:
//   *_stored_scale(amax)                 the tensor scale as the checkpoint stores it
//   *_quantize_block(x[16], stored, ...) one 16-element block -> 16 E2M1 codes + 1 E4M3 byte
// src/quantize/quantize.cpp owns everything around them (amax, padding, NaN checks, groups).
#pragma once

#include <cstdint>

#include "nvfp4/dtype.h"

namespace nvfp4::recipes {

struct BlockOut {
  std::uint8_t codes[16];
  std::uint8_t scale;
};

// fp32 value rounded to dtype t and widened back (torch computes fp16/bf16 ops in fp32 and
// rounds the result once, so an op "in bf16" is round_to(bf16, fp32 op)).
inline float round_to(DType t, float v) {
  switch (t) {
    case DType::kF16: return f16_to_f32(f32_to_f16(v));
    case DType::kBF16: return bf16_to_f32(f32_to_bf16(v));
    default: return v;
  }
}

// src/quantize/quantize_modelopt.cpp
float modelopt_stored_scale(float amax);
void modelopt_quantize_block(const float* x, float weight_scale_2, bool legacy, BlockOut* out);

// src/quantize/quantize_compressed_tensors.cpp (src: the weight's dtype, see there)
float ct_stored_scale(float amax, DType src);
void ct_quantize_block(const float* x, float global_scale, DType src, BlockOut* out);

// src/quantize/quantize_mlx.cpp; global_scale <= 0 means "no global scale" (S_enc = 1)
void mlx_quantize_block(const float* x, float global_scale, bool has_global_scale, BlockOut* out);

}  // namespace nvfp4::recipes
