// tests/cpu/test_matmul_cpu.cpp -- the CPU kernels against the oracle, on every compiled path.
//
// Paths: GEMV and fp32 GEMM on EVERY Highway target compiled in and supported by this host
// (hwy::SetSupportedTargetsForTest narrows dynamic dispatch to one target at a time; the
// EMU128 portable fallback included), the AVX512-BF16 GEMV and GEMM and the AMX GEMM (skipped,
// with a message, where the CPU lacks them).
//
// Tolerance (per output element, fp32 accumulation in every path; u = 2^-24):
//   |y - y_ref| <= (2.01 K + 4) u S |ts| + ulp_out(|y_ref|) + 7 K 448 2^-126 |ts|
// where S = sum_k |x_k * w_k| (w = e2m1 * |scale|, exact). Derivation: every kernel forms each
// output as a tree of fp32 additions over its K terms (products exact: FMA, or <= 8 x 6
// significant bits in the bf16 paths), then one multiply by ts; any such tree has error
// <= gamma_(K-1) * sum|terms| (first order (K-1) u; gamma_n <= 1.001 n u for n u <= 2^-10), the
// ts multiply adds u. The oracle rounds each product and K-1 sums, then ts: gamma_(K+1) S.
// The AVX512-BF16 GEMV with fp16/fp32 activations (x = 2 or 3 exact bf16 pieces, proof in
// src/kernels/cpu/gemv_nvfp4_avx512bf16.cpp) sums 2K or 3K terms whose absolute sum is
// <= (1 + 2^-7 + 2^-15) S <= 1.008 S, in a tree of depth <= K + 1 (pieces: two more additions),
// so kernel + oracle <= (1.001 * 1.008 (K + 2) + 1.001 (K + 1)) u S <= (2.01 K + 4) u S. The
// order is free (the bf16 GEMV adds pairs k, k+4 per lane, then lanes, K segments, pieces).
// ulp_out allows both sides' final rounding to a 16-bit output. The last term is the denormal
// behaviour of vdpbf16ps/AMX with bf16 activations (Intel SDM: denormal inputs read as zero,
// denormal outputs flushed): per k at most a subnormal bf16 x (|x w| < 6 * 2^-126 before the
// block scale <= 448) plus one flushed partial (< 2^-126). The fp16/fp32 split paths never
// flush (every partial is a multiple of >= 2^-126, see the kernel), nor do the fp32 paths.
// Every kernel decodes the weights exactly, so one wrong weight or activation piece is an error
// of ~|x_k w_k|. A lost mid / lo piece (~2^-8 / ~2^-16 |x_k w_k|) can hide under this bound,
// so the split is checked bit-exactly too (ScaledOneHotSplitIsBitExact).
// Dequantization is checked bit-exactly: one-hot activations give y[m][n] = dequantize_ref.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tuning_cpu.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"
#include "cpu/cpu_test_util.h"

namespace nvfp4 {
namespace {

using cpu::CpuPath;
using namespace cputest;

std::string target_label(std::int64_t t) { return hwy::TargetName(t); }

// Run `path` (and, for Highway paths, each target) and compare with the oracle.
void check_all_paths(const Weight& w, const Act& x, std::int64_t y_stride, const std::string& trace) {
  const std::int64_t m = x.view.rows, n = w.n;
  const DType t = x.view.dtype;
  Out ref = poisoned(t, m, n, n);
  quantized_matmul_ref(x.view, w.view(), ref.view);
  const std::vector<double> sabs = abs_sums(w, x.view);

  auto compare = [&](const std::string& label) {
    SCOPED_TRACE(trace + " path=" + label);
    Out y = poisoned(t, m, n, y_stride);
    cpu::quantized_matmul_path(x.view, w.view(), y.view,
                               label.rfind("gemv", 0) == 0   ? CpuPath::kGemv
                               : label.rfind("gemm_f32", 0) == 0 ? CpuPath::kGemmF32
                               : label == "avx512bf16"           ? CpuPath::kGemmAvx512Bf16
                               : label.rfind("avx512bf16_gemv", 0) == 0 ? CpuPath::kGemvAvx512Bf16
                               : label == "amx_gemv"             ? CpuPath::kGemvAmx
                                                                 : CpuPath::kGemmAmx);
    expect_matches_oracle(ref, y, sabs, w);
  };

  for (std::int64_t target : cpu::hwy_compiled_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    ASSERT_EQ(std::string(cpu::hwy_target_name()), target_label(target));
    compare("gemv/" + target_label(target));
    compare("gemm_f32/" + target_label(target));
  }
  hwy::SetSupportedTargetsForTest(0);
  // The AVX512-BF16 GEMV takes every dtype (fp16/fp32 split exactly into bf16 pieces, or the
  // Highway GEMV for data that cannot be split); so does the AMX GEMM (or the fp32 GEMM); the
  // vdpbf16ps GEMM takes bf16 only.
  if (cpu::cpu_path_supported(CpuPath::kGemvAvx512Bf16, t)) {
    // M = 1 .. 32 run the bf16 dot or the FMA dot (gemv_fma_dtypes, gemv_fma_max_m); both, whatever
    // this host's default.
    const cpu::CpuTuning saved = cpu::cpu_tuning();
    for (std::int64_t fma : {0, 1}) {
      if (m > cpu::kGemvFmaMaxRows && fma == 1) continue;
      cpu::cpu_tuning_mutable().gemv_fma_dtypes = fma ? 7 : 0;  // 7: every dtype
      cpu::cpu_tuning_mutable().gemv_fma_max_m = cpu::kGemvFmaMaxRows;
      compare(fma ? "avx512bf16_gemv fma_dot=1" : "avx512bf16_gemv fma_dot=0");
    }
    cpu::cpu_tuning_mutable() = saved;
  }
  if (cpu::cpu_path_supported(CpuPath::kGemvAmx, t)) compare("amx_gemv");  // AMX hosts only
  if (cpu::cpu_path_supported(CpuPath::kGemmAmx, t)) compare("amx");         // AMX hosts only
  if (t == DType::kBF16 && cpu::cpu_path_supported(CpuPath::kGemmAvx512Bf16, t)) compare("avx512bf16");
}

struct Case {
  std::int64_t m, n, k, kx_short;
};

TEST(CpuMatmul, AllPathsAllTargetsMatchOracle) {
  const Case cases[] = {
      {1, 1, 16, 0},   {1, 37, 32, 3},    {2, 7, 48, 0},     {3, 131, 4112, 15}, {8, 37, 4112, 0},
      {16, 13, 48, 1}, {33, 37, 272, 0},  {64, 67, 528, 7},  {1, 3, 8192, 0},    {5, 2, 4112, 9},
      {100, 131, 4112, 0}, {9, 64, 1024, 0},
      // bf16 GEMV: 256-k chunks, short activations inside the last chunk, 256-k chunks + 16 tail;
      // M=4 (MR=4 x NR=2 tile) and M=7 on the layer's K.
      {4, 67, 768, 9},     {7, 5, 14336, 0},  {2, 11, 784, 0},
      // one-pass 5..8-row tiles (MR x 2) with odd N (single-row tail tiles) and a K tail; M=3
      // takes the 3 x 4 tile (N=131: 32 tiles + 3 single rows).
      {5, 9, 1024, 0},     {6, 41, 784, 3},   {8, 3, 528, 0},
      // M = 9..24 bf16 takes the GEMV on CPUs without AMX (gemv_bf16_max_m): 3 groups of 8 rows.
      {24, 19, 1040, 5},
      // K a multiple of 1024 from 2 rows: the Highway GEMV pads x's row stride (x_row_stride).
      {8, 37, 2048, 5},
  };
  std::uint64_t seed = 1234;
  for (const Case& c : cases) {
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      ++seed;
      const std::string trace = "seed=" + std::to_string(seed) + " M=" + std::to_string(c.m) +
                                " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
                                " kx=" + std::to_string(c.k - c.kx_short) + " dtype=" + dtype_name(t);
      SCOPED_TRACE(trace);
      const Weight w = random_weight(c.n, c.k, seed);
      const std::int64_t kx = c.k - c.kx_short;
      const Act x = random_x(t, c.m, kx, kx + 3, seed * 7 + 1);
      check_all_paths(w, x, c.n + 5, trace);
    }
  }
}

// One-hot activations: y[m][n] = x_m . w_n = w[n][m] exactly, which must equal the oracle's
// dequantized weight bit for bit (dequantize_ref rounds fl(e2m1*|s|)*ts once, as the kernels do).
// Shapes: M = K rows (GEMV in 8-row groups and GEMM paths); N not a multiple of 16 (the panel
// decodes' scalar columns); K = 48 (an odd number of 16-k blocks: a zero block in the 32-k padded
// panel) and K = 1040 (three KC slices of the GEMMs, the last one block long).
TEST(CpuMatmul, OneHotRecoversDequantizeBitExact) {
  struct Shape { std::int64_t n, k; };
  for (const Shape sh : {Shape{37, 64}, Shape{33, 48}, Shape{40, 1040}}) {
    const std::int64_t n = sh.n, k = sh.k;
    const std::uint64_t seed = 99 + static_cast<std::uint64_t>(k);
    SCOPED_TRACE("N=" + std::to_string(n) + " K=" + std::to_string(k) + " seed=" + std::to_string(seed));
    const Weight w = random_weight(n, k, seed);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(dtype_name(t));
      const std::vector<std::uint8_t> deq = dequantized(w, t);
      std::vector<std::uint8_t> xb = one_hot_rows(t, k, k);
      const MatrixView xv{xb.data(), t, k, k, k};
      std::vector<std::pair<std::string, CpuPath>> paths;
      for (std::int64_t target : cpu::hwy_compiled_targets()) {
        paths.push_back({std::string("gemv/") + hwy::TargetName(target), CpuPath::kGemv});
        paths.push_back({std::string("gemm_f32/") + hwy::TargetName(target), CpuPath::kGemmF32});
      }
      for (CpuPath p : {CpuPath::kGemmAvx512Bf16, CpuPath::kGemmAmx, CpuPath::kGemvAvx512Bf16, CpuPath::kGemvAmx})
        if (cpu::cpu_path_supported(p, t)) paths.push_back({cpu::cpu_path_name(p), p});
      for (const auto& [label, p] : paths) {
        SCOPED_TRACE(label);
        const auto slash = label.find('/');
        if (slash != std::string::npos) {
          for (std::int64_t target : cpu::hwy_compiled_targets())
            if (label.substr(slash + 1) == hwy::TargetName(target)) hwy::SetSupportedTargetsForTest(target);
        }
        Out y = poisoned(t, k, n, n);
        cpu::quantized_matmul_path(xv, w.view(), y.view, p);
        hwy::SetSupportedTargetsForTest(0);
        expect_exact(  // == also treats -0 == +0 (a sum of +0 and -0 terms)
            y, k, n, [&](std::int64_t i, std::int64_t j) { return load_as_f32(deq.data(), t, j * k + i); },
            [&](std::int64_t i, std::int64_t j) { return "m=" + std::to_string(i) + " n=" + std::to_string(j); });
      }
    }
  }
}

// The Highway GEMV at M <= 8, called directly on every compiled target (on x86 without AVX-512
// this is its byte-table decode, gemv_nvfp4_hwy.cpp): no dispatcher, so no rerun on the GEMM
// can hide a NaN or Inf it produces. K = 272 / 2064: whole chunks (8 blocks on AVX2, 4 on SSE4,
// 16 on AVX-512) plus a one-block tail; K = 240: a tail of 7 blocks after one chunk on AVX2, of 3
// after three on SSE4. One-hot rows (3 and 8 per call) recover the dequantized weights bit for
// bit; random rows match the oracle; a NaN scale makes exactly its row's outputs NaN.
TEST(CpuMatmul, HwyGemvSmallMDirect) {
  const std::int64_t n = 37;
  for (std::int64_t k : {240, 272, 2064}) {
    const std::uint64_t seed = 4100 + k;
    SCOPED_TRACE("seed=" + std::to_string(seed) + " K=" + std::to_string(k));
    Weight w = random_weight(n, k, seed);
    for (std::int64_t target : cpu::hwy_compiled_targets()) {
      hwy::SetSupportedTargetsForTest(target);
      SCOPED_TRACE(target_label(target));
      for (DType t : {DType::kF32, DType::kBF16}) {
        SCOPED_TRACE(dtype_name(t));
        const std::vector<std::uint8_t> deq = dequantized(w, t);
        // One-hot rows 3 and 8 per call: the byte-table decode scales partial sums up to 3 rows and
        // the decoded weights from 4 (gemv_nvfp4_hwy.cpp); both must give the weights' exact bits.
        const std::int64_t rows = 24, k0 = k / 2 - 9;  // one-hot at columns k0 .. k0 + 23
        std::vector<std::uint8_t> xb = one_hot_rows(t, rows, k, k0);
        const int es = dtype_size(t);
        for (std::int64_t per_call : {3, 8}) {
          SCOPED_TRACE("one-hot rows per call " + std::to_string(per_call));
          Out y = poisoned(t, rows, n, n);
          for (std::int64_t r0 = 0; r0 < rows; r0 += per_call) {
            Out yc = poisoned(t, per_call, n, n);
            cpu::gemv_nvfp4_hwy(args_of(MatrixView{xb.data() + r0 * k * es, t, per_call, k, k}, w, yc.view));
            std::memcpy(y.bytes.data() + r0 * n * es, yc.bytes.data(), static_cast<std::size_t>(per_call * n * es));
          }
          expect_exact(
              y, rows, n, [&](std::int64_t i, std::int64_t j) { return load_as_f32(deq.data(), t, j * k + k0 + i); },
              [&](std::int64_t i, std::int64_t j) { return "m=" + std::to_string(i) + " n=" + std::to_string(j); });
        }
        for (std::int64_t m = 1; m <= 8; ++m) {
          SCOPED_TRACE("M=" + std::to_string(m));
          const Act x = random_x(t, m, k, k, seed + m);
          Out ref = poisoned(t, m, n, n), got = poisoned(t, m, n, n);
          quantized_matmul_ref(x.view, w.view(), ref.view);
          cpu::gemv_nvfp4_hwy(args_of(x.view, w, got.view));
          expect_matches_oracle(ref, got, abs_sums(w, x.view), w);
        }
      }
      // A NaN scale (0x7F) in row 5's block 9 (in a whole chunk at K = 272 / 2064 on every target,
      // in the tail at K = 240 on AVX2 and AVX-512), at 1, 3 and 6 rows (the byte-table decode's
      // second chain for one row, its partial sums, its scaled weights).
      Weight wn = w;
      wn.scales[static_cast<std::size_t>(5 * (k / 16) + 9)] = 0x7F;
      for (std::int64_t mm : {1, 3, 6}) {
        const Act x = random_x(DType::kF32, mm, k, k, seed + 7);
        Out got = poisoned(DType::kF32, mm, n, n);
        cpu::gemv_nvfp4_hwy(args_of(x.view, wn, got.view));
        for (std::int64_t m = 0; m < mm; ++m)
          for (std::int64_t j = 0; j < n; ++j)
            EXPECT_EQ(std::isnan(got.get(m, j)), j == 5)
                << "M=" << mm << " m=" << m << " n=" << j << " y=" << got.get(m, j);
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

// Which hosts take the FMA dot for every dtype (tuning_cpu.h gemv_fma_dtypes_rule), for the
// host classes this CI cannot run: Intel AVX512-BF16 + FP16 (Sapphire / Emerald Rapids), AVX-512
// without BF16 (Ice Lake: the FMA dot is its only fast GEMV), Zen 4 (BF16 without Intel's slow
// vdpbf16ps: the bf16 dot, except for fp32's 3 pieces), and CPUs without the FMA dot's ISA.
TEST(CpuMatmul, FmaDotDtypesRuleByHost) {
  const std::int64_t all = cpu::gemv_fma_dtype_bit(DType::kF32) | cpu::gemv_fma_dtype_bit(DType::kF16) |
                           cpu::gemv_fma_dtype_bit(DType::kBF16);
  EXPECT_EQ(cpu::gemv_fma_dtypes_rule(true, true, true), all);     // Sapphire / Emerald Rapids
  EXPECT_EQ(cpu::gemv_fma_dtypes_rule(false, false, true), all);   // Ice Lake, Tiger Lake
  EXPECT_EQ(cpu::gemv_fma_dtypes_rule(false, true, true), cpu::gemv_fma_dtype_bit(DType::kF32));  // Zen 4: fp32 only
  EXPECT_EQ(cpu::gemv_fma_dtypes_rule(false, false, false), 0);    // AVX2 only, or no VBMI
  EXPECT_EQ(cpu::gemv_fma_dtypes_rule(false, true, false), 0);     // Cooper Lake (BF16, no VBMI)
  // This host: no FMA dot where its ISA is missing, whatever the tuning table asks.
  if (!cpu::gemv_fma_dot_supported()) {
    EXPECT_EQ(cpu::gemv_fma_dtypes_default(), 0);
    const cpu::CpuTuning saved = cpu::cpu_tuning();
    cpu::cpu_tuning_mutable().gemv_fma_dtypes = all;
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16})
      EXPECT_NE(cpu::cpu_path_for(1, t), CpuPath::kGemvAvx512Bf16) << dtype_name(t);
    cpu::cpu_tuning_mutable() = saved;
  }
}

TEST(CpuMatmul, NaNScalePropagates) {
  Weight w = random_weight(5, 32, 7);
  w.scales[3] = 0x7F;  // row 1, block 1
  const Act x = random_x(DType::kF32, 2, 32, 32, 8);
  for (CpuPath p : {CpuPath::kGemv, CpuPath::kGemmF32}) {
    Out y = poisoned(DType::kF32, 2, 5, 5);
    cpu::quantized_matmul_path(x.view, w.view(), y.view, p);
    EXPECT_TRUE(std::isnan(y.get(0, 1)) && std::isnan(y.get(1, 1))) << cpu::cpu_path_name(p);
    EXPECT_FALSE(std::isnan(y.get(0, 0)) || std::isnan(y.get(1, 2))) << cpu::cpu_path_name(p);
  }
  // bf16 paths (vdpbf16ps GEMV decodes scales with integer ops, the panel decode multiplies).
  Weight wl = random_weight(5, 1024, 9);
  wl.scales[64 + 40] = 0x7F;  // row 1, block 40 (second 256-k chunk)
  const Act xb = random_x(DType::kBF16, 2, 1024, 1024, 10);
  for (CpuPath p : {CpuPath::kGemv, CpuPath::kGemvAvx512Bf16, CpuPath::kGemmAvx512Bf16, CpuPath::kGemmAmx,
                    CpuPath::kGemvAmx}) {
    if (!cpu::cpu_path_supported(p, DType::kBF16)) continue;
    Out y = poisoned(DType::kBF16, 2, 5, 5);
    cpu::quantized_matmul_path(xb.view, wl.view(), y.view, p);
    EXPECT_TRUE(std::isnan(y.get(0, 1)) && std::isnan(y.get(1, 1))) << cpu::cpu_path_name(p);
    EXPECT_FALSE(std::isnan(y.get(0, 0)) || std::isnan(y.get(1, 2))) << cpu::cpu_path_name(p);
  }
}

// |x| near FLT_MAX with small block scales: the oracle's products x * (e2m1 * scale) stay
// finite, while an unscaled block partial sum_j e2m1_j * x_j (two terms of 6 x 2^125 already
// exceed FLT_MAX) does not. K = 512 takes the GEMVs' vector loops (chunks of 16 x 16 lanes).
// Every path must return the oracle's finite result (the GEMVs recompute such calls on the GEMM).
TEST(CpuMatmul, HugeActivationsDoNotOverflowBeforeTheScale) {
  const std::uint64_t seed = 2125;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Weight w;
  constexpr std::int64_t K = 512;
  w.n = 5;
  w.k = K;
  w.ts = 1.0f;
  w.packed.resize(5 * K / 2);
  w.scales.assign(5 * K / 16, 0x01);  // 2^-9, the smallest E4M3 subnormal
  for (auto& b : w.packed) b = static_cast<std::uint8_t>(0x77 | (rng() % 2 ? 0x08 : 0) | (rng() % 2 ? 0x80 : 0));  // +-6
  for (DType dt : {DType::kF32, DType::kBF16})
    for (std::int64_t m : {1, 3}) {
      Act x;
      x.bytes.resize(static_cast<std::size_t>(m * K * dtype_size(dt)));
      for (std::int64_t i = 0; i < m * K; ++i) store_from_f32(x.bytes.data(), dt, i, std::ldexp(rng() % 2 ? 1.0f : -1.0f, 125));
      x.view = MatrixView{x.bytes.data(), dt, m, K, K};
      std::vector<float> xf(static_cast<std::size_t>(m * K));  // exact fp32 copy for the oracle
      for (std::int64_t i = 0; i < m * K; ++i) xf[static_cast<std::size_t>(i)] = load_as_f32(x.bytes.data(), dt, i);
      Out ref = poisoned(DType::kF32, m, 5, 5);
      quantized_matmul_ref(MatrixView{xf.data(), DType::kF32, m, K, K}, w.view(), ref.view);
      const double sabs = K * 6.0 * std::ldexp(1.0, 125 - 9);  // sum_k |x_k w_k|
      for (CpuPath p : {CpuPath::kAuto, CpuPath::kGemv, CpuPath::kGemvAvx512Bf16, CpuPath::kGemvAmx, CpuPath::kGemmF32,
                        CpuPath::kGemmAmx}) {
        if (p != CpuPath::kAuto && !cpu::cpu_path_supported(p, dt)) continue;
        SCOPED_TRACE(std::string(cpu::cpu_path_name(p)) + " " + dtype_name(dt) + " M=" + std::to_string(m));
        Out y = poisoned(dt, m, 5, 5);
        cpu::quantized_matmul_path(x.view, w.view(), y.view, p);
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < 5; ++j) {
            const float r = ref.get(i, j), got = y.get(i, j);
            ASSERT_TRUE(std::isfinite(r));
            EXPECT_TRUE(std::isfinite(got)) << "y[" << i << "," << j << "] = " << got << ", oracle " << r;
            EXPECT_LE(std::fabs(got - r), 1e-5 * sabs + (dt == DType::kBF16 ? std::fabs(r) / 128 : 0.0))
                << "y[" << i << "," << j << "]";
          }
      }
    }
}

TEST(CpuMatmul, AmxPathOrSkip) {
  if (!cpu::cpu_path_supported(CpuPath::kGemmAmx, DType::kBF16))
    GTEST_SKIP() << "AMX-TILE/AMX-BF16 not available on this CPU (or XTILEDATA not granted by the kernel); "
                    "the AMX GEMM is compiled but cannot run here";
  const Weight w = random_weight(67, 4112, 5);
  const Act x = random_x(DType::kBF16, 70, 4112, 4112, 6);
  check_all_paths(w, x, 67, "amx seed=5");
}

TEST(CpuMatmul, UnsupportedPathThrowsNamedError) {
  const Weight w = random_weight(4, 32, 3);
  const Act x = random_x(DType::kF32, 2, 32, 32, 4);
  Out y = poisoned(DType::kF32, 2, 4, 4);
  try {
    cpu::quantized_matmul_path(x.view, w.view(), y.view, CpuPath::kGemmAvx512Bf16);
    FAIL() << "fp32 activations must not run the bf16 kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemm_nvfp4_avx512bf16"), std::string::npos) << e.what();
  }
  // Bad shape through the public entry: validated, named error, no crash.
  const MatrixView bad_x{x.view.data, DType::kF32, 2, 48, 48};
  EXPECT_THROW(quantized_matmul(bad_x, w.view(), y.view, Backend::kCpu), Error);
}

TEST(CpuMatmul, PublicEntryUsesCpuBackend) {
  const Weight w = random_weight(19, 96, 11);
  for (std::int64_t m : {1, 12}) {
    const Act x = random_x(DType::kBF16, m, 96, 96, 12);
    Out y = poisoned(DType::kBF16, m, 19, 19), r = poisoned(DType::kBF16, m, 19, 19);
    quantized_matmul(x.view, w.view(), y.view, Backend::kCpu);
    quantized_matmul_ref(x.view, w.view(), r.view);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < 19; ++j)
        EXPECT_NEAR(y.get(i, j), r.get(i, j), 0.02 * (std::fabs(r.get(i, j)) + 1e-3)) << i << "," << j;
  }
  EXPECT_FALSE(cpu::cpu_kernel_name(1, DType::kBF16).empty());
}

// tuning_cpu.h promises "speed only, never results" for the blocking sizes that do not split
// K into separately summed segments: GEMV x block, rows per task, activation rows per pass
// (MR of the tile) and software prefetch; GEMM KC / NC / MC and prefetch. Each output must be bit-identical
// across settings (same per-lane vdpbf16ps/FMA sequence whatever the tile shape).
TEST(CpuMatmul, BlockingTuningDoesNotChangeResults) {
  const std::uint64_t seed = 4242;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Weight w = random_weight(45, 1552, seed);  // 6 chunks of 256 + 16 tail
  const cpu::CpuTuning saved = cpu::cpu_tuning();
  for (std::int64_t m : {3, 5, 8, 40})
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    SCOPED_TRACE("M=" + std::to_string(m) + " dtype=" + dtype_name(dt));
    const Act x = random_x(dt, m, 1552, 1552, seed + m);
    std::vector<CpuPath> paths = {CpuPath::kGemvAvx512Bf16, CpuPath::kGemmAmx};
    if (dt == DType::kBF16) {
      paths = {CpuPath::kGemv, CpuPath::kGemmF32};
      for (CpuPath p : {CpuPath::kGemvAvx512Bf16, CpuPath::kGemmAvx512Bf16, CpuPath::kGemmAmx})
        paths.push_back(p);
    }
    paths.erase(std::remove_if(paths.begin(), paths.end(), [&](CpuPath p) { return !cpu::cpu_path_supported(p, dt); }),
                paths.end());
    for (CpuPath p : paths) {
      SCOPED_TRACE(cpu::cpu_path_name(p));
      std::vector<std::vector<std::uint8_t>> outs;
      for (int v = 0; v < 3; ++v) {
        cpu::CpuTuning t = saved;
        t.gemv_min_tasks_per_thread = 0;  // never split K: the split is the one order-changing knob
        t.gemv_x_block_bytes = v == 0 ? 1 : v == 1 ? 16384 : (1 << 22);
        t.gemv_rows_per_task = v == 0 ? 1 : v == 1 ? 8 : 64;
        t.gemv_task_bytes = v == 0 ? 0 : v == 1 ? 4096 : (1 << 20);
        t.gemv_avx512bf16_rows_per_task = v == 0 ? 1 : v == 1 ? 8 : 64;
        t.gemv_avx512bf16_rows_per_task_m1 = v == 0 ? 64 : v == 1 ? 1 : 8;
        t.gemv_group_rows = v == 0 ? 1 : v == 1 ? 3 : 8;
        t.gemv_prefetch_tiles = v == 0 ? 0 : v == 1 ? 1 : 3;
        t.gemv_fma_prefetch_tiles = v == 0 ? 0 : v == 1 ? 2 : 3;  // the FMA dot's own distance
        t.gemv_fma_x_block_bytes = v == 0 ? 1 : v == 1 ? 16384 : (1 << 22);
        t.gemv_fma_group_rows = v == 0 ? 1 : v == 1 ? 4 : 6;
        t.gemv_prefetch_min_m = 1;
        t.gemv_prefetch_l2 = v == 1 ? 0 : 1;  // prefetcht0 and prefetcht1 paths
        t.gemv_prefetch_short_k_max_m = v == 1 ? 0 : 64;  // M = 8 / 40 with and without
        t.gemm_kc = v == 0 ? 32 : v == 1 ? 512 : 4096;
        t.gemm_nc = v == 0 ? 32 : v == 1 ? 128 : 256;
        t.gemm_mc = v == 0 ? 32 : v == 1 ? 512 : 64;
        t.gemm_prefetch = v == 1 ? 0 : 1;
        cpu::cpu_tuning_mutable() = t;
        Out y = poisoned(dt, m, w.n, w.n);
        cpu::quantized_matmul_path(x.view, w.view(), y.view, p);
        outs.push_back(y.bytes);
      }
      cpu::cpu_tuning_mutable() = saved;
      EXPECT_EQ(outs[0], outs[1]);
      EXPECT_EQ(outs[1], outs[2]);
    }
  }
}

// The fp32 GEMM's outer-product kernel forms each output as one FMA chain over k ascending on
// every target with FMAs, so the AVX-512 targets and AVX2 (each with its own panel decode in
// vectors and register transposes, transpose_x86.h) must give the same bytes: any weight decoded
// wrong, misplaced or given another row's scale by either changes them. (Targets without FMAs keep
// the scalar decode, checked against the oracle in AllPathsAllTargetsMatchOracle.) Partial column
// groups (N = 45, 67), a K slice of 16 (K = 1552 with KC = 512) and every dtype.
// AVX2's dot-form kernel (M <= gemm_dot_max_m) sums in another order, so it is turned off here;
// AllPathsAllTargetsMatchOracle and BlockingTuningDoesNotChangeResults check it. (With it on,
// M = 5 and M = 1 differed from AVX3_DL in the last bits on the device host, 2026-12-07.)
TEST(CpuMatmul, Fp32GemmSameBitsOnEveryFmaTarget) {
  std::vector<std::int64_t> fma_targets;
  for (std::int64_t t : cpu::hwy_compiled_targets())
    if (t == HWY_AVX2 || t == HWY_AVX3 || t == HWY_AVX3_DL) fma_targets.push_back(t);
  const bool avx2 = std::count(fma_targets.begin(), fma_targets.end(), HWY_AVX2) == 1;
  if (!avx2 || fma_targets.size() < 2)
    GTEST_SKIP() << "needs AVX2 and an AVX-512 Highway target on this CPU (has " << fma_targets.size() << " of them)";
  const std::uint64_t seed = 8080;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const cpu::CpuTuning saved = cpu::cpu_tuning();
  cpu::cpu_tuning_mutable().gemm_dot_max_m = 0;  // the outer-product kernel at every M
  struct S { std::int64_t m, n, k; };
  for (const S& c : {S{5, 45, 1552}, S{40, 67, 528}, S{1, 32, 16}}) {
    const Weight w = random_weight(c.n, c.k, seed + c.n);
    for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
      SCOPED_TRACE("M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
                   " dtype=" + dtype_name(dt));
      const Act x = random_x(dt, c.m, c.k, c.k, seed + c.m);
      std::vector<std::vector<std::uint8_t>> outs;
      for (std::int64_t t : fma_targets) {
        hwy::SetSupportedTargetsForTest(t);
        Out y = poisoned(dt, c.m, c.n, c.n);
        cpu::quantized_matmul_path(x.view, w.view(), y.view, CpuPath::kGemmF32);
        outs.push_back(y.bytes);
      }
      hwy::SetSupportedTargetsForTest(0);
      for (std::size_t i = 1; i < outs.size(); ++i)
        EXPECT_EQ(outs[0], outs[i]) << target_label(fma_targets[0]) << " against " << target_label(fma_targets[i]);
    }
  }
  cpu::cpu_tuning_mutable() = saved;
}

// ---- AVX512-BF16 GEMV with fp16 / fp32 activations (exact bf16 pieces) -------------------------

// For the life of the object, the GEMV kernel runs the split (vdpbf16ps) dot at every M: where
// the FMA dot is the host's default (gemv_fma_dtypes, gemv_fma_max_m) it takes these M instead,
// without a split, and these tests are about the split.
struct SplitDotOnly {
  cpu::CpuTuning saved = cpu::cpu_tuning();
  SplitDotOnly() { cpu::cpu_tuning_mutable().gemv_fma_dtypes = 0; }
  ~SplitDotOnly() { cpu::cpu_tuning_mutable() = saved; }
};

// Every dtype, M = 1..8, odd N, K with and without a 256-k tail and short activations: the split
// must be taken (the kernel returns true), and every path must match the oracle within tolerance.
TEST(CpuMatmulSplit, AdversarialActivationsMatchOracle) {
  if (!cpu::cpu_path_supported(CpuPath::kGemvAvx512Bf16, DType::kF32))
    GTEST_SKIP() << "AVX512-BF16 + VBMI not available: the split GEMV cannot run here";
  const Case cases[] = {{1, 37, 16, 0}, {2, 131, 48, 5}, {3, 37, 784, 0}, {4, 41, 4112, 9},
                        {5, 7, 512, 0}, {6, 13, 272, 3}, {7, 11, 1024, 0}, {8, 37, 784, 1}};
  const SplitDotOnly split_dot;  // (check_all_paths runs both dots)
  std::uint64_t seed = 777;
  for (const Case& c : cases)
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      ++seed;
      const std::int64_t kx = c.k - c.kx_short;
      const std::string trace = "seed=" + std::to_string(seed) + " M=" + std::to_string(c.m) + " N=" +
                                std::to_string(c.n) + " K=" + std::to_string(c.k) + " kx=" + std::to_string(kx) +
                                " dtype=" + dtype_name(t);
      SCOPED_TRACE(trace);
      const Weight w = random_weight(c.n, c.k, seed);
      const Act x = t == DType::kBF16 ? random_x(t, c.m, kx, kx + 1, seed * 3) : adversarial_x(t, c.m, kx, kx + 1, seed * 3);
      Out y = poisoned(t, c.m, c.n, c.n);
      EXPECT_TRUE(cpu::gemv_nvfp4_avx512bf16(args_of(x.view, w, y.view))) << "split refused";
      check_all_paths(w, x, c.n + 2, trace);
    }
}

// Row i of x has one nonzero, a value needing all its significant bits (fp32: 24, fp16: 11),
// at k_i. The oracle gives fl(fl(x w) ts); the split kernel forms lo*w + mid*w (exact: a 16-bit
// r1 times a <= 6-bit w), + hi*w (one rounding: fl(x w)), then * ts: the same bits. So any lost,
// doubled or misplaced piece (even the 2^-16 lo piece) fails. Output in fp32, fp16 and bf16.
TEST(CpuMatmulSplit, ScaledOneHotSplitIsBitExact) {
  if (!cpu::cpu_path_supported(CpuPath::kGemvAvx512Bf16, DType::kF32))
    GTEST_SKIP() << "AVX512-BF16 + VBMI not available: the split GEMV cannot run here";
  const std::uint64_t seed = 31337;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const SplitDotOnly split_dot;
  for (const std::int64_t k : {std::int64_t{784}, std::int64_t{48}}) {
    const std::int64_t n = 37, m = 24;  // 24 rows: 3 passes of 8 rows (fp16: 48, fp32: 72 kernel rows)
    const Weight w = random_weight(n, k, seed + k);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " K=" + std::to_string(k));
      std::vector<std::uint8_t> xb = scaled_one_hot_x(t, m, k, seed * 5 + k, -102);
      const MatrixView xv{xb.data(), t, m, k, k};
      Out ref = poisoned(t, m, n, n), y = poisoned(t, m, n, n);
      quantized_matmul_ref(xv, w.view(), ref.view);
      EXPECT_TRUE(cpu::gemv_nvfp4_avx512bf16(args_of(xv, w, y.view))) << "split refused";
      expect_exact(
          y, m, n, [&](std::int64_t i, std::int64_t j) { return ref.get(i, j); },
          [&](std::int64_t i, std::int64_t j) {
            return "m=" + std::to_string(i) + " n=" + std::to_string(j) +
                   " x=" + std::to_string(load_as_f32(xb.data(), t, i * k + (i * 37 + 5) % k));
          });
    }
  }
}

// The same bit-exactness on the AMX GEMM, whose pieces meet scaled weights: fp32 from 2^-93 (its
// bound), 40 rows = 120 fp32 virtual rows, with the default MC and with MC = 32 (96 virtual rows
// per task for fp32: a task boundary inside the rows, never inside a row's pieces).
TEST(CpuMatmulSplit, AmxGemmScaledOneHotIsBitExact) {
  if (!cpu::cpu_path_supported(CpuPath::kGemmAmx, DType::kF32))
    GTEST_SKIP() << "AMX not available (or XTILEDATA not granted): the AMX GEMM cannot run here";
  const std::uint64_t seed = 4093;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const cpu::CpuTuning saved = cpu::cpu_tuning();
  for (const std::int64_t mc : {saved.gemm_mc, std::int64_t{32}})
    for (const std::int64_t k : {std::int64_t{784}, std::int64_t{48}}) {
      const std::int64_t n = 37, m = 40;
      const Weight w = random_weight(n, k, seed + k);
      cpu::CpuTuning t = saved;
      t.gemm_mc = mc;
      cpu::cpu_tuning_mutable() = t;
      for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " K=" + std::to_string(k) + " MC=" + std::to_string(mc));
        std::vector<std::uint8_t> xb = scaled_one_hot_x(dt, m, k, seed * 5 + k, -93);
        const MatrixView xv{xb.data(), dt, m, k, k};
        Out ref = poisoned(dt, m, n, n), y = poisoned(dt, m, n, n);
        quantized_matmul_ref(xv, w.view(), ref.view);
        EXPECT_TRUE(cpu::gemm_nvfp4_bf16(args_of(xv, w, y.view), cpu::Bf16Kernel::kAmx)) << "split refused";
        expect_exact(
            y, m, n, [&](std::int64_t i, std::int64_t j) { return ref.get(i, j); },
            [&](std::int64_t i, std::int64_t j) {
              return "m=" + std::to_string(i) + " n=" + std::to_string(j) +
                     " x=" + std::to_string(load_as_f32(xb.data(), dt, i * k + (i * 37 + 5) % k));
            });
      }
    }
  cpu::cpu_tuning_mutable() = saved;
}

// Data the split cannot take exactly: the kernel refuses (returns false) and writes nothing; the
// dispatched path (Highway GEMV fallback) still matches the oracle.
TEST(CpuMatmulSplit, UnsplittableDataFallsBackAndMatches) {
  if (!cpu::cpu_path_supported(CpuPath::kGemvAvx512Bf16, DType::kF32))
    GTEST_SKIP() << "AVX512-BF16 + VBMI not available: the split GEMV cannot run here";
  const Weight w = random_weight(13, 528, 5);
  struct Bad { DType t; float v; bool split; const char* what; };
  const Bad bads[] = {
      {DType::kF32, std::ldexp(1.0f, -103), false, "2^-103"},
      {DType::kF32, std::ldexp(1.5f, -103), false, "1.5 * 2^-103"},
      {DType::kF32, f32_from_bits(0x00000001u), false, "smallest fp32 subnormal"},
      {DType::kF32, -f32_from_bits(0x007FFFFFu), false, "largest fp32 subnormal"},
      {DType::kF32, std::ldexp(1.0f, 120), false, "2^120"},
      {DType::kF32, std::ldexp(1.0f, 127), false, "2^127"},
      {DType::kF32, std::ldexp(1.0f, -102), true, "2^-102 (accepted)"},
      {DType::kF32, -f32_from_bits(0x7B7FFFFFu), true, "-(2^120 - 2^96) (accepted)"},
      {DType::kF16, std::ldexp(1.0f, -24), true, "fp16 smallest subnormal (accepted)"},
      {DType::kF16, 65504.0f, true, "fp16 max (accepted)"},
  };
  for (const Bad& b : bads) {
    for (std::int64_t pos : {std::int64_t{0}, std::int64_t{517}, std::int64_t{527}}) {
      SCOPED_TRACE(std::string(b.what) + " dtype=" + dtype_name(b.t) + " at k=" + std::to_string(pos) + " seed=6");
      Act x = random_x(b.t, 3, 528, 530, 6);
      store_from_f32(x.bytes.data(), b.t, 1 * 530 + pos, b.v);
      Out y = poisoned(b.t, 3, 13, 13);
      {
        const SplitDotOnly split_dot;
        EXPECT_EQ(cpu::gemv_nvfp4_avx512bf16(args_of(x.view, w, y.view)), b.split);
      }
      if (!b.split) {
        for (std::int64_t i = 0; i < 3 * 13; ++i) ASSERT_TRUE(std::isnan(y.get(i / 13, i % 13))) << "wrote before refusing";
      }
      if (cpu::cpu_path_supported(CpuPath::kGemmAmx, b.t)) {
        // The AMX GEMM's bound is 2^-93 (kAmxSplitMinExpF32): 2^-102 is refused there too.
        const bool amx_split = b.split && !(b.t == DType::kF32 && std::fabs(b.v) < 0x1p-93f);
        Out ya = poisoned(b.t, 3, 13, 13);
        EXPECT_EQ(cpu::gemm_nvfp4_bf16(args_of(x.view, w, ya.view), cpu::Bf16Kernel::kAmx), amx_split);
        if (!amx_split) {
          for (std::int64_t i = 0; i < 3 * 13; ++i) ASSERT_TRUE(std::isnan(ya.get(i / 13, i % 13))) << "AMX GEMM wrote before refusing";
        }
      }
      // Near FLT_MAX any two summation orders may overflow differently (the Highway GEMV's
      // unscaled block partial e2m1 * x overflows above ~2^121 before the scale <= 448 / >= 2^-9
      // applies): the oracle comparison is for the small values.
      if (std::fabs(b.v) < 0x1p100f) check_all_paths(w, x, 13, b.what);
    }
  }
}

// The dispatcher follows the tuning table's per-M choice for fp16/fp32 (and bf16 always takes
// the vdpbf16ps GEMV up to gemv_max_m); the public entry then matches the oracle.
TEST(CpuMatmulSplit, DispatchFollowsTuningTable) {
  if (!cpu::cpu_path_supported(CpuPath::kGemvAvx512Bf16, DType::kF32))
    GTEST_SKIP() << "AVX512-BF16 + VBMI not available: the split GEMV cannot run here";
  const cpu::CpuTuning saved = cpu::cpu_tuning();
  cpu::CpuTuning t = saved;
  t.gemv_split_f32_rows = 0x2;   // M = 2 only
  t.gemv_split_f16_rows = 0x81;  // M = 1 and 8
  // The chain below the AMX GEMV: with gemv_amx_rows = 0 it is the same on every host (an AMX
  // host would otherwise take the AMX GEMV for these M first). The AMX link is checked after.
  t.gemv_amx_rows = 0;
  t.gemv_amx_max_virtual_rows = 0;
  t.gemv_fma_dtypes = 0;  // checked below
  t.gemm_bf16_fp32_min_m = std::numeric_limits<std::int64_t>::max();  // checked below
  cpu::cpu_tuning_mutable() = t;
  EXPECT_EQ(cpu::cpu_path_for(1, DType::kF32), CpuPath::kGemv);
  EXPECT_EQ(cpu::cpu_path_for(2, DType::kF32), CpuPath::kGemvAvx512Bf16);
  EXPECT_EQ(cpu::cpu_path_for(3, DType::kF32), CpuPath::kGemv);
  EXPECT_EQ(cpu::cpu_path_for(1, DType::kF16), CpuPath::kGemvAvx512Bf16);
  EXPECT_EQ(cpu::cpu_path_for(4, DType::kF16), CpuPath::kGemv);
  EXPECT_EQ(cpu::cpu_path_for(8, DType::kF16), CpuPath::kGemvAvx512Bf16);
  EXPECT_EQ(cpu::cpu_path_for(5, DType::kBF16), CpuPath::kGemvAvx512Bf16);
  EXPECT_EQ(cpu::cpu_kernel_name(2, DType::kF32), "gemv_nvfp4_avx512bf16_sp3");
  EXPECT_EQ(cpu::cpu_kernel_name(1, DType::kF16), "gemv_nvfp4_avx512bf16_sp2");
  {  // gemv_fma_dtypes: M = 1 and 2 (gemv_fma_max_m) of every dtype take the GEMV (its FMA dot),
     // ahead of the AMX GEMV where that would take them; other M unchanged.
    cpu::CpuTuning tf = t;
    tf.gemv_fma_dtypes = 7;  // every dtype
    tf.gemv_fma_max_m = 2;
    tf.gemv_amx_rows = 0x2;  // M = 2 on AMX, where the FMA dot does not take it
    cpu::cpu_tuning_mutable() = tf;
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
      for (std::int64_t m : {1, 2}) {
        EXPECT_EQ(cpu::cpu_path_for(m, dt), CpuPath::kGemvAvx512Bf16) << dtype_name(dt) << " M=" << m;
        EXPECT_EQ(cpu::cpu_kernel_name(m, dt), "gemv_nvfp4_avx512fma") << dtype_name(dt) << " M=" << m;
      }
    EXPECT_EQ(cpu::cpu_path_for(3, DType::kF32), CpuPath::kGemv);
    tf.gemv_fma_max_m = 1;
    tf.gemv_amx_rows = 0;
    cpu::cpu_tuning_mutable() = tf;
    EXPECT_EQ(cpu::cpu_kernel_name(2, DType::kF32), "gemv_nvfp4_avx512bf16_sp3");
    tf.gemv_fma_max_m = 8;  // M = 3 .. 8 too (groups of gemv_fma_group_rows)
    cpu::cpu_tuning_mutable() = tf;
    EXPECT_EQ(cpu::cpu_kernel_name(2, DType::kF32), "gemv_nvfp4_avx512fma");
    EXPECT_EQ(cpu::cpu_kernel_name(8, DType::kF32), "gemv_nvfp4_avx512fma");
    EXPECT_EQ(cpu::cpu_path_for(3, DType::kF32), CpuPath::kGemvAvx512Bf16);
    EXPECT_NE(cpu::cpu_kernel_name(9, DType::kBF16), "gemv_nvfp4_avx512fma");
    tf.gemv_fma_max_m = 1000;  // more than kGemvFmaMaxRows: that many
    cpu::cpu_tuning_mutable() = tf;
    EXPECT_EQ(cpu::cpu_kernel_name(cpu::kGemvFmaMaxRows, DType::kBF16), "gemv_nvfp4_avx512fma");
    EXPECT_NE(cpu::cpu_kernel_name(cpu::kGemvFmaMaxRows + 1, DType::kBF16), "gemv_nvfp4_avx512fma");
    tf.gemv_fma_dtypes = 0;  // no dtype: M = 2 on AMX again where it runs
    tf.gemv_amx_rows = 0x2;
    cpu::cpu_tuning_mutable() = tf;
    if (cpu::gemv_amx_supported()) {
      EXPECT_EQ(cpu::cpu_path_for(2, DType::kBF16), CpuPath::kGemvAmx);
    }
    cpu::cpu_tuning_mutable() = t;
  }
  {  // Above gemv_max_m: the vdpbf16ps GEMV up to the dtype's bound where the host has no AMX,
     // the GEMM above it (the AMX GEMM for every dtype where it runs; else bf16: the vdpbf16ps
     // GEMM, fp16 / fp32: the fp32 GEMM).
    const bool amx = cpu::cpu_path_supported(CpuPath::kGemmAmx, DType::kBF16);
    struct B { DType t; std::int64_t max_m; CpuPath gemm; };
    const auto bounds = [&](const cpu::CpuTuning& u) {
      return std::vector<B>{B{DType::kBF16, u.gemv_bf16_max_m, amx ? CpuPath::kGemmAmx : CpuPath::kGemmAvx512Bf16},
                            B{DType::kF16, u.gemv_f16_max_m, amx ? CpuPath::kGemmAmx : CpuPath::kGemmF32},
                            B{DType::kF32, u.gemv_f32_max_m, amx ? CpuPath::kGemmAmx : CpuPath::kGemmF32}};
    };
    // Every dtype with a mid range (the defaults may leave one without: fp32's bound is
    // gemv_max_m since 2026-12-03, tuning_cpu.h), then the defaults' upper ends.
    cpu::CpuTuning tm = t;
    for (std::int64_t* bound : {&tm.gemv_bf16_max_m, &tm.gemv_f16_max_m, &tm.gemv_f32_max_m})
      *bound = std::max(*bound, t.gemv_max_m + 4);
    cpu::cpu_tuning_mutable() = tm;
    for (const B& b : bounds(tm)) {
      SCOPED_TRACE(dtype_name(b.t));
      EXPECT_EQ(cpu::cpu_path_for(t.gemv_max_m + 1, b.t), amx ? b.gemm : CpuPath::kGemvAvx512Bf16);
      EXPECT_EQ(cpu::cpu_path_for(b.max_m, b.t), amx ? b.gemm : CpuPath::kGemvAvx512Bf16);
      EXPECT_EQ(cpu::cpu_path_for(b.max_m + 1, b.t), b.gemm);
    }
    cpu::cpu_tuning_mutable() = t;
    for (const B& b : bounds(t)) {
      SCOPED_TRACE(std::string("defaults, ") + dtype_name(b.t));
      EXPECT_EQ(cpu::cpu_path_for(std::max(b.max_m, t.gemv_max_m) + 1, b.t), b.gemm);
    }
    // Where the dtype takes the FMA dot (vdpbf16ps is the slow unit), mid M skips the vdpbf16ps
    // GEMV for the GEMM.
    cpu::CpuTuning tv = t;
    tv.gemv_fma_dtypes = 7;
    tv.gemv_fma_max_m = 2;
    cpu::cpu_tuning_mutable() = tv;
    EXPECT_EQ(cpu::cpu_path_for(t.gemv_max_m + 1, DType::kBF16), amx ? CpuPath::kGemmAmx : CpuPath::kGemmAvx512Bf16);
    EXPECT_EQ(cpu::cpu_path_for(t.gemv_max_m + 1, DType::kF16), amx ? CpuPath::kGemmAmx : CpuPath::kGemmF32);
    // gemm_bf16_fp32_min_m: from that M bf16 takes the fp32 GEMM instead of the vdpbf16ps GEMM
    // (no effect where the AMX GEMM runs, which comes first).
    cpu::CpuTuning tg = t;
    tg.gemm_bf16_fp32_min_m = 100;
    cpu::cpu_tuning_mutable() = tg;
    EXPECT_EQ(cpu::cpu_path_for(99, DType::kBF16), amx ? CpuPath::kGemmAmx : CpuPath::kGemmAvx512Bf16);
    EXPECT_EQ(cpu::cpu_path_for(100, DType::kBF16), amx ? CpuPath::kGemmAmx : CpuPath::kGemmF32);
    cpu::cpu_tuning_mutable() = t;
  }
  {  // The AMX link on top: M = 2 and 5 in gemv_amx_rows take it exactly where it can run.
    cpu::CpuTuning ta = t;
    ta.gemv_amx_rows = 0x12;
    cpu::cpu_tuning_mutable() = ta;
    const bool amx = cpu::gemv_amx_supported();
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(dtype_name(dt));
      // Without AMX, M = 5 falls through: bf16 takes the vdpbf16ps GEMV, fp16/fp32 (M=5 not in
      // their split rows) the Highway GEMV.
      const CpuPath below = dt == DType::kBF16 ? CpuPath::kGemvAvx512Bf16 : CpuPath::kGemv;
      EXPECT_EQ(cpu::cpu_path_for(5, dt), amx ? CpuPath::kGemvAmx : below);
    }
    EXPECT_EQ(cpu::cpu_path_for(2, DType::kF32), amx ? CpuPath::kGemvAmx : CpuPath::kGemvAvx512Bf16);
    EXPECT_EQ(cpu::cpu_path_for(3, DType::kF32), CpuPath::kGemv);
    EXPECT_EQ(cpu::cpu_kernel_name(2, DType::kF32), amx ? "gemv_nvfp4_amx_sp3" : "gemv_nvfp4_avx512bf16_sp3");
    // Above M = 16, by virtual rows (M x pieces): 48 -> bf16 M <= 48, fp16 M <= 24, fp32 M <= 16.
    ta.gemv_amx_max_virtual_rows = 48;
    cpu::cpu_tuning_mutable() = ta;
    struct V { DType t; std::int64_t last; };
    for (const V& v : {V{DType::kBF16, 48}, V{DType::kF16, 24}}) {
      SCOPED_TRACE(dtype_name(v.t));
      EXPECT_EQ(cpu::cpu_path_for(17, v.t) == CpuPath::kGemvAmx, amx);
      EXPECT_EQ(cpu::cpu_path_for(v.last, v.t) == CpuPath::kGemvAmx, amx);
      EXPECT_NE(cpu::cpu_path_for(v.last + 1, v.t), CpuPath::kGemvAmx);
    }
    EXPECT_NE(cpu::cpu_path_for(17, DType::kF32), CpuPath::kGemvAmx);
    if (amx) {
      EXPECT_EQ(cpu::cpu_kernel_name(25, DType::kF16), "gemm_nvfp4_amx_sp2");
    }
    cpu::cpu_tuning_mutable() = t;
  }
  const Weight w = random_weight(23, 784, 12);
  for (DType dt : {DType::kF32, DType::kF16})
    for (std::int64_t m : {1, 2, 8}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " M=" + std::to_string(m) + " seed=13");
      const Act x = random_x(dt, m, 784, 784, 13);
      Out y = poisoned(dt, m, 23, 23), r = poisoned(dt, m, 23, 23);
      quantized_matmul(x.view, w.view(), y.view, Backend::kCpu);
      quantized_matmul_ref(x.view, w.view(), r.view);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < 23; ++j) {
          if (y.get(i, j) == r.get(i, j)) continue;  // incl. equal fp16 overflow to Inf
          EXPECT_NEAR(y.get(i, j), r.get(i, j), 1e-3 * (std::fabs(r.get(i, j)) + 1e-3)) << i << "," << j;
        }
    }
  cpu::cpu_tuning_mutable() = saved;
}

// NaN / +-Inf activations: the NaN / Inf pattern of y must equal the oracle's on every path and
// dtype (NaN row -> NaN everywhere; Inf -> +-Inf, or NaN where the weight is 0 or +Inf meets -Inf).
TEST(CpuMatmulSplit, NaNInfActivationsPropagateLikeOracle) {
  const std::uint64_t seed = 4711;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Weight w = random_weight(29, 784, seed);
  w.ts = 1.0f;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16})
    for (std::int64_t m : {1, 3, 8}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " M=" + std::to_string(m));
      Act x = random_x(t, m, 784, 784, seed + m);
      store_from_f32(x.bytes.data(), t, 0 * 784 + 100, m == 3 ? NAN : INFINITY);
      if (m > 1) {
        store_from_f32(x.bytes.data(), t, 1 * 784 + 7, -INFINITY);
        store_from_f32(x.bytes.data(), t, 2 * 784 + 300, INFINITY);
        store_from_f32(x.bytes.data(), t, 2 * 784 + 781, -INFINITY);  // + and - Inf in one row
      }
      if (m == 8) store_from_f32(x.bytes.data(), t, 7 * 784 + 783, NAN);  // in the 16-k tail
      check_all_paths(w, x, 29, std::string("naninf ") + dtype_name(t));
    }
}

TEST(CpuParallelFor, RunsEveryTaskOnceAndNests) {
  std::vector<int> hits(1000, 0);
  cpu::parallel_for(1000, [&](std::int64_t t) {
    hits[static_cast<std::size_t>(t)] += 1;
    cpu::parallel_for(3, [&](std::int64_t) {});  // nested: serial, no deadlock
  });
  for (int h : hits) EXPECT_EQ(h, 1);
  EXPECT_GE(cpu::num_threads(), 1);
}

}  // namespace
}  // namespace nvfp4
