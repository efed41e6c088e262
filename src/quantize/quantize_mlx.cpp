// quantize/quantize_mlx.cpp -- mx.quantize(w, mode="nvfp4"[, global_scale=gs]) as MLX's Metal
// kernel fp_quantize computes it (fp32 throughout; its ties go to even). MLX's CPU fallback
// breaks exact ties toward the smaller magnitude and is not followed.
//   enc   = fl(2688 / gs)          (1 without a global scale)
//   s     = e4m3_rne(fl(fl(block_amax / 6) * enc))     no zero-block replacement: s may be 0
//   enc_b = s == 0 ? 0 : fl(enc / float(s))            a reciprocal ...
//   q     = e2m1_rne(fl(x * enc_b))                    ... multiplied, not divided
//   sign  = IEEE sign bit (-0.0 and tiny negatives -> 0x8)
// Policy for gs == 0 (all-zero tensor; MLX would compute 0 * Inf): scales 0, codes as enc_b = 0.
#include <cmath>

#include "nvfp4/format.h"
#include "quantize/recipes.h"

namespace nvfp4::recipes {

void mlx_quantize_block(const float* x, float gs, bool has_global_scale, BlockOut* out) {
  float bamax = 0.0f;
  for (int i = 0; i < kBlockSize; ++i) bamax = std::fmax(bamax, std::fabs(x[i]));
  float enc_b = 0.0f;
  if (has_global_scale && gs == 0.0f) {
    out->scale = 0;
  } else {
    const float enc = has_global_scale ? kE2M1xE4M3Max / gs : 1.0f;
    out->scale = e4m3_from_float((bamax / kE2M1Max) * enc);
    const float s = e4m3_to_float(out->scale);
    enc_b = s == 0.0f ? 0.0f : enc / s;
  }
  for (int i = 0; i < kBlockSize; ++i) out->codes[i] = e2m1_from_float(x[i] * enc_b, E2M1Sign::kSignBit);
}

}  // namespace nvfp4::recipes
