// bench/bench_common.cpp -- pieces shared by every backend's benchmark.
#include "bench/bench.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"

namespace nvfp4::bench {

double nvfp4_matmul_bytes(const Shape& s, DType dtype) {
  const double packed = static_cast<double>(s.n) * s.k / 2.0;
  const double scales = static_cast<double>(s.n) * s.k / kBlockSize;
  const double act = static_cast<double>(s.m) * s.k * dtype_size(dtype);
  const double out = static_cast<double>(s.m) * s.n * dtype_size(dtype);
  return packed + scales + act + out;
}

#if !defined(NVFP4_HAVE_CUDA)
std::vector<Row> run_cuda(const Options&) {
  fail("bench", "this build of nvfp4 has no CUDA backend");
}
#endif

}  // namespace nvfp4::bench
