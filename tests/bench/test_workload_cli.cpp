// The workload flags shared by `nvfp4 bench` and `nvfp4 compare`: parsed into ReplayOptions, and
// forwarded unchanged to `bench --serve` children (a flag lost there would make an A/B compare
// two identical sides).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/workload_cli.h"
#include "nvfp4/error.h"

namespace nvfp4::bench {
namespace {

WorkloadArgs parse(std::vector<std::string> args) {
  CLI::App app;
  WorkloadArgs w;
  w.add_to(&app);
  args.insert(args.begin(), "test");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return w;
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST(WorkloadCli, EarlyWeightsDefaultOnAndForwarded) {
  const WorkloadArgs d = parse({"--backend", "cpu"});
  EXPECT_TRUE(d.options(ReplayMode::kDecode).early_weights);
  EXPECT_FALSE(has(d.forward_args(), "--no-early-weights"));

  const WorkloadArgs off = parse({"--backend", "cpu", "--no-early-weights", "--plain-launch", "--fuse"});
  const ReplayOptions o = off.options(ReplayMode::kDecode);
  EXPECT_FALSE(o.early_weights);
  EXPECT_TRUE(o.plain_launch);
  EXPECT_TRUE(o.plan.fuse);
  const auto fwd = off.forward_args();
  EXPECT_TRUE(has(fwd, "--no-early-weights"));
  EXPECT_TRUE(has(fwd, "--plain-launch"));
  EXPECT_TRUE(has(fwd, "--fuse"));
  // The forwarded flags parse back to the same workload.
  const WorkloadArgs back = parse(fwd);
  EXPECT_FALSE(back.options(ReplayMode::kDecode).early_weights);
  EXPECT_TRUE(back.options(ReplayMode::kDecode).plain_launch);
}

// Values that used to fall back to the defaults silently (0 was the "not given" sentinel) or ran
// a meaningless replay are parse errors naming the flag: --layers 0 / -3, --prompt 0,
// --extra-work -0.5. In-range values still parse.
TEST(WorkloadCli, OutOfRangeValuesAreParseErrors) {
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--layers", "0"}, {"--layers", "-3"},
                                              {"--prompt", "0"}, {"-p", "-1"}, {"--extra-work", "-0.5"}}) {
    std::vector<std::string> args = {"--backend", "cpu"};
    args.insert(args.end(), bad.begin(), bad.end());
    EXPECT_THROW(parse(args), CLI::ValidationError) << bad[0] << " " << bad[1];
  }
  const WorkloadArgs ok = parse({"--backend", "cpu", "--layers", "2", "--prompt", "7", "--extra-work", "0.03"});
  EXPECT_EQ(ok.options(ReplayMode::kPrefill).prompt, 7);
  EXPECT_EQ(ok.options(ReplayMode::kPrefill).plan.layers, 2);
}

// Batched decode: every linear (lm_head included) at M = B, B tokens per replay; prefill keeps
// M = P (lm_head 1); the flag is forwarded; a shape workload, which carries its own M, refuses it.
TEST(WorkloadCli, DecodeBatchSetsEveryLinearsM) {
  const WorkloadArgs w = parse({"--backend", "cpu", "--model", "llama-3-8b", "--batch", "6"});
  const ReplayOptions d = w.options(ReplayMode::kDecode);
  EXPECT_EQ(d.batch, 6);
  const auto ls = replay_linears(d);
  ASSERT_FALSE(ls.empty());
  for (const auto& l : ls) EXPECT_EQ(linear_m(d, l), 6) << l.name;
  EXPECT_EQ(ls.back().name, "lm_head");
  const ReplayOptions pf = w.options(ReplayMode::kPrefill);
  EXPECT_EQ(linear_m(pf, ls.front()), pf.prompt);
  EXPECT_EQ(linear_m(pf, ls.back()), 1);
  const auto fwd = w.forward_args();
  const auto it = std::find(fwd.begin(), fwd.end(), "--batch");
  ASSERT_NE(it, fwd.end());
  EXPECT_EQ(*(it + 1), "6");
  EXPECT_EQ(parse(fwd).options(ReplayMode::kDecode).batch, 6);
  EXPECT_FALSE(has(parse({"--backend", "cpu"}).forward_args(), "--batch"));  // the default is not forwarded
  WorkloadArgs shapes = parse({"--backend", "cpu", "--batch", "2"});
  shapes.shapes = {"1,256,256"};  // `--shape`, which bench and compare add themselves
  EXPECT_THROW(shapes.options(ReplayMode::kDecode), Error);
  ReplayOptions bad = d;
  bad.batch = 0;
  bad.nvfp4 = false;
  bad.dense = false;
  EXPECT_THROW(run_replay(bad), Error);
}

}  // namespace
}  // namespace nvfp4::bench
