// io/progress.cpp -- terminal progress bar (see progress.h).
#include "io/progress.h"

#include <unistd.h>

#include <cstdio>

namespace nvfp4::io {
namespace {
std::string gb(std::uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f", static_cast<double>(b) / 1e9);
  return s;
}
}  // namespace

Progress::Progress(std::string label, std::uint64_t total_items, std::uint64_t total_bytes)
    : label_(std::move(label)), total_items_(total_items), total_bytes_(total_bytes),
      active_(::isatty(2) == 1), last_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  // The last advance() already drew the final state; end the line so an error message or the
  // shell prompt starts on its own line.
  if (active_ && drawn_) std::fputc('\n', stderr);
}

void Progress::advance(std::uint64_t items, std::uint64_t bytes) {
  items_ += items;
  bytes_ += bytes;
  draw(items_ == total_items_);
}

void Progress::draw(bool force) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  // Redraw at most 10 times a second: a terminal write per tensor would dominate small tensors.
  if (!force && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  constexpr int kWidth = 30;
  const double f = total_bytes_ ? static_cast<double>(bytes_) / static_cast<double>(total_bytes_)
                                : (total_items_ ? static_cast<double>(items_) / static_cast<double>(total_items_) : 1.0);
  const int fill = static_cast<int>(f * kWidth + 0.5);
  std::string bar(static_cast<std::size_t>(fill > kWidth ? kWidth : fill), '#');
  bar.resize(kWidth, ' ');
  std::fprintf(stderr, "\r%s [%s] %llu/%llu tensors, %s/%s GB", label_.c_str(), bar.c_str(),
               static_cast<unsigned long long>(items_), static_cast<unsigned long long>(total_items_),
               gb(bytes_).c_str(), gb(total_bytes_).c_str());
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace nvfp4::io
