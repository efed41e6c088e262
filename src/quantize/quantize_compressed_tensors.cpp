// quantize/quantize_compressed_tensors.cpp -- compressed-tensors "nvfp4-pack-quantized" (as
// llm-compressor produces it: generate_gparam, calculate_qparams, _quantize, pack_fp4_to_uint8).
// torch runs the weight-dtype ops in fp32 and rounds once to that dtype (round_to below):
//   G   = dtype(2688 / amax); Inf/NaN -> 1           weight_global_scale (quant direction), then fp32
//   s_f = fl(G * dtype(block_amax / 6))              the block amax / 6 happens in the weight dtype
//   s   = e4m3_rne(clamp(s_f, +-448)); s == 0 -> 0.125 (byte 0x20)
//   eff = fl(float(s) / G)                           divide by the global scale
//   q   = e2m1_rne(bf16_rne(fl(x / eff)))            bf16 pre-rounding (0.7499999 -> 0.75 -> 1)
//   sign = IEEE sign bit (-0.0 -> 0x8)
// Differences with the format note (docs/format.md): G and block_amax/6 are rounded in the weight's
// dtype, as the torch code computes them; for fp32 weights both agree.
#include <algorithm>
#include <cmath>

#include "nvfp4/format.h"
#include "quantize/recipes.h"

namespace nvfp4::recipes {

float ct_stored_scale(float amax, DType src) {
  const float g = round_to(src, kE2M1xE4M3Max / amax);
  return std::isfinite(g) ? g : 1.0f;  // nan_to_num(nan=1, posinf=1): the all-zero tensor
}

void ct_quantize_block(const float* x, float G, DType src, BlockOut* out) {
  float bamax = 0.0f;
  for (int i = 0; i < kBlockSize; ++i) bamax = std::fmax(bamax, std::fabs(x[i]));
  float s_f = G * round_to(src, bamax / kE2M1Max);
  s_f = std::min(std::max(s_f, -kE4M3Max), kE4M3Max);
  out->scale = e4m3_from_float(s_f);
  if (out->scale == 0) out->scale = 0x20;  // 0.125, compressed-tensors' fp8 "eps"
  const float eff = e4m3_to_float(out->scale) / G;
  for (int i = 0; i < kBlockSize; ++i) {
    const float v = bf16_to_f32(f32_to_bf16(x[i] / eff));
    out->codes[i] = e2m1_from_float(v, E2M1Sign::kSignBit);
  }
}

}  // namespace nvfp4::recipes
