// cli/cmd_bench.cpp -- `nvfp4 bench`: model replay (the main job), shape microbenchmarks,
// reports (table, JSON, CSV, roofline plot), and the `--serve` child mode `nvfp4 compare` drives.
//
//   nvfp4 bench                      decode + prefill replay of the default model on the best
//                                    backend, NVFP4 against dense bf16 (< 1 minute)
//   nvfp4 bench --model llama-3-8b --layers 8 --mode decode --json out.json --plot roof.svg
//   nvfp4 bench --shape 1,4096,4096 --shape 16,4096,14336     shape microbenchmarks
//   nvfp4 bench --shapes default                              the default shape set
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/compare.h"
#include "bench/machine.h"
#include "bench/report.h"
#include "bench/workload_cli.h"
#include "cli/commands.h"
#include "io/file_util.h"
#include "nvfp4/error.h"

namespace nvfp4::cli {
namespace {

struct BenchArgs {
  bench::WorkloadArgs w;
  std::string shape_set;  // "default"
  double seconds = 2.0;
  int samples = 5;
  bool no_dense = false, no_nvfp4 = false;
  std::string json, csv, plot;
  bool list_models = false;
  bool serve = false, serve_dense = false;
};

// The default microbenchmark set: M in {1, 2, 16, 2048} on the seed's four (N, K) and on every
// distinct (N, K) of the default model's linears.
std::vector<bench::Shape> default_shapes(const bench::ModelSpec& m) {
  std::vector<std::pair<std::int64_t, std::int64_t>> nk{{4096, 512}, {4096, 4096}, {16384, 16384}, {16384, 28672}};
  bench::LinearPlan p;
  p.layers = 1;
  for (const auto& l : bench::model_linears(m, p))
    if (std::find(nk.begin(), nk.end(), std::make_pair(l.n, l.k)) == nk.end()) nk.push_back({l.n, l.k});
  std::vector<bench::Shape> s;
  for (std::int64_t mm : {1, 2, 16, 2048})
    for (auto [n, k] : nk) s.push_back({mm, n, k});
  return s;
}

void run_bench(BenchArgs& a) {
  using namespace nvfp4::bench;
  check_commit_env("bench");
  if (a.list_models) {
    std::printf("%-18s %7s %9s %12s  %s\n", "name", "layers", "params", "NVFP4 bytes", "description");
    for (const auto& n : builtin_model_names()) {
      const ModelSpec m = load_model(n);
      LinearPlan p;
      p.layers = m.layers;
      const double params = linear_params(model_linears(m, p));
      std::printf("%-18s %7lld %8.2fG %12s  %s\n", n.c_str(), static_cast<long long>(m.layers), params / 1e9,
                  human_bytes(params * (0.5 + 1.0 / 16)).c_str(), m.description.c_str());
    }
    return;
  }
  if (a.samples < 1) fail("bench", "--samples must be >= 1 (got " + std::to_string(a.samples) + ")");
  // Output paths before the run, not after it: a bad --csv no longer wastes the benchmark.
  for (const std::string* out : {&a.json, &a.csv, &a.plot})
    if (!out->empty() && *out != "-") io::check_output_file(*out, "bench");
  if (!(a.seconds >= 0)) fail("bench", "--seconds must be >= 0");
  const std::string backend = a.w.resolved_backend();
  if (backend == "cuda" && !cuda::available())
    fail("bench", "--backend cuda: " + cuda::unavailable_reason());

  if (a.serve) {
    const ReplayMode m = a.w.mode == "prefill" ? ReplayMode::kPrefill : ReplayMode::kDecode;
    serve_replay(a.w.options(m), a.serve_dense, std::cin, std::cout);
    return;
  }

  // With --json - the report owns stdout; tables go to stderr.
  FILE* tout = a.json == "-" ? stderr : stdout;
  std::vector<ReplayResult> replays;
  std::vector<Row> rows;

  if (!a.w.shapes.empty() || !a.shape_set.empty()) {
    if (!a.shape_set.empty() && a.shape_set != "default") fail("bench", "--shapes '" + a.shape_set + "' (only 'default')");
    // Shape runs always time NVFP4 (the baseline rows are its yardstick); --no-dense skips the
    // baseline.
    if (a.no_nvfp4) fail("bench", "--no-nvfp4 applies to the model replay only: a shape run (--shape/--shapes) always times NVFP4");
    a.w.refuse_replay_options();
    Options bo;
    bo.dense = !a.no_dense;
    bo.dtype = dtype_from_name(a.w.dtype);
    bo.min_reps = std::max(a.samples, 5);
    bo.min_seconds = std::min(a.seconds, 0.2);
    bo.seed = a.w.seed;
    for (const auto& s : a.w.shapes) {
      long long m = 0, n = 0, k = 0;
      char tail = 0;
      if (std::sscanf(s.c_str(), "%lld,%lld,%lld%c", &m, &n, &k, &tail) != 3)
        fail("bench", "--shape '" + s + "': expected M,N,K (e.g. 1,4096,4096)");
      bo.shapes.push_back({m, n, k});
    }
    if (a.shape_set == "default") {
      const auto d = default_shapes(load_model(a.w.model.empty() ? (backend == "cpu" ? "qwen3-4b" : "llama-3-8b") : a.w.model));
      for (const auto& s : d) {
        // On 2 CPU cores M=2048 at 16384x28672 (1.9 TFLOP) takes minutes per repetition: the CPU
        // default set keeps shapes under 1e11 flop (~1 s at the ~100 GFLOP/s these cores reach).
        const double flops = 2.0 * s.m * s.n * s.k;
        if (backend == "cpu" && flops > 1e11) {
          std::fprintf(tout, "skipped on cpu (%.2g flop, pass --shape to force): %lld,%lld,%lld\n", flops,
                       static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k));
          continue;
        }
        bo.shapes.push_back(s);
      }
    }
    rows = backend == "cpu" ? run_cpu(bo) : run_cuda(bo);
    if (rows.empty())
      std::fprintf(tout, "the %s shape benchmark returned no rows: every shape was skipped\n", backend.c_str());
    std::fputs(rows_table(rows).c_str(), tout);
  } else {
    std::vector<ReplayMode> modes;
    if (a.w.mode.empty() || a.w.mode == "both" || a.w.mode == "decode") modes.push_back(ReplayMode::kDecode);
    if (a.w.mode.empty() || a.w.mode == "both" || a.w.mode == "prefill") modes.push_back(ReplayMode::kPrefill);
    if (a.w.is_main_job_cpu())
      std::fprintf(tout, "main job on cpu: qwen3-4b, first 4 of 36 layers + lm_head, scaled to the whole model "
                         "(--model/--layers to change)\n");
    for (auto m : modes) {
      ReplayOptions o = a.w.options(m);
      o.dense = !a.no_dense;
      o.nvfp4 = !a.no_nvfp4;
      if (!o.dense && !o.nvfp4) fail("bench", "--no-dense and --no-nvfp4 leave nothing to run");
      o.seconds = a.seconds;
      o.min_samples = a.samples;
      o.progress = stderr_is_tty();
      replays.push_back(run_replay(o));
      std::fputs(replay_table(replays.back()).c_str(), tout);
      std::fflush(tout);
    }
  }

  if (!a.json.empty()) {
    nlohmann::json j = report_envelope();
    j["replays"] = nlohmann::json::array();
    for (const auto& r : replays) j["replays"].push_back(to_json(r));
    j["shapes"] = nlohmann::json::array();
    for (const auto& r : rows) j["shapes"].push_back(to_json(r));
    write_text(a.json, j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  if (!a.csv.empty()) write_text(a.csv, replays.empty() ? rows_csv(rows) : replays_csv(replays));
  if (!a.plot.empty()) {
    double ceiling = 0;
    for (const auto& r : replays) ceiling = std::max(ceiling, r.ceiling_gbps);
    for (const auto& r : rows) ceiling = std::max(ceiling, r.ceiling_gbps);
    const auto m = machine_info();
    write_plot(a.plot, roofline_svg(roofline_points(replays, rows), ceiling, 0,
                                    fmt::format("nvfp4 roofline on {} ({})", backend == "cpu" ? m.cpu_model : m.gpu, backend)));
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* c = app.add_subcommand("bench", "benchmark: model replay (default) or shape microbenchmarks, NVFP4 vs dense bf16");
  a->w.add_to(c);
  c->add_option("--shape", a->w.shapes, "shape microbenchmark M,N,K (repeatable)");
  c->add_option("--shapes", a->shape_set, "named shape set: default");
  c->add_option("--seconds", a->seconds, "sampling time per variant and mode (default 2)");
  c->add_option("--samples", a->samples, "minimum timed samples per variant (default 5)");
  c->add_flag("--no-dense", a->no_dense, "skip the dense bf16 baseline");
  c->add_flag("--no-nvfp4", a->no_nvfp4, "skip the NVFP4 replay (baseline only)");
  c->add_option("--json", a->json, "write the JSON report (docs/bench-json.md) to FILE, or - for stdout");
  c->add_option("--csv", a->csv, "write a CSV table to FILE");
  c->add_option("--plot", a->plot, "write the roofline plot to FILE (.svg, or .png via rsvg-convert)");
  c->add_flag("--list-models", a->list_models, "list the built-in models");
  c->add_flag("--serve", a->serve, "child mode for `nvfp4 compare`: answer 'run R' lines on stdin");
  c->add_flag("--serve-dense", a->serve_dense, "with --serve: serve the dense bf16 baseline instead of NVFP4");
  c->callback([a] { run_bench(*a); });
}

}  // namespace nvfp4::cli
