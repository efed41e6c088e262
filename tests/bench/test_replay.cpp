// Model replay on the CPU: validated before timing, traffic counted right, memory checked before
// anything is allocated, random weights valid.
#include <gtest/gtest.h>

#include <sstream>

#include "bench/dense_cpu.h"
#include "bench/machine.h"
#include "bench/replay.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "test_util.h"

namespace nvfp4::bench {

ModelSpec tiny_model();  // shared with test_report.cpp
ModelSpec tiny_model() {
  return parse_model_json(R"({"name": "tiny", "hidden_size": 256, "intermediate_size": 528, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 6, "vocab_size": 1009})", "tiny.json");
}

namespace {

// The dense baseline: oneDNN bf16 where this CPU has it, else (AVX2-only CPUs) OpenBLAS fp32; the
// fp32 one is also run on request (dense_f32), so both engines are tested on hosts with bf16.
TEST(BenchReplay, DecodeAndPrefillRunValidatedAndCounted) {
  for (ReplayMode mode : {ReplayMode::kDecode, ReplayMode::kPrefill})
    for (bool want_f32 : {false, true}) {
      ReplayOptions o;
      o.model = tiny_model();
      o.mode = mode;
      o.prompt = 5;
      o.plan.layers = 3;
      o.seconds = 0;
      o.min_samples = 4;
      o.dense_f32 = want_f32;
      const bool f32 = want_f32 || !onednn_bf16_matmul_available();
      SCOPED_TRACE(std::string(replay_mode_name(mode)) + (f32 ? ", dense fp32" : ", dense bf16"));
      EXPECT_EQ(cpu_dense_f32(o), f32);
      const ReplayResult r = run_replay(o);
      ASSERT_EQ(r.variants.size(), 2u);
      EXPECT_EQ(r.variants[1].variant, f32 ? "dense_f32" : "dense_bf16");
      EXPECT_TRUE(r.scaled);
      EXPECT_EQ(r.linears.size(), 3u * 7 + 1);
      EXPECT_GT(r.ceiling_gbps, 0.5);
      const auto& v = r.variants[0];
      EXPECT_EQ(v.variant, "nvfp4");
      EXPECT_TRUE(v.validated) << v.validation;
      EXPECT_TRUE(r.variants[1].validated) << r.variants[1].validation;
      EXPECT_EQ(v.samples_us.size(), 4u);
      // Weights: per layer q 256x256, k/v 128x256, o 256x256, gate/up 528x256, down 256x528; lm_head 1009x256.
      const double params = 3.0 * (256 * 256 * 2 + 128 * 256 * 2 + 528 * 256 * 3) + 1009 * 256;
      EXPECT_DOUBLE_EQ(v.weight_bytes, params * (0.5 + 1.0 / 16));
      EXPECT_DOUBLE_EQ(r.variants[1].weight_bytes, params * (f32 ? 4 : 2));
      const double m = mode == ReplayMode::kDecode ? 1 : 5;
      EXPECT_DOUBLE_EQ(v.flops, 2 * m * (params - 1009 * 256) + 2 * 1009 * 256);  // lm_head: last token only
      EXPECT_GT(v.full_us, v.us_median);  // 6 layers estimated from 3
      for (double t : v.samples_us) EXPECT_GT(t, 0);
    }
}

TEST(BenchReplay, TooLargeFailsBeforeAllocating) {
  ReplayOptions o;
  o.model = load_model("llama-3-70b");
  o.plan.layers = o.model.layers;
  const auto ls = model_linears(o.model, o.plan);
  try {
    check_replay_fits(o, ls, 24e9, "a 24 GB host");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[bench]"), std::string::npos) << m;
    EXPECT_NE(m.find("llama-3-70b"), std::string::npos) << m;
    EXPECT_NE(m.find("--layers"), std::string::npos) << m;
    EXPECT_NE(m.find("--no-dense"), std::string::npos) << m;
  }
  o.dense = false;
  EXPECT_THROW(check_replay_fits(o, ls, 24e9, "host"), Error);  // 39 GB of NVFP4 alone
  o.plan.layers = 8;
  EXPECT_NO_THROW(check_replay_fits(o, model_linears(o.model, o.plan), 24e9, "host"));
  // The whole run refuses before allocating (RSS stays far below the 39 GB).
  ReplayOptions big;
  big.model = load_model("llama-3-70b");
  const double before = peak_rss_bytes();
  EXPECT_THROW(run_replay(big), Error);
  EXPECT_LT(peak_rss_bytes() - before, 1e9);
}

TEST(BenchReplay, RandomScalesAreValidE4M3) {
  std::vector<std::uint8_t> s(1 << 16);
  fill_random_scales(s.data(), s.size(), test::base_seed());
  int seen_max = 0;
  for (auto b : s) {
    ASSERT_NE(b & 0x7F, 0x7F) << "NaN scale";
    const float v = e4m3_to_float(b);
    ASSERT_GE(v, 8.0f);
    ASSERT_LE(v, 448.0f);
    seen_max += b == 0x7E;
  }
  EXPECT_GT(seen_max, 0);
}

TEST(BenchReplay, ShapeWorkloadRotatesPastTheCache) {
  const auto ls = shape_linears({1, 4096, 4096, 16, 1024, 512}, 256e6);
  std::int64_t a = 0, b = 0;
  for (const auto& l : ls) (l.n == 4096 ? a : b) += 1;
  EXPECT_EQ(a, static_cast<std::int64_t>(std::ceil(256e6 / (4096.0 * 4096 * 0.5625))));
  EXPECT_GE(b * 1024 * 512 * 0.5625, 256e6);
  EXPECT_EQ(ls.front().m, 1);
  EXPECT_THROW(shape_linears({1, 10, 40}, 1e6), Error);
}

}  // namespace
}  // namespace nvfp4::bench
