// tests/cuda/test_gemv_cuda.cpp -- the CUDA GEMV against the oracle (quantized_matmul_ref /
// dequantize_ref). Without a GPU every GPU test skips with "no CUDA device: ..."; the tuning
// table tests need no GPU and always run.
//
// Tolerance (documented in docs/perf-cuda.md): the kernel dequantizes exactly and sums in fp32
// on the tensor cores in another order than the oracle, so
//   |y - ref| <= out_ulp * |ref| + 1e-5 * sum_k |x_k w_k|
//                 + out_min_step
// with out_ulp = 2^-7 (bf16 output), 2^-10 (fp16), 0 (fp32): both sides round their fp32 sum once
// to the output type and may land one ulp apart; out_min_step (2^-24 fp16) covers results in the
// output's subnormal range (found on H200: fp16 y = 3.2e-6 rounds on the 2^-24 grid).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cuda/gemm_nvfp4_cublas.h"
#include "kernels/cuda/repack_nvfp4_sm90.h"
#include "kernels/cuda/tuning_sm90.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

#if defined(NVFP4_HAVE_CUDA)
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_host.h"
#include "kernels/cuda/matmul_cuda.h"
#include "cuda/cuda_test_util.h"
#endif

namespace nvfp4 {
namespace {

// ------------------------------------------------------------------------------------------
// Tuning table: plain C++, runs everywhere.
// ------------------------------------------------------------------------------------------
TEST(CudaTuning, ShapeClasses) {
  EXPECT_EQ(cuda::gemv_shape_class(4096, 512), "n_small/k_small");
  EXPECT_EQ(cuda::gemv_shape_class(4096, 14336), "n_small/k_large");
  EXPECT_EQ(cuda::gemv_shape_class(28672, 4096), "n_mid/k_mid");
  EXPECT_EQ(cuda::gemv_shape_class(151936, 2560), "n_large/k_mid");
  for (const auto& c : cuda::gemv_shape_classes()) {
    std::int64_t n = 0, k = 0;
    cuda::gemv_class_representative(c, &n, &k);
    if (c.rfind("exact/", 0) == 0)
      EXPECT_EQ(cuda::gemv_exact_class(n, k), c);
    else
      EXPECT_EQ(cuda::gemv_shape_class(n, k), c) << "representative of " << c << " is in another class";
  }
  for (const auto& e : cuda::gemv_builtin_table()) EXPECT_TRUE(cuda::gemv_tile_valid(e.tile)) << e.cls;
}

TEST(CudaTuning, JsonRoundTripAndOverride) {
  std::vector<cuda::GemvTableEntry> t = {{90, "n_small/k_large", {16, 8, 2}, 1.5}};
  const auto back = cuda::gemv_table_from_json(cuda::gemv_table_to_json(t, "test"), "roundtrip");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].cls, "n_small/k_large");
  EXPECT_EQ(back[0].tile.cols_per_warp, 16);
  EXPECT_EQ(back[0].tile.warps_per_block, 8);
  EXPECT_EQ(back[0].tile.k_split, 2);
  EXPECT_TRUE(back[0].tile.overlap_ok);  // default: the overlapped launch is allowed
  // The per-shape verdict on the overlapped (PDL) launch survives the round trip; an entry
  // without the key allows it.
  std::vector<cuda::GemvTableEntry> ov = {{90, "exact/28672x4096", {16, 4, 2}, 20.5}};
  ov[0].layout = cuda::GemvLayout::kRepacked;
  ov[0].tile.overlap_ok = false;
  const auto oback = cuda::gemv_table_from_json(cuda::gemv_table_to_json(ov, "test"), "roundtrip");
  ASSERT_EQ(oback.size(), 1u);
  EXPECT_FALSE(oback[0].tile.overlap_ok);
  EXPECT_THROW(cuda::gemv_table_from_json(
                   R"({"entries":[{"cc":90,"class":"n_small/k_mid","cols_per_warp":32,"warps_per_block":4,"k_split":1,"overlap":"yes"}]})", "x"),
               Error);
  cuda::gemv_set_user_table(back);
  const auto got = cuda::gemv_lookup_tile(90, 4096, 14336);
  EXPECT_EQ(got.warps_per_block, 8);
  EXPECT_EQ(got.k_split, 2);
  cuda::gemv_clear_user_table();
  const auto builtin = cuda::gemv_lookup_tile(90, 4096, 14336);
  EXPECT_TRUE(cuda::gemv_tile_valid(builtin));
}

TEST(CudaTuning, ExactClassesAndRepackedLayout) {
  // The Llama-3-8B decode shapes are tuner classes of their own; their representative is the shape.
  const auto classes = cuda::gemv_shape_classes();
  for (const char* c : {"exact/1024x4096", "exact/6144x4096", "exact/14336x4096", "exact/128256x4096", "exact/4096x14336"})
    EXPECT_NE(std::find(classes.begin(), classes.end(), c), classes.end()) << c;
  std::int64_t n = 0, k = 0;
  cuda::gemv_class_representative("exact/6144x4096", &n, &k);
  EXPECT_EQ(n, 6144);
  EXPECT_EQ(k, 4096);
  EXPECT_TRUE(cuda::gemv_class_known("exact/7x9"));
  for (const char* bad : {"exact/0x4096", "exact/12x", "exact/12x5y", "exact/012x16", "n_small", "exact/-4x16"})
    EXPECT_FALSE(cuda::gemv_class_known(bad)) << bad;
  // Layout round trip; the repacked lookup reads only repacked entries; exact beats bucket.
  std::vector<cuda::GemvTableEntry> t = {
      {90, "n_small/k_mid", {16, 2, 2}, 1.0, cuda::GemvLayout::kCanonical},
      {90, "n_small/k_mid", {32, 16, 16}, 2.0, cuda::GemvLayout::kRepacked},
      {90, "exact/1024x4096", {16, 16, 8}, 3.0, cuda::GemvLayout::kRepacked}};
  const auto back = cuda::gemv_table_from_json(cuda::gemv_table_to_json(t, "test"), "roundtrip");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].layout, cuda::GemvLayout::kCanonical);
  EXPECT_EQ(back[1].layout, cuda::GemvLayout::kRepacked);
  EXPECT_EQ(back[2].cls, "exact/1024x4096");
  cuda::gemv_set_user_table(back);
  auto c = cuda::gemv_lookup_tile(90, 4096, 4096);
  EXPECT_EQ(c.warps_per_block, 2);
  auto r = cuda::gemv_lookup_tile(90, 4096, 4096, cuda::GemvLayout::kRepacked);
  EXPECT_EQ(r.cols_per_warp, 32);
  EXPECT_EQ(r.k_split, 16);
  r = cuda::gemv_lookup_tile(90, 1024, 4096, cuda::GemvLayout::kRepacked);
  EXPECT_EQ(r.cols_per_warp, 16);
  EXPECT_EQ(r.k_split, 8);
  c = cuda::gemv_lookup_tile(90, 1024, 4096);  // no canonical exact entry: canonical bucket
  EXPECT_EQ(c.warps_per_block, 2);
  // Row buckets: an m_max 8 entry serves M <= 8 only; M = 9..16 (and launches of 16 rows) fall
  // through to the any-M entry.
  t.push_back({90, "n_small/k_mid", {16, 4, 1}, 4.0, cuda::GemvLayout::kRepacked, 8});
  t.push_back({90, "n_mid/k_mid", {16, 8, 4}, 5.0, cuda::GemvLayout::kRepacked, 16});
  const auto back2 = cuda::gemv_table_from_json(cuda::gemv_table_to_json(t, "test"), "roundtrip");
  ASSERT_EQ(back2.size(), 5u);
  EXPECT_EQ(back2[3].m_max, 8);
  EXPECT_EQ(back2[4].m_max, 16);
  cuda::gemv_set_user_table(back2);
  for (std::int64_t m : {1, 8}) EXPECT_EQ(cuda::gemv_lookup_tile(90, 4096, 4096, cuda::GemvLayout::kRepacked, m).warps_per_block, 4);
  for (std::int64_t m : {9, 16, 33})
    EXPECT_EQ(cuda::gemv_lookup_tile(90, 4096, 4096, cuda::GemvLayout::kRepacked, m).warps_per_block, 16);
  EXPECT_EQ(cuda::gemv_lookup_tile(90, 1024, 4096, cuda::GemvLayout::kRepacked, 1).k_split, 8);  // exact beats bucket m8
  EXPECT_EQ(cuda::gemv_lookup_tile(90, 28672, 4096, cuda::GemvLayout::kRepacked, 16).warps_per_block, 8);
  cuda::gemv_clear_user_table();
  // Built-in: the repacked M <= 8 and M > 8 tiles of 16384 x 16384 are different entries.
  const auto b1 = cuda::gemv_lookup_tile(90, 16384, 16384, cuda::GemvLayout::kRepacked, 1);
  const auto b16 = cuda::gemv_lookup_tile(90, 16384, 16384, cuda::GemvLayout::kRepacked, 16);
  EXPECT_TRUE(b1.cols_per_warp != b16.cols_per_warp || b1.warps_per_block != b16.warps_per_block ||
              b1.k_split != b16.k_split);
  // The built-in table has repacked entries for every bucket at cc 90.
  for (const auto& b : {"n_small/k_small", "n_small/k_mid", "n_small/k_large", "n_mid/k_small", "n_mid/k_mid",
                        "n_mid/k_large", "n_large/k_small", "n_large/k_mid", "n_large/k_large"}) {
    bool found = false;
    for (const auto& e : cuda::gemv_builtin_table())
      found = found || (e.cc == 90 && e.cls == b && e.layout == cuda::GemvLayout::kRepacked);
    EXPECT_TRUE(found) << b;
  }
  // Old tables (no "layout" key) are canonical.
  const auto old = cuda::gemv_table_from_json(
      R"({"entries":[{"cc":90,"class":"n_small/k_mid","cols_per_warp":32,"warps_per_block":4,"k_split":1}]})", "x");
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].layout, cuda::GemvLayout::kCanonical);
}

// Entries tuned for the early-weights launch ("launch": "early"): round trip; used only by an
// early lookup (exact early, bucket early, then the ordinary entries); only repacked m_max 8.
TEST(CudaTuning, EarlyLaunchEntries) {
  std::vector<cuda::GemvTableEntry> t = {
      {90, "n_small/k_mid", {16, 16, 16}, 5.0, cuda::GemvLayout::kRepacked, 8},
      {90, "n_small/k_mid", {16, 8, 8}, 3.0, cuda::GemvLayout::kRepacked, 8},
      {90, "n_small/k_large", {32, 4, 4}, 9.0, cuda::GemvLayout::kRepacked, 8}};
  t[1].early = true;
  const auto back = cuda::gemv_table_from_json(cuda::gemv_table_to_json(t, "test"), "roundtrip");
  ASSERT_EQ(back.size(), 3u);
  EXPECT_FALSE(back[0].early);
  EXPECT_TRUE(back[1].early);
  cuda::gemv_set_user_table(back);
  const auto rp = cuda::GemvLayout::kRepacked;
  EXPECT_EQ(cuda::gemv_lookup_tile(90, 4096, 4096, rp, 1, false).warps_per_block, 16);
  EXPECT_EQ(cuda::gemv_lookup_tile(90, 4096, 4096, rp, 1, true).warps_per_block, 8);
  EXPECT_EQ(cuda::gemv_lookup_tile(90, 4096, 14336, rp, 1, true).cols_per_warp, 32);  // no early entry: ordinary one
  // Only a tile from an early entry carries the early launch; the ordinary fallback does not.
  EXPECT_TRUE(cuda::gemv_lookup_tile(90, 4096, 4096, rp, 1, true).early_ok);
  EXPECT_FALSE(cuda::gemv_lookup_tile(90, 4096, 4096, rp, 1, false).early_ok);
  EXPECT_FALSE(cuda::gemv_lookup_tile(90, 4096, 14336, rp, 1, true).early_ok);
  // An exact class with only an ordinary entry keeps it over a bucket's early entry.
  auto t2 = back;
  t2.push_back({90, "exact/4096x4096", {16, 4, 4}, 4.0, cuda::GemvLayout::kRepacked, 8});
  cuda::gemv_set_user_table(t2);
  EXPECT_EQ(cuda::gemv_lookup_tile(90, 4096, 4096, rp, 1, true).warps_per_block, 4);
  EXPECT_FALSE(cuda::gemv_lookup_tile(90, 4096, 4096, rp, 1, true).early_ok);
  cuda::gemv_clear_user_table();
  // Built-in: the early entries exist only where that launch measured faster (e.g. 4096 x 512),
  // not at 16384 x 16384.
  EXPECT_TRUE(cuda::gemv_lookup_tile(90, 4096, 512, rp, 1, true).early_ok);
  EXPECT_FALSE(cuda::gemv_lookup_tile(90, 16384, 16384, rp, 1, true).early_ok);
  EXPECT_FALSE(cuda::gemv_lookup_tile(90, 4096, 512, rp, 16, true).early_ok);
  for (const char* bad :
       {R"({"entries":[{"cc":90,"class":"n_small/k_mid","cols_per_warp":16,"warps_per_block":8,"k_split":8,"launch":"early"}]})",
        R"({"entries":[{"cc":90,"layout":"repacked","m_max":16,"class":"n_small/k_mid","cols_per_warp":16,"warps_per_block":8,"k_split":8,"launch":"early"}]})",
        R"({"entries":[{"cc":90,"layout":"repacked","m_max":8,"class":"n_small/k_mid","cols_per_warp":16,"warps_per_block":8,"k_split":8,"launch":"soon"}]})"})
    EXPECT_THROW(cuda::gemv_table_from_json(bad, "x"), Error) << bad;
}

TEST(CudaTuning, BadTablesAreErrors) {
  EXPECT_THROW(cuda::gemv_table_from_json(
                   R"({"entries":[{"cc":90,"m_max":4,"class":"n_small/k_mid","cols_per_warp":32,"warps_per_block":4,"k_split":1}]})", "x"),
               Error);
  EXPECT_THROW(cuda::gemv_table_from_json(
                   R"({"entries":[{"cc":90,"layout":"tiled","class":"n_small/k_mid","cols_per_warp":32,"warps_per_block":4,"k_split":1}]})", "x"),
               Error);
  EXPECT_THROW(cuda::gemv_table_from_json(
                   R"({"entries":[{"cc":90,"class":"exact/0x4096","cols_per_warp":32,"warps_per_block":4,"k_split":1}]})", "x"),
               Error);
  EXPECT_THROW(cuda::gemv_table_from_json("{", "x"), Error);
  EXPECT_THROW(cuda::gemv_table_from_json("{\"entries\": 3}", "x"), Error);
  EXPECT_THROW(cuda::gemv_table_from_json(
                   R"({"entries":[{"cc":90,"class":"n_huge/k_mid","cols_per_warp":32,"warps_per_block":4,"k_split":1}]})", "x"),
               Error);
  EXPECT_THROW(cuda::gemv_table_from_json(
                   R"({"entries":[{"cc":90,"class":"n_small/k_mid","cols_per_warp":32,"warps_per_block":4,"k_split":3}]})", "x"),
               Error);
  EXPECT_THROW(cuda::gemv_table_from_json(
                   R"({"entries":[{"cc":90,"class":"n_small/k_mid","cols_per_warp":64,"warps_per_block":4,"k_split":1}]})", "x"),
               Error);
}


// ------------------------------------------------------------------------------------------
// Repacked layout (gemv_sm90): host reference, runs everywhere. Emulates the kernel's decode
// (repack::decode_word + the scale IMAD + a bf16 multiply, which is exact here) and checks
// every weight against e2m1 * |scale| bit for bit, including zero, subnormal and NaN scales.
// ------------------------------------------------------------------------------------------
std::uint8_t code_at_ref(const QuantizedWeight& w, std::int64_t row, std::int64_t k) {
  const std::uint8_t b = w.packed[static_cast<std::size_t>(row * (w.k / 2) + k / 2)];
  return static_cast<std::uint8_t>(k % 2 ? b >> 4 : b & 0xF);
}

QuantizedWeight repack_test_weight(std::int64_t n, std::int64_t k, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  QuantizedWeight w;
  w.n = n;
  w.k = k;
  w.packed.resize(static_cast<std::size_t>(n * k / 2));
  w.scales.resize(static_cast<std::size_t>(n * k / 16));
  for (auto& b : w.packed) b = static_cast<std::uint8_t>(rng());
  static const std::uint8_t special[] = {0x00, 0x80, 0x01, 0x02, 0x03, 0x07, 0x08, 0x38, 0x7E, 0xFE, 0x7F, 0xFF};
  for (auto& s : w.scales) s = rng() % 4 == 0 ? special[rng() % 12] : static_cast<std::uint8_t>(rng() % 0x7F);
  w.stored_scale = 0.5f;
  return w;
}

float bf16_bits_to_f32(std::uint32_t b) {
  const std::uint32_t u = b << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(CudaRepack, HostReferenceDecodesToTheDequantizedWeights) {
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{16, 128}, {48, 256}, {32, 1024}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 31337 + n + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = repack_test_weight(n, k, seed);
    std::vector<std::uint8_t> rp(qw.packed.size(), 0xAB), rs(qw.scales.size(), 0xAB);
    cuda::repack_for_gemv_sm90_ref(qw.view(), rp.data(), rs.data());
    std::vector<int> seen(static_cast<std::size_t>(n * k), 0);
    int bad = 0;
    const std::int64_t chunks = k / 64;
    for (std::int64_t tl = 0; tl < n / 16; ++tl)
      for (std::int64_t c = 0; c < chunks; ++c)
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4, t = lane % 4;
          const std::uint8_t* sb = rs.data() + ((tl * (chunks / 2) + c / 2) * 32 + lane) * 4;
          for (int j = 0; j < 4; ++j) {
            std::uint32_t q;
            std::memcpy(&q, rp.data() + ((tl * chunks + c) * 32 + lane) * 16 + 4 * j, 4);
            std::uint32_t r[4];
            cuda::repack::decode_word(q, r);
            for (int ri = 0; ri < 4; ++ri)
              for (int half = 0; half < 2; ++half) {
                const std::int64_t row = tl * 16 + g + 8 * (ri & 1);
                const std::int64_t kk = c * 64 + 16 * t + 4 * j + (ri >= 2 ? 2 : 0) + half;
                const std::uint8_t sbyte = sb[2 * (c % 2) + (ri & 1)];
                const float w16 = bf16_bits_to_f32((r[ri] >> (16 * half)) & 0xFFFFu);
                const float s16 = bf16_bits_to_f32(sbyte * 16u + 0x7600u);
                const float got = w16 * s16 * 128.0f;  // exact: <= 6 significant bits, normal range
                const std::uint8_t code = code_at_ref(qw, row, kk);
                const float want = e2m1_times_scale(code, qw.scales[row * (k / 16) + kk / 16]);
                ++seen[row * k + kk];
                if (!(got == want || (std::isnan(got) && std::isnan(want))) && ++bad <= 5)
                  ADD_FAILURE() << "row " << row << " k " << kk << ": decoded " << got << " want " << want;
              }
          }
        }
    EXPECT_EQ(bad, 0);
    for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "weight " << i << " decoded " << seen[i] << " times";
  }
  std::vector<std::uint8_t> buf(1024);
  const QuantizedWeight odd = repack_test_weight(16, 64, 1);
  EXPECT_THROW(cuda::repack_for_gemv_sm90_ref(odd.view(), buf.data(), buf.data()), Error);  // K % 128 != 0
  const QuantizedWeight odd2 = repack_test_weight(8, 128, 1);
  EXPECT_THROW(cuda::repack_for_gemv_sm90_ref(odd2.view(), buf.data(), buf.data()), Error);  // N % 16 != 0
  EXPECT_FALSE(cuda::repack_for_gemv_sm90_supported(17, 128));
  EXPECT_TRUE(cuda::repack_for_gemv_sm90_supported(4096, 512));
}

#if !defined(NVFP4_HAVE_CUDA)
TEST(Cuda, Backend) {
  EXPECT_FALSE(cuda::compiled());
  GTEST_SKIP() << "this build has no CUDA backend (nvcc not found at configure time): CUDA tests not compiled";
}
#else

using namespace cudatest;  // NOLINT: the shared helpers (cuda_test_util.h)


// A one-hot run: y[r][j] must equal want(r, j) exactly for rows < rows, columns < n. Reports the
// first 5 mismatches (prefixed by `what`) and returns how many there were.
template <class Want>
int one_hot_mismatches(const Tensor& y, std::int64_t rows, std::int64_t n, Want want, const std::string& what) {
  int bad = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < n; ++j) {
      const float w = want(r, j);
      if (!(y.get(r * n + j) == w) && ++bad <= 5)
        ADD_FAILURE() << what << " one-hot y[" << r << "," << j << "] = " << y.get(r * n + j) << ", want " << w;
    }
  return bad;
}

// One-hot rows recover the dequantized weights exactly: 16 one-hot rows per launch at the k's
// in `ks` (run(x, y, rows) computes y = x . W^T for that launch), every output == deq[n, k]
// (== treats +0 and -0 alike: the matmul sums 0 + -0 = +0 where dequantize gives -0).
template <class Run>
void expect_one_hot_exact(const Tensor& deq, std::int64_t n, std::int64_t k, const std::vector<std::int64_t>& ks,
                          Run run) {
  const DType dt = deq.dtype;
  for (std::size_t c = 0; c < ks.size(); c += 16) {
    const std::int64_t rows = std::min<std::int64_t>(16, static_cast<std::int64_t>(ks.size() - c));
    Tensor x(dt, {rows, k});
    for (std::int64_t r = 0; r < rows; ++r) x.set(r * k + ks[c + r], 1.0f);
    Tensor y = nan_tensor(dt, rows, n);
    run(x, y, rows);
    int bad = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < n; ++j) {
        const float got = y.get(r * n + j), want = deq.get(j * k + ks[c + r]);
        if (!(got == want) && ++bad <= 5)
          ADD_FAILURE() << "one-hot y[" << r << "," << j << "] (k=" << ks[c + r] << ") = " << got << ", dequantized " << want;
      }
    ASSERT_EQ(bad, 0);
  }
}

// `nvfp4 tune` on one class (small rotation: the table is not meant to be fast): an ordinary
// repacked entry per row bucket, early entries only as M <= 8 repacked, every tile valid, the
// JSON round trip exact, and the dispatch reading the table back.
TEST(CudaTuning, AutotuneWritesAUsableTable) {
  REQUIRE_GPU();
  cuda::TuneOptions o;
  o.classes = {"exact/1024x4096"};
  o.layouts = {cuda::GemvLayout::kRepacked};
  o.reps = 3;
  o.rotation_mib = 16;
  o.verbose = false;
  std::vector<cuda::GemvTableEntry> rejected;
  o.early_rejected = &rejected;
  const auto t = cuda::gemv_autotune(o);
  // The early entry of the class is either written or reported as rejected, never both.
  int early_written = 0;
  for (const auto& e : t) early_written += e.early;
  EXPECT_EQ(early_written + static_cast<int>(rejected.size()), 1);
  for (const auto& e : rejected) {
    EXPECT_TRUE(e.early);
    EXPECT_EQ(e.m_max, 8);
    EXPECT_EQ(e.cls, "exact/1024x4096");
  }
  int ordinary8 = 0, ordinary16 = 0;
  for (const auto& e : t) {
    EXPECT_EQ(e.cls, "exact/1024x4096");
    EXPECT_EQ(e.layout, cuda::GemvLayout::kRepacked);
    EXPECT_EQ(e.cc, cuda::device_cc());
    EXPECT_TRUE(cuda::gemv_tile_valid(e.tile));
    EXPECT_TRUE(e.us > 0 && e.us < 1e6) << e.us;
    if (e.early) {
      EXPECT_EQ(e.m_max, 8);
    } else {
      ordinary8 += e.m_max == 8;
      ordinary16 += e.m_max == 16;
    }
  }
  EXPECT_EQ(ordinary8, 1);
  EXPECT_EQ(ordinary16, 1);
  const auto back = cuda::gemv_table_from_json(cuda::gemv_table_to_json(t, "test"), "roundtrip");
  ASSERT_EQ(back.size(), t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(back[i].early, t[i].early);
    EXPECT_EQ(back[i].m_max, t[i].m_max);
    EXPECT_EQ(back[i].tile.warps_per_block, t[i].tile.warps_per_block);
    EXPECT_EQ(back[i].tile.k_split, t[i].tile.k_split);
    EXPECT_EQ(back[i].tile.overlap_ok, t[i].tile.overlap_ok);
  }
  cuda::gemv_set_user_table(t);
  for (const auto& e : t) {
    const auto got = cuda::gemv_lookup_tile(cuda::device_cc(), 1024, 4096, cuda::GemvLayout::kRepacked, e.m_max, e.early);
    EXPECT_EQ(got.cols_per_warp, e.tile.cols_per_warp);
    EXPECT_EQ(got.warps_per_block, e.tile.warps_per_block);
    EXPECT_EQ(got.k_split, e.tile.k_split);
    EXPECT_EQ(got.early_ok, e.early);
  }
  cuda::gemv_clear_user_table();
}

TEST(CudaGemv, OneHotRecoversDequantizedWeightsExactly) {
  REQUIRE_GPU();
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (auto nk : {std::pair<std::int64_t, std::int64_t>{37, 48}, {131, 4112}, {64, 16}, {40, 256}}) {
      const std::int64_t n = nk.first, k = nk.second;
      const std::uint64_t seed = 1000 + n * 7 + k;
      SCOPED_TRACE("seed " + std::to_string(seed) + " dtype " + dtype_name(dt) + " N=" + std::to_string(n) +
                   " K=" + std::to_string(k));
      const QuantizedWeight qw = random_weight(n, k, seed);
      Tensor deq(dt, {n, k});
      dequantize_ref(qw.view(), MatrixView{deq.data(), dt, n, k, k});
      // 16 one-hot rows per launch; every k for small K, a spread of k otherwise.
      std::vector<std::int64_t> ks;
      for (std::int64_t kk = 0; kk < k; kk += (k <= 256 ? 1 : 7)) ks.push_back(kk);
      ks.push_back(k - 1);
      ASSERT_NO_FATAL_FAILURE(expect_one_hot_exact(deq, n, k, ks, [&](Tensor& x, Tensor& y, std::int64_t rows) {
        cuda::quantized_matmul_host(MatrixView{x.data(), dt, rows, k, k}, qw.view(), MatrixView{y.data(), dt, rows, n, n});
      }));
    }
  }
}

TEST(CudaGemv, MatchesOracleAcrossShapesAndDtypes) {
  REQUIRE_GPU();
  const std::int64_t ms[] = {1, 2, 3, 8, 16, 33};
  const std::pair<std::int64_t, std::int64_t> nks[] = {{1, 16}, {7, 32}, {37, 48}, {131, 4112}, {257, 1024}, {4099, 512}, {61, 192}};
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32})
    for (const auto& nk : nks)
      for (std::int64_t m : ms) {
        const std::uint64_t seed = 77 + 13 * m + nk.first * 3 + nk.second;
        const std::string what = std::string("seed ") + std::to_string(seed) + " " + dtype_name(dt) + " M=" +
                                 std::to_string(m) + " N=" + std::to_string(nk.first) + " K=" + std::to_string(nk.second);
        SCOPED_TRACE(what);
        const QuantizedWeight qw = random_weight(nk.first, nk.second, seed);
        Tensor x = random_x(dt, m, nk.second, seed + 1);
        Tensor y = nan_tensor(dt, m, nk.first);
        const MatrixView xv{x.data(), dt, m, nk.second, nk.second}, yv{y.data(), dt, m, nk.first, nk.first};
        cuda::quantized_matmul_host(xv, qw.view(), yv);
        check_against_oracle(xv, qw, yv, what);
      }
}

// Regression guard for the H200 bench run where N=151936 K=2560 produced non-finite outputs.
TEST(CudaGemv, LargeNLmHeadShape) {
  REQUIRE_GPU();
  const std::int64_t n = 151936, k = 2560;
  const QuantizedWeight qw = random_weight(n, k, 151936);
  for (DType dt : {DType::kBF16}) {
    Tensor x = random_x(dt, 1, k, 7);
    Tensor y = nan_tensor(dt, 1, n);
    const MatrixView xv{x.data(), dt, 1, k, k}, yv{y.data(), dt, 1, n, n};
    cuda::quantized_matmul_host(xv, qw.view(), yv);
    check_against_oracle(xv, qw, yv, "seed 151936 N=151936 K=2560 M=1");
  }
}

TEST(CudaGemv, StridedPaddedActivationsAndOutputGaps) {
  REQUIRE_GPU();
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32})
    for (std::int64_t m : {1, 5, 17}) {
      const std::int64_t n = 97, k = 4112, kx = k - 5, xs = k + 3, ys = n + 2;
      const std::uint64_t seed = 4242 + m;
      const std::string what = std::string("seed ") + std::to_string(seed) + " " + dtype_name(dt) + " M=" + std::to_string(m);
      SCOPED_TRACE(what);
      const QuantizedWeight qw = random_weight(n, k, seed);
      Tensor x = random_x(dt, m, xs, seed + 1);
      Tensor y = nan_tensor(dt, m, ys);
      const MatrixView xv{x.data(), dt, m, kx, xs}, yv{y.data(), dt, m, n, ys};
      cuda::quantized_matmul_host(xv, qw.view(), yv);
      check_against_oracle(xv, qw, yv, what);
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t j = n; j < ys; ++j) EXPECT_TRUE(std::isnan(y.get(r * ys + j))) << "gap written at " << r << "," << j;
    }
}

TEST(CudaGemv, EveryTileGivesTheSameFunction) {
  REQUIRE_GPU();
  // K = 4096, 192 (a partial last 128-k step) at M = 1: the weights-as-A kernel; M > 1 and
  // K = 4112, 160 (K % 64 != 0): the first kernel. legacy = true forces the first kernel at M = 1.
  for (std::int64_t k : {4096, 192, 4112, 160}) {
    for (std::int64_t m : {1, 4, 16}) {
      const std::int64_t n = 203;
      const std::uint64_t seed = 9000 + k + m;
      const QuantizedWeight qw = random_weight(n, k, seed);
      Tensor x = random_x(DType::kBF16, m, k, seed + 1);
      for (int cols : {16, 32})
        for (int warps : {1, 2, 4, 8, 16})
          for (int ks : {1, 2, 4, 8, 16})
            for (bool legacy : {false, true}) {
            if (ks > warps || warps % ks) continue;
            if (legacy && (k != 4096 || m != 1)) continue;
            cuda::GemvTile tile{cols, warps, ks};
            tile.legacy = legacy;
            const std::string what = "seed " + std::to_string(seed) + " K=" + std::to_string(k) + " M=" + std::to_string(m) +
                                     " tile " + std::to_string(cols) + "/" + std::to_string(warps) + "/" + std::to_string(ks) +
                                     (legacy ? " legacy" : "");
            SCOPED_TRACE(what);
            Tensor y = nan_tensor(DType::kBF16, m, n);
            const MatrixView xv{x.data(), DType::kBF16, m, k, k}, yv{y.data(), DType::kBF16, m, n, n};
            run_cuda(xv, qw.view(), yv, &tile);
            check_against_oracle(xv, qw, yv, what);
          }
    }
  }
}

TEST(CudaGemv, DeviceApiOnAStreamAndBadInput) {
  REQUIRE_GPU();
  const std::int64_t m = 2, n = 300, k = 512;
  const QuantizedWeight qw = random_weight(n, k, 5);
  Tensor x = random_x(DType::kBF16, m, k, 6);
  Tensor y = nan_tensor(DType::kBF16, m, n);
  void *dx, *dy, *dp, *ds;
  ASSERT_EQ(cudaMalloc(&dx, x.bytes.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, y.bytes.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dp, qw.packed.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ds, qw.scales.size()), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), y.bytes.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dp, qw.packed.data(), qw.packed.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(ds, qw.scales.data(), qw.scales.size(), cudaMemcpyHostToDevice);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  const WeightView dw{static_cast<std::uint8_t*>(dp), static_cast<std::uint8_t*>(ds), qw.tensor_scale(), n, k};
  cuda::quantized_matmul(MatrixView{dx, DType::kBF16, m, k, k}, dw, MatrixView{dy, DType::kBF16, m, n, n}, st);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  cudaMemcpy(y.data(), dy, y.bytes.size(), cudaMemcpyDeviceToHost);
  check_against_oracle(MatrixView{x.data(), DType::kBF16, m, k, k}, qw, MatrixView{y.data(), DType::kBF16, m, n, n}, "stream");
  // Bad input: errors, never a crash.
  EXPECT_THROW(cuda::quantized_matmul(MatrixView{dx, DType::kBF16, m, k, k}, WeightView{dw.packed, dw.scales, 1.0f, n, 500},
                                      MatrixView{dy, DType::kBF16, m, n, n}, st),
               Error);  // K not a multiple of 16
  EXPECT_THROW(cuda::quantized_matmul(MatrixView{x.data(), DType::kBF16, m, k, k}, dw, MatrixView{dy, DType::kBF16, m, n, n}, st),
               Error);  // host activation pointer
  EXPECT_THROW(cuda::quantized_matmul(MatrixView{dx, DType::kBF16, m, k, k}, dw, MatrixView{dy, DType::kF16, m, n, n}, st),
               Error);  // dtype mismatch
  EXPECT_THROW(cuda::quantized_matmul(MatrixView{dx, DType::kBF16, m, k, k}, dw, MatrixView{dx, DType::kBF16, m, n, n}, st),
               Error);  // output on top of the activations (in place)
  EXPECT_THROW(cuda::quantized_matmul(MatrixView{dx, DType::kBF16, m, k, k}, dw, MatrixView{dp, DType::kBF16, m, n, n}, st),
               Error);  // output on top of the packed weights
  const cuda::GemvTile bad{24, 4, 1};
  EXPECT_THROW(cuda::quantized_matmul_tile(MatrixView{dx, DType::kBF16, m, k, k}, dw, MatrixView{dy, DType::kBF16, m, n, n}, st,
                                           &bad),
               Error);
  // M = 0: nothing to do, nothing touched.
  EXPECT_NO_THROW(cuda::quantized_matmul(MatrixView{dx, DType::kBF16, 0, k, k}, dw, MatrixView{dy, DType::kBF16, 0, n, n}, st));
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  cudaStreamDestroy(st);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dp);
  cudaFree(ds);
}

TEST(CudaGemv, PublicBackendRoute) {
  REQUIRE_GPU();
  const QuantizedWeight qw = random_weight(64, 64, 3);
  Tensor x = random_x(DType::kF32, 3, 64, 4);
  const Tensor y = quantized_matmul(x, qw, Backend::kCuda);
  check_against_oracle(MatrixView{const_cast<void*>(x.data()), DType::kF32, 3, 64, 64}, qw,
                       MatrixView{const_cast<void*>(y.data()), DType::kF32, 3, 64, 64}, "Backend::kCuda");
}

// Prefill (M > 16) goes through gemm_nvfp4_cublas.cu: dequantize to a dense panel + cuBLAS with
// alpha = tensor scale. One-hot rows must still recover the dequantized weights exactly, and
// random rows must match the oracle.
TEST(CudaGemm, PrefillPathOneHotAndOracle) {
  REQUIRE_GPU();
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    const std::int64_t n = 300, k = 4112, m = 40;
    const std::uint64_t seed = 5150 + static_cast<int>(dt);
    const std::string what = std::string("seed ") + std::to_string(seed) + " " + dtype_name(dt) + " M=40 N=300 K=4112";
    SCOPED_TRACE(what);
    const QuantizedWeight qw = random_weight(n, k, seed);
    Tensor deq(dt, {n, k});
    dequantize_ref(qw.view(), MatrixView{deq.data(), dt, n, k, k});
    Tensor x(dt, {m, k});
    for (std::int64_t r = 0; r < m; ++r) x.set(r * k + (r * 103) % k, 1.0f);
    Tensor y = nan_tensor(dt, m, n);
    cuda::quantized_matmul_host(MatrixView{x.data(), dt, m, k, k}, qw.view(), MatrixView{y.data(), dt, m, n, n});
    int bad = 0;
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t j = 0; j < n; ++j)
        if (!(y.get(r * n + j) == deq.get(j * k + (r * 103) % k)) && ++bad <= 5)
          ADD_FAILURE() << "one-hot y[" << r << "," << j << "] = " << y.get(r * n + j);
    ASSERT_EQ(bad, 0);
    Tensor xr = random_x(dt, 64, k, seed + 1);
    Tensor yr = nan_tensor(dt, 64, n);
    const MatrixView xv{xr.data(), dt, 64, k, k}, yv{yr.data(), dt, 64, n, n};
    cuda::quantized_matmul_host(xv, qw.view(), yv);
    check_against_oracle(xv, qw, yv, what + " random M=64");
  }
}

// The scratch pool keeps what a call used (here the panel + cuBLAS path: a dense panel and 32 MiB
// of cuBLAS workspace), release_scratch() gives it back once nothing is in flight, and the next
// call still works and takes it again.
TEST(CudaGemm, ScratchIsKeptAndCanBeReleased) {
  REQUIRE_GPU();
  const std::int64_t n = 300, k = 4112, m = 40;
  const QuantizedWeight qw = random_weight(n, k, 8080);
  Tensor x = random_x(DType::kF32, m, k, 8081);
  auto run = [&] {
    Tensor y = nan_tensor(DType::kF32, m, n);
    cuda::quantized_matmul_host(MatrixView{x.data(), DType::kF32, m, k, k}, qw.view(), MatrixView{y.data(), DType::kF32, m, n, n});
    check_against_oracle(MatrixView{x.data(), DType::kF32, m, k, k}, qw, MatrixView{y.data(), DType::kF32, m, n, n}, "seed 8080");
  };
  run();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_GE(cuda::scratch_bytes(), std::size_t{32} << 20) << "the pool keeps cuBLAS's workspace and the panel";
  cuda::release_scratch();
  EXPECT_EQ(cuda::scratch_bytes(), 0u) << "nothing in flight: everything goes back";
  run();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_GE(cuda::scratch_bytes(), std::size_t{32} << 20);
}

// Prefill weights larger than one dense panel: the same GEMM path with the panel lowered to 64
// and 128 weight rows (N = 300: 5 and 3 panels, the last one partial), against the oracle. The
// 256 MB default panel never splits at test sizes.
TEST(CudaGemm, PrefillInSeveralPanels) {
  REQUIRE_GPU();
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    const std::int64_t n = 300, k = 4112, m = 40;
    const int es = dtype_size(dt);
    const std::uint64_t seed = 6160 + static_cast<int>(dt);
    const QuantizedWeight qw = random_weight(n, k, seed);
    Tensor x = random_x(dt, m, k, seed + 1);
    const DeviceCopy dx(x.data(), static_cast<std::size_t>(m * k * es));
    const DeviceCopy dp(qw.packed.data(), qw.packed.size()), ds(qw.scales.data(), qw.scales.size());
    WeightView dw = qw.view();
    dw.packed = static_cast<const std::uint8_t*>(dp.p);
    dw.scales = static_cast<const std::uint8_t*>(ds.p);
    for (std::int64_t rows : {1, 64, 128}) {  // 1: rounded up to the 64-row minimum
      const std::string what = std::string("seed ") + std::to_string(seed) + " " + dtype_name(dt) +
                               " M=40 N=300 K=4112 panel of " + std::to_string(rows) + " rows";
      SCOPED_TRACE(what);
      Tensor y = nan_tensor(dt, m, n);
      const DeviceCopy dy(y.data(), static_cast<std::size_t>(m * n * es));
      cuda::gemm_nvfp4_dequant_cublas(MatrixView{dx.p, dt, m, k, k}, dw, MatrixView{dy.p, dt, m, n, n}, nullptr,
                                      rows * k * es);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      dy.back(y.data());
      check_against_oracle(MatrixView{x.data(), dt, m, k, k}, qw, MatrixView{y.data(), dt, m, n, n}, what);
    }
  }
}

// Repacked path on the GPU: device repack == host reference byte for byte; one-hot rows recover
// dequantize_ref exactly; random rows match the oracle (same tolerance) for M = 1..33 and every
// tile; unsupported dtypes/shapes are errors.
// Runs `work` (stream-ordered launches on st) directly, or captured into a CUDA graph that is
// then launched once; synchronizes st either way.
void run_direct_or_in_graph(cudaStream_t st, bool graph, const std::function<void()>& work) {
  if (!graph) {
    work();
    EXPECT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    return;
  }
  cudaGraph_t g;
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  work();
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
}

// Two calls into adjacent bf16 outputs, on a stream and then captured into a CUDA graph and
// replayed: all four results carry the same bits and match the oracle. call(x, y, stream) runs one.
void expect_stream_and_graph_identical(const QuantizedWeight& qw, const Tensor& x, const std::string& what,
                                       const std::function<void(const MatrixView&, const MatrixView&, cudaStream_t)>& call) {
  const std::int64_t m = x.shape[0], k = x.shape[1], n = qw.n;
  const DeviceCopy dx(x.data(), x.bytes.size());
  void* dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dy, 2 * m * n * 2), cudaSuccess);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  std::vector<std::uint8_t> first;
  for (const bool graph : {false, true}) {
    ASSERT_EQ(cudaMemset(dy, 0xFF, 2 * m * n * 2), cudaSuccess);
    run_direct_or_in_graph(st, graph, [&] {
      for (int i = 0; i < 2; ++i)
        call(MatrixView{dx.p, DType::kBF16, m, k, k}, MatrixView{static_cast<char*>(dy) + i * m * n * 2, DType::kBF16, m, n, n}, st);
    });
    std::vector<std::uint8_t> h(2 * m * n * 2);
    ASSERT_EQ(cudaMemcpy(h.data(), dy, h.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_TRUE(std::equal(h.begin(), h.begin() + m * n * 2, h.begin() + m * n * 2)) << what << " graph " << graph;
    if (first.empty()) first = h;
    ASSERT_TRUE(h == first) << what << ": the graph replay gave other bits than the stream";
    Tensor y(DType::kBF16, {m, n});
    std::memcpy(y.data(), h.data(), m * n * 2);
    Tensor xc = x;
    check_against_oracle(MatrixView{xc.data(), DType::kBF16, m, k, k}, qw, MatrixView{y.data(), DType::kBF16, m, n, n},
                         what + (graph ? " in a graph" : " on a stream"));
  }
  cudaStreamDestroy(st);
  cudaFree(dy);
}

// Rows 3, 17 and 29 of x (K >= 1024) get +Inf, NaN and -Inf at one k each.
Tensor with_non_finite_rows(Tensor x) {
  const std::int64_t k = x.shape[1];
  x.set(3 * k + 77, INFINITY);
  x.set(17 * k + 500, NAN);
  x.set(29 * k + 1000, -INFINITY);
  return x;
}

// y = x . W^T from a kernel, x from with_non_finite_rows: NaN exactly where the oracle has NaN
// (Inf x 0 included), the oracle's +-Inf where it has one, and the finite rows within tolerance.
void expect_non_finite_like_oracle(const QuantizedWeight& qw, const Tensor& x, const Tensor& y, const std::string& what) {
  const std::int64_t m = x.shape[0], k = x.shape[1], n = qw.n;
  const DType dt = x.dtype;
  Tensor xf(DType::kF32, {m, k}), ref(DType::kF32, {m, n});
  for (std::int64_t i = 0; i < x.numel(); ++i) xf.set(i, x.get(i));
  quantized_matmul_ref(MatrixView{xf.data(), DType::kF32, m, k, k}, qw.view(), MatrixView{ref.data(), DType::kF32, m, n, n});
  int bad = 0, nonfinite = 0;
  for (const std::int64_t r : {3, 17, 29})
    for (std::int64_t j = 0; j < n; ++j) {
      const float got = y.get(r * n + j), want = ref.get(r * n + j);
      ASSERT_FALSE(std::isfinite(want)) << "the oracle row " << r << " should not be finite";
      nonfinite += std::isnan(want) ? 0 : 1;
      const bool same = std::isnan(want) ? std::isnan(got) : got == want;
      if (!same && ++bad <= 5) ADD_FAILURE() << what << " y[" << r << "," << j << "] = " << got << ", oracle " << want;
    }
  EXPECT_EQ(bad, 0) << what;
  EXPECT_GT(nonfinite, 0) << "some outputs should be +-Inf, not NaN, for the test to mean anything";
  Tensor xs(dt, {m - 3, k}), ys(dt, {m - 3, n});  // the finite rows
  std::int64_t rr = 0;
  for (std::int64_t r = 0; r < m; ++r) {
    if (r == 3 || r == 17 || r == 29) continue;
    for (std::int64_t c = 0; c < k; ++c) xs.set(rr * k + c, x.get(r * k + c));
    for (std::int64_t c = 0; c < n; ++c) ys.set(rr * n + c, y.get(r * n + c));
    ++rr;
  }
  check_against_oracle(MatrixView{xs.data(), dt, m - 3, k, k}, qw, MatrixView{ys.data(), dt, m - 3, n, n},
                       what + ": finite rows next to non-finite ones");
}

struct DevWeight {
  void *p = nullptr, *s = nullptr, *rp = nullptr, *rs = nullptr;
  std::int64_t n = 0, k = 0;
  float ts = 1.0f;
  explicit DevWeight(const QuantizedWeight& w) : n(w.n), k(w.k), ts(w.tensor_scale()) {
    cudaMalloc(&p, w.packed.size());
    cudaMalloc(&s, w.scales.size());
    cudaMalloc(&rp, w.packed.size());
    cudaMalloc(&rs, w.scales.size());
    cudaMemcpy(p, w.packed.data(), w.packed.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(s, w.scales.data(), w.scales.size(), cudaMemcpyHostToDevice);
    cudaMemset(rp, 0xCD, w.packed.size());
    cudaMemset(rs, 0xCD, w.scales.size());
    cuda::repack_for_gemv_sm90(WeightView{static_cast<std::uint8_t*>(p), static_cast<std::uint8_t*>(s), ts, n, k},
                               static_cast<std::uint8_t*>(rp), static_cast<std::uint8_t*>(rs), nullptr);
    cudaDeviceSynchronize();
  }
  ~DevWeight() {
    cudaFree(p);
    cudaFree(s);
    cudaFree(rp);
    cudaFree(rs);
  }
  cuda::RepackedWeightView view() const {
    return {static_cast<std::uint8_t*>(rp), static_cast<std::uint8_t*>(rs), ts, n, k};
  }
};

void run_repacked(const DevWeight& dw, const Tensor& x, Tensor& y, std::int64_t m, const cuda::GemvTile* tile,
                  const cuda::RepackedMatmulOptions& opt = {}) {
  const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
  cuda::quantized_matmul_repacked_tile(MatrixView{dx.p, x.dtype, m, dw.k, dw.k}, dw.view(),
                                       MatrixView{dy.p, y.dtype, m, dw.n, dw.n}, nullptr, tile, nullptr, opt);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dy.back(y.data());
}

TEST(CudaRepack, DeviceRepackEqualsReferenceAndMatmulMatches) {
  REQUIRE_GPU();
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{16, 128}, {48, 256}, {208, 4096}, {160, 2560}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 777 + n * 3 + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const DevWeight dw(qw);
    std::vector<std::uint8_t> rp(qw.packed.size()), rs(qw.scales.size()), gp(rp.size()), gs(rs.size());
    cuda::repack_for_gemv_sm90_ref(qw.view(), rp.data(), rs.data());
    cudaMemcpy(gp.data(), dw.rp, gp.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(gs.data(), dw.rs, gs.size(), cudaMemcpyDeviceToHost);
    ASSERT_TRUE(rp == gp) << "device repack differs from the host reference (packed)";
    ASSERT_TRUE(rs == gs) << "device repack differs from the host reference (scales)";
    // One-hot: 16 rows per launch over a spread of k.
    Tensor deq(DType::kBF16, {n, k});
    dequantize_ref(qw.view(), MatrixView{deq.data(), DType::kBF16, n, k, k});
    std::vector<std::int64_t> ks;
    for (std::int64_t kk = 0; kk < k; kk += (k <= 256 ? 1 : 13)) ks.push_back(kk);
    ks.push_back(k - 1);
    ASSERT_NO_FATAL_FAILURE(
        expect_one_hot_exact(deq, n, k, ks, [&](Tensor& x, Tensor& y, std::int64_t rows) { run_repacked(dw, x, y, rows, nullptr); }));
    // Random rows against the oracle, table tile and every tile.
    for (std::int64_t m : {1, 2, 3, 8, 9, 16, 33}) {
      Tensor x = random_x(DType::kBF16, m, k, seed + m);
      Tensor y = nan_tensor(DType::kBF16, m, n);
      run_repacked(dw, x, y, m, nullptr);
      check_against_oracle(MatrixView{x.data(), DType::kBF16, m, k, k}, qw, MatrixView{y.data(), DType::kBF16, m, n, n},
                           "repacked M=" + std::to_string(m));
    }
    // Every tile the tuner may pick (nvfp4 tune --layout repacked): the table changes speed only.
    for (std::int64_t m : {1, 16})
      for (int cols : {16, 32})
        for (int warps : {1, 2, 4, 8, 16})
          for (int ksp : {1, 2, 4, 8, 16}) {
            if (ksp > warps || warps % ksp != 0) continue;
            const cuda::GemvTile tile{cols, warps, ksp};
            const std::string what = "repacked tile " + std::to_string(cols) + "/" + std::to_string(warps) + "/" +
                                     std::to_string(ksp) + " M=" + std::to_string(m);
            Tensor x = random_x(DType::kBF16, m, k, seed + 100 + m);
            Tensor y = nan_tensor(DType::kBF16, m, n);
            run_repacked(dw, x, y, m, &tile);
            check_against_oracle(MatrixView{x.data(), DType::kBF16, m, k, k}, qw, MatrixView{y.data(), DType::kBF16, m, n, n}, what);
          }
  }
  // Errors, not crashes: mismatched dtypes, an unsupported shape, host pointers.
  const QuantizedWeight qw = random_weight(16, 128, 5);
  const DevWeight dw(qw);
  void *dx, *dy;
  ASSERT_EQ(cudaMalloc(&dx, 16 * 128 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, 16 * 16 * 4), cudaSuccess);
  EXPECT_THROW(cuda::quantized_matmul_repacked(MatrixView{dx, DType::kF16, 1, 128, 128}, dw.view(),
                                               MatrixView{dy, DType::kBF16, 1, 16, 16}), Error);
  cuda::RepackedWeightView bad = dw.view();
  bad.k = 64;
  EXPECT_THROW(cuda::quantized_matmul_repacked(MatrixView{dx, DType::kBF16, 1, 64, 64}, bad,
                                               MatrixView{dy, DType::kBF16, 1, 16, 16}), Error);
  Tensor hx = random_x(DType::kBF16, 1, 128, 1);
  EXPECT_THROW(cuda::quantized_matmul_repacked(MatrixView{hx.data(), DType::kBF16, 1, 128, 128}, dw.view(),
                                               MatrixView{dy, DType::kBF16, 1, 16, 16}), Error);
  EXPECT_THROW(cuda::repack_for_gemv_sm90(WeightView{static_cast<std::uint8_t*>(dw.p), static_cast<std::uint8_t*>(dw.s), 1.0f, 16, 128},
                                          static_cast<std::uint8_t*>(dw.p), static_cast<std::uint8_t*>(dw.rs), nullptr), Error);  // aliasing
  cudaFree(dx);
  cudaFree(dy);
}

// fp16 / fp32 activations on repacked weights: split exactly into 2 / 3 bf16 pieces (virtual
// rows; 8 / 5 real rows per launch). One-hot fp32 rows with fp32 output recover dequantize_ref
// bit for bit; random and padded/strided rows match the oracle; the output is in x's dtype.
TEST(CudaRepack, Fp16AndFp32Activations) {
  REQUIRE_GPU();
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{48, 256}, {208, 4096}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 4242 + n + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const DevWeight dw(qw);
    Tensor deq(DType::kF32, {n, k});
    dequantize_ref(qw.view(), MatrixView{deq.data(), DType::kF32, n, k, k});
    // One-hot, fp32 (3 pieces) and fp16 (2 pieces; fp16 output rounds, so compare to fp16(deq)).
    for (DType dt : {DType::kF32, DType::kF16}) {
      const std::int64_t rows = 11;  // 3 launches of 5 (fp32) / 2 of 8 (fp16)
      Tensor x(dt, {rows, k});
      for (std::int64_t r = 0; r < rows; ++r) x.set(r * k + (r * 97 + 5) % k, 1.0f);
      Tensor y = nan_tensor(dt, rows, n);
      run_repacked(dw, x, y, rows, nullptr);
      const int bad = one_hot_mismatches(y, rows, n, [&](std::int64_t r, std::int64_t j) {
        const float d = deq.get(j * k + (r * 97 + 5) % k);
        return dt == DType::kF32 ? d : f16_to_f32(f32_to_f16(d));
      }, dtype_name(dt));
      ASSERT_EQ(bad, 0);
      for (std::int64_t m : {1, 2, 3, 5, 6, 8, 9, 16, 17}) {
        Tensor xr = random_x(dt, m, k, seed + 7 * m);
        if (dt == DType::kF32)  // values whose low bits need all three pieces
          for (std::int64_t i = 0; i < xr.numel(); i += 3) xr.set(i, xr.get(i) * (1.0f + 0x1p-20f));
        Tensor yr = nan_tensor(dt, m, n);
        run_repacked(dw, xr, yr, m, nullptr);
        check_against_oracle(MatrixView{xr.data(), dt, m, k, k}, qw, MatrixView{yr.data(), dt, m, n, n},
                             std::string("repacked ") + dtype_name(dt) + " M=" + std::to_string(m));
        // The early-weights launch (up to 8 virtual rows: fp16 M <= 4, fp32 M <= 2; the pieces are
        // written by the kernel just before the GEMV, which only its weights may precede) gives
        // the ordinary launch's bits with the same tile.
        const cuda::GemvTile tile{16, 4, 4};
        cuda::RepackedMatmulOptions early;
        early.weights_read_early = true;
        Tensor ya = nan_tensor(dt, m, n), yb = nan_tensor(dt, m, n);
        run_repacked(dw, xr, ya, m, &tile);
        run_repacked(dw, xr, yb, m, &tile, early);
        ASSERT_TRUE(ya.bytes == yb.bytes) << dtype_name(dt) << " M=" << m << ": early-weights launch differs";
      }
    }
  }
}

// The wide launch: 17..32 virtual rows on small weights (N x K <= kRpWideMaxWeights) run one GEMV
// launch with four n8 tiles (rp<1,4>). One-hot fp32 rows (30 virtual rows) and fp16 rows (32)
// recover dequantize_ref bit for bit; random rows of every dtype at both ends of the range match
// the oracle, on N that is one tile, a few, and not a multiple of a block's rows; padded strided
// rows; non-finite rows propagate like the oracle; a graph replay gives the stream's bits.
TEST(CudaRepack, WideLaunchOf17To32VirtualRows) {
  REQUIRE_GPU();
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{16, 128}, {48, 256}, {272, 2560}, {1040, 1024}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 3232 + n + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const DevWeight dw(qw);
    auto run = [&](const Tensor& x, Tensor& y, std::int64_t m, std::int64_t cols, std::int64_t stride) {
      const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
      std::string name;
      cuda::quantized_matmul_repacked_tile(MatrixView{dx.p, x.dtype, m, cols, stride}, dw.view(),
                                           MatrixView{dy.p, y.dtype, m, n, n}, nullptr, nullptr, &name);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(name, "gemv_nvfp4_sm90_rp_r16_m32") << dtype_name(x.dtype) << " M=" << m;
      dy.back(y.data());
    };
    Tensor deq(DType::kF32, {n, k});
    dequantize_ref(qw.view(), MatrixView{deq.data(), DType::kF32, n, k, k});
    for (const DType dt : {DType::kF32, DType::kF16}) {
      const std::int64_t rows = dt == DType::kF32 ? 10 : 16;  // 30 / 32 virtual rows
      Tensor x(dt, {rows, k});
      for (std::int64_t r = 0; r < rows; ++r) x.set(r * k + (r * 61 + 3) % k, 1.0f);
      Tensor y = nan_tensor(dt, rows, n);
      ASSERT_NO_FATAL_FAILURE(run(x, y, rows, k, k));
      const int bad = one_hot_mismatches(y, rows, n, [&](std::int64_t r, std::int64_t j) {
        const float d = deq.get(j * k + (r * 61 + 3) % k);
        return dt == DType::kF32 ? d : f16_to_f32(f32_to_f16(d));
      }, std::string("wide ") + dtype_name(dt));
      ASSERT_EQ(bad, 0);
    }
    for (const auto& [dt, m] : {std::pair<DType, std::int64_t>{DType::kBF16, 17}, {DType::kBF16, 24}, {DType::kBF16, 32},
                                {DType::kF16, 9}, {DType::kF16, 16}, {DType::kF32, 6}, {DType::kF32, 10}}) {
      Tensor x = random_x(dt, m, k, seed + 11 * m);
      if (dt == DType::kF32)  // values whose low bits need all three pieces
        for (std::int64_t i = 0; i < x.numel(); i += 3) x.set(i, x.get(i) * (1.0f + 0x1p-20f));
      Tensor y = nan_tensor(dt, m, n);
      ASSERT_NO_FATAL_FAILURE(run(x, y, m, k, k));
      check_against_oracle(MatrixView{x.data(), dt, m, k, k}, qw, MatrixView{y.data(), dt, m, n, n},
                           std::string("wide ") + dtype_name(dt) + " M=" + std::to_string(m));
    }
    {  // Padded, strided bf16 rows (x.cols = K - 8, row stride K + 24): through the prepared rows.
      const std::int64_t m = 27, stride = k + 24, cols = k - 8;
      Tensor x = random_x(DType::kBF16, m, stride, seed + 99);
      Tensor y = nan_tensor(DType::kBF16, m, n);
      ASSERT_NO_FATAL_FAILURE(run(x, y, m, cols, stride));
      check_against_oracle(MatrixView{x.data(), DType::kBF16, m, cols, stride}, qw, MatrixView{y.data(), DType::kBF16, m, n, n},
                           "wide padded strided rows");
    }
    if (k >= 1024)
      for (const DType dt : {DType::kBF16, DType::kF32}) {
        const std::int64_t m = dt == DType::kF32 ? 10 : 32;
        Tensor x = random_x(dt, m, k, seed + 5);
        x.set(3 * k + 77, INFINITY);
        x.set(5 * k + 500, NAN);
        x.set(7 * k + 1000, -INFINITY);
        Tensor y = nan_tensor(dt, m, n);
        ASSERT_NO_FATAL_FAILURE(run(x, y, m, k, k));
        Tensor xf(DType::kF32, {m, k}), ref(DType::kF32, {m, n});
        for (std::int64_t i = 0; i < x.numel(); ++i) xf.set(i, x.get(i));
        quantized_matmul_ref(MatrixView{xf.data(), DType::kF32, m, k, k}, qw.view(), MatrixView{ref.data(), DType::kF32, m, n, n});
        int bad = 0;
        for (const std::int64_t r : {3, 5, 7})
          for (std::int64_t j = 0; j < n; ++j) {
            const float got = y.get(r * n + j), want = ref.get(r * n + j);
            const bool same = std::isnan(want) ? std::isnan(got) : got == want;
            if (!same && ++bad <= 5) ADD_FAILURE() << "wide " << dtype_name(dt) << " y[" << r << "," << j << "] = " << got << ", oracle " << want;
          }
        EXPECT_EQ(bad, 0);
      }
    expect_stream_and_graph_identical(qw, random_x(DType::kBF16, 32, k, seed + 7), "wide GEMV",
                                      [&](const MatrixView& xv, const MatrixView& yv, cudaStream_t st) {
                                        cuda::quantized_matmul_repacked(xv, dw.view(), yv, st);
                                      });
  }
}

// Overlapped (programmatic dependent) launch: a chain y1 = x W1^T, y2 = y1 W2^T, y3 = y2 W3^T ...
// where each GEMV reads the previous one's output. With overlapped_launch the next kernel is
// scheduled early and waits (griddepcontrol.wait) before it reads anything; the results must be
// bit-identical to the same chain launched plainly, in a plain stream and inside a captured CUDA
// graph. A large first GEMV gives the second many microseconds of overlap in which a missing
// wait would read stale x. At M = 1 and M = 4 (batched decode; the early-weights launch serves
// up to 8 virtual rows).
TEST(CudaRepack, ProgrammaticDependentLaunchChainIsExact) {
  REQUIRE_GPU();
  const std::uint64_t seed = 90210;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<std::int64_t> dims = {14336, 4096, 1024, 2048, 512};  // K of layer i = N of layer i-1
  std::vector<QuantizedWeight> qws;
  std::vector<std::unique_ptr<DevWeight>> dws;
  for (std::size_t i = 0; i + 1 < dims.size(); ++i) {
    qws.push_back(random_weight(dims[i + 1], dims[i], seed + i, 0.05f));
    dws.push_back(std::make_unique<DevWeight>(qws.back()));
  }
  std::vector<void*> act(dims.size());
  constexpr std::int64_t kMaxM = 4;
  for (std::size_t i = 0; i < dims.size(); ++i) ASSERT_EQ(cudaMalloc(&act[i], kMaxM * dims[i] * 2), cudaSuccess);
  const Tensor x0 = random_x(DType::kBF16, kMaxM, dims[0], seed);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  // launch: 0 plain, 1 overlapped, 2 overlapped with the weights read before the wait
  // (weights_read_early; the chain never writes its weights).
  auto chain = [&](int launch, const cuda::GemvTile* tile, std::int64_t m) {
    cuda::RepackedMatmulOptions o;
    o.overlapped_launch = launch > 0;
    o.weights_read_early = launch == 2;
    for (std::size_t i = 0; i + 1 < dims.size(); ++i)
      cuda::quantized_matmul_repacked_tile(MatrixView{act[i], DType::kBF16, m, dims[i], dims[i]}, dws[i]->view(),
                                           MatrixView{act[i + 1], DType::kBF16, m, dims[i + 1], dims[i + 1]}, st,
                                           tile, nullptr, o);
  };
  auto run = [&](int launch, bool graph, const cuda::GemvTile* tile = nullptr, std::int64_t m = 1) {
    cudaMemcpy(act[0], x0.data(), m * dims[0] * 2, cudaMemcpyHostToDevice);
    for (std::size_t i = 1; i < dims.size(); ++i) cudaMemset(act[i], 0xFF, kMaxM * dims[i] * 2);  // NaN
    cudaDeviceSynchronize();
    run_direct_or_in_graph(st, graph, [&] { chain(launch, tile, m); });
    std::vector<std::uint16_t> out(m * dims.back());
    cudaMemcpy(out.data(), act.back(), out.size() * 2, cudaMemcpyDeviceToHost);
    return out;
  };
  const std::vector<std::uint16_t> want = run(0, false);
  // The reference chain itself against the oracle, layer by layer on the host (bf16 rounding
  // between layers, as on the device).
  {
    Tensor x = x0;
    for (std::size_t i = 0; i + 1 < dims.size(); ++i) {
      Tensor y(DType::kBF16, {1, dims[i + 1]});
      quantized_matmul_ref(MatrixView{x.data(), DType::kBF16, 1, dims[i], dims[i]}, qws[i].view(),
                           MatrixView{y.data(), DType::kBF16, 1, dims[i + 1], dims[i + 1]});
      x = y;
    }
    // Four bf16 roundings compound (and cancellation makes single outputs relatively large):
    // compare against the RMS of the output, ~2^-9 per layer.
    double ss = 0;
    for (std::int64_t j = 0; j < dims.back(); ++j) ss += static_cast<double>(x.get(j)) * x.get(j);
    const double rms = std::sqrt(ss / dims.back());
    int far = 0;
    for (std::int64_t j = 0; j < dims.back(); ++j) {
      const double a = bf16_to_f32(want[j]), b = x.get(j);
      if (!(std::fabs(a - b) <= 0.02 * rms)) ++far;
    }
    EXPECT_GT(rms, 0.0);
    EXPECT_EQ(far, 0) << "the non-PDL chain drifted from the oracle chain (rms " << rms << ")";
  }
  for (int launch : {1, 2})
    for (bool graph : {false, true})
      for (int rep = 0; rep < 10; ++rep)
        ASSERT_TRUE(run(launch, graph) == want)
            << "PDL chain differs from the plain chain (launch " << launch << ", graph " << graph << ", rep " << rep << ")";
  const std::vector<std::uint16_t> want4 = run(0, false, nullptr, kMaxM);
  for (int j = 0; j < dims.back(); ++j) ASSERT_EQ(want4[j], want[j]) << "row 0 of the M = 4 chain, output " << j;
  for (int launch : {1, 2})
    for (bool graph : {false, true})
      for (int rep = 0; rep < 5; ++rep)
        ASSERT_TRUE(run(launch, graph, nullptr, kMaxM) == want4)
            << "M = 4: PDL chain differs from the plain chain (launch " << launch << ", graph " << graph << ", rep " << rep << ")";
  // Tiles that leave room on the SMs, so the next GEMV's blocks are resident (and, with early
  // weights, loading) while the previous one runs: each against the plain chain of the same tile
  // (the K split sets the summation order).
  for (const cuda::GemvTile tile : {cuda::GemvTile{16, 8, 8}, cuda::GemvTile{32, 4, 2}, cuda::GemvTile{16, 2, 1}}) {
    const std::vector<std::uint16_t> want_t = run(0, false, &tile);
    for (int launch : {1, 2})
      for (bool graph : {false, true})
        for (int rep = 0; rep < 5; ++rep)
          ASSERT_TRUE(run(launch, graph, &tile) == want_t)
              << "tile " << tile.cols_per_warp << "/" << tile.warps_per_block << "/" << tile.k_split << ": launch " << launch
              << ", graph " << graph << ", rep " << rep;
  }
  cudaStreamDestroy(st);
  for (void* p : act) cudaFree(p);
}

// The overlapped launch reads nothing before the previous kernel has completed, so it is exact
// even right after a kernel that writes its weights: repack A or B (alternately) into one
// repacked buffer, then the GEMV on it, ten times back to back, in a stream and in a graph.
// Each output must equal the plain-launch output of its own weight bit for bit; an early weight
// read would mix the previous weight in (the two differ in every output).
TEST(CudaRepack, OverlappedLaunchAfterARepackOfItsWeightsIsExact) {
  REQUIRE_GPU();
  const std::uint64_t seed = 4242;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 16384, k = 4096;  // a 32 MB repack: microseconds of overlap to get wrong
  const QuantizedWeight qa = random_weight(n, k, seed, 0.05f), qb = random_weight(n, k, seed + 1, 0.05f);
  const DevWeight da(qa), db(qb);
  const Tensor x = random_x(DType::kBF16, 1, k, seed);
  void *dx = nullptr, *rp = nullptr, *rs = nullptr, *dy = nullptr;
  const int reps = 10;
  ASSERT_EQ(cudaMalloc(&dx, k * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&rp, qa.packed.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&rs, qa.scales.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, static_cast<std::size_t>(reps) * n * 2), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), k * 2, cudaMemcpyHostToDevice), cudaSuccess);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  const MatrixView xv{dx, DType::kBF16, 1, k, k};
  auto y_at = [&](int i) { return MatrixView{static_cast<std::uint8_t*>(dy) + static_cast<std::size_t>(i) * n * 2, DType::kBF16, 1, n, n}; };
  auto fetch = [&](int i) {
    std::vector<std::uint16_t> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), y_at(i).data, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  };
  cuda::RepackedMatmulOptions plain;
  plain.overlapped_launch = false;
  cuda::quantized_matmul_repacked(xv, da.view(), y_at(0), st, plain);
  cuda::quantized_matmul_repacked(xv, db.view(), y_at(1), st, plain);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  const std::vector<std::uint16_t> want[2] = {fetch(0), fetch(1)};
  int same = 0;
  for (std::int64_t j = 0; j < n; ++j) same += want[0][j] == want[1][j];
  ASSERT_LT(same, n / 100) << "weights A and B must give different outputs for the test to mean anything";
  const cuda::RepackedWeightView shared{static_cast<std::uint8_t*>(rp), static_cast<std::uint8_t*>(rs), qa.tensor_scale(), n, k};
  auto sequence = [&] {
    for (int i = 0; i < reps; ++i) {
      const DevWeight& w = i % 2 ? db : da;
      cuda::repack_for_gemv_sm90(WeightView{static_cast<std::uint8_t*>(w.p), static_cast<std::uint8_t*>(w.s), w.ts, n, k},
                                 static_cast<std::uint8_t*>(rp), static_cast<std::uint8_t*>(rs), st);
      cuda::quantized_matmul_repacked(xv, shared, y_at(i), st);  // overlapped launch: the default
    }
  };
  for (const bool graph : {false, true}) {
    ASSERT_EQ(cudaMemset(dy, 0xFF, static_cast<std::size_t>(reps) * n * 2), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    run_direct_or_in_graph(st, graph, sequence);
    for (int i = 0; i < reps; ++i)
      EXPECT_TRUE(fetch(i) == want[i % 2]) << "output " << i << " (weight " << (i % 2 ? "B" : "A") << ", graph " << graph << ")";
  }
  cudaStreamDestroy(st);
  for (void* p : {dx, rp, rs, dy}) cudaFree(p);
}

// The repacked GEMM (more than 16 virtual rows, gemm_nvfp4_sm90_repacked.cu), every block shape:
// one-hot fp32 rows (3 pieces each: m-blocks of 21 or 10 real rows) recover dequantize_ref
// exactly; random rows match the oracle for every dtype, at M that fill an m-block, leave one
// row over, and span several; a K split that does not divide the chunk pairs (3, 7) and one
// with more splits than pairs (64) give the same function; N not a multiple of the block's rows
// (272 = 17 tiles); padded strided rows; repeated calls and a graph replay are bit-identical
// (the split's partials are summed in a fixed order); a block shape that is not compiled is an error.
void run_rgemm(const DevWeight& dw, const Tensor& x, Tensor& y, std::int64_t m, const cuda::RgemmTile* tile,
               std::int64_t x_cols = -1, std::int64_t x_stride = -1) {
  const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
  const std::int64_t cols = x_cols < 0 ? dw.k : x_cols, stride = x_stride < 0 ? dw.k : x_stride;
  std::string name;
  cuda::quantized_matmul_repacked_rgemm(MatrixView{dx.p, x.dtype, m, cols, stride}, dw.view(),
                                        MatrixView{dy.p, y.dtype, m, dw.n, dw.n}, nullptr, tile, &name);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(name.rfind("gemm_nvfp4_sm90_rg_", 0), 0u) << name;
  dy.back(y.data());
}

TEST(CudaRgemm, OneHotOracleEveryTileDeterministic) {
  REQUIRE_GPU();
  const cuda::RgemmTile tiles[] = {{4, 1}, {8, 1}, {4, 3}, {8, 7}, {8, 64}};
  auto tile_name = [](const cuda::RgemmTile* t) {
    return t ? "nb" + std::to_string(t->nb) + "/ks" + std::to_string(t->k_split)
             : std::string("built-in");
  };
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{16, 128}, {48, 256}, {272, 2560}, {1040, 1024}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 5150 + n * 7 + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const DevWeight dw(qw);
    Tensor deq(DType::kF32, {n, k});
    dequantize_ref(qw.view(), MatrixView{deq.data(), DType::kF32, n, k, k});
    const std::int64_t rows = 40;
    Tensor xo(DType::kF32, {rows, k});
    for (std::int64_t r = 0; r < rows; ++r) xo.set(r * k + (r * 131 + 7) % k, 1.0f);
    for (const cuda::RgemmTile* t : {static_cast<const cuda::RgemmTile*>(nullptr), &tiles[0], &tiles[1], &tiles[2], &tiles[3], &tiles[4]}) {
      Tensor y = nan_tensor(DType::kF32, rows, n);
      run_rgemm(dw, xo, y, rows, t);
      const int bad = one_hot_mismatches(
          y, rows, n, [&](std::int64_t r, std::int64_t j) { return deq.get(j * k + (r * 131 + 7) % k); }, tile_name(t));
      ASSERT_EQ(bad, 0) << tile_name(t);
      for (const std::int64_t m : {17, 64, 65, 130}) {
        Tensor x = random_x(DType::kBF16, m, k, seed + m);
        Tensor yb = nan_tensor(DType::kBF16, m, n);
        run_rgemm(dw, x, yb, m, t);
        check_against_oracle(MatrixView{x.data(), DType::kBF16, m, k, k}, qw, MatrixView{yb.data(), DType::kBF16, m, n, n},
                             "rgemm bf16 " + tile_name(t) + " M=" + std::to_string(m));
        Tensor y2 = nan_tensor(DType::kBF16, m, n);
        run_rgemm(dw, x, y2, m, t);
        ASSERT_TRUE(yb.bytes == y2.bytes) << tile_name(t) << " M=" << m << ": a second call gave other bits";
      }
      for (const DType dt : {DType::kF16, DType::kF32}) {
        const std::int64_t m = 23;  // 46 / 69 virtual rows
        Tensor x = random_x(dt, m, k, seed + 3 * m);
        if (dt == DType::kF32)
          for (std::int64_t i = 0; i < x.numel(); i += 3) x.set(i, x.get(i) * (1.0f + 0x1p-20f));
        Tensor yr = nan_tensor(dt, m, n);
        run_rgemm(dw, x, yr, m, t);
        check_against_oracle(MatrixView{x.data(), dt, m, k, k}, qw, MatrixView{yr.data(), dt, m, n, n},
                             std::string("rgemm ") + dtype_name(dt) + " " + tile_name(t));
      }
    }
    // Padded, strided bf16 rows (x.cols = K - 8, row stride K + 24): through the prepared rows.
    {
      const std::int64_t m = 33, stride = k + 24, cols = k - 8;
      Tensor x = random_x(DType::kBF16, m, stride, seed + 99);
      Tensor y = nan_tensor(DType::kBF16, m, n);
      run_rgemm(dw, x, y, m, &tiles[2], cols, stride);
      check_against_oracle(MatrixView{x.data(), DType::kBF16, m, cols, stride}, qw, MatrixView{y.data(), DType::kBF16, m, n, n},
                           "rgemm padded strided rows");
    }
    // A graph replay gives the direct call's bits.
    expect_stream_and_graph_identical(qw, random_x(DType::kBF16, 48, k, seed + 5), "rgemm",
                                      [&](const MatrixView& xv, const MatrixView& yv, cudaStream_t st) {
                                        cuda::quantized_matmul_repacked_rgemm(xv, dw.view(), yv, st, &tiles[3]);
                                      });
  }
  // A bad block shape is an error naming it.
  const QuantizedWeight qw = random_weight(16, 128, 3);
  const DevWeight dw(qw);
  const Tensor x = random_x(DType::kBF16, 20, 128, 3);
  Tensor y = nan_tensor(DType::kBF16, 20, 16);
  for (const cuda::RgemmTile bad : {cuda::RgemmTile{6, 1}, cuda::RgemmTile{8, 0}, cuda::RgemmTile{4, 65}})
    EXPECT_THROW(run_rgemm(dw, x, y, 20, &bad), Error);
}

// A small GEMM run of each compiled block shape, with and without the K split's second kernel:
// sized for compute-sanitizer racecheck (scripts/device_cuda.sh sanitize), which checks the
// cp.async ring's barrier discipline and the reuse of the stages for the epilogue.
TEST(CudaRgemm, SmallRunsForTheSanitizers) {
  REQUIRE_GPU();
  const std::uint64_t seed = 6006;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 272, k = 1024, m = 70;
  const QuantizedWeight qw = random_weight(n, k, seed);
  const DevWeight dw(qw);
  const Tensor x = random_x(DType::kBF16, m, k, seed + 1);
  for (const cuda::RgemmTile t : {cuda::RgemmTile{4, 3}, cuda::RgemmTile{8, 1}}) {
    Tensor y = nan_tensor(DType::kBF16, m, n);
    run_rgemm(dw, x, y, m, &t);
    Tensor xc = x;
    check_against_oracle(MatrixView{xc.data(), DType::kBF16, m, k, k}, qw, MatrixView{y.data(), DType::kBF16, m, n, n},
                         "rgemm nb" + std::to_string(t.nb) + " ks" + std::to_string(t.k_split));
  }
}

// The public repacked call's route by virtual rows. Large weights (N x K > kRpWideMaxWeights):
// the GEMV in launches of 16 up to 24 virtual rows, the GEMM from 25 (kRgemmMinVirtualRows):
// bf16 M = 24 / 25, fp16 M = 12 / 13 (2 pieces), fp32 M = 8 / 9 (3 pieces). Small weights: one
// wide GEMV launch for 17..32 virtual rows, the GEMM from 33: bf16 M = 16 / 17 / 32 / 33, fp16
// M = 8 / 9 / 16 / 17, fp32 M = 5 / 6 / 10 / 11. Scales that are only 4-byte aligned keep the
// GEMV. Results match the oracle on the small weights (the large ones check the route only).
TEST(CudaRgemm, PublicRouteByVirtualRows) {
  REQUIRE_GPU();
  const std::uint64_t seed = 2525;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 64, k = 256;
  const QuantizedWeight qw = random_weight(n, k, seed);
  const DevWeight dw(qw);
  ASSERT_GT(std::int64_t{4112} * 4096, cuda::kRpWideMaxWeights);
  const QuantizedWeight big = random_weight(4112, 4096, seed + 1);
  const DevWeight dbig(big);
  auto route = [&](const DevWeight& d, DType dt, std::int64_t m, const QuantizedWeight* check) {
    const Tensor x = random_x(dt, m, d.k, seed + m);
    Tensor y = nan_tensor(dt, m, d.n);
    const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
    std::string name;
    cuda::quantized_matmul_repacked_tile(MatrixView{dx.p, dt, m, d.k, d.k}, d.view(), MatrixView{dy.p, dt, m, d.n, d.n},
                                         nullptr, nullptr, &name);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (check) {
      dy.back(y.data());
      Tensor xc = x;
      check_against_oracle(MatrixView{xc.data(), dt, m, d.k, d.k}, *check, MatrixView{y.data(), dt, m, d.n, d.n},
                           std::string("route ") + dtype_name(dt) + " M=" + std::to_string(m));
    }
    return name;
  };
  for (const auto& [dt, m_gemv] : {std::pair<DType, std::int64_t>{DType::kBF16, 24}, {DType::kF16, 12}, {DType::kF32, 8}}) {
    const std::string a = route(dbig, dt, m_gemv, nullptr), b = route(dbig, dt, m_gemv + 1, nullptr);
    EXPECT_EQ(a.rfind("gemv_nvfp4_sm90_rp_", 0), 0u) << dtype_name(dt) << " M=" << m_gemv << " ran " << a;
    EXPECT_NE(a, "gemv_nvfp4_sm90_rp_r16_m32") << dtype_name(dt) << " M=" << m_gemv;
    EXPECT_EQ(b.rfind("gemm_nvfp4_sm90_rg_", 0), 0u) << dtype_name(dt) << " M=" << m_gemv + 1 << " ran " << b;
  }
  for (const auto& [dt, m16] : {std::pair<DType, std::int64_t>{DType::kBF16, 16}, {DType::kF16, 8}, {DType::kF32, 5}}) {
    const std::int64_t m32 = 32 / cuda::repacked_pieces(dt);
    const std::string a = route(dw, dt, m16, &qw), b = route(dw, dt, m16 + 1, &qw), c = route(dw, dt, m32, &qw),
                      d = route(dw, dt, m32 + 1, &qw);
    EXPECT_EQ(a.rfind("gemv_nvfp4_sm90_rp_", 0), 0u) << dtype_name(dt) << " M=" << m16 << " ran " << a;
    EXPECT_NE(a, "gemv_nvfp4_sm90_rp_r16_m32");
    EXPECT_EQ(b, "gemv_nvfp4_sm90_rp_r16_m32") << dtype_name(dt) << " M=" << m16 + 1;
    EXPECT_EQ(c, "gemv_nvfp4_sm90_rp_r16_m32") << dtype_name(dt) << " M=" << m32;
    EXPECT_EQ(d.rfind("gemm_nvfp4_sm90_rg_", 0), 0u) << dtype_name(dt) << " M=" << m32 + 1 << " ran " << d;
  }
  // Scales at a 4-byte (not 16-byte) offset: the GEMV runs, the GEMM entry point refuses.
  void* s4 = nullptr;
  ASSERT_EQ(cudaMalloc(&s4, qw.scales.size() + 16), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(static_cast<char*>(s4) + 4, dw.rs, qw.scales.size(), cudaMemcpyDeviceToDevice), cudaSuccess);
  cuda::RepackedWeightView v = dw.view();
  v.scales = static_cast<const std::uint8_t*>(s4) + 4;
  const Tensor x = random_x(DType::kBF16, 40, k, seed);
  Tensor y = nan_tensor(DType::kBF16, 40, n);
  const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
  std::string name;
  cuda::quantized_matmul_repacked_tile(MatrixView{dx.p, DType::kBF16, 40, k, k}, v, MatrixView{dy.p, DType::kBF16, 40, n, n},
                                       nullptr, nullptr, &name);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(name.rfind("gemv_", 0), 0u) << name;
  dy.back(y.data());
  Tensor xc = x;
  check_against_oracle(MatrixView{xc.data(), DType::kBF16, 40, k, k}, qw, MatrixView{y.data(), DType::kBF16, 40, n, n},
                       "4-byte aligned scales");
  EXPECT_THROW(cuda::quantized_matmul_repacked_rgemm(MatrixView{dx.p, DType::kBF16, 40, k, k}, v,
                                                     MatrixView{dy.p, DType::kBF16, 40, n, n}, nullptr, nullptr),
               Error);
  cudaFree(s4);
}

// Non-finite activations through the repacked GEMM: a row with +Inf at one k and a row with NaN
// at another give, like the oracle, NaN wherever the oracle has NaN (Inf x 0 included) and the
// oracle's +-Inf where it has one; the other rows stay within tolerance. bf16 and fp32 (whose
// Inf/NaN ride in the first bf16 piece), with and without a K split.
TEST(CudaRgemm, NonFiniteActivationsPropagateLikeTheOracle) {
  REQUIRE_GPU();
  const std::uint64_t seed = 3131;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 272, k = 1024, m = 40;
  const QuantizedWeight qw = random_weight(n, k, seed);
  const DevWeight dw(qw);
  for (const DType dt : {DType::kBF16, DType::kF32})
    for (const cuda::RgemmTile t : {cuda::RgemmTile{8, 1}, cuda::RgemmTile{4, 3}}) {
      const Tensor x = with_non_finite_rows(random_x(dt, m, k, seed + 1));
      Tensor y = nan_tensor(dt, m, n);
      run_rgemm(dw, x, y, m, &t);
      expect_non_finite_like_oracle(qw, x, y, std::string("rgemm ") + dtype_name(dt) + " nb" + std::to_string(t.nb) + " ks" +
                                                  std::to_string(t.k_split));
    }
}

// ------------------------------------------------------------------------------------------
// The wgmma GEMM on canonical weights (gemm_nvfp4_sm90_wgmma.cu): bf16 activations, M > 16.
// ------------------------------------------------------------------------------------------

// Canonical weights on the device (no repack: N need not be a multiple of 16).
struct CanonWeight {
  DeviceCopy p, s;
  std::int64_t n, k;
  float ts;
  explicit CanonWeight(const QuantizedWeight& w)
      : p(w.packed.data(), w.packed.size()), s(w.scales.data(), w.scales.size()), n(w.n), k(w.k), ts(w.tensor_scale()) {}
  WeightView view() const { return {static_cast<const std::uint8_t*>(p.p), static_cast<const std::uint8_t*>(s.p), ts, n, k}; }
};

void run_wgemm(const CanonWeight& dw, const Tensor& x, Tensor& y, std::int64_t m, const cuda::WgemmTile* tile,
               std::int64_t x_cols = -1, std::int64_t x_stride = -1) {
  const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
  const std::int64_t cols = x_cols < 0 ? dw.k : x_cols, stride = x_stride < 0 ? dw.k : x_stride;
  std::string name;
  cuda::quantized_matmul_wgemm(MatrixView{dx.p, x.dtype, m, cols, stride}, dw.view(), MatrixView{dy.p, y.dtype, m, dw.n, dw.n},
                               nullptr, tile, &name);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE(name.rfind("gemm_nvfp4_sm90_ws_", 0) == 0) << name;
  dy.back(y.data());
}

std::string wg_tile_name(const cuda::WgemmTile* t) {
  return t ? "bn" + std::to_string(t->bn) + "/ks" + std::to_string(t->k_split) + "/c" + std::to_string(t->consumers)
           : std::string("built-in");
}

// One-hot bf16 / fp16 rows recover dequantize_ref (bf16 / fp16) exactly for every block shape and
// K split (the decode is exact and each output has one nonzero product); random bf16 rows match
// the oracle for M = 17..200 (300 at bn 256: a second, partial activation block) and fp16 rows
// for M = 17 and 65 (partial activation and weight blocks: N = 300, 1040); a second call and a
// graph replay give the same bits (bn 64 and 256); padded strided rows go through the prepared
// copy.
TEST(CudaWgemm, OneHotOracleEveryTileDeterministic) {
  REQUIRE_GPU();
  // bn 64 / 128 / 256, K splits 1..64, two or three consumer warpgroups (tiles[2]: the padded
  // rows; [3], [7], [9]: graphs).
  const cuda::WgemmTile tiles[] = {{64, 1},   {64, 64}, {128, 3}, {64, 7},    {128, 64},
                                   {128, 1},  {256, 1}, {256, 3}, {64, 5},    {128, 6, 3},
                                   {64, 1, 3}, {64, 6, 3}, {128, 1, 3}};
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{16, 64}, {48, 256}, {300, 4096}, {1040, 1024}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 9090 + n * 7 + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const CanonWeight dw(qw);
    const std::int64_t rows = 72;
    for (const DType dt : {DType::kBF16, DType::kF16}) {
      Tensor deq(dt, {n, k});
      dequantize_ref(qw.view(), MatrixView{deq.data(), dt, n, k, k});
      Tensor xo(dt, {rows, k});
      for (std::int64_t r = 0; r < rows; ++r) xo.set(r * k + (r * 131 + 7) % k, 1.0f);
      std::vector<const cuda::WgemmTile*> ts{nullptr};
      for (const cuda::WgemmTile& t : tiles) ts.push_back(&t);
      for (const cuda::WgemmTile* t : ts) {
        const std::string what = std::string(dtype_name(dt)) + " " + wg_tile_name(t);
        Tensor y = nan_tensor(dt, rows, n);
        run_wgemm(dw, xo, y, rows, t);
        const int bad = one_hot_mismatches(
            y, rows, n, [&](std::int64_t r, std::int64_t j) { return deq.get(j * k + (r * 131 + 7) % k); }, what);
        ASSERT_EQ(bad, 0) << what;
        for (const std::int64_t m : {17, 64, 65, 200, 300}) {
          if (dt == DType::kF16 && (m == 64 || m == 200 || m == 300)) continue;  // fp16: M = 17 and 65
          if (m == 300 && !(t && t->bn == 256)) continue;  // two activation blocks of 256, the second partial
          Tensor x = random_x(dt, m, k, seed + m);
          Tensor yb = nan_tensor(dt, m, n);
          run_wgemm(dw, x, yb, m, t);
          check_against_oracle(MatrixView{x.data(), dt, m, k, k}, qw, MatrixView{yb.data(), dt, m, n, n},
                               "wgemm " + what + " M=" + std::to_string(m));
          Tensor y2 = nan_tensor(dt, m, n);
          run_wgemm(dw, x, y2, m, t);
          ASSERT_TRUE(yb.bytes == y2.bytes) << what << " M=" << m << ": a second call gave other bits";
        }
      }
    }
    // Padded, strided bf16 / fp16 rows (x.cols = K - 8, row stride K + 24): through the prepared rows.
    for (const DType dt : {DType::kBF16, DType::kF16}) {
      const std::int64_t m = 33, stride = k + 24, cols = k - 8;
      Tensor x = random_x(dt, m, stride, seed + 99);
      Tensor y = nan_tensor(dt, m, n);
      run_wgemm(dw, x, y, m, &tiles[2], cols, stride);
      check_against_oracle(MatrixView{x.data(), dt, m, cols, stride}, qw, MatrixView{y.data(), dt, m, n, n},
                           std::string("wgemm padded strided rows ") + dtype_name(dt));
    }
    // A graph replay gives the direct call's bits.
    expect_stream_and_graph_identical(qw, random_x(DType::kBF16, 48, k, seed + 5), "wgemm",
                                      [&](const MatrixView& xv, const MatrixView& yv, cudaStream_t st) {
                                        cuda::quantized_matmul_wgemm(xv, dw.view(), yv, st, &tiles[3]);
                                      });
    expect_stream_and_graph_identical(qw, random_x(DType::kBF16, 48, k, seed + 6), "wgemm ws",
                                      [&](const MatrixView& xv, const MatrixView& yv, cudaStream_t st) {
                                        cuda::quantized_matmul_wgemm(xv, dw.view(), yv, st, &tiles[7]);
                                      });
    expect_stream_and_graph_identical(qw, random_x(DType::kBF16, 48, k, seed + 7), "wgemm ws 3 consumers",
                                      [&](const MatrixView& xv, const MatrixView& yv, cudaStream_t st) {
                                        cuda::quantized_matmul_wgemm(xv, dw.view(), yv, st, &tiles[9]);
                                      });
  }
  // A bad block shape, fp32 rows, K % 64 != 0 and a misaligned packed base are errors naming the call.
  const QuantizedWeight qw = random_weight(32, 128, 3);
  const CanonWeight dw(qw);
  const Tensor x = random_x(DType::kBF16, 20, 128, 3);
  Tensor y = nan_tensor(DType::kBF16, 20, 32);
  for (const cuda::WgemmTile bad : {cuda::WgemmTile{96, 1}, cuda::WgemmTile{64, 0}, cuda::WgemmTile{64, 65},
                                    cuda::WgemmTile{32, 1}, cuda::WgemmTile{512, 1}, cuda::WgemmTile{256, 65},
                                    cuda::WgemmTile{256, 1, 3}, cuda::WgemmTile{64, 1, 4}, cuda::WgemmTile{64, 1, 1}})
    EXPECT_THROW(run_wgemm(dw, x, y, 20, &bad), Error);
  const Tensor xf = random_x(DType::kF32, 20, 128, 3);
  Tensor yf = nan_tensor(DType::kF32, 20, 32);
  EXPECT_THROW(run_wgemm(dw, xf, yf, 20, nullptr), Error);
  const QuantizedWeight q80 = random_weight(32, 80, 4);
  const CanonWeight d80(q80);
  const Tensor x80 = random_x(DType::kBF16, 20, 80, 4);
  EXPECT_THROW(run_wgemm(d80, x80, y, 20, nullptr), Error);
  try {
    WeightView v = dw.view();
    v.packed += 8;  // 8-byte aligned: the GEMV accepts it, the GEMM needs 16
    const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
    cuda::quantized_matmul_wgemm(MatrixView{dx.p, DType::kBF16, 20, 128, 128}, v, MatrixView{dy.p, DType::kBF16, 20, 32, 32},
                                 nullptr, nullptr);
    ADD_FAILURE() << "a misaligned packed base was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wgmma"), std::string::npos) << e.what();
  }
}

// A small run of each compiled block shape, with and without the K split's second kernel:
// sized for compute-sanitizer racecheck (scripts/device_cuda.sh sanitize), which checks the
// ring's barrier discipline.
TEST(CudaWgemm, SmallRunsForTheSanitizers) {
  REQUIRE_GPU();
  const std::uint64_t seed = 7007;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 200, k = 1024, m = 70;
  const QuantizedWeight qw = random_weight(n, k, seed);
  const CanonWeight dw(qw);
  for (const DType dt : {DType::kBF16, DType::kF16}) {
    const Tensor x = random_x(dt, m, k, seed + 1);
    // K split 3 (6 stages, the ring does not wrap) and 1 (16 stages: every ring wraps, so the
    // slots are refilled behind the consumers' releases).
    for (const cuda::WgemmTile t : {cuda::WgemmTile{64, 3}, cuda::WgemmTile{64, 1}, cuda::WgemmTile{128, 3},
                                    cuda::WgemmTile{128, 1}, cuda::WgemmTile{256, 1}, cuda::WgemmTile{64, 1, 3},
                                    cuda::WgemmTile{128, 3, 3}}) {
      Tensor y = nan_tensor(dt, m, n);
      run_wgemm(dw, x, y, m, &t);
      Tensor xc = x;
      check_against_oracle(MatrixView{xc.data(), dt, m, k, k}, qw, MatrixView{y.data(), dt, m, n, n},
                           std::string("wgemm ") + dtype_name(dt) + " " + wg_tile_name(&t));
    }
  }
}

// The wgmma GEMM's staged epilogue (no K split) at its edges: N not a multiple of 4 (the last
// 4-output group of a row partly past N), with a row stride that is a multiple of 4 (vector
// stores, then the partial group element by element) and with strides that are not, or an output
// base 2 bytes off 8-byte alignment (no vector stores); a partial activation block. Every output
// matches the oracle and nothing outside the output view is written (the sentinel fills each
// row's padding too).
TEST(CudaWgemm, EpilogueEdgesAndStrides) {
  REQUIRE_GPU();
  const cuda::WgemmTile tiles[] = {{64, 1}, {128, 1}, {256, 1}, {64, 1, 3}, {128, 1, 3}};
  for (const std::int64_t n : {130, 257}) {
    const std::int64_t k = 256;
    const std::uint64_t seed = 5150 + n;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const CanonWeight dw(qw);
    for (const DType dt : {DType::kBF16, DType::kF16}) {
      for (const cuda::WgemmTile& t : tiles) {
        // (rows, output row stride, output offset in elements)
        for (const auto& [m, ys, off] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{17, (n + 3) / 4 * 4, 0},
                                          {100, n + 3, 0}, {t.bn == 256 ? 300 : 65, n + 1, 1}}) {
          const std::string what = std::string(dtype_name(dt)) + " " + wg_tile_name(&t) + " M=" + std::to_string(m) +
                                   " y stride " + std::to_string(ys) + " offset " + std::to_string(off);
          const Tensor x = random_x(dt, m, k, seed + m);
          const std::int64_t total = off + (m - 1) * ys + n + 5;
          Tensor ybuf(dt, {1, total});
          for (std::int64_t i = 0; i < total; ++i) ybuf.set(i, -3.25f);  // the sentinel outside the view
          const DeviceCopy dx(x.data(), x.bytes.size()), dy(ybuf.data(), ybuf.bytes.size());
          std::string name;
          cuda::quantized_matmul_wgemm(MatrixView{dx.p, dt, m, k, k}, dw.view(),
                                       MatrixView{static_cast<char*>(dy.p) + off * dtype_size(dt), dt, m, n, ys}, nullptr, &t,
                                       &name);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
          dy.back(ybuf.data());
          int outside = 0;
          for (std::int64_t i = 0; i < total; ++i) {
            const std::int64_t j = i - off, r = j / ys, c = j % ys;
            const bool inside = j >= 0 && r < m && c < n;
            if (!inside && ybuf.get(i) != -3.25f && ++outside <= 3) ADD_FAILURE() << what << ": wrote element " << i;
          }
          EXPECT_EQ(outside, 0) << what;
          check_against_oracle(MatrixView{const_cast<void*>(x.data()), dt, m, k, k}, qw,
                               MatrixView{static_cast<char*>(ybuf.data()) + off * dtype_size(dt), dt, m, n, ys}, what);
        }
      }
    }
  }
}

// The public call at M > 16: bf16 and fp16 rows with K % 64 == 0 run the wgmma GEMM up to
// kWgemmMaxRows; fp32 rows, K % 64 != 0 and larger M keep the dense-panel path. Results match
// the oracle either way.
TEST(CudaWgemm, PublicRoute) {
  REQUIRE_GPU();
  const std::uint64_t seed = 4242;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t big = cuda::kWgemmMaxRows;
  for (const auto& [dt, k, m, want_gemm] :
       {std::tuple<DType, std::int64_t, std::int64_t, bool>{DType::kBF16, 512, 17, true}, {DType::kBF16, 512, big, true},
        {DType::kBF16, 512, big + 1, false}, {DType::kF16, 512, 17, true}, {DType::kF16, 512, big + 1, false},
        {DType::kF32, 512, 17, false},
        {DType::kBF16, 528, 17, false}}) {
    const std::int64_t n = 96;
    const QuantizedWeight qw = random_weight(n, k, seed + k);
    const CanonWeight dw(qw);
    const Tensor x = random_x(dt, m, k, seed + m);
    Tensor y = nan_tensor(dt, m, n);
    const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
    std::string name;
    cuda::quantized_matmul_tile(MatrixView{dx.p, dt, m, k, k}, dw.view(), MatrixView{dy.p, dt, m, n, n}, nullptr, nullptr, &name);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(name.rfind("gemm_nvfp4_sm90_ws_", 0) == 0, want_gemm) << dtype_name(dt) << " M=" << m << " K=" << k << " ran " << name;
    dy.back(y.data());
    Tensor xc = x;
    check_against_oracle(MatrixView{xc.data(), dt, m, k, k}, qw, MatrixView{y.data(), dt, m, n, n},
                         std::string("route ") + dtype_name(dt) + " M=" + std::to_string(m) + " K=" + std::to_string(k));
  }
}

// The built-in wgmma-GEMM choice (host code, runs without a GPU): bn 64 up to 64 rows, 128 up to
// 128 and 256 above (128 where a bn 256 grid fills under half the SMs and bn 128 fills more);
// the K split fills one block per SM with >= 8 stages per split; three consumer warpgroups where
// they fill the GPU much better (6144 x 4096). The choices are the ones the H200 sweeps and A/Bs
// measured best (docs/perf-cuda.md 25-26, 28).
TEST(CudaWgemm, PickTileRule) {
  struct Case {
    std::int64_t m, n, k;
    int bn, k_split, consumers;
  };
  const Case cases[] = {
      {17, 4096, 4096, 64, 4, 2},      {64, 4096, 4096, 64, 4, 2},     {64, 14336, 4096, 64, 1, 2},
      {64, 4096, 14336, 64, 4, 2},     {64, 1024, 4096, 64, 8, 2},     {56, 6144, 4096, 64, 4, 3},
      {65, 4096, 4096, 128, 4, 2},     {128, 4096, 4096, 128, 4, 2},   {128, 14336, 4096, 128, 1, 2},
      {128, 1024, 4096, 128, 8, 2},    {129, 4096, 4096, 256, 4, 2},   {256, 4096, 14336, 256, 4, 2},
      {256, 14336, 4096, 256, 1, 2},   {200, 4096, 512, 128, 1, 2},    {128, 128256, 4096, 128, 1, 2},
      {256, 1024, 4096, 128, 8, 2},    {96, 6144, 4096, 128, 4, 3},    {256, 6144, 4096, 256, 2, 2},
      {64, 28672, 4096, 64, 1, 2},     {64, 128256, 4096, 64, 1, 2},
      {1024, 14336, 4096, 256, 1, 2},  {1024, 1024, 4096, 256, 4, 2},
  };
  for (const Case& c : cases) {
    const cuda::WgemmTile t = cuda::wgemm_pick_tile(132, c.n, c.k, c.m);
    const std::string what = std::to_string(c.m) + " x " + std::to_string(c.n) + " x " + std::to_string(c.k);
    EXPECT_TRUE(cuda::wgemm_tile_valid(t)) << what;
    EXPECT_EQ(t.bn, c.bn) << what;
    EXPECT_EQ(t.k_split, c.k_split) << what;
    EXPECT_EQ(t.consumers, c.consumers) << what;
  }
}

// Non-finite activations: rows with +Inf, NaN and -Inf at one k each give NaN exactly where the
// oracle does (Inf x 0 included) and the oracle's +-Inf elsewhere; the finite rows stay within
// tolerance. With and without a K split.
TEST(CudaWgemm, NonFiniteActivationsPropagateLikeTheOracle) {
  REQUIRE_GPU();
  const std::uint64_t seed = 3232;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 272, k = 1024, m = 40;
  const QuantizedWeight qw = random_weight(n, k, seed);
  const CanonWeight dw(qw);
  for (const DType dt : {DType::kBF16, DType::kF16})
    for (const cuda::WgemmTile t : {cuda::WgemmTile{64, 1}, cuda::WgemmTile{128, 3}, cuda::WgemmTile{256, 2},
                                    cuda::WgemmTile{64, 2, 3}}) {
      const Tensor x = with_non_finite_rows(random_x(dt, m, k, seed + 1));
      Tensor y = nan_tensor(dt, m, n);
      run_wgemm(dw, x, y, m, &t);
      expect_non_finite_like_oracle(qw, x, y, std::string("wgemm ") + dtype_name(dt) + " " + wg_tile_name(&t));
    }
}

#endif  // NVFP4_HAVE_CUDA

}  // namespace
}  // namespace nvfp4

