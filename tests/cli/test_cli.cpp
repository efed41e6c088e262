// tests/cli/test_cli.cpp -- `nvfp4 quantize / dequantize / inspect` end to end on small
// checkpoints written by the test (with nvfp4's writer and, where available, python's
// safetensors). Checks the bytes against the library (quantize_group / dequantize), the
// selection and shared tensor scales, config files, and that every failure exits non-zero
// with one line on stderr and leaves OUT missing or unchanged.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "io/io_test_util.h"
#include "nvfp4/checkpoint.h"
#include "nvfp4/ops.h"
#include "nvfp4/quantize.h"
#include "nvfp4/safetensors.h"

namespace nvfp4 {
namespace {

using json = nlohmann::json;
using test::TempDir;
namespace fs = std::filesystem;

std::string cli() {
  const char* p = std::getenv("NVFP4_CLI");
  return p ? p : "";
}

test::CmdResult nvfp4(const std::string& args, const TempDir& d) {
  return test::run_cmd("'" + cli() + "' " + args, d.path());
}

// One line, prefixed, on stderr; nothing on stdout.
void expect_one_line_error(const test::CmdResult& r, const std::string& needle) {
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err.rfind("nvfp4: ", 0), 0u) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "expected exactly one line: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

Tensor rand_t(DType dt, std::vector<std::int64_t> shape, std::mt19937& rng, float sd) {
  std::normal_distribution<float> nd(0.0f, sd);
  Tensor t(dt, std::move(shape));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, nd(rng));
  return t;
}

std::vector<std::uint8_t> f32_bytes(float f) {
  std::vector<std::uint8_t> b(4);
  std::memcpy(b.data(), &f, 4);
  return b;
}

const char* st_dtype(DType d) { return d == DType::kF32 ? "F32" : d == DType::kF16 ? "F16" : "BF16"; }

// A tiny llama-like checkpoint folder: 2 layers, q/k/v/o, gate/up/down, norms, embeddings,
// lm_head, one weight with K % 16 != 0 and one I64 buffer. Sharded with an index.
struct Model {
  std::map<std::string, Tensor> t;
  std::vector<std::uint8_t> i64 = std::vector<std::uint8_t>(16, 3);
};

Model write_model(const std::string& dir, unsigned seed, DType dt = DType::kBF16) {
  std::mt19937 rng(seed);
  Model m;
  const std::int64_t h = 48, f = 80;
  m.t["model.embed_tokens.weight"] = rand_t(dt, {40, h}, rng, 1.0f);
  m.t["lm_head.weight"] = rand_t(dt, {40, h}, rng, 1.0f);
  m.t["model.norm.weight"] = rand_t(dt, {h}, rng, 1.0f);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    // Different magnitudes so the shared scale differs from each weight's own.
    m.t[p + ".self_attn.q_proj.weight"] = rand_t(dt, {h, h}, rng, 0.02f);
    m.t[p + ".self_attn.k_proj.weight"] = rand_t(dt, {16, h}, rng, 0.05f);
    m.t[p + ".self_attn.v_proj.weight"] = rand_t(dt, {16, h}, rng, 0.01f);
    m.t[p + ".self_attn.o_proj.weight"] = rand_t(dt, {h, h}, rng, 0.02f);
    m.t[p + ".mlp.gate_proj.weight"] = rand_t(dt, {f, h}, rng, 0.03f);
    m.t[p + ".mlp.up_proj.weight"] = rand_t(dt, {f, h}, rng, 0.01f);
    m.t[p + ".mlp.down_proj.weight"] = rand_t(dt, {h, f}, rng, 0.02f);
    m.t[p + ".input_layernorm.weight"] = rand_t(dt, {h}, rng, 1.0f);
    m.t[p + ".odd_proj.weight"] = rand_t(dt, {8, 20}, rng, 0.02f);  // K % 16 != 0: stays dense
  }
  fs::create_directories(dir);
  std::vector<SafetensorsTensor> a, b;
  json wm;
  for (const auto& [n, t] : m.t) {
    auto& v = (n < "model.layers.1") ? a : b;
    v.push_back({n, st_dtype(t.dtype), t.shape, t.data(), t.bytes.size()});
    wm[n] = &v == &a ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  a.push_back({"model.rotary.inv_freq_steps", "I64", {2}, m.i64.data(), 16});
  wm["model.rotary.inv_freq_steps"] = "model-00001-of-00002.safetensors";
  write_safetensors(dir + "/model-00001-of-00002.safetensors", a);
  write_safetensors(dir + "/model-00002-of-00002.safetensors", b);
  test::write_bytes(dir + "/model.safetensors.index.json", json{{"weight_map", wm}}.dump());
  test::write_bytes(dir + "/config.json", R"({"model_type": "llama", "hidden_size": 48, "torch_dtype": "bfloat16"})");
  test::write_bytes(dir + "/tokenizer_config.json", R"({"x": 1})");
  return m;
}

const std::vector<std::vector<std::string>> kGroups = {
    {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"},
    {"self_attn.o_proj"},
    {"mlp.gate_proj", "mlp.up_proj"},
    {"mlp.down_proj"}};

class CliQuantize : public ::testing::TestWithParam<Recipe> {};

TEST_P(CliQuantize, MatchesLibraryAndRoundTrips) {
  ASSERT_FALSE(cli().empty()) << "NVFP4_CLI is not set (tests/CMakeLists.txt sets it)";
  const Recipe r = GetParam();
  const unsigned seed = 77u + static_cast<unsigned>(r);
  SCOPED_TRACE(std::string("format ") + recipe_name(r) + " seed " + std::to_string(seed));
  TempDir d;
  const Model m = write_model(d / "in", seed);
  const auto q = nvfp4("quantize " + d / "in" + " " + d / "out" + " --format " + recipe_name(r) + " --shard-size 20KB", d);
  ASSERT_EQ(q.rc, 0) << q.err;
  EXPECT_EQ(q.err, "") << "quiet when stderr is not a terminal";
  EXPECT_EQ(q.out, "");

  const Checkpoint c(d / "out");
  EXPECT_EQ(c.layout(), layout_for_recipe(r));
  EXPECT_GT(c.shard_paths().size(), 1u);
  std::vector<std::string> want;
  for (int l = 0; l < 2; ++l)
    for (const auto& g : kGroups)
      for (const auto& n : g) want.push_back("model.layers." + std::to_string(l) + "." + n);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(c.quantized_prefixes(), want);

  // Bit-exact against the library, with the producer's scale sharing.
  QuantizeOptions qo;
  qo.recipe = r;
  qo.mlx_global_scale = false;  // the CLI writes mlx-lm's layout unless --mlx-global-scale
  for (int l = 0; l < 2; ++l) {
    for (const auto& g : kGroups) {
      std::vector<const Tensor*> ws;
      std::vector<std::string> names;
      for (const auto& n : g) {
        names.push_back("model.layers." + std::to_string(l) + "." + n);
        ws.push_back(&m.t.at(names.back() + ".weight"));
      }
      std::vector<QuantizedWeight> ref;
      if (r == Recipe::kMlx) {  // MLX: one global scale per weight
        for (std::size_t i = 0; i < ws.size(); ++i) ref.push_back(quantize(*ws[i], qo));
      } else {
        ref = quantize_group(ws, names, qo);
      }
      for (std::size_t i = 0; i < names.size(); ++i) {
        SCOPED_TRACE(names[i]);
        const QuantizedWeight got = c.quantized(names[i]);
        EXPECT_EQ(got.packed, ref[i].packed);
        EXPECT_EQ(got.scales, ref[i].scales);
        EXPECT_EQ(std::memcmp(&got.stored_scale, &ref[i].stored_scale, 4), 0);
        if (r != Recipe::kMlx && i > 0) {
          EXPECT_EQ(got.stored_scale, c.quantized(names[0]).stored_scale) << "shared tensor scale";
        }
      }
    }
  }
  // Unquantized tensors are copied byte for byte.
  for (const char* n : {"model.embed_tokens.weight", "lm_head.weight", "model.norm.weight",
                        "model.layers.0.odd_proj.weight", "model.layers.1.input_layernorm.weight"})
    EXPECT_EQ(c.dense(n).bytes, m.t.at(n).bytes) << n;
  const RawTensor i64 = c.raw("model.rotary.inv_freq_steps");
  EXPECT_EQ(std::vector<std::uint8_t>(i64.data, i64.data + i64.nbytes), m.i64);

  const json cfg = json::parse(test::read_bytes(d / "out/config.json"));
  EXPECT_EQ(cfg["model_type"], "llama");
  const json excl = json::array({"lm_head", "model.layers.0.odd_proj", "model.layers.1.odd_proj"});
  if (r == Recipe::kModelopt) {
    EXPECT_EQ(cfg["quantization_config"]["exclude_modules"], excl);
    EXPECT_EQ(json::parse(test::read_bytes(d / "out/hf_quant_config.json"))["quantization"]["exclude_modules"], excl);
  } else if (r == Recipe::kCompressedTensors) {
    EXPECT_EQ(cfg["quantization_config"]["ignore"], excl);
  } else {
    EXPECT_EQ(cfg["quantization"]["mode"], "nvfp4");
  }
  EXPECT_TRUE(fs::exists(d / "out/tokenizer_config.json"));

  // dequantize: each linear equals nvfp4::dequantize of what was written, in the asked dtype.
  for (const char* dt : {"f32", "bf16"}) {
    SCOPED_TRACE(dt);
    const std::string out = d / (std::string("deq_") + dt);
    const auto dq = nvfp4("dequantize " + d / "out" + " " + out + " --dtype " + dt, d);
    ASSERT_EQ(dq.rc, 0) << dq.err;
    EXPECT_EQ(dq.err, "");
    const Checkpoint dc(out);
    EXPECT_EQ(dc.layout(), Layout::kDense);
    EXPECT_EQ(dc.names().size(), m.t.size() + 1);
    for (const auto& p : want) {
      const Tensor t = dc.dense(p + ".weight");
      EXPECT_EQ(t.bytes, dequantize(c.quantized(p), dtype_from_name(dt)).bytes) << p;
      EXPECT_EQ(t.shape, m.t.at(p + ".weight").shape) << p;
    }
    EXPECT_EQ(dc.dense("lm_head.weight").bytes, m.t.at("lm_head.weight").bytes);
    const json dcfg = json::parse(test::read_bytes(out + "/config.json"));
    EXPECT_FALSE(dcfg.contains("quantization_config"));
    EXPECT_FALSE(dcfg.contains("quantization"));
    EXPECT_EQ(dcfg["hidden_size"], 48);
    EXPECT_FALSE(fs::exists(out + "/hf_quant_config.json"));
  }

  // inspect (text and JSON)
  const auto it = nvfp4("inspect " + d / "out", d);
  ASSERT_EQ(it.rc, 0) << it.err;
  EXPECT_NE(it.out.find(std::string("format:     ") + layout_name(c.layout())), std::string::npos) << it.out;
  EXPECT_NE(it.out.find("model.layers.1.mlp.up_proj  [N=80, K=48]"), std::string::npos) << it.out;
  const auto ij = nvfp4("inspect --json " + d / "out", d);
  ASSERT_EQ(ij.rc, 0) << ij.err;
  const json j = json::parse(ij.out);
  EXPECT_EQ(j["format"], layout_name(c.layout()));
  EXPECT_EQ(j["tensors"].size(), c.names().size());
  ASSERT_EQ(j["quantized"].size(), want.size());
  for (const auto& l : j["quantized"]) {
    const QuantizedWeight w = c.quantized(l["prefix"]);
    EXPECT_EQ(l["stored_scale"].get<float>(), w.stored_scale);
    EXPECT_EQ(l["blocks"].get<std::int64_t>(), w.n * w.k / 16);
    std::int64_t sum = 0;
    for (const auto& h : l["block_scale_histogram"]) sum += h.get<std::int64_t>();
    EXPECT_EQ(sum, l["blocks"].get<std::int64_t>());
    EXPECT_LE(l["block_scale_min"].get<float>(), l["block_scale_max"].get<float>());
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CliQuantize,
                         ::testing::Values(Recipe::kModelopt, Recipe::kCompressedTensors, Recipe::kMlx),
                         [](const auto& i) {
                           return std::string(i.param == Recipe::kModelopt            ? "modelopt"
                                              : i.param == Recipe::kCompressedTensors ? "ct"
                                                                                      : "mlx");
                         });

TEST(Cli, ExcludeAndSingleFileOutput) {
  ASSERT_FALSE(cli().empty());
  TempDir d;
  write_model(d / "in", 5, DType::kF16);
  const auto r = nvfp4("quantize " + d / "in" + " " + d / "o.safetensors --exclude 'layers\\.1\\.' --exclude down_proj "
                           "--legacy-modelopt",
                       d);
  ASSERT_EQ(r.rc, 0) << r.err;
  const Checkpoint c(d / "o.safetensors");
  EXPECT_EQ(c.quantized_prefixes(),
            (std::vector<std::string>{"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj",
                                      "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.o_proj",
                                      "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj"}));
  // --no-default-excludes quantizes lm_head and the embedding too.
  const auto r2 = nvfp4("quantize " + d / "in" + " " + d / "all.safetensors --no-default-excludes", d);
  ASSERT_EQ(r2.rc, 0) << r2.err;
  const Checkpoint c2(d / "all.safetensors");
  EXPECT_TRUE(std::binary_search(c2.quantized_prefixes().begin(), c2.quantized_prefixes().end(), "lm_head"));
  EXPECT_TRUE(std::binary_search(c2.quantized_prefixes().begin(), c2.quantized_prefixes().end(), "model.embed_tokens"));
  const auto h = nvfp4("quantize --help", d);
  EXPECT_EQ(h.rc, 0);
  EXPECT_NE(h.out.find("lm_head"), std::string::npos) << "default excludes documented in --help";
}

TEST(Cli, FailuresExitNonZeroAndLeaveNothing) {
  ASSERT_FALSE(cli().empty());
  TempDir d;
  write_model(d / "in", 9);
  test::write_bytes(d / "trunc.safetensors", test::read_bytes(d / "in/model-00001-of-00002.safetensors").substr(0, 100));
  ASSERT_EQ(nvfp4("quantize " + d / "in" + " " + d / "q", d).rc, 0);
  fs::create_directory(d / "busy");
  test::write_bytes(d / "busy/x", "x");
  test::write_bytes(d / "existing.safetensors", "old");

  // A weight with a NaN in the last group processed: quantize fails after writing others.
  fs::create_directory(d / "nan");
  std::mt19937 rng(1);
  Tensor a = rand_t(DType::kF32, {16, 32}, rng, 1.0f), z = rand_t(DType::kF32, {16, 32}, rng, 1.0f);
  z.set(37, NAN);
  write_safetensors(d / "nan/model.safetensors", {{"a.weight", "F32", {16, 32}, a.data(), a.bytes.size()},
                                                  {"z.weight", "F32", {16, 32}, z.data(), z.bytes.size()}});
  // A quantized checkpoint whose last linear has a NaN block scale.
  std::vector<std::uint8_t> pk(16 * 16, 0x11), sc(16 * 2, 0x38), bad_sc = sc;
  bad_sc[5] = 0x7F;
  const float s2 = 0.5f;
  write_safetensors(d / "nanscale.safetensors", {{"a.weight", "U8", {16, 16}, pk.data(), pk.size()},
                                                 {"a.weight_scale", "F8_E4M3", {16, 2}, sc.data(), sc.size()},
                                                 {"a.weight_scale_2", "F32", {}, &s2, 4},
                                                 {"b.weight", "U8", {16, 16}, pk.data(), pk.size()},
                                                 {"b.weight_scale", "F8_E4M3", {16, 2}, bad_sc.data(), bad_sc.size()},
                                                 {"b.weight_scale_2", "F32", {}, &s2, 4}});

  // Cases an audit found on 2026-12-03: an output that is the input (or lies inside the input
  // folder) replaced it; f16 output overflowed to Inf silently; an MLX file was written that its
  // own reader refused (a dense <p>.biases beside the quantized <p>).
  ASSERT_EQ(nvfp4("quantize " + d / "in " + d / "q1.safetensors", d).rc, 0);
  const float s2_huge = 1e30f;
  write_safetensors(d / "huge.safetensors", {{"a.weight", "U8", {16, 16}, pk.data(), pk.size()},
                                             {"a.weight_scale", "F8_E4M3", {16, 2}, sc.data(), sc.size()},
                                             {"a.weight_scale_2", "F32", {}, &s2_huge, 4}});
  fs::create_directory(d / "biases");
  Tensor bias = rand_t(DType::kF32, {16}, rng, 1.0f);
  write_safetensors(d / "biases/model.safetensors", {{"a.weight", "F32", {16, 32}, a.data(), a.bytes.size()},
                                                     {"a.biases", "F32", {16}, bias.data(), bias.bytes.size()}});

  test::write_bytes(d / "layers.json", R"({"hidden_size":256,"intermediate_size":512,"num_attention_heads":4,)"
                                       R"("num_hidden_layers":1000000000,"vocab_size":1024})");
  ASSERT_EQ(::mkfifo((d / "fifo.json").c_str(), 0600), 0);

  struct Case {
    std::string args, out, needle;
    int rc;
  };
  const std::vector<Case> cases = {
      {"dequantize " + d / "q1.safetensors " + d / "q1.safetensors", d / "q1.safetensors", "is the input", 1},
      {"quantize " + d / "in " + d / "in/inside.safetensors", d / "in/inside.safetensors",
       "lies inside the input folder", 1},
      {"dequantize " + d / "huge.safetensors " + d / "o16 --dtype f16", d / "o16", "is beyond the range of f16", 1},
      {"quantize " + d / "biases " + d / "o17 --format mlx", d / "o17", "would read as the MLX affine biases", 1},
      {"quantize " + d / "missing" + " " + d / "o1", d / "o1", "no such file or folder", 1},
      {"quantize " + d / "trunc.safetensors " + d / "o2", d / "o2", "runs past the end", 1},
      {"quantize " + d / "in " + d / "no/parent/o3", d / "no/parent/o3", "is not an existing directory", 1},
      {"quantize " + d / "in " + d / "busy", d / "busy", "exists and is not empty", 1},
      {"quantize " + d / "in " + d / "o4 --format int4", d / "o4", "unknown format 'int4'", 1},
      {"quantize " + d / "in " + d / "o5 --exclude '('", d / "o5", "not a valid regular expression", 1},
      {"quantize " + d / "in " + d / "o6 --format mlx --legacy-modelopt", d / "o6", "--legacy-modelopt", 1},
      {"quantize " + d / "in " + d / "o7 --shard-size 5XB", d / "o7", "cannot parse size", 1},
      {"quantize " + d / "q " + d / "o8", d / "o8", "already quantized (modelopt layout)", 1},
      {"quantize " + d / "nan " + d / "o9", d / "o9", "NaN", 1},
      {"quantize " + d / "nan " + d / "existing.safetensors", d / "existing.safetensors", "NaN", 1},
      {"quantize " + d / "in " + d / "o10 --exclude '.*'", d / "o10", "no weight to quantize", 1},
      {"dequantize " + d / "in " + d / "o11", d / "o11", "has no NVFP4 weights", 1},
      {"dequantize " + d / "nanscale.safetensors " + d / "o12", d / "o12", "is NaN (byte 0x7F)", 1},
      {"dequantize " + d / "q " + d / "o13 --dtype f64", d / "o13", "unknown dtype 'f64'", 1},
      {"inspect " + d / "nanscale.safetensors", "", "is NaN", 1},
      {"inspect " + d / "trunc.safetensors", "", "runs past the end", 1},
      {"quantize " + d / "in", d / "o14", "OUT", 2},
      {"quantize " + d / "in " + d / "o15 --bogus", d / "o15", "bogus", 2},
      // bench / compare arguments: refused before anything runs or is allocated.
      {"bench --backend cpu --layers 0", "", "--layers: Value 0 not in range", 2},
      {"bench --backend cpu --mode prefill --prompt 0", "", "--prompt: Value 0 not in range", 2},
      {"bench --backend cpu --shape 99999999999,16,16", "", "M=99999999999 N=16 K=16 needs at least", 1},
      {"compare --backend cpu --a self --b self --processes 0", "", "--processes: Value 0 not in range", 2},
      {"compare --backend cpu --a self --b self --confidence 2", "", "--confidence must be in (0.5, 1)", 1},
      {"compare --backend cpu --a self --b self --min-effect -1", "", "--min-effect must be", 1},
      // Found by an audit on 2026-12-03 (each ran, crashed or was ignored before).
      {"compare --backend cpu --a self --b self --batch -5", "", "--batch: Value -5 not in range", 2},
      {"bench --backend cpu --seed -1", "", "not a number in 0 .. 18446744073709551615", 2},
      {"bench --backend cpu --extra-work 2", "", "--extra-work: Value 2 not in range", 2},
      {"bench --backend cpu --shape 1,256,256 --model qwen3-4b", "", "--model applies to model replays", 1},
      {"bench --backend cpu --shape 1,256,256 --mode prefill", "", "--mode applies to model replays", 1},
      {"bench --backend cpu --model " + d / "layers.json", "", "\"num_hidden_layers\" = 1000000000 exceeds 1024", 1},
      {"bench --backend cpu --model " + d / "fifo.json", "", "is not a regular file", 1},
      {"bench --backend cpu --shape 1,256,256 --json " + d / "no/such/r.json", d / "no/such/r.json",
       "is not an existing directory", 1},
      // tune arguments: refused before the GPU is asked for (so the same on a machine without one).
      {"tune --layout repacked --verify-batches 1 32 --out " + d / "t1.json", d / "t1.json",
       "--verify-batches takes decode batches of 1..16", 1},
      {"tune --decode-rounds 1 --out " + d / "t2.json", d / "t2.json", "--decode-rounds must be >= 2", 1},
      {"tune --shapes exact/16x15 --out " + d / "t3.json", d / "t3.json", "K = 15 is not a multiple of 16", 1},
      {"tune --model-shapes --decode-model none --out " + d / "t4.json", d / "t4.json", "it cannot be 'none'", 1},
      {"tune --model-shapes --shapes exact/16x16 --out " + d / "t5.json", d / "t5.json", "give one of them", 1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const std::string before = c.out.empty() || !fs::is_regular_file(c.out) ? "" : test::read_bytes(c.out);
    const bool existed = !c.out.empty() && fs::exists(c.out);
    const auto r = nvfp4(c.args, d);
    EXPECT_EQ(r.rc, c.rc) << r.err;
    expect_one_line_error(r, c.needle);
    if (!c.out.empty()) {
      EXPECT_EQ(fs::exists(c.out), existed);
      if (fs::is_regular_file(c.out)) {
        EXPECT_EQ(test::read_bytes(c.out), before);
      }
    }
    EXPECT_TRUE(test::leftovers(d.path()).empty());
  }
  EXPECT_EQ(test::read_bytes(d / "busy/x"), "x");

  // --plot's file name reached a shell: quotes in it ran a command. Now no shell is involved.
  const std::string evil = d / "x'; touch " + d / "PWNED" + "; '.png";
  nvfp4("bench --backend cpu --shape 1,256,256 --seconds 0.01 --samples 1 --no-dense --plot \"" + evil + "\"", d);
  EXPECT_FALSE(fs::exists(d / "PWNED"));
  // Reports are written atomically (a temporary file renamed into place), but a symlink, a device
  // or a pipe as the path is written in place: --json /dev/stdout into a pipe keeps working, and
  // /dev/stdout stays a symlink (a first version replaced it when run as root).
  {
    const auto r = test::run_cmd("('" + cli() + "' bench --backend cpu --shape 1,256,256 --seconds 0.01 --samples 1 "
                                 "--no-dense --json /dev/stdout | cat)", d.path());
    EXPECT_NE(r.out.find("\"shapes\""), std::string::npos) << r.out << r.err;
    EXPECT_TRUE(fs::is_symlink("/dev/stdout"));
  }
  // `tune --model-shapes --list` (no GPU needed): a model's decode shapes, unfused and fused, each
  // with the built-in entry it runs. Qwen3-4B's have their own since 2026-12-04, but its lm_head
  // (151936 x 2560) is the n_large/k_mid bucket's own shape; a model the table does not know
  // (hidden 3072, intermediate 8192) runs its gate / up (8192 x 3072) on a bucket tuned elsewhere.
  {
    const auto r = nvfp4("tune --model-shapes --decode-model qwen3-4b --list", d);
    EXPECT_EQ(r.rc, 0) << r.err;
    for (const char* c : {"exact/4096x2560 ", "exact/1024x2560 ", "exact/2560x4096 ", "exact/9728x2560 ",
                          "exact/2560x9728 ", "exact/6144x2560 ", "exact/19456x2560 "})
      EXPECT_NE(r.out.find(std::string(c)), std::string::npos) << c << "\n" << r.out;
    EXPECT_NE(r.out.find("exact/9728x2560      built-in repacked entry: its own"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("exact/151936x2560    built-in repacked entry: bucket n_large/k_mid, tuned at this shape"),
              std::string::npos) << r.out;
    test::write_bytes(d / "small.json",
                      R"({"name": "small", "hidden_size": 3072, "intermediate_size": 8192, "num_attention_heads": 24,
                          "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 2, "vocab_size": 32000,
                          "tie_word_embeddings": false})");
    const auto r2 = nvfp4("tune --model-shapes --decode-model " + d / "small.json" + " --list", d);
    EXPECT_EQ(r2.rc, 0) << r2.err;
    EXPECT_NE(r2.out.find("exact/8192x3072      built-in repacked entry: bucket n_mid/k_mid, tuned at 28672x4096"),
              std::string::npos) << r2.out;
  }
  // A checkpoint written through a symlink replaces the link's target, and the link stays.
  {
    test::write_bytes(d / "target.safetensors", "old");
    fs::create_symlink(d / "target.safetensors", d / "link.safetensors");
    const auto r = nvfp4("quantize " + d / "nan/model.safetensors --exclude '^z' " + d / "link.safetensors", d);
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(fs::is_symlink(d / "link.safetensors"));
    EXPECT_NE(test::read_bytes(d / "target.safetensors"), "old");
    ASSERT_EQ(::mkfifo((d / "pipe.safetensors").c_str(), 0600), 0);
    const auto pipe = nvfp4("quantize " + d / "nan/model.safetensors --exclude '^z' " + d / "pipe.safetensors", d);
    EXPECT_NE(pipe.rc, 0);
    EXPECT_NE(pipe.err.find("is not a regular file"), std::string::npos) << pipe.err;
    EXPECT_TRUE(fs::is_fifo(d / "pipe.safetensors"));
  }
  // A malformed thread count is an error naming the variable (atoi read "1x" as 1, "abc" as unset).
  for (const char* v : {"abc", "1x", "0", "5000"}) {
    const auto r = test::run_cmd(std::string("NVFP4_NUM_THREADS=") + v + " '" + cli() + "' bench --backend cpu --shape 1,256,256 --seconds 0.01 --samples 1 --no-dense", d.path());
    EXPECT_NE(r.rc, 0) << v;
    EXPECT_NE(r.err.find("[NVFP4_NUM_THREADS] '" + std::string(v) + "' is not a thread count"), std::string::npos) << r.err;
  }
  // NVFP4_COMMIT names the commit in every report; a value that is not one was dropped silently
  // (the report then asked git), now bench and compare refuse it before they run.
  for (const char* v : {"abc", "zzzzzzz", "0123456789abcdef0123456789abcdef012345678", "abcdef0+dirty"}) {
    for (const char* cmd : {"bench --backend cpu --shape 1,256,256 --seconds 0.01 --samples 1 --no-dense",
                            "compare --backend cpu --a self --b self --shape 1,256,256 --rounds 2"}) {
      const auto r = test::run_cmd(std::string("NVFP4_COMMIT='") + v + "' '" + cli() + "' " + cmd, d.path());
      EXPECT_NE(r.rc, 0) << v << " " << cmd;
      EXPECT_NE(r.err.find("NVFP4_COMMIT='" + std::string(v) + "' is not a commit"), std::string::npos) << r.err;
    }
  }
  {
    const auto r = test::run_cmd("NVFP4_COMMIT=0123abc+changes '" + cli() +
                                     "' bench --backend cpu --shape 1,256,256 --seconds 0.01 --samples 1 --no-dense --json " +
                                     (d / "commit.json"),
                                 d.path());
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(json::parse(test::read_bytes(d / "commit.json")).at("commit"), "0123abc+changes");
  }

  // inspect --json on a path that is not UTF-8 (JSON text must be): the bytes become U+FFFD
  // instead of the run failing with nlohmann's type_error 316.
  const std::string odd = d / "odd\xff.safetensors";
  fs::copy_file(d / "q1.safetensors", odd);
  const auto r = nvfp4("inspect --json '" + odd + "'", d);
  EXPECT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("format"), "modelopt");
}

// A W4A4 export: inspect says its input scales are not used; dequantize drops them with the
// rest of the linear's quantization tensors. And an MLX checkpoint with global scales: inspect says
// mlx-lm will not load it.
TEST(Cli, InspectNotesInputScalesAndMlxGlobalScales) {
  TempDir d;
  const std::vector<std::uint8_t> packed(16, 0x21), scales(2, 0x38), ts = f32_bytes(0.01f), in = f32_bytes(0.5f);
  write_safetensors(d / "w4a4.safetensors",
                    {{"a.weight", "U8", {2, 8}, packed.data(), packed.size()},
                     {"a.weight_scale", "F8_E4M3", {2, 1}, scales.data(), scales.size()},
                     {"a.weight_scale_2", "F32", {}, ts.data(), ts.size()},
                     {"a.input_scale", "F32", {}, in.data(), in.size()},
                     {"b.weight", "U8", {2, 8}, packed.data(), packed.size()},
                     {"b.weight_scale", "F8_E4M3", {2, 1}, scales.data(), scales.size()},
                     {"b.weight_scale_2", "F32", {}, ts.data(), ts.size()}});
  const auto it = nvfp4("inspect " + d / "w4a4.safetensors", d);
  ASSERT_EQ(it.rc, 0) << it.err;
  EXPECT_NE(it.out.find("activations: 1 of 2 linear(s) carry an input scale"), std::string::npos) << it.out;
  const auto ij = nvfp4("inspect --json " + d / "w4a4.safetensors", d);
  ASSERT_EQ(ij.rc, 0) << ij.err;
  const json j = json::parse(ij.out);
  EXPECT_EQ(j["linears_with_input_scale"], 1);
  EXPECT_EQ(j["quantized"][0]["input_scale"], true);
  EXPECT_EQ(j["quantized"][1]["input_scale"], false);
  const auto dq = nvfp4("dequantize " + d / "w4a4.safetensors" + " " + d / "dense.safetensors", d);
  ASSERT_EQ(dq.rc, 0) << dq.err;
  const Checkpoint dense(d / "dense.safetensors");
  EXPECT_EQ(dense.names(), (std::vector<std::string>{"a.weight", "b.weight"}));
  // A checkpoint without input scales prints no such line.
  const auto plain = nvfp4("inspect " + d / "dense.safetensors", d);
  ASSERT_EQ(plain.rc, 0) << plain.err;
  EXPECT_EQ(plain.out.find("activations:"), std::string::npos) << plain.out;
  // MLX: a global_scale (--mlx-global-scale) is pointed out, mlx-lm's layout is not.
  const auto qm = nvfp4("quantize " + d / "dense.safetensors " + d / "gs.safetensors --format mlx --mlx-global-scale "
                        "--no-default-excludes", d);
  ASSERT_EQ(qm.rc, 0) << qm.err;
  const auto gs = nvfp4("inspect " + d / "gs.safetensors", d);
  ASSERT_EQ(gs.rc, 0) << gs.err;
  EXPECT_NE(gs.out.find("2 linear(s) carry an MLX global_scale"), std::string::npos) << gs.out;
  const auto qn = nvfp4("quantize " + d / "dense.safetensors " + d / "nogs.safetensors --format mlx", d);
  ASSERT_EQ(qn.rc, 0) << qn.err;
  const auto ng = nvfp4("inspect " + d / "nogs.safetensors", d);
  ASSERT_EQ(ng.rc, 0) << ng.err;
  EXPECT_EQ(ng.out.find("global_scale:"), std::string::npos) << ng.out;
  EXPECT_EQ(ng.out.find("carry an MLX global_scale"), std::string::npos) << ng.out;
}

// A modelopt mixed-precision export (NVFP4 and FP8 linears): inspect counts the FP8 linears, and
// dequantize densifies both kinds, leaving no quantization tensor behind.
TEST(Cli, MixedPrecisionModeloptDequantizesFp8Too) {
  TempDir d;
  const std::vector<std::uint8_t> packed(16, 0x21), scales(2, 0x38), ts = f32_bytes(0.01f), w8 = {0x38, 0xB8, 0x40, 0x00},
                                  s8 = f32_bytes(0.5f), in = f32_bytes(0.1f);
  write_safetensors(d / "mixed.safetensors",
                    {{"a.weight", "U8", {2, 8}, packed.data(), packed.size()},
                     {"a.weight_scale", "F8_E4M3", {2, 1}, scales.data(), scales.size()},
                     {"a.weight_scale_2", "F32", {}, ts.data(), ts.size()},
                     {"b.weight", "F8_E4M3", {2, 2}, w8.data(), w8.size()},
                     {"b.weight_scale", "F32", {}, s8.data(), s8.size()},
                     {"b.input_scale", "F32", {}, in.data(), in.size()}});
  const auto it = nvfp4("inspect " + d / "mixed.safetensors", d);
  ASSERT_EQ(it.rc, 0) << it.err;
  EXPECT_NE(it.out.find("fp8:        1 linear(s) in FP8 E4M3"), std::string::npos) << it.out;
  const auto dq = nvfp4("dequantize " + d / "mixed.safetensors " + d / "dense.safetensors --dtype f32", d);
  ASSERT_EQ(dq.rc, 0) << dq.err;
  const Checkpoint dense(d / "dense.safetensors");
  EXPECT_EQ(dense.layout(), Layout::kDense);
  EXPECT_EQ(dense.names(), (std::vector<std::string>{"a.weight", "b.weight"}));
  const Tensor b = dense.dense("b.weight");
  EXPECT_EQ(b.dtype, DType::kF32);
  EXPECT_EQ(b.get(0), 0.5f);
  EXPECT_EQ(b.get(1), -0.5f);
  EXPECT_EQ(b.get(2), 1.0f);
  EXPECT_EQ(b.get(3), 0.0f);
}

TEST(CliPython, OfficialReaderAcceptsOutputsAndPythonInputs) {
  ASSERT_FALSE(cli().empty());
  TempDir d;
  const std::string why = test::python_missing(d.path());
  if (!why.empty()) GTEST_SKIP() << why;
  // Input written by the official writer.
  const std::string mk = R"(
import sys, json, numpy as np
from safetensors.numpy import save_file
rng = np.random.default_rng(3)
t = {"model.embed_tokens.weight": rng.standard_normal((32, 32)).astype(np.float16),
     "model.layers.0.self_attn.q_proj.weight": (rng.standard_normal((32, 32)) * 0.02).astype(np.float16),
     "model.layers.0.self_attn.k_proj.weight": (rng.standard_normal((16, 32)) * 0.05).astype(np.float16),
     "model.layers.0.mlp.down_proj.weight": (rng.standard_normal((32, 64)) * 0.02).astype(np.float32),
     "model.norm.weight": np.ones(32, np.float16)}
save_file(t, sys.argv[1] + "/model.safetensors", metadata={"format": "pt"})
json.dump({"model_type": "llama"}, open(sys.argv[1] + "/config.json", "w"))
)";
  fs::create_directory(d / "in");
  test::write_bytes(d / "mk.py", mk);
  ASSERT_EQ(test::run_cmd("python3 " + d / "mk.py " + d / "in", d.path()).rc, 0);
  const std::string check = R"(
import sys, glob, json, numpy as np
from safetensors import safe_open
out, fmt = sys.argv[1], sys.argv[2]
meta = {}
for f in sorted(glob.glob(out + "/*.safetensors")):
    with safe_open(f, framework="np") as h:
        for k in h.keys():
            s = h.get_slice(k)
            meta[k] = (s.get_dtype(), s.get_shape())
            if s.get_dtype() in ("U8", "U32", "F32", "F16"):
                h.get_tensor(k)  # loads
p = "model.layers.0.self_attn.q_proj"
if fmt == "modelopt":
    exp = {p + ".weight": ("U8", [32, 16]), p + ".weight_scale": ("F8_E4M3", [32, 2]), p + ".weight_scale_2": ("F32", [])}
elif fmt == "compressed-tensors":
    exp = {p + ".weight_packed": ("U8", [32, 16]), p + ".weight_scale": ("F8_E4M3", [32, 2]), p + ".weight_global_scale": ("F32", [1])}
else:
    exp = {p + ".weight": ("U32", [32, 4]), p + ".scales": ("U8", [32, 2])}  # mlx-lm's layout: no global_scale
    assert p + ".global_scale" not in meta
for k, v in exp.items():
    assert meta[k] == v, (k, meta.get(k), v)
assert meta["model.embed_tokens.weight"] == ("F16", [32, 32])
assert meta["model.layers.0.mlp.down_proj" + (".weight_packed" if fmt == "compressed-tensors" else ".weight")][0] in ("U8", "U32")
print("ok")
)";
  test::write_bytes(d / "check.py", check);
  for (const char* fmt : {"modelopt", "compressed-tensors", "mlx"}) {
    SCOPED_TRACE(fmt);
    const std::string out = d / (std::string("out_") + fmt);
    const auto q = nvfp4("quantize " + d / "in " + out + " --format " + fmt, d);
    ASSERT_EQ(q.rc, 0) << q.err;
    const auto r = test::run_cmd("python3 " + d / "check.py " + out + " " + fmt, d.path());
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    // And the python-read dequantized output is numerically the library's.
    const auto dq = nvfp4("dequantize " + out + " " + out + "_deq.safetensors --dtype f32", d);
    ASSERT_EQ(dq.rc, 0) << dq.err;
    const Checkpoint c(out), dc(out + "_deq.safetensors");
    const std::string py = "import sys, numpy as np\nfrom safetensors.numpy import load_file\n"
                           "t = load_file(sys.argv[1])['model.layers.0.mlp.down_proj.weight']\n"
                           "sys.stdout.write(t.astype('<f4').tobytes().hex())\n";
    test::write_bytes(d / "dq.py", py);
    const auto r2 = test::run_cmd("python3 " + d / "dq.py " + out + "_deq.safetensors", d.path());
    ASSERT_EQ(r2.rc, 0) << r2.err;
    const Tensor ref = dequantize(c.quantized("model.layers.0.mlp.down_proj"), DType::kF32);
    std::string hex;
    for (std::uint8_t b : ref.bytes) {
      char s[3];
      std::snprintf(s, sizeof s, "%02x", b);
      hex += s;
    }
    EXPECT_EQ(r2.out, hex);
  }
}

}  // namespace
}  // namespace nvfp4
