// cli/main.cpp -- the `nvfp4` command: subcommands, and the one place errors become exit codes.
//   0 success; 1 an nvfp4::Error or other failure (one line on stderr); 2 bad command line.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "kernels/cpu/parallel_for.h"
#include "nvfp4/error.h"

namespace {

// Benchmarks run oneDNN (OpenMP, libgomp) and nvfp4's own thread pool in one process. libgomp
// reads its settings when it is loaded, before main, so the benchmark commands re-execute
// themselves once with them set (a user's own setting is kept):
//  * OMP_WAIT_POLICY=PASSIVE: libgomp busy-waits after every parallel region by default, so its
//    idle threads steal the cores from the next nvfp4 call and vice versa. Measured 2026-11-30 on
//    the 2-core EPYC, M=16 N=1024 K=4096 bf16: oneDNN 8.0 ms and nvfp4 5.2 ms per call with the
//    default policy, 0.68 ms and 0.88 ms with PASSIVE.
//  * OMP_NUM_THREADS (`nvfp4 bench` only) = the CPU backend's thread count, so the dense
//    baseline runs as many threads as NVFP4 does. libgomp sizes its team from the affinity mask
//    and knows neither NVFP4_NUM_THREADS nor a cgroup CPU quota (docs/perf-cpu.md 36). `compare`
//    is left alone: its children are `bench` processes, and each sets its own.
void openmp_env_for_benchmarks(int argc, char** argv) {
  if (argc < 2) return;
  const bool bench = std::strcmp(argv[1], "bench") == 0;
  if (!bench && std::strcmp(argv[1], "compare") != 0) return;
  bool changed = false;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    changed = true;
  }
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (bench && (omp == nullptr || *omp == '\0')) {  // set but empty is unset to libgomp too
    int threads = 0;
    try {
      threads = nvfp4::cpu::configured_threads();  // a malformed NVFP4_NUM_THREADS is an Error
    } catch (const nvfp4::Error& e) {
      std::fprintf(stderr, "nvfp4: %s\n", e.what());
      std::exit(1);
    }
    setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
    changed = true;
  }
  if (changed) execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
}

}  // namespace

int main(int argc, char** argv) {
  openmp_env_for_benchmarks(argc, argv);
  CLI::App app{"nvfp4: NVFP4 (E2M1 + E4M3 block scales) weight-only W4A16 toolkit"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nvfp4 0.1.0");
  nvfp4::cli::add_quantize_command(app);
  nvfp4::cli::add_dequantize_command(app);
  nvfp4::cli::add_inspect_command(app);
  nvfp4::cli::add_bench_command(app);
  nvfp4::cli::add_compare_command(app);
  nvfp4::cli::add_tune_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "nvfp4: %s (see nvfp4 --help)\n", e.what());
    return 2;
  } catch (const nvfp4::Error& e) {
    std::fprintf(stderr, "nvfp4: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "nvfp4: %s: out of memory (a tensor or buffer larger than this machine can allocate)\n",
                 app.get_subcommands().empty() ? "nvfp4" : app.get_subcommands().front()->get_name().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nvfp4: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
