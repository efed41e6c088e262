// quantize/quantize_compressed_tensors.cpp -- compressed-tensors "nvfp4-pack-quantized" (as
// llm-compressor produces it: generate_gparam, calculate_qparams, then the compressor's quantize
// and pack). torch runs the weight-dtype ops in fp32 and rounds once to that dtype (round_to):
//   G   = dtype(2688 / amax); Inf/NaN -> 1           weight_global_scale (quant direction), then fp32
//   s_f = fl(G * dtype(block_amax / 6))              the block amax / 6 happens in the weight dtype
//   s   = e4m3_rne(clamp(s_f, +-448)); s == 0 -> 0.125 (byte 0x20)
//   eff = fl(float(s) / G)                           the scale parameter (FP8 in 0.10-0.12, the
//                                                    weight dtype after; exact either way) over
//                                                    the fp32 global scale: an fp32 tensor
//   q   = e2m1_rne(fl(x / eff))                      fp32 quotient, rounded once
//   sign = q < 0 (-0.0 -> 0x0; a negative q that rounds to 0 -> 0x8): torch.sign(-0.0) is 0 in
//          cast_to_fp4, and the Triton kernels test x < 0
// Checked bit for bit against the releases themselves, 0.10.2 to 0.20.1, with
// scripts/check_producers.sh (docs/format.md has the table). No release rounds x / eff to bf16
// first: 0.18.0 had such a Triton cast but registered it disabled.
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
    out->codes[i] = e2m1_from_float(x[i] / eff, E2M1Sign::kLessThanZero);
  }
}

}  // namespace nvfp4::recipes
