// bench/svg.cpp -- hand-written SVG (no dependency): elements, a roofline and an A/B plot.
#include "bench/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace nvfp4::bench {

std::string svg_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

Svg::Svg(double w, double h) : w_(w), h_(h) {}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& stroke, double width, const std::string& dash) {
  body_ += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"{}\"{}/>\n",
                       x1, y1, x2, y2, stroke, width, dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"");
}

void Svg::rect(double x, double y, double w, double h, const std::string& fill, const std::string& stroke, double op) {
  body_ += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" stroke=\"{}\" fill-opacity=\"{}\"/>\n",
                       x, y, std::max(0.0, w), std::max(0.0, h), fill, stroke, op);
}

void Svg::circle(double cx, double cy, double r, const std::string& fill, double op) {
  body_ += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" fill-opacity=\"{}\"/>\n", cx, cy, r, fill, op);
}

void Svg::text(double x, double y, const std::string& s, double size, const std::string& anchor, const std::string& fill,
               double rotate, bool bold) {
  body_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"{}\" text-anchor=\"{}\" fill=\"{}\"{}{}>{}</text>\n", x, y,
                       size, anchor, fill,
                       rotate != 0 ? fmt::format(" transform=\"rotate({} {:.1f} {:.1f})\"", rotate, x, y) : "",
                       bold ? " font-weight=\"bold\"" : "", svg_escape(s));
}

std::string Svg::str() const {
  return fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                     "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{2}</svg>\n",
                     w_, h_, body_);
}

namespace {

const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

std::string nice(double v) {
  if (v >= 1e6) return fmt::format("{:.0f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.0f}k", v / 1e3);
  if (v >= 1) return fmt::format("{:.0f}", v);
  return fmt::format("{:g}", v);
}

}  // namespace

std::string roofline_svg(const std::vector<RooflinePoint>& pts, double bw, double peak, const std::string& title) {
  const double W = 900, H = 560, L = 80, R = 250, T = 50, B = 60;
  Svg s(W, H);
  double xmin = 1e30, xmax = 0, ymin = 1e30, ymax = 0;
  for (const auto& p : pts) {
    if (!(p.intensity > 0 && p.gflops > 0)) continue;
    xmin = std::min(xmin, p.intensity);
    xmax = std::max(xmax, p.intensity);
    ymin = std::min(ymin, p.gflops);
    ymax = std::max(ymax, p.gflops);
  }
  if (xmax == 0) xmin = 0.1, xmax = 10, ymin = 1, ymax = 100;
  if (bw > 0) ymax = std::max(ymax, std::min(bw * xmax, peak > 0 ? peak : 1e30));
  if (peak > 0) ymax = std::max(ymax, peak);
  const double lx0 = std::floor(std::log10(xmin)) , lx1 = std::ceil(std::log10(xmax) + 1e-9);
  const double ly0 = std::floor(std::log10(ymin)), ly1 = std::ceil(std::log10(ymax) + 1e-9);
  auto X = [&](double v) { return L + (std::log10(v) - lx0) / std::max(1.0, lx1 - lx0) * (W - L - R); };
  auto Y = [&](double v) { return H - B - (std::log10(v) - ly0) / std::max(1.0, ly1 - ly0) * (H - T - B); };
  s.text(W / 2 - R / 2 + L / 2, 28, title, 16, "middle", "#222", 0, true);
  // Grid and ticks at powers of ten.
  for (double e = lx0; e <= std::max(lx1, lx0 + 1); ++e) {
    const double x = X(std::pow(10, e));
    s.line(x, T, x, H - B, "#e5e5e5");
    s.text(x, H - B + 18, nice(std::pow(10, e)), 11, "middle");
  }
  for (double e = ly0; e <= std::max(ly1, ly0 + 1); ++e) {
    const double y = Y(std::pow(10, e));
    s.line(L, y, W - R, y, "#e5e5e5");
    s.text(L - 6, y + 4, nice(std::pow(10, e)), 11, "end");
  }
  s.line(L, H - B, W - R, H - B, "#444");
  s.line(L, T, L, H - B, "#444");
  s.text((L + W - R) / 2, H - 18, "arithmetic intensity (flop / byte moved)", 13, "middle");
  s.text(22, (T + H - B) / 2, "achieved GFLOP/s", 13, "middle", "#222", -90);
  // Bandwidth roof: GFLOP/s = GB/s * flop/byte, clipped to the plot.
  const double xa = std::pow(10, lx0), xb = std::pow(10, std::max(lx1, lx0 + 1));
  if (bw > 0) {
    double x1 = xb;
    if (peak > 0) x1 = std::min(x1, peak / bw);
    const double ytop = std::pow(10, std::max(ly1, ly0 + 1));
    x1 = std::min(x1, ytop / bw);
    double x0 = std::max(xa, std::pow(10, ly0) / bw);
    s.line(X(x0), Y(bw * x0), X(x1), Y(bw * x1), "#555", 2, "6,4");
    s.text(X(x0) + 8, Y(bw * x0) - 8, fmt::format("measured ceiling {:.0f} GB/s", bw), 11, "start", "#555", 0);
  }
  if (peak > 0) {
    s.line(X(peak / bw), Y(peak), X(xb), Y(peak), "#555", 2, "6,4");
    s.text(X(xb) - 4, Y(peak) - 6, fmt::format("compute roof {:.0f} GFLOP/s", peak), 11, "end", "#555");
  }
  // Points and the legend.
  double ly = T + 10;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const auto& p = pts[i];
    if (!(p.intensity > 0 && p.gflops > 0)) continue;
    const std::string col = kPalette[i % 8];
    if (p.dense) s.rect(X(p.intensity) - 5, Y(p.gflops) - 5, 10, 10, col);
    else s.circle(X(p.intensity), Y(p.gflops), 6, col);
    if (p.dense) s.rect(W - R + 20, ly - 9, 10, 10, col);
    else s.circle(W - R + 25, ly - 4, 5, col);
    const double pct = bw > 0 ? 100 * p.gflops / (bw * p.intensity) : 0;
    s.text(W - R + 36, ly, p.label, 11);
    s.text(W - R + 36, ly + 13, bw > 0 ? fmt::format("{:.3g} GFLOP/s, {:.0f}% of the roof", p.gflops, pct)
                                        : fmt::format("{:.3g} GFLOP/s", p.gflops), 10, "start", "#666");
    ly += 32;
  }
  s.text(W - R + 20, H - B + 18, "circle NVFP4, square dense baseline", 10, "start", "#666");
  return s.str();
}

namespace {

// One box-and-strip column of values on axis Y at centre x.
template <class FY>
void strip(Svg& s, const std::vector<double>& v, double x, FY Y, const std::string& col) {
  if (v.empty()) return;
  const double q1 = quantile(v, 0.25), q2 = quantile(v, 0.5), q3 = quantile(v, 0.75);
  const double p10 = quantile(v, 0.1), p90 = quantile(v, 0.9);
  s.line(x, Y(p10), x, Y(q1), col, 1.5);
  s.line(x, Y(q3), x, Y(p90), col, 1.5);
  s.line(x - 12, Y(p10), x + 12, Y(p10), col, 1.5);
  s.line(x - 12, Y(p90), x + 12, Y(p90), col, 1.5);
  s.rect(x - 30, Y(q3), 60, Y(q1) - Y(q3), col, col, 0.15);
  s.line(x - 30, Y(q2), x + 30, Y(q2), col, 3);
  // Deterministic jitter (golden-ratio sequence): the same data draws the same picture.
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double j = std::fmod(static_cast<double>(i) * 0.6180339887, 1.0) - 0.5;
    s.circle(x + 50 + j * 30, Y(v[i]), 3, col, 0.6);
  }
}

}  // namespace

std::string ab_svg(const std::vector<double>& a, const std::vector<double>& b, const CompareStats& st,
                   const std::string& an, const std::string& bn, const std::string& title) {
  const double W = 900, H = 520, T = 60, Bm = 70;
  Svg s(W, H);
  s.text(W / 2, 26, title, 16, "middle", "#222", 0, true);
  s.text(W / 2, 46, fmt::format("{} rounds, A B B A order; verdict: {}", st.rounds, verdict_text(st.verdict)), 12, "middle", "#444");
  // Left panel: times.
  {
    const double L = 80, R = 470;
    double lo = 1e300, hi = 0;
    for (double v : a) lo = std::min(lo, v), hi = std::max(hi, v);
    for (double v : b) lo = std::min(lo, v), hi = std::max(hi, v);
    if (!(hi > lo)) hi = lo * 1.01 + 1e-9, lo = lo * 0.99;
    const double pad = (hi - lo) * 0.08;
    lo -= pad, hi += pad;
    auto Y = [&](double v) { return H - Bm - (v - lo) / (hi - lo) * (H - T - Bm - 20); };
    for (int i = 0; i <= 5; ++i) {
      const double v = lo + (hi - lo) * i / 5;
      s.line(L, Y(v), R, Y(v), "#eeeeee");
      s.text(L - 6, Y(v) + 4, fmt::format("{:.4g}", v / 1e3), 11, "end");
    }
    s.line(L, T + 20, L, H - Bm, "#444");
    s.line(L, H - Bm, R, H - Bm, "#444");
    s.text(22, (T + H - Bm) / 2, "time per sample (ms)", 13, "middle", "#222", -90);
    strip(s, a, L + 90, Y, kPalette[0]);
    strip(s, b, L + 270, Y, kPalette[1]);
    s.text(L + 110, H - Bm + 20, "A: " + an.substr(0, 40), 11, "middle", kPalette[0]);
    s.text(L + 290, H - Bm + 20, "B: " + bn.substr(0, 40), 11, "middle", kPalette[1]);
    s.text(L + 110, H - Bm + 40, fmt::format("median A {:.4g} ms, B {:.4g} ms", st.median_a / 1e3, st.median_b / 1e3), 11, "start", "#444");
  }
  // Right panel: per-round ratios.
  {
    const double L = 560, R = 860;
    std::vector<double> r;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) r.push_back(b[i] / a[i]);
    double lo = std::min({1.0, st.ci_low, r.empty() ? 1.0 : *std::min_element(r.begin(), r.end())});
    double hi = std::max({1.0, st.ci_high, r.empty() ? 1.0 : *std::max_element(r.begin(), r.end())});
    const double pad = std::max(1e-3, (hi - lo) * 0.08);
    lo -= pad, hi += pad;
    auto Y = [&](double v) { return H - Bm - (v - lo) / (hi - lo) * (H - T - Bm - 20); };
    for (int i = 0; i <= 5; ++i) {
      const double v = lo + (hi - lo) * i / 5;
      s.line(L, Y(v), R, Y(v), "#eeeeee");
      s.text(L - 6, Y(v) + 4, fmt::format("{:.3f}", v), 11, "end");
    }
    s.line(L, T + 20, L, H - Bm, "#444");
    s.line(L, H - Bm, R, H - Bm, "#444");
    s.text(L - 50, (T + H - Bm) / 2, "B / A per round", 13, "middle", "#222", -90);
    const double cx = (L + R) / 2;
    s.rect(L + 10, Y(st.ci_high), R - L - 20, Y(st.ci_low) - Y(st.ci_high), "#2ca02c", "none", 0.18);
    s.line(L, Y(1.0), R, Y(1.0), "#444", 1.5, "5,4");
    s.text(R - 4, Y(1.0) - 4, "no difference", 10, "end", "#444");
    for (std::size_t i = 0; i < r.size(); ++i) {
      const double j = std::fmod(static_cast<double>(i) * 0.6180339887, 1.0) - 0.5;
      s.circle(cx + j * 160, Y(r[i]), 3, "#9467bd", 0.65);
    }
    s.line(L + 10, Y(st.ratio), R - 10, Y(st.ratio), "#2ca02c", 3);
    s.text(cx, H - Bm + 20, fmt::format("median {:.4f}, {:.0f}% CI [{:.4f}, {:.4f}]", st.ratio, st.confidence * 100,
                                        st.ci_low, st.ci_high), 11, "middle", "#2ca02c");
    s.text(cx, H - Bm + 38, fmt::format("rounds to detect {:.1f}%: {}", st.effect * 100, st.rounds_needed), 11, "middle", "#444");
  }
  return s.str();
}

}  // namespace nvfp4::bench
