// kernels/cpu/gemm_nvfp4_avx512bf16.cpp -- bf16 GEMM microkernel on AVX512-BF16 (vdpbf16ps).
//
// C[rows, nc] += A[rows, kc] . B with A bf16 row-major and B in pair layout Bp[kc/2][nc][2].
// 8 rows x 32 columns per register block: 16 zmm accumulators, 2 B loads and 1 broadcast per
// k pair. vdpbf16ps multiplies bf16 pairs exactly and adds them into fp32 with round-to-nearest,
// but treats denormal inputs/outputs as zero (Intel SDM, VDPBF16PS): sums below 2^-126 flush.
// Only this file is compiled with AVX512-BF16 enabled (function attribute); callers check
// avx512bf16_supported() first.
#include <cstring>

#include "kernels/cpu/kernels_cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define NVFP4_HAVE_X86 1
#endif

namespace nvfp4::cpu {

#if defined(NVFP4_HAVE_X86)
bool avx512bf16_supported() {
  static const bool ok = [] {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw")) return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a & (1u << 5)) != 0;  // CPUID.(EAX=7,ECX=1):EAX[5] = AVX512_BF16
  }();
  return ok;
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void gemm_ukernel_avx512bf16(
    const std::uint16_t* A, std::int64_t lda, const std::uint16_t* Bp, std::int64_t nc, std::int64_t kc,
    float* C, std::int64_t ldc, std::int64_t rows) {
  constexpr int MR = 8;
  for (std::int64_t i0 = 0; i0 < rows; i0 += MR) {
    for (std::int64_t s = 0; s < nc; s += 32) {
      __m512 c0[MR], c1[MR];
      for (int i = 0; i < MR; ++i) {
        c0[i] = _mm512_loadu_ps(C + (i0 + i) * ldc + s);
        c1[i] = _mm512_loadu_ps(C + (i0 + i) * ldc + s + 16);
      }
      const std::uint16_t* arow = A + i0 * lda;
      for (std::int64_t p = 0; p < kc / 2; ++p) {
        const std::uint16_t* b = Bp + (p * nc + s) * 2;
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 32);
        for (int i = 0; i < MR; ++i) {
          std::uint32_t pair;
          std::memcpy(&pair, arow + i * lda + 2 * p, 4);
          const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
          c0[i] = _mm512_dpbf16_ps(c0[i], av, b0);
          c1[i] = _mm512_dpbf16_ps(c1[i], av, b1);
        }
      }
      for (int i = 0; i < MR; ++i) {
        _mm512_storeu_ps(C + (i0 + i) * ldc + s, c0[i]);
        _mm512_storeu_ps(C + (i0 + i) * ldc + s + 16, c1[i]);
      }
    }
  }
}
#else
bool avx512bf16_supported() { return false; }
void gemm_ukernel_avx512bf16(const std::uint16_t*, std::int64_t, const std::uint16_t*, std::int64_t,
                             std::int64_t, float*, std::int64_t, std::int64_t) {}
#endif

}  // namespace nvfp4::cpu
