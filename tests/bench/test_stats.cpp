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
