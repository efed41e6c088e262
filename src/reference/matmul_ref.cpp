// reference/matmul_ref.cpp -- the scalar W4A16 oracle every fast kernel is checked against.
//   acc[m, n] = sum_k x[m, k] * fl(e2m1 * |scale|)     fp32, k ascending, one FMA-free
//                                                       multiply-add per element
//   y[m, n]   = out_dtype( acc * tensor_scale )         tensor scale once, as the seeds do
// Scalar, sequential, never optimised. Builds with -ffp-contract=off (src/CMakeLists.txt) so the
// compiler cannot fuse the multiply-add and change the rounding.
#include <vector>

#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

namespace nvfp4 {

void quantized_matmul_ref(const MatrixView& x, const WeightView& w, const MatrixView& y) {
  validate_matmul("quantized_matmul_ref", x, w, y);
  const std::int64_t kb = w.k / kBlockSize;
  std::vector<float> wrow(static_cast<std::size_t>(w.k));
  for (std::int64_t n = 0; n < w.n; ++n) {
    // Decode one weight row (without the tensor scale) once, reuse it for every row of x.
    for (std::int64_t k = 0; k < w.k; ++k) {
      const std::uint8_t byte = w.packed[n * (w.k / 2) + k / 2];
      const std::uint8_t code = (k % 2 == 0) ? e2m1_low(byte) : e2m1_high(byte);
      wrow[static_cast<std::size_t>(k)] = e2m1_times_scale(code, w.scales[n * kb + k / kBlockSize]);
    }
    for (std::int64_t m = 0; m < x.rows; ++m) {
      float acc = 0.0f;
      // x.cols may be < w.k (quantizer padding): the padded activations are zero.
      for (std::int64_t k = 0; k < x.cols; ++k) {
        const float prod = load_as_f32(x.data, x.dtype, m * x.stride + k) * wrow[static_cast<std::size_t>(k)];
        acc = acc + prod;
      }
      store_from_f32(y.data, y.dtype, m * y.stride + n, acc * w.tensor_scale);
    }
  }
}

}  // namespace nvfp4
