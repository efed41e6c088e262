// kernels/cuda/repack_nvfp4_sm90.h -- the kernel-private "gemv_sm90" weight layout: one
// definition shared by the host reference repack (repack_nvfp4_sm90.cpp), the device repack
// kernel and the repacked GEMV (gemv_nvfp4_sm90_repacked.cu). Plain C++ with NVFP4_HD (no CUDA headers).
//
// Why: docs/perf-cuda.md 6 measured the canonical-layout kernels issue-bound at 3.7-5.3 SASS
// instructions per weight (decode 13 ops / 8 weights, PRMTs for the activations, scale
// conversion, addressing). This layout is chosen so that the mma operands fall out of the loads:
//
// Shape: N % 16 == 0, K % 128 == 0. Same byte count as the canonical layout (N*K/2 + N*K/16).
// Rows are grouped in tiles of 16 (the mma's M), K in chunks of 64 (4 mma k16 steps).
//
// packed: [tile = N/16][chunk = K/64][lane 0..31][16 bytes]. Lane (g, t) = (lane/4, lane%4)
//   holds rows g and g+8 of the tile at the chunk's k's [16t, 16t+16) (one E4M3 block per row):
//   32 weights. Its 4 u32 words: word j = the A fragment of mma step j (a0..a3), where mma slot
//   pair (2t, 2t+1) is physical k (16t+4j, 16t+4j+1) and slot pair (2t+8, 2t+9) is
//   (16t+4j+2, 16t+4j+3):
//     a0 = row g   (k0, k0+1)   a1 = row g+8 (k0, k0+1)
//     a2 = row g   (k0+2, k0+3) a3 = row g+8 (k0+2, k0+3)     with k0 = 16t + 4j.
//   Then the mma's B operand (activations) for step j is simply the lane's activation words
//   (x[16t+4j], x[16t+4j+1]) and (x[16t+4j+2], x[16t+4j+3]): two aligned bf16 pairs, no PRMT.
//   Inside a word, each register r (a0..a3 = r0..r3) is a bf16 pair whose halves carry one E2M1
//   code each at bits (sign, e1, e0, m) = (15, 8, 7, 6) (+16 for the high half): that reads as
//   e2m1 * 2^-126 (code 1 is a bf16 subnormal). The decode, per word q (8 integer ops for 4 registers):
//     r0 = q & M                        M = 0x81C081C0 (bits 6,7,8,15,22,23,24,31)
//     r1 = rotr(q, 3) & M
//     r2 = rotr(q, 6) & M
//     r3 = ((q & 0x001B001B) * 0x4108) & M      bits 3,4 (+16) << 3, bit 0 << 8, bit 1 << 14
//   No 4 rotations of M tile 32 bits ({6,7,8,15} does not tile Z16, checked exhaustively), so the
//   4th register is gathered by one multiply: its 8 bits masked, times 2^3 + 2^8 + 2^14, whose
//   three shifted copies only ever sum in bits outside M (no carry reaches M: checked over all
//   256 values of the masked bits, tests/cuda/test_repack_cuda.cpp). Until 2026-12-02 r1 / r2 were
//   rotations by 6 / 12 and r3 two shifts and two masks: 9 ops (docs/perf-cuda.md 52). The repack
//   places each weight bit at the source bit of its target (src_bit below), so decode(repack(w))
//   is the identity by construction.
//
// fp16 codes (RepackedCodes::fp16, for engines whose activations are fp16): the same words with
//   the codes at fp16 bits (15, 11, 10, 9), e2m1 * 2^-14 (code 1 an fp16 subnormal), so the fp16
//   mma takes them with no move (the bf16 codes need 2 more ops per register for fp16 rows,
//   docs/perf-cuda.md 48). {9,10,11,15} admits only two disjoint rotations in Z16, so registers
//   2 and 3 are gathered by a multiply whose two shifted copies of the masked bits do not
//   overlap (an exact shift-and-or, as r3 of the bf16 codes), 9 ops (bf16: 8):
//     r0 = q & F                        F = 0x8E008E00 (bits 9,10,11,15,25,26,27,31)
//     r1 = rotr(q, 3) & F
//     r2 = ((q & 0x003A003A) * 0x4040) & F      magnitudes << 6, signs << 14
//     r3 = ((q & 0x01C101C1) * 0x8008) & F      magnitudes << 3, signs << 15
//
// scales: [tile][chunk pair = K/128][lane][4 bytes]: bytes (row g, block t of chunk 2c),
//   (row g+8, same), (row g, block t of chunk 2c+1), (row g+8, same). Each byte is the block
//   scale re-encoded so that one IMAD yields the broadcast bf16x2 of |scale| * 2^119:
//     bf16 bits = byte * 16 + 0x7600   (byte = (E << 3) | m, |scale| = 2^(E-10) * (1 + m/8))
//   E4M3 subnormals become normal here (E = 1..3), E4M3 NaN becomes byte 159 (bf16 0x7FF0,
//   a NaN). A zero scale becomes byte 0 and its block's 16 codes are stored as +0: the block
//   dequantizes to zeros either way (the oracle may give -0; they compare equal), and
//   x * 0 keeps NaN/Inf propagation (Inf * 0 = NaN on both sides).
//   Product: e2m1 * 2^-126 * |s| * 2^119 = e2m1 * |s| * 2^-7, exact (<= 6 significant bits);
//   the 2^7 returns with the tensor scale on the fp32 result, as in the canonical kernels.
#pragma once

#include <cstdint>
#include <string>

#include "nvfp4/cuda.h"
#include "nvfp4/format.h"

namespace nvfp4::cuda::repack {

constexpr int kTileRows = 16;
constexpr int kChunkK = 64;
constexpr std::uint32_t kMaskP = 0x81C081C0u;
constexpr std::uint32_t kBf16Src3 = 0x001B001Bu, kBf16Mul3 = 0x4108u;  // r3: bits 0,1,3,4 (+16): << 8, 14, 3
constexpr std::uint32_t kMaskF = 0x8E008E00u;   // fp16 codes (see the header comment)
constexpr std::uint32_t kF16Src2 = 0x003A003Au, kF16Mul2 = 0x4040u;  // r2: bits 1,3,4,5 (+16): << 6 and << 14
constexpr std::uint32_t kF16Src3 = 0x01C101C1u, kF16Mul3 = 0x8008u;  // r3: bits 0,6,7,8 (+16): << 3 and << 15

inline bool shape_ok(std::int64_t n, std::int64_t k) { return n > 0 && k > 0 && n % 16 == 0 && k % 128 == 0; }

// Throws (nvfp4::Error naming `op` and `shape`) unless `codes` is a placement this layout defines.
void require_known_codes(const char* op, RepackedCodes codes, const std::string& shape);

// The arguments both repacks (host reference and device) share: the shape rule, no null pointer,
// a known code placement, and outputs that overlap neither the inputs nor each other (an in-place
// repack would read bytes it already rewrote). The sizes are overflow-checked.
void check_repack_arguments(const char* op, const WeightView& w, const void* packed_out, const void* scales_out,
                            RepackedCodes codes, const std::string& shape);

// Bit position p (0..31) inside register r (0..3) of a decoded word: p = 16*h + b with b the
// nibble bit's place in a half (nibble_bit_pos). Its source bit in q, for bf16 codes
// (b in {6,7,8,15}) or fp16 codes (f16: b in {9,10,11,15}):
NVFP4_HD int src_bit(int r, int p, bool f16) {
  const int b = p & 15;
  if (f16) {
    switch (r) {
      case 0: return p;
      case 1: return (p + 3) & 31;
      case 2: return b == 15 ? p - 14 : p - 6;
      default: return b == 15 ? p - 15 : p - 3;
    }
  }
  switch (r) {
    case 0: return p;
    case 1: return (p + 3) & 31;
    case 2: return (p + 6) & 31;
    default: return b == 15 ? p - 14 : (b == 8 ? p - 8 : p - 3);  // s << 14, e1 << 8, e0 and m << 3
  }
}

NVFP4_HD int nibble_bit_pos(int bit, bool f16) {  // E2M1 bit 0..3 (m, e0, e1, s) -> bit in a half
  return bit == 3 ? 15 : (f16 ? 9 : 6) + bit;
}

// The private scale byte of an E4M3 byte (see the header comment).
NVFP4_HD std::uint8_t scale_byte(std::uint8_t e4m3) {
  const std::uint8_t a = static_cast<std::uint8_t>(e4m3 & 0x7Fu);
  if (a == 0x7Fu) return 159;  // NaN
  if (a == 0) return 0;
  const float v = e4m3_to_float(a) * 0x1p119f;  // exact, in [2^110, 2^127.8]
  const std::uint32_t b16 = f32_bits(v) >> 16;   // <= 4 significant bits: the top 16 bits are exact
  return static_cast<std::uint8_t>((b16 - 0x7600u) >> 4);
}

// Reads the canonical E2M1 code of (row, k).
NVFP4_HD std::uint8_t code_at(const std::uint8_t* packed, std::int64_t k_total, std::int64_t row, std::int64_t k) {
  const std::uint8_t byte = packed[row * (k_total / 2) + k / 2];
  return static_cast<std::uint8_t>((k & 1) ? (byte >> 4) : (byte & 0xF));
}

// The 16 packed bytes (4 words) of (tile, chunk, lane), from canonical packed/scales; f16: fp16 codes.
NVFP4_HD void lane_words(const std::uint8_t* packed, const std::uint8_t* scales, std::int64_t k_total, std::int64_t tile,
                         std::int64_t chunk, int lane, bool f16, std::uint32_t out[4]) {
  const int g = lane >> 2, t = lane & 3;
  const std::int64_t rows[2] = {tile * 16 + g, tile * 16 + g + 8};
  const std::int64_t blk = chunk * 4 + t;  // block index along K
  bool zero[2];
  for (int h = 0; h < 2; ++h) zero[h] = (scales[rows[h] * (k_total / 16) + blk] & 0x7Fu) == 0;
  for (int j = 0; j < 4; ++j) {
    std::uint32_t q = 0;
    for (int r = 0; r < 4; ++r) {
      const int rh = r & 1;                                      // a0/a2: row g, a1/a3: row g+8
      const std::int64_t k0 = chunk * 64 + 16 * t + 4 * j + (r >= 2 ? 2 : 0);
      for (int half = 0; half < 2; ++half) {
        const std::uint8_t c = zero[rh] ? 0 : code_at(packed, k_total, rows[rh], k0 + half);
        for (int bit = 0; bit < 4; ++bit) {
          const int p = 16 * half + nibble_bit_pos(bit, f16);
          if ((c >> bit) & 1) q |= 1u << src_bit(r, p, f16);
        }
      }
    }
    out[j] = q;
  }
}

// The 4 scale bytes of (tile, chunk pair, lane).
NVFP4_HD void lane_scales(const std::uint8_t* scales, std::int64_t k_total, std::int64_t tile, std::int64_t cpair, int lane,
                          std::uint8_t out[4]) {
  const int g = lane >> 2, t = lane & 3;
  for (int i = 0; i < 4; ++i) {
    const std::int64_t row = tile * 16 + g + 8 * (i & 1);
    const std::int64_t blk = (2 * cpair + (i >> 1)) * 4 + t;
    out[i] = scale_byte(scales[row * (k_total / 16) + blk]);
  }
}

// The decode as the kernel does it (also used by the host self-test).
NVFP4_HD std::uint32_t rotr32(std::uint32_t q, int d) { return (q >> d) | (q << (32 - d)); }
NVFP4_HD void decode_word(std::uint32_t q, std::uint32_t r[4]) {
  r[0] = q & kMaskP;
  r[1] = rotr32(q, 3) & kMaskP;
  r[2] = rotr32(q, 6) & kMaskP;
  r[3] = ((q & kBf16Src3) * kBf16Mul3) & kMaskP;
}
// fp16 codes: the kernels' decode too (rp_decode_scaled).
NVFP4_HD void decode_word_f16(std::uint32_t q, std::uint32_t r[4]) {
  r[0] = q & kMaskF;
  r[1] = rotr32(q, 3) & kMaskF;
  r[2] = ((q & kF16Src2) * kF16Mul2) & kMaskF;
  r[3] = ((q & kF16Src3) * kF16Mul3) & kMaskF;
}

}  // namespace nvfp4::cuda::repack
