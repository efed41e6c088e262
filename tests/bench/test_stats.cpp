// Statistics of nvfp4 compare on synthetic samples with fixed seeds: the CI covers the truth,
// A vs A is "no difference", a 3% shift is found, and the power estimate is consistent.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "bench/stats.h"
#include "nvfp4/error.h"
#include "test_util.h"

namespace nvfp4::bench {
namespace {

// Rounds with a shared drift (both members of a round), multiplicative noise sigma and a true
// ratio: the pairing must cancel the drift.
void synth(int n, double ratio, double sigma, std::uint64_t seed, std::vector<double>& a, std::vector<double>& b) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, sigma);
  std::uniform_real_distribution<double> drift(0.8, 1.3);
  a.clear();
  b.clear();
  for (int i = 0; i < n; ++i) {
    const double d = 1000 * drift(rng);
    a.push_back(d * std::exp(nd(rng)));
    b.push_back(d * ratio * std::exp(nd(rng)));
  }
}

TEST(BenchStats, MedianQuantileMad) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(quantile({0, 10}, 0.25), 2.5);
  EXPECT_DOUBLE_EQ(mad({1, 2, 3, 4, 100}), 1);
  EXPECT_THROW(median({}), Error);
  EXPECT_NEAR(normal_quantile(0.975), 1.959964, 1e-5);
  EXPECT_NEAR(normal_quantile(0.8), 0.841621, 1e-5);
}

TEST(BenchStats, AVersusAIsNoDifference) {
  int false_positives = 0;
  for (int t = 0; t < 200; ++t) {
    const std::uint64_t seed = test::base_seed() + t;
    SCOPED_TRACE(test::seed_note(seed));
    std::vector<double> a, b;
    synth(30, 1.0, 0.02, seed, a, b);
    const auto s = compare_samples(a, b, 0.95, 0.02, seed);
    EXPECT_LE(s.ci_low, s.ratio);
    EXPECT_GE(s.ci_high, s.ratio);
    false_positives += s.verdict != Verdict::kNoDifference;
  }
  // Nominal 5%; the percentile bootstrap of a median at n=30 runs a little liberal. 200 trials:
  // more than 20 (10%) would mean a broken interval.
  EXPECT_LE(false_positives, 20);
}

TEST(BenchStats, DetectsThreePercentDespiteDrift) {
  int found = 0;
  for (int t = 0; t < 50; ++t) {
    const std::uint64_t seed = test::base_seed() * 3 + t;
    SCOPED_TRACE(test::seed_note(seed));
    std::vector<double> a, b;
    // Drift of +-25% between rounds, 1% noise within: unpaired medians could not see 3%.
    synth(30, 1.03, 0.01, seed, a, b);
    const auto s = compare_samples(a, b, 0.95, 0.02, seed);
    EXPECT_NEAR(s.ratio, 1.03, 0.01);
    found += s.verdict == Verdict::kBSlower;
  }
  EXPECT_GE(found, 49);
  std::vector<double> a, b;
  synth(30, 1 / 1.03, 0.01, 7, a, b);
  EXPECT_EQ(compare_samples(a, b).verdict, Verdict::kBFaster);
}

TEST(BenchStats, SmallStableDifferenceIsBelowTheThreshold) {
  // The H200 A-against-A run of 2026-11-30: two processes of one build, B/A = 1.0013 with a CI
  // excluding 1 (per-round noise 0.16%). That is not a verdict-worthy difference (bench/stats.h).
  std::vector<double> a, b;
  synth(20, 1.0013, 0.0016, 11, a, b);
  const auto s = compare_samples(a, b, 0.95, 0.02, 11);
  EXPECT_GT(s.ci_low, 1.0);  // the interval alone would say "slower"
  EXPECT_EQ(s.verdict, Verdict::kNoDifference);
  EXPECT_TRUE(s.below_threshold);
  // With the threshold off the same samples are "slower"; a 2% change still is with it on.
  EXPECT_EQ(compare_samples(a, b, 0.95, 0.02, 11, 4000, 0.0).verdict, Verdict::kBSlower);
  synth(20, 1.02, 0.0016, 12, a, b);
  EXPECT_EQ(compare_samples(a, b, 0.95, 0.02, 12).verdict, Verdict::kBSlower);
  EXPECT_THROW(compare_samples(a, b, 0.95, 0.02, 12, 4000, -1.0), Error);
}

TEST(BenchStats, CoverageOfTheInterval) {
  // The 95% CI should contain the true ratio most of the time.
  int covered = 0;
  for (int t = 0; t < 200; ++t) {
    std::vector<double> a, b;
    synth(40, 1.02, 0.03, 1000 + t, a, b);
    const auto s = compare_samples(a, b, 0.95, 0.02, t);
    covered += s.ci_low <= 1.02 && 1.02 <= s.ci_high;
  }
  EXPECT_GE(covered, 170);  // >= 85%
}

TEST(BenchStats, RoundsNeededMatchesPower) {
  // sigma 3% per round, effect 2%: n = ((1.96 + 0.84) * sqrt(pi/2) * 0.03 / log 1.02)^2 = 28.3 -> 29.
  const int n = rounds_needed(0.03, 0.02);
  EXPECT_EQ(n, 29);
  EXPECT_NEAR(detectable_effect(0.03, n), 0.02, 0.002);
  // Empirically: with that many rounds a true 2% effect is detected in roughly 80% of trials.
  // synth's sigma is per member of a round; the ratio's spread is sqrt(2) times that.
  int found = 0;
  for (int t = 0; t < 100; ++t) {
    std::vector<double> a, b;
    synth(n, 1.02, 0.03 / std::sqrt(2.0), 5000 + t, a, b);
    found += compare_samples(a, b, 0.95, 0.02, t).verdict == Verdict::kBSlower;
  }
  EXPECT_GE(found, 60);
  EXPECT_EQ(rounds_needed(1e-9, 0.02), 5);
  EXPECT_THROW(rounds_needed(0.01, 0), Error);
}

TEST(BenchStats, StudentTQuantiles) {
  // Table values (two-sided 95% / 99% / one-sided 80%), and the normal limit.
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.7062, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.3027, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.7764, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 10), 2.2281, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.995, 3), 5.8409, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.8, 2), 1.0607, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.025, 4), -2.7764, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.975, 2000), normal_quantile(0.975), 2e-3);
  EXPECT_THROW(student_t_quantile(1.0, 3), Error);
  EXPECT_THROW(student_t_quantile(0.9, 0), Error);
}

// Process pairs with a placement offset each (a fixed factor on B/A for all rounds of the pair)
// plus shared drift and per-round noise, as measured on the CPU host (bench/stats.h).
void synth_pairs(const std::vector<double>& offsets, int rounds, double ratio, double sigma, std::uint64_t seed,
                 std::vector<double>& a, std::vector<double>& b, std::vector<int>& process) {
  a.clear();
  b.clear();
  process.clear();
  for (std::size_t p = 0; p < offsets.size(); ++p) {
    std::vector<double> pa, pb;
    synth(rounds, ratio * offsets[p], sigma, seed * 131 + p, pa, pb);
    a.insert(a.end(), pa.begin(), pa.end());
    b.insert(b.end(), pb.begin(), pb.end());
    process.insert(process.end(), pa.size(), static_cast<int>(p));
  }
}

TEST(BenchStats, ProcessPairsCoverPlacement) {
  const std::uint64_t seed = test::base_seed() + 77;
  SCOPED_TRACE(test::seed_note(seed));
  std::vector<double> a, b;
  std::vector<int> proc;
  // A against A, but every pair's placement differs by up to 3%; 200 rounds each, low noise.
  synth_pairs({1.03, 0.975, 1.02, 0.985}, 200, 1.0, 0.01, seed, a, b, proc);
  // One pair's evidence alone is confidently wrong: pair 0 reads as "B is slower".
  const std::vector<double> a0(a.begin(), a.begin() + 200), b0(b.begin(), b.begin() + 200);
  EXPECT_EQ(compare_samples(a0, b0, 0.95, 0.02, seed).verdict, Verdict::kBSlower);
  // The pairs together: no difference, an interval wider than the placement spread, each pair listed.
  const auto s = compare_samples(a, b, 0.95, 0.02, seed, 4000, 0.005, proc);
  EXPECT_EQ(s.processes, 4);
  ASSERT_EQ(s.process_ratios.size(), 4u);
  EXPECT_NEAR(s.process_ratios[0], 1.03, 0.006);
  EXPECT_NEAR(s.process_ratios[1], 0.975, 0.006);
  EXPECT_EQ(s.verdict, Verdict::kNoDifference) << s.ratio << " [" << s.ci_low << ", " << s.ci_high << "]";
  EXPECT_LT(s.ci_low, 0.985);
  EXPECT_GT(s.ci_high, 1.015);
  EXPECT_GT(s.process_log_sigma, 0.02);
  EXPECT_GT(s.processes_needed, 4);
  // A real 8% beside the same placement spread is found, and the point estimate is its
  // geometric mean over pairs.
  synth_pairs({1.03, 0.975, 1.02, 0.985}, 200, 1.08, 0.01, seed + 1, a, b, proc);
  const auto t = compare_samples(a, b, 0.95, 0.02, seed, 4000, 0.005, proc);
  EXPECT_EQ(t.verdict, Verdict::kBSlower) << t.ratio << " [" << t.ci_low << ", " << t.ci_high << "]";
  EXPECT_NEAR(t.ratio, 1.08 * std::pow(1.03 * 0.975 * 1.02 * 0.985, 0.25), 0.004);
  // One process id for every round is the single-pair statistic, unchanged.
  const std::vector<int> one(a.size(), 0);
  const auto u = compare_samples(a, b, 0.95, 0.02, seed, 4000, 0.005, one), v = compare_samples(a, b, 0.95, 0.02, seed);
  EXPECT_EQ(u.processes, 1);
  EXPECT_DOUBLE_EQ(u.ci_low, v.ci_low);
  EXPECT_DOUBLE_EQ(u.ratio, v.ratio);
  EXPECT_THROW(compare_samples(a, b, 0.95, 0.02, seed, 4000, 0.005, std::vector<int>(3, 0)), Error);
}

TEST(BenchStats, ProcessPairIntervalCoverage) {
  // Placement offsets drawn at random (sd 2%), 3 pairs of 30 rounds: the 95% t interval should
  // hold the true ratio in about 95% of trials; the single-pair bootstrap, blind to placement,
  // far less often.
  int covered = 0, covered_one = 0;
  const std::uint64_t seed0 = test::base_seed() * 7;
  SCOPED_TRACE(test::seed_note(seed0));
  for (int t = 0; t < 200; ++t) {
    std::mt19937_64 rng(seed0 + t);
    std::normal_distribution<double> place(0, 0.02);
    std::vector<double> off;
    for (int p = 0; p < 3; ++p) off.push_back(std::exp(place(rng)));
    std::vector<double> a, b;
    std::vector<int> proc;
    synth_pairs(off, 30, 1.0, 0.01, seed0 + t, a, b, proc);
    const auto s = compare_samples(a, b, 0.95, 0.02, t, 1000, 0.005, proc);
    covered += s.ci_low <= 1 && 1 <= s.ci_high;
    const auto s1 = compare_samples(a, b, 0.95, 0.02, t, 1000, 0.005);
    covered_one += s1.ci_low <= 1 && 1 <= s1.ci_high;
  }
  EXPECT_GE(covered, 180);      // >= 90%
  EXPECT_LE(covered_one, 120);  // placement makes the pooled rounds' interval miss often
}

TEST(BenchStats, BadInputNamesTheOp) {
  EXPECT_THROW(compare_samples({1}, {1}), Error);
  EXPECT_THROW(compare_samples({1, 2}, {1}), Error);
  try {
    compare_samples({1, -2}, {1, 1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[compare]"), std::string::npos);
  }
  EXPECT_THROW(compare_samples({1, 2}, {1, NAN}), Error);
}

}  // namespace
}  // namespace nvfp4::bench
