// kernels/cpu/gemm_nvfp4_bf16.cpp -- driver of the bf16 GEMM (bf16 activations, large M).
//
// Every e2m1 * |scale| product has <= 6 significant bits and lies in [2^-10, 2688], so it is
// exact in bf16 (8 significant bits, fp32 range): the decoded panel loses nothing, bf16 x is
// used as is, and the bf16 x bf16 products are exact in fp32. Only the fp32 accumulation order
// (and the bf16 units' flush of denormal sums, see the microkernels) differs from the oracle.
//
// fp16 / fp32 activations (AMX only): each row is split exactly into 2 / 3 bf16 pieces
// (split_row_bf16, the AMX GEMV's 2^-93 bound for fp32: the pieces meet SCALED weights >= 2^-10, so
// no product is flushed) that run as consecutive rows and are summed per output. 2-3x the
// multiply-adds on TDPBF16PS beat the fp32 GEMM it replaces there (docs/perf-cpu.md 21). The
// padded copy of x then holds 2P bytes per activation (fp16 2x, fp32 1.5x the input's bytes).
//
// Blocking as the fp32 GEMM (gemm_nvfp4_hwy.cpp): a task owns MC rows x NC columns; per KC slice
// it decodes its NC weight rows into a pair-layout panel Bp[KC/2][NC][2] -- the layout both
// vdpbf16ps (a u32 pair per lane) and AMX TDPBF16PS (B tile rows = K pairs) read -- and calls
// the microkernel on rows padded to its row block (32 for AMX, 8 for vdpbf16ps). x is copied once
// into a zero-padded [Mpad][Kpad32] buffer so no microkernel ever needs an edge case.
//
// Panel decode (AVX-512F, every CPU that runs either microkernel): one weight row's 16 packed
// bytes (32 k = 2 blocks) widen to 16 u32 lanes; vpermps on the low / high nibble gives the
// fp32 E2M1 values, times the block scale (exact), and the top halves of the two fp32 words form
// the bf16 pair (exact: <= 6 significant bits). 16 rows x 16 pairs are then transposed in
// registers (transpose_x86.h) into Bp[pair][column]. perf on the dev machine
// (Zen 4, M=512 N=512 K=14336, 1 thread) put the former scalar decode at 30% of the run, more
// than the microkernel (27%).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/transpose_x86.h"
#include "kernels/cpu/tuning_cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NVFP4_BF16_PANEL_X86 1
// GCC 12 warns inside avx512fintrin.h (intrinsics built on _mm512_undefined_*()): a known false
// positive, not an uninitialised value of this file.
#if !defined(__clang__)  // a GCC-only warning; clang warns about the unknown group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace nvfp4::cpu {
namespace {

// Scalar panel decode (reference layout; CPUs without AVX-512F, never with either microkernel
// in practice). Columns c in [c_begin, nc) of the panel, pairs [0, kc/2).
void decode_panel_scalar(const MatmulArgs& a, std::int64_t n0, std::int64_t cols, std::int64_t nc,
                         std::int64_t k0, std::int64_t kc, std::int64_t c_begin, std::uint32_t* pairs) {
  const std::int64_t k = a.k;
  const float* stab = e4m3_abs_table();
  for (std::int64_t c = c_begin; c < nc; ++c) {
    if (c >= cols) {
      for (std::int64_t p = 0; p < kc / 2; ++p) pairs[p * nc + c] = 0;
      continue;
    }
    const std::uint8_t* prow = a.packed + (n0 + c) * (k / 2);
    const std::uint8_t* srow = a.scales + (n0 + c) * (k / kBlockSize);
    for (std::int64_t p = 0; p < kc / 2; ++p) {
      const std::int64_t kk = k0 + 2 * p;
      std::uint32_t v = 0;
      if (kk < k) {  // K is a multiple of 16, so a pair never straddles k
        const std::uint8_t byte = prow[kk / 2];
        const float s = stab[srow[kk / kBlockSize]];
        const std::uint32_t lo = f32_bits(e2m1_to_float(e2m1_low(byte)) * s) >> 16;
        const std::uint32_t hi = f32_bits(e2m1_to_float(e2m1_high(byte)) * s) >> 16;
        v = lo | (hi << 16);
      }
      pairs[p * nc + c] = v;
    }
  }
}

#if defined(NVFP4_BF16_PANEL_X86)
bool avx512f_supported() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return ok;
}

// Panel decode on AVX-512F: full groups of 16 columns; the caller finishes the rest scalar.
// Returns the first column not decoded.
__attribute__((target("avx512f"))) std::int64_t decode_panel_avx512(const MatmulArgs& a, std::int64_t n0,
                                                                     std::int64_t cols, std::int64_t nc,
                                                                     std::int64_t k0, std::int64_t kc,
                                                                     std::uint32_t* pairs) {
  const std::int64_t k = a.k;
  const float* stab = e4m3_abs_table();
  const __m512 tbl = _mm512_setr_ps(0.f, .5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f,  //
                                    -0.f, -.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f);
  const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const std::int64_t cfull = cols / 16 * 16;
  const std::int64_t steps = kc / 32, kend = std::min(k0 + kc, k);  // 16-pair steps per group
  const bool prefetch = cpu_tuning().gemm_prefetch != 0;
  for (std::int64_t c = 0; c < cfull; c += 16) {
    for (std::int64_t p0 = 0; p0 < kc / 2; p0 += 16) {
      const std::int64_t kk = k0 + 2 * p0;  // first k of these 16 pairs (32 k = 2 blocks)
      // The next group's 16 rows into L1, spread over this group's steps.
      if (prefetch)
        for (std::int64_t i = p0 / 16; i < 16 && c + 16 + i < cols; i += steps)
          prefetch_row_slice<3>(a, n0 + c + 16 + i, k0, kend);
      __m512i r[16];
      for (int i = 0; i < 16; ++i) {
        const std::uint8_t* prow = a.packed + (n0 + c + i) * (k / 2);
        const std::uint8_t* srow = a.scales + (n0 + c + i) * (k / kBlockSize);
        alignas(16) std::uint8_t buf[16] = {};
        float s0 = 0.0f, s1 = 0.0f;
        __m128i bytes;
        if (kk + 32 <= k) {
          bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(prow + kk / 2));
          s0 = stab[srow[kk / kBlockSize]];
          s1 = stab[srow[kk / kBlockSize + 1]];
        } else {
          if (kk + 16 <= k) {  // K % 32 == 16: one block left, the second half stays zero
            std::memcpy(buf, prow + kk / 2, 8);
            s0 = stab[srow[kk / kBlockSize]];
          }
          bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(buf));
        }
        const __m512i v = _mm512_cvtepu8_epi32(bytes);
        const __m512 sc = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(s0), _mm512_set1_ps(s1));
        const __m512 lo = _mm512_mul_ps(_mm512_permutexvar_ps(v, tbl), sc);
        const __m512 hi = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tbl), sc);
        // (lo >> 16) | (hi & 0xFFFF0000): ternary-logic A ? B : C with A = mask, B = hi, C = lo>>16.
        r[i] = _mm512_ternarylogic_epi32(hi_mask, _mm512_castps_si512(hi),
                                         _mm512_srli_epi32(_mm512_castps_si512(lo), 16), 0xCA);
      }
      // r[i] lane j (column c+i, pair p0+j) -> out[j] lane i: pair p0+j of 16 columns.
      __m512i out[16];
      transpose16x16_epi32(r, out);
      for (int j = 0; j < 16; ++j) _mm512_storeu_si512(pairs + (p0 + j) * nc + c, out[j]);
    }
  }
  return cfull;
}
#endif

}  // namespace

bool bf16_kernel_supported(Bf16Kernel kind) {
  return kind == Bf16Kernel::kAmx ? amx_supported() : avx512bf16_supported();
}

bool gemm_nvfp4_bf16(const MatmulArgs& a, Bf16Kernel kind) {
  // fp16 / fp32 rows (AMX only): P exact bf16 pieces per row, run as P consecutive virtual rows
  // and summed per output (kernels_cpu.h). m counts virtual rows from here on.
  const int P = a.dtype == DType::kBF16 ? 1 : gemv_avx512bf16_pieces(a.dtype);
  if (P > 1 && kind != Bf16Kernel::kAmx) return false;
  const std::int64_t m = a.m * P, n = a.n, k = a.k;
  // Rows are padded to the microkernel's row block: 32 for AMX (2 x 16-row tiles), 8 for the
  // vdpbf16ps kernel (MR = 8). Padding the latter to 32 as well made M = 9..31 cost as much as
  // M = 32 (docs/perf-cpu.md 9).
  const std::int64_t mq = kind == Bf16Kernel::kAmx ? 32 : 8;
  const std::int64_t kpad = round_up(k, 32), mpad = round_up(m, mq);
  const CpuTuning& tune = cpu_tuning();
  const std::int64_t threads = num_threads();
  // A task's rows hold whole activation rows (all P pieces): MC a multiple of 32 and of P.
  const std::int64_t mc = round_up(tune.gemm_mc, P == 3 ? 96 : 32), kcmax = round_up(tune.gemm_kc, 32);
  const std::int64_t mblocks = (m + mc - 1) / mc;
  const std::int64_t nc = narrow_panel_cols(round_up(tune.gemm_nc, 32), 32, mblocks, n, threads);
  const std::int64_t nblocks = (n + nc - 1) / nc;
  auto ukernel = kind == Bf16Kernel::kAmx ? gemm_ukernel_amx : gemm_ukernel_avx512bf16;

  auto xa = alloc64<std::uint16_t>(mpad * kpad);
  std::atomic<bool> split_ok{true};
  parallel_for((mpad + P - 1) / P, [&](std::int64_t mi) {
    // One buffer per thread, reused: a fresh one per row (P * K * 2 bytes, 86 KiB for fp32 at
    // K = 14336) would be an allocation, and above glibc's mmap threshold page faults, per row.
    thread_local std::vector<std::uint16_t> pieces;
    if (P > 1 && mi < a.m) {
      pieces.assign(static_cast<std::size_t>(P * k), 0);
      if (!split_row_bf16(a, mi, pieces.data(), kAmxSplitMinExpF32)) split_ok.store(false);
    }
    for (std::int64_t j = 0; j < P && mi * P + j < mpad; ++j) {
      std::uint16_t* dst = xa.get() + (mi * P + j) * kpad;
      std::int64_t copied = 0;
      if (mi < a.m) {
        const std::uint16_t* src = P > 1 ? pieces.data() + j * k : static_cast<const std::uint16_t*>(a.x) + mi * a.x_stride;
        std::memcpy(dst, src, static_cast<std::size_t>(a.kx) * 2);
        copied = a.kx;
      }
      std::memset(dst + copied, 0, static_cast<std::size_t>(kpad - copied) * 2);
    }
  });
  if (!split_ok.load()) return false;

  parallel_for(mblocks * nblocks, [&](std::int64_t t) {
    const std::int64_t nb = t % nblocks, mb = t / nblocks;
    const std::int64_t m0 = mb * mc, rows = std::min(mc, m - m0), rows_pad = round_up(rows, mq);
    const std::int64_t n0 = nb * nc, cols = std::min(nc, n - n0);
    auto cacc = alloc64<float>(rows_pad * nc);
    auto bp = alloc64<std::uint16_t>(nc * kcmax);
    std::fill(cacc.get(), cacc.get() + rows_pad * nc, 0.0f);
    for (std::int64_t k0 = 0; k0 < kpad; k0 += kcmax) {
      const std::int64_t kc = std::min(kcmax, kpad - k0);
      std::uint32_t* pairs = reinterpret_cast<std::uint32_t*>(bp.get());
      std::int64_t done = 0;
#if defined(NVFP4_BF16_PANEL_X86)
      if (avx512f_supported()) done = decode_panel_avx512(a, n0, cols, nc, k0, kc, pairs);
#endif
      decode_panel_scalar(a, n0, cols, nc, k0, kc, done, pairs);
      if (tune.gemm_prefetch != 0) prefetch_next_slice_l2(a, n0, cols, k0 + kc, kcmax);
      ukernel(xa.get() + m0 * kpad + k0, kpad, bp.get(), nc, kc, cacc.get(), nc, rows_pad);
    }
    // Per output: its pieces smallest first (as gemv_store_pieces), then the tensor scale once.
    for (std::int64_t i = 0; i < rows; i += P)
      for (std::int64_t c = 0; c < cols; ++c) {
        float v = cacc[(i + P - 1) * nc + c];
        for (int j = P - 2; j >= 0; --j) v += cacc[(i + j) * nc + c];
        store_from_f32(a.y, a.dtype, (m0 + i) / P * a.y_stride + n0 + c, v * a.tensor_scale);
      }
  });
  return true;
}

}  // namespace nvfp4::cpu
