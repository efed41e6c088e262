// kernels/cpu/transpose_x86.h -- register transposes of 32-bit lanes for the GEMMs' panel decodes:
// 16 x 16 in AVX-512F registers (gemm_nvfp4_bf16.cpp: bf16 pairs; gemm_nvfp4_hwy.cpp: fp32) and
// 8 x 8 in AVX registers (gemm_nvfp4_hwy.cpp's AVX2 target).
// Why in registers: the panels store one k (or k pair) for 16 (8) consecutive weight rows per vector,
// while a weight row's codes are contiguous along k; a scalar decode into that order took 30% of
// the bf16 GEMM (docs/perf-cpu.md) and 2/3 of the fp32 GEMM at M = 32 (docs/perf-cpu.md 29).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace nvfp4::cpu {

// out[j] lane i = r[i] lane j. 48 shuffles: unpack 32 / 64 bits within 128-bit lanes, then two
// rounds of 128-bit lane shuffles.
__attribute__((target("avx512f"), always_inline)) inline void transpose16x16_epi32(const __m512i (&r)[16],
                                                                                  __m512i (&out)[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // u[4g+q], 128-bit lane L = rows 4g..4g+3 of column 4L+q
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int q = 0; q < 4; ++q) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x88), v1 = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xDD);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0x88);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + q], u[12 + q], 0xDD);
    out[q] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    out[4 + q] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    out[8 + q] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    out[12 + q] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

// out[j] lane i = r[i] lane j for 8 x 8 fp32: unpack within 128-bit lanes, shuffle pairs, then
// swap 128-bit halves (24 shuffles).
__attribute__((target("avx"), always_inline)) inline void transpose8x8_ps(const __m256 (&r)[8], __m256 (&out)[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);      // rows 2i, 2i+1 at k 0, 1 | 4, 5
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);  // at k 2, 3 | 6, 7
  }
  for (int g = 0; g < 2; ++g) {  // u[4g + q]: rows 4g..4g+3 at k = q (low half) and q + 4 (high half)
    u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int q = 0; q < 4; ++q) {
    out[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
    out[4 + q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
  }
}

}  // namespace nvfp4::cpu
#endif
