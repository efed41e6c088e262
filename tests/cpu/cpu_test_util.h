// tests/cpu/cpu_test_util.h -- shared by the CPU kernel tests: random NVFP4 weights and
// activations (adversarial values, poisoned stride gaps), NaN-poisoned outputs, and the oracle
// comparison with the tolerance derived in test_matmul_cpu.cpp's header.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/matmul_cpu.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"
#include "nvfp4/tensor.h"

namespace nvfp4::cputest {

struct Weight {
  std::vector<std::uint8_t> packed, scales;
  float ts = 1.0f;
  std::int64_t n = 0, k = 0;
  WeightView view() const { return {packed.data(), scales.data(), ts, n, k}; }
};

// Random codes (all 16) and random finite E4M3 scales incl. subnormals and 448; some all-zero
// blocks and some scale-zero blocks.
inline Weight random_weight(std::int64_t n, std::int64_t k, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Weight w;
  w.n = n;
  w.k = k;
  w.packed.resize(static_cast<std::size_t>(n * k / 2));
  w.scales.resize(static_cast<std::size_t>(n * k / 16));
  for (auto& b : w.packed) b = static_cast<std::uint8_t>(rng());
  for (std::size_t i = 0; i < w.scales.size(); ++i) {
    std::uint8_t s;
    const int r = static_cast<int>(rng() % 16);
    if (r == 0) s = static_cast<std::uint8_t>(rng() % 8);  // subnormal or zero
    else if (r == 1) s = 0x7E;                               // 448
    else {
      do s = static_cast<std::uint8_t>(0x20 + rng() % 0x40); while (e4m3_is_nan(s));
    }
    if (rng() % 8 == 0) s |= 0x80;  // stray sign bit: kernels use |scale|
    w.scales[i] = s;
    if (rng() % 23 == 0) std::memset(&w.packed[i * 8], 0, 8);  // all-zero block
  }
  w.ts = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, static_cast<int>(rng() % 20) - 14);
  return w;
}

struct Act {
  std::vector<std::uint8_t> bytes;
  MatrixView view;
};

inline Act random_x(DType t, std::int64_t m, std::int64_t kx, std::int64_t stride, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Act a;
  a.bytes.assign(static_cast<std::size_t>(std::max<std::int64_t>(1, m * stride) * dtype_size(t)), 0xFF);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t k = 0; k < kx; ++k) {
      float v = nd(rng);
      const int r = static_cast<int>(rng() % 64);
      if (r == 0) v = std::ldexp(v, 10);   // large
      if (r == 1) v = std::ldexp(v, -12);  // tiny
      if (r == 2) v = 0.0f;
      store_from_f32(a.bytes.data(), t, i * stride + k, v);
    }
    // Poison the stride gap: a kernel that reads it sees NaN.
    for (std::int64_t k = kx; k < stride; ++k) store_from_f32(a.bytes.data(), t, i * stride + k, NAN);
  }
  a.view = MatrixView{a.bytes.data(), t, m, kx, stride};
  return a;
}

inline float ulp_of(DType t, float v) {
  const int mant = t == DType::kF32 ? 24 : t == DType::kF16 ? 11 : 8;
  if (v == 0.0f) return 0.0f;
  int e;
  std::frexp(v, &e);
  return std::ldexp(1.0f, e - mant);
}

struct Out {
  std::vector<std::uint8_t> bytes;
  MatrixView view;
  float get(std::int64_t i, std::int64_t j) const { return load_as_f32(bytes.data(), view.dtype, i * view.stride + j); }
};

inline Out poisoned(DType t, std::int64_t m, std::int64_t n, std::int64_t stride) {
  Out o;
  o.bytes.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, m * stride) * dtype_size(t)));
  for (std::int64_t i = 0; i < m * stride; ++i) store_from_f32(o.bytes.data(), t, i, NAN);
  o.view = MatrixView{o.bytes.data(), t, m, n, stride};
  return o;
}

// y[i, j] == want(i, j) for i < m, j < n (== treats -0 and +0 as equal; NaN matches NaN);
// reports the first 5 mismatches with `label(i, j)` and returns how many it found (<= 5).
template <class Want, class Label>
int expect_exact(const Out& y, std::int64_t m, std::int64_t n, Want want, Label label) {
  int bad = 0;
  for (std::int64_t i = 0; i < m && bad < 5; ++i)
    for (std::int64_t j = 0; j < n && bad < 5; ++j) {
      const float w = want(i, j), got = y.get(i, j);
      if (std::isnan(w) ? !std::isnan(got) : !(got == w)) {
        ADD_FAILURE() << label(i, j) << " want " << w << " got " << got;
        ++bad;
      }
    }
  return bad;
}

// S = sum_k |x_k w_k| per output (double): the scale of the tolerance.
inline std::vector<double> abs_sums(const Weight& w, const MatrixView& x) {
  const std::int64_t m = x.rows, n = w.n, k = w.k;
  std::vector<double> sabs(static_cast<std::size_t>(m * n));
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) {
      double s = 0;
      for (std::int64_t kk = 0; kk < x.cols; ++kk) {
        const std::uint8_t byte = w.packed[j * (k / 2) + kk / 2];
        const std::uint8_t code = kk % 2 ? e2m1_high(byte) : e2m1_low(byte);
        s += std::fabs(static_cast<double>(load_as_f32(x.data, x.dtype, i * x.stride + kk)) *
                       e2m1_times_scale(code, w.scales[j * (k / 16) + kk / 16]));
      }
      sabs[i * n + j] = s;
    }
  return sabs;
}

// y against the oracle's ref, per element within
//   (2.01 K + 4) u S |ts| + ulp_out(|ref|) + 7 K 448 2^-126 |ts|   (derivation: test_matmul_cpu.cpp)
// NaN exactly where ref is NaN; y's stride gap must stay NaN (untouched). At most 5 failures.
inline void expect_matches_oracle(const Out& ref, const Out& y, const std::vector<double>& sabs, const Weight& w) {
  const std::int64_t m = y.view.rows, n = y.view.cols, k = w.k, y_stride = y.view.stride;
  const DType t = y.view.dtype;
  int bad = 0;
  for (std::int64_t i = 0; i < m && bad < 5; ++i) {
    for (std::int64_t j = 0; j < n && bad < 5; ++j) {
      const float r = ref.get(i, j), v = y.get(i, j);
      const double tol = (2.01 * k + 4) * std::ldexp(1.0, -24) * sabs[i * n + j] * std::fabs(w.ts) +
                         ulp_of(t, std::fabs(r)) + 7.0 * k * 448.0 * std::ldexp(1.0, -126) * std::fabs(w.ts);
      if (v == r) continue;  // includes equal infinities (f16 overflow on both sides)
      if (std::isnan(r)) {
        if (!std::isnan(v)) { ADD_FAILURE() << "m=" << i << " n=" << j << " ref NaN got " << v; ++bad; }
        continue;
      }
      if (!(std::fabs(static_cast<double>(v) - r) <= tol)) {
        ADD_FAILURE() << "m=" << i << " n=" << j << " ref=" << r << " got=" << v << " tol=" << tol;
        ++bad;
      }
    }
    // The stride gap of y must stay untouched (NaN).
    for (std::int64_t j = n; j < y_stride && bad < 5; ++j)
      if (!std::isnan(y.get(i, j))) { ADD_FAILURE() << "wrote past N at m=" << i << " col " << j; ++bad; }
  }
}

inline cpu::MatmulArgs args_of(const MatrixView& x, const Weight& w, const MatrixView& y) {
  return cpu::matmul_args(x, w.view(), y);
}

// fp32 with every mantissa bit in use (bit 0 set: 24 significant bits), exponent in [lo, hi].
inline float full_mantissa(std::mt19937_64& rng, int elo, int ehi) {
  const std::uint32_t man = static_cast<std::uint32_t>(rng() & 0x7FFFFFu) | 1u;
  const int e = elo + static_cast<int>(rng() % static_cast<std::uint64_t>(ehi - elo + 1));
  const std::uint32_t sign = (rng() & 1u) ? 0x80000000u : 0u;
  return f32_from_bits(sign | (static_cast<std::uint32_t>(e + 127) << 23) | man);
}

// Adversarial activations for the split: full-mantissa fp32 over [2^-102, 2^100) (huge and tiny
// in one row), the edge 2^-102 (smallest accepted exponent), zeros and -0; fp16: every exponent incl. subnormals (2^-24..), 65504, and -0.
inline Act adversarial_x(DType t, std::int64_t m, std::int64_t kx, std::int64_t stride, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Act a;
  a.bytes.assign(static_cast<std::size_t>(std::max<std::int64_t>(1, m * stride) * dtype_size(t)), 0xFF);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t k = 0; k < kx; ++k) {
      const std::int64_t at = i * stride + k;
      const int r = static_cast<int>(rng() % 32);
      if (t == DType::kF16) {
        std::uint16_t h = static_cast<std::uint16_t>(rng() & 0xFFFF);
        if ((h & 0x7C00) == 0x7C00) h &= 0xBFFF;  // no Inf/NaN here (own test)
        if (r == 0) h = 0x7BFF;                  // 65504
        if (r == 1) h = static_cast<std::uint16_t>(0x8000 | (rng() % 0x400));  // -subnormal / -0
        static_cast<std::uint16_t*>(static_cast<void*>(a.bytes.data()))[at] = h;
        continue;
      }
      float v = full_mantissa(rng, -30, 30);
      if (r == 0) v = full_mantissa(rng, -102, -90);
      if (r == 1) v = full_mantissa(rng, 80, 100);
      if (r == 2) v = std::ldexp(1.0f, -102);
      if (r == 3) v = full_mantissa(rng, 100, 100);
      if (r == 4) v = (rng() & 1) ? 0.0f : -0.0f;
      store_from_f32(a.bytes.data(), t, at, v);
    }
    for (std::int64_t k = kx; k < stride; ++k) store_from_f32(a.bytes.data(), t, i * stride + k, NAN);
  }
  a.view = MatrixView{a.bytes.data(), t, m, kx, stride};
  return a;
}

// Row i of an m x k matrix has one nonzero, at k = (37 i + 5) % k, needing all its significant
// bits: fp32 24 bits with exponent in [f32_min_exp (row 0) or f32_min_exp + 2, 100] (row 1 up to
// 119); fp16 11 bits, every exponent incl. subnormal; bf16 8 bits in [2^-100, 2^100].
inline std::vector<std::uint8_t> scaled_one_hot_x(DType t, std::int64_t m, std::int64_t k, std::uint64_t seed,
                                                  int f32_min_exp) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> xb(static_cast<std::size_t>(m * k * dtype_size(t)), 0);
  for (std::int64_t i = 0; i < m; ++i) {
    const std::int64_t at = i * k + (i * 37 + 5) % k;
    if (t == DType::kF32) {
      store_from_f32(xb.data(), t, at, full_mantissa(rng, i == 0 ? f32_min_exp : f32_min_exp + 2, i == 1 ? 119 : 100));
    } else if (t == DType::kF16) {
      const std::uint16_t h =
          static_cast<std::uint16_t>(((rng() & 1) << 15) | ((rng() % 31) << 10) | (rng() & 0x3FF) | 1);
      static_cast<std::uint16_t*>(static_cast<void*>(xb.data()))[at] = h;
    } else {
      store_from_f32(xb.data(), t, at, full_mantissa(rng, -100, 100));
    }
  }
  return xb;
}

// dequantize_ref of w as an [n, k] matrix of dtype t (the one-hot tests' expected values).
inline std::vector<std::uint8_t> dequantized(const Weight& w, DType t) {
  std::vector<std::uint8_t> deq(static_cast<std::size_t>(w.n * w.k * dtype_size(t)));
  dequantize_ref(w.view(), MatrixView{deq.data(), t, w.n, w.k, w.k});
  return deq;
}

// m rows of k activations in dtype t; row i is one-hot at column k0 + i (k0 + i < k).
inline std::vector<std::uint8_t> one_hot_rows(DType t, std::int64_t m, std::int64_t k, std::int64_t k0 = 0) {
  std::vector<std::uint8_t> xb(static_cast<std::size_t>(m * k * dtype_size(t)));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < k; ++j) store_from_f32(xb.data(), t, i * k + j, j == k0 + i ? 1.0f : 0.0f);
  return xb;
}

}  // namespace nvfp4::cputest
