// nvfp4/dtype.h -- activation/output dtypes (fp32, fp16, bf16) and exact scalar conversions.
//
// The conversions are bit-level (round-to-nearest-even, NaN kept quiet, overflow to Inf as
// IEEE requires) so the reference path gives the same bits on every compiler and ISA. Host
// and device usable; no CUDA headers.
#pragma once

#include <cstdint>
#include <string>

#include "nvfp4/format.h"

namespace nvfp4 {

enum class DType : std::uint8_t { kF32, kF16, kBF16 };

inline int dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "unknown";  // a DType cast from an out-of-range integer; the API refuses it
}
// Accepts "f32"/"fp32"/"float32", "f16"/"fp16"/"float16", "bf16"/"bfloat16". Throws nvfp4::Error.
DType dtype_from_name(const std::string& name);

NVFP4_HD float bf16_to_f32(std::uint16_t h) { return f32_from_bits(static_cast<std::uint32_t>(h) << 16); }

NVFP4_HD std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);  // round half to even; overflow carries into Inf correctly
  return static_cast<std::uint16_t>(u >> 16);
}

NVFP4_HD float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t man = h & 0x3FFu;
  if (exp == 0x1Fu) return f32_from_bits(sign | 0x7F800000u | (man << 13));  // Inf / NaN
  if (exp == 0) {
    // Subnormal (or zero): man * 2^-24, exact in fp32.
    return f32_from_bits(sign | f32_bits(static_cast<float>(man) * (1.0f / 16777216.0f)));
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

NVFP4_HD std::uint16_t f32_to_f16(float f) {
  const std::uint32_t u = f32_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // NaN
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520: Inf
  const int e = static_cast<int>(a >> 23) - 127;
  if (e < -14) {
    // fp16 subnormal: quantum 2^-24. value / 2^-24 = sig * 2^(e - 23 + 24), shift = -1 - e.
    if (e < -25) return sign;  // below half the smallest subnormal (2^-25): zero
    const std::uint32_t sig = (a & 0x7FFFFFu) | 0x800000u;
    const int s = -1 - e;  // e in [-25, -15] -> s in [14, 24]
    const std::uint32_t q = sig >> s;
    const std::uint32_t rem = sig & ((1u << s) - 1u);
    const std::uint32_t half = 1u << (s - 1);
    const std::uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | r);  // r == 0x400 is the smallest normal: still right
  }
  std::uint32_t m = a + 0xFFFu + ((a >> 13) & 1u);  // round half to even at bit 13
  m >>= 13;
  return static_cast<std::uint16_t>(sign | (m - (112u << 10)));
}

// Load element i of a row in dtype t, widened exactly to fp32.
NVFP4_HD float load_as_f32(const void* p, DType t, std::int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF16: return f16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    default: return bf16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
  }
}

// Store fp32 v as element i in dtype t (RNE).
NVFP4_HD void store_from_f32(void* p, DType t, std::int64_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(p)[i] = v; break;
    case DType::kF16: static_cast<std::uint16_t*>(p)[i] = f32_to_f16(v); break;
    default: static_cast<std::uint16_t*>(p)[i] = f32_to_bf16(v); break;
  }
}

}  // namespace nvfp4
