// bench/stats.h -- the statistics behind `nvfp4 compare`: is B's time different from A's?
//
// Samples come in rounds: each round has one A time and one B time taken back to back (the
// runner alternates A B B A ...). The statistic is the median of the per-round ratios B/A,
// with a percentile bootstrap confidence interval over rounds.
//
// Why per-round ratios and not the ratio of the two medians: a shared machine drifts (other
// tenants, clocks, page cache) on time scales longer than a round. Both members of a round see
// the same drift, so their ratio cancels it, and resampling whole rounds keeps that pairing in
// the bootstrap; the ratio of medians would count drift as noise (wider CI) or, if the drift
// lines up with the schedule, as a difference. The median, not the mean, because preemption
// makes the noise one-sided and heavy-tailed: one descheduled sample moves a mean, not a median.
// The ratio of medians is still reported for reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nvfp4::bench {

double median(std::vector<double> v);
double quantile(std::vector<double> v, double q);  // linear interpolation, q in [0, 1]
double mad(const std::vector<double>& v);         // median absolute deviation (unscaled)
double normal_quantile(double p);                 // inverse standard normal CDF, p in (0, 1)

enum class Verdict { kNoDifference, kBFaster, kBSlower };
const char* verdict_text(Verdict v);  // "no detectable difference", "B is faster", "B is slower"

struct CompareStats {
  int rounds = 0;
  double median_a = 0, median_b = 0;  // of the raw samples (us)
  double ratio = 1;                    // median over rounds of b_i / a_i  (< 1: B faster)
  double ci_low = 1, ci_high = 1;      // bootstrap CI of `ratio`
  double confidence = 0.95;
  double ratio_of_medians = 1;         // median(b) / median(a), for reference
  double log_ratio_sigma = 0;          // robust spread of log(b_i / a_i): 1.4826 * MAD
  Verdict verdict = Verdict::kNoDifference;
  double effect = 0.02;                // the effect size the power estimate is for (2% = 0.02)
  int rounds_needed = 0;               // rounds to detect `effect` with 80% power
  double detectable_effect = 0;        // smallest effect these rounds detect with 80% power
};

// a[i], b[i]: round i. Deterministic for a given seed (bootstrap resampling).
CompareStats compare_samples(const std::vector<double>& a, const std::vector<double>& b,
                             double confidence = 0.95, double effect = 0.02,
                             std::uint64_t seed = 1, int resamples = 4000);

// Rounds needed so that a true ratio of (1 + effect) gives a CI excluding 1 with probability
// `power`, for per-round log-ratio spread sigma. Uses the large-sample standard error of a median,
// sqrt(pi/2) * sigma / sqrt(n) (normal noise); at least 5.
int rounds_needed(double sigma, double effect, double confidence = 0.95, double power = 0.8);
double detectable_effect(double sigma, int rounds, double confidence = 0.95, double power = 0.8);

}  // namespace nvfp4::bench
