// tests/cpu/test_repack_cpu.cpp -- the pre-split CPU repack (include/nvfp4/cpu.h) and the
// AVX512-BF16 GEMV on it (quantized_matmul_repacked).
//
// What each test pins down:
//   Layout*            the repack byte for byte against two independent definitions of the layout:
//                      a scalar emulation of vpermt2d with the kernel's even/odd selectors, and
//                      (where AVX-512 runs) the intrinsic itself on the canonical chunk; the K tail
//                      unchanged; nothing written past N*K/2.
//   OneHot*            dequantization through the repacked path is bit-exact (y = dequantize_ref).
//   MatchesOracle      every M in {1,2,3,8,9,17} x bf16/fp16/fp32 x shapes with K tails, short
//                      activations, odd N: within the CPU tolerance (test_matmul_cpu.cpp header).
//   BitIdentical*      the same bytes as the canonical AVX512-BF16 GEMV on the canonical weights
//                      (same summation order), under several tunings (every prefetch variant of the
//                      tile, K split on and off, row groups).
//   Fallback*          activations the GEMV cannot split exactly and overflowing block partials
//                      give the canonical path's result (through the temporary canonical copy).
//   Errors*            null pointers, bad K / N, overlapping outputs: nvfp4::Error naming the op.
// Kernel tests skip, saying why, on CPUs without AVX512-BF16 + VBMI; there the entry must throw.
// Seeds: NVFP4_TEST_SEED replays (tests/test_util.h); every failure prints its seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_test_util.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cpu/tuning_cpu.h"
#include "nvfp4/cpu.h"
#include "nvfp4/error.h"
#include "nvfp4/ops.h"
#include "test_util.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NVFP4_TEST_X86 1
#endif

namespace nvfp4 {
namespace {

using namespace cputest;
using test::base_seed;
using test::seed_note;

constexpr const char* kSkip =
    "AVX512-BF16 + AVX512-VBMI not available: the pre-split GEMV cannot run here (the repack itself is tested)";

std::vector<std::uint8_t> repacked(const Weight& w) {
  std::vector<std::uint8_t> out(w.packed.size());
  cpu::repack_for_gemv_cpu(w.view(), out.data());
  return out;
}

cpu::CpuRepackedWeightView rview(const Weight& w, const std::vector<std::uint8_t>& packed) {
  return {packed.data(), w.scales.data(), w.ts, w.n, w.k};
}

// vpermt2d (Intel SDM VPERMT2D): word i of the result is word sel[i] & 31 of the 32-word
// concatenation (first source, second source). The kernel's selectors: even / odd words.
void vpermt2d_scalar(const std::uint32_t a[16], const std::uint32_t b[16], const int sel[16], std::uint32_t out[16]) {
  for (int i = 0; i < 16; ++i) {
    const int s = sel[i] & 31;
    out[i] = s < 16 ? a[s] : b[s - 16];
  }
}

#if defined(NVFP4_TEST_X86)
__attribute__((target("avx512f"))) void vpermt2d_intrinsic(const std::uint8_t* p, int h, std::uint8_t* out64) {
  const __m512i sel = h == 0 ? _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
                             : _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  _mm512_storeu_si512(out64, _mm512_permutex2var_epi32(_mm512_loadu_si512(p), sel, _mm512_loadu_si512(p + 64)));
}
#endif

TEST(RepackCpu, LayoutMatchesVpermt2dDefinition) {
  int sel[2][16];
  for (int i = 0; i < 16; ++i) sel[0][i] = 2 * i, sel[1][i] = 2 * i + 1;
#if defined(NVFP4_TEST_X86)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") != 0;
#else
  const bool avx512 = false;
#endif
  const std::int64_t shapes[][2] = {{1, 16}, {3, 256}, {5, 272}, {2, 528}, {7, 4112}, {4, 14336}, {1, 240}};
  std::uint64_t seed = base_seed() + 100;
  for (const auto& s : shapes) {
    const std::int64_t n = s[0], k = s[1];
    ++seed;
    SCOPED_TRACE("N=" + std::to_string(n) + " K=" + std::to_string(k) + " " + seed_note(seed));
    const Weight w = random_weight(n, k, seed);
    const std::int64_t rb = k / 2, full = k / 256 * 128;
    // Guard bytes past N*K/2: the repack must not write them.
    std::vector<std::uint8_t> out(static_cast<std::size_t>(n * rb + 64), 0xA5);
    cpu::repack_for_gemv_cpu(w.view(), out.data());
    for (std::size_t i = static_cast<std::size_t>(n * rb); i < out.size(); ++i) ASSERT_EQ(out[i], 0xA5) << "wrote past N*K/2 at " << i;
    int bad = 0;
    for (std::int64_t r = 0; r < n; ++r) {
      const std::uint8_t* src = w.packed.data() + r * rb;
      const std::uint8_t* dst = out.data() + r * rb;
      for (std::int64_t c = 0; c < full; c += 128) {
        std::uint32_t a[16], b[16];
        std::memcpy(a, src + c, 64);  // little-endian words, as a 64-byte vector load sees them
        std::memcpy(b, src + c + 64, 64);
        for (int h = 0; h < 2; ++h) {
          std::uint32_t want[16];
          vpermt2d_scalar(a, b, sel[h], want);
          if (std::memcmp(dst + c + 64 * h, want, 64) != 0 && bad++ < 5)
            ADD_FAILURE() << "row " << r << " chunk byte " << c << " half " << h << " differs from vpermt2d(sel[" << h << "])";
#if defined(NVFP4_TEST_X86)
          if (avx512) {
            std::uint8_t got[64];
            vpermt2d_intrinsic(src + c, h, got);
            if (std::memcmp(dst + c + 64 * h, got, 64) != 0 && bad++ < 5)
              ADD_FAILURE() << "row " << r << " chunk byte " << c << " half " << h << " differs from _mm512_permutex2var_epi32";
          }
#endif
        }
      }
      if (std::memcmp(dst + full, src + full, static_cast<std::size_t>(rb - full)) != 0 && bad++ < 5)
        ADD_FAILURE() << "row " << r << ": the K % 256 tail is not canonical";
    }
    // A permutation of the row: same multiset of bytes (catches duplicated / dropped words even
    // if both definitions above were wrong the same way).
    for (std::int64_t r = 0; r < n && bad < 5; ++r) {
      std::vector<std::uint8_t> x(w.packed.begin() + r * rb, w.packed.begin() + (r + 1) * rb), y(out.begin() + r * rb, out.begin() + (r + 1) * rb);
      std::sort(x.begin(), x.end());
      std::sort(y.begin(), y.end());
      if (x != y) { ADD_FAILURE() << "row " << r << " is not a permutation of the canonical row"; ++bad; }
    }
  }
}

// One-hot rows: y[m][n] = w[n][m] exactly = dequantize_ref (the oracle rounds fl(e2m1*|s|)*ts
// once, as the kernel does). K = 784: three pre-split chunks and a canonical 16-k tail.
TEST(RepackCpu, OneHotRecoversDequantizeBitExact) {
  if (!cpu::repack_for_gemv_cpu_supported()) GTEST_SKIP() << kSkip;
  const std::int64_t n = 37, k = 784;
  const std::uint64_t seed = base_seed() + 200;
  SCOPED_TRACE(seed_note(seed));
  const Weight w = random_weight(n, k, seed);
  const std::vector<std::uint8_t> rp = repacked(w);
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(t));
    const std::vector<std::uint8_t> deq = dequantized(w, t);
    std::vector<std::uint8_t> xb = one_hot_rows(t, k, k);
    Out y = poisoned(t, k, n, n);
    cpu::quantized_matmul_repacked(MatrixView{xb.data(), t, k, k, k}, rview(w, rp), y.view);
    expect_exact(
        y, k, n, [&](std::int64_t i, std::int64_t j) { return load_as_f32(deq.data(), t, j * k + i); },
        [&](std::int64_t i, std::int64_t j) { return "m=" + std::to_string(i) + " n=" + std::to_string(j); });
  }
}

// The FMA dot (gemv_fma_dtypes, M = 1 .. 32): one-hot rows, alone and in groups (every tile shape
// of rows_any_m, and M = 16 in groups; 784 is a multiple of each row count), recover
// dequantize_ref bit for bit on canonical and pre-split weights, every dtype (the activations are
// converted to fp32 exactly).
TEST(RepackCpu, FmaDotOneHotRecoversDequantizeBitExact) {
  if (!cpu::repack_for_gemv_cpu_supported()) GTEST_SKIP() << kSkip;
  const std::int64_t n = 37, k = 784;
  const std::uint64_t seed = base_seed() + 250;
  SCOPED_TRACE(seed_note(seed));
  const Weight w = random_weight(n, k, seed);
  const std::vector<std::uint8_t> rp = repacked(w);
  const cpu::CpuTuning saved = cpu::cpu_tuning();
  cpu::cpu_tuning_mutable().gemv_fma_dtypes = 7;  // every dtype
  cpu::cpu_tuning_mutable().gemv_fma_max_m = cpu::kGemvFmaMaxRows;
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtype_name(t));
    const std::vector<std::uint8_t> deq = dequantized(w, t);
    std::vector<std::uint8_t> xb = one_hot_rows(t, k, k);
    for (const std::int64_t rows : {1, 2, 4, 7, 8, 16}) {  // rows i .. i + rows - 1 in one call: M = rows
      SCOPED_TRACE("M=" + std::to_string(rows));
      ASSERT_TRUE(cpu::gemv_fma_dot(rows, t));
      Out yc = poisoned(t, k, n, n), yr = poisoned(t, k, n, n);
      for (std::int64_t i = 0; i < k; i += rows) {
        const MatrixView xi{xb.data() + i * k * dtype_size(t), t, rows, k, k};
        const MatrixView yci{yc.bytes.data() + i * n * dtype_size(t), t, rows, n, n};
        const MatrixView yri{yr.bytes.data() + i * n * dtype_size(t), t, rows, n, n};
        cpu::quantized_matmul_path(xi, w.view(), yci, cpu::CpuPath::kGemvAvx512Bf16);
        cpu::quantized_matmul_repacked(xi, rview(w, rp), yri);
      }
      for (Out* y : {&yc, &yr})
        expect_exact(
            *y, k, n, [&](std::int64_t i, std::int64_t j) { return load_as_f32(deq.data(), t, j * k + i); },
            [&](std::int64_t i, std::int64_t j) {
              return std::string(y == &yc ? "canonical" : "pre-split") + " m=" + std::to_string(i) + " n=" + std::to_string(j);
            });
    }
  }
  cpu::cpu_tuning_mutable() = saved;
}

#if defined(__linux__)
// Neither dot may read past the pre-split weights: they end exactly at a page boundary followed by
// a PROT_NONE page, with K % 256 == 0 (no K tail after the last chunk), so an out-of-bounds read
// faults. The FMA dot's 4-row tiles (M = 1, 2) load each half at byte offsets 0..3 and so read up
// to 3 bytes past every chunk; rows_any_m keeps the matrix's last row off that path. With that
// guard removed this test crashes (docs/perf-cpu.md 30).
TEST(RepackCpu, PreSplitReadsStayInsideTheBuffer) {
  if (!cpu::repack_for_gemv_cpu_supported()) GTEST_SKIP() << kSkip;
  const std::int64_t n = 13, k = 512;  // 13 rows: NR-row tiles and single-row tails end the matrix
  const std::uint64_t seed = base_seed() + 260;
  SCOPED_TRACE(seed_note(seed));
  const Weight w = random_weight(n, k, seed);
  const std::vector<std::uint8_t> rp = repacked(w);
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t bytes = rp.size(), span = (bytes + page - 1) / page * page;
  void* base = mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(base, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<std::uint8_t*>(base) + span, page, PROT_NONE), 0);
  std::uint8_t* packed = static_cast<std::uint8_t*>(base) + (span - bytes);  // ends at the guard page
  std::memcpy(packed, rp.data(), bytes);
  const cpu::CpuTuning saved = cpu::cpu_tuning();
  for (std::int64_t fma : {0, 7})
    for (DType t : {DType::kBF16, DType::kF32}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " gemv_fma_dtypes=" + std::to_string(fma));
      cpu::cpu_tuning_mutable().gemv_fma_dtypes = fma;
      for (std::int64_t m : {1, 2}) {  // the FMA dot's two tiles with offset loads (1 x 4, 2 x 4)
        SCOPED_TRACE("M=" + std::to_string(m));
        const Act x = random_x(t, m, k, k, seed + 1);
        Out ref = poisoned(t, m, n, n), y = poisoned(t, m, n, n);
        quantized_matmul_ref(x.view, w.view(), ref.view);
        cpu::quantized_matmul_repacked(x.view, cpu::CpuRepackedWeightView{packed, w.scales.data(), w.ts, n, k},
                                       y.view);
        expect_matches_oracle(ref, y, abs_sums(w, x.view), w);
      }
    }
  cpu::cpu_tuning_mutable() = saved;
  munmap(base, span + page);
}
#endif

struct Case {
  std::int64_t n, k, kx_short;
};
// K tails (K % 256 = 16, 240; K = 16 and 48: tail only), short activations, N not a multiple of 8.
const Case kCases[] = {{37, 784, 0}, {13, 4112, 9}, {67, 512, 0}, {5, 16, 0}, {11, 272, 3}, {3, 48, 15}, {9, 1264, 0}};

TEST(RepackCpu, MatchesOracle) {
  if (!cpu::repack_for_gemv_cpu_supported()) GTEST_SKIP() << kSkip;
  std::uint64_t seed = base_seed() + 300;
  for (const Case& c : kCases) {
    const Weight w = random_weight(c.n, c.k, ++seed);
    const std::vector<std::uint8_t> rp = repacked(w);
    const std::int64_t kx = c.k - c.kx_short;
    for (std::int64_t m : {1, 2, 3, 8, 9, 17})
      for (DType t : {DType::kBF16, DType::kF16, DType::kF32}) {
        const std::uint64_t xs = seed * 131 + static_cast<std::uint64_t>(m) * 7 + static_cast<std::uint64_t>(t);
        SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
                     " kx=" + std::to_string(kx) + " dtype=" + dtype_name(t) + " weight " + seed_note(seed) +
                     " x seed=" + std::to_string(xs));
        const Act x = random_x(t, m, kx, kx + 3, xs);
        Out ref = poisoned(t, m, c.n, c.n), y = poisoned(t, m, c.n, c.n + 3);
        quantized_matmul_ref(x.view, w.view(), ref.view);
        const cpu::CpuTuning saved = cpu::cpu_tuning();
        for (std::int64_t fma : {0, 1}) {  // M <= 32: the bf16 dot and the FMA dot
          if (m > cpu::kGemvFmaMaxRows && fma == 1) continue;
          SCOPED_TRACE("gemv_fma_dtypes=" + std::to_string(fma));
          cpu::cpu_tuning_mutable().gemv_fma_dtypes = fma ? 7 : 0;  // 7: every dtype
          cpu::cpu_tuning_mutable().gemv_fma_max_m = cpu::kGemvFmaMaxRows;
          cpu::quantized_matmul_repacked(x.view, rview(w, rp), y.view);
          expect_matches_oracle(ref, y, abs_sums(w, x.view), w);
        }
        cpu::cpu_tuning_mutable() = saved;
      }
  }
}

// Same summation order as the canonical GEMV, so the same bytes, under tunings that reach every
// tile instantiation (prefetch off / L1 / L2), K split on and off, row groups of 1, 3 and 8.
TEST(RepackCpu, BitIdenticalToCanonicalGemv) {
  if (!cpu::repack_for_gemv_cpu_supported()) GTEST_SKIP() << kSkip;
  const cpu::CpuTuning saved = cpu::cpu_tuning();
  std::uint64_t seed = base_seed() + 400;
  const Case cases[] = {{45, 1552, 0}, {131, 4112, 5}, {8, 14336, 0}, {3, 528, 0}};
  for (const Case& c : cases) {
    const Weight w = random_weight(c.n, c.k, ++seed);
    const std::vector<std::uint8_t> rp = repacked(w);
    const std::int64_t kx = c.k - c.kx_short;
    for (std::int64_t m : {1, 2, 4, 8, 9})
      for (DType t : {DType::kBF16, DType::kF16, DType::kF32})
        for (int v = 0; v < 4; ++v) {
          const std::uint64_t xs = seed * 17 + static_cast<std::uint64_t>(m);
          SCOPED_TRACE("M=" + std::to_string(m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
                       " dtype=" + dtype_name(t) + " tuning " + std::to_string(v) + " weight " + seed_note(seed) +
                       " x seed=" + std::to_string(xs));
          cpu::CpuTuning tu = saved;
          tu.gemv_prefetch_tiles = v == 0 ? 0 : v == 1 ? 1 : 2;
          tu.gemv_fma_prefetch_tiles = v == 0 ? 0 : v == 1 ? 2 : 1;
          tu.gemv_prefetch_min_m = 1;
          tu.gemv_prefetch_max_m = 16;
          tu.gemv_prefetch_l2 = v == 1 ? 0 : 1;
          tu.gemv_min_tasks_per_thread = v == 3 ? 0 : 64;  // 64: split K even at large N
          tu.gemv_group_rows = v == 0 ? 1 : v == 1 ? 3 : 8;
          tu.gemv_rows_per_task = v == 2 ? 3 : 8;
          tu.gemv_avx512bf16_rows_per_task = v == 2 ? 3 : v == 3 ? 64 : 8;
          tu.gemv_avx512bf16_rows_per_task_m1 = v == 2 ? 3 : 8;
          tu.gemv_fma_dtypes = v % 2 ? 7 : 0;  // M <= 32: both dots on every host, every dtype
          tu.gemv_fma_max_m = cpu::kGemvFmaMaxRows;
          cpu::cpu_tuning_mutable() = tu;
          const Act x = random_x(t, m, kx, kx, xs);
          // The kernels themselves (no fallback in between), then the public entries (the same
          // path after the kernel: fp16 outputs may overflow to Inf and take the GEMM recompute).
          Out kc = poisoned(t, m, c.n, c.n), kr = poisoned(t, m, c.n, c.n);
          ASSERT_TRUE(cpu::gemv_nvfp4_avx512bf16(args_of(x.view, w, kc.view))) << "canonical split refused";
          cpu::MatmulArgs ar = args_of(x.view, w, kr.view);
          ar.packed = rp.data();
          ASSERT_TRUE(cpu::gemv_nvfp4_avx512bf16_presplit(ar)) << "pre-split split refused";
          Out yc = poisoned(t, m, c.n, c.n), yr = poisoned(t, m, c.n, c.n);
          cpu::quantized_matmul_path(x.view, w.view(), yc.view, cpu::CpuPath::kGemvAvx512Bf16);
          cpu::quantized_matmul_repacked(x.view, rview(w, rp), yr.view);
          cpu::cpu_tuning_mutable() = saved;
          ASSERT_EQ(kc.bytes, kr.bytes) << "pre-split kernel differs from the canonical GEMV kernel";
          ASSERT_EQ(yc.bytes, yr.bytes) << "quantized_matmul_repacked differs from the canonical GEMV path";
        }
  }
  cpu::cpu_tuning_mutable() = saved;
}

// NaN / Inf and fp32 values the exact split refuses go through the canonical fallback (Highway
// GEMV) on a temporary canonical copy; |x| ~ 2^125 with tiny scales overflows the unscaled block
// partials and takes the canonical GEMM recompute. Either way: the canonical path's bytes.
TEST(RepackCpu, FallbacksMatchCanonicalPath) {
  if (!cpu::repack_for_gemv_cpu_supported()) GTEST_SKIP() << kSkip;
  const std::uint64_t seed = base_seed() + 500;
  SCOPED_TRACE(seed_note(seed));
  const Weight w = random_weight(13, 784, seed);
  const std::vector<std::uint8_t> rp = repacked(w);
  struct Bad { DType t; float v; const char* what; };
  const Bad bads[] = {{DType::kF32, std::ldexp(1.0f, -103), "fp32 2^-103"}, {DType::kF32, NAN, "fp32 NaN"},
                      {DType::kF16, INFINITY, "fp16 Inf"}, {DType::kBF16, -INFINITY, "bf16 -Inf"}};
  for (const Bad& b : bads)
    for (std::int64_t pos : {std::int64_t{3}, std::int64_t{780}}) {
      SCOPED_TRACE(std::string(b.what) + " at k=" + std::to_string(pos));
      Act x = random_x(b.t, 3, 784, 784, seed + 1);
      store_from_f32(x.bytes.data(), b.t, 1 * 784 + pos, b.v);
      Out yc = poisoned(b.t, 3, 13, 13), yr = poisoned(b.t, 3, 13, 13);
      cpu::quantized_matmul_path(x.view, w.view(), yc.view, cpu::CpuPath::kGemvAvx512Bf16);
      cpu::quantized_matmul_repacked(x.view, rview(w, rp), yr.view);
      EXPECT_EQ(yc.bytes, yr.bytes);
      if (b.t == DType::kF32 && std::isfinite(b.v)) {  // and the finite case matches the oracle
        Out ref = poisoned(b.t, 3, 13, 13);
        quantized_matmul_ref(x.view, w.view(), ref.view);
        expect_matches_oracle(ref, yr, abs_sums(w, x.view), w);
      }
    }
  // Overflowing unscaled partials (test_matmul_cpu.cpp HugeActivationsDoNotOverflowBeforeTheScale):
  // |x| = 2^125, weights +-6 with scale 2^-9. Block 0 is +6 x +2^125 throughout, so its unscaled
  // partial (16 x 6 x 2^125) overflows while the oracle's sum (<= 784 x 6 x 2^116) stays finite.
  // bf16 rows run the pre-split GEMV and then the GEMM recompute; fp32 rows (>= 2^120) are
  // refused by the split first.
  std::mt19937_64 rng(seed + 2);
  Weight h = w;
  h.ts = 1.0f;
  std::fill(h.scales.begin(), h.scales.end(), std::uint8_t{0x01});  // 2^-9
  for (std::size_t i = 0; i < h.packed.size(); ++i)
    h.packed[i] = (i % 392) < 8 ? std::uint8_t{0x77} : static_cast<std::uint8_t>(0x77 | (rng() % 2 ? 0x08 : 0) | (rng() % 2 ? 0x80 : 0));
  const std::vector<std::uint8_t> hp = repacked(h);
  for (DType t : {DType::kBF16, DType::kF32}) {
    SCOPED_TRACE(std::string("huge activations ") + dtype_name(t));
    std::vector<std::uint8_t> xh(static_cast<std::size_t>(2 * 784 * dtype_size(t)));
    for (std::int64_t i = 0; i < 2 * 784; ++i)
      store_from_f32(xh.data(), t, i, std::ldexp(i % 784 < 16 || rng() % 2 ? 1.0f : -1.0f, 125));
    const MatrixView xv{xh.data(), t, 2, 784, 784};
    Out yc = poisoned(t, 2, 13, 13), yr = poisoned(t, 2, 13, 13);
    if (t == DType::kBF16) {  // the kernel really overflows here (else this case tests nothing)
      Out yk = poisoned(t, 2, 13, 13);
      cpu::MatmulArgs ak = args_of(xv, h, yk.view);
      ak.packed = hp.data();
      ASSERT_TRUE(cpu::gemv_nvfp4_avx512bf16_presplit(ak));
      EXPECT_FALSE(std::isfinite(yk.get(0, 0))) << "the unscaled block partial was expected to overflow";
    }
    cpu::quantized_matmul_path(xv, h.view(), yc.view, cpu::CpuPath::kGemvAvx512Bf16);
    cpu::quantized_matmul_repacked(xv, rview(h, hp), yr.view);
    for (std::int64_t j = 0; j < 13; ++j) EXPECT_TRUE(std::isfinite(yr.get(0, j))) << "n=" << j << " got " << yr.get(0, j);
    EXPECT_EQ(yc.bytes, yr.bytes);
  }
}

void expect_error(const std::function<void()>& f, const std::string& op, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": no error thrown";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << what << ": " << e.what();
  }
}

TEST(RepackCpu, ErrorsNameTheOperation) {
  const Weight w = random_weight(4, 512, base_seed() + 600);
  std::vector<std::uint8_t> out(w.packed.size() + w.scales.size());
  const std::string rop = "cpu::repack_for_gemv_cpu";
  expect_error([&] { cpu::repack_for_gemv_cpu(w.view(), nullptr); }, rop, "null output");
  expect_error([&] { WeightView v = w.view(); v.packed = nullptr; cpu::repack_for_gemv_cpu(v, out.data()); }, rop, "null packed");
  expect_error([&] { WeightView v = w.view(); v.scales = nullptr; cpu::repack_for_gemv_cpu(v, out.data()); }, rop, "null scales");
  expect_error([&] { WeightView v = w.view(); v.k = 40; cpu::repack_for_gemv_cpu(v, out.data()); }, rop, "K % 16 != 0");
  expect_error([&] { WeightView v = w.view(); v.k = 0; cpu::repack_for_gemv_cpu(v, out.data()); }, rop, "K = 0");
  expect_error([&] { WeightView v = w.view(); v.n = 0; cpu::repack_for_gemv_cpu(v, out.data()); }, rop, "N = 0");
  {  // in place, and outputs reaching into the canonical bytes or the scales. One buffer holds
     // packed, scales and room for an output after them, so even a missing check writes in bounds.
    const std::size_t pb = w.packed.size(), sb = w.scales.size();
    std::vector<std::uint8_t> big(2 * pb + sb + 64);
    std::memcpy(big.data(), w.packed.data(), pb);
    std::memcpy(big.data() + pb, w.scales.data(), sb);
    const WeightView v{big.data(), big.data() + pb, 1.0f, w.n, w.k};
    expect_error([&] { cpu::repack_for_gemv_cpu(v, big.data()); }, rop, "in place");
    expect_error([&] { cpu::repack_for_gemv_cpu(v, big.data() + 1); }, rop, "overlap packed");
    expect_error([&] { cpu::repack_for_gemv_cpu(v, big.data() + pb - 1); }, rop, "overlap packed end");
    expect_error([&] { cpu::repack_for_gemv_cpu(v, big.data() + pb + sb - 8); }, rop, "overlap scales end");
    EXPECT_NO_THROW(cpu::repack_for_gemv_cpu(v, big.data() + pb + sb));  // adjacent, not overlapping
  }
  const std::vector<std::uint8_t> rp = repacked(w);
  const std::string mop = "cpu::quantized_matmul_repacked";
  const Act x = random_x(DType::kBF16, 2, 512, 512, base_seed() + 601);
  Out y = poisoned(DType::kBF16, 2, 4, 4);
  expect_error([&] { auto v = rview(w, rp); v.packed = nullptr; cpu::quantized_matmul_repacked(x.view, v, y.view); }, mop, "null packed");
  expect_error([&] { auto v = rview(w, rp); v.scales = nullptr; cpu::quantized_matmul_repacked(x.view, v, y.view); }, mop, "null scales");
  expect_error([&] { auto v = rview(w, rp); v.k = 504; cpu::quantized_matmul_repacked(x.view, v, y.view); }, mop, "K % 16 != 0");
  expect_error([&] { MatrixView yv = y.view; yv.data = nullptr; cpu::quantized_matmul_repacked(x.view, rview(w, rp), yv); }, mop, "null y");
  expect_error([&] { MatrixView xv = x.view; xv.cols = 496; cpu::quantized_matmul_repacked(xv, rview(w, rp), y.view); }, mop, "x K mismatch");
  expect_error([&] { MatrixView yv{const_cast<std::uint8_t*>(rp.data()), DType::kBF16, 2, 4, 4};
                     cpu::quantized_matmul_repacked(x.view, rview(w, rp), yv); }, mop, "y overlaps the weights");
  if (!cpu::repack_for_gemv_cpu_supported())
    expect_error([&] { cpu::quantized_matmul_repacked(x.view, rview(w, rp), y.view); }, mop, "unsupported CPU");
}

TEST(RepackCpu, SupportedFollowsTheGemv) {
  EXPECT_EQ(cpu::repack_for_gemv_cpu_supported(), cpu::gemv_avx512bf16_supported());
  if (!cpu::repack_for_gemv_cpu_supported()) GTEST_SKIP() << kSkip;
  // M = 0 is a valid empty call.
  const Weight w = random_weight(4, 512, base_seed() + 700);
  const std::vector<std::uint8_t> rp = repacked(w);
  std::uint16_t dummy = 0;
  EXPECT_NO_THROW(cpu::quantized_matmul_repacked(MatrixView{&dummy, DType::kBF16, 0, 512, 512}, rview(w, rp),
                                                 MatrixView{&dummy + 1, DType::kBF16, 0, 4, 4}));
}

}  // namespace
}  // namespace nvfp4
