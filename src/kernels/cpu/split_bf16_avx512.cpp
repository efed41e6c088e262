// kernels/cpu/split_bf16_avx512.cpp -- exact split of fp16 / fp32 activation rows into 2 / 3 bf16
// pieces (AVX512F/BW integer and fp32 ops), shared by the bf16 GEMVs (gemv_nvfp4_avx512bf16.cpp,
// gemv_nvfp4_amx.cpp): they run the pieces as extra "virtual" activation rows.
#include <cstring>

#include "kernels/cpu/kernels_cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NVFP4_SPLIT_X86 1
#if !defined(__clang__)  // a GCC-only warning; clang warns about the unknown group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 false positive in avx512fintrin.h
#endif
#endif

namespace nvfp4::cpu {

#if defined(NVFP4_SPLIT_X86)
#define NVFP4_SPLIT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
namespace {
// ---- exact split of fp16 / fp32 activations into bf16 pieces ---------------------------------
// x = p_0 + p_1 (+ p_2) exactly, every p_j a normal bf16 or zero; the kernel then runs the pieces
// as extra activation rows ("virtual rows") and adds their fp32 results in a fixed order.
//
// Notation: rb(v) = v rounded to nearest-even to 8 significant bits (bf16), done on the fp32 bits
// with integers ((u + 0x7FFF + bit16) & 0xFFFF0000: no MXCSR dependence, exact RNE for finite
// normal v whose rounding does not overflow). For a normal fp32 v with 2^e <= |v| < 2^(e+1):
//   (R1) rb(v) is a multiple of 2^(e-7) and |v - rb(v)| <= 2^(e-8) (half a bf16 ulp).
//
// fp32 x (24 bits), 2^e <= |x| < 2^(e+1), accepted only if -102 <= e <= 119 (else: fallback;
//   the lower bound is the caller's min_exp_f32 >= -102, see the no-flush argument below):
//   hi = rb(x). x and hi are multiples of 2^(e-23), so r1 = x - hi is too, and |r1| <= 2^(e-8) by
//   (R1): r1 = j * 2^(e-23) with |j| <= 2^15, representable in fp32, so the fp32 subtraction is
//   exact (and its result, if nonzero, >= 2^(e-23) >= 2^-125 is normal: no DAZ/FTZ effect).
//   mid = rb(r1): if r1 has <= 8 significant bits mid = r1, else mid is a multiple of 2^(e1-7)
//   >= 2^(e-23) (e1 = exponent of r1); either way a multiple of 2^(e-23), so r2 = r1 - mid is a
//   multiple of 2^(e-23) with |r2| <= 2^(e1-8) <= 2^(e-16) by (R1): r2 = j' * 2^(e-23), |j'| <= 2^7,
//   i.e. <= 8 significant bits: lo = r2 is exactly a bf16, and r1 - mid is exact in fp32 as above.
//   Hence x = hi + mid + lo exactly; every nonzero piece is a multiple of 2^(e-23) >= 2^-125, a
//   normal bf16 (bf16 has fp32's exponent range). e <= 119 keeps rb(x) finite and every unscaled
//   block partial (16 terms, |e2m1| <= 6: < 2^127) finite before the scale (2^-9..448) applies,
//   so the kernel overflows only where a reordered fp32 sum of the scaled products could.
// fp16 x (11 bits): normal x (2^e <= |x|, e >= -14) is a multiple of 2^(e-10); subnormal x a
//   multiple of 2^-24 with |x| < 2^-14. hi = rb(x); lo = x - hi is a multiple of 2^(e-10) (resp.
//   2^-24) with |lo| <= 2^(e-8): |lo| = j * 2^(e-10), |j| <= 4 (subnormal: j * 2^-24, |j| <=
//   2^(e+16) <= 2 since e <= -15): <= 3 significant bits, exact in bf16, >= 2^-24 if nonzero. So
//   x = hi + lo exactly; the fp16 -> fp32 widening is done with integer ops (exact, no DAZ).
//   Inf/NaN fp16 are refused (fallback).
// Why no denormal effects in vdpbf16ps (Intel SDM: it treats denormal inputs as zero and flushes
// denormal outputs, ignoring MXCSR): every product piece*e2m1 is exact (8 x 2 significant bits)
// and a multiple of G/2, where G = 2^-125 (fp32 pieces) or 2^-24 (fp16 pieces) is a common grid
// of all pieces; every partial sum of such products, and its fp32 rounding, stays a multiple of
// G/2 >= 2^-126, so it is zero or normal: nothing is flushed, and vdpbf16ps computes the same
// fp32 sums as an IEEE fp32 dot product of the pieces would. Results then differ from the oracle
// only by the fp32 summation order (tolerance in tests/cpu/test_matmul_cpu.cpp).
// That argument is for the vdpbf16ps GEMV, whose products are piece * e2m1 (scale applied after
// the unscaled block sum). A kernel that multiplies pieces by scaled weights e2m1 * |s| (>= 2^-10
// in magnitude, multiples of 2^-10) has the grid G * 2^-10: it passes min_exp_f32 = -93, so fp32
// pieces are multiples of 2^(-93-23) and products of 2^-126 (gemv_nvfp4_amx.cpp); fp16 products
// are multiples of 2^-34.
// fp32 rows with a nonzero |x| < 2^min_exp_f32, |x| >= 2^120, Inf or NaN would break this; such
// calls return false and the dispatcher runs the fp32 Highway GEMV (same results contract).

// rb() on 16 fp32 bit patterns (see above).
NVFP4_SPLIT_TARGET inline __m512i round_bf16_bits(__m512i u) {
  const __m512i bit16 = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), bit16);
  return _mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)));
}
// Widened, exact fp32 bit patterns of 16 fp16 values (integer ops only: magnitude = sig *
// 2^(max(E,1) - 25) with sig = mantissa (+ 0x400 if E > 0); the int -> float conversion of sig
// (<= 11 bits) and the multiply by a normal power of two (>= 2^-24) are exact).
NVFP4_SPLIT_TARGET inline __m512i f16_to_f32_bits16(__m256i h16) {
  const __m512i h = _mm512_cvtepu16_epi32(h16);
  const __m512i e = _mm512_and_si512(_mm512_srli_epi32(h, 10), _mm512_set1_epi32(0x1F));
  const __m512i man = _mm512_and_si512(h, _mm512_set1_epi32(0x3FF));
  const __mmask16 normal = _mm512_test_epi32_mask(e, e);
  const __m512i sig = _mm512_mask_or_epi32(man, normal, man, _mm512_set1_epi32(0x400));
  const __m512i eff = _mm512_max_epi32(e, _mm512_set1_epi32(1));
  const __m512i pow2 = _mm512_slli_epi32(_mm512_add_epi32(eff, _mm512_set1_epi32(127 - 25)), 23);
  const __m512 mag = _mm512_mul_ps(_mm512_cvtepi32_ps(sig), _mm512_castsi512_ps(pow2));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(h, _mm512_set1_epi32(0x8000)), 16);
  return _mm512_or_si512(_mm512_castps_si512(mag), sign);
}

}  // namespace

// bf16: a copy. Returns false (dst undefined) if the row cannot be split exactly (see above).
NVFP4_SPLIT_TARGET bool split_row_bf16(const MatmulArgs& a, std::int64_t mi, std::uint16_t* dst, int min_exp_f32) {
  const std::int64_t k = a.k, kx = a.kx;
  if (a.dtype == DType::kBF16) {
    std::memcpy(dst, static_cast<const std::uint16_t*>(a.x) + mi * a.x_stride, static_cast<std::size_t>(kx) * 2);
    return true;
  }
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  __mmask16 bad = 0;
  if (a.dtype == DType::kF16) {
    const std::uint16_t* src = static_cast<const std::uint16_t*>(a.x) + mi * a.x_stride;
    for (std::int64_t kk = 0; kk < kx; kk += 16) {
      const __mmask16 in = kx - kk >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (kx - kk)) - 1);
      const __m256i h = _mm256_maskz_loadu_epi16(in, src + kk);
      // Inf/NaN: exponent field all ones.
      const __m256i ex = _mm256_and_si256(h, _mm256_set1_epi16(0x7C00));
      bad |= _mm256_mask_cmpeq_epi16_mask(in, ex, _mm256_set1_epi16(0x7C00));
      const __m512i u = f16_to_f32_bits16(h);
      const __m512i hi = round_bf16_bits(u);
      const __m512i lo = _mm512_castps_si512(_mm512_sub_ps(_mm512_castsi512_ps(u), _mm512_castsi512_ps(hi)));
      _mm256_mask_storeu_epi16(dst + kk, in, _mm512_cvtepi32_epi16(_mm512_srli_epi32(hi, 16)));
      _mm256_mask_storeu_epi16(dst + k + kk, in, _mm512_cvtepi32_epi16(_mm512_srli_epi32(lo, 16)));
    }
    return bad == 0;
  }
  const float* src = static_cast<const float*>(a.x) + mi * a.x_stride;
  for (std::int64_t kk = 0; kk < kx; kk += 16) {
    const __mmask16 in = kx - kk >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (kx - kk)) - 1);
    const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(in, src + kk));
    // Accept 0 or biased exponent (127 + min_exp_f32)..246 (2^min_exp_f32 <= |x| < 2^120).
    const __m512i mag = _mm512_and_si512(u, abs_mask);
    const __m512i ex = _mm512_srli_epi32(mag, 23);
    const __mmask16 nz = _mm512_test_epi32_mask(mag, mag);
    bad |= _mm512_mask_cmplt_epi32_mask(nz, ex, _mm512_set1_epi32(127 + min_exp_f32)) |
           _mm512_mask_cmpgt_epi32_mask(nz, ex, _mm512_set1_epi32(246));
    const __m512i hi = round_bf16_bits(u);
    const __m512 r1 = _mm512_sub_ps(_mm512_castsi512_ps(u), _mm512_castsi512_ps(hi));
    const __m512i mid = round_bf16_bits(_mm512_castps_si512(r1));
    const __m512i lo = _mm512_castps_si512(_mm512_sub_ps(r1, _mm512_castsi512_ps(mid)));
    _mm256_mask_storeu_epi16(dst + kk, in, _mm512_cvtepi32_epi16(_mm512_srli_epi32(hi, 16)));
    _mm256_mask_storeu_epi16(dst + k + kk, in, _mm512_cvtepi32_epi16(_mm512_srli_epi32(mid, 16)));
    _mm256_mask_storeu_epi16(dst + 2 * k + kk, in, _mm512_cvtepi32_epi16(_mm512_srli_epi32(lo, 16)));
  }
  return bad == 0;
}

#else
bool split_row_bf16(const MatmulArgs&, std::int64_t, std::uint16_t*, int) { return false; }
#endif

// Per virtual row: K segments summed in a fixed order; then the pieces of one activation row,
// smallest first (lo + mid, then + hi: the small pieces' sum rounds once, relative to a value
// ~2^-8 of hi's); tensor scale once; store. Every step is deterministic.
void gemv_store_pieces(const MatmulArgs& a, int P, std::int64_t nseg, const float* sums) {
  const std::int64_t m = a.m, n = a.n, mv = m * P;
  for (std::int64_t mi = 0; mi < m; ++mi)
    for (std::int64_t ni = 0; ni < n; ++ni) {
      float v = 0.0f;
      for (int j = P - 1; j >= 0; --j) {
        const std::int64_t r = mi * P + j;
        float s = sums[r * n + ni];
        for (std::int64_t sg = 1; sg < nseg; ++sg) s += sums[(sg * mv + r) * n + ni];
        v = j == P - 1 ? s : v + s;
      }
      store_from_f32(a.y, a.dtype, mi * a.y_stride + ni, v * a.tensor_scale);
    }
}

}  // namespace nvfp4::cpu
