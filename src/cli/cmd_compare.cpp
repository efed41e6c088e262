// cli/cmd_compare.cpp -- `nvfp4 compare`: is B faster than A, and is the difference real?
//
//   nvfp4 compare --a ./old/nvfp4 --b ./build/nvfp4                 two builds, default workload
//   nvfp4 compare --a self --b "NVFP4_CUDA_TUNING=narrow.json self"  two tuning tables
//   nvfp4 compare --a self --b "self --extra-work 0.03" --rounds 40  a known 3% slowdown
//   nvfp4 compare --a A --b B --model llama-3-8b --layers 8 --json ab.json --plot ab.svg
//
// Each variant is a child process (`BIN bench --serve <workload>`; see bench/compare.h) that
// allocates and validates its weights once; rounds then alternate A B B A ... With one process
// pair the verdict comes from a bootstrap confidence interval of the median per-round ratio; with
// --processes P >= 2 (fresh processes, fresh allocations) from a t interval over the pairs, which
// also covers where the weights landed (bench/stats.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "bench/compare.h"
#include "bench/machine.h"
#include "bench/report.h"
#include "bench/workload_cli.h"
#include "cli/commands.h"
#include "io/file_util.h"
#include "nvfp4/error.h"

namespace nvfp4::cli {
namespace {

struct CompareArgs {
  bench::WorkloadArgs w;
  std::string a, b;
  int rounds = 30;
  int processes = 0;  // 0: the backend's default (default_processes)
  int reps = 3;
  double confidence = 0.95;
  double effect = 2.0;  // percent
  double min_effect = 0.5;  // percent: smallest difference that can make a verdict (bench/stats.h)
  bool dense = false;
  std::string json, csv, plot;
};

// Process pairs when --processes is not given. CPU: 3, since two allocations of the same model
// measured ~3% apart there (bench/stats.h), more than the changes worth detecting. GPU: 1, since
// A against A in two processes differed by 0.13% on the H200 (bench/stats.h), below the 0.5%
// smallest effect, and one pair keeps the interval as tight as its rounds allow.
int default_processes(const bench::WorkloadArgs& w) { return w.resolved_backend() == "cpu" ? 3 : 1; }

void run_compare(const CompareArgs& c) {
  using namespace nvfp4::bench;
  check_commit_env("compare");
  if (c.rounds < 2) fail("compare", "--rounds must be >= 2 (got " + std::to_string(c.rounds) + ")");
  // --processes and --reps are range-checked by the parser (add_compare_command).
  const int processes = c.processes > 0 ? c.processes : default_processes(c.w);
  if (!(c.effect > 0 && c.effect < 100)) fail("compare", "--effect must be a percentage in (0, 100)");
  // (0.5, 1): what the interval code (bench/stats.cpp) accepts, checked before any round runs.
  if (!(c.confidence > 0.5 && c.confidence < 1))
    fail("compare", "--confidence must be in (0.5, 1), e.g. 0.95 (got " + std::to_string(c.confidence) + ")");
  if (!(c.min_effect >= 0 && c.min_effect < 100)) fail("compare", "--min-effect must be a percentage in [0, 100)");
  if (c.w.mode == "both") fail("compare", "--mode both: compare one mode at a time (decode or prefill)");
  for (const std::string* out : {&c.json, &c.csv, &c.plot})  // before the rounds, not after them
    if (!out->empty() && *out != "-") io::check_output_file(*out, "compare");
  std::vector<std::string> wl = c.w.forward_args();
  if (c.w.extra_work > 0) wl.insert(wl.end(), {"--extra-work", std::to_string(c.w.extra_work)});
  if (c.dense) wl.push_back("--serve-dense");
  FILE* tout = c.json == "-" ? stderr : stdout;
  std::fprintf(tout, "starting A and B: %d process pair%s of %d rounds (weights are generated and validated once per process) ...\n",
               processes, processes > 1 ? "s" : "", c.rounds);
  std::fflush(tout);
  nlohmann::json a_ready = nlohmann::json::array(), b_ready = nlohmann::json::array();
  const CompareRun run = run_processes(
      [&] { return std::make_unique<ProcessSampler>(c.a, wl, c.reps); },
      [&] { return std::make_unique<ProcessSampler>(c.b, wl, c.reps); }, processes, c.rounds, 1, stderr_is_tty(),
      [&](int, Sampler& a, Sampler& b) {
        a_ready.push_back(nlohmann::json::parse(static_cast<ProcessSampler&>(a).ready_line()));
        b_ready.push_back(nlohmann::json::parse(static_cast<ProcessSampler&>(b).ready_line()));
      });
  const CompareStats s =
      compare_samples(run.a_us, run.b_us, c.confidence, c.effect / 100, 1, 4000, c.min_effect / 100, run.process);
  std::fputs(compare_text(run, s).c_str(), tout);
  nlohmann::json workload{{"args", wl}, {"reps_per_sample", c.reps}, {"rounds_per_process", c.rounds},
                          {"a_ready", a_ready}, {"b_ready", b_ready}};
  if (!c.json.empty()) {
    nlohmann::json j = report_envelope();
    j["compare"] = to_json(run, s, workload);
    write_text(c.json, j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
  if (!c.csv.empty()) write_text(c.csv, compare_csv(run));
  if (!c.plot.empty()) write_plot(c.plot, ab_svg(run.a_us, run.b_us, s, c.a, c.b, "nvfp4 compare: B / A"));
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto c = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand("compare", "A/B comparison of two builds or configurations, interleaved, with a verdict");
  cmd->add_option("--a", c->a, "variant A: \"[KEY=VAL ...] BIN [bench args]\" (BIN 'self' = this nvfp4)")->required();
  cmd->add_option("--b", c->b, "variant B, same form")->required();
  c->w.add_to(cmd);
  cmd->add_option("--shape", c->w.shapes, "compare on shapes M,N,K (repeatable; each rotated through 256 MB) instead of a model");
  cmd->add_option("--rounds,-n", c->rounds, "rounds per process pair (one A and one B sample each; default 30)");
  cmd->add_option("--processes", c->processes,
                  "process pairs, each with its own allocation of the weights (default: 3 on the CPU, 1 on the GPU; "
                  "with >= 2 the interval is over pairs)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--reps", c->reps, "replays per sample, median taken (default 3)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--confidence", c->confidence, "confidence level of the interval (default 0.95)");
  cmd->add_option("--effect", c->effect, "effect size in percent for the rounds-needed estimate (default 2)");
  cmd->add_option("--min-effect", c->min_effect,
                  "smallest difference in percent that can make a verdict (default 0.5: separate processes of one "
                  "build differ by ~0.1-0.2%)");
  cmd->add_flag("--dense", c->dense, "compare the dense bf16 baseline replays instead of NVFP4");
  cmd->add_option("--json", c->json, "write the JSON report (docs/bench-json.md) to FILE, or - for stdout");
  cmd->add_option("--csv", c->csv, "write per-round samples as CSV to FILE");
  cmd->add_option("--plot", c->plot, "write the A/B distribution plot to FILE (.svg or .png)");
  cmd->callback([c] { run_compare(*c); });
}

}  // namespace nvfp4::cli
