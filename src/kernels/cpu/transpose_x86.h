// kernels/cpu/transpose_x86.h -- byte transposes of packed NVFP4 codes for the GEMMs' panel
// decodes (gemm_nvfp4_hwy.cpp: fp32 panels; gemm_nvfp4_bf16.cpp: bf16 pair panels).
// Why: a panel stores one k (or k pair) of 8 / 16 consecutive weight rows per vector, while a
// weight row's codes are contiguous along k. Transposing the packed bytes first (1 byte = 2 codes
// = 1 k pair) lets every decoded vector land in panel order directly; decoding along k and then
// transposing the decoded dwords cost 48 zmm shuffles per 16 x 16 pairs (docs/perf-cpu.md 29, 34,
// 39). SSE2 only, so every x86-64 target (the Highway AVX2 / AVX3 code, the AVX-512 decodes)
// inlines them.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#include <emmintrin.h>

#include <cstdint>

namespace nvfp4::cpu {

// The packed bytes of one 16-k block (8 bytes per row, at prow[r] + 8 b) of 8 weight rows,
// transposed as bytes (12 unpacks): q[p] holds packed byte 2p of rows 0..7, then packed byte
// 2p + 1 of rows 0..7.
__attribute__((always_inline)) inline void transpose_block_bytes8(const std::uint8_t* const* prow, std::int64_t b,
                                                                  __m128i (&q)[4]) {
  __m128i r[8];
  for (int c = 0; c < 8; ++c) r[c] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(prow[c] + b * 8));
  const __m128i a0 = _mm_unpacklo_epi8(r[0], r[1]), a1 = _mm_unpacklo_epi8(r[2], r[3]);
  const __m128i a2 = _mm_unpacklo_epi8(r[4], r[5]), a3 = _mm_unpacklo_epi8(r[6], r[7]);
  const __m128i b0 = _mm_unpacklo_epi16(a0, a1), b1 = _mm_unpackhi_epi16(a0, a1);  // rows 0-3
  const __m128i b2 = _mm_unpacklo_epi16(a2, a3), b3 = _mm_unpackhi_epi16(a2, a3);  // rows 4-7
  q[0] = _mm_unpacklo_epi32(b0, b2);
  q[1] = _mm_unpackhi_epi32(b0, b2);
  q[2] = _mm_unpacklo_epi32(b1, b3);
  q[3] = _mm_unpackhi_epi32(b1, b3);
}

// The same for 16 rows: t[j] holds packed byte j (elements 2j, 2j + 1 of the block) of rows 0..15.
__attribute__((always_inline)) inline void transpose_block_bytes16(const std::uint8_t* const* prow, std::int64_t b,
                                                                   __m128i (&t)[8]) {
  __m128i lo[4], hi[4];
  transpose_block_bytes8(prow, b, lo);
  transpose_block_bytes8(prow + 8, b, hi);
  for (int p = 0; p < 4; ++p) {
    t[2 * p] = _mm_unpacklo_epi64(lo[p], hi[p]);
    t[2 * p + 1] = _mm_unpackhi_epi64(lo[p], hi[p]);
  }
}

}  // namespace nvfp4::cpu
#endif
