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
//
// The verdict also needs a smallest effect of interest (min_effect, default 0.5%): two processes
// of the *same* build differ by a small, real and stable amount (page placement, which physical
// memory the weights landed in). Measured 2026-11-30 on the H200: A against A, 20 rounds of the
// Llama-3-8B decode replay, B/A = 1.0013 with CI [1.0009, 1.0023] -- a CI that excludes 1 for a
// difference no code change made. So "faster"/"slower" needs the CI to exclude 1 AND the median
// ratio to differ from 1 by at least min_effect; otherwise the verdict is "no detectable
// difference" and the text says how large the (sub-threshold) difference was.
//
// Process pairs. On the 2-core CPU host that placement is not small: in CI (2026-12-01) two
// separately allocated copies of one model measured ~3% apart per unit of work over 1160 rounds,
// so a real 3% change came out at B/A 0.9995 with a 99% CI of [0.994, 1.008]. Rounds cannot see
// that: they all share one placement. So a comparison can run several process pairs (fresh allocations
// each), and then the unit of evidence is the pair: each pair's median log ratio is one
// observation, and the interval is Student's t over them (mean +- t(P-1) * sd / sqrt(P)). With 3
// pairs t is 4.3 at 95%: wide, because 3 placements say little about the next one. Not a bootstrap
// over pairs: with a handful of pairs a percentile bootstrap cannot reach past the observed range
// and its interval is too narrow.
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
  double min_effect = 0.005;           // smallest |ratio - 1| that can make a verdict
  bool below_threshold = false;        // the CI excludes 1 but |ratio - 1| < min_effect
  double effect = 0.02;                // the effect size the power estimate is for (2% = 0.02)
  int rounds_needed = 0;               // rounds to detect `effect` with 80% power
  double detectable_effect = 0;        // smallest effect these rounds detect with 80% power
  // Process pairs (the `process` argument of compare_samples); with >= 2 pairs, ratio and CI are
  // the t interval over pairs, and detectable_effect is for that many pairs.
  int processes = 1;
  std::vector<double> process_ratios;  // per pair, in order of first appearance: median B/A of its rounds
  double process_log_sigma = 0;        // sample sd of log(process_ratios) (>= 2 pairs)
  int processes_needed = 0;            // pairs to detect `effect` with 80% power at that spread (>= 2 pairs)
};

// a[i], b[i]: round i; process[i] (empty: all rounds one pair): the process pair that measured
// it. Deterministic for a given seed (bootstrap resampling).
CompareStats compare_samples(const std::vector<double>& a, const std::vector<double>& b,
                             double confidence = 0.95, double effect = 0.02,
                             std::uint64_t seed = 1, int resamples = 4000, double min_effect = 0.005,
                             const std::vector<int>& process = {});

// Quantile of Student's t distribution with `dof` >= 1 degrees of freedom, p in (0, 1).
double student_t_quantile(double p, int dof);

// Rounds needed so that a true ratio of (1 + effect) gives a CI excluding 1 with probability
// `power`, for per-round log-ratio spread sigma. Uses the large-sample standard error of a median,
// sqrt(pi/2) * sigma / sqrt(n) (normal noise); at least 5.
int rounds_needed(double sigma, double effect, double confidence = 0.95, double power = 0.8);
double detectable_effect(double sigma, int rounds, double confidence = 0.95, double power = 0.8);

}  // namespace nvfp4::bench
