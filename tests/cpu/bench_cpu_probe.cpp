// tests/cpu/bench_cpu_probe.cpp -- manual driver for run_cpu until `nvfp4 bench` calls it
// (not a test). Usage: bench_cpu_probe [bf16|f16|f32] [hot] M,N,K ...
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench.h"
#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cpu/parallel_for.h"

int main(int argc, char** argv) {
  using namespace nvfp4;
  bench::Options o;
  o.min_reps = 20;
  o.min_seconds = 0.5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "hot") o.cold = false;
    else if (a == "bf16" || a == "f16" || a == "f32") o.dtype = dtype_from_name(a);
    else {
      bench::Shape s;
      if (std::sscanf(a.c_str(), "%ld,%ld,%ld", &s.m, &s.n, &s.k) != 3) return 2;
      o.shapes.push_back(s);
    }
  }
  std::printf("threads=%d\n", cpu::num_threads());
  std::printf("%-6s %-6s %-6s %-5s %-14s %-34s %-4s %10s %10s %10s %8s %8s %9s %8s %5s\n", "M", "N", "K", "dtype",
              "variant", "kernel", "cold", "us_med", "us_p10", "us_p90", "GB/s", "ceilGB/s", "GFLOP/s", "relerr", "ok");
  for (const auto& r : bench::run_cpu(o))
    std::printf("%-6ld %-6ld %-6ld %-5s %-14s %-34s %-4s %10.1f %10.1f %10.1f %8.2f %8.2f %9.1f %8.1e %5s\n", r.shape.m,
                r.shape.n, r.shape.k, dtype_name(r.dtype), r.variant.c_str(), r.kernel.c_str(), r.cold ? "cold" : "hot",
                r.us_median, r.us_p10, r.us_p90, r.gbps, r.ceiling_gbps, r.gflops, r.max_rel_err,
                r.validated ? "yes" : "NO");
  return 0;
}
