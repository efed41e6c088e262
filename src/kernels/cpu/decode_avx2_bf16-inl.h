// kernels/cpu/decode_avx2_bf16-inl.h -- the AVX2 decode of packed E2M1 codes to fp32 through their
// bf16 patterns, shared by the Highway GEMV (gemv_nvfp4_hwy.cpp) and the AVX2 dot-form GEMM
// (gemm_nvfp4_hwy.cpp). Per-target header (Highway's -inl.h convention): included once per target
// by each file that foreach_target.h compiles; the code exists for HWY_AVX2 only.
//
// An E2M1 value's bf16 pattern is the top half of its fp32 pattern, and two 16-entry byte tables
// (pshufb) give its low and high bytes; interleaving them makes 16-bit words (one unpack each way),
// and a word w becomes the fp32 w << 16 (the low word of a dword: a shift) or w & 0xFFFF0000 (the
// high word: a mask). Per 32 codes: 4 shuffles (2 pshufb, 2 unpacks) and 4 shift / mask ops, against
// the int8 table's 2 pshufb + 2 byte shifts + 4 vpmovsxbd + 4 vcvtdq2ps; Intel client cores issue
// shuffles on one port only. In a loop on the AVX2-only EPYC dev VM (family 25, 2026-12-07,
// docs/perf-cpu.md 44) the M = 1 dot ran 1.3-1.4x faster than the int8 table's. The values are the
// exact e2m1 (-0 gives +0), so a block's weights are these times |scale|, exactly.
// Order of one 16-byte piece (two blocks, A = bytes 0..7, B = bytes 8..15): the low nibbles go to
// the lower 128-bit lane, the high nibbles to the upper one; block A's two fp32 vectors then hold
// elements {0,4,8,12 | 1,5,9,13} and {2,6,10,14 | 3,7,11,15} (lower | upper lane), block B the
// same. The activations are permuted into that order once per call: position p (0..15) of a block
// holds element Avx2Bf16Order(p).
#if defined(NVFP4_DECODE_AVX2_BF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NVFP4_DECODE_AVX2_BF16_INL_H_
#undef NVFP4_DECODE_AVX2_BF16_INL_H_
#else
#define NVFP4_DECODE_AVX2_BF16_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace nvfp4::cpu {
namespace HWY_NAMESPACE {
// (Defined for every target, as is the permutation below: the GEMV names them in code every target
// compiles.)
constexpr int Avx2Bf16Order(int p) { return 4 * (p % 4) + 2 * (p / 8) + (p / 4) % 2; }

// The activations' permutation for this decode: dst[b + p] = src[b + Avx2Bf16Order(p)] for every
// 16-element block b of [0, len) (len a multiple of 16).
inline void PermuteToAvx2Bf16Order(const float* src, std::int64_t len, float* dst) {
  for (std::int64_t b = 0; b < len; b += 16)
    for (int p = 0; p < 16; ++p) dst[b + p] = src[b + Avx2Bf16Order(p)];
}

#if HWY_TARGET == HWY_AVX2

alignas(32) inline constexpr std::uint8_t kE2M1Bf16Lo[32] = {  // low byte of bf16(e2m1(code)), both lanes
    0, 0, 0x80, 0xC0, 0, 0x40, 0x80, 0xC0, 0, 0, 0x80, 0xC0, 0, 0x40, 0x80, 0xC0,
    0, 0, 0x80, 0xC0, 0, 0x40, 0x80, 0xC0, 0, 0, 0x80, 0xC0, 0, 0x40, 0x80, 0xC0};
alignas(32) inline constexpr std::uint8_t kE2M1Bf16Hi[32] = {  // high byte (sign, exponent); -0 -> +0
    0, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40, 0, 0xBF, 0xBF, 0xBF, 0xC0, 0xC0, 0xC0, 0xC0,
    0, 0x3F, 0x3F, 0x3F, 0x40, 0x40, 0x40, 0x40, 0, 0xBF, 0xBF, 0xBF, 0xC0, 0xC0, 0xC0, 0xC0};

// The tables and masks in registers, loaded once per row chunk / row slice.
// (A user-written constructor: GCC compiles default member initializers outside the target's
// pragma, and the AVX2 intrinsics then fail to inline.)
struct Avx2Bf16Decoder {
  __m256i tlo, thi, low4, high_word;
  HWY_INLINE Avx2Bf16Decoder()
      : tlo(_mm256_load_si256(reinterpret_cast<const __m256i*>(kE2M1Bf16Lo))),
        thi(_mm256_load_si256(reinterpret_cast<const __m256i*>(kE2M1Bf16Hi))),
        low4(_mm256_set1_epi8(0x0F)),
        high_word(_mm256_set1_epi32(static_cast<int>(0xFFFF0000u))) {}

  // The bf16 words of a 16-byte piece: block A's (bytes 0..7) into wa, block B's into wb.
  HWY_INLINE void Piece(__m128i raw, __m256i& wa, __m256i& wb) const {
    const __m256i b = _mm256_broadcastsi128_si256(raw);
    const __m256i codes = _mm256_and_si256(_mm256_blend_epi32(b, _mm256_srli_epi16(b, 4), 0xF0), low4);
    const __m256i lo = _mm256_shuffle_epi8(tlo, codes), hi = _mm256_shuffle_epi8(thi, codes);
    wa = _mm256_unpacklo_epi8(lo, hi);
    wb = _mm256_unpackhi_epi8(lo, hi);
  }
  // A block's two fp32 vectors (positions 0..7, 8..15 of Avx2Bf16Order).
  HWY_INLINE __m256 First(__m256i words) const { return _mm256_castsi256_ps(_mm256_slli_epi32(words, 16)); }
  HWY_INLINE __m256 Second(__m256i words) const { return _mm256_castsi256_ps(_mm256_and_si256(words, high_word)); }
};

#endif  // HWY_TARGET == HWY_AVX2
}  // namespace HWY_NAMESPACE
}  // namespace nvfp4::cpu
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
