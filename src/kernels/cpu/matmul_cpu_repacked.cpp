// kernels/cpu/matmul_cpu_repacked.cpp -- the public pre-split CPU API (include/nvfp4/cpu.h):
// the repack (a byte permutation, scalar) and quantized_matmul_repacked on the AVX512-BF16 GEMV
// (gemv_nvfp4_avx512bf16_presplit). The layout is defined in cpu.h; this file is its one writer.
#include <cstring>
#include <string>
#include <vector>

#include "dispatch/overlap.h"
#include "format/validate.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/matmul_cpu.h"
#include "nvfp4/cpu.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

namespace nvfp4::cpu {
namespace {

constexpr std::int64_t kChunkBytes = 128;  // one 256-k chunk of a weight row

std::string shape_of(std::int64_t n, std::int64_t k) { return "N=" + std::to_string(n) + " K=" + std::to_string(k); }

// One row, canonical <-> pre-split. Block j of a chunk is 8 bytes (16 codes); its first 4 bytes
// (a u32 word of even index 2j) go to 4j, its last 4 (odd index 2j+1) to 64 + 4j. `to_canonical`
// runs the same map backwards. The K % 256 tail is copied unchanged.
void permute_row_bytes(const std::uint8_t* src, std::uint8_t* dst, std::int64_t k, bool to_canonical) {
  const std::int64_t row_bytes = k / 2, full = k / 256 * kChunkBytes;
  for (std::int64_t c = 0; c < full; c += kChunkBytes)
    for (int j = 0; j < 16; ++j) {
      for (int h = 0; h < 2; ++h) {
        const std::int64_t canon = c + 8 * j + 4 * h, split = c + 64 * h + 4 * j;
        if (to_canonical) std::memcpy(dst + canon, src + split, 4);
        else std::memcpy(dst + split, src + canon, 4);
      }
    }
  std::memcpy(dst + full, src + full, static_cast<std::size_t>(row_bytes - full));
}

}  // namespace

bool repack_for_gemv_cpu_supported() { return gemv_avx512bf16_supported(); }

void repack_for_gemv_cpu(const WeightView& w, std::uint8_t* packed_out) {
  const char* op = "cpu::repack_for_gemv_cpu";
  const std::string shape = shape_of(w.n, w.k);
  if (w.k <= 0 || w.k % kBlockSize != 0) fail(op, shape + ": K must be a positive multiple of 16");
  if (w.n <= 0) fail(op, shape + ": N must be positive");
  if (!w.packed || !w.scales) fail(op, shape + ": null canonical packed or scales pointer");
  if (!packed_out) fail(op, shape + ": null output pointer");
  const detail::WeightBytes wb = detail::weight_bytes(op, w.n, w.k, shape);  // overflow-checked
  const std::uint64_t pb = wb.packed, sb = wb.scales;
  // In place would need a per-chunk buffer; the repack is a one-time step, so a separate output
  // keeps it a plain copy. Overlapping the scales would corrupt what the repacked view reads.
  if (byte_spans_overlap(packed_out, pb, w.packed, pb) || byte_spans_overlap(packed_out, pb, w.scales, sb))
    fail(op, shape + ": the output (" + std::to_string(pb) +
                 " bytes) overlaps the canonical packed bytes or scales (in-place repack is not supported)");
  for (std::int64_t r = 0; r < w.n; ++r) permute_row_bytes(w.packed + r * (w.k / 2), packed_out + r * (w.k / 2), w.k, false);
}

void quantized_matmul_repacked(const MatrixView& x, const CpuRepackedWeightView& w, const MatrixView& y) {
  const char* op = "cpu::quantized_matmul_repacked";
  // The same bytes and scales as a canonical view: validate_matmul checks shapes, pointers,
  // the tensor scale and every overlap exactly as for the canonical path.
  const WeightView wv{w.packed, w.scales, w.tensor_scale, w.n, w.k};
  validate_matmul(op, x, wv, y);
  if (!repack_for_gemv_cpu_supported())
    fail(op, "needs a CPU with AVX512-BF16 and AVX512-VBMI (repack_for_gemv_cpu_supported() is false; M=" +
                 std::to_string(x.rows) + " " + shape_of(w.n, w.k) + "); use the canonical quantized_matmul");
  if (x.rows == 0) return;
  const MatmulArgs a = matmul_args(x, wv, y);  // the pre-split bytes, read by the pre-split kernel
  if (gemv_nvfp4_avx512bf16_presplit(a) && !output_has_nonfinite(a)) return;
  // Rare (activations that cannot be split exactly into bf16 pieces: NaN/Inf, fp32 outside
  // [2^-102, 2^120); or a non-finite output, which the canonical path recomputes on the GEMM):
  // the canonical path's fallbacks need canonical weights, so undo the permutation into a
  // temporary copy and run exactly that path (same results as quantized_matmul on them).
  std::vector<std::uint8_t> canon(static_cast<std::size_t>(w.n * (w.k / 2)));
  for (std::int64_t r = 0; r < w.n; ++r) permute_row_bytes(w.packed + r * (w.k / 2), canon.data() + r * (w.k / 2), w.k, true);
  quantized_matmul_path(x, WeightView{canon.data(), w.scales, w.tensor_scale, w.n, w.k}, y, CpuPath::kGemvAvx512Bf16);
}

}  // namespace nvfp4::cpu
