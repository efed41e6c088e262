// The workload flags shared by `nvfp4 bench` and `nvfp4 compare`: parsed into ReplayOptions, and
// forwarded unchanged to `bench --serve` children (a flag lost there would make an A/B compare
// two identical sides).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench/workload_cli.h"

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

}  // namespace
}  // namespace nvfp4::bench
