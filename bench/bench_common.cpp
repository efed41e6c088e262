// bench/bench_common.cpp -- pieces shared by every backend's benchmark.
#include "bench/bench.h"

#include <cstdio>
#include <string>

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

void check_shape(const char* backend, const Shape& s, double need, double available, const std::string& where,
                 const std::string& what) {
  const std::string shape =
      std::string(backend) + " shape M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k);
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.k % kBlockSize != 0)
    fail("bench", shape + " is invalid (positive, K a multiple of 16)");
  if (available > 0 && need > available) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g GiB", need / (1 << 30));
    std::string msg = shape + " needs at least " + buf + " on " + where + " (" + what + "), but only ";
    std::snprintf(buf, sizeof buf, "%.3g GiB", available / (1 << 30));
    fail("bench", msg + buf + " is available");
  }
}

#if !defined(NVFP4_HAVE_CUDA)
std::vector<Row> run_cuda(const Options&) {
  fail("bench", "this build of nvfp4 has no CUDA backend");
}
#endif

}  // namespace nvfp4::bench
