// nvfp4 compare end to end on the CPU: A against A is "no detectable difference", a variant doing
// 3% more work is found slower; variants run in-process and as `nvfp4 bench --serve` children.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>
#include <thread>
#include <sys/stat.h>

#include "bench/compare.h"
#include "nvfp4/error.h"

namespace nvfp4::bench {
namespace {

// Workload: 4 layers of a 2048-wide model without lm_head, ~90 MB of NVFP4 weights. On this
// machine (300 MiB L3, shared with other tenants) that is partly cache-resident, which does not
// matter here: the tests only need a fixed amount of work per replay.
ReplayOptions ab_options(double extra) {
  ReplayOptions o;
  o.model = parse_model_json(R"({"name": "ab", "hidden_size": 2048, "intermediate_size": 5632, "num_attention_heads": 16,
      "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 4, "vocab_size": 32000})", "ab.json");
  o.plan.layers = 4;
  o.plan.lm_head = false;
  o.plan.extra_work = extra;
  return o;
}

std::unique_ptr<ReplayEngine> cpu_engine(const ReplayOptions& o, const std::vector<Linear>& ls) {
  return make_cpu_replay(o, ls, false);
}

std::unique_ptr<Sampler> engine(double extra, const std::string& name, int reps = 3) {
  const ReplayOptions o = ab_options(extra);
  // Each sample is the median of 3 replays: one preempted replay (other builds share the 2 cores)
  // does not move it.
  return std::make_unique<EngineSampler>(cpu_engine(o, replay_linears(o)), reps, name);
}

// A's sample plus an extra engine's sample: B does exactly A's work on A's own buffers, then more.
// Two separately allocated copies of the model differ for real by a few percent on this machine
// (page placement and cache sharing with the other tenants: CI on 2026-12-01 measured a model
// with 3% more weights, allocated separately, at ratio 0.9995, 99% CI [0.994, 1.008], over 1160
// rounds), so "3% more work" is only a known truth when nothing else differs.
class PlusSampler final : public Sampler {
 public:
  PlusSampler(Sampler& base, std::unique_ptr<Sampler> extra) : base_(base), extra_(std::move(extra)) {}
  double sample_us() override { return base_.sample_us() + extra_->sample_us(); }
  std::string describe() const override { return base_.describe() + " + " + extra_->describe(); }

 private:
  Sampler& base_;
  std::unique_ptr<Sampler> extra_;
};

TEST(BenchCompare, AAgainstAIsNoDetectableDifference) {
  // Literally A against A: one engine in both slots, so any difference is noise. (Two separate
  // copies can differ for real -- page placement -- and on a machine at load 6 they did, 1 run
  // in ~10: that is a true difference between two processes, not a false positive.)
  auto a = engine(0, "A");
  const CompareRun run = run_interleaved(*a, *a, 30, 2);
  // 99.9%: the test must not flake on a shared machine; the command's default is 95%.
  const CompareStats s = compare_samples(run.a_us, run.b_us, 0.999, 0.02, 1);
  EXPECT_EQ(s.verdict, Verdict::kNoDifference) << "ratio " << s.ratio << " CI [" << s.ci_low << ", " << s.ci_high << "]";
  EXPECT_NEAR(s.ratio, 1.0, 0.10);  // loose: the verdict is the claim; this only catches a broken pairing
}

TEST(BenchCompare, DetectsThreePercentMoreWork) {
  auto a = engine(0, "A", 5);
  // The extra work: the plan's "extra_work" linear alone, 3% of the model's weights.
  const ReplayOptions o = ab_options(0.03);
  const std::vector<Linear> ls = replay_linears(o);
  ASSERT_EQ(ls.back().name, "extra_work");
  PlusSampler b(*a, std::make_unique<EngineSampler>(cpu_engine(o, {ls.back()}), 5, "3% work"));
  // Adaptive: rounds in batches of 20 until the 99% interval is decisive or 90 s have passed (a
  // quiet machine needs ~20 rounds, a busy one more).
  CompareRun all;
  CompareStats s;
  const auto t0 = std::chrono::steady_clock::now();
  do {
    const CompareRun r = run_interleaved(*a, b, 20, 1);
    all.a_us.insert(all.a_us.end(), r.a_us.begin(), r.a_us.end());
    all.b_us.insert(all.b_us.end(), r.b_us.begin(), r.b_us.end());
    s = compare_samples(all.a_us, all.b_us, 0.99, 0.03, 1);
  } while (s.verdict == Verdict::kNoDifference &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(90));
  // When the interval is still wider than +-1.5% at the end of the budget, this machine could not
  // resolve 3% in 90 s: "no detectable difference" is then the honest answer (the command prints
  // it with the rounds it would need), not a failure of the detector, so skip, saying why. Seen
  // (2026-12-01) when ctest ran other tests beside this one (RUN_SERIAL was not applied, see
  // tests/CMakeLists.txt): noise 11.6% per round, after 720 rounds ratio 1.014 with 99% CI
  // [0.995, 1.041]; run alone it passed in 5 s. A narrow interval that still contains 1, or any
  // other verdict, fails.
  const double half_width = (s.ci_high - s.ci_low) / 2;
  std::printf("%d rounds, ratio %.4f, 99%% CI [%.4f, %.4f], noise %.3f per round\n", s.rounds, s.ratio, s.ci_low,
              s.ci_high, s.log_ratio_sigma);
  if (s.verdict == Verdict::kNoDifference && half_width > 0.015)
    GTEST_SKIP() << "machine too noisy to resolve 3% within 90 s: " << s.rounds << " rounds, noise " << s.log_ratio_sigma
                 << " per round, ratio " << s.ratio << " CI [" << s.ci_low << ", " << s.ci_high << "] (half-width "
                 << half_width << " > 0.015)";
  EXPECT_EQ(s.verdict, Verdict::kBSlower) << s.rounds << " rounds, ratio " << s.ratio << " CI [" << s.ci_low << ", "
                                          << s.ci_high << "], noise " << s.log_ratio_sigma;
  EXPECT_GT(s.ratio, 1.005);
  // 3% more bytes measured 1.03-1.11x here: the extra linear also pays one more call's dispatch.
  EXPECT_LT(s.ratio, 1.25);
}

TEST(BenchCompare, VariantStrings) {
  const auto v = parse_variant("NVFP4_CUDA_TUNING=a.json  X=1 ./nvfp4 --extra-work 0.03 --model 'my model.json'");
  ASSERT_EQ(v.env.size(), 2u);
  EXPECT_EQ(v.env[0], "NVFP4_CUDA_TUNING=a.json");
  EXPECT_EQ(v.binary, "./nvfp4");
  ASSERT_EQ(v.args.size(), 4u);
  EXPECT_EQ(v.args[3], "my model.json");
  EXPECT_EQ(parse_variant("self").binary, "/proc/self/exe");
  EXPECT_THROW(parse_variant("A=1"), Error);
  EXPECT_THROW(parse_variant("bin 'open"), Error);
  EXPECT_THROW(parse_variant(""), Error);
  EXPECT_THROW(ProcessSampler("/no/such/binary", {}, 1), Error);
}

// A child that dies after its ready line: the next "run" written to it raised SIGPIPE, which
// killed the parent (exit 141) before it said which variant failed. Now the sample is an Error
// naming the variant and the child's exit status. A child that answers garbage at start is
// ended and reaped by the failing constructor (no destructor runs for it).
TEST(BenchCompare, ChildThatDiesIsAnErrorNotASignal) {
  const std::string dir = ::testing::TempDir();
  const std::string dies = dir + "/nvfp4_child_dies.sh", garbled = dir + "/nvfp4_child_garbled.sh";
  {
    std::ofstream(dies) << "#!/bin/sh\necho '{\"ready\": true}'\nexit 3\n";
    std::ofstream(garbled) << "#!/bin/sh\necho 'hello'\nsleep 0.2\n";
  }
  ASSERT_EQ(::chmod(dies.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(garbled.c_str(), 0755), 0);
  ProcessSampler s(dies, {}, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it exit: the write then hits a closed pipe
  try {
    s.sample_us();
    ADD_FAILURE() << "no error for a child that exited";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exited with status 3"), std::string::npos) << e.what();
  }
  try {
    ProcessSampler g(garbled, {}, 1);
    ADD_FAILURE() << "no error for a child without a ready line";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not answer with a ready line (got 'hello')"), std::string::npos) << e.what();
  }
}

TEST(BenchCompare, ServeProtocol) {
  ReplayOptions o = ab_options(0);
  o.plan.layers = 1;
  std::istringstream in("run 2\nbogus\nrun 1\nquit\nrun 5\n");
  std::ostringstream out;
  EXPECT_EQ(serve_replay(o, false, in, out), 0);
  std::istringstream lines(out.str());
  std::string l;
  std::getline(lines, l);
  const auto ready = nlohmann::json::parse(l);
  EXPECT_TRUE(ready["ready"].get<bool>());
  EXPECT_TRUE(ready["validated"].get<bool>());
  std::getline(lines, l);
  EXPECT_EQ(nlohmann::json::parse(l)["us"].size(), 2u);
  std::getline(lines, l);
  EXPECT_TRUE(nlohmann::json::parse(l).contains("error"));
  std::getline(lines, l);
  EXPECT_EQ(nlohmann::json::parse(l)["us"].size(), 1u);
  EXPECT_FALSE(std::getline(lines, l));  // nothing after quit
}

// Two builds: here the same nvfp4 binary twice, driven through `bench --serve`.
TEST(BenchCompare, ChildProcessesThroughTheCli) {
  const char* cli = std::getenv("NVFP4_CLI");
  ASSERT_TRUE(cli && access(cli, X_OK) == 0) << "NVFP4_CLI must name the built nvfp4 binary";
  const std::string model = ::testing::TempDir() + "/ab_child.json";
  std::ofstream(model) << R"({"hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 8,
      "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 2, "vocab_size": 4096})";
  const std::vector<std::string> wl{"--model", model, "--backend", "cpu"};
  ProcessSampler a(cli, wl, 2);
  ProcessSampler b(std::string(cli) + " --extra-work 0.5", wl, 2);
  const auto ra = nlohmann::json::parse(a.ready_line());
  const auto rb = nlohmann::json::parse(b.ready_line());
  EXPECT_TRUE(ra["validated"].get<bool>());
  EXPECT_GT(rb["bytes"].get<double>(), ra["bytes"].get<double>() * 1.3);
  const CompareRun run = run_interleaved(a, b, 6, 1);
  ASSERT_EQ(run.a_us.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_GT(run.a_us[i], 0);
}

// run_processes: every pair made fresh (which side first alternates), rounds tagged by pair.
TEST(BenchCompare, ProcessPairsAreFreshAndTagged) {
  struct Fake final : Sampler {
    explicit Fake(double us) : us_(us) {}
    double sample_us() override { return us_; }
    std::string describe() const override { return "fake"; }
    double us_;
  };
  std::vector<char> made;
  int pairs_seen = 0;
  const CompareRun run = run_processes(
      [&] {
        made.push_back('a');
        return std::make_unique<Fake>(100.0 + static_cast<double>(made.size()));
      },
      [&] {
        made.push_back('b');
        return std::make_unique<Fake>(200.0);
      },
      3, 4, 1, false, [&](int p, Sampler&, Sampler&) { EXPECT_EQ(p, pairs_seen++); });
  EXPECT_EQ(std::string(made.begin(), made.end()), "abbaab");
  EXPECT_EQ(pairs_seen, 3);
  ASSERT_EQ(run.a_us.size(), 12u);
  ASSERT_EQ(run.process.size(), 12u);
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(run.process[i], static_cast<int>(i / 4));
  EXPECT_EQ(run.a_us[0], 101.0);  // pair 0's A was made first
  EXPECT_EQ(run.a_us[4], 104.0);  // pair 1's A was made after its B (the 4th sampler made)
  EXPECT_THROW(run_processes([] { return std::make_unique<Fake>(1.0); }, [] { return std::make_unique<Fake>(1.0); }, 0, 4),
               Error);
}

// `nvfp4 compare` end to end with two process pairs: the JSON names each pair's ready lines,
// its rounds and ratio; the CSV tags each round with its pair.
TEST(BenchCompare, CliWithTwoProcessPairs) {
  const char* cli = std::getenv("NVFP4_CLI");
  ASSERT_TRUE(cli && access(cli, X_OK) == 0) << "NVFP4_CLI must name the built nvfp4 binary";
  const std::string dir = ::testing::TempDir();
  const std::string model = dir + "/ab_pairs.json", json = dir + "/ab_pairs_out.json", csv = dir + "/ab_pairs.csv";
  std::ofstream(model) << R"({"hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 8,
      "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 2, "vocab_size": 4096})";
  const std::string cmd = std::string(cli) + " compare --backend cpu --model " + model +
                          " --a self --b 'self --extra-work 0.5' --processes 2 --rounds 4 --reps 1 --json " + json +
                          " --csv " + csv + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto j = nlohmann::json::parse(std::ifstream(json))["compare"];
  EXPECT_EQ(j["processes"].get<int>(), 2);
  EXPECT_EQ(j["rounds"].get<int>(), 8);
  EXPECT_EQ(j["process"].get<std::vector<int>>(), (std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(j["process_ratios"].size(), 2u);
  EXPECT_EQ(j["workload"]["a_ready"].size(), 2u);
  EXPECT_TRUE(j["workload"]["b_ready"][1]["validated"].get<bool>());
  // B holds 50% more weights (its ready lines say so). Its times are not checked: on 2 cores a
  // 0.5 ms replay in one of two live processes can run 2x slower for that process's life
  // (docs/perf-cpu.md 20), so only the structure is.
  EXPECT_GT(j["workload"]["b_ready"][0]["bytes"].get<double>(), 1.3 * j["workload"]["a_ready"][0]["bytes"].get<double>());
  for (const auto& r : j["process_ratios"]) EXPECT_GT(r.get<double>(), 0);
  std::ifstream c(csv);
  std::string header, row;
  std::getline(c, header);
  EXPECT_EQ(header, "round,process,first,a_us,b_us,ratio");
  for (int i = 0; i < 5; ++i) std::getline(c, row);
  EXPECT_EQ(row.rfind("4,1,A,", 0), 0u) << row;  // round 4 is pair 1's first, A first
}

}  // namespace
}  // namespace nvfp4::bench
