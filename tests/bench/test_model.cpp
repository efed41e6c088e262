// Model files: the built-ins parse and have the published sizes; user files and HF configs work;
// bad files are refused with the key named.
#include <gtest/gtest.h>

#include <fstream>

#include "bench/model.h"
#include "nvfp4/error.h"

namespace nvfp4::bench {
namespace {

TEST(BenchModel, BuiltinsParseWithPublishedParameterCounts) {
  const auto names = builtin_model_names();
  for (const char* n : {"llama-3-8b", "llama-3-70b", "qwen3-4b", "qwen3-32b", "qwen3.5-4b-like"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  const ModelSpec m = load_model("llama-3-8b");
  LinearPlan p;
  p.layers = m.layers;
  const auto ls = model_linears(m, p);
  EXPECT_EQ(ls.size(), 32u * 7 + 1);
  // Llama-3-8B: 8.03 B parameters of which 0.525 B embedding: 7.50 B in linears incl. lm_head.
  EXPECT_NEAR(linear_params(ls) / 1e9, 7.50, 0.01);
  EXPECT_EQ(ls.front().name, "q_proj");
  EXPECT_EQ(ls.back().name, "lm_head");
  EXPECT_EQ(ls[1].n, 1024);  // k_proj: 8 KV heads x 128
  EXPECT_EQ(ls[6].k, 14336);  // down_proj
  const ModelSpec q = load_model("qwen3-4b");
  EXPECT_TRUE(q.tied_embeddings);
  EXPECT_EQ(q.head_dim, 128);  // not hidden/heads = 80: head_dim is explicit in Qwen3
}

TEST(BenchModel, FuseAndExtraWork) {
  const ModelSpec m = load_model("qwen3-4b");
  LinearPlan p;
  p.layers = 2;
  p.fuse = true;
  p.lm_head = false;
  const auto f = model_linears(m, p);
  ASSERT_EQ(f.size(), 8u);
  EXPECT_EQ(f[0].n, 4096 + 2 * 1024);
  EXPECT_EQ(f[2].n, 2 * 9728);
  p.fuse = false;
  const double base = linear_params(model_linears(m, p));
  p.extra_work = 0.03;
  const auto e = model_linears(m, p);
  EXPECT_EQ(e.back().name, "extra_work");
  EXPECT_NEAR(linear_params(e) / base, 1.03, 1e-4);
}

TEST(BenchModel, UserFileAndHfConfig) {
  const std::string path = ::testing::TempDir() + "/mymodel.json";
  std::ofstream(path) << R"({"hidden_size": 1024, "intermediate_size": 2816, "num_attention_heads": 16,
      "num_hidden_layers": 4, "vocab_size": 32000, "architectures": ["X"]})";
  const ModelSpec m = load_model(path);
  EXPECT_EQ(m.name, "mymodel");
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.kv_heads, 16);
  const ModelSpec t = parse_model_json(R"({"text_config": {"hidden_size": 2560, "intermediate_size": 9216,
      "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 256, "num_hidden_layers": 32,
      "vocab_size": 248320}, "tie_word_embeddings": true})", "cfg");
  EXPECT_EQ(t.head_dim, 256);
  EXPECT_TRUE(t.tied_embeddings);
}

TEST(BenchModel, BadFilesNameTheKey) {
  auto msg = [](const std::string& text) {
    try {
      parse_model_json(text, "f.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(msg(R"({"hidden_size": 64})").find("intermediate_size"), std::string::npos);
  EXPECT_NE(msg(R"({"hidden_size": -4, "intermediate_size": 64, "num_attention_heads": 1, "num_hidden_layers": 1, "vocab_size": 8})")
                .find("hidden_size"),
            std::string::npos);
  EXPECT_NE(msg(R"({"hidden_size": 40, "intermediate_size": 64, "num_attention_heads": 1, "num_hidden_layers": 1, "vocab_size": 8})")
                .find("multiple of 16"),
            std::string::npos);
  EXPECT_THROW(load_model("no-such-model"), Error);
  const ModelSpec m = load_model("qwen3-4b");
  LinearPlan p;
  p.layers = 37;
  EXPECT_THROW(model_linears(m, p), Error);
}

}  // namespace
}  // namespace nvfp4::bench
