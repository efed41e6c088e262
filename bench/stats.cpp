// bench/stats.cpp -- medians, bootstrap CI and power for A/B comparison. See stats.h for why.
#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "nvfp4/error.h"

namespace nvfp4::bench {

double median(std::vector<double> v) { return quantile(std::move(v), 0.5); }

double quantile(std::vector<double> v, double q) {
  if (v.empty()) fail("stats", "quantile of an empty sample");
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

double mad(const std::vector<double>& v) {
  const double m = median(v);
  std::vector<double> d;
  d.reserve(v.size());
  for (double x : v) d.push_back(std::fabs(x - m));
  return median(d);
}

double normal_quantile(double p) {
  if (!(p > 0 && p < 1)) fail("stats", "normal_quantile p=" + std::to_string(p) + " outside (0, 1)");
  // Bisection on the exact CDF 0.5 * erfc(-x / sqrt 2): 200 halvings of [-40, 40] reach double precision.
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

const char* verdict_text(Verdict v) {
  switch (v) {
    case Verdict::kBFaster: return "B is faster";
    case Verdict::kBSlower: return "B is slower";
    default: return "no detectable difference";
  }
}

int rounds_needed(double sigma, double effect, double confidence, double power) {
  if (!(effect > 0)) fail("stats", "effect size " + std::to_string(effect) + " must be > 0");
  const double z = normal_quantile(0.5 + confidence / 2) + normal_quantile(power);
  const double se1 = std::sqrt(M_PI / 2) * sigma;  // standard error of a median of 1 round
  const double n = std::pow(z * se1 / std::log1p(effect), 2);
  return std::max(5, static_cast<int>(std::ceil(n)));
}

double detectable_effect(double sigma, int rounds, double confidence, double power) {
  if (rounds <= 0) return INFINITY;
  const double z = normal_quantile(0.5 + confidence / 2) + normal_quantile(power);
  return std::expm1(z * std::sqrt(M_PI / 2) * sigma / std::sqrt(static_cast<double>(rounds)));
}

CompareStats compare_samples(const std::vector<double>& a, const std::vector<double>& b, double confidence,
                             double effect, std::uint64_t seed, int resamples, double min_effect) {
  if (a.size() != b.size() || a.size() < 2)
    fail("compare", "need the same number (>= 2) of A and B samples, got " + std::to_string(a.size()) + " and " +
                        std::to_string(b.size()));
  if (!(min_effect >= 0 && min_effect < 1)) fail("compare", "min_effect " + std::to_string(min_effect) + " outside [0, 1)");
  if (!(confidence > 0.5 && confidence < 1)) fail("compare", "confidence " + std::to_string(confidence) + " outside (0.5, 1)");
  std::vector<double> lr;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] > 0) || !(b[i] > 0) || !std::isfinite(a[i]) || !std::isfinite(b[i]))
      fail("compare", "round " + std::to_string(i) + " has a non-positive or non-finite time (A=" + std::to_string(a[i]) +
                          ", B=" + std::to_string(b[i]) + ")");
    lr.push_back(std::log(b[i] / a[i]));
  }
  CompareStats s;
  s.rounds = static_cast<int>(a.size());
  s.confidence = confidence;
  s.effect = effect;
  s.median_a = median(a);
  s.median_b = median(b);
  s.ratio_of_medians = s.median_b / s.median_a;
  s.ratio = std::exp(median(lr));
  s.log_ratio_sigma = 1.4826 * mad(lr);

  // Percentile bootstrap over rounds (pairs stay together).
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, lr.size() - 1);
  std::vector<double> meds(static_cast<std::size_t>(resamples)), tmp(lr.size());
  for (auto& m : meds) {
    for (auto& t : tmp) t = lr[pick(rng)];
    const std::size_t h = tmp.size() / 2;
    std::nth_element(tmp.begin(), tmp.begin() + static_cast<std::ptrdiff_t>(h), tmp.end());
    if (tmp.size() % 2) {
      m = tmp[h];
    } else {
      const double hi = tmp[h];
      m = 0.5 * (hi + *std::max_element(tmp.begin(), tmp.begin() + static_cast<std::ptrdiff_t>(h)));
    }
  }
  const double alpha = 1 - confidence;
  s.ci_low = std::exp(quantile(meds, alpha / 2));
  s.ci_high = std::exp(quantile(meds, 1 - alpha / 2));
  s.min_effect = min_effect;
  const bool excludes_one = s.ci_high < 1 || s.ci_low > 1;
  if (excludes_one && std::fabs(s.ratio - 1) >= min_effect) {
    s.verdict = s.ci_high < 1 ? Verdict::kBFaster : Verdict::kBSlower;
  } else {
    s.below_threshold = excludes_one;
  }
  // A sample spread of exactly 0 (identical times) still needs a floor for the power estimate:
  // use the bootstrap width, which is 0 only when every round agrees.
  const double sigma = s.log_ratio_sigma > 0 ? s.log_ratio_sigma : 1e-6;
  s.rounds_needed = rounds_needed(sigma, effect, confidence);
  s.detectable_effect = detectable_effect(sigma, s.rounds, confidence);
  return s;
}

}  // namespace nvfp4::bench
