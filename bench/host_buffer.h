// bench/host_buffer.h -- owning, uninitialised host bytes for benchmark weights and read buffers.
//
// Buffers of 2 MiB and more are 2 MiB aligned and advised to transparent huge pages, as an
// inference engine that maps its weights would do. Why: with 4 KiB pages the same replay ran a few
// percent faster or slower depending on where its pages landed -- two engines of one model differed
// by more than a 3% change in work (2026-11-30, 2-core EPYC, THP in "madvise" mode) -- and the A/B
// comparison could not see a 3% change through that. Every CPU benchmark buffer (weights, the
// read-ceiling buffer, the dense baseline's weights) uses this, so all of them are measured alike.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "nvfp4/error.h"

namespace nvfp4::bench {

class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(std::size_t bytes) : n_(bytes) {
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    const std::size_t align = bytes >= kHuge ? kHuge : 64;
    const std::size_t size = (std::max<std::size_t>(bytes, 1) + align - 1) / align * align;
    p_ = static_cast<std::uint8_t*>(std::aligned_alloc(align, size));
    if (!p_) fail("bench", "allocation of " + std::to_string(bytes) + " bytes failed");
    if (align == kHuge) madvise(p_, size, MADV_HUGEPAGE);  // advice only: ignored where THP is off
  }
  ~HostBuffer() { std::free(p_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  HostBuffer(HostBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  std::uint8_t* data() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  std::uint8_t* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace nvfp4::bench
