// cli/cmd_tune.cpp -- `nvfp4 tune`: autotune the CUDA GEMV tuning table on the present GPU and
// write it as JSON (use it with NVFP4_CUDA_TUNING=FILE, or paste it into tuning_sm90.cpp).
// The table changes speed only (see src/kernels/cuda/tuning_sm90.h). Without the CUDA backend
// the command exists and says so. Progress goes to stderr, so without --out stdout is the table
// alone (`nvfp4 tune > table.json`).
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench/compare.h"
#include "bench/workload_cli.h"
#include "cli/commands.h"
#include "io/file_util.h"
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
  std::string decode_model = "llama-3-8b";  // "none": skip the decode checks
  int decode_layers = 8;
  int decode_rounds = 10;
  std::vector<int> verify_batches = {1, 16};  // the written table against the built-in one, per B
  bool no_verify = false;
  bool model_shapes = false;  // the classes: the exact decode shapes of decode_model (unfused and fused)
};

// Written atomically (a failed write never leaves a partial table); a symlink, device or pipe
// such as /dev/stdout in place (io::write_text_output: a rename over /dev/stdout, as root, replaced
// it by a regular file, as the bench's reports once did).
void write_table(const std::string& path, const std::vector<cuda::GemvTableEntry>& t, const std::string& comment) {
  io::write_text_output(path, cuda::gemv_table_to_json(t, comment), "tune");
}

// The decode checks' workload: a.decode_model's first a.decode_layers layers on the GPU,
// `batch` sequences per step.
bench::WorkloadArgs decode_workload(const TuneArgs& a, std::int64_t batch) {
  bench::WorkloadArgs w;
  w.backend = "cuda";
  w.model = a.decode_model;
  w.layers = a.decode_layers;
  w.mode = "decode";
  w.batch = batch;
  return w;
}

// --model-shapes: the exact classes of decode_model's decode linears, unfused and fused (q/k/v
// and gate/up as one matmul each), lm_head included, in replay order without repeats. Why: the
// buckets' entries were tuned at one shape each; on an H200 the exact entries of Llama-3-70B,
// Qwen3-32B and Qwen3-4B made their decode 13-30% faster than the buckets' tiles (docs/perf-cuda.md 61).
std::vector<std::string> model_classes(const TuneArgs& a) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const bool fuse : {false, true}) {
    bench::WorkloadArgs w = decode_workload(a, 1);
    w.layers = 1;  // every layer has the same shapes (a model with fewer than --decode-layers layers works too)
    w.fuse = fuse;
    for (const auto& l : bench::replay_linears(w.options(bench::ReplayMode::kDecode))) {
      std::string cls = cuda::gemv_exact_class(l.n, l.k);
      if (seen.insert(cls).second) out.push_back(std::move(cls));
    }
  }
  return out;
}

// Which built-in entry a repacked M = 1 decode call of this exact class runs (cc 90): "its own",
// "bucket B, tuned at this shape / at NxK", or the rule of thumb when no entry matches.
std::string builtin_entry_for(const std::string& cls) {
  std::int64_t n = 0, k = 0;
  cuda::gemv_class_representative(cls, &n, &k);
  static const auto table = cuda::gemv_builtin_table();
  const auto* e = cuda::gemv_find_entry(table, 90, n, k, cuda::GemvLayout::kRepacked, 1, false);
  if (!e) return "none (the rule of thumb)";
  if (e->cls == cls) return "its own";
  std::int64_t rn = 0, rk = 0;  // an exact lookup matches only its own shape, so e is a bucket
  cuda::gemv_class_representative(e->cls, &rn, &rk);
  return "bucket " + e->cls +
         (rn == n && rk == k ? ", tuned at this shape" : ", tuned at " + std::to_string(rn) + "x" + std::to_string(rk));
}

// That decode under tuning table A against table B, each read by a child process through
// NVFP4_CUDA_TUNING (an empty path: the built-in table). `nvfp4 compare`'s interleaved rounds
// and verdict.
bench::CompareStats decode_ab(const std::string& table_a, const std::string& table_b, std::int64_t batch,
                              const TuneArgs& a) {
  using namespace nvfp4::bench;
  const std::vector<std::string> wl = decode_workload(a, batch).forward_args();
  ProcessSampler sa("NVFP4_CUDA_TUNING=" + table_a + " self", wl, 3);
  ProcessSampler sb("NVFP4_CUDA_TUNING=" + table_b + " self", wl, 3);
  const CompareRun run = run_interleaved(sa, sb, a.decode_rounds, 1, false);
  return compare_samples(run.a_us, run.b_us);
}

// The two tables the decode checks' child processes read; removed however the check ends.
// Under TMPDIR when set (temp_directory_path), like the tests' scratch files.
struct TempTables {
  std::string dir, a, b;
  TempTables() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "nvfp4-tune-XXXXXX").string();
    if (!mkdtemp(tmpl.data()))
      fail("tune", "cannot create a temporary directory for the decode check (" + tmpl + "): " + std::strerror(errno));
    dir = tmpl;
    a = dir + "/a.json";
    b = dir + "/b.json";
  }
  ~TempTables() {
    std::remove(a.c_str());
    std::remove(b.c_str());
    rmdir(dir.c_str());
  }
};

// The early-weights launch judged where it acts (docs/perf-cuda.md 18): back to back with
// itself the tuner can find it slower where a model's decode, which runs other shapes before
// it, is faster (4096 x 4096 on H200: 6.5% slower back to back, 2.4% of the Llama-3-8B token
// when used). Each rejected early entry of a class that the model's decode looks up is A/B'd
// in the decode replay: table without it (A) against with it (B); kept when B is faster.
void check_early_in_decode(std::vector<cuda::GemvTableEntry>& table, const std::vector<cuda::GemvTableEntry>& rejected,
                           const TuneArgs& a) {
  using namespace nvfp4::bench;
  const ReplayOptions o = decode_workload(a, 1).options(ReplayMode::kDecode);
  const int cc = rejected.front().cc;  // the tuner's entries carry this GPU's compute capability
  std::set<std::string> used;  // the repacked classes the decode's M = 1 linears resolve to
  for (const auto& l : replay_linears(o))
    if (const auto* e = cuda::gemv_find_entry(table, cc, l.n, l.k, cuda::GemvLayout::kRepacked, 1, false)) used.insert(e->cls);
  TempTables tmp;
  write_table(tmp.a, table, "decode check: A");
  for (const auto& cand : rejected) {
    if (cand.m_max != 8 || used.count(cand.cls) == 0) continue;  // the M = 1 decode looks up m_max 8 only
    auto with = table;
    with.push_back(cand);
    write_table(tmp.b, with, "decode check: B");
    std::fprintf(stderr, "decode check (%s, %d layers): early entry for %s (cols/warp=%d warps=%d k_split=%d) ...\n",
                a.decode_model.c_str(), a.decode_layers, cand.cls.c_str(), cand.tile.cols_per_warp,
                cand.tile.warps_per_block, cand.tile.k_split);
    std::fflush(stderr);
    const CompareStats st = decode_ab(tmp.a, tmp.b, 1, a);
    const bool keep = st.verdict == Verdict::kBFaster;
    std::fprintf(stderr, "  decode %.1f -> %.1f us per token, B/A %.4f [%.4f, %.4f]: %s, %s\n", st.median_a, st.median_b, st.ratio,
                st.ci_low, st.ci_high, verdict_text(st.verdict), keep ? "early entry written" : "no early entry");
    std::fflush(stderr);
    if (keep) {
      table = with;
      write_table(tmp.a, table, "decode check: A");
    }
  }
}

// The finished table against the built-in one, in the decode it is for: the tuner times each
// class back to back at one shape, and winners within ~2% of each other are noise there. A full
// H200 re-tune that won per class made Llama-3-8B decode 2% faster at B = 1-8 but 1.9-3.4% slower
// at B = 16-32 (docs/perf-cuda.md 45). Reported (and written into the table's comment), not acted
// on: which entries to keep is the user's call. Returns the summary for the comment.
std::string verify_against_builtin(const std::vector<cuda::GemvTableEntry>& table, const TuneArgs& a) {
  using namespace nvfp4::bench;
  TempTables tmp;
  write_table(tmp.b, table, "verify: the tuned table");
  std::string summary;
  for (const int b : a.verify_batches) {
    std::fprintf(stderr, "verify (%s, %d layers, B = %d): built-in table (A) against this table (B) ...\n",
                a.decode_model.c_str(), a.decode_layers, b);
    std::fflush(stderr);
    const CompareStats st = decode_ab("", tmp.b, b, a);
    std::fprintf(stderr, "  decode %.1f -> %.1f us per step, B/A %.4f [%.4f, %.4f]: %s\n", st.median_a, st.median_b, st.ratio,
                st.ci_low, st.ci_high, verdict_text(st.verdict));
    std::fflush(stderr);
    char buf[200];
    std::snprintf(buf, sizeof buf, "%sB = %d: %+.2f%% [%+.2f, %+.2f], %s", summary.empty() ? "" : "; ", b,
                  (st.ratio - 1) * 100, (st.ci_low - 1) * 100, (st.ci_high - 1) * 100, verdict_text(st.verdict));
    summary += buf;
  }
  return summary;
}

void run_tune(const TuneArgs& a) {
  if (a.model_shapes && a.decode_model == "none")
    fail("tune", "--model-shapes tunes the decode shapes of --decode-model; it cannot be 'none'");
  if (a.model_shapes && !a.shapes.empty())
    fail("tune", "--model-shapes and --shapes both name the classes to tune; give one of them");
  if (a.model_shapes && a.list) {  // which of the model's shapes the built-in table knows (no GPU needed)
    for (const auto& c : model_classes(a))
      std::printf("%-20s built-in repacked entry: %s\n", c.c_str(), builtin_entry_for(c).c_str());
    return;
  }
  if (a.list) {
    for (const auto& c : cuda::gemv_shape_classes()) {
      std::int64_t n = 0, k = 0;
      cuda::gemv_class_representative(c, &n, &k);
      std::printf("%-20s tuned at N=%lld K=%lld\n", c.c_str(), static_cast<long long>(n), static_cast<long long>(k));
    }
    return;
  }
  for (const auto& s : a.shapes)  // the names the table reader would refuse
    if (const std::string why = cuda::gemv_class_problem(s); !why.empty())
      fail("tune", "--shapes: " + why + "; `nvfp4 tune --list` names the classes");
  const std::string layout = a.repacked ? "repacked" : a.layout;
  std::vector<cuda::GemvLayout> layouts;
  if (layout == "canonical" || layout == "both") layouts.push_back(cuda::GemvLayout::kCanonical);
  if (layout == "repacked" || layout == "both") layouts.push_back(cuda::GemvLayout::kRepacked);
  if (layouts.empty()) fail("tune", "--layout must be canonical, repacked or both (got '" + a.layout + "')");
  if (a.repacked && a.layout != "both" && a.layout != "repacked")
    fail("tune", "--repacked contradicts --layout " + a.layout);
  if (a.reps < 1) fail("tune", "--reps must be >= 1 (got " + std::to_string(a.reps) + ")");
  if (a.decode_layers < 1) fail("tune", "--decode-layers must be >= 1 (got " + std::to_string(a.decode_layers) + ")");
  if (a.decode_rounds < 2) fail("tune", "--decode-rounds must be >= 2 (got " + std::to_string(a.decode_rounds) + ")");
  for (const int b : a.verify_batches)
    if (b < 1 || b > 16)
      fail("tune", "--verify-batches takes decode batches of 1..16, the GEMV's rows (got " + std::to_string(b) + ")");
  if (a.decode_model != "none") (void)bench::load_model(a.decode_model);  // a bad name fails before the tuning
  if (!cuda::compiled()) fail("tune", "no CUDA backend in this build of nvfp4 (configure with nvcc on PATH)");
  if (!cuda::available()) fail("tune", "no CUDA backend usable here: " + cuda::unavailable_reason());
  cuda::TuneOptions opts;
  opts.classes = a.model_shapes ? model_classes(a) : a.shapes;
  opts.reps = a.reps;
  opts.layouts = layouts;
  std::vector<cuda::GemvTableEntry> rejected;
  opts.early_rejected = &rejected;
  auto table = cuda::gemv_autotune(opts);
  const bool decode_check = (layout == "repacked" || layout == "both") && a.decode_model != "none";
  if (decode_check && !rejected.empty()) check_early_in_decode(table, rejected, a);
  std::string comment =
      "written by nvfp4 tune (M=1 bf16, weights rotated through >= 256 MiB, CUDA graph, median" +
      (decode_check ? "; early entries rejected back to back were A/B'd in the " + a.decode_model + " decode replay"
                    : std::string()) +
      "); changes speed only";
  if (decode_check && !a.no_verify && !a.verify_batches.empty())
    comment += ". Against the built-in table in the " + a.decode_model + " decode replay (" +
               std::to_string(a.decode_layers) + " layers, B/A - 1, 95% CI): " + verify_against_builtin(table, a);
  if (a.out.empty()) {
    std::fputs(cuda::gemv_table_to_json(table, comment).c_str(), stdout);
    return;
  }
  write_table(a.out, table, comment);
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
  sub->add_option("--decode-model", args->decode_model,
                  "repacked: A/B each early-weights entry the back-to-back timing rejected inside this model's decode "
                  "replay, keeping the ones that make it faster (default llama-3-8b; none: skip)");
  sub->add_option("--decode-layers", args->decode_layers, "layers of that model replayed in the check (default 8)");
  sub->add_option("--decode-rounds", args->decode_rounds, "A/B rounds per decode check (default 10)");
  sub->add_option("--verify-batches", args->verify_batches,
                  "repacked: A/B the finished table against the built-in one in that model's decode replay at these "
                  "batches (1..16; default 1 16) and write the verdicts into the table's comment");
  sub->add_flag("--no-verify", args->no_verify, "skip that A/B against the built-in table");
  sub->add_flag("--model-shapes", args->model_shapes,
                "tune the exact decode shapes of --decode-model (unfused and fused, lm_head included) instead of "
                "--shapes; with --list, show which of them the built-in table has entries for (the rest run a bucket's "
                "tile, tuned at another shape)");
  sub->callback([args] { run_tune(*args); });
}

}  // namespace nvfp4::cli
