// kernels/cpu/gemm_nvfp4_hwy.cpp -- W4A16 NVFP4 GEMM for large M (prefill), every Highway target,
// fp32 arithmetic (used for fp32/fp16 activations, and for bf16 where no bf16 dot product unit
// exists).
//
// Blocking: a task owns MC rows of x and NC columns of y. For each KC slice of K the task decodes
// its NC weight rows exactly to fp32 (e2m1 * |scale|, exact) into a panel Bp[NC/NR][KC][NR] that
// stays in L2, then runs an MR x NR register-blocked FMA microkernel (NR = 2 vectors) over all
// its rows, accumulating into an fp32 C block [MC][NC]. The tensor scale multiplies C once at the
// end. Each output is one sequential fp32 FMA chain over k ascending: only FMA rounding differs
// from the oracle. Weights are decoded once per MC rows of x (once in total for M <= MC).
// On AVX2, up to gemm_dot_max_m rows run a dot-form variant instead (GemmDotAvx2 below): the panel
// decoded along k as the AVX2 GEMV decodes, and vector partial sums per output. It sums in another
// order, so at those M an AVX2 CPU's results differ from an AVX-512 CPU's in the last bits.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/hwy_register_block.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tuning_cpu.h"

#define HWY_WANT_AVX3_DL 1
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gemm_nvfp4_hwy.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "kernels/cpu/decode_avx2_bf16-inl.h"

#if HWY_ARCH_X86 && defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside avx512fintrin.h (intrinsics built on _mm512_undefined_*()) for the AVX-512
// panel decode: a known false positive, not an uninitialised value of this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

HWY_BEFORE_NAMESPACE();
namespace nvfp4::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// 32 zmm registers hold 8x2 accumulators. AVX2 gets 6x2 (12 accumulators, 2 panel vectors, 1
// broadcast: 15 of 16 ymm; 6 rows against 4: prefill -12%, M = 256 -20%, docs/perf-cpu.md 45),
// other 16-register ISAs 4x2.
constexpr int kMR = HWY_MAX_BYTES >= 64 ? 8 : (HWY_TARGET == HWY_AVX2 ? 6 : 4);
constexpr int kMaxNR = 2 * HWY_MAX_BYTES / 4;  // NR = 2 vectors of fp32

// The MR x 2 register block is named variables (hwy_register_block.h), c0_i / c1_i for row
// i < MR; rows past MR are never touched (if constexpr).
template <int MR>
HWY_INLINE void Ukernel(const float* A, std::int64_t lda, const float* B, std::int64_t L,
                        std::int64_t kc, float* C, std::int64_t ldc) {
  static_assert(MR >= 1 && MR <= 8, "GEMM register block: at most 8 rows");
  const DF df;
#define NVFP4_C_LOAD(i)                                  \
  VF c0_##i = hn::Zero(df), c1_##i = hn::Zero(df);       \
  if constexpr (i < MR) {                                \
    c0_##i = hn::LoadU(df, C + i * ldc);                 \
    c1_##i = hn::LoadU(df, C + i * ldc + L);             \
  }
  NVFP4_X8(NVFP4_C_LOAD)
#undef NVFP4_C_LOAD
  for (std::int64_t kk = 0; kk < kc; ++kk) {
    const VF b0 = hn::Load(df, B + kk * 2 * L);
    const VF b1 = hn::Load(df, B + kk * 2 * L + L);
#define NVFP4_C_FMA(i)                                   \
  if constexpr (i < MR) {                                \
    const VF av = hn::Set(df, A[i * lda + kk]);          \
    c0_##i = hn::MulAdd(av, b0, c0_##i);                 \
    c1_##i = hn::MulAdd(av, b1, c1_##i);                 \
  }
    NVFP4_X8(NVFP4_C_FMA)
#undef NVFP4_C_FMA
  }
#define NVFP4_C_STORE(i)                                 \
  if constexpr (i < MR) {                                \
    hn::StoreU(c0_##i, df, C + i * ldc);                 \
    hn::StoreU(c1_##i, df, C + i * ldc + L);             \
  }
  NVFP4_X8(NVFP4_C_STORE)
#undef NVFP4_C_STORE
}

#if HWY_ARCH_X86 && (HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2)
// The packed bytes of one 16-k block of 8 weight rows, transposed as bytes (12 unpacks): q[p]
// holds packed byte 2p of rows 0..7, then packed byte 2p + 1 of rows 0..7.
HWY_INLINE void TransposeBlockBytes8(const std::uint8_t* const* prow, std::int64_t b, __m128i (&q)[4]) {
  __m128i r[8];
  for (int c = 0; c < 8; ++c) r[c] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(prow[c] + b * (kBlockSize / 2)));
  const __m128i a0 = _mm_unpacklo_epi8(r[0], r[1]), a1 = _mm_unpacklo_epi8(r[2], r[3]);
  const __m128i a2 = _mm_unpacklo_epi8(r[4], r[5]), a3 = _mm_unpacklo_epi8(r[6], r[7]);
  const __m128i b0 = _mm_unpacklo_epi16(a0, a1), b1 = _mm_unpackhi_epi16(a0, a1);  // rows 0-3
  const __m128i b2 = _mm_unpacklo_epi16(a2, a3), b3 = _mm_unpackhi_epi16(a2, a3);  // rows 4-7
  q[0] = _mm_unpacklo_epi32(b0, b2);
  q[1] = _mm_unpackhi_epi32(b0, b2);
  q[2] = _mm_unpacklo_epi32(b1, b3);
  q[3] = _mm_unpackhi_epi32(b1, b3);
}
#endif

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// The same for 16 rows: t[j] holds packed byte j (elements 2j, 2j + 1) of rows 0..15.
HWY_INLINE void TransposeBlockBytes16(const std::uint8_t* const* prow, std::int64_t b, __m128i (&t)[8]) {
  __m128i lo[4], hi[4];
  TransposeBlockBytes8(prow, b, lo);
  TransposeBlockBytes8(prow + 8, b, hi);
  for (int p = 0; p < 4; ++p) {
    t[2 * p] = _mm_unpacklo_epi64(lo[p], hi[p]);
    t[2 * p + 1] = _mm_unpackhi_epi64(lo[p], hi[p]);
  }
}

// AVX-512 panel decode (L = 16, NR = 32): 16 weight rows x one 16-k block, in the panel's k-major
// order directly (dst[i * nr + c] holds element 16 b + i of row c): each packed byte j of the 16
// rows (TransposeBlockBytes16) is widened to 16 lanes; vpermps reads index bits 3:0, so it looks
// up element 2j's code as is and element 2j + 1's after a shift by 4; times the rows' |scale|: the
// scalar decode's lut[code] * |scale|, the same bits. Per block: 3 port-5 uops per packed byte and
// 32 unpacks, against 16 x (vpmovzxbd, vpermps) and a 16 x 16 dword transpose (48 shuffles) in the
// form before it (decode along k, then transpose; docs/perf-cpu.md 29, 34).
HWY_INLINE void DecodeBlock16Rows(const std::uint8_t* const* prow, const float* sc, std::int64_t b,
                                  const float* lut, float* dst, std::int64_t nr) {
  const __m512 tbl = _mm512_loadu_ps(lut);
  const __m512 scale = _mm512_loadu_ps(sc);
  __m128i t[8];
  TransposeBlockBytes16(prow, b, t);
  for (int j = 0; j < 8; ++j) {
    const __m512i v = _mm512_cvtepu8_epi32(t[j]);
    _mm512_storeu_ps(dst + (2 * j) * nr, _mm512_mul_ps(_mm512_permutexvar_ps(v, tbl), scale));
    _mm512_storeu_ps(dst + (2 * j + 1) * nr,
                     _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tbl), scale));
  }
}
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
// AVX2 (L = 8, NR = 16): 8 weight rows x one 16-k block, decoded in the panel's k-major order
// directly: the rows' 8 packed bytes are transposed as bytes (12 unpacks), so each 16-byte vector
// holds 2 packed k pairs of all 8 rows; their codes go through a 16-byte table (pshufb) to
// 2 * e2m1 as int8, widened (vpmovsxbd), converted (exact) and multiplied by the rows' |scale| / 2
// (exact: |scale| >= 2^-9), one vector of 8 rows per k: lut[code] * |scale|, the same values as
// the scalar loop below (code 8, -0, gives +0; every output sum starts at +0, so no output bit
// changes). Why: the previous form (vpermps per 8 weights and two 8 x 8 float transposes with
// vperm2f128) cost 4 and 3 cycles per instruction on Zen 1 (docs/perf-cpu.md 31, 33); the
// scalar decode before that took 43% of this target's GEMM at 32 x 9728 x 2560.
HWY_INLINE void DecodeBlock8Rows(const std::uint8_t* const* prow, const float* sc, std::int64_t b, float* dst,
                                 std::int64_t nr) {
  const __m128i tbl = _mm_load_si128(reinterpret_cast<const __m128i*>(kTwiceE2M1));
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m256 half_scale = _mm256_mul_ps(_mm256_loadu_ps(sc), _mm256_set1_ps(0.5f));
  __m128i q[4];
  TransposeBlockBytes8(prow, b, q);
  auto put = [&](int kk, __m128i v8) {  // 8 int8 (2 * e2m1 of rows 0..7 at k = kk) -> the panel
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v8));
    _mm256_storeu_ps(dst + kk * nr, _mm256_mul_ps(v, half_scale));
  };
  for (int i = 0; i < 4; ++i) {
    const __m128i lo = _mm_shuffle_epi8(tbl, _mm_and_si128(q[i], low4));                     // k = 4i, 4i + 2
    const __m128i hi = _mm_shuffle_epi8(tbl, _mm_and_si128(_mm_srli_epi16(q[i], 4), low4));  // k = 4i + 1, 4i + 3
    put(4 * i, lo);
    put(4 * i + 1, hi);
    put(4 * i + 2, _mm_srli_si128(lo, 8));
    put(4 * i + 3, _mm_srli_si128(hi, 8));
  }
}
#endif

#undef NVFP4_GEMM_DOT
#if HWY_TARGET == HWY_AVX2
#define NVFP4_GEMM_DOT 1
// AVX2 up to gemm_dot_max_m rows (the dispatch sends the GEMM 9 rows and more): a dot-form GEMM.
// The panel holds each weight row's KC slice decoded along k as the AVX2 GEMV decodes it
// (decode_avx2_bf16-inl.h: no byte transpose, no int -> float conversion, no scale gather), x
// is permuted into the same order once, and a 3 x 4 tile of
// (x row, weight row) pairs keeps 12 vector partial sums: per 8 k, 3 x loads, 4 panel loads and
// 12 FMAs (the outer-product block's 12 FMAs take 2 panel loads and 6 broadcasts). The partial
// sums live in memory between KC slices and are summed across lanes once at the end, in a fixed
// order. Measured on the AVX2-only EPYC dev VM (2 threads, hot, one process, 2026-12-07,
// docs/perf-cpu.md 48) against the outer-product GEMM at 9728 x 2560: M = 1 (the decode alone)
// 3.16 against 5.37 ms, M = 9 -21%, M = 16 -11%, M = 32 equal, M = 64 +7%.

// Row slice [k0, k0 + kc) of weight row `row` into dst[0, kc), each block in Avx2Bf16Order:
// e2m1 * |scale|, the oracle's exact product.
HWY_INLINE void DecodeRowSliceAvx2(const MatmulArgs& a, std::int64_t row, std::int64_t k0, std::int64_t kc,
                                   const float* stab, float* dst) {
  const Avx2Bf16Decoder dec;
  const std::uint8_t* p = a.packed + row * (a.k / 2) + k0 / 2;
  const std::uint8_t* sp = a.scales + row * (a.k / kBlockSize) + k0 / kBlockSize;
  const std::int64_t nb = kc / kBlockSize;
  for (std::int64_t b = 0; b < nb; b += 2) {
    // An odd last block loads its 8 bytes only (the row may end there).
    const __m128i raw = b + 1 < nb ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8 * b))
                                   : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * b));
    __m256i words[2];
    dec.Piece(raw, words[0], words[1]);
    for (std::int64_t h = 0; h < 2 && b + h < nb; ++h) {
      const __m256 s = _mm256_set1_ps(stab[sp[b + h]]);
      _mm256_store_ps(dst + 16 * (b + h), _mm256_mul_ps(dec.First(words[h]), s));
      _mm256_store_ps(dst + 16 * (b + h) + 8, _mm256_mul_ps(dec.Second(words[h]), s));
    }
  }
}

// MR rows of x (stride ldx) against NR panel rows (stride kc) over kc values, adding into the
// vector partial sums cv[i * cv_row + j * 8 ..] of each (x row i, weight row j).
template <int MR, int NR>
HWY_INLINE void DotTile(const float* x, std::int64_t ldx, const float* w, std::int64_t kc, float* cv,
                        std::int64_t cv_row) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_load_ps(cv + i * cv_row + j * 8);
  for (std::int64_t kk = 0; kk < kc; kk += 8) {
    __m256 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_load_ps(x + i * ldx + kk);
    for (int j = 0; j < NR; ++j) {
      const __m256 wv = _mm256_load_ps(w + j * kc + kk);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) _mm256_store_ps(cv + i * cv_row + j * 8, acc[i][j]);
}

template <int MR, int NR>
HWY_INLINE void DotRows(int r, const float* x, std::int64_t ldx, const float* w, std::int64_t kc, float* cv,
                        std::int64_t cv_row) {
  if (r == MR) return DotTile<MR, NR>(x, ldx, w, kc, cv, cv_row);
  if constexpr (MR > 1) DotRows<MR - 1, NR>(r, x, ldx, w, kc, cv, cv_row);
}

void GemmDotAvx2(const MatmulArgs& a) {
  constexpr int kDotMR = 3, kDotNR = 4;  // 12 accumulators + 3 x + 1 panel vector: 16 ymm
  const std::int64_t m = a.m, n = a.n, k = a.k;
  const CpuTuning& tune = cpu_tuning();
  const std::int64_t threads = num_threads();
  const std::int64_t mc = tune.gemm_mc;
  const std::int64_t kcmax = round_up(std::max<std::int64_t>(2 * kBlockSize, tune.gemm_kc), 2 * kBlockSize);
  const std::int64_t mblocks = (m + mc - 1) / mc;
  const std::int64_t nc = narrow_panel_cols(round_up(std::max<std::int64_t>(kDotNR, tune.gemm_nc), kDotNR),
                                            kDotNR, mblocks, n, threads);
  const std::int64_t nblocks = (n + nc - 1) / nc;

  // x widened to fp32 and permuted into Avx2Bf16Order within each block, once.
  auto xp = hwy::AllocateAligned<float>(static_cast<std::size_t>(m * k));
  parallel_for(m, [&](std::int64_t mi) {
    std::vector<float> row(static_cast<std::size_t>(k));
    load_x_row_f32(a, mi, row.data());
    PermuteToAvx2Bf16Order(row.data(), k, xp.get() + mi * k);
  });

  const float* stab = e4m3_abs_table();
  const bool prefetch = tune.gemm_prefetch != 0;
  parallel_for(mblocks * nblocks, [&](std::int64_t t) {
    const std::int64_t nb = t % nblocks, mb = t / nblocks;
    const std::int64_t m0 = mb * mc, rows = std::min(mc, m - m0);
    const std::int64_t n0 = nb * nc, cols = std::min(nc, n - n0);
    const std::int64_t cols_r = round_up(cols, kDotNR);  // panel rows past N are zero
    auto cv = hwy::AllocateAligned<float>(static_cast<std::size_t>(rows * cols_r * 8));
    auto wp = hwy::AllocateAligned<float>(static_cast<std::size_t>(cols_r * kcmax));
    std::fill(cv.get(), cv.get() + rows * cols_r * 8, 0.0f);
    for (std::int64_t k0 = 0; k0 < k; k0 += kcmax) {
      const std::int64_t kc = std::min(kcmax, k - k0);
      for (std::int64_t c = 0; c < cols_r; ++c) {
        // Each row's slice is kc / 2 bytes, the rows K / 2 bytes apart: without this prefetch
        // the decode waited on every row's first line (54% of its samples on that load, perf
        // cpu-clock, 1 x 9728 x 2560 hot, docs/perf-cpu.md 48).
        if (prefetch && c + kDotNR < cols) prefetch_row_slice<3>(a, n0 + c + kDotNR, k0, k0 + kc);
        if (c < cols) DecodeRowSliceAvx2(a, n0 + c, k0, kc, stab, wp.get() + c * kc);
        else std::fill(wp.get() + c * kc, wp.get() + (c + 1) * kc, 0.0f);
      }
      if (prefetch) prefetch_next_slice_l2(a, n0, cols, k0 + kc, kcmax);
      for (std::int64_t j = 0; j < cols_r; j += kDotNR)
        for (std::int64_t i = 0; i < rows; i += kDotMR)
          DotRows<kDotMR, kDotNR>(static_cast<int>(std::min<std::int64_t>(kDotMR, rows - i)),
                                  xp.get() + (m0 + i) * k + k0, k, wp.get() + j * kc, kc,
                                  cv.get() + (i * cols_r + j) * 8, cols_r * 8);
    }
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t c = 0; c < cols; ++c) {
        const float* v = cv.get() + (i * cols_r + c) * 8;
        const float sum = ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
        store_from_f32(a.y, a.dtype, (m0 + i) * a.y_stride + n0 + c, sum * a.tensor_scale);
      }
  });
}
#else
#define NVFP4_GEMM_DOT 0
#endif

template <int MR>
void UkernelRows(int rows, const float* A, std::int64_t lda, const float* B, std::int64_t L,
                 std::int64_t kc, float* C, std::int64_t ldc) {
  if (rows == MR) return Ukernel<MR>(A, lda, B, L, kc, C, ldc);
  if constexpr (MR > 1) return UkernelRows<MR - 1>(rows, A, lda, B, L, kc, C, ldc);
}

void GemmImpl(const MatmulArgs& a) {
#if NVFP4_GEMM_DOT
  if (a.m <= cpu_tuning().gemm_dot_max_m) return GemmDotAvx2(a);
#endif
  const DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t NR = 2 * L, m = a.m, n = a.n, k = a.k;
  const CpuTuning& tune = cpu_tuning();
  const std::int64_t threads = num_threads();
  const std::int64_t mc = tune.gemm_mc, kcmax = tune.gemm_kc;
  const std::int64_t mblocks = (m + mc - 1) / mc;
  const std::int64_t nc = narrow_panel_cols(round_up(tune.gemm_nc, NR), NR, mblocks, n, threads);
  const std::int64_t nblocks = (n + nc - 1) / nc;

  // x widened to fp32 once, zero-padded to K.
  auto xf = hwy::AllocateAligned<float>(static_cast<std::size_t>(m * k));
  parallel_for(m, [&](std::int64_t mi) { load_x_row_f32(a, mi, xf.get() + mi * k); });

  const float* stab = e4m3_abs_table();
  const bool prefetch = tune.gemm_prefetch != 0;  // a local: the panel stores may alias the table
  float lut[16];
  for (int c = 0; c < 16; ++c) lut[c] = e2m1_to_float(static_cast<std::uint8_t>(c));
  parallel_for(mblocks * nblocks, [&](std::int64_t t) {
    const std::int64_t nb = t % nblocks, mb = t / nblocks;
    const std::int64_t m0 = mb * mc, rows = std::min(mc, m - m0);
    const std::int64_t n0 = nb * nc, cols = std::min(nc, n - n0);
    auto cacc = hwy::AllocateAligned<float>(static_cast<std::size_t>(rows * nc));
    auto bp = hwy::AllocateAligned<float>(static_cast<std::size_t>(nc * kcmax));
    std::fill(cacc.get(), cacc.get() + rows * nc, 0.0f);
    for (std::int64_t k0 = 0; k0 < k; k0 += kcmax) {
      const std::int64_t kc = std::min(kcmax, k - k0);
      // Decode NC weight rows x KC into Bp[nc/NR][kc][NR] (columns past N are zero), k-major
      // within a column group so every store is contiguous: the former column-major order wrote
      // one float per 128-byte line (stride NR) and took 1/3 of the fp32 GEMM's time (perf, Zen 4,
      // M=512 N=256 K=14336, 1 thread). lut[code] * |scale| is the oracle's exact product.
      for (std::int64_t cg = 0; cg < nc; cg += NR) {
        float* panel = bp.get() + cg * kc;
        const std::uint8_t* prow[kMaxNR];
        const std::uint8_t* srow[kMaxNR];
        for (std::int64_t c = 0; c < NR; ++c) {
          const std::int64_t col = cg + c < cols ? n0 + cg + c : n0;  // past N: any row, scale 0
          prow[c] = a.packed + col * (k / 2) + k0 / 2;
          srow[c] = cg + c < cols ? a.scales + col * (k / kBlockSize) + k0 / kBlockSize : nullptr;
        }
        for (std::int64_t b = 0; b < kc / kBlockSize; ++b) {
          // The next group's rows into L1, spread over this group's blocks (gemm_prefetch).
          if (prefetch)
            for (std::int64_t c = cg + NR + b; c < std::min(cg + 2 * NR, cols); c += kc / kBlockSize)
              prefetch_row_slice<3>(a, n0 + c, k0, k0 + kc);
          float sc[kMaxNR];
          for (std::int64_t c = 0; c < NR; ++c) sc[c] = srow[c] ? stab[srow[c][b]] : 0.0f;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
          if (NR == 32) {  // two halves of 16 rows; the same bits as the scalar loop below
            DecodeBlock16Rows(prow, sc, b, lut, panel + b * kBlockSize * NR, NR);
            DecodeBlock16Rows(prow + 16, sc + 16, b, lut, panel + b * kBlockSize * NR + 16, NR);
            continue;
          }
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
          if (NR == 16) {  // two halves of 8 rows
            DecodeBlock8Rows(prow, sc, b, panel + b * kBlockSize * NR, NR);
            DecodeBlock8Rows(prow + 8, sc + 8, b, panel + b * kBlockSize * NR + 8, NR);
            continue;
          }
#endif
          for (int j = 0; j < kBlockSize / 2; ++j) {
            float* d0 = panel + (b * kBlockSize + 2 * j) * NR;
            float* d1 = d0 + NR;
            for (std::int64_t c = 0; c < NR; ++c) {
              const std::uint8_t byte = prow[c][b * 8 + j];
              d0[c] = lut[byte & 15] * sc[c];
              d1[c] = lut[byte >> 4] * sc[c];
            }
          }
        }
      }
      if (prefetch) prefetch_next_slice_l2(a, n0, cols, k0 + kc, kcmax);
      for (std::int64_t i = 0; i < rows; i += kMR) {
        const int r = static_cast<int>(std::min<std::int64_t>(kMR, rows - i));
        for (std::int64_t sub = 0; sub < nc / NR; ++sub)
          UkernelRows<kMR>(r, xf.get() + (m0 + i) * k + k0, k, bp.get() + sub * kc * NR, L, kc,
                           cacc.get() + i * nc + sub * NR, nc);
      }
    }
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t c = 0; c < cols; ++c)
        store_from_f32(a.y, a.dtype, (m0 + i) * a.y_stride + n0 + c, cacc[i * nc + c] * a.tensor_scale);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace nvfp4::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nvfp4::cpu {
HWY_EXPORT(GemmImpl);
void gemm_nvfp4_hwy(const MatmulArgs& a) { HWY_DYNAMIC_DISPATCH(GemmImpl)(a); }
}  // namespace nvfp4::cpu
#endif
