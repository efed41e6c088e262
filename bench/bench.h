// bench/bench.h -- the benchmark library behind `nvfp4 bench`: shapes in, validated timing
// rows out. Each backend has its own file (bench_cpu.cpp, bench_cuda.cu) and fills BenchRow.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nvfp4/dtype.h"

namespace nvfp4::bench {

struct Shape {
  std::int64_t m = 1, n = 4096, k = 4096;
};

struct Options {
  std::vector<Shape> shapes;
  DType dtype = DType::kBF16;
  bool cold = true;       // rotate through enough weight copies to defeat the last-level cache
  int min_reps = 20;      // timed repetitions (median reported)
  double min_seconds = 0.2;  // per shape, per variant
  std::uint64_t seed = 1;
  bool dense = true;      // time the dense bf16 baseline at each shape (`nvfp4 bench --no-dense`: no)
};

struct Row {
  std::string backend;   // "cpu", "cuda", "reference"
  std::string kernel;    // the kernel variant dispatch chose (e.g. "gemv_nvfp4_avx512")
  std::string variant;   // "nvfp4" or the dense baseline ("openblas_bf16", "cublas_bf16", ...)
  Shape shape;
  DType dtype = DType::kBF16;
  bool cold = true;
  double us_median = 0, us_p10 = 0, us_p90 = 0;
  double us_graph = 0;   // CUDA: per-call time inside a CUDA graph (0 if not measured)
  double bytes = 0;      // packed + scales + activations + output
  double gbps = 0;       // bytes / us_median
  double gflops = 0;     // 2*M*N*K / us_median
  double ceiling_gbps = 0;  // streaming-read bandwidth measured in the same run (0 if not)
  double max_rel_err = 0;   // validation against the oracle before timing
  bool validated = false;
  std::vector<double> samples_us;
};

// Bytes a W4A16 NVFP4 matmul must move at least once: packed + scales + x + y.
double nvfp4_matmul_bytes(const Shape& s, DType dtype);
// The shape microbenchmarks' first check: positive sizes, K a multiple of 16, and `need` bytes (a
// lower bound of what the shape allocates, computed in double so that absurd sizes cannot
// overflow) within `available` (0 = unknown: not checked) on `where`; `what` lists the buffers
// counted. Throws an Error naming the shape and both sizes, instead of a bad_alloc later.
void check_shape(const char* backend, const Shape& s, double need, double available, const std::string& where,
                 const std::string& what);

std::vector<Row> run_cpu(const Options& opts);   // bench_cpu.cpp
std::vector<Row> run_cuda(const Options& opts);  // bench_cuda.cu (throws Error without CUDA)

}  // namespace nvfp4::bench
