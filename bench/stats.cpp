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

double student_t_quantile(double p, int dof) {
  if (!(p > 0 && p < 1)) fail("stats", "student_t_quantile p=" + std::to_string(p) + " outside (0, 1)");
  if (dof < 1) fail("stats", "student_t_quantile dof=" + std::to_string(dof) + " must be >= 1");
  if (p < 0.5) return -student_t_quantile(1 - p, dof);
  // F(x) = 1/2 + c sqrt(nu) * integral_0^atan(x / sqrt(nu)) cos^(nu-1)(u) du (substituting
  // x = sqrt(nu) tan u in the density c (1 + x^2/nu)^(-(nu+1)/2)): a smooth integrand on a finite
  // interval, so composite Simpson is accurate to ~1e-12 with 2048 panels. The quantile is the
  // angle where the integral reaches p - 1/2, found by bisection, then mapped back to x.
  const double nu = dof;
  const double c = std::exp(std::lgamma((nu + 1) / 2) - std::lgamma(nu / 2)) / std::sqrt(nu * M_PI);
  const auto mass = [&](double theta) {  // F(sqrt(nu) tan theta) - 1/2
    const int n = 2048;
    const double h = theta / n;
    double sum = 1 + std::pow(std::cos(theta), nu - 1);
    for (int i = 1; i < n; ++i) sum += (i % 2 ? 4 : 2) * std::pow(std::cos(i * h), nu - 1);
    return c * std::sqrt(nu) * sum * h / 3;
  };
  double lo = 0, hi = M_PI / 2;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (mass(mid) < p - 0.5 ? lo : hi) = mid;
  }
  return std::sqrt(nu) * std::tan(0.5 * (lo + hi));
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

namespace {

// The verdict rule of stats.h: the CI excludes 1 and |ratio - 1| >= min_effect.
void set_verdict(CompareStats& s) {
  const bool excludes_one = s.ci_high < 1 || s.ci_low > 1;
  if (excludes_one && std::fabs(s.ratio - 1) >= s.min_effect) {
    s.verdict = s.ci_high < 1 ? Verdict::kBFaster : Verdict::kBSlower;
  } else {
    s.below_threshold = excludes_one;
  }
}

// Per-round log ratios grouped by process pair, pairs in order of first appearance (no ids: one pair).
std::vector<std::vector<double>> by_pair(const std::vector<double>& lr, const std::vector<int>& process) {
  if (process.empty()) return {lr};
  std::vector<int> ids;
  std::vector<std::vector<double>> by;
  for (std::size_t i = 0; i < lr.size(); ++i) {
    const auto it = std::find(ids.begin(), ids.end(), process[i]);
    if (it == ids.end()) {
      ids.push_back(process[i]);
      by.push_back({lr[i]});
    } else {
      by[static_cast<std::size_t>(it - ids.begin())].push_back(lr[i]);
    }
  }
  return by;
}

// One pair: percentile bootstrap of the median over rounds (pairs stay together).
void bootstrap_interval(CompareStats& s, const std::vector<double>& lr, std::uint64_t seed, int resamples) {
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
  const double alpha = 1 - s.confidence;
  s.ci_low = std::exp(quantile(meds, alpha / 2));
  s.ci_high = std::exp(quantile(meds, 1 - alpha / 2));
}

// Several process pairs: one observation per pair (the median log ratio of its rounds), Student's
// t interval over them (stats.h says why). The per-round figures stay as computed.
void pairs_interval(CompareStats& s, const std::vector<std::vector<double>>& by) {
  const int P = static_cast<int>(by.size());
  std::vector<double> m;
  for (const auto& v : by) m.push_back(median(v));
  double mean = 0;
  for (double x : m) mean += x;
  mean /= P;
  double ss = 0;
  for (double x : m) ss += (x - mean) * (x - mean);
  const double sd = std::sqrt(ss / (P - 1)), se = sd / std::sqrt(static_cast<double>(P));
  const double t = student_t_quantile(0.5 + s.confidence / 2, P - 1);
  s.ratio = std::exp(mean);
  s.ci_low = std::exp(mean - t * se);
  s.ci_high = std::exp(mean + t * se);
  for (double x : m) s.process_ratios.push_back(std::exp(x));
  s.process_log_sigma = sd;
  const double z = normal_quantile(0.5 + s.confidence / 2) + normal_quantile(0.8);
  const double sdf = sd > 0 ? sd : 1e-6;
  s.processes_needed = std::max(2, static_cast<int>(std::ceil(std::pow(z * sdf / std::log1p(s.effect), 2))));
  s.detectable_effect = std::expm1((t + student_t_quantile(0.8, P - 1)) * se);
}

}  // namespace

CompareStats compare_samples(const std::vector<double>& a, const std::vector<double>& b, double confidence,
                             double effect, std::uint64_t seed, int resamples, double min_effect,
                             const std::vector<int>& process) {
  if (!process.empty() && process.size() != a.size())
    fail("compare", "process ids: " + std::to_string(process.size()) + " for " + std::to_string(a.size()) + " rounds");
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

  s.min_effect = min_effect;
  // A sample spread of exactly 0 (identical times) still needs a floor for the power estimate.
  const double sigma = s.log_ratio_sigma > 0 ? s.log_ratio_sigma : 1e-6;
  s.rounds_needed = rounds_needed(sigma, effect, confidence);
  s.detectable_effect = detectable_effect(sigma, s.rounds, confidence);
  const std::vector<std::vector<double>> pairs = by_pair(lr, process);
  s.processes = static_cast<int>(pairs.size());
  if (s.processes > 1)
    pairs_interval(s, pairs);
  else
    bootstrap_interval(s, lr, seed, resamples);
  set_verdict(s);
  return s;
}

}  // namespace nvfp4::bench
