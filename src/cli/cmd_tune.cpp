// cli/cmd_tune.cpp -- `nvfp4 tune`: autotune the CUDA GEMV tuning table on the present GPU and
// write it as JSON (use it with NVFP4_CUDA_TUNING=FILE, or paste it into tuning_sm90.cpp).
// The table changes speed only (see src/kernels/cuda/tuning_sm90.h). Without the CUDA backend
// the command exists and says so.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "kernels/cuda/tuning_sm90.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"

namespace nvfp4::cli {
namespace {

struct TuneArgs {
  std::string out;
  std::vector<std::string> shapes;  // shape classes
  int reps = 30;
  bool list = false;
  std::string layout = "both";  // canonical | repacked | both
  bool repacked = false;        // --repacked: same as --layout repacked
};

void run_tune(const TuneArgs& a) {
  if (a.list) {
    for (const auto& c : cuda::gemv_shape_classes()) {
      std::int64_t n = 0, k = 0;
      cuda::gemv_class_representative(c, &n, &k);
      std::printf("%-20s tuned at N=%lld K=%lld\n", c.c_str(), static_cast<long long>(n), static_cast<long long>(k));
    }
    return;
  }
  for (const auto& s : a.shapes)
    if (!cuda::gemv_class_known(s))
      fail("tune", "unknown shape class '" + s + "' (see nvfp4 tune --list; exact/NxK names any shape)");
  const std::string layout = a.repacked ? "repacked" : a.layout;
  std::vector<cuda::GemvLayout> layouts;
  if (layout == "canonical" || layout == "both") layouts.push_back(cuda::GemvLayout::kCanonical);
  if (layout == "repacked" || layout == "both") layouts.push_back(cuda::GemvLayout::kRepacked);
  if (layouts.empty()) fail("tune", "--layout must be canonical, repacked or both (got '" + a.layout + "')");
  if (a.repacked && a.layout != "both" && a.layout != "repacked")
    fail("tune", "--repacked contradicts --layout " + a.layout);
  if (a.reps < 1) fail("tune", "--reps must be >= 1 (got " + std::to_string(a.reps) + ")");
  if (!cuda::compiled()) fail("tune", "no CUDA backend in this build of nvfp4 (configure with nvcc on PATH)");
  if (!cuda::available()) fail("tune", "no CUDA backend usable here: no CUDA device with compute capability 9.0");
  cuda::TuneOptions opts;
  opts.classes = a.shapes;
  opts.reps = a.reps;
  opts.layouts = layouts;
  const auto table = cuda::gemv_autotune(opts);
  const std::string json = cuda::gemv_table_to_json(
      table, "written by nvfp4 tune (M=1 bf16, weights rotated through >= 256 MiB, CUDA graph, median); "
             "changes speed only");
  if (a.out.empty()) {
    std::fputs(json.c_str(), stdout);
    return;
  }
  std::ofstream f(a.out);
  if (!f) fail("tune", "cannot write '" + a.out + "'");
  f << json;
  if (!f) fail("tune", "write to '" + a.out + "' failed");
  std::printf("wrote %s (%zu entries); use it with NVFP4_CUDA_TUNING=%s\n", a.out.c_str(), table.size(),
              a.out.c_str());
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* sub = app.add_subcommand(
      "tune", "Autotune the CUDA GEMV tuning table (rows per warp, warps per block, K split; per weight layout) on this GPU "
              "and write it as JSON (read back through NVFP4_CUDA_TUNING=FILE). Needs the CUDA backend.");
  sub->add_option("--out", args->out, "output JSON file (default: stdout)");
  sub->add_option("--shapes", args->shapes, "shape classes to tune (default: all; see --list)");
  sub->add_option("--reps", args->reps, "launches per timed graph replay (default 30)");
  sub->add_option("--layout", args->layout,
                  "weight layout(s) to tune: canonical (quantized_matmul), repacked (quantized_matmul_repacked, "
                  "its own kernel and table entries) or both (default)");
  sub->add_flag("--repacked", args->repacked, "tune the repacked layout only (same as --layout repacked)");
  sub->add_flag("--list", args->list, "list the shape classes and the shape each is tuned at");
  sub->callback([args] { run_tune(*args); });
}

}  // namespace nvfp4::cli
