// quantize/quantize_modelopt.cpp -- TensorRT Model Optimizer's NVFP4 weight recipe, as its
// export path runs it (NVFP4QTensor.get_weights_scaling_factor_2 / get_weights_scaling_factor /
// quantize / _cast_fp4). The weight is upcast exactly to fp32; every step is one fp32 rounding:
//   g   = fl(amax / 2688)                      weight_scale_2 (dequant direction)
//   s_f = fl(block_amax / fl(6 * g))
//   s_f = 1.0 if s_f == 0                      (all-zero block -> scale byte 0x38)
//   s_f = clamp(s_f, 2^-9, 448)                (current releases; `legacy` skips this)
//   s   = e4m3_rne(s_f)
//   d   = fl(float(s) * g)
//   q   = e2m1_rne(fl(x / d)), sign bit = (x/d < 0): -0.0 -> 0x0
// Legacy (no clamp): a block whose scale underflows gets byte 0, so d = 0 and x/d is +-Inf
// (-> code 7 | sign) or NaN for x = 0 (modelopt's searchsorted puts NaN last: code 7).
// Policy for amax == 0 (modelopt itself would divide 0 by 0): g = 0, block scales 0x38, codes 0.
#include <cmath>

#include "nvfp4/format.h"
#include "quantize/recipes.h"

namespace nvfp4::recipes {

float modelopt_stored_scale(float amax) { return amax / kE2M1xE4M3Max; }

void modelopt_quantize_block(const float* x, float g, bool legacy, BlockOut* out) {
  float bamax = 0.0f;
  for (int i = 0; i < kBlockSize; ++i) bamax = std::fmax(bamax, std::fabs(x[i]));
  if (g == 0.0f) {  // all-zero tensor policy
    out->scale = kE4M3One;
    for (int i = 0; i < kBlockSize; ++i) out->codes[i] = 0;
    return;
  }
  const float six_g = 6.0f * g;
  float s_f = bamax / six_g;
  if (s_f == 0.0f) s_f = 1.0f;
  if (!legacy) s_f = std::fmin(std::fmax(s_f, 0.001953125f), kE4M3Max);  // [2^-9, 448]
  out->scale = e4m3_from_float(s_f);
  const float d = e4m3_to_float(out->scale) * g;
  for (int i = 0; i < kBlockSize; ++i) {
    out->codes[i] = e2m1_from_float(x[i] / d, E2M1Sign::kLessThanZero);  // NaN -> 7
  }
}

}  // namespace nvfp4::recipes
