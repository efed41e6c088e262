// tests/cuda/bench_cuda_main.cpp -- nvfp4_bench_cuda: runs bench::run_cuda (the same engine as
// `nvfp4 bench` with the CUDA backend) over the target shapes and writes one JSON file
// with the GPU, driver, commit and command. scripts/device_cuda.sh uses it for
// bench/results/cuda-*.json. Usage:
//   nvfp4_bench_cuda [--out FILE] [--dtype bf16|f16|f32] [--shapes MxNxK,...] [--warm]
//   nvfp4_bench_cuda --tune FILE     (the autotuner of `nvfp4 tune`, both layouts, when the CLI is not built)
// Env NVFP4_BENCH_TUNED=FILE adds rows "nvfp4_repacked_tuned": that table's repacked tile, same run.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/machine.h"
#include "kernels/cuda/tuning_sm90.h"
#include "nvfp4/error.h"

int main(int argc, char** argv) {
  using namespace nvfp4;
  std::string out, shapes_arg, dtype = "bf16";
  bool warm = false;
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--out") out = next();
    else if (a == "--dtype") dtype = next();
    else if (a == "--shapes") shapes_arg = next();
    else if (a == "--warm") warm = true;
    else if (a == "--tune") {
      const std::string f = next();
      try {
        const auto t = cuda::gemv_autotune({});
        std::ofstream(f) << cuda::gemv_table_to_json(t, "written by nvfp4_bench_cuda --tune (same engine as nvfp4 tune); changes speed only");
        std::printf("wrote %s\n", f.c_str());
        return 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tune: %s\n", e.what());
        return 1;
      }
    }
    else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
  }
  try {
    bench::check_commit_env("nvfp4_bench_cuda");
    bench::Options o;
    o.dtype = dtype_from_name(dtype);
    o.cold = !warm;
    if (shapes_arg.empty())
      // The targets, Llama-3-8B decode (q/k/v/o 1024|4096 x 4096, fused qkv 6144x4096,
      // gate/up 14336x4096, gate+up 28672x4096, down 4096x14336, lm_head 128256x4096), M scaling.
      shapes_arg = "1x16384x16384,1x16384x28672,1x151936x2560,1x4096x14336,1x28672x4096,1x4096x512,1x4096x4096,"
                   "1x1024x4096,1x6144x4096,1x14336x4096,1x128256x4096,"
                   "2x16384x16384,4x16384x16384,8x16384x16384,16x16384x16384,2x4096x14336,4x4096x14336,"
                   "8x4096x14336,16x4096x14336,2048x4096x14336,2048x28672x4096,"
                   // Batched decode (the repacked GEMM above 16 rows, side by side with the GEMV in
                   // launches of 16): Llama-3-8B's q/o, k/v, gate/up, down and lm_head at M = 64,
                   // 4096 x 4096 at M = 24..256.
                   "24x4096x4096,32x4096x4096,64x4096x4096,128x4096x4096,256x4096x4096,64x1024x4096,64x14336x4096,"
                   "64x4096x14336,64x128256x4096";
    std::stringstream ss(shapes_arg);
    std::string tok;
    while (std::getline(ss, tok, ',')) {
      bench::Shape s;
      if (std::sscanf(tok.c_str(), "%ldx%ldx%ld", &s.m, &s.n, &s.k) != 3) fail("bench", "bad shape '" + tok + "' (MxNxK)");
      o.shapes.push_back(s);
    }
    const auto rows = bench::run_cuda(o);
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    nlohmann::json j;
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    j["date"] = date;
    j["gpu"] = prop.name;
    j["sms"] = prop.multiProcessorCount;
    j["l2_bytes"] = prop.l2CacheSize;
    j["cuda_driver"] = drv;
    j["cuda_runtime"] = rt;
    // NVFP4_DRIVER if set (device_cuda.sh passes nvidia-smi's), else what `nvfp4 bench` reports
    // (/proc/driver/nvidia/version): the 2026-12-07 H100 call ran this binary directly and its
    // JSON said "driver": "".
    std::string driver = std::getenv("NVFP4_DRIVER") ? std::getenv("NVFP4_DRIVER") : "";
    if (driver.empty()) {
      bench::MachineInfo mi;
      bench::cuda_machine_info(mi);
      driver = mi.driver;
    }
    j["driver"] = driver;
    j["commit"] = bench::git_commit();
    j["command"] = cmd;
    j["tuning"] = std::getenv("NVFP4_CUDA_TUNING") ? std::getenv("NVFP4_CUDA_TUNING") : "built-in";
    j["rows"] = nlohmann::json::array();
    std::printf("%-12s %-28s %3s %7s %6s  %9s %9s %9s  %8s %8s\n", "variant", "kernel", "M", "N", "K", "us/call",
                "us_graph", "p90", "GB/s(g)", "rel.err");
    for (const auto& r : rows) {
      const double gbps_graph = r.us_graph > 0 ? r.bytes / r.us_graph / 1e3 : 0;
      j["rows"].push_back({{"backend", r.backend}, {"kernel", r.kernel}, {"variant", r.variant},
                           {"m", r.shape.m}, {"n", r.shape.n}, {"k", r.shape.k}, {"dtype", dtype_name(r.dtype)},
                           {"cold", r.cold}, {"us_median", r.us_median}, {"us_p10", r.us_p10}, {"us_p90", r.us_p90},
                           {"us_graph", r.us_graph}, {"bytes", r.bytes}, {"gbps", r.gbps},
                           {"gbps_graph", gbps_graph}, {"gflops", r.gflops}, {"ceiling_gbps", r.ceiling_gbps},
                           {"max_rel_err", r.max_rel_err}, {"validated", r.validated},
                           {"samples", r.samples_us.size()}});
      std::printf("%-12s %-28s %3ld %7ld %6ld  %9.2f %9.2f %9.2f  %8.0f %8.1e\n", r.variant.c_str(), r.kernel.c_str(),
                  r.shape.m, r.shape.n, r.shape.k, r.us_median, r.us_graph, r.us_p90, gbps_graph, r.max_rel_err);
    }
    if (!rows.empty()) std::printf("copy ceiling (read+write) %.0f GB/s\n", rows[0].ceiling_gbps);
    if (!out.empty()) {
      std::ofstream f(out);
      f << j.dump(2) << "\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvfp4_bench_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}
