// bench/workload_cli.h -- the command-line description of a benchmark workload, shared by
// `nvfp4 bench` and `nvfp4 compare` (which forwards it to its `bench --serve` children).
// Header-only because it needs CLI11, which only the command links.
#pragma once

#include <cerrno>
#include <cstdlib>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/replay.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"

namespace nvfp4::bench {

struct WorkloadArgs {
  std::string model;             // "" = the main job's default for the backend
  std::int64_t layers = 0;       // 0 = the default (all, or the CPU main job's count)
  std::string mode;              // decode | prefill | both ("" = both for bench, decode for compare)
  std::int64_t prompt = 0;       // 0 = default (cpu 32, cuda 2048)
  std::int64_t batch = 1;        // decode: sequences per step
  std::string backend = "auto";
  std::string dtype = "bf16";
  bool no_lm_head = false;
  bool fuse = false;
  double extra_work = 0;
  bool canonical = false;
  bool plain_launch = false;
  bool early_weights = true;
  bool bf16_codes = false;
  std::uint64_t seed = 1;
  std::vector<std::string> shapes;  // "M,N,K" (compare: a shape workload instead of a model)

  void add_to(CLI::App* c) {
    c->add_option("--model", model, "built-in model name (see --list-models) or a JSON model file "
                                    "(HF config.json keys); default qwen3-4b on cpu, llama-3-8b on cuda");
    c->add_option("--layers", layers, "replay only the first N transformer layers and scale the layer time "
                                      "to the whole model (default: all; 4 in the cpu main job)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
    c->add_option("--mode", mode, "decode, prefill or both")->check(CLI::IsMember({"decode", "prefill", "both"}));
    c->add_option("--prompt,-p", prompt, "prefill prompt length P (default 32 on cpu, 2048 on cuda)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
    c->add_option("--batch,-b", batch, "decode: B sequences per step, one token each (every linear at M = B; "
                                       "default 1)")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{4096}));
    c->add_option("--backend", backend, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    c->add_option("--dtype", dtype, "activation dtype of the NVFP4 layers: bf16, f16, f32");
    c->add_flag("--no-lm-head", no_lm_head, "leave lm_head out of the replay");
    c->add_flag("--fuse", fuse, "fuse q/k/v and gate/up into one matmul each (vLLM layout)");
    c->add_option("--extra-work", extra_work, "add one extra linear holding this fraction of the weights "
                                              "(0.03 = 3% more work; for testing A/B detection)")
        ->check(CLI::Range(0.0, 1.0));
    // Digits only: the parser would read -1 or 20+ digits as the largest seed, silently.
    c->add_option("--seed", seed, "seed of the random weights and activations (0 .. 2^64 - 1)")
        ->check(CLI::Validator(
            [](std::string& v) -> std::string {
              errno = 0;
              char* end = nullptr;
              const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
              std::strtoull(v.c_str(), &end, 10);
              return digits && errno != ERANGE ? "" : "not a number in 0 .. 18446744073709551615: " + v;
            },
            "UINT64"));
    c->add_flag("--canonical", canonical, "decode (CUDA; CPU with AVX512-BF16+VBMI): keep the canonical checkpoint "
                                          "layout instead of the weights repacked for the GEMV at load time");
    c->add_flag("--plain-launch", plain_launch,
                "cuda decode: launch the repacked GEMVs plainly instead of overlapped (by default each may be "
                "scheduled during the previous kernel's tail where the tuning table allows it; nvfp4/cuda.h "
                "RepackedMatmulOptions)");
    c->add_flag("--early-weights,!--no-early-weights", early_weights,
                "cuda decode (default on): overlapped repacked GEMVs start loading their weights before the previous "
                "kernel has completed, where the tuning table measured it faster (the replay never writes its "
                "weights; RepackedMatmulOptions::weights_read_early); --no-early-weights for the A/B");
    c->add_flag("--bf16-codes", bf16_codes,
                "cuda decode with --dtype f16: repack with the codes at bf16 bit positions (RepackedCodes::bf16, "
                "which serves every dtype) instead of fp16 ones; the A/B of the fp16 codes");
  }

  // A --shape run is not a model replay: its options would be silently ignored there.
  void refuse_replay_options() const {
    if (batch != 1) fail("bench", "--batch applies to model replays; a --shape carries its own M");
    for (auto [given, name] : {std::pair<bool, const char*>{!model.empty(), "--model"}, {layers > 0, "--layers"},
                               {!mode.empty(), "--mode"}, {prompt > 0, "--prompt"}, {fuse, "--fuse"},
                               {no_lm_head, "--no-lm-head"}})
      if (given) fail("bench", std::string(name) + " applies to model replays, not to --shape runs");
  }

  // The backend actually used.
  std::string resolved_backend() const {
    if (backend != "auto") return backend;
    return cuda::available() ? "cuda" : "cpu";
  }
  bool is_main_job_cpu() const { return model.empty() && layers == 0 && resolved_backend() == "cpu"; }

  ReplayOptions options(ReplayMode m) const {
    ReplayOptions o;
    o.backend = resolved_backend();
    const bool cpu = o.backend == "cpu";
    // Main-job defaults: on 2 CPU cores, 4 of Qwen3-4B's 36 layers (+ its lm_head) replay in about
    // a second per token-set and leave both variants' weights (0.45 GB NVFP4, 1.6 GB bf16) well
    // inside memory; on the GPU the whole Llama-3-8B (4.2 GB NVFP4, 15 GB bf16) fits.
    o.model = load_model(model.empty() ? (cpu ? "qwen3-4b" : "llama-3-8b") : model);
    o.mode = m;
    o.prompt = prompt > 0 ? prompt : (cpu ? 32 : 2048);
    o.batch = batch;
    o.plan.layers = layers > 0 ? layers : (is_main_job_cpu() ? 4 : 0);
    if (o.plan.layers > o.model.layers)
      fail("bench", fmt::format("--layers {} but {} has {} layers", o.plan.layers, o.model.name, o.model.layers));
    o.plan.lm_head = !no_lm_head;
    o.plan.fuse = fuse;
    o.plan.extra_work = extra_work;
    o.canonical_layout = canonical;
    o.plain_launch = plain_launch;
    o.early_weights = early_weights;
    o.bf16_codes = bf16_codes;
    o.dtype = dtype_from_name(dtype);
    o.seed = seed;
    if (!shapes.empty()) {
      refuse_replay_options();
      std::vector<std::int64_t> t;
      for (const auto& s : shapes) {
        long long m_ = 0, n_ = 0, k_ = 0;
        char tail = 0;
        if (std::sscanf(s.c_str(), "%lld,%lld,%lld%c", &m_, &n_, &k_, &tail) != 3)
          fail("bench", "--shape '" + s + "': expected M,N,K (e.g. 1,4096,4096)");
        t.insert(t.end(), {m_, n_, k_});
      }
      // Rotation: enough copies of each shape that they exceed 3x the last-level cache (32 MiB
      // here; 60 MiB of L2 on the H200) -- 256 MB covers both.
      o.custom_linears = shape_linears(t, 256e6);
      o.model.name = "shapes";
      o.model.layers = 1;
      o.plan.layers = 1;
    }
    return o;
  }

  // Flags that reproduce this workload in a child `bench --serve` (compare).
  std::vector<std::string> forward_args() const {
    std::vector<std::string> a;
    if (!model.empty()) a.insert(a.end(), {"--model", model});
    if (layers > 0) a.insert(a.end(), {"--layers", std::to_string(layers)});
    if (!mode.empty()) a.insert(a.end(), {"--mode", mode});
    if (prompt > 0) a.insert(a.end(), {"--prompt", std::to_string(prompt)});
    if (batch != 1) a.insert(a.end(), {"--batch", std::to_string(batch)});
    a.insert(a.end(), {"--backend", resolved_backend(), "--dtype", dtype, "--seed", std::to_string(seed)});
    if (no_lm_head) a.push_back("--no-lm-head");
    if (fuse) a.push_back("--fuse");
    if (canonical) a.push_back("--canonical");
    if (plain_launch) a.push_back("--plain-launch");
    if (!early_weights) a.push_back("--no-early-weights");
    if (bf16_codes) a.push_back("--bf16-codes");
    for (const auto& s : shapes) a.insert(a.end(), {"--shape", s});
    return a;
  }
};

}  // namespace nvfp4::bench
