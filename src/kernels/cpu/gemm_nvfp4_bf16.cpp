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
// Panel decode (AVX-512F, every CPU that runs either microkernel): the packed bytes of 16 weight
// rows are transposed as bytes (transpose_x86.h), so each byte (a k pair) of 16 rows widens to 16
// u32 lanes of Bp[pair][column]; vpermps on the low / high nibble gives the fp32 E2M1 values,
// times the block scale (exact), and the top halves of the two fp32 words form the bf16 pair
// (exact: <= 6 significant bits). perf on the dev machine (Zen 4, M=512 N=512 K=14336, 1 thread)
// put the former scalar decode at 30% of the run, more than the microkernel (27%).
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
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace nvfp4::cpu {
namespace {

std::int64_t round_up(std::int64_t v, std::int64_t q) { return (v + q - 1) / q * q; }

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
// Returns the first column not decoded. Per 16 columns and 16-k block: the 16 rows' packed bytes
// are transposed as bytes (transpose_block_bytes16), so byte j of the block (k pair j: codes 2j,
// 2j + 1) of all 16 columns sits in one vector; widened to 16 u32 lanes, vpermps (index bits 3:0)
// looks up code 2j as is and code 2j + 1 after a shift by 4, each times the columns' |scale|, and
// the top halves of the two fp32 words form the lane's bf16 pair: the scalar decode's bits. Why:
// the form before it decoded along k per row, then transposed the decoded dwords (48 zmm
// shuffles per 16 x 16 pairs) and broadcast two scales per row and 32 k, all on Intel's port 5,
// which the AMX GEMM's decode is bound by. Measured (docs/perf-cpu.md 39, alternating builds, 2
// threads, cold): the AMX GEMM on the device host 12-38% faster at 512 x 4096 x 14336, 33-51% at
// 128 x 4096 x 14336, 41-53% at 64 x 9728 x 2560; the vdpbf16ps GEMM on Zen 4 0-4% at M = 512,
// 8-15% at M = 128 (hot). (Zen 4, 1 thread: the decode is ~20% of a 32 x 1024 x 2560 GEMM.)
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
  const std::int64_t blocks = std::min(kc, k - k0) / kBlockSize;  // K % 16 == 0; kc % 32 == 0
  for (std::int64_t c = 0; c < cfull; c += 16) {
    const std::uint8_t* prow[16];
    const std::uint8_t* srow[16];
    for (int i = 0; i < 16; ++i) {
      prow[i] = a.packed + (n0 + c + i) * (k / 2) + k0 / 2;
      srow[i] = a.scales + (n0 + c + i) * (k / kBlockSize) + k0 / kBlockSize;
    }
    for (std::int64_t b = 0; b < blocks; ++b) {
      alignas(64) float sc[16];
      for (int i = 0; i < 16; ++i) sc[i] = stab[srow[i][b]];
      const __m512 scale = _mm512_load_ps(sc);
      __m128i t[8];
      transpose_block_bytes16(prow, b, t);
      for (int j = 0; j < 8; ++j) {
        const __m512i v = _mm512_cvtepu8_epi32(t[j]);
        const __m512 lo = _mm512_mul_ps(_mm512_permutexvar_ps(v, tbl), scale);
        const __m512 hi = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tbl), scale);
        // (lo >> 16) | (hi & 0xFFFF0000): ternary-logic A ? B : C with A = mask, B = hi, C = lo>>16.
        _mm512_storeu_si512(pairs + (b * 8 + j) * nc + c,
                            _mm512_ternarylogic_epi32(hi_mask, _mm512_castps_si512(hi),
                                                      _mm512_srli_epi32(_mm512_castps_si512(lo), 16), 0xCA));
      }
    }
    // Blocks past K (kc runs to K rounded up to 32): zero pairs.
    for (std::int64_t p = blocks * 8; p < kc / 2; ++p) std::memset(pairs + p * nc + c, 0, 16 * 4);
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
  std::int64_t nc = round_up(tune.gemm_nc, 32);
  const std::int64_t mblocks = (m + mc - 1) / mc;
  while (nc > 32 && mblocks * ((n + nc - 1) / nc) < 4 * threads) nc -= 32;
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
