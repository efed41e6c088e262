// tests/cpu/test_bench_cpu.cpp -- run_cpu produces validated, measured rows (small shapes).
#include <gtest/gtest.h>

#include "bench/bench.h"

namespace nvfp4::bench {
namespace {

TEST(BenchCpu, HotRowsAreValidatedAndMeasured) {
  Options o;
  o.shapes = {{1, 64, 256}, {17, 40, 128}};
  o.dtype = DType::kBF16;
  o.cold = false;
  o.min_reps = 3;
  o.min_seconds = 0.0;
  o.seed = 42;
  SCOPED_TRACE("seed=42");
  const std::vector<Row> rows = run_cpu(o);
  ASSERT_EQ(rows.size(), 4u);  // per shape: nvfp4 hot, dense baseline hot
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
  EXPECT_TRUE(rows[1].variant == "onednn_bf16" || rows[1].variant == "openblas_f32") << rows[1].variant;
}

TEST(BenchCpu, ColdRowsRotateAndF32Validates) {
  Options o;
  o.shapes = {{2, 96, 512}};
  o.dtype = DType::kF32;
  o.cold = true;
  o.min_reps = 3;
  o.min_seconds = 0.0;
  const std::vector<Row> rows = run_cpu(o);
  ASSERT_EQ(rows.size(), 4u);  // nvfp4 cold+hot, baseline cold+hot
  EXPECT_TRUE(rows[0].cold);
  EXPECT_FALSE(rows[1].cold);
  for (const Row& r : rows) {
    EXPECT_TRUE(r.validated) << r.variant << " err " << r.max_rel_err;
    EXPECT_GT(r.ceiling_gbps, 0.0) << r.variant;  // interleaved read samples of the cold row
    EXPECT_EQ(r.ceiling_gbps, rows[0].ceiling_gbps) << r.variant;  // one ceiling per shape
  }
}

TEST(BenchCpu, BadShapeThrows) {
  Options o;
  o.shapes = {{1, 64, 100}};
  EXPECT_ANY_THROW(run_cpu(o));
}

}  // namespace
}  // namespace nvfp4::bench
