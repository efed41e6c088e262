// bench/report.cpp -- tables, JSON, CSV and plot files for `nvfp4 bench` / `nvfp4 compare`.
#include "bench/report.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "bench/machine.h"
#include "io/file_util.h"
#include "nvfp4/error.h"

extern char** environ;

namespace nvfp4::bench {

nlohmann::json report_envelope(std::vector<std::string> argv) {
  if (argv.empty()) {
    std::ifstream f("/proc/self/cmdline", std::ios::binary);
    std::string arg;
    while (std::getline(f, arg, '\0')) argv.push_back(arg);
  }
  const MachineInfo m = machine_info();
  auto gpu_only = [&m](const auto& v) { return m.gpu.empty() ? nlohmann::json() : nlohmann::json(v); };  // null without a GPU
  nlohmann::json j;
  j["schema"] = kJsonSchema;
  j["tool"] = "nvfp4 0.1.0";
  j["date"] = iso_date_utc();
  j["commit"] = git_commit();
  j["command"] = argv;
  j["machine"] = {{"cpu", m.cpu_model},
                  {"cores", m.cores},
                  {"cpus_available", m.cpus_available},
                  {"cpu_threads", m.cpu_threads},
                  {"omp_num_threads", m.omp_num_threads.empty() ? nlohmann::json() : nlohmann::json(m.omp_num_threads)},
                  {"mem_total_bytes", m.mem_total_bytes},
                  {"llc_bytes", m.llc_bytes},
                  {"os", m.os},
                  {"gpu", gpu_only(m.gpu)},
                  {"driver", m.driver.empty() ? nlohmann::json() : nlohmann::json(m.driver)},
                  {"gpu_mem_bytes", gpu_only(m.gpu_mem_bytes)},
                  {"gpu_index", gpu_only(m.gpu_index)},
                  {"gpu_count", m.gpu_count},
                  {"gpu_pci_bus_id", gpu_only(m.gpu_pci_bus_id)}};
  return j;
}

nlohmann::json to_json(const ReplayResult& r) {
  const auto& o = r.options;
  nlohmann::json lin = nlohmann::json::array();
  for (const auto& l : r.linears)
    lin.push_back({{"name", l.name}, {"layer", l.layer}, {"m", linear_m(o, l)}, {"n", l.n}, {"k", l.k}});
  nlohmann::json vars = nlohmann::json::array();
  for (const auto& v : r.variants) {
    vars.push_back({{"variant", v.variant},
                    {"backend", v.backend},
                    {"kernel", v.kernel},
                    {"weight_bytes", v.weight_bytes},
                    {"bytes", v.bytes},
                    {"flops", v.flops},
                    {"us_median", v.us_median},
                    {"us_p10", v.us_p10},
                    {"us_p90", v.us_p90},
                    {"tokens_per_s", v.tokens_per_s},
                    {"full_us", v.full_us},
                    {"full_tokens_per_s", v.full_tokens_per_s},
                    {"gbps", v.gbps},
                    {"gflops", v.gflops},
                    {"pct_ceiling", v.pct_ceiling},
                    {"peak_mem_bytes", v.peak_mem_bytes},
                    {"validated", v.validated},
                    {"max_err", v.max_err},
                    {"validation", v.validation},
                    {"samples_us", v.samples_us},
                    {"layers_us", v.layers_us},
                    {"rest_us", v.rest_us}});
  }
  const auto& m = o.model;
  nlohmann::json j{{"model",
                    {{"name", m.name},
                     {"description", m.description},
                     {"source", m.source},
                     {"hidden_size", m.hidden},
                     {"intermediate_size", m.intermediate},
                     {"num_attention_heads", m.heads},
                     {"num_key_value_heads", m.kv_heads},
                     {"head_dim", m.head_dim},
                     {"num_hidden_layers", m.layers},
                     {"vocab_size", m.vocab},
                     {"tie_word_embeddings", m.tied_embeddings}}},
                   {"mode", replay_mode_name(o.mode)},
                   {"tokens", r.tokens},
                   {"prompt", o.mode == ReplayMode::kPrefill ? nlohmann::json(o.prompt) : nlohmann::json()},
                   {"batch", o.mode == ReplayMode::kDecode ? nlohmann::json(o.batch) : nlohmann::json()},
                   {"layers_replayed", o.custom_linears.empty() ? o.plan.layers : 0},
                   {"layers_total", o.custom_linears.empty() ? m.layers : 0},
                   {"scaled", r.scaled},
                   {"lm_head", o.plan.lm_head},
                   {"fused", o.plan.fuse},
                   {"extra_work", o.plan.extra_work},
                   {"backend", o.backend},
                   {"dtype", dtype_name(o.dtype)},
                   {"seed", o.seed},
                   {"cold", r.cold},
                   {"ceiling_gbps", r.ceiling_gbps},
                   {"ceiling_source", r.ceiling_source},
                   {"linears", lin},
                   {"variants", vars}};
  if (r.variants.size() == 2 && r.variants[0].us_median > 0)
    j["speedup_vs_dense"] = r.variants[1].full_us / r.variants[0].full_us;
  return j;
}

nlohmann::json to_json(const Row& r) {
  return {{"backend", r.backend},     {"kernel", r.kernel},       {"variant", r.variant},
          {"m", r.shape.m},           {"n", r.shape.n},           {"k", r.shape.k},
          {"dtype", dtype_name(r.dtype)}, {"cold", r.cold},       {"us_median", r.us_median},
          {"us_p10", r.us_p10},       {"us_p90", r.us_p90},       {"us_graph", r.us_graph},
          {"bytes", r.bytes},         {"gbps", r.gbps},           {"gflops", r.gflops},
          {"ceiling_gbps", r.ceiling_gbps}, {"pct_ceiling", r.ceiling_gbps > 0 ? 100 * r.gbps / r.ceiling_gbps : 0.0},
          {"max_rel_err", r.max_rel_err}, {"validated", r.validated}, {"samples_us", r.samples_us}};
}

nlohmann::json to_json(const CompareRun& run, const CompareStats& s, const nlohmann::json& workload) {
  return {{"a", run.a_name},
          {"b", run.b_name},
          {"workload", workload},
          {"order", "ABBA"},
          {"rounds", s.rounds},
          {"a_us", run.a_us},
          {"b_us", run.b_us},
          {"median_a_us", s.median_a},
          {"median_b_us", s.median_b},
          {"process", run.process},
          {"processes", s.processes},
          {"process_ratios", s.process_ratios},
          {"process_log_sigma", s.process_log_sigma},
          {"processes_needed", s.processes_needed},
          {"ratio", s.ratio},
          {"ratio_definition", s.processes > 1 ? "geometric mean over process pairs of the median of b_us[i] / a_us[i] over the pair's rounds"
                                               : "median over rounds of b_us[i] / a_us[i]"},
          {"ci_low", s.ci_low},
          {"ci_high", s.ci_high},
          {"confidence", s.confidence},
          {"ratio_of_medians", s.ratio_of_medians},
          {"log_ratio_sigma", s.log_ratio_sigma},
          {"verdict", verdict_text(s.verdict)},
          {"min_effect", s.min_effect},
          {"below_threshold", s.below_threshold},
          {"effect", s.effect},
          {"rounds_needed", s.rounds_needed},
          {"detectable_effect", s.detectable_effect}};
}

std::string replay_table(const ReplayResult& r) {
  const auto& o = r.options;
  std::string s;
  const std::string what = o.custom_linears.empty()
                               ? fmt::format("{} layers of {}{}", o.plan.layers, o.model.layers, r.scaled ? " (scaled to all)" : "")
                               : fmt::format("{} shape linears", r.linears.size());
  s += fmt::format("{} replay of {} on {}: {}, {} linears{}, {} activations, M={}\n", replay_mode_name(o.mode),
                   o.model.name, o.backend, what, r.linears.size(), o.plan.lm_head && o.custom_linears.empty() ? " incl. lm_head" : "",
                   dtype_name(o.dtype), r.tokens);
  s += fmt::format("  ceiling {:.1f} GB/s ({}); weights {} {}\n", r.ceiling_gbps, r.ceiling_source,
                   r.variants.empty() ? std::string("-") : human_bytes(r.variants[0].weight_bytes),
                   r.cold ? "(larger than 3x the last-level cache: read from memory)" : "(within 3x the last-level cache: partly cache-resident, NOT a memory-bound measurement)");
  s += fmt::format("  {:<11} {:>10} {:>10} {:>11} {:>12} {:>8} {:>7} {:>9} {:>10} {:>5}  {}\n", "variant", "ms/replay", "p10-p90 %",
                   "tokens/s", r.scaled ? "full tok/s*" : "full tok/s", "GB/s", "% ceil", "GFLOP/s", "peak mem", "n", "kernel");
  for (const auto& v : r.variants) {
    const double spread = v.us_median > 0 ? 100 * (v.us_p90 - v.us_p10) / v.us_median : 0;
    s += fmt::format("  {:<11} {:>10.3f} {:>10.1f} {:>11.2f} {:>12.2f} {:>8.1f} {:>7.1f} {:>9.1f} {:>10} {:>5}  {}{}\n", v.variant,
                     v.us_median / 1e3, spread, v.tokens_per_s, v.full_tokens_per_s, v.gbps, v.pct_ceiling, v.gflops,
                     human_bytes(v.peak_mem_bytes), v.samples_us.size(), v.kernel, v.validated ? "" : "  [NOT VALIDATED]");
  }
  if (r.variants.size() == 2 && r.variants[0].full_us > 0)
    s += fmt::format("  nvfp4 vs {}: {:.2f}x the tokens/s\n", r.variants[1].variant, r.variants[1].full_us / r.variants[0].full_us);
  if (r.scaled)
    s += fmt::format("  * full tok/s: layer time x {}/{} + lm_head time, an estimate for the whole model\n", o.model.layers, o.plan.layers);
  return s;
}

std::string rows_table(const std::vector<Row>& rows) {
  // "cache": cold = weights rotated past the last-level cache (what decode pays), hot = one
  // weight copy reused (cache-resident); backends report both where they measure both.
  // "x read": us graph over that of the run's read_floor row for the same N x K and cache (the
  // CUDA rows: a plain read of the same bytes under the GEMV's launch, docs/bench.md), where
  // both exist: how far a kernel is from only reading its weights.
  auto read_us = [&](const Row& r) {
    for (const auto& f : rows)
      if (f.variant == "read_floor" && f.shape.n == r.shape.n && f.shape.k == r.shape.k && f.cold == r.cold && f.us_graph > 0)
        return f.us_graph;
    return 0.0;
  };
  std::string s = fmt::format("  {:>5} {:>6} {:>6}  {:<14} {:<5} {:<26} {:>10} {:>10} {:>6} {:>9} {:>9} {:>7} {:>6}\n", "M", "N",
                              "K", "variant", "cache", "kernel", "us median", "us graph", "x read", "GB/s", "GFLOP/s", "% ceil",
                              "valid");
  for (const auto& r : rows) {
    const double rd = r.us_graph > 0 ? read_us(r) : 0.0;
    s += fmt::format("  {:>5} {:>6} {:>6}  {:<14} {:<5} {:<26} {:>10.2f} {:>10} {:>6} {:>9.1f} {:>9.1f} {:>7} {:>6}\n", r.shape.m,
                     r.shape.n, r.shape.k, r.variant, r.cold ? "cold" : "hot", r.kernel.substr(0, 26), r.us_median,
                     r.us_graph > 0 ? fmt::format("{:.2f}", r.us_graph) : "-", rd > 0 ? fmt::format("{:.2f}", r.us_graph / rd) : "-",
                     r.gbps, r.gflops, r.ceiling_gbps > 0 ? fmt::format("{:.1f}", 100 * r.gbps / r.ceiling_gbps) : "-",
                     r.validated ? "yes" : "NO");
  }
  return s;
}

std::string compare_text(const CompareRun& run, const CompareStats& s) {
  std::string o;
  o += fmt::format("A: {}\nB: {}\n", run.a_name, run.b_name);
  o += fmt::format("{} rounds (A B B A ...){}: median A {:.1f} us, median B {:.1f} us\n", s.rounds,
                   s.processes > 1 ? fmt::format(" in {} process pairs", s.processes) : std::string(), s.median_a, s.median_b);
  if (s.processes > 1) {
    std::string each;
    for (double r : s.process_ratios) each += fmt::format("{}{:.4f}", each.empty() ? "" : ", ", r);
    o += fmt::format("B/A per process pair (median of its rounds): {}; spread {:.2f}% (sd of log)\n", each,
                     s.process_log_sigma * 100);
    o += fmt::format("B/A = {:.4f} ({:+.2f}%), {:.0f}% CI [{:.4f}, {:.4f}] (Student's t over the {} pairs: each pair has its own "
                     "allocation, so the interval covers where the weights landed, not only round-to-round noise)\n",
                     s.ratio, (s.ratio - 1) * 100, s.confidence * 100, s.ci_low, s.ci_high, s.processes);
  } else {
    o += fmt::format("B/A = {:.4f} ({:+.2f}%), {:.0f}% CI [{:.4f}, {:.4f}] (bootstrap of the median per-round ratio)\n", s.ratio,
                     (s.ratio - 1) * 100, s.confidence * 100, s.ci_low, s.ci_high);
  }
  o += fmt::format("verdict: {}", verdict_text(s.verdict));
  if (s.below_threshold)
    o += fmt::format(" (the CI excludes 1, but {:+.2f}% is below the {:.2f}% smallest effect of interest: two processes "
                     "of one build differ by that much)", (s.ratio - 1) * 100, s.min_effect * 100);
  o += "\n";
  if (s.processes > 1)
    o += fmt::format("these {} pairs detect a {:.2f}% change; a {:.1f}% change needs ~{} pairs at this spread "
                     "(per-round noise {:.2f}%: {} rounds per pair resolve {:.1f}% within one placement)\n",
                     s.processes, s.detectable_effect * 100, s.effect * 100, s.processes_needed, s.log_ratio_sigma * 100,
                     s.rounds_needed, s.effect * 100);
  else
    o += fmt::format("per-round noise {:.2f}% (robust sd of log B/A): these rounds detect a {:.2f}% change; a {:.1f}% change needs {} rounds\n",
                     s.log_ratio_sigma * 100, s.detectable_effect * 100, s.effect * 100, s.rounds_needed);
  return o;
}

std::string replays_csv(const std::vector<ReplayResult>& rs) {
  std::string s =
      "model,mode,backend,layers_replayed,layers_total,tokens,variant,kernel,us_median,us_p10,us_p90,tokens_per_s,full_tokens_per_s,"
      "gbps,pct_ceiling,gflops,weight_bytes,bytes,peak_mem_bytes,validated,samples\n";
  for (const auto& r : rs)
    for (const auto& v : r.variants)
      s += fmt::format("{},{},{},{},{},{},{},\"{}\",{:.3f},{:.3f},{:.3f},{:.4f},{:.4f},{:.3f},{:.2f},{:.3f},{:.0f},{:.0f},{:.0f},{},{}\n",
                       r.options.model.name, replay_mode_name(r.options.mode), r.options.backend, r.options.plan.layers,
                       r.options.model.layers, r.tokens, v.variant, v.kernel, v.us_median, v.us_p10, v.us_p90, v.tokens_per_s,
                       v.full_tokens_per_s, v.gbps, v.pct_ceiling, v.gflops, v.weight_bytes, v.bytes, v.peak_mem_bytes,
                       v.validated ? 1 : 0, v.samples_us.size());
  return s;
}

std::string rows_csv(const std::vector<Row>& rows) {
  std::string s = "backend,kernel,variant,m,n,k,dtype,cold,us_median,us_p10,us_p90,us_graph,bytes,gbps,gflops,ceiling_gbps,max_rel_err,validated\n";
  for (const auto& r : rows)
    s += fmt::format("{},\"{}\",{},{},{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.0f},{:.3f},{:.3f},{:.3f},{:.3g},{}\n", r.backend, r.kernel,
                     r.variant, r.shape.m, r.shape.n, r.shape.k, dtype_name(r.dtype), r.cold ? 1 : 0, r.us_median, r.us_p10, r.us_p90,
                     r.us_graph, r.bytes, r.gbps, r.gflops, r.ceiling_gbps, r.max_rel_err, r.validated ? 1 : 0);
  return s;
}

std::string compare_csv(const CompareRun& run) {
  std::string s = "round,process,first,a_us,b_us,ratio\n";
  std::size_t start = 0;  // first round of the current pair: each pair's rounds run A B B A ...
  for (std::size_t i = 0; i < run.a_us.size(); ++i) {
    const int p = i < run.process.size() ? run.process[i] : 0;
    if (i > 0 && i < run.process.size() && p != run.process[i - 1]) start = i;
    s += fmt::format("{},{},{},{:.3f},{:.3f},{:.6f}\n", i, p, (i - start) % 2 == 0 ? "A" : "B", run.a_us[i], run.b_us[i],
                     run.b_us[i] / run.a_us[i]);
  }
  return s;
}

std::vector<RooflinePoint> roofline_points(const std::vector<ReplayResult>& rs, const std::vector<Row>& rows) {
  std::vector<RooflinePoint> p;
  for (const auto& r : rs)
    for (const auto& v : r.variants)
      p.push_back({fmt::format("{} {} {}", r.options.model.name, replay_mode_name(r.options.mode), v.variant), v.flops / v.bytes, v.gflops,
                   v.variant.rfind("nvfp4", 0) != 0});
  for (const auto& r : rows) {
    if (r.gflops <= 0) continue;  // the yardstick rows (read_floor, launch_floor) do no arithmetic
    p.push_back({fmt::format("{}x{}x{} {} {}", r.shape.m, r.shape.n, r.shape.k, r.variant, r.cold ? "cold" : "hot"), r.bytes > 0 ? 2.0 * r.shape.m * r.shape.n * r.shape.k / r.bytes : 0,
                 r.gflops, r.variant.rfind("nvfp4", 0) != 0});
  }
  return p;
}

void write_text(const std::string& path, const std::string& text) { io::write_text_output(path, text, "bench"); }

namespace {
// Runs argv[0] (looked up in PATH) with argv, no shell in between (a path is never parsed as
// shell text: a --plot name with quotes once ran as a command), output discarded. Its exit
// status, or -1 when it could not be started or did not exit normally.
int run_program(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (err != 0) return -1;
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
}  // namespace

void write_plot(const std::string& path, const std::string& svg) {
  const bool png = path.size() > 4 && path.compare(path.size() - 4, 4, ".png") == 0;
  if (!png) return write_text(path, svg);
  const std::string tmp_svg = path + ".tmp.svg", tmp_png = path + ".tmp.png";
  write_text(tmp_svg, svg);
  int rc = run_program({"rsvg-convert", "-o", tmp_png, tmp_svg});
  if (rc != 0) rc = run_program({"convert", tmp_svg, tmp_png});
  std::remove(tmp_svg.c_str());
  if (rc == 0 && std::rename(tmp_png.c_str(), path.c_str()) == 0) return;
  std::remove(tmp_png.c_str());
  fail("bench", "cannot write '" + path + "': PNG needs rsvg-convert (Debian librsvg2-bin) or ImageMagick; write .svg instead");
}

}  // namespace nvfp4::bench
