// kernels/cuda/repack_nvfp4_sm90.cpp -- host reference of the gemv_sm90 repack (layout in
// repack_nvfp4_sm90.h) and its shape rule. Plain C++: built with and without CUDA.
#include "kernels/cuda/repack_nvfp4_sm90.h"

#include <cstring>
#include <string>

#include "dispatch/overlap.h"
#include "format/validate.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"

namespace nvfp4::cuda {

bool repack_for_gemv_sm90_supported(std::int64_t n, std::int64_t k) { return repack::shape_ok(n, k); }

void repack::require_known_codes(const char* op, RepackedCodes codes, const std::string& shape) {
  if (codes != RepackedCodes::bf16 && codes != RepackedCodes::fp16)
    fail(op, "unknown RepackedCodes value " + std::to_string(static_cast<int>(codes)) + " (" + shape + ")");
}

void repack::check_repack_arguments(const char* op, const WeightView& w, const void* packed_out, const void* scales_out,
                                    RepackedCodes codes, const std::string& shape) {
  require_known_codes(op, codes, shape);
  if (!shape_ok(w.n, w.k)) fail(op, "needs N % 16 == 0 and K % 128 == 0 (got " + shape + ")");
  if (!w.packed || !w.scales || !packed_out || !scales_out) fail(op, "null pointer (" + shape + ")");
  const detail::WeightBytes b = detail::weight_bytes(op, w.n, w.k, shape);
  const auto overlap = byte_spans_overlap;
  if (overlap(packed_out, b.packed, w.packed, b.packed) || overlap(packed_out, b.packed, w.scales, b.scales) ||
      overlap(scales_out, b.scales, w.packed, b.packed) || overlap(scales_out, b.scales, w.scales, b.scales) ||
      overlap(packed_out, b.packed, scales_out, b.scales))
    fail(op, "outputs must not overlap the inputs or each other (" + shape + ")");
}

void repack_for_gemv_sm90_ref(const WeightView& w, std::uint8_t* packed_out, std::uint8_t* scales_out, RepackedCodes codes) {
  const char* op = "cuda::repack_for_gemv_sm90_ref";
  const std::string shape = "N=" + std::to_string(w.n) + " K=" + std::to_string(w.k);
  repack::check_repack_arguments(op, w, packed_out, scales_out, codes, shape);
  const std::int64_t tiles = w.n / 16, chunks = w.k / 64;
  for (std::int64_t tl = 0; tl < tiles; ++tl)
    for (std::int64_t c = 0; c < chunks; ++c)
      for (int lane = 0; lane < 32; ++lane) {
        std::uint32_t q[4];
        repack::lane_words(w.packed, w.scales, w.k, tl, c, lane, codes == RepackedCodes::fp16, q);
        std::memcpy(packed_out + ((tl * chunks + c) * 32 + lane) * 16, q, 16);  // little-endian words
        if (c % 2 == 0) {
          std::uint8_t s[4];
          repack::lane_scales(w.scales, w.k, tl, c / 2, lane, s);
          std::memcpy(scales_out + ((tl * (chunks / 2) + c / 2) * 32 + lane) * 4, s, 4);
        }
      }
}

}  // namespace nvfp4::cuda
