// tests/io/fuzz_checkpoint.cpp -- coverage-guided fuzzing (libFuzzer) of the checkpoint reader:
// the safetensors header and data checks, layout detection, config.json / index handling, and
// what every reader of a checkpoint then does with it (dequantize, a CPU matmul).
//
// Why: the guide's rule for bad input is a clear error, never a crash and never a silently wrong
// result. The unit tests cover the defects someone thought of, and the 2026-12-01 CLI mutation run
// (docs/perf.md) 500 random ones; a coverage-guided fuzzer under ASan + UBSan finds the branches
// neither reached. Built only with clang (scripts/fuzz.sh, CMake option NVFP4_FUZZ), not in CI.
//
// Input: byte 0 picks the mode, the rest is the fuzzed content:
//   0: a single .safetensors file = the rest;
//   1: a folder with a fixed valid shard (layout picked by byte 1) and config.json = the rest
//      after byte 1;
//   2: a folder with two fixed valid shards and model.safetensors.index.json = the rest;
//   3: a model file (`nvfp4 bench --model FILE`) = the rest: parsed, then its linears listed;
//   4: a CUDA GEMV tuning table (NVFP4_CUDA_TUNING=FILE; host code, no GPU needed) = the rest.
// Every nvfp4::Error is the expected outcome of bad input; anything else (another exception, a
// sanitizer report, a hang, an allocation over -rss_limit_mb) is a finding.
//   fuzz_checkpoint --write-seeds DIR   writes one valid input of every mode and layout to DIR.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "bench/model.h"
#include "io/io_test_util.h"
#include "kernels/cuda/tuning_sm90.h"
#include "nvfp4/checkpoint.h"
#include "nvfp4/nvfp4.h"

namespace fs = std::filesystem;
using namespace nvfp4;

namespace {

using test::read_bytes;
using test::write_bytes;

std::string g_root;  // per-process scratch folder (a test::TempDir): fixed shards, the current input

// Bytes [from, size) of the input as a string.
std::string tail(const std::uint8_t* data, std::size_t size, std::size_t from) {
  return std::string(reinterpret_cast<const char*>(data) + from, size - from);
}

Tensor pattern_weight(std::int64_t n, std::int64_t k, std::uint32_t seed) {
  Tensor t(DType::kBF16, {n, k});
  std::uint32_t s = seed;
  for (std::int64_t i = 0; i < n * k; ++i) {
    s = s * 1664525u + 1013904223u;
    t.set(i, static_cast<float>(static_cast<std::int32_t>(s >> 8) % 2001 - 1000) / 250.0f);
  }
  return t;
}

// A small valid checkpoint of layout l at out (file or folder): two quantized linears (one with
// a K that is not a multiple of 32) and one dense tensor.
void write_checkpoint(Layout l, const std::string& out, std::uint64_t max_shard_bytes) {
  WriterOptions wo;
  wo.layout = l;
  wo.max_shard_bytes = max_shard_bytes;
  wo.source_folder = g_root + "/src";  // a config.json for the writer to complete
  CheckpointWriter w(out, wo);
  QuantizeOptions qo;
  for (const Recipe r : {Recipe::kModelopt, Recipe::kCompressedTensors, Recipe::kMlx})
    if (layout_for_recipe(r) == l) qo.recipe = r;
  if (l == Layout::kDense) {
    w.add_dense("model.a.q_proj.weight", pattern_weight(8, 48, 1));
  } else {
    w.add_quantized("model.a.q_proj", quantize(pattern_weight(8, 48, 1), qo));
    w.add_quantized("model.b.down_proj", quantize(pattern_weight(3, 64, 2), qo));
  }
  w.add_dense("model.embed_tokens.weight", pattern_weight(5, 16, 3));
  w.commit();
}

// A valid GEMV tuning table (the format of src/kernels/cuda/tuning_sm90.cpp).
const char* const kTableSeed =
    R"({"version":1,"comment":"seed","entries":[{"cc":90,"class":"n_small/k_mid","cols_per_warp":32,)"
    R"("warps_per_block":4,"k_split":1},{"cc":90,"class":"exact/4096x14336","cols_per_warp":16,)"
    R"("warps_per_block":8,"k_split":2}]})";

// Modes 3 and 4: the two JSON inputs besides checkpoints that a user hands to nvfp4.
void exercise_json(int mode, const std::string& text) {
  if (mode == 3) {
    const bench::ModelSpec m = bench::parse_model_json(text, "fuzz");
    for (const bool lm_head : {false, true}) {
      bench::LinearPlan plan;
      plan.layers = 1;
      plan.lm_head = lm_head;
      (void)bench::linear_params(bench::model_linears(m, plan));
    }
  } else {
    (void)cuda::gemv_table_from_json(text, "fuzz");
  }
}

const Layout kLayouts[] = {Layout::kModelopt, Layout::kCompressedTensors, Layout::kMlx, Layout::kDense};

// What a user of a checkpoint does with it: every tensor's bytes, every dense tensor, every
// quantized linear dequantized and multiplied (CPU backend, one row), every FP8 linear.
void exercise(const std::string& path) {
  Checkpoint c(path);
  (void)c.layout();
  (void)c.total_bytes();
  (void)c.config_json();
  volatile std::uint8_t sink = 0;
  for (const std::string& name : c.names()) {
    const RawTensor r = c.raw(name);
    if (r.nbytes > 0) sink = sink + r.data[0] + r.data[r.nbytes - 1];
    (void)c.shard_of(name);
    if (!c.is_quantized_tensor(name)) {
      try {
        (void)c.dense(name);
      } catch (const Error&) {  // a non-float dtype: rejected by design
      }
    }
  }
  for (const std::string& p : c.quantized_prefixes()) {
    const QuantizedWeight q = c.quantized(p);
    if (q.n * q.k > (1 << 22)) continue;  // within libFuzzer's memory limit
    (void)dequantize(q);
    Tensor x(DType::kBF16, {1, q.k});
    for (std::int64_t i = 0; i < q.k; ++i) x.set(i, 1.0f / static_cast<float>(1 + i % 7));
    (void)quantized_matmul(x, q, Backend::kCpu);
  }
  for (const std::string& p : c.fp8_prefixes()) (void)c.fp8_dense(p);
}

void make_root() {
  static test::TempDir root;  // removed at exit
  g_root = root.path();
  fs::create_directory(g_root + "/src");
  write_bytes(g_root + "/src/config.json", R"({"model_type": "llama", "hidden_size": 48, "num_hidden_layers": 2})");
  // Fixed shards: one valid single-file checkpoint per layout (mode 1) and one two-shard folder
  // (mode 2), written once by the library's own writer.
  for (const Layout l : kLayouts) {
    const std::string d = g_root + "/fixed-" + layout_name(l);
    write_checkpoint(l, d, 1ull << 40);
  }
  write_checkpoint(Layout::kModelopt, g_root + "/fixed-sharded", 200);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  make_root();
  for (int i = 1; i + 1 < *argc; ++i)
    if (std::strcmp((*argv)[i], "--write-seeds") == 0) {
      const std::string dir = (*argv)[i + 1];
      fs::create_directories(dir);
      int count = 0;
      auto emit = [&](const std::string& bytes) { write_bytes(dir + "/seed-" + std::to_string(count++), bytes); };
      for (int i = 0; i < 4; ++i) {
        const std::string file = g_root + "/seed.safetensors";
        write_checkpoint(kLayouts[i], file, 1ull << 40);
        emit(std::string(1, '\0') + read_bytes(file));
        fs::remove(file);
        emit(std::string{'\1', static_cast<char>(i)} + read_bytes(g_root + "/fixed-" + layout_name(kLayouts[i]) + "/config.json"));
      }
      emit(std::string(1, '\2') + read_bytes(g_root + "/fixed-sharded/model.safetensors.index.json"));
      for (const auto& [name, text] : bench::builtin_model_files()) emit(std::string(1, '\3') + text);
      emit(std::string(1, '\4') + kTableSeed);
      std::printf("wrote %d seeds to %s\n", count, dir.c_str());
      std::exit(0);
    }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const int mode = data[0] % 5;
  if (mode >= 3) {
    try {
      exercise_json(mode, tail(data, size, 1));
    } catch (const Error&) {
    }
    return 0;
  }
  const std::string in = g_root + "/in";
  fs::remove_all(in);
  std::string path;
  if (mode == 0) {
    path = in + ".safetensors";
    write_bytes(path, tail(data, size, 1));
  } else {
    fs::create_directory(in);
    path = in;
    // Every file of the fixed folder except the one the input replaces, hard-linked: the reader
    // only reads them. (fs::copy_file failed with EINTR under libFuzzer's timer signal on
    // 2026-12-08, a harness artefact reported as a crash.)
    auto copy_except = [&](const std::string& fixed, const std::string& replaced) {
      for (const auto& e : fs::directory_iterator(fixed))
        if (e.path().filename() != replaced) fs::create_hard_link(e.path(), in + "/" + e.path().filename().string());
    };
    if (mode == 1) {
      copy_except(g_root + "/fixed-" + layout_name(kLayouts[data[1] % 4]), "config.json");
      write_bytes(in + "/config.json", tail(data, size, 2));
    } else {
      copy_except(g_root + "/fixed-sharded", "model.safetensors.index.json");
      write_bytes(in + "/model.safetensors.index.json", tail(data, size, 1));
    }
  }
  try {
    exercise(path);
  } catch (const Error&) {  // bad input, reported as such: the expected outcome
  }
  fs::remove(in + ".safetensors");
  return 0;
}
