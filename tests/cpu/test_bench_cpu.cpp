// tests/cpu/test_bench_cpu.cpp -- run_cpu produces validated, measured rows (small shapes).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "bench/bench.h"
#include "kernels/cpu/matmul_cpu.h"
#include "nvfp4/cpu.h"
#include "nvfp4/error.h"

namespace nvfp4::bench {
namespace {

// The bench adds nvfp4_repacked rows where the pre-split GEMV replaces the canonical path's
// kernel (the AVX512-BF16 GEMV; not where AMX takes the shape).
bool has_presplit_rows(std::int64_t m, DType t) {
  return cpu::repack_for_gemv_cpu_supported() && cpu::cpu_path_for(m, t) == cpu::CpuPath::kGemvAvx512Bf16;
}

TEST(BenchCpu, HotRowsAreValidatedAndMeasured) {
  Options o;
  o.shapes = {{1, 64, 256}, {33, 40, 128}};
  o.dtype = DType::kBF16;
  o.cold = false;
  o.min_reps = 3;
  o.min_seconds = 0.0;
  o.seed = 42;
  SCOPED_TRACE("seed=42");
  const std::vector<Row> rows = run_cpu(o);
  // Per shape: nvfp4 hot, nvfp4_repacked hot (where the CPU runs it), dense baseline hot.
  const bool rp = has_presplit_rows(1, DType::kBF16);
  ASSERT_FALSE(has_presplit_rows(33, DType::kBF16));  // M = 33 takes a GEMM (above gemv_bf16_max_m)
  ASSERT_EQ(rows.size(), rp ? 5u : 4u);
  for (const Row& r : rows) {
    SCOPED_TRACE(r.variant + " " + r.kernel);
    EXPECT_TRUE(r.validated) << "max_rel_err " << r.max_rel_err;
    EXPECT_FALSE(r.cold);
    EXPECT_GE(r.samples_us.size(), 3u);
    EXPECT_GT(r.us_median, 0.0);
    EXPECT_GT(r.gbps, 0.0);
    EXPECT_GT(r.gflops, 0.0);
    EXPECT_GT(r.ceiling_gbps, 0.0);
  }
  EXPECT_EQ(rows[0].variant, "nvfp4");
  const std::size_t dense = rp ? 2 : 1;
  if (rp) {
    EXPECT_EQ(rows[1].variant, "nvfp4_repacked");
  }
  EXPECT_TRUE(rows[dense].variant == "onednn_bf16" || rows[dense].variant == "openblas_f32") << rows[dense].variant;
  EXPECT_EQ(rows[dense + 1].variant, "nvfp4");  // M = 33: no pre-split row
}

TEST(BenchCpu, ColdRowsRotateAndF32Validates) {
  Options o;
  o.shapes = {{2, 96, 512}};
  o.dtype = DType::kF32;
  o.cold = true;
  o.min_reps = 3;
  o.min_seconds = 0.0;
  const std::vector<Row> rows = run_cpu(o);
  // nvfp4 cold+hot, nvfp4_repacked cold+hot (where the CPU runs it), baseline cold+hot.
  const bool rp = has_presplit_rows(2, DType::kF32);
  ASSERT_EQ(rows.size(), rp ? 6u : 4u);
  EXPECT_TRUE(rows[0].cold);
  EXPECT_FALSE(rows[1].cold);
  if (rp) {
    EXPECT_EQ(rows[2].variant, "nvfp4_repacked");
    EXPECT_TRUE(rows[2].cold);
    EXPECT_FALSE(rows[3].cold);
  }
  for (const Row& r : rows) {
    EXPECT_TRUE(r.validated) << r.variant << " err " << r.max_rel_err;
    EXPECT_GT(r.ceiling_gbps, 0.0) << r.variant;  // interleaved read samples of the cold row
    EXPECT_EQ(r.ceiling_gbps, rows[0].ceiling_gbps) << r.variant;  // one ceiling per shape
  }
}

// Bad shapes are Errors that name the shape, before anything is allocated: K not a multiple of
// 16, a zero or negative size, and sizes whose buffers cannot fit in memory (or whose element
// counts would overflow 64 bits), which used to end in std::bad_alloc.
TEST(BenchCpu, BadShapeThrows) {
  auto message = [](const Shape& s) {
    Options o;
    o.shapes = {s};
    try {
      run_cpu(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({1, 64, 100}).find("M=1 N=64 K=100 is invalid"), std::string::npos) << message({1, 64, 100});
  EXPECT_NE(message({0, 64, 64}).find("is invalid"), std::string::npos);
  EXPECT_NE(message({1, -64, 64}).find("is invalid"), std::string::npos);
  for (const Shape& s : {Shape{99999999999, 16, 16}, Shape{1, std::int64_t{1} << 31, 16},
                         Shape{INT64_MAX, INT64_MAX, 16}}) {
    const std::string m = message(s);
    EXPECT_NE(m.find("N=" + std::to_string(s.n) + " K=16 needs at least"), std::string::npos) << m;
    EXPECT_NE(m.find("is available"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace nvfp4::bench
