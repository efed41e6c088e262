// Format codecs (format.h, dtype.h) against independent brute-force oracles:
// every E4M3 byte, every E2M1 code and tie, random floats (subnormal scales included) against a
// nearest-value search with ties to the even code, fp16 against the compiler's _Float16.
#include <cmath>
#include <limits>
#include <random>

#include "test_util.h"

namespace nvfp4 {
namespace {

// Independent E4M3 decoder in double (from the bit fields, no shared code with format.h).
double e4m3_value(int b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return s ? -mag : mag;
}

// Nearest finite E4M3 code to x (|x| <= 448), ties to the code with an even mantissa.
int e4m3_nearest(double x) {
  int best = -1;
  double bd = 0;
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) == 0x7F) continue;
    if ((b >> 7) != (std::signbit(x) ? 1 : 0)) continue;
    const double d = std::fabs(e4m3_value(b) - x);
    if (best < 0 || d < bd || (d == bd && (b & 1) == 0)) best = b, bd = d;
  }
  return best;
}

TEST(E4M3, EveryByteDecodesAndReencodes) {
  for (int b = 0; b < 256; ++b) {
    const float v = e4m3_to_float(static_cast<std::uint8_t>(b));
    if ((b & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << "byte " << b;
      EXPECT_TRUE(e4m3_is_nan(static_cast<std::uint8_t>(b)));
      EXPECT_EQ(e4m3_from_float(v), kE4M3NaN);
      continue;
    }
    EXPECT_EQ(static_cast<double>(v), e4m3_value(b)) << "byte " << b;
    EXPECT_EQ(e4m3_from_float(v), b) << "byte " << b << " value " << v;
  }
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(e4m3_to_float(kE4M3One), 1.0f);
}

TEST(E4M3, SaturatesAndHandlesSpecials) {
  EXPECT_EQ(e4m3_from_float(448.0f), 0x7E);
  EXPECT_EQ(e4m3_from_float(463.99f), 0x7E);
  EXPECT_EQ(e4m3_from_float(464.0f), 0x7E);
  EXPECT_EQ(e4m3_from_float(1e30f), 0x7E);
  EXPECT_EQ(e4m3_from_float(-1e30f), 0xFE);
  EXPECT_EQ(e4m3_from_float(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(e4m3_from_float(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(e4m3_from_float(std::nanf("")), kE4M3NaN);
  EXPECT_EQ(e4m3_from_float(-0.0f), 0x80);
  EXPECT_EQ(e4m3_from_float(std::ldexp(1.0f, -10)), 0x00);            // tie between 0 and 2^-9 -> even (0)
  EXPECT_EQ(e4m3_from_float(std::ldexp(3.0f, -10)), 0x02);            // tie 2^-9 / 2^-8 -> even code 2
  EXPECT_EQ(e4m3_from_float(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(e4m3_from_float(std::numeric_limits<float>::denorm_min()), 0x00);
}

TEST(E4M3, RandomFloatsMatchNearestSearch) {
  const std::uint64_t seed = test::base_seed() + 1;
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> expo(-14.0, 9.2);
  std::uniform_int_distribution<int> code(0, 0x7D);
  for (int i = 0; i < 200000; ++i) {
    float x;
    switch (i % 4) {
      case 0: x = static_cast<float>(std::exp2(expo(rng))); break;                       // log-uniform
      case 1: {                                                                          // exact midpoint
        const int c = code(rng);
        x = static_cast<float>((e4m3_value(c) + e4m3_value(c + 1)) / 2);
        break;
      }
      case 2: {                                                                          // midpoint +- 1 ulp
        const int c = code(rng);
        const float mid = static_cast<float>((e4m3_value(c) + e4m3_value(c + 1)) / 2);
        x = std::nextafter(mid, (rng() & 1) ? 0.0f : 1000.0f);
        break;
      }
      default: x = static_cast<float>(std::ldexp(static_cast<double>(rng() % 4096), -21)); break;  // subnormal scales
    }
    if (rng() & 1) x = -x;
    const int want = e4m3_nearest(x);
    ASSERT_EQ(e4m3_from_float(x), want) << "x=" << x << " (" << std::hexfloat << x << ")";
  }
}

TEST(E2M1, CodesAndTies) {
  const float values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    const float v = e2m1_to_float(static_cast<std::uint8_t>(c));
    EXPECT_EQ(std::fabs(v), values[c & 7]);
    EXPECT_EQ(std::signbit(v), c >= 8) << c;
    if (c != 8) {
      EXPECT_EQ(e2m1_from_float(v), c) << c;
    }
  }
  // Every tie goes to the even code (format.md): 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4.
  const float ties[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float want[7] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(e2m1_to_float(e2m1_from_float(ties[i])), want[i]) << ties[i];
    EXPECT_EQ(e2m1_to_float(e2m1_from_float(-ties[i])), -want[i]) << -ties[i];
  }
  EXPECT_EQ(e2m1_from_float(100.0f), 7);  // saturates at 6
  EXPECT_EQ(e2m1_from_float(-100.0f), 15);
  EXPECT_EQ(e2m1_from_float(std::nanf("")), 7);  // NaN -> +6 as cuda_fp4.h / MLX
  // Sign rules: x < 0 (modelopt) vs IEEE sign bit (MLX, compressed-tensors).
  EXPECT_EQ(e2m1_from_float(-0.0f, E2M1Sign::kLessThanZero), 0);
  EXPECT_EQ(e2m1_from_float(-0.0f, E2M1Sign::kSignBit), 8);
  EXPECT_EQ(e2m1_from_float(-0.1f, E2M1Sign::kLessThanZero), 8);
  EXPECT_EQ(e2m1_from_float(-0.1f, E2M1Sign::kSignBit), 8);
}

TEST(E2M1, RandomFloatsMatchNearestSearch) {
  const std::uint64_t seed = test::base_seed() + 2;
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 8.0f);
  const float grid[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int i = 0; i < 200000; ++i) {
    float a = u(rng);
    if (i % 3 == 0) a = std::nextafter(grid[rng() % 8] / 2 + grid[rng() % 8] / 2, (rng() & 1) ? 0.0f : 9.0f);
    int best = 0;
    for (int c = 1; c < 8; ++c) {
      const float d = std::fabs(grid[c] - a), bd = std::fabs(grid[best] - a);
      if (d < bd || (d == bd && c % 2 == 0)) best = c;
    }
    ASSERT_EQ(e2m1_from_float(a), best) << "a=" << a;
    ASSERT_EQ(e2m1_from_float(-a, E2M1Sign::kSignBit), best | 8) << "a=" << -a;
  }
}

TEST(Pack, LowNibbleFirst) {
  EXPECT_EQ(e2m1_pack(0x3, 0xA), 0xA3);
  EXPECT_EQ(e2m1_low(0xA3), 0x3);
  EXPECT_EQ(e2m1_high(0xA3), 0xA);
}

// The compiler's IEEE half type: __fp16 on AArch64 (ACLE; GCC 12 has no C++ _Float16 there),
// _Float16 elsewhere where the compiler has it.
#if defined(__aarch64__)
#define NVFP4_TEST_HALF __fp16
#elif defined(__FLT16_MAX__)
#define NVFP4_TEST_HALF _Float16
#endif

#if defined(NVFP4_TEST_HALF)
TEST(F16, MatchesCompilerFloat16) {
  // Every fp16 value round-trips; random floats round like the compiler's _Float16 conversion.
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(static_cast<std::uint16_t>(h));
    NVFP4_TEST_HALF ref;
    std::uint16_t hh = static_cast<std::uint16_t>(h);
    std::memcpy(&ref, &hh, 2);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(ref)));
      continue;
    }
    ASSERT_EQ(f, static_cast<float>(ref)) << h;
    ASSERT_EQ(f32_to_f16(f), h) << h;
  }
  const std::uint64_t seed = test::base_seed() + 3;
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 500000; ++i) {
    const float f = f32_from_bits(static_cast<std::uint32_t>(rng()));
    if (std::isnan(f)) continue;
    const NVFP4_TEST_HALF ref = static_cast<NVFP4_TEST_HALF>(f);
    std::uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    ASSERT_EQ(f32_to_f16(f), rb) << std::hexfloat << f;
  }
}
#endif

TEST(BF16, RoundsToNearestEven) {
  const std::uint64_t seed = test::base_seed() + 4;
  SCOPED_TRACE(test::seed_note(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 500000; ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(rng());
    const float f = f32_from_bits(u);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
      continue;
    }
    const std::uint16_t b = f32_to_bf16(f);
    if (std::isinf(f)) {
      ASSERT_EQ(b, static_cast<std::uint16_t>(u >> 16));
      continue;
    }
    // The two bf16 neighbours of f: truncation and truncation + 1 ulp.
    const std::uint16_t lo = static_cast<std::uint16_t>(u >> 16);
    const double dlo = std::fabs(static_cast<double>(bf16_to_f32(lo)) - f);
    // Above the largest bf16 the next step is 2^128 (IEEE: overflow rounds as if unbounded).
    const std::uint16_t hi = static_cast<std::uint16_t>(lo + 1);
    const double hv = (hi & 0x7FFF) == 0x7F80 ? std::copysign(0x1p128, f) : static_cast<double>(bf16_to_f32(hi));
    const double dhi = std::fabs(hv - f);
    const std::uint16_t want = (dlo < dhi || (dlo == dhi && (lo & 1) == 0)) ? lo : static_cast<std::uint16_t>(lo + 1);
    ASSERT_EQ(b, want) << std::hexfloat << f;
  }
}

}  // namespace
}  // namespace nvfp4
