// tests/io/test_checkpoint.cpp -- checkpoints in the modelopt / compressed-tensors / MLX /
// dense layouts: write -> read round trips (bit-exact weights and stored tensor scales),
// sharding + index, config files, layout detection, and the rejection of inconsistent
// checkpoints with an Error that leaves no output behind.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "io/io_test_util.h"
#include "test_util.h"
#include "nvfp4/checkpoint.h"
#include "nvfp4/error.h"
#include "nvfp4/ops.h"
#include "nvfp4/quantize.h"
#include "nvfp4/safetensors.h"

namespace nvfp4 {
namespace {

using json = nlohmann::json;
using test::TempDir;

Tensor random_weight(std::int64_t n, std::int64_t k, unsigned seed, DType dt = DType::kBF16) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  Tensor t(dt, {n, k});
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, nd(rng));
  return t;
}

#define EXPECT_ERROR_HAS(stmt, text)                                          \
  do {                                                                        \
    const std::string m_ = test::error_of([&] { stmt; });                             \
    EXPECT_NE(m_.find(text), std::string::npos) << "message: " << m_;         \
  } while (0)

class LayoutRoundTrip : public ::testing::TestWithParam<Recipe> {};

TEST_P(LayoutRoundTrip, FileAndShardedFolder) {
  const Recipe r = GetParam();
  const unsigned seed = 1234u + static_cast<unsigned>(r);
  SCOPED_TRACE("recipe " + std::string(recipe_name(r)) + " seed " + std::to_string(seed));
  TempDir d;
  QuantizeOptions qo;
  qo.recipe = r;
  const Tensor w1 = random_weight(33, 48, seed), w2 = random_weight(7, 4112, seed + 1);
  const QuantizedWeight q1 = quantize(w1, qo), q2 = quantize(w2, qo);
  const Tensor emb = random_weight(11, 16, seed + 2, DType::kF32);

  // Source folder with a config.json carrying other keys and a tokenizer file.
  std::filesystem::create_directory(d / "src");
  test::write_bytes(d / "src/config.json", R"({"model_type": "llama", "hidden_size": 48})");
  test::write_bytes(d / "src/tokenizer.json", R"({"tok": 1})");
  test::write_bytes(d / "src/pytorch_model.bin", "not copied");

  for (const bool folder : {false, true}) {
    SCOPED_TRACE(folder ? "folder" : "file");
    const std::string out = folder ? d / "out" : d / "out.safetensors";
    WriterOptions wo;
    wo.layout = layout_for_recipe(r);
    wo.max_shard_bytes = 4000;  // forces several shards for the folder
    wo.source_folder = d / "src";
    wo.excluded_modules = {"lm_head"};
    CheckpointWriter wr(out, wo);
    wr.add_quantized("model.a.q_proj", q1);
    wr.add_quantized("model.b.down_proj", q2);
    wr.add_dense("model.embed_tokens.weight", emb);
    wr.commit();

    Checkpoint c(out);
    EXPECT_EQ(c.layout(), layout_for_recipe(r));
    EXPECT_EQ(c.quantized_prefixes(), (std::vector<std::string>{"model.a.q_proj", "model.b.down_proj"}));
    for (const auto& [p, q] : {std::pair<std::string, const QuantizedWeight*>{"model.a.q_proj", &q1},
                               {"model.b.down_proj", &q2}}) {
      const QuantizedWeight g = c.quantized(p);
      EXPECT_EQ(g.n, q->n);
      EXPECT_EQ(g.k, q->k);
      EXPECT_EQ(g.packed, q->packed);
      EXPECT_EQ(g.scales, q->scales);
      EXPECT_EQ(g.convention, q->convention);
      std::uint32_t a, b;
      std::memcpy(&a, &g.stored_scale, 4);
      std::memcpy(&b, &q->stored_scale, 4);
      EXPECT_EQ(a, b) << "stored tensor scale must be bit-exact";
      EXPECT_EQ(dequantize(g).bytes, dequantize(*q).bytes);
    }
    const Tensor e2 = c.dense("model.embed_tokens.weight");
    EXPECT_EQ(e2.bytes, emb.bytes);
    EXPECT_EQ(e2.shape, emb.shape);
    EXPECT_TRUE(c.is_quantized_tensor(quantized_names(c.layout(), "model.a.q_proj").scales));
    EXPECT_FALSE(c.is_quantized_tensor("model.embed_tokens.weight"));
    EXPECT_ERROR_HAS(c.dense(quantized_names(c.layout(), "model.a.q_proj").scales), "only F32, F16 and BF16");
    EXPECT_ERROR_HAS(c.quantized("model.nope"), "no quantized linear 'model.nope'");
    if (!folder) continue;

    EXPECT_GT(c.shard_paths().size(), 1u);
    const json idx = json::parse(test::read_bytes(out + "/model.safetensors.index.json"));
    EXPECT_EQ(idx["metadata"]["total_size"].get<std::uint64_t>(), c.total_bytes());
    const json cfg = json::parse(test::read_bytes(out + "/config.json"));
    EXPECT_EQ(cfg["model_type"], "llama");
    EXPECT_EQ(cfg["hidden_size"], 48);
    const json& qc = cfg["quantization_config"];
    switch (r) {
      case Recipe::kModelopt: {
        EXPECT_EQ(qc["quant_method"], "modelopt");
        EXPECT_EQ(qc["quant_algo"], "W4A16_NVFP4");
        EXPECT_EQ(qc["group_size"], 16);
        EXPECT_EQ(qc["exclude_modules"], json::array({"lm_head"}));
        const json hf = json::parse(test::read_bytes(out + "/hf_quant_config.json"));
        EXPECT_EQ(hf["producer"]["name"], "modelopt");
        EXPECT_EQ(hf["quantization"]["quant_algo"], "W4A16_NVFP4");
        EXPECT_TRUE(hf["quantization"]["kv_cache_quant_algo"].is_null());
        EXPECT_EQ(hf["quantization"]["group_size"], 16);
        EXPECT_EQ(hf["quantization"]["exclude_modules"], json::array({"lm_head"}));
        break;
      }
      case Recipe::kCompressedTensors: {
        EXPECT_EQ(qc["quant_method"], "compressed-tensors");
        EXPECT_EQ(qc["format"], "nvfp4-pack-quantized");
        EXPECT_EQ(qc["quantization_status"], "compressed");
        EXPECT_EQ(qc["ignore"], json::array({"lm_head"}));
        const json& g = qc["config_groups"]["group_0"];
        EXPECT_EQ(g["targets"], json::array({"Linear"}));
        EXPECT_EQ(g["weights"]["num_bits"], 4);
        EXPECT_EQ(g["weights"]["type"], "float");
        EXPECT_EQ(g["weights"]["strategy"], "tensor_group");
        EXPECT_EQ(g["weights"]["group_size"], 16);
        EXPECT_TRUE(g["input_activations"].is_null());
        EXPECT_FALSE(std::filesystem::exists(out + "/hf_quant_config.json"));
        break;
      }
      default:
        EXPECT_EQ(cfg["quantization"], (json{{"group_size", 16}, {"bits", 4}, {"mode", "nvfp4"}}));
        EXPECT_EQ(qc, cfg["quantization"]);
    }
    EXPECT_TRUE(std::filesystem::exists(out + "/tokenizer.json"));
    EXPECT_FALSE(std::filesystem::exists(out + "/pytorch_model.bin"));
    EXPECT_TRUE(test::leftovers(d.path()).empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, LayoutRoundTrip,
                         ::testing::Values(Recipe::kModelopt, Recipe::kCompressedTensors, Recipe::kMlx),
                         [](const auto& i) {
                           return std::string(i.param == Recipe::kModelopt            ? "modelopt"
                                              : i.param == Recipe::kCompressedTensors ? "ct"
                                                                                      : "mlx");
                         });

TEST(Checkpoint, ExactTensorNamesAndDtypesPerLayout) {
  TempDir d;
  const QuantizedWeight qm = quantize(random_weight(4, 32, 5), {});
  QuantizeOptions co;
  co.recipe = Recipe::kCompressedTensors;
  QuantizeOptions mo;
  mo.recipe = Recipe::kMlx;
  struct Case {
    Layout l;
    QuantizedWeight q;
    std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>>> want;
  };
  const std::vector<Case> cases = {
      {Layout::kModelopt, qm,
       {{"p.weight", "U8", {4, 16}}, {"p.weight_scale", "F8_E4M3", {4, 2}}, {"p.weight_scale_2", "F32", {}}}},
      {Layout::kCompressedTensors, quantize(random_weight(4, 32, 5), co),
       {{"p.weight_packed", "U8", {4, 16}}, {"p.weight_scale", "F8_E4M3", {4, 2}}, {"p.weight_global_scale", "F32", {1}}}},
      {Layout::kMlx, quantize(random_weight(4, 32, 5), mo),
       {{"p.weight", "U32", {4, 4}}, {"p.scales", "U8", {4, 2}}, {"p.global_scale", "F32", {}}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(layout_name(c.l));
    WriterOptions wo;
    wo.layout = c.l;
    const std::string out = d / (std::string(layout_name(c.l)) + ".safetensors");
    CheckpointWriter w(out, wo);
    w.add_quantized("p", c.q);
    w.commit();
    SafetensorsFile f(out);
    ASSERT_EQ(f.entries().size(), c.want.size());
    for (const auto& [n, dt, sh] : c.want) {
      ASSERT_NE(f.find(n), nullptr) << n;
      EXPECT_EQ(f.at(n).dtype, dt) << n;
      EXPECT_EQ(f.at(n).shape, sh) << n;
    }
    // MLX words hold element j in bits 4j..4j+3: the first word's low nibble is element 0.
    if (c.l == Layout::kMlx) {
      std::uint32_t w0;
      std::memcpy(&w0, f.data(f.at("p.weight")), 4);
      EXPECT_EQ(w0 & 0xF, c.q.packed[0] & 0xF);
      EXPECT_EQ((w0 >> 4) & 0xF, c.q.packed[0] >> 4);
      EXPECT_EQ((w0 >> 28) & 0xF, c.q.packed[3] >> 4);
    }
  }
  // A weight of another convention cannot be written into a layout.
  WriterOptions wo;
  wo.layout = Layout::kMlx;
  CheckpointWriter w(d / "x.safetensors", wo);
  EXPECT_ERROR_HAS(w.add_quantized("p", qm), "convention");
}

// Writes one checkpoint file from (name, dtype, shape, bytes) tuples with the plain writer.
struct T {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};
void write_raw(const std::string& path, const std::vector<T>& ts) {
  std::vector<SafetensorsTensor> v;
  for (const auto& t : ts) v.push_back({t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
  write_safetensors(path, v);
}
std::vector<std::uint8_t> f32_bytes(float f) {
  std::vector<std::uint8_t> b(4);
  std::memcpy(b.data(), &f, 4);
  return b;
}

std::vector<T> modelopt_linear(const std::string& p, float ts = 0.01f, std::uint8_t scale = 0x38) {
  return {{p + ".weight", "U8", {2, 8}, std::vector<std::uint8_t>(16, 0x21)},
          {p + ".weight_scale", "F8_E4M3", {2, 1}, std::vector<std::uint8_t>(2, scale)},
          {p + ".weight_scale_2", "F32", {}, f32_bytes(ts)}};
}

TEST(Checkpoint, RejectsInconsistentQuantizedLinears) {
  TempDir d;
  int i = 0;
  auto check = [&](std::vector<T> ts, const char* what, bool at_open) {
    SCOPED_TRACE(what);
    const std::string p = d / ("c" + std::to_string(i++) + ".safetensors");
    write_raw(p, ts);
    const std::string m = test::error_of([&] {
      Checkpoint c(p);
      for (const auto& q : c.quantized_prefixes()) c.quantized(q);
    });
    EXPECT_NE(m.find(what), std::string::npos) << m;
    EXPECT_NE(m.find(p), std::string::npos) << m;
    if (at_open) {
      EXPECT_NE(test::error_of([&] { Checkpoint c(p); }), "(no error)");
    }
  };
  check(modelopt_linear("a", 0.01f, 0x7F), "is NaN (byte 0x7F)", false);
  check(modelopt_linear("a", 0.01f, 0xFF), "is NaN (byte 0xFF)", false);
  check(modelopt_linear("a", -1.0f), "finite and non-negative", false);
  check(modelopt_linear("a", INFINITY), "finite and non-negative", false);
  check(modelopt_linear("a", NAN), "finite and non-negative", false);
  auto v = modelopt_linear("a");
  v[1].shape = {1, 2};
  check(v, "expected [2, 1]", false);
  v = modelopt_linear("a");
  v[0].dtype = "I8";
  check(v, "has dtype I8, expected U8", false);
  v = modelopt_linear("a");
  v[0] = {"a.weight", "U8", {2, 4}, std::vector<std::uint8_t>(8)};
  check(v, "is not a multiple of 16", false);
  v = modelopt_linear("a");
  v[2].shape = {2};
  v[2].bytes.resize(8);
  check(v, "expected F32 [] or [1]", false);
  v = modelopt_linear("a");
  v.erase(v.begin() + 1);
  check(v, "has no tensor 'a.weight_scale'", true);
  v = modelopt_linear("a");
  v.push_back({"b.weight_scale", "F8_E4M3", {1, 1}, {0x38}});
  check(v, "'b.weight_scale' has no matching", true);
  v = modelopt_linear("a");
  v.push_back({"b.weight_packed", "U8", {2, 8}, std::vector<std::uint8_t>(16)});
  check(v, "mixes quantized layouts", true);
  // compressed-tensors: the global scale divides, so zero is invalid.
  check({{"a.weight_packed", "U8", {2, 8}, std::vector<std::uint8_t>(16)},
         {"a.weight_scale", "F8_E4M3", {2, 1}, {0x38, 0x38}},
         {"a.weight_global_scale", "F32", {1}, f32_bytes(0.0f)}},
        "finite and positive", false);
  // MLX affine (with biases) is not nvfp4.
  check({{"a.weight", "U32", {2, 2}, std::vector<std::uint8_t>(16)},
         {"a.scales", "U8", {2, 1}, {0x38, 0x38}},
         {"a.biases", "F16", {2, 1}, std::vector<std::uint8_t>(4)},
         {"a.global_scale", "F32", {}, f32_bytes(1.0f)}},
        "affine biases", true);
}

// W4A4 exports (most nvidia/*-FP4 and llm-compressor NVFP4 checkpoints) carry an activation
// scale per linear. It belongs to its linear (not a stray dense tensor), and the weight reads
// the same with or without it.
TEST(Checkpoint, W4A4InputScalesBelongToTheirLinear) {
  TempDir d;
  // modelopt: <p>.input_scale F32 []
  auto mo = modelopt_linear("a");
  auto b = modelopt_linear("b");
  mo.insert(mo.end(), b.begin(), b.end());
  mo.push_back({"a.input_scale", "F32", {}, f32_bytes(0.5f)});
  write_raw(d / "mo.safetensors", mo);
  const Checkpoint m(d / "mo.safetensors");
  EXPECT_EQ(m.layout(), Layout::kModelopt);
  EXPECT_EQ(m.quantized_prefixes(), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(m.is_quantized_tensor("a.input_scale"));
  EXPECT_EQ(m.quantized("a").packed, m.quantized("b").packed);
  EXPECT_EQ(m.quantized("a").stored_scale, 0.01f);
  // compressed-tensors: <p>.input_global_scale F32 [1]
  const std::vector<T> ct = {{"a.weight_packed", "U8", {2, 8}, std::vector<std::uint8_t>(16, 0x21)},
                             {"a.weight_scale", "F8_E4M3", {2, 1}, {0x38, 0x38}},
                             {"a.weight_global_scale", "F32", {1}, f32_bytes(448.0f)},
                             {"a.input_global_scale", "F32", {1}, f32_bytes(100.0f)}};
  write_raw(d / "ct.safetensors", ct);
  const Checkpoint c(d / "ct.safetensors");
  EXPECT_EQ(c.layout(), Layout::kCompressedTensors);
  EXPECT_TRUE(c.is_quantized_tensor("a.input_global_scale"));
  EXPECT_EQ(c.quantized("a").stored_scale, 448.0f);
}

// A modelopt mixed-precision export: NVFP4 linears next to FP8 ones (F8_E4M3 weight, F32 scale
// per tensor or per row). The FP8 linears are read as FP8, and only as FP8.
TEST(Checkpoint, MixedPrecisionModeloptFp8Linears) {
  TempDir d;
  auto fp8 = [](const std::string& p, std::vector<std::uint8_t> w, std::vector<std::int64_t> ws,
                std::vector<float> scale) {
    std::vector<std::uint8_t> sb(scale.size() * 4);
    std::memcpy(sb.data(), scale.data(), sb.size());
    std::vector<std::int64_t> sshape = scale.size() == 1 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{ws[0]};
    return std::vector<T>{{p + ".weight", "F8_E4M3", ws, std::move(w)}, {p + ".weight_scale", "F32", sshape, sb}};
  };
  auto v = modelopt_linear("a");
  // b: per-tensor scale 0.5, codes 0x38 (1.0) and 0xB8 (-1.0), plus an input scale
  auto b = fp8("b", {0x38, 0xB8, 0x40, 0x00}, {2, 2}, {0.5f});
  b.push_back({"b.input_scale", "F32", {}, f32_bytes(0.1f)});
  // c: a scale per row (2 and 4)
  auto c = fp8("c", {0x38, 0x38, 0x38, 0x38}, {2, 2}, {2.0f, 4.0f});
  v.insert(v.end(), b.begin(), b.end());
  v.insert(v.end(), c.begin(), c.end());
  write_raw(d / "mixed.safetensors", v);
  const Checkpoint m(d / "mixed.safetensors");
  EXPECT_EQ(m.layout(), Layout::kModelopt);
  EXPECT_EQ(m.quantized_prefixes(), (std::vector<std::string>{"a"}));
  EXPECT_EQ(m.fp8_prefixes(), (std::vector<std::string>{"b", "c"}));
  for (const char* t : {"b.weight", "b.weight_scale", "b.input_scale", "c.weight", "c.weight_scale"})
    EXPECT_TRUE(m.is_quantized_tensor(t)) << t;
  const Tensor fb = m.fp8_dense("b");
  EXPECT_EQ(fb.shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(fb.get(0), 0.5f);
  EXPECT_EQ(fb.get(1), -0.5f);
  EXPECT_EQ(fb.get(2), 1.0f);  // 0x40 = 2.0
  EXPECT_EQ(fb.get(3), 0.0f);
  const Tensor fc = m.fp8_dense("c");
  EXPECT_EQ(fc.get(1), 2.0f);
  EXPECT_EQ(fc.get(2), 4.0f);
  EXPECT_ERROR_HAS(m.fp8_dense("a"), "no FP8 linear 'a'");
  EXPECT_EQ(m.quantized("a").stored_scale, 0.01f);
  EXPECT_ERROR_HAS(m.quantized("b"), "no quantized linear 'b'");

  // What is not an FP8 linear stays an error: a scale of the wrong size, a dense weight, NaN.
  auto bad = modelopt_linear("a");
  auto w3 = fp8("b", {0x38, 0x38, 0x38, 0x38}, {2, 2}, {1.0f, 1.0f, 1.0f});
  bad.insert(bad.end(), w3.begin(), w3.end());
  bad[4].shape = {3};
  write_raw(d / "bad1.safetensors", bad);
  EXPECT_ERROR_HAS(Checkpoint(d / "bad1.safetensors"), "is not an FP8 linear's scale");
  bad = modelopt_linear("a");
  bad.push_back({"b.weight", "F32", {1, 1}, f32_bytes(1.0f)});
  bad.push_back({"b.weight_scale", "F32", {}, f32_bytes(1.0f)});
  write_raw(d / "bad2.safetensors", bad);
  EXPECT_ERROR_HAS(Checkpoint(d / "bad2.safetensors"), "is not an FP8 linear's scale");
  bad = modelopt_linear("a");
  auto nan = fp8("b", {0x38, 0x7F, 0x38, 0x38}, {2, 2}, {1.0f});
  bad.insert(bad.end(), nan.begin(), nan.end());
  write_raw(d / "bad3.safetensors", bad);
  EXPECT_ERROR_HAS(Checkpoint(d / "bad3.safetensors").fp8_dense("b"), "weight [0, 1] is NaN (byte 0x7F)");
}

TEST(Checkpoint, FolderIndexValidation) {
  TempDir d;
  auto mk = [&](const std::string& name) {
    std::filesystem::create_directory(d / name);
    write_raw(d / (name + "/s1.safetensors"), {{"a", "U8", {4}, {1, 2, 3, 4}}});
    write_raw(d / (name + "/s2.safetensors"), {{"b", "U8", {2}, {5, 6}}});
    return d / name;
  };
  auto index = [&](const std::string& dir, const std::string& text) {
    test::write_bytes(dir + "/model.safetensors.index.json", text);
  };
  std::string f = mk("ok");
  index(f, R"({"metadata": {"total_size": 6}, "weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  EXPECT_EQ(Checkpoint(f).names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Checkpoint(f).total_bytes(), 6u);

  f = mk("missing_shard");
  index(f, R"({"weight_map": {"a": "s1.safetensors", "b": "s3.safetensors"}})");
  EXPECT_ERROR_HAS(Checkpoint c(f), "names shard 's3.safetensors', which does not exist");
  f = mk("wrong_shard");
  index(f, R"({"weight_map": {"a": "s2.safetensors", "b": "s2.safetensors"}})");
  EXPECT_ERROR_HAS(Checkpoint c(f), "tensor 'a' is mapped to 's2.safetensors' but is not in it");
  f = mk("unlisted");  // a listed shard holds a tensor the index does not name
  write_raw(f + "/s1.safetensors", {{"a", "U8", {4}, {1, 2, 3, 4}}, {"c", "U8", {1}, {7}}});
  index(f, R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  EXPECT_ERROR_HAS(Checkpoint c(f), "missing from weight_map");
  f = mk("ghost");
  index(f, R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors", "c": "s2.safetensors"}})");
  EXPECT_ERROR_HAS(Checkpoint c(f), "tensor 'c' is mapped to 's2.safetensors' but is not in it");
  f = mk("total");
  index(f, R"({"metadata": {"total_size": 7}, "weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  EXPECT_ERROR_HAS(Checkpoint c(f), "total_size 7 != the shards' tensor bytes 6");
  f = mk("traversal");
  index(f, R"({"weight_map": {"a": "../ok/s1.safetensors"}})");
  EXPECT_ERROR_HAS(Checkpoint c(f), "not a plain file name");
  f = mk("badjson");
  index(f, R"({"weight_map": )");
  EXPECT_ERROR_HAS(Checkpoint c(f), "is not valid JSON");
  f = mk("nomap");
  index(f, R"({"metadata": {}})");
  EXPECT_ERROR_HAS(Checkpoint c(f), "has no \"weight_map\" object");
  // Without an index every *.safetensors is read; a tensor in two files is ambiguous.
  f = mk("dup");
  write_raw(f + "/s3.safetensors", {{"a", "U8", {1}, {9}}});
  EXPECT_ERROR_HAS(Checkpoint c(f), "tensor 'a' appears in both");
  std::filesystem::create_directory(d / "empty");
  EXPECT_ERROR_HAS(Checkpoint c(d / "empty"), "no *.safetensors file");
  EXPECT_ERROR_HAS(Checkpoint c(d / "nothing"), "no such file or folder");
  EXPECT_ERROR_HAS(Checkpoint c("/dev/zero"), "not a regular file or a folder");
  // config.json that contradicts the tensors.
  f = mk("cfg");
  test::write_bytes(f + "/config.json", R"({"quantization_config": {"quant_method": "modelopt"}})");
  EXPECT_ERROR_HAS(Checkpoint c(f), "says quant_method \"modelopt\"");
  test::write_bytes(f + "/config.json", R"([1])");
  EXPECT_ERROR_HAS(Checkpoint c(f), "is not a JSON object");
  // Found by an audit on 2026-12-03: a deeply nested index value crashed the error message's
  // dump() (SIGSEGV), a FIFO as the index hung the reader, /dev/zero grew memory until killed,
  // and a symlink loop escaped as a std::filesystem error without the reader's name.
  f = mk("deep_total");
  index(f, R"({"metadata": {"total_size": )" + std::string(200000, '[') + std::string(200000, ']') +
               R"(}, "weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  EXPECT_ERROR_HAS(Checkpoint c(f), "nests deeper than 64 levels");
  f = mk("deep_config");
  test::write_bytes(f + "/config.json", "{\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}");
  EXPECT_ERROR_HAS(Checkpoint c(f), "nests deeper than 64 levels");
  f = mk("fifo");
  ASSERT_EQ(::mkfifo((f + "/model.safetensors.index.json").c_str(), 0600), 0);
  EXPECT_ERROR_HAS(Checkpoint c(f), "is not a regular file");
  f = mk("devzero");
  std::filesystem::create_symlink("/dev/zero", f + "/model.safetensors.index.json");
  EXPECT_ERROR_HAS(Checkpoint c(f), "is not a regular file");
  f = mk("loop");
  std::filesystem::create_symlink("loop.safetensors", f + "/loop.safetensors");
  EXPECT_ERROR_HAS(Checkpoint c(f), "cannot read '" + f + "/loop.safetensors'");
}

// Tensors that belong to a quantized linear whose other parts are missing used to be copied as
// if dense: `nvfp4 dequantize` wrote a "dense" checkpoint holding packed codes or FP8 scales.
// Each is refused at open, naming the tensor (audit of 2026-12-03).
TEST(Checkpoint, RejectsQuantizationDataOfNoCompleteLinear) {
  TempDir d;
  int i = 0;
  auto check = [&](std::vector<T> ts, const std::string& what) {
    SCOPED_TRACE(what);
    const std::string p = d / ("s" + std::to_string(i++) + ".safetensors");
    write_raw(p, ts);
    EXPECT_ERROR_HAS(Checkpoint c(p), what);
  };
  auto mo = modelopt_linear("a");
  mo.push_back({"b.weight", "U8", {2, 8}, std::vector<std::uint8_t>(16)});  // b lost both scales
  check(mo, "'b.weight' (U8) is quantization data of no complete modelopt linear");
  const std::vector<T> ct = {{"a.weight_packed", "U8", {2, 8}, std::vector<std::uint8_t>(16)},
                             {"a.weight_scale", "F8_E4M3", {2, 1}, {0x38, 0x38}},
                             {"a.weight_global_scale", "F32", {1}, f32_bytes(1.0f)}};
  auto ct_orphan = ct;
  ct_orphan.push_back({"b.weight_scale", "F8_E4M3", {2, 1}, {0x38, 0x38}});  // b lost its packed codes
  check(ct_orphan, "'b.weight_scale' (F8_E4M3) is quantization data of no complete compressed-tensors linear");
  auto ct_both = ct;
  ct_both.push_back({"a.weight", "BF16", {2, 16}, std::vector<std::uint8_t>(64)});
  check(ct_both, "'a' has both a dense 'a.weight' and a packed 'a.weight_packed'");
  const std::vector<T> mlx = {{"a.weight", "U32", {2, 2}, std::vector<std::uint8_t>(16)},
                              {"a.scales", "U8", {2, 1}, {0x38, 0x38}}};
  auto mlx_orphan = mlx;
  mlx_orphan.push_back({"b.weight", "U32", {2, 2}, std::vector<std::uint8_t>(16)});  // b lost its scales
  check(mlx_orphan, "'b.weight' (U32) is quantization data of no complete mlx linear");
  mlx_orphan = mlx;
  mlx_orphan.push_back({"c.global_scale", "F32", {}, f32_bytes(1.0f)});
  check(mlx_orphan, "'c.global_scale' (F32) is quantization data");
  // An FP8 linear's scale is checked at open, so inspect (which reads no weight) refuses it too.
  auto fp8 = modelopt_linear("a");
  fp8.push_back({"f.weight", "F8_E4M3", {2, 16}, std::vector<std::uint8_t>(32, 0x38)});
  fp8.push_back({"f.weight_scale", "F32", {}, f32_bytes(-1.0f)});
  check(fp8, "FP8 linear 'f': weight_scale[0] = -1.000000 must be finite and non-negative");
  // An empty FP8 weight of 2^62 rows: its empty rows were walked one by one (a hang).
  fp8 = modelopt_linear("a");
  fp8.push_back({"f.weight", "F8_E4M3", {std::int64_t{1} << 62, 0}, {}});
  fp8.push_back({"f.weight_scale", "F32", {}, f32_bytes(1.0f)});
  const std::string p = d / "fp8_empty.safetensors";
  write_raw(p, fp8);
  EXPECT_EQ(Checkpoint(p).fp8_dense("f", DType::kBF16).numel(), 0);
}

// The writer refuses what its reader would refuse, before writing anything (audit 2026-12-03:
// a NaN tensor scale or a NaN block scale was written, then the file could not be read back),
// and an MLX file where a dense <p>.biases sits next to the quantized <p> (MLX reads it as
// affine-mode biases).
TEST(Checkpoint, WriterRefusesWhatTheReaderWould) {
  TempDir d;
  QuantizedWeight q = quantize(random_weight(4, 32, 21), QuantizeOptions{});
  auto refused = [&](const QuantizedWeight& w, const std::string& what) {
    SCOPED_TRACE(what);
    const std::string out = d / "w.safetensors";
    WriterOptions mo_layout;
    mo_layout.layout = Layout::kModelopt;
    EXPECT_ERROR_HAS(
        {
          CheckpointWriter wr(out, mo_layout);
          wr.add_quantized("a", w);
          wr.commit();
        },
        what);
    EXPECT_FALSE(std::filesystem::exists(out));
  };
  QuantizedWeight bad = q;
  bad.stored_scale = NAN;
  refused(bad, "must be finite and non-negative");
  bad = q;
  bad.scales[5] = 0x7F;
  refused(bad, "block scale [2, 1] is an E4M3 NaN (byte 0x7F)");
  bad = q;
  bad.packed.pop_back();
  refused(bad, "buffers hold");

  QuantizeOptions mo;
  mo.recipe = Recipe::kMlx;
  const QuantizedWeight m = quantize(random_weight(4, 32, 22), mo);
  WriterOptions wo;
  wo.layout = Layout::kMlx;
  const std::string out = d / "m.safetensors";
  EXPECT_ERROR_HAS(
      {
        CheckpointWriter wr(out, wo);
        wr.add_dense("a.biases", random_weight(4, 1, 23));
        wr.add_quantized("a", m);
      },
      "'a.biases' would read as the MLX affine biases");
  EXPECT_ERROR_HAS(
      {
        CheckpointWriter wr(out, wo);
        wr.add_quantized("a", m);
        wr.add_dense("a.biases", random_weight(4, 1, 23));
      },
      "'a.biases' would read as the MLX affine biases");
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(Checkpoint, WriterIsAtomic) {
  TempDir d;
  const Tensor t = random_weight(2, 16, 1);
  // OUT exists and is not empty: refused up front, untouched.
  std::filesystem::create_directory(d / "busy");
  test::write_bytes(d / "busy/keep.txt", "keep");
  EXPECT_ERROR_HAS(CheckpointWriter w(d / "busy", {}), "exists and is not empty");
  EXPECT_EQ(test::read_bytes(d / "busy/keep.txt"), "keep");
  EXPECT_ERROR_HAS(CheckpointWriter w(d / "no/parent/out", {}), "is not an existing directory");
  // A failure inside commit (an unreadable source config.json, found after the shards are
  // written) leaves nothing at OUT and no staging folder.
  std::filesystem::create_directory(d / "src");
  test::write_bytes(d / "src/config.json", "{not json");
  WriterOptions wo;
  wo.source_folder = d / "src";
  {
    CheckpointWriter w(d / "out", wo);
    w.add_dense("x.weight", t);
    EXPECT_ERROR_HAS(w.commit(), "is not valid JSON");
  }
  EXPECT_FALSE(std::filesystem::exists(d / "out"));
  EXPECT_TRUE(test::leftovers(d.path()).empty());
  // An empty existing folder is fine (replaced by the rename).
  std::filesystem::create_directory(d / "empty_out");
  CheckpointWriter w(d / "empty_out", {});
  w.add_dense("x.weight", t);
  EXPECT_ERROR_HAS(w.add_dense("x.weight", t), "added twice");
  w.commit();
  EXPECT_EQ(Checkpoint(d / "empty_out").dense("x.weight").bytes, t.bytes);
}

TEST(Checkpoint, ParseByteSize) {
  EXPECT_EQ(parse_byte_size("5GB"), 5000000000ull);
  EXPECT_EQ(parse_byte_size("500mb"), 500000000ull);
  EXPECT_EQ(parse_byte_size("2GiB"), 2147483648ull);
  EXPECT_EQ(parse_byte_size("1.5KB"), 1500ull);
  EXPECT_EQ(parse_byte_size("123"), 123ull);
  for (const char* bad : {"", "GB", "-5GB", "5XB", "1.2.3MB", "0", "0.1"}) EXPECT_THROW(parse_byte_size(bad), Error) << bad;
}

}  // namespace
}  // namespace nvfp4
