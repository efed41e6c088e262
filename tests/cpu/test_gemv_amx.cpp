// tests/cpu/test_gemv_amx.cpp -- the AMX GEMV (gemv_nvfp4_amx.cpp) against the oracle, twice:
//   * "emulated": the whole kernel (decode, B layout, tiling, threads, K split, epilogue) with the
//     tile operations emulated in scalar code: runs wherever AVX512-BF16 + VBMI exist (Zen 4, SPR);
//   * "amx": the real instructions, where amx_supported(); elsewhere GTEST_SKIP "no AMX on this CPU".
// Tolerance: the one of test_matmul_cpu.cpp (expect_matches_oracle); bit-exact where a single
// term survives (one-hot activations recover dequantize_ref; scaled one-hot fp32/fp16 recovers
// fl(fl(x w) ts), so every split piece must land exactly).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_test_util.h"
#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cpu/tuning_cpu.h"
#include "nvfp4/error.h"
#include "nvfp4/ops.h"

namespace nvfp4 {
namespace {

using namespace cputest;

enum class Variant { kEmulated, kAmx };

class GemvAmx : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    if (GetParam() == Variant::kAmx && !cpu::amx_supported()) GTEST_SKIP() << "no AMX on this CPU";
    if (!cpu::gemv_avx512bf16_supported())
      GTEST_SKIP() << "no AVX512-BF16 + VBMI on this CPU: the AMX GEMV's decode cannot run here";
  }
  // Runs the kernel; false = it refused the activations (unsplittable), y untouched.
  bool run(const MatrixView& x, const Weight& w, const MatrixView& y) const {
    const cpu::MatmulArgs a = args_of(x, w, y);
    return GetParam() == Variant::kAmx ? cpu::gemv_nvfp4_amx(a) : cpu::gemv_nvfp4_amx_emulated(a);
  }
  void check(const Weight& w, const Act& x, std::int64_t y_stride) const {
    const DType t = x.view.dtype;
    Out ref = poisoned(t, x.view.rows, w.n, w.n), y = poisoned(t, x.view.rows, w.n, y_stride);
    quantized_matmul_ref(x.view, w.view(), ref.view);
    ASSERT_TRUE(run(x.view, w, y.view)) << "kernel refused splittable activations";
    expect_matches_oracle(ref, y, abs_sums(w, x.view), w);
  }
};

std::string variant_name(const ::testing::TestParamInfo<Variant>& i) {
  return i.param == Variant::kAmx ? "amx" : "emulated";
}
INSTANTIATE_TEST_SUITE_P(Cpu, GemvAmx, ::testing::Values(Variant::kEmulated, Variant::kAmx), variant_name);

// M = 1..16 (3, 5, 9, 16 incl.: 1 / 2 / 3 C tiles of virtual rows per weight tile for fp32),
// N around the 16-row tile and 64-row task (1, 17, 97), K = 16 (tail group only), 32, 48, 4112
// (128 groups + tail), short activations (kx < K); every dtype.
TEST_P(GemvAmx, ShapesMatchOracle) {
  std::uint64_t seed = 5000;
  for (std::int64_t m : {1, 2, 3, 5, 8, 9, 16})
    for (std::int64_t n : {1, 17, 97})
      for (std::int64_t k : {16, 32, 48, 4112})
        for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
          ++seed;
          const std::int64_t kx = k - static_cast<std::int64_t>(seed % 3 == 0 ? seed % 16 : 0);
          SCOPED_TRACE("seed=" + std::to_string(seed) + " M=" + std::to_string(m) + " N=" + std::to_string(n) +
                       " K=" + std::to_string(k) + " kx=" + std::to_string(kx) + " dtype=" + dtype_name(t));
          const Weight w = random_weight(n, k, seed);
          const Act x = random_x(t, m, kx, kx + 2, seed * 7 + 1);
          check(w, x, n + 3);
        }
}

// The layer's K (448 groups, split into segments for small N) and 64+ rows per task.
TEST_P(GemvAmx, LongKMatchesOracle) {
  std::uint64_t seed = 6000;
  for (const auto& [m, n] : {std::pair<std::int64_t, std::int64_t>{3, 17}, {16, 131}, {8, 5}})
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      ++seed;
      SCOPED_TRACE("seed=" + std::to_string(seed) + " M=" + std::to_string(m) + " N=" + std::to_string(n) +
                   " K=14336 dtype=" + dtype_name(t));
      const Weight w = random_weight(n, 14336, seed);
      const Act x = random_x(t, m, 14336, 14336, seed * 3);
      check(w, x, n);
    }
}

// Adversarial activations (full-mantissa fp32 from 2^-93 to 2^100, fp16 incl. subnormals).
TEST_P(GemvAmx, AdversarialActivationsMatchOracle) {
  std::uint64_t seed = 7000;
  for (std::int64_t m : {2, 5, 16})
    for (DType t : {DType::kF32, DType::kF16}) {
      ++seed;
      SCOPED_TRACE("seed=" + std::to_string(seed) + " M=" + std::to_string(m) + " dtype=" + dtype_name(t));
      const Weight w = random_weight(41, 784, seed);
      Act x = adversarial_x(t, m, 784, 785, seed * 3);
      // adversarial_x goes down to 2^-102, below this kernel's 2^-93 bound: lift those values.
      if (t == DType::kF32)
        for (std::int64_t i = 0; i < m * 785; ++i) {
          const float v = load_as_f32(x.bytes.data(), t, i);
          if (v != 0.0f && std::fabs(v) < 0x1p-93f) store_from_f32(x.bytes.data(), t, i, std::ldexp(v, 9));
        }
      check(w, x, 41);
    }
}

// One-hot activations, 16 rows per call (k0 .. k0+15): y[i][n] = w[n][k0+i] exactly, equal to
// dequantize_ref bit for bit; fp32 output (3 pieces = 48 virtual rows: 3 chunks per pass).
TEST_P(GemvAmx, OneHotRecoversDequantizeBitExact) {
  const std::uint64_t seed = 8001;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (std::int64_t k : {48, 80}) {
    const std::int64_t n = 37;
    const Weight w = random_weight(n, k, seed + k);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " K=" + std::to_string(k));
      const std::vector<std::uint8_t> deq = dequantized(w, t);
      for (std::int64_t k0 = 0; k0 < k; k0 += 16) {
        std::vector<std::uint8_t> xb = one_hot_rows(t, 16, k, k0);
        const MatrixView xv{xb.data(), t, 16, k, k};
        Out y = poisoned(t, 16, n, n);
        ASSERT_TRUE(run(xv, w, y.view));
        expect_exact(
            y, 16, n, [&](std::int64_t i, std::int64_t j) { return load_as_f32(deq.data(), t, j * k + k0 + i); },
            [&](std::int64_t i, std::int64_t j) { return "k=" + std::to_string(k0 + i) + " n=" + std::to_string(j); });
      }
    }
  }
}

// One nonzero per row needing every significant bit, fp32 down to the kernel's 2^-93 bound and
// up to 2^119, fp16 every exponent: y = fl(fl(x w) ts) bit for bit, so a lost or misplaced piece
// (even the ~2^-16 lo piece) fails. 16 rows = 48 (fp32) / 32 (fp16) virtual rows.
TEST_P(GemvAmx, ScaledOneHotSplitIsBitExact) {
  const std::uint64_t seed = 9001;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (std::int64_t k : {784, 48}) {
    const std::int64_t n = 37, m = 16;
    const Weight w = random_weight(n, k, seed + k);
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " K=" + std::to_string(k));
      std::vector<std::uint8_t> xb = scaled_one_hot_x(t, m, k, seed * 5 + k, -93);
      const MatrixView xv{xb.data(), t, m, k, k};
      Out ref = poisoned(t, m, n, n), y = poisoned(t, m, n, n);
      quantized_matmul_ref(xv, w.view(), ref.view);
      ASSERT_TRUE(run(xv, w, y.view)) << "split refused";
      expect_exact(
          y, m, n, [&](std::int64_t i, std::int64_t j) { return ref.get(i, j); },
          [&](std::int64_t i, std::int64_t j) { return "m=" + std::to_string(i) + " n=" + std::to_string(j); });
    }
  }
}

// NaN scales (0x7F / 0xFF) make exactly their rows NaN; bf16 NaN / Inf activations propagate
// like the oracle (bf16 is never split, so the kernel takes them).
TEST_P(GemvAmx, NaNScaleAndNaNInfActivationsLikeOracle) {
  Weight w = random_weight(19, 1040, 21);
  w.scales[1 * 65 + 40] = 0x7F;   // row 1, block 40
  w.scales[18 * 65 + 64] = 0xFF;  // row 18, the tail block
  for (std::int64_t m : {2, 7}) {
    SCOPED_TRACE("seed=21/22 M=" + std::to_string(m));
    const Act x = random_x(DType::kBF16, m, 1040, 1040, 22);
    Out y = poisoned(DType::kBF16, m, 19, 19);
    ASSERT_TRUE(run(x.view, w, y.view));
    for (std::int64_t i = 0; i < m; ++i) {
      EXPECT_TRUE(std::isnan(y.get(i, 1)) && std::isnan(y.get(i, 18))) << i;
      EXPECT_FALSE(std::isnan(y.get(i, 0)) || std::isnan(y.get(i, 17))) << i;
    }
    check(w, x, 19);
  }
  Weight w2 = random_weight(29, 784, 23);
  w2.ts = 1.0f;
  Act x = random_x(DType::kBF16, 3, 784, 784, 24);
  store_from_f32(x.bytes.data(), DType::kBF16, 0 * 784 + 100, NAN);
  store_from_f32(x.bytes.data(), DType::kBF16, 1 * 784 + 7, -INFINITY);
  store_from_f32(x.bytes.data(), DType::kBF16, 2 * 784 + 300, INFINITY);
  store_from_f32(x.bytes.data(), DType::kBF16, 2 * 784 + 781, -INFINITY);
  SCOPED_TRACE("NaN/Inf bf16 seed=23/24");
  check(w2, x, 29);
}

// Activations the split cannot take exactly: refused, nothing written.
TEST_P(GemvAmx, UnsplittableActivationsAreRefused) {
  const Weight w = random_weight(13, 528, 5);
  struct Bad { DType t; float v; bool split; const char* what; };
  const Bad bads[] = {
      {DType::kF32, std::ldexp(1.0f, -94), false, "2^-94 (below this kernel's 2^-93)"},
      {DType::kF32, std::ldexp(1.0f, -102), false, "2^-102"},
      {DType::kF32, std::ldexp(1.0f, 120), false, "2^120"},
      {DType::kF32, INFINITY, false, "Inf"},
      {DType::kF16, NAN, false, "fp16 NaN"},
      {DType::kF32, std::ldexp(1.0f, -93), true, "2^-93 (accepted)"},
  };
  for (const Bad& b : bads) {
    SCOPED_TRACE(std::string(b.what) + " seed=6");
    Act x = random_x(b.t, 3, 528, 530, 6);
    store_from_f32(x.bytes.data(), b.t, 1 * 530 + 517, b.v);
    Out y = poisoned(b.t, 3, 13, 13);
    EXPECT_EQ(run(x.view, w, y.view), b.split);
    if (!b.split) {
      for (std::int64_t i = 0; i < 3 * 13; ++i) ASSERT_TRUE(std::isnan(y.get(i / 13, i % 13))) << "wrote before refusing";
    }
  }
}

// tuning_cpu.h: n_tiles, k_block and prefetch change speed only: bit-identical outputs (the K
// split, the one order-changing knob, is held off).
TEST_P(GemvAmx, TuningDoesNotChangeResults) {
  const std::uint64_t seed = 4243;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Weight w = random_weight(101, 1552, seed);
  const cpu::CpuTuning saved = cpu::cpu_tuning();
  for (std::int64_t m : {3, 6, 16})
    for (DType t : {DType::kBF16, DType::kF16, DType::kF32}) {
      SCOPED_TRACE("M=" + std::to_string(m) + " dtype=" + dtype_name(t));
      const Act x = random_x(t, m, 1552, 1552, seed + m);
      std::vector<std::vector<std::uint8_t>> outs;
      for (int v = 0; v < 3; ++v) {
        cpu::CpuTuning tu = saved;
        tu.gemv_min_tasks_per_thread = 0;
        tu.gemv_amx_n_tiles = v == 0 ? 1 : v == 1 ? 4 : 6;
        tu.gemv_amx_k_block = v == 0 ? 32 : v == 1 ? 128 : 1024;
        tu.gemv_amx_prefetch_bytes = v == 0 ? 0 : 512;
        cpu::cpu_tuning_mutable() = tu;
        Out y = poisoned(t, m, w.n, w.n);
        EXPECT_TRUE(run(x.view, w, y.view));
        outs.push_back(y.bytes);
      }
      cpu::cpu_tuning_mutable() = saved;
      EXPECT_EQ(outs[0], outs[1]);
      EXPECT_EQ(outs[1], outs[2]);
    }
}

// gemv_amx_decode_table 1 (the 8 KiB table of e2m1 x |scale|) and 0 (per-group vmulps +
// vcvtne2ps2bf16) must decode the same bits. Part 1: every E4M3 scale byte (0x00 / 0x80 zero,
// 0x01-0x07 subnormal, 0x7F / 0xFF NaN, sign bit set) with every code (each block holds a
// permutation of the 16 codes), incl. the K tail group, read back through one-hot fp32
// activations: y = the decoded weight, compared byte for byte between the two decodes and by
// value with dequantize_ref (rows with a NaN scale: NaN everywhere, as the oracle gives). Part 2: random and adversarial activations
// (every non-NaN scale byte in every row, so no output is NaN), outputs byte for byte equal.
TEST_P(GemvAmx, TableDecodeBitIdenticalToMultiplyConvert) {
  const std::uint64_t seed = 9100;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const cpu::CpuTuning saved = cpu::cpu_tuning();
  auto run_tab = [&](int tab, const MatrixView& x, const Weight& w, Out& y) {
    cpu::CpuTuning t = saved;
    t.gemv_amx_decode_table = tab;
    cpu::cpu_tuning_mutable() = t;
    const bool ok = run(x, w, y.view);
    cpu::cpu_tuning_mutable() = saved;
    return ok;
  };
  {
    const std::int64_t n = 64, k = 80;  // 320 blocks >= 256 scale bytes; k 64..79 = tail group
    Weight w = random_weight(n, k, seed);
    w.ts = 1.0f;
    // A NaN scale makes its whole row NaN (0 x NaN in every sum), so the 254 other bytes go to
    // rows 0..50 in shuffled order and the NaN bytes to rows of their own: 0x7F in row 62, block
    // 1; 0xFF in row 63's tail block (blocks 5 per row).
    std::vector<std::uint8_t> bytes;
    for (int b = 0; b < 256; ++b)
      if ((b & 0x7F) != 0x7F) bytes.push_back(static_cast<std::uint8_t>(b));
    std::shuffle(bytes.begin(), bytes.end(), rng);
    for (std::size_t i = 0; i < w.scales.size(); ++i) w.scales[i] = bytes[i % bytes.size()];
    w.scales[62 * 5 + 1] = 0x7F;
    w.scales[63 * 5 + 4] = 0xFF;
    for (std::size_t blk = 0; blk < w.scales.size(); ++blk) {  // block blk = packed bytes 8 blk ..
      std::uint8_t codes[16];
      for (int c = 0; c < 16; ++c) codes[c] = static_cast<std::uint8_t>(c);
      std::shuffle(codes, codes + 16, rng);
      for (int j = 0; j < 8; ++j) w.packed[8 * blk + j] = static_cast<std::uint8_t>(codes[2 * j] | codes[2 * j + 1] << 4);
    }
    std::vector<float> deq(static_cast<std::size_t>(n * k));
    dequantize_ref(w.view(), MatrixView{deq.data(), DType::kF32, n, k, k});
    for (std::int64_t j = 62; j < 64; ++j)  // the NaN-scale rows: every output NaN, as the oracle's
      for (std::int64_t kk = 0; kk < k; ++kk) deq[static_cast<std::size_t>(j * k + kk)] = NAN;
    for (std::int64_t k0 = 0; k0 < k; k0 += 16) {
      std::vector<float> xb(static_cast<std::size_t>(16 * k), 0.0f);
      for (std::int64_t i = 0; i < 16; ++i) xb[static_cast<std::size_t>(i * k + k0 + i)] = 1.0f;
      const MatrixView xv{xb.data(), DType::kF32, 16, k, k};
      Out y1 = poisoned(DType::kF32, 16, n, n), y0 = poisoned(DType::kF32, 16, n, n);
      ASSERT_TRUE(run_tab(1, xv, w, y1));
      ASSERT_TRUE(run_tab(0, xv, w, y0));
      EXPECT_EQ(y1.bytes, y0.bytes) << "k0=" << k0;
      expect_exact(
          y1, 16, n, [&](std::int64_t i, std::int64_t j) { return deq[static_cast<std::size_t>(j * k + k0 + i)]; },
          [&](std::int64_t i, std::int64_t j) {
            return "k=" + std::to_string(k0 + i) + " n=" + std::to_string(j) + " scale byte " +
                   std::to_string(int(w.scales[static_cast<std::size_t>(j * (k / 16) + (k0 + i) / 16)]));
          });
    }
  }
  for (DType t : {DType::kBF16, DType::kF16, DType::kF32}) {
    SCOPED_TRACE(dtype_name(t));
    const std::int64_t n = 37, k = 4112, m = 5;
    Weight w = random_weight(n, k, seed + 1);
    std::vector<std::uint8_t> bytes;
    for (int b = 0; b < 256; ++b)
      if ((b & 0x7F) != 0x7F) bytes.push_back(static_cast<std::uint8_t>(b));
    std::shuffle(bytes.begin(), bytes.end(), rng);
    for (std::size_t i = 0; i < w.scales.size(); ++i) w.scales[i] = bytes[i % bytes.size()];
    for (int v = 0; v < 2; ++v) {
      Act x = v == 0 || t == DType::kBF16 ? random_x(t, m, k - 5, k, seed + 2) : adversarial_x(t, m, k, k, seed + 3);
      Out y1 = poisoned(t, m, n, n), y0 = poisoned(t, m, n, n);
      if (t == DType::kF32 && v == 1) {  // adversarial_x reaches 2^-102, below this kernel's 2^-93
        for (std::int64_t i = 0; i < m * k; ++i) {
          const float e = load_as_f32(x.bytes.data(), t, i);
          if (e != 0.0f && std::fabs(e) < 0x1p-93f) store_from_f32(x.bytes.data(), t, i, std::ldexp(e, 9));
        }
      }
      ASSERT_TRUE(run_tab(1, x.view, w, y1));
      ASSERT_TRUE(run_tab(0, x.view, w, y0));
      EXPECT_EQ(y1.bytes, y0.bytes) << (v == 0 ? "random" : "adversarial") << " activations";
      for (std::int64_t i = 0; i < m * n; ++i) ASSERT_FALSE(std::isnan(y1.get(i / n, i % n))) << i;
    }
  }
}

// The dispatcher takes the AMX GEMV for the M in gemv_amx_rows only where AMX runs, and never
// the emulation (it is not a CpuPath).
TEST(GemvAmxDispatch, FollowsTableAndHardware) {
  const cpu::CpuTuning saved = cpu::cpu_tuning();
  cpu::CpuTuning t = saved;
  t.gemv_amx_rows = 0x8002;  // M = 2 and 16
  t.gemv_amx_max_virtual_rows = 0;  // nothing above 16
  t.gemv_fma_max_m = 1;  // the FMA dot would take M = 2 first (pinned in DispatchFollowsTuningTable)
  cpu::cpu_tuning_mutable() = t;
  const bool amx = cpu::cpu_path_supported(cpu::CpuPath::kGemvAmx, DType::kBF16);
  EXPECT_EQ(amx, cpu::gemv_amx_supported());
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    EXPECT_EQ(cpu::cpu_path_for(2, dt) == cpu::CpuPath::kGemvAmx, amx);
    EXPECT_EQ(cpu::cpu_path_for(16, dt) == cpu::CpuPath::kGemvAmx, amx);
    EXPECT_NE(cpu::cpu_path_for(1, dt), cpu::CpuPath::kGemvAmx);
    EXPECT_NE(cpu::cpu_path_for(3, dt), cpu::CpuPath::kGemvAmx);
    EXPECT_NE(cpu::cpu_path_for(17, dt), cpu::CpuPath::kGemvAmx);
  }
  if (amx) {
    EXPECT_EQ(cpu::cpu_kernel_name(2, DType::kF32), "gemv_nvfp4_amx_sp3");
  } else {
    const Weight w = random_weight(4, 32, 3);
    const Act x = random_x(DType::kF32, 2, 32, 32, 4);
    Out y = poisoned(DType::kF32, 2, 4, 4);
    EXPECT_THROW(cpu::quantized_matmul_path(x.view, w.view(), y.view, cpu::CpuPath::kGemvAmx), Error);
  }
  cpu::cpu_tuning_mutable() = saved;
}

}  // namespace
}  // namespace nvfp4
