// tests/test_util.h -- shared helpers for the test suites: seeded random inputs (the seed is
// printed with every failure), adversarial value generators, NaN poisoning.
#pragma once

#include <gtest/gtest.h>
#include <sched.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "nvfp4/nvfp4.h"

namespace nvfp4::test {

// The nvfp4::Error message fn throws, or "(no error)" when it returns normally.
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Base seed: NVFP4_TEST_SEED overrides (to replay a failure), otherwise fixed.
inline std::uint64_t base_seed() {
  const char* s = std::getenv("NVFP4_TEST_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 20261130ull;
}

inline std::string seed_note(std::uint64_t seed) {
  return "seed=" + std::to_string(seed) + " (replay with NVFP4_TEST_SEED=" + std::to_string(base_seed()) + ")";
}

// This process's affinity mask and the lowest CPU in it (tests that confine a process to one CPU).
inline cpu_set_t affinity_mask() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  EXPECT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  return mask;
}
inline int first_allowed_cpu(const cpu_set_t& mask) {
  int cpu = 0;
  while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &mask)) ++cpu;
  return cpu;
}

// A random weight tensor with adversarial structure: normal values, exact grid points, all-zero
// blocks, tiny and huge magnitudes sharing a block.
inline Tensor adversarial_weight(std::int64_t n, std::int64_t k, DType t, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 9);
  Tensor w(t, {n, k});
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t b = 0; b < k; b += 16) {
      const int mode = kind(rng);
      for (std::int64_t c = b; c < std::min(k, b + 16); ++c) {
        float v = nd(rng);
        if (mode == 0) v = 0.0f;                                   // all-zero block
        if (mode == 1) v = (c == b) ? 3.0e3f : v * 1e-4f;          // huge + tiny in one block
        if (mode == 2) v = e2m1_to_float(static_cast<std::uint8_t>(rng() & 15)) * 0.25f;  // grid
        if (mode == 3) v *= 1e-6f;                                 // tiny block (scale clamp)
        w.set(r * k + c, v);
      }
    }
  }
  return w;
}

inline Tensor random_tensor(std::vector<std::int64_t> shape, DType t, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  Tensor x(t, std::move(shape));
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, nd(rng));
  return x;
}

inline void poison(Tensor& t) {
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, std::nanf(""));
}

// A canonical weight of random packed bytes (every E2M1 code in both nibbles) whose scale bytes
// come from scale_byte(rng), one call per block after all the packed bytes, with the given
// stored tensor scale (dequant direction). Each suite picks its own adversarial scale mix.
template <class ScaleByte>
QuantizedWeight random_packed_weight(std::int64_t n, std::int64_t k, std::uint64_t seed, float stored_scale,
                                     ScaleByte scale_byte) {
  std::mt19937_64 rng(seed);
  QuantizedWeight w;
  w.n = n;
  w.k = k;
  w.packed.resize(static_cast<std::size_t>(n * k / 2));
  w.scales.resize(static_cast<std::size_t>(n * k / 16));
  for (auto& b : w.packed) b = static_cast<std::uint8_t>(rng());
  for (auto& s : w.scales) s = scale_byte(rng);
  w.convention = ScaleConvention::kDequant;
  w.stored_scale = stored_scale;
  return w;
}

}  // namespace nvfp4::test
