// io/progress.h -- internal: a one-line progress bar for long CLI operations (quantize,
// dequantize). It draws on stderr only when stderr is a terminal (isatty(2)), so pipes, logs
// and tests stay quiet; stdout is never touched.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace nvfp4::io {

class Progress {
 public:
  Progress(std::string label, std::uint64_t total_items, std::uint64_t total_bytes);
  ~Progress();  // ends the line if anything was drawn
  void advance(std::uint64_t items, std::uint64_t bytes);
  bool active() const { return active_; }

 private:
  void draw(bool force);
  std::string label_;
  std::uint64_t total_items_, total_bytes_, items_ = 0, bytes_ = 0;
  bool active_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace nvfp4::io
