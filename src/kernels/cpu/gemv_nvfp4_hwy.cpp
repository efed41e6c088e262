// kernels/cpu/gemv_nvfp4_hwy.cpp -- W4A16 NVFP4 GEMV for small M (decode), every Highway target.
//
// The weights are read once per group of <= 8 rows of x: at M=1 the kernel is a stream over the
// packed bytes (N*K/2 + N*K/16 B) and must decode faster than DRAM delivers them.
//
// Decode without any nibble shuffling: a vector of L u32 words holds 8 codes per lane. Two such
// vectors (4L bytes each) are split into even words E and odd words O (ConcatEven/ConcatOdd), so
// lane i of E and O covers elements 16i..16i+7 and 16i+8..16i+15 of the chunk: one whole
// 16-element block per lane. `E >> 4j` then has element 16i+j in the low nibble of lane i, which
// a 16-entry table turns into fp32 (AVX-512: vpermps reads only the low 4 index bits; elsewhere
// exact integer arithmetic). The activations are permuted once per call into the same order
// (xp[c][j][i] = x[c*16L + 16i + j]), so no shuffles are needed on the weight side. Lane i's
// block scale is one E4M3 byte, decoded with integer ops (no denormal operands, so the result
// does not depend on DAZ/FTZ).
//
// x86 without AVX-512 decodes through byte tables instead, with the activations in that decode's
// order: AVX2 to the codes' bf16 patterns (GemvRowChunkAvx2Bf16), SSE4 / SSSE3 to 2 * e2m1 as int8
// (GemvRowChunkLut).
//
// Arithmetic per lane and block: p = sum_j e2m1_j * x_j (fp32 FMA, 16 terms), acc += p * |scale|
// (the int8 byte-table decode: the same with 2 e2m1_j and |scale| / 2 up to 3 rows, and from 4
// rows acc += sum_j (2 e2m1_j * |scale| / 2) * x_j, the dequantized weight; AVX2's bf16 decode:
// the same two forms with e2m1_j and |scale|); the tensor scale
// multiplies the final fp32 sum once. e2m1 values and scales are exact in fp32; only the
// summation order and FMA rounding differ from the oracle (tolerance in
// tests/cpu/test_matmul_cpu.cpp). K % (16L) elements at the end of a row go through a scalar
// loop with the oracle's exact e2m1*scale product.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/hwy_register_block.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tuning_cpu.h"

#define HWY_WANT_AVX3_DL 1  // Ice Lake / Zen 4 / Sapphire Rapids: compile and test that target too
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gemv_nvfp4_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "kernels/cpu/decode_avx2_bf16-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nvfp4::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using D8 = hn::Rebind<std::uint8_t, DF>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;

// fp32 E2M1 value of the code in bits 3:0 of each lane (higher bits are ignored).
HWY_INLINE VF DecodeE2M1(DF df, VU v) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  const __m512 tbl = _mm512_setr_ps(0.f, .5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f,  //
                                    -0.f, -.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f);
  return VF{_mm512_permutexvar_ps(v.raw, tbl)};
#else
  // magnitude m: m >= 2 -> bits (m << 22) + 0x3F000000 (exponent m>>1 - 1, mantissa m&1);
  // m == 1 -> 0.5 = 0x3F000000; m == 0 -> 0.
  const DU du;
  const DI di;
  const VU m = hn::And(v, hn::Set(du, 7u));
  VU bits = hn::Add(hn::ShiftLeft<22>(m), hn::Set(du, 0x3F000000u));
  const auto is1 = hn::RebindMask(du, hn::Eq(hn::BitCast(di, m), hn::Set(di, 1)));
  bits = hn::IfThenElse(is1, hn::Set(du, 0x3F000000u), bits);
  const auto is0 = hn::RebindMask(du, hn::Eq(hn::BitCast(di, m), hn::Zero(di)));
  bits = hn::IfThenZeroElse(is0, bits);
  const VU sign = hn::And(hn::ShiftLeft<28>(v), hn::Set(du, 0x80000000u));
  return hn::BitCast(df, hn::Or(bits, sign));
#endif
}

// |E4M3| byte (one per u32 lane) -> fp32, exactly; 0x7F -> NaN as in format.h.
HWY_INLINE VF DecodeE4M3Abs(DF df, VU b) {
  const DU du;
  const DI di;
  b = hn::And(b, hn::Set(du, 0x7Fu));
  const VF normal = hn::BitCast(df, hn::Add(hn::ShiftLeft<20>(b), hn::Set(du, 120u << 23)));
  const VF sub = hn::Mul(hn::ConvertTo(df, hn::BitCast(di, hn::And(b, hn::Set(du, 7u)))),
                         hn::Set(df, 1.0f / 512.0f));
  const auto is_sub = hn::RebindMask(df, hn::Lt(hn::BitCast(di, b), hn::Set(di, 8)));
  const VF s = hn::IfThenElse(is_sub, sub, normal);
  const auto is_nan = hn::RebindMask(df, hn::Eq(hn::BitCast(di, b), hn::Set(di, 0x7F)));
  return hn::IfThenElse(is_nan, hn::NaN(df), s);
}

// The byte-table decode (GemvRowChunkLut below) on x86 without AVX-512; this file is compiled
// once per Highway target (foreach_target.h).
#undef NVFP4_GEMV_LUT
#if HWY_ARCH_X86 && (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3)
#define NVFP4_GEMV_LUT 1
#else
#define NVFP4_GEMV_LUT 0
#endif

struct GemvCtx {
  const MatmulArgs* a;
  const float* xp;        // permuted fp32 activations [m][xs]
  std::int64_t xs;        // row stride of xp (x_row_stride)
  std::int64_t L, chunk;  // lanes, elements per chunk (16L)
  std::int64_t nch;       // full chunks per row
  // Block scale of each scale byte (exact): |E4M3| / 2 for the int8 table (2 e2m1 codes), |E4M3|
  // for the AVX2 bf16 decode.
  const float* scale_tab;
};

// The register blocks are named variables (hwy_register_block.h): accumulator slot i = m * NR + r
// (i < MR * NR <= 8) and partial sum m (m < MR <= 8). Slots past the block are never touched
// (if constexpr).
#define NVFP4_SLOT_ARGS acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7

template <int I>
HWY_INLINE VF& Slot(VF& a0, VF& a1, VF& a2, VF& a3, VF& a4, VF& a5, VF& a6, VF& a7) {
  static_assert(I >= 0 && I < 8, "GEMV register block: at most 8 accumulators");
  if constexpr (I == 0) return a0;
  else if constexpr (I == 1) return a1;
  else if constexpr (I == 2) return a2;
  else if constexpr (I == 3) return a3;
  else if constexpr (I == 4) return a4;
  else if constexpr (I == 5) return a5;
  else if constexpr (I == 6) return a6;
  else return a7;
}

// Both row-chunk decodes end a block group the same way: accumulator slot m * NR + R += part m * s.
#define NVFP4_PART_ACC(m)                      \
  if constexpr (m < MR) {                      \
    VF& a = Slot<m * NR + R>(NVFP4_SLOT_ARGS); \
    a = hn::MulAdd(part##m, s, a);             \
  }

// Weight row R of the tile, one chunk: decode its E/O words and block scales, form the MR
// unscaled partial sums against x (xc: the chunk of row m0, rows xs apart), and add partial * scale
// into accumulator slots m * NR + R.
template <int MR, int NR, int R>
HWY_INLINE void GemvRowChunk(const float* xc, std::int64_t xs, std::int64_t L, const std::uint8_t* p,
                             const std::uint8_t* sp, VF& acc0, VF& acc1, VF& acc2, VF& acc3, VF& acc4,
                             VF& acc5, VF& acc6, VF& acc7) {
  const DF df;
  const DU du;
  const D8 d8;
#if HWY_TARGET == HWY_SCALAR
  std::uint32_t w0, w1;
  std::memcpy(&w0, p, 4);
  std::memcpy(&w1, p + 4, 4);
  const VU E = hn::Set(du, w0), O = hn::Set(du, w1);
#else
  const VU lo = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(p));
  const VU hi = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(p + 4 * L));
  const VU E = hn::ConcatEven(du, hi, lo);
  const VU O = hn::ConcatOdd(du, hi, lo);
#endif
  const VF s = DecodeE4M3Abs(df, hn::PromoteTo(du, hn::LoadU(d8, sp)));
  const VF wfirst = DecodeE2M1(df, E);
#define NVFP4_PART_INIT(m) VF part##m = hn::Zero(df); \
  if constexpr (m < MR) part##m = hn::Mul(wfirst, hn::Load(df, xc + m * xs));
  NVFP4_X8(NVFP4_PART_INIT)
#undef NVFP4_PART_INIT
#define NVFP4_PART_FMA(m) \
  if constexpr (m < MR) part##m = hn::MulAdd(w, hn::Load(df, xc + m * xs + j * L), part##m);
  for (int j = 1; j < 8; ++j) {
    const VF w = DecodeE2M1(df, hn::ShiftRightSame(E, 4 * j));
    NVFP4_X8(NVFP4_PART_FMA)
  }
  for (int j = 8; j < 16; ++j) {
    const VF w = DecodeE2M1(df, hn::ShiftRightSame(O, 4 * (j - 8)));
    NVFP4_X8(NVFP4_PART_FMA)
  }
#undef NVFP4_PART_FMA
  NVFP4_X8(NVFP4_PART_ACC)
}

// x86 without AVX-512 (AVX2, SSE4, SSSE3): a byte-table decode instead of DecodeE2M1's permute. The AVX2
// permute (vpermps ymm) issued once per 4 cycles on an AVX2-only AMD EPYC host (family 23, Zen 1's
// signature; measured in a loop), and the GEMV with it ran at 13% of the read bandwidth there
// (docs/perf-cpu.md 31).
// Here each packed byte's two codes go through a 16-entry byte table (pshufb: one uop per 16
// bytes) to 2 * e2m1 as int8, exact integers -12..12, which are widened (vpmovsxbd) and converted
// (exact). Lanes run along k within one block, so the block scale is a broadcast load from a
// 256-entry table of |scale| / 2 (exact: |scale| >= 2^-9). Per block and row:
//   MR <= 3: part = sum of the 16 products, acc += part * (|scale| / 2) (3 FMAs per 16 weights);
//   MR >= 4: the scale goes into the decoded weights once for all rows (w = 2 e2m1 * |scale| / 2,
//            exactly the dequantized weight), then acc += w * x (2 FMAs per 16 weights and row).
// Everything stays in registers: each 16-byte piece of the chunk is two blocks, each block's 8
// int8 codes one 8-byte half (AVX2) or two 4-byte quarters (SSE4) of the table's result. (An
// earlier form stored the table results to the stack and reloaded them: on the EPYC host this
// form is 11-20% faster at M = 1..4; docs/perf-cpu.md 32.)
#if NVFP4_GEMV_LUT

// The L int8 values at byte `off` (a multiple of L) of a 16-byte vector, widened to int32 and
// converted to fp32 (exact). `off` is a constant after unrolling; the switch folds away.
HWY_INLINE VF CodesToF32(hn::Vec128<std::int8_t> v, int off) {
  const DF df;
  const DI di;
  constexpr int L = static_cast<int>(hn::MaxLanes(DF()));
  const hn::Full128<std::int8_t> d16;
  auto lanes = [&](auto shifted) {
    if constexpr (L == 8) return hn::ConvertTo(df, hn::PromoteTo(di, hn::LowerHalf(shifted)));
    else return hn::ConvertTo(df, hn::PromoteTo(di, hn::LowerHalf(hn::LowerHalf(shifted))));
  };
  switch (off) {
    case 0: return lanes(v);
    case 4: return lanes(hn::ShiftRightBytes<4>(d16, v));
    case 8: return lanes(hn::ShiftRightBytes<8>(d16, v));
    default: return lanes(hn::ShiftRightBytes<12>(d16, v));
  }
}

// Its order of a chunk's activations (GemvImpl permutes x once per call into it): block i's 8 even
// elements, then its 8 odd ones; the decode's codes come out in the same order.
template <int MR, int NR, int R>
HWY_INLINE void GemvRowChunkLut(const float* xc, std::int64_t xs, std::int64_t, const std::uint8_t* p,
                                const std::uint8_t* sp, const float* half_scale_tab, VF& acc0, VF& acc1,
                                VF& acc2, VF& acc3, VF& acc4, VF& acc5, VF& acc6, VF& acc7) {
  const DF df;
  constexpr int L = static_cast<int>(hn::MaxLanes(DF()));
  static_assert(L == 4 || L == 8, "the byte-table decode: 128- and 256-bit vectors");
  const hn::Full128<std::uint8_t> d16;
  const hn::Full128<std::int8_t> d16i;
  const auto tbl = hn::LoadDup128(d16, kTwiceE2M1);
  const auto low4 = hn::Set(d16, std::uint8_t{0x0F});
  for (int q = 0; q < L / 2; ++q) {  // the chunk's 8L bytes in 16-byte pieces: blocks 2q, 2q + 1
    const auto b = hn::LoadU(d16, p + 16 * q);
    // Byte j of ev / od: 2 * e2m1 of the low / high code of piece byte j (element 2j / 2j + 1).
    const auto ev = hn::BitCast(d16i, hn::TableLookupBytes(tbl, hn::And(b, low4)));
    const auto od = hn::BitCast(d16i, hn::TableLookupBytes(tbl, hn::And(hn::ShiftRight<4>(b), low4)));
    for (int h = 0; h < 2; ++h) {
      const int i = 2 * q + h;  // block of the chunk
      const float* xb = xc + 16 * i;
      const VF s = hn::Set(df, half_scale_tab[sp[i]]);
      if constexpr (MR <= 3) {
#define NVFP4_PART_INIT(m) VF part##m = hn::Zero(df);
        NVFP4_X8(NVFP4_PART_INIT)
#undef NVFP4_PART_INIT
        for (int v = 0; v < 8 / L; ++v) {
          const VF we = CodesToF32(ev, 8 * h + v * L), wo = CodesToF32(od, 8 * h + v * L);
#define NVFP4_PART_FMA(m)                                                      \
  if constexpr (m < MR) {                                                      \
    part##m = hn::MulAdd(we, hn::Load(df, xb + m * xs + v * L), part##m);      \
    part##m = hn::MulAdd(wo, hn::Load(df, xb + m * xs + 8 + v * L), part##m);  \
  }
          NVFP4_X8(NVFP4_PART_FMA)
#undef NVFP4_PART_FMA
        }
        if constexpr (MR == 1 && NR == 1) {
          // One row: odd blocks into slot 1 (GemvTile adds it to slot 0), a second chain for the
          // FMA latency: -3..-5% hot and cold at 1 x 4096 x 14336 on the EPYC host (perf-cpu 32).
          VF& a = h ? acc1 : acc0;
          a = hn::MulAdd(part0, s, a);
        } else {
          NVFP4_X8(NVFP4_PART_ACC)
        }
      } else {
        for (int v = 0; v < 8 / L; ++v) {
          const VF we = hn::Mul(CodesToF32(ev, 8 * h + v * L), s);
          const VF wo = hn::Mul(CodesToF32(od, 8 * h + v * L), s);
#define NVFP4_ROW_FMA(m)                                                                      \
  if constexpr (m < MR) {                                                                     \
    VF& a = Slot<m * NR + R>(NVFP4_SLOT_ARGS);                                                \
    a = hn::MulAdd(wo, hn::Load(df, xb + m * xs + 8 + v * L),                                 \
                   hn::MulAdd(we, hn::Load(df, xb + m * xs + v * L), a));                     \
  }
          NVFP4_X8(NVFP4_ROW_FMA)
#undef NVFP4_ROW_FMA
        }
      }
    }
  }
}
#endif

// AVX2 (256-bit x86 without AVX-512): the codes become fp32 through their bf16 patterns, without
// an int -> float conversion (decode_avx2_bf16-inl.h), the activations in Avx2Bf16Order.
#undef NVFP4_GEMV_AVX2_BF16
#if HWY_TARGET == HWY_AVX2
#define NVFP4_GEMV_AVX2_BF16 1

template <int MR, int NR, int R>
HWY_INLINE void GemvRowChunkAvx2Bf16(const float* xc, std::int64_t xs, const std::uint8_t* p, const std::uint8_t* sp,
                                     const float* scale_tab, VF& acc0, VF& acc1, VF& acc2, VF& acc3, VF& acc4,
                                     VF& acc5, VF& acc6, VF& acc7) {
  const DF df;
  const Avx2Bf16Decoder dec;
  for (int q = 0; q < 4; ++q) {  // the chunk's 64 bytes in 16-byte pieces: blocks 2q, 2q + 1
    __m256i words_of[2];
    dec.Piece(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * q)), words_of[0], words_of[1]);
    for (int h = 0; h < 2; ++h) {
      const int i = 2 * q + h;  // block of the chunk
      const VF w0{dec.First(words_of[h])};
      const VF w1{dec.Second(words_of[h])};
      const float* xb = xc + 16 * i;
      const VF s = hn::Set(df, scale_tab[sp[i]]);
      if constexpr (MR <= 3) {
#define NVFP4_PART(m) \
  VF part##m = hn::Zero(df); \
  if constexpr (m < MR) part##m = hn::MulAdd(w1, hn::Load(df, xb + m * xs + 8), hn::Mul(w0, hn::Load(df, xb + m * xs)));
        NVFP4_X8(NVFP4_PART)
#undef NVFP4_PART
        if constexpr (MR == 1 && NR == 1) {
          VF& a = h ? acc1 : acc0;  // two chains, as in GemvRowChunkLut
          a = hn::MulAdd(part0, s, a);
        } else {
          NVFP4_X8(NVFP4_PART_ACC)
        }
      } else {  // the dequantized weights once for all rows (exact products)
        const VF d0 = hn::Mul(w0, s), d1 = hn::Mul(w1, s);
#define NVFP4_ROW_FMA(m)                                                                                    \
  if constexpr (m < MR) {                                                                                   \
    VF& a = Slot<m * NR + R>(NVFP4_SLOT_ARGS);                                                              \
    a = hn::MulAdd(d1, hn::Load(df, xb + m * xs + 8), hn::MulAdd(d0, hn::Load(df, xb + m * xs), a));        \
  }
        NVFP4_X8(NVFP4_ROW_FMA)
#undef NVFP4_ROW_FMA
      }
    }
  }
}
#else
#define NVFP4_GEMV_AVX2_BF16 0
#endif
#undef NVFP4_PART_ACC

// out[mi][r] = sum over chunks [c0, c1) of rows m0.., weight rows n0.. (no tail, no tensor scale)
template <int MR, int NR>
HWY_INLINE void GemvTile(const GemvCtx& g, std::int64_t m0, std::int64_t n0, std::int64_t c0,
                         std::int64_t c1, float out[MR][NR]) {
  static_assert(MR * NR <= 8 && NR <= 4, "GEMV register block: at most 8 accumulators, 4 weight rows");
  const DF df;
  const MatmulArgs& a = *g.a;
  const std::int64_t L = g.L, k = a.k;
  const std::uint8_t* prow[NR];
  const std::uint8_t* srow[NR];
  for (int r = 0; r < NR; ++r) {
    prow[r] = a.packed + (n0 + r) * (k / 2);
    srow[r] = a.scales + (n0 + r) * (k / kBlockSize);
  }
#define NVFP4_ACC_INIT(i) VF acc##i = hn::Zero(df);
  NVFP4_X8(NVFP4_ACC_INIT)
#undef NVFP4_ACC_INIT
  for (std::int64_t c = c0; c < c1; ++c) {
    const float* xc = g.xp + m0 * g.xs + c * g.chunk;
#if NVFP4_GEMV_AVX2_BF16
#define NVFP4_ROW(r)                                                                                   \
  if constexpr (r < NR)                                                                                \
    GemvRowChunkAvx2Bf16<MR, NR, r>(xc, g.xs, prow[r] + c * 8 * L, srow[r] + c * L, g.scale_tab,       \
                                    NVFP4_SLOT_ARGS);
#elif NVFP4_GEMV_LUT
#define NVFP4_ROW(r)                                                                                   \
  if constexpr (r < NR)                                                                                \
    GemvRowChunkLut<MR, NR, r>(xc, g.xs, L, prow[r] + c * 8 * L, srow[r] + c * L, g.scale_tab,         \
                               NVFP4_SLOT_ARGS);
#else
#define NVFP4_ROW(r)                                                                                   \
  if constexpr (r < NR)                                                                                \
    GemvRowChunk<MR, NR, r>(xc, g.xs, L, prow[r] + c * 8 * L, srow[r] + c * L, NVFP4_SLOT_ARGS);
#endif
    NVFP4_ROW(0) NVFP4_ROW(1) NVFP4_ROW(2) NVFP4_ROW(3)
#undef NVFP4_ROW
  }
  if constexpr (NVFP4_GEMV_LUT && MR * NR == 1) acc0 = hn::Add(acc0, acc1);  // GemvRowChunkLut's second chain
  float sums[8];
#define NVFP4_SUM(i) if constexpr (i < MR * NR) sums[i] = hn::GetLane(hn::SumOfLanes(df, acc##i));
  NVFP4_X8(NVFP4_SUM)
#undef NVFP4_SUM
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) out[m][r] = sums[m * NR + r];
}

// Rows [n0, n1) of W against rows [m0, m0+MR) of x, chunks [c0, c1), plus the scalar K tail if
// `tail`. Writes the raw sums (no tensor scale) to dst[mi * dst_stride + n].
template <int MR, int NR>
void GemvRows(const GemvCtx& g, std::int64_t m0, std::int64_t n0, std::int64_t n1, std::int64_t c0,
              std::int64_t c1, bool tail, float* dst, std::int64_t dst_stride) {
  const MatmulArgs& a = *g.a;
  const std::int64_t k = a.k;
  const float* stab = e4m3_abs_table();
  auto finish = [&](std::int64_t n, int m, float v) {
    if (tail) {
      const std::uint8_t* prow = a.packed + n * (k / 2);
      const std::uint8_t* srow = a.scales + n * (k / kBlockSize);
      const float* xr = g.xp + (m0 + m) * g.xs;
      float t = 0.0f;
      for (std::int64_t kk = g.nch * g.chunk; kk < k; ++kk) {
        const std::uint8_t byte = prow[kk / 2];
        const std::uint8_t code = (kk & 1) ? e2m1_high(byte) : e2m1_low(byte);
        t += xr[kk] * (e2m1_to_float(code) * stab[srow[kk / kBlockSize]]);
      }
      v += t;
    }
    dst[m * dst_stride + n] = v;
  };
  std::int64_t n = n0;
  for (; n + NR <= n1; n += NR) {
    float out[MR][NR];
    GemvTile<MR, NR>(g, m0, n, c0, c1, out);
    for (int m = 0; m < MR; ++m)
      for (int r = 0; r < NR; ++r) finish(n + r, m, out[m][r]);
  }
  for (; n < n1; ++n) {
    float out[MR][1];
    GemvTile<MR, 1>(g, m0, n, c0, c1, out);
    for (int m = 0; m < MR; ++m) finish(n, m, out[m][0]);
  }
}

void GemvRowsAnyM(const GemvCtx& g, int mr, std::int64_t m0, std::int64_t n0, std::int64_t n1,
                  std::int64_t c0, std::int64_t c1, bool tail, float* dst, std::int64_t ds) {
#if NVFP4_GEMV_LUT
  // The byte-table decode one weight row at a time: against 4 / 2 rows per tile at M = 1 / 2,
  // hot 1 x 4096 x 14336 6.13-6.34 against 6.58-6.68 ms and 2 x 4096 x 14336 8.58-8.62 against
  // 9.50-10.60 ms, alternating, M = 3 unchanged (docs/perf-cpu.md 31; no PMU there to say why).
  switch (mr) {
    case 1: GemvRows<1, 1>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 2: GemvRows<2, 1>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 3: GemvRows<3, 1>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
#else
  // NR so that MR*NR independent FMA chains (>= 4) hide the FMA latency.
  switch (mr) {
    case 1: GemvRows<1, 4>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 2: GemvRows<2, 2>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 3: GemvRows<3, 2>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
#endif
    case 4: GemvRows<4, 1>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 5: GemvRows<5, 1>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 6: GemvRows<6, 1>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 7: GemvRows<7, 1>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    default: GemvRows<8, 1>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
  }
}

// Row stride of the permuted activations, in floats. With K a multiple of 1024 (most hidden sizes)
// every row of x starts at the same offset modulo 4 KiB, the span of the address bits that pick an
// L1 set: an 8-row tile's loads of one chunk then fall in the same few sets (8 ways) as the weight
// stream's lines. Such strides are padded to 512 B past a multiple of 4 KiB, which spreads 8 rows'
// chunks over every set. AVX2 dev VM (2026-12-07, docs/perf-cpu.md 47): 8 x 4096 x 14336 -10.6%
// paired; rows 2 KiB apart mod 4 KiB (K = 2560, 9728) measured no better padded.
std::int64_t x_row_stride(std::int64_t k, std::int64_t m) {
  const std::int64_t xs = round_up(k, std::int64_t{16});
  if (m == 1 || xs % 1024 != 0 || cpu_tuning().gemv_x_pad == 0) return xs;
  return xs + 128;
}

void GemvImpl(const MatmulArgs& a) {
  const DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t chunk = 16 * L, k = a.k, n = a.n, m = a.m;
  GemvCtx g{&a, nullptr, x_row_stride(k, m), L, chunk, k / chunk, NVFP4_GEMV_AVX2_BF16 ? e4m3_abs_table() : e4m3_half_abs_table()};
  // The byte-table decodes at every M where they are compiled: on the AMD EPYC family 23 dev VM
  // (2 threads, hot 4096 x 14336, 2026-12-02, docs/perf-cpu.md 32) the int8 one was 1.15-1.25x
  // faster than the permute decode from M = 1 to 8. (AVX2's bf16 decode keeps its tiles: NR = 1 up
  // to M = 3, measured with the int8 one.)
  constexpr bool lut = NVFP4_GEMV_LUT;

  // Activations: widened to fp32 once, permuted into the decode order (see the file header).
  auto xp = hwy::AllocateAligned<float>(static_cast<std::size_t>(m * g.xs));
  std::vector<float> row(static_cast<std::size_t>(k));
  for (std::int64_t mi = 0; mi < m; ++mi) {
    load_x_row_f32(a, mi, row.data());
    float* dst = xp.get() + mi * g.xs;
    if (NVFP4_GEMV_AVX2_BF16)  // GemvRowChunkAvx2Bf16's order within each block
      PermuteToAvx2Bf16Order(row.data(), g.nch * chunk, dst);
    else
      for (std::int64_t c = 0; c < g.nch; ++c)
        for (std::int64_t j = 0; j < 16; ++j)
          for (std::int64_t i = 0; i < L; ++i) {
            if (lut)  // block i: even elements, then odd ones
              dst[c * chunk + 16 * i + (j & 1) * 8 + j / 2] = row[c * chunk + 16 * i + j];
            else
              dst[c * chunk + j * L + i] = row[c * chunk + 16 * i + j];
          }
    for (std::int64_t kk = g.nch * chunk; kk < k; ++kk) dst[kk] = row[kk];
  }
  g.xp = xp.get();

  const CpuTuning& tune = cpu_tuning();
  const std::int64_t mgroups = (m + 7) / 8;
  const std::int64_t want = tune.gemv_min_tasks_per_thread * num_threads();
  // Tasks of >= gemv_task_bytes of weights where N allows `want` of them (tuning_cpu.h).
  const std::int64_t step = std::max<std::int64_t>(1, tune.gemv_rows_per_task);
  const std::int64_t by_bytes = round_up((tune.gemv_task_bytes + k / 2 - 1) / (k / 2), step);
  const std::int64_t by_count = want > 0 ? std::max(step, n * mgroups / want / step * step) : n;
  const std::int64_t rows_per_task = std::max(step, std::min(by_bytes, by_count));
  const std::int64_t ngroups = (n + rows_per_task - 1) / rows_per_task;
  // Split K when N alone cannot keep every thread busy (small N, long K).
  std::int64_t nseg = 1;
  if (ngroups * mgroups < want && g.nch >= 2)
    nseg = std::min<std::int64_t>(g.nch, (want + ngroups * mgroups - 1) / (ngroups * mgroups));
  std::vector<float> partial;
  if (nseg > 1) partial.assign(static_cast<std::size_t>(nseg * m * n), 0.0f);
  std::vector<float> direct(nseg == 1 ? static_cast<std::size_t>(m * n) : 0);
  float* sums = nseg > 1 ? partial.data() : direct.data();

  parallel_for(ngroups * mgroups * nseg, [&](std::int64_t t) {
    const std::int64_t seg = t % nseg, rest = t / nseg;
    const std::int64_t gi = rest % ngroups, mgi = rest / ngroups;
    const std::int64_t n0 = gi * rows_per_task, n1 = std::min(n, n0 + rows_per_task);
    const std::int64_t m0 = mgi * 8;
    const int mr = static_cast<int>(std::min<std::int64_t>(8, m - m0));
    const std::int64_t c0 = g.nch * seg / nseg, c1 = g.nch * (seg + 1) / nseg;
    float* dst = sums + seg * m * n + m0 * n;
    GemvRowsAnyM(g, mr, m0, n0, n1, c0, c1, seg == nseg - 1, dst, n);
  });

  // Sum K segments in a fixed order (deterministic), apply the tensor scale once, store.
  for (std::int64_t mi = 0; mi < m; ++mi) {
    for (std::int64_t ni = 0; ni < n; ++ni) {
      float v = sums[mi * n + ni];
      for (std::int64_t s = 1; s < nseg; ++s) v += sums[(s * m + mi) * n + ni];
      store_from_f32(a.y, a.dtype, mi * a.y_stride + ni, v * a.tensor_scale);
    }
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace nvfp4::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nvfp4::cpu {
HWY_EXPORT(GemvImpl);
HWY_EXPORT(TargetName);

void gemv_nvfp4_hwy(const MatmulArgs& a) { HWY_DYNAMIC_DISPATCH(GemvImpl)(a); }
const char* hwy_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

std::vector<std::int64_t> hwy_compiled_targets() { return hwy::SupportedAndGeneratedTargets(); }
}  // namespace nvfp4::cpu
#endif
