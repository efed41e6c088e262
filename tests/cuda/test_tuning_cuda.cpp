// tests/cuda/test_tuning_cuda.cpp -- the CUDA tuning table (tuning_sm90.h): shape classes, the
// JSON form and its errors, exact and early entries (plain C++, run everywhere), and `nvfp4 tune`
// writing a usable table (on the GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cuda/repack_nvfp4_sm90.h"
#include "kernels/cuda/tuning_sm90.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"

#if defined(NVFP4_HAVE_CUDA)
#include <cuda_runtime.h>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/device_owned.h"
#include "kernels/cuda/gemv_nvfp4_sm90.h"
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

// A bad NVFP4_CUDA_TUNING file is an error on every lookup. It used to fail the first one only:
// the table was marked loaded before it was read, so every later call ran on the built-in table
// without a word.
TEST(CudaTuning, BadUserTableFailsEveryLookup) {
  const std::string bad = ::testing::TempDir() + "/nvfp4_bad_tuning.json";
  std::ofstream(bad) << R"({"entries":[{"cc":90,"class":"nonsense","cols_per_warp":16,"warps_per_block":4,"k_split":1}]})";
  ASSERT_EQ(::setenv("NVFP4_CUDA_TUNING", bad.c_str(), 1), 0);
  cuda::gemv_clear_user_table(/*read_env_again=*/true);
  for (int call = 0; call < 3; ++call) EXPECT_THROW(cuda::gemv_lookup_tile(90, 4096, 14336), Error) << "call " << call;
  ::unsetenv("NVFP4_CUDA_TUNING");
  cuda::gemv_clear_user_table(/*read_env_again=*/true);
  EXPECT_TRUE(cuda::gemv_tile_valid(cuda::gemv_lookup_tile(90, 4096, 14336)));
  cuda::gemv_clear_user_table();
}

TEST(CudaTuning, ExactClassesAndRepackedLayout) {
  // The Llama-3-8B decode shapes are tuner classes of their own; their representative is the shape.
  const auto classes = cuda::gemv_shape_classes();
  for (const char* c : {"exact/1024x4096", "exact/6144x4096", "exact/14336x4096", "exact/128256x4096", "exact/4096x14336"})
    EXPECT_NE(std::find(classes.begin(), classes.end(), c), classes.end()) << c;
  // Every exact class the built-in table holds is a tuner class, so `nvfp4 tune` (all classes)
  // re-tunes each of them on another GPU (the built-in entries of Llama-3-70B, Qwen3-32B and
  // Qwen3-4B of 2026-12-04 included).
  for (const auto& e : cuda::gemv_builtin_table()) {
    if (e.cls.rfind("exact/", 0) == 0) {
      EXPECT_NE(std::find(classes.begin(), classes.end(), e.cls), classes.end()) << e.cls << " is not a tuner class";
    }
  }
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
// early lookup (exact early, bucket early, then the ordinary entries); only repacked m_max 8 / 16.
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
  // M = 9..16: early entries at the small-K classes and the k/v shape only (docs/perf-cuda.md 33).
  EXPECT_TRUE(cuda::gemv_lookup_tile(90, 4096, 512, rp, 16, true).early_ok);
  EXPECT_EQ(cuda::gemv_lookup_tile(90, 4096, 512, rp, 16, true).cols_per_warp, 16);  // the only early M = 16 kernel
  EXPECT_TRUE(cuda::gemv_lookup_tile(90, 1024, 4096, rp, 16, true).early_ok);
  EXPECT_FALSE(cuda::gemv_lookup_tile(90, 4096, 14336, rp, 16, true).early_ok);
  for (const char* bad :
       {R"({"entries":[{"cc":90,"class":"n_small/k_mid","cols_per_warp":16,"warps_per_block":8,"k_split":8,"launch":"early"}]})",
        R"({"entries":[{"cc":90,"layout":"repacked","class":"n_small/k_mid","cols_per_warp":16,"warps_per_block":8,"k_split":8,"launch":"early"}]})",
        R"({"entries":[{"cc":90,"layout":"repacked","m_max":8,"class":"n_small/k_mid","cols_per_warp":16,"warps_per_block":8,"k_split":8,"launch":"soon"}]})"})
    EXPECT_THROW(cuda::gemv_table_from_json(bad, "x"), Error) << bad;
  // An early entry for the M = 9..16 launches (m_max 16) serves only those.
  const auto e16 = cuda::gemv_table_from_json(
      R"({"entries":[{"cc":90,"layout":"repacked","m_max":16,"class":"n_small/k_mid","cols_per_warp":16,"warps_per_block":8,"k_split":8,"launch":"early"}]})",
      "m16 early");
  ASSERT_EQ(e16.size(), 1u);
  EXPECT_TRUE(e16[0].early);
  cuda::gemv_set_user_table(e16);
  EXPECT_TRUE(cuda::gemv_lookup_tile(90, 4096, 4096, rp, 16, true).early_ok);
  EXPECT_EQ(cuda::gemv_lookup_tile(90, 4096, 4096, rp, 16, true).warps_per_block, 8);
  EXPECT_FALSE(cuda::gemv_lookup_tile(90, 4096, 4096, rp, 16, false).early_ok);
  // M = 1 takes the built-in M <= 8 early entry (16 warps), not the m_max 16 one.
  EXPECT_EQ(cuda::gemv_lookup_tile(90, 4096, 4096, rp, 1, true).warps_per_block, 16);
  cuda::gemv_clear_user_table();
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
  // Strict fields (an audit on 2026-12-03 found each of these read as another entry, silently):
  // floats truncated, booleans as 1, integers wrapped into a valid cc, unknown keys ignored, K of
  // an exact class not a multiple of 16, a version this build does not read.
  const std::string ok = R"("class":"n_small/k_mid","cols_per_warp":32,"warps_per_block":4,"k_split":1)";
  for (const std::string& bad : std::vector<std::string>{
           R"({"entries":[{"cc":90,"class":"n_small/k_mid","cols_per_warp":32.9,"warps_per_block":4,"k_split":1}]})",
        R"({"entries":[{"cc":90,"class":"n_small/k_mid","cols_per_warp":32,"warps_per_block":true,"k_split":1}]})",
        R"({"entries":[{"cc":4294967386,)" + ok + "}]}",
        R"({"entries":[{"cc":-90,)" + ok + "}]}",
        R"({"entries":[{"cc":90,"lauch":"early",)" + ok + "}]}",
        R"({"entries":[{"cc":90,"overlap":1,)" + ok + "}]}",
        R"({"entries":[{"cc":90,"class":"exact/16x15","cols_per_warp":32,"warps_per_block":4,"k_split":1}]})",
        R"({"version":99,"entries":[]})", R"({"entires":[]})"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(cuda::gemv_table_from_json(bad, "x"), Error);
  }
  EXPECT_EQ(cuda::gemv_table_from_json(R"({"version":1,"comment":"c","entries":[{"cc":90,)" + ok + "}]}", "x").size(), 1u);
}


#if defined(NVFP4_HAVE_CUDA)
using namespace cudatest;  // NOLINT: the shared helpers (cuda_test_util.h)

// Host code, runs without a GPU. GPUs without table entries (everything but cc 90) take the rule
// of thumb; its tiles must fit the smallest shared memory per block of the GPUs the kernels run
// on: 99 KB on sm_86 / sm_89 (CUDA programming guide, compute capabilities table). The H200
// table's tiles must fit Hopper's 227 KB. The canonical M = 1 kernel is the one whose shared
// memory grows with the tile (its cp.async rings), up to 196 KB at 16 warps of 32 columns.
TEST(CudaTuning, TilesFitTheSharedMemoryOfTheirGpu) {
  cuda::GemvArgs a;  // M = 1 bf16 rows read in place, 16-byte aligned weights: the ring kernel
  a.packed = reinterpret_cast<const std::uint8_t*>(std::uintptr_t{1} << 12);
  a.scales = reinterpret_cast<const std::uint8_t*>(std::uintptr_t{1} << 13);
  const std::size_t kAda = 99 * 1024, kHopper = 227 * 1024;
  std::size_t largest_rule = 0, largest_h200 = 0;
  for (const std::int64_t n : {16, 96, 1024, 4096, 6144, 16384, 28672, 151936})
    for (const std::int64_t k : {64, 512, 1024, 2560, 4096, 14336, 28672})
      for (const int m : {1, 2, 8, 16}) {
        a.n = n;
        a.k = k;
        a.m_rows = m;
        for (const int cc : {80, 86, 89, 100, 120}) {
          const cuda::GemvTile t = cuda::gemv_lookup_tile(cc, n, k, cuda::GemvLayout::kCanonical, m);
          ASSERT_TRUE(cuda::gemv_tile_valid(t));
          const std::size_t b = cuda::gemv_nvfp4_sm90_smem_bytes(a, t);
          largest_rule = std::max(largest_rule, b);
          EXPECT_LE(b, kAda) << "cc " << cc << " N=" << n << " K=" << k << " M=" << m << ": warps " << t.warps_per_block;
        }
        const std::size_t h = cuda::gemv_nvfp4_sm90_smem_bytes(a, cuda::gemv_lookup_tile(90, n, k, cuda::GemvLayout::kCanonical, m));
        largest_h200 = std::max(largest_h200, h);
        EXPECT_LE(h, kHopper) << "N=" << n << " K=" << k << " M=" << m;
      }
  // The formula itself: 16 warps of 32 columns at M = 1 are 196 KB (gemv_nvfp4_sm90.cu).
  a.n = 4096;
  a.k = 4096;
  a.m_rows = 1;
  EXPECT_EQ(cuda::gemv_nvfp4_sm90_smem_bytes(a, cuda::GemvTile{32, 16, 16}), std::size_t{16 * 4 * 2 * 2 * 32 * 20 + 16 * 16 * 2 * 4});
  std::printf("largest shared memory per block: rule of thumb %zu B, H200 table %zu B\n", largest_rule, largest_h200);
}

// `nvfp4 tune` on one class (small rotation: the table is not meant to be fast): an ordinary
// repacked entry per row bucket, early entries only as M <= 8 repacked, every tile valid, the
// JSON round trip exact, and the dispatch reading the table back.
// The owning handles (kernels/cuda/device_owned.h) on any machine: an allocation that cannot be
// made (no device at all, or 2^50 bytes) throws an nvfp4::Error that names the operation, the size
// and what the buffer was for; with a device it leaves no error behind for the next CUDA call, and
// a buffer moves its pointer and the moved-from one owns nothing. Runs in CI too (no GPU there:
// the error half).
TEST(CudaOwned, DeviceBufferMovesAndNamesItsErrors) {
  // `cleared`: with a device the out-of-memory error is not sticky, and DeviceBuffer clears it;
  // without a driver every runtime call reports the same initialization error again.
  auto expect_named_error = [](std::size_t bytes, bool cleared) {
    try {
      const cuda::DeviceBuffer b(bytes, "unit op", "test buffer");
      ADD_FAILURE() << "an allocation of " << bytes << " bytes succeeded";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("unit op"), std::string::npos) << m;
      EXPECT_NE(m.find("cudaMalloc of " + std::to_string(bytes) + " bytes (test buffer)"), std::string::npos) << m;
    }
    if (cleared) {
      EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    }
  };
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    expect_named_error(1024, false);
    return;
  }
  expect_named_error(std::size_t{1} << 50, true);
  cuda::DeviceBuffer a(1000, "unit op");
  void* const p = a.get();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u);
  EXPECT_EQ(a.bytes(), 1000u);
  cuda::DeviceBuffer b(std::move(a));
  EXPECT_EQ(b.get(), p);
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
  cuda::DeviceBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.get(), p);
  EXPECT_EQ(cudaMemset(c.get(), 0, c.bytes()), cudaSuccess);
  const cuda::OwnedStream st("unit op");
  const cuda::OwnedEvent ev("unit op");
  EXPECT_EQ(cudaEventRecord(ev.get(), st.get()), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(ev.get()), cudaSuccess);
}

// capture_graph (device_owned.h), which the graph timing and the CUDA replay capture through: a
// capture whose work throws ends the capture and passes the error on, and the stream takes
// ordinary work again, with no CUDA error left behind; a capture that succeeds replays its work.
TEST(CudaOwned, CaptureThatThrowsLeavesTheStreamUsable) {
  REQUIRE_GPU();
  const cuda::OwnedStream st("unit op");
  const cuda::DeviceBuffer buf(256, "unit op");
  try {
    (void)cuda::capture_graph(st.get(), "unit op", [&] {
      ASSERT_EQ(cudaMemsetAsync(buf.get(), 1, 256, st.get()), cudaSuccess);
      fail("unit op", "thrown mid-capture");
    });
    ADD_FAILURE() << "capture_graph swallowed the error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("thrown mid-capture"), std::string::npos) << e.what();
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  ASSERT_EQ(cudaStreamIsCapturing(st.get(), &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  // The memset recorded before the throw never ran: the buffer keeps what this writes.
  ASSERT_EQ(cudaMemsetAsync(buf.get(), 7, 256, st.get()), cudaSuccess);
  const cuda::OwnedGraphExec g = cuda::capture_graph(st.get(), "unit op", [&] {
    ASSERT_EQ(cudaMemsetAsync(buf.as<std::uint8_t>() + 128, 9, 128, st.get()), cudaSuccess);
  });
  ASSERT_NE(g.get(), nullptr);
  ASSERT_EQ(cudaGraphLaunch(g.get(), st.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st.get()), cudaSuccess);
  std::vector<std::uint8_t> h(256);
  ASSERT_EQ(cudaMemcpy(h.data(), buf.get(), 256, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(h[i], i < 128 ? 7 : 9) << "byte " << i;
}

// The tuner allocates its rotation of weight copies, the activations and a stream before it times
// anything; out of memory half-way, it must throw a named error and give all of them back (it
// freed them by hand, after the timing, until 2026-12-03: a caller that caught the error kept
// every copy made so far). The GPU is first filled but for ~1 GiB, so the rotation of
// 4 GiB fails after ~25 copies of 4096 x 14336 (33 MiB + 3.5 MiB each).
TEST(CudaTuning, AutotuneOutOfMemoryFreesWhatItMade) {
  REQUIRE_GPU();
  std::size_t free0 = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  const std::size_t leave = std::size_t{1} << 30;
  ASSERT_GT(free0, 2 * leave) << "too little free device memory for this test";
  void* hog = nullptr;
  std::size_t hog_bytes = free0 - leave;
  while (cudaMalloc(&hog, hog_bytes) != cudaSuccess && hog_bytes > leave) hog_bytes -= std::size_t{256} << 20;
  (void)cudaGetLastError();
  ASSERT_NE(hog, nullptr);
  std::size_t free1 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  cuda::TuneOptions o;
  o.classes = {"exact/4096x14336"};
  o.layouts = {cuda::GemvLayout::kCanonical};
  o.reps = 1;
  o.rotation_mib = 4096 + static_cast<int>(free1 >> 20);  // more copies than fit
  o.verbose = false;
  std::string message;
  try {
    (void)cuda::gemv_autotune(o);
  } catch (const Error& e) {
    message = e.what();
  }
  std::size_t free2 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free2, &total), cudaSuccess);
  cudaFree(hog);
  EXPECT_NE(message.find("tune"), std::string::npos) << message;
  EXPECT_NE(message.find("cudaMalloc"), std::string::npos) << message;
  // Every copy back: within 8 MiB (allocation granularity), where one copy is 36 MiB.
  EXPECT_GE(free2 + (std::size_t{8} << 20), free1) << "free before " << (free1 >> 20) << " MiB, after " << (free2 >> 20) << " MiB";
}

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
  // Each row bucket's early entry (M = 1: m_max 8, M = 16: m_max 16) is either written or
  // reported as rejected, never both; before Hopper (no PDL) there is none to time.
  int early_written = 0;
  for (const auto& e : t) early_written += e.early;
  EXPECT_EQ(early_written + static_cast<int>(rejected.size()), cuda::hopper_paths() ? 2 : 0);
  for (const auto& e : rejected) {
    EXPECT_TRUE(e.early);
    EXPECT_TRUE(e.m_max == 8 || e.m_max == 16) << e.m_max;
    EXPECT_EQ(e.cls, "exact/1024x4096");
    if (e.m_max == 16) {
      EXPECT_EQ(e.tile.cols_per_warp, 16);  // the only M = 16 early kernel
    }
  }
  int ordinary8 = 0, ordinary16 = 0;
  for (const auto& e : t) {
    EXPECT_EQ(e.cls, "exact/1024x4096");
    EXPECT_EQ(e.layout, cuda::GemvLayout::kRepacked);
    EXPECT_EQ(e.cc, cuda::device_cc());
    EXPECT_TRUE(cuda::gemv_tile_valid(e.tile));
    EXPECT_TRUE(e.us > 0 && e.us < 1e6) << e.us;
    if (e.early) {
      EXPECT_TRUE(e.m_max == 8 || e.m_max == 16) << e.m_max;
      if (e.m_max == 16) {
        EXPECT_EQ(e.tile.cols_per_warp, 16);
      }
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
#endif  // NVFP4_HAVE_CUDA

}  // namespace
}  // namespace nvfp4
