// nvfp4/format.h -- the NVFP4 format in one place: element codec (E2M1), block-scale codec
// (FP8 E4M3 "e4m3fn"), the 16-element block, the canonical layout and the dequant convention.
//
// Convention (the only one in this library):  w = E2M1[q] * float(e4m3 scale) * tensor_scale
// where tensor_scale is in the *dequant* direction (modelopt `weight_scale_2` = amax / 2688).
//
// Canonical layout of a weight W[N, K] (K a multiple of 16; the quantizer zero-pads others):
//   packed  uint8  [N, K/2]   element 2j in the LOW nibble of byte j, 2j+1 in the HIGH nibble
//   scales  uint8  [N, K/16]  E4M3 bits, one per 16 consecutive elements along K
//   tensor_scale float32       one per tensor (or per group of tensors sharing an input)
// Kernels may repack at load time; checkpoints and this header never change layout.
//
// Everything here is constexpr/inline and usable from host and device code. This header must
// not include CUDA headers: NVFP4_HD expands to __host__ __device__ only under nvcc.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define NVFP4_HD __host__ __device__ __forceinline__
#else
#define NVFP4_HD inline
#endif

namespace nvfp4 {

constexpr int kBlockSize = 16;        // elements per E4M3 block scale (NVFP4 spec)
constexpr float kE2M1Max = 6.0f;      // largest E2M1 magnitude
constexpr float kE4M3Max = 448.0f;    // largest finite E4M3 magnitude (0x7E)
constexpr float kE2M1xE4M3Max = 2688.0f;  // 6 * 448: amax maps to this product
constexpr std::uint8_t kE4M3One = 0x38;   // 1.0 in E4M3
constexpr std::uint8_t kE4M3NaN = 0x7F;   // canonical NaN byte (0x7F and 0xFF are NaN)

static_assert(kBlockSize % 2 == 0, "two E2M1 codes per byte");
static_assert(kE2M1Max * kE4M3Max == kE2M1xE4M3Max, "2688 = 6 * 448");

NVFP4_HD std::uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

NVFP4_HD float f32_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// ---------------------------------------------------------------------------------------------
// E2M1: sign bit 3, exponent bits 2:1 (bias 1), mantissa bit 0. No Inf, no NaN.
// Codes 0..7 = {0, 0.5, 1, 1.5, 2, 3, 4, 6}; 8..15 are their negatives (8 is -0).
// ---------------------------------------------------------------------------------------------
NVFP4_HD float e2m1_to_float(std::uint8_t code) {
  // A switch rather than a table so the same function serves device code without a
  // __constant__ array; every value is exact in fp32 (and in fp16/bf16).
  float v;
  switch (code & 7u) {
    case 0: v = 0.0f; break;
    case 1: v = 0.5f; break;
    case 2: v = 1.0f; break;
    case 3: v = 1.5f; break;
    case 4: v = 2.0f; break;
    case 5: v = 3.0f; break;
    case 6: v = 4.0f; break;
    default: v = 6.0f; break;
  }
  return (code & 8u) ? -v : v;
}

// Magnitude code of |x| by round-to-nearest, ties to the even code, saturating at 6.
// Thresholds from the format (nvfp4-format.md): <=0.25 -> 0, <0.75 -> 0.5, <=1.25 -> 1,
// <1.75 -> 1.5, <=2.5 -> 2, <3.5 -> 3, <=5 -> 4, else 6. The thresholds increase, so the code is
// the number of them that a passes, counted without branches: as a chain of ifs it mispredicted
// on real weights (11 against 4 ns per code in a loop on 2026-12-03; the two forms give the same
// code for all 2^32 inputs, checked exhaustively). A NaN magnitude maps to 6 (as cuda_fp4.h and
// MLX do); the quantizers reject NaN before they get here.
NVFP4_HD std::uint8_t e2m1_magnitude_code(float a) {
  if (a != a) return 7;
  return static_cast<std::uint8_t>((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                                   (a >= 3.5f) + (a > 5.0f));
}

// Sign rule of the encoder. Producers differ only on zero and on values that round to zero.
enum class E2M1Sign : std::uint8_t {
  kLessThanZero,  // modelopt / compressed-tensors: sign bit = (x < 0): -0.0 -> 0x0, -0.1 -> 0x8
  kSignBit,       // MLX's Metal kernel: the IEEE sign bit is kept: -0.0 -> 0x8
};

NVFP4_HD std::uint8_t e2m1_from_float(float x, E2M1Sign rule = E2M1Sign::kLessThanZero) {
  const std::uint32_t bits = f32_bits(x);
  const bool neg = rule == E2M1Sign::kSignBit ? (bits >> 31) != 0 : x < 0.0f;
  const float a = f32_from_bits(bits & 0x7FFFFFFFu);
  // NaN compares false everywhere, so e2m1_magnitude_code returns 7 (+-6) for it.
  return static_cast<std::uint8_t>(e2m1_magnitude_code(a) | (neg ? 8u : 0u));
}

// ---------------------------------------------------------------------------------------------
// E4M3 ("e4m3fn"): sign bit 7, exponent bits 6:3 (bias 7), mantissa bits 2:0. No Inf;
// 0x7F/0xFF are NaN; max finite 448 (0x7E); min normal 2^-6; min subnormal 2^-9 (0x01).
// ---------------------------------------------------------------------------------------------
NVFP4_HD bool e4m3_is_nan(std::uint8_t b) { return (b & 0x7Fu) == 0x7Fu; }

NVFP4_HD float e4m3_to_float(std::uint8_t b) {
  const std::uint32_t sign = static_cast<std::uint32_t>(b & 0x80u) << 24;
  const std::uint32_t exp = (b >> 3) & 0xFu;
  const std::uint32_t man = b & 0x7u;
  if (exp == 0xFu && man == 0x7u) return f32_from_bits(sign | 0x7FC00000u);
  if (exp == 0) {
    // Subnormal: man * 2^-9, exact in fp32.
    return f32_from_bits(sign | f32_bits(static_cast<float>(man) * (1.0f / 512.0f)));
  }
  // Normal: rebias the exponent (7 -> 127) and move the 3 mantissa bits to the top.
  return f32_from_bits(sign | ((exp + 120u) << 23) | (man << 20));
}

// fp32 -> E4M3, round-to-nearest-even, saturating to +-448 (CUDA __NV_SATFINITE): finite
// overflow and +-Inf give +-448, NaN gives 0x7F. Works on the fp32 bit pattern so host and
// device round identically, independent of the floating-point environment.
NVFP4_HD std::uint8_t e4m3_from_float(float x) {
  const std::uint32_t bits = f32_bits(x);
  const std::uint8_t sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
  const std::uint32_t abits = bits & 0x7FFFFFFFu;
  if (abits > 0x7F800000u) return kE4M3NaN;
  // 448 + half an ulp (464) and above round past the top code: saturate. Exact 464 would tie
  // to the even code 0x80-exponent (NaN/overflow), so it saturates too.
  if (abits >= 0x43E80000u) return static_cast<std::uint8_t>(sign | 0x7Eu);  // 464.0f
  const int e = static_cast<int>(abits >> 23) - 127;  // unbiased fp32 exponent
  if (e < -6) {
    // E4M3 subnormal range (below 2^-6): quantum 2^-9. value/2^-9 = (1.m) * 2^(e+9).
    // Compute round-half-even of the 24-bit significand shifted right by (14 - (e + 9)) + ...
    // done generally: significand with implicit bit, shift so the quantum lands on bit 0.
    if (e < -11) {
      // |x| < 2^-11 < 2^-10 (half the smallest subnormal): rounds to zero. Exactly 2^-10
      // has e == -10 and is handled below (ties to even -> 0).
      return sign;
    }
    const std::uint32_t sig = (abits & 0x7FFFFFu) | 0x800000u;  // 1.m * 2^23
    // value / 2^-9 = sig * 2^(e - 23 + 9); shift right by s = 14 - e (e in [-11, -7] -> 21..25)
    const int s = 14 - e;
    const std::uint32_t q = sig >> s;
    const std::uint32_t rem = sig & ((1u << s) - 1u);
    const std::uint32_t half = 1u << (s - 1);
    std::uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    // r in [0, 8]; r == 8 is exactly the smallest normal 2^-6 (code 0x08): encoding still right.
    return static_cast<std::uint8_t>(sign | r);
  }
  // Normal: keep 3 mantissa bits, round half to even; a carry ripples into the exponent.
  std::uint32_t m = abits;
  const std::uint32_t lsb = (m >> 20) & 1u;
  m += 0x7FFFFu + lsb;
  m >>= 20;  // now (fp32 exponent << 3) | 3-bit mantissa
  const std::uint32_t out = m - (120u << 3);  // rebias 127 -> 7
  return static_cast<std::uint8_t>(sign | out);
}

// ---------------------------------------------------------------------------------------------
// Packing helpers for the canonical layout.
// ---------------------------------------------------------------------------------------------
NVFP4_HD std::uint8_t e2m1_low(std::uint8_t byte) { return byte & 0x0Fu; }
NVFP4_HD std::uint8_t e2m1_high(std::uint8_t byte) { return byte >> 4; }
NVFP4_HD std::uint8_t e2m1_pack(std::uint8_t even, std::uint8_t odd) {
  return static_cast<std::uint8_t>((even & 0x0Fu) | ((odd & 0x0Fu) << 4));
}

// The dequantized value of one element: e2m1 * |scale| * tensor_scale, in exactly this order
// (the block product first, then the tensor scale) -- the oracle's operation order.
// Kernels that apply the tensor scale to the fp32 accumulator instead compute e2m1 * |scale|
// per element (exact: both factors have <= 4 significant bits) and multiply once at the end.
NVFP4_HD float e2m1_times_scale(std::uint8_t code, std::uint8_t scale) {
  // |scale|: scales are non-negative by construction; kernels ignore a stray sign bit.
  return e2m1_to_float(code) * e4m3_to_float(static_cast<std::uint8_t>(scale & 0x7Fu));
}

}  // namespace nvfp4
