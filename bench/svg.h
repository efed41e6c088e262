// bench/svg.h -- a small SVG writer and the two plots of a benchmark report: the roofline
// (where each kernel sits against the measured bandwidth ceiling) and the A/B distributions.
#pragma once

#include <string>
#include <vector>

#include "bench/stats.h"

namespace nvfp4::bench {

class Svg {
 public:
  Svg(double width, double height);
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1,
            const std::string& dash = "");
  void rect(double x, double y, double w, double h, const std::string& fill, const std::string& stroke = "none",
            double opacity = 1);
  void circle(double cx, double cy, double r, const std::string& fill, double opacity = 1);
  // anchor: "start", "middle", "end"; rotate in degrees around (x, y).
  void text(double x, double y, const std::string& s, double size = 12, const std::string& anchor = "start",
            const std::string& fill = "#222", double rotate = 0, bool bold = false);
  std::string str() const;

 private:
  double w_, h_;
  std::string body_;
};

std::string svg_escape(const std::string& s);

struct RooflinePoint {
  std::string label;
  double intensity = 0;  // flop per byte moved
  double gflops = 0;     // achieved
  bool dense = false;    // baseline (drawn as a square) or NVFP4 (circle)
};

// Log-log roofline: x flop/byte, y GFLOP/s; the diagonal is the measured bandwidth ceiling
// (GFLOP/s = GB/s * flop/byte); peak_gflops > 0 adds the compute roof.
std::string roofline_svg(const std::vector<RooflinePoint>& pts, double ceiling_gbps, double peak_gflops,
                         const std::string& title);

// A/B: left, every sample of A and B as jittered points over a box (quartiles, median, whiskers
// at 10/90%); right, the per-round ratios B/A with the median and its confidence interval.
std::string ab_svg(const std::vector<double>& a_us, const std::vector<double>& b_us, const CompareStats& s,
                   const std::string& a_name, const std::string& b_name, const std::string& title);

}  // namespace nvfp4::bench
