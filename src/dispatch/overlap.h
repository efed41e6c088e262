// dispatch/overlap.h -- the byte-span test behind every "must not overlap" check of the API
// (validate_matmul, the CPU and CUDA weight repacks).
#pragma once

#include <cstdint>

namespace nvfp4 {

// True when [a, a + an) and [b, b + bn) share a byte.
inline bool byte_spans_overlap(const void* a, std::uint64_t an, const void* b, std::uint64_t bn) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + bn && y < x + an;
}

}  // namespace nvfp4
