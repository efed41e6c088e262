// kernels/cpu/transpose_x86.h -- a register transpose of 32-bit lanes for the bf16 GEMM's panel
// decode: 16 x 16 in AVX-512F registers (gemm_nvfp4_bf16.cpp: bf16 pairs).
// Why in registers: the panel stores one k pair for 16 consecutive weight rows per vector, while a
// weight row's codes are contiguous along k; a scalar decode into that order took 30% of the bf16
// GEMM (docs/perf-cpu.md). (The fp32 GEMM's decodes transpose the packed bytes instead, before
// decoding: gemm_nvfp4_hwy.cpp, docs/perf-cpu.md 33.)
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

}  // namespace nvfp4::cpu
#endif
