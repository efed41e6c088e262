// tests/cuda/test_repack_cuda.cpp -- the repacked layout (repack_nvfp4_sm90) and the repacked
// GEMV on it (gemv_nvfp4_sm90_repacked.cu): the host reference's decode (runs everywhere), the
// device repack, one-hot exactness, the oracle at every M and tile, fp16 / fp32 rows, the wide
// launch of 17..32 rows, and the overlapped / early launches in chains and graphs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/repack_nvfp4_sm90.h"
#include "kernels/cuda/tuning_sm90.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"
#include "test_util.h"

#if defined(NVFP4_HAVE_CUDA)
#include <cuda_runtime.h>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/matmul_cuda.h"
#endif

namespace nvfp4 {
namespace {
// ------------------------------------------------------------------------------------------
// Repacked layout (gemv_sm90): host reference, runs everywhere. Emulates the kernel's decode
// (repack::decode_word / decode_word_f16 + the scale IMAD + a bf16 / fp16 multiply, which is
// exact here) and checks every weight against e2m1 * |scale| bit for bit, including zero,
// subnormal and NaN scales, for both code positions (RepackedCodes).
// ------------------------------------------------------------------------------------------
std::uint8_t code_at_ref(const QuantizedWeight& w, std::int64_t row, std::int64_t k) {
  const std::uint8_t b = w.packed[static_cast<std::size_t>(row * (w.k / 2) + k / 2)];
  return static_cast<std::uint8_t>(k % 2 ? b >> 4 : b & 0xF);
}

// Scales include NaN (0x7F, 0xFF) and negative-signed bytes: the host reference must decode them.
QuantizedWeight repack_test_weight(std::int64_t n, std::int64_t k, std::uint64_t seed) {
  static const std::uint8_t special[] = {0x00, 0x80, 0x01, 0x02, 0x03, 0x07, 0x08, 0x38, 0x7E, 0xFE, 0x7F, 0xFF};
  return test::random_packed_weight(n, k, seed, 0.5f, [](std::mt19937_64& rng) {
    return rng() % 4 == 0 ? special[rng() % 12] : static_cast<std::uint8_t>(rng() % 0x7F);
  });
}

float bf16_bits_to_f32(std::uint32_t b) {
  const std::uint32_t u = b << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The decodes are bit gathers: every bit of every register is its source bit of the word
// (repack::src_bit) or zero, for any word, including all-ones (where a carry between the fp16
// decode's two shifted copies would show).
TEST(CudaRepack, DecodesAreBitGathers) {
  const std::uint64_t seed = 2718;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const bool f16 : {false, true}) {
    std::uint32_t pattern = 0;  // the code bits of a register: (m, e0, e1, s) in both halves
    for (int bit = 0; bit < 4; ++bit)
      for (int half = 0; half < 2; ++half) pattern |= 1u << (16 * half + cuda::repack::nibble_bit_pos(bit, f16));
    EXPECT_EQ(pattern, f16 ? cuda::repack::kMaskF : cuda::repack::kMaskP);
    std::uint32_t covered = 0;  // every bit of a word feeds exactly one register bit
    for (int r = 0; r < 4; ++r)
      for (int p = 0; p < 32; ++p)
        if ((pattern >> p) & 1) {
          const std::uint32_t b = 1u << cuda::repack::src_bit(r, p, f16);
          EXPECT_EQ(covered & b, 0u) << "f16 " << f16 << ": register " << r << " bit " << p << " reuses a source bit";
          covered |= b;
        }
    EXPECT_EQ(covered, 0xFFFFFFFFu) << "f16 " << f16;
    for (int i = 0; i < 200000; ++i) {
      const std::uint32_t q = i == 0 ? 0xFFFFFFFFu : (i < 33 ? 1u << (i - 1) : static_cast<std::uint32_t>(rng()));
      std::uint32_t r[4];
      if (f16)
        cuda::repack::decode_word_f16(q, r);
      else
        cuda::repack::decode_word(q, r);
      for (int ri = 0; ri < 4; ++ri) {
        std::uint32_t want = 0;
        for (int p = 0; p < 32; ++p)
          if ((pattern >> p) & 1) want |= ((q >> cuda::repack::src_bit(ri, p, f16)) & 1u) << p;
        ASSERT_EQ(r[ri], want) << "f16 " << f16 << " word 0x" << std::hex << q << " register " << ri;
      }
    }
  }
}

TEST(CudaRepack, HostReferenceDecodesToTheDequantizedWeights) {
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{16, 128}, {48, 256}, {32, 1024}})
  for (const cuda::RepackedCodes codes : {cuda::RepackedCodes::bf16, cuda::RepackedCodes::fp16}) {
    const bool f16 = codes == cuda::RepackedCodes::fp16;
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 31337 + n + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k) +
                 (f16 ? " fp16 codes" : " bf16 codes"));
    const QuantizedWeight qw = repack_test_weight(n, k, seed);
    std::vector<std::uint8_t> rp(qw.packed.size(), 0xAB), rs(qw.scales.size(), 0xAB);
    cuda::repack_for_gemv_sm90_ref(qw.view(), rp.data(), rs.data(), codes);
    std::vector<int> seen(static_cast<std::size_t>(n * k), 0);
    int bad = 0;
    const std::int64_t chunks = k / 64;
    for (std::int64_t tl = 0; tl < n / 16; ++tl)
      for (std::int64_t c = 0; c < chunks; ++c)
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4, t = lane % 4;
          const std::uint8_t* sb = rs.data() + ((tl * (chunks / 2) + c / 2) * 32 + lane) * 4;
          for (int j = 0; j < 4; ++j) {
            std::uint32_t q;
            std::memcpy(&q, rp.data() + ((tl * chunks + c) * 32 + lane) * 16 + 4 * j, 4);
            std::uint32_t r[4];
            if (f16)
              cuda::repack::decode_word_f16(q, r);
            else
              cuda::repack::decode_word(q, r);
            for (int ri = 0; ri < 4; ++ri)
              for (int half = 0; half < 2; ++half) {
                const std::int64_t row = tl * 16 + g + 8 * (ri & 1);
                const std::int64_t kk = c * 64 + 16 * t + 4 * j + (ri >= 2 ? 2 : 0) + half;
                const std::uint8_t sbyte = sb[2 * (c % 2) + (ri & 1)];
                const std::uint32_t wbits = (r[ri] >> (16 * half)) & 0xFFFFu;
                // bf16: e2m1 * 2^-126 times |s| * 2^119; fp16: e2m1 * 2^-14 times |s| * 2^7 (the
                // kernels' rp_scale). Either product is e2m1 * |s| * 2^-7, exact (<= 6 significant bits).
                const float w16 = f16 ? f16_to_f32(static_cast<std::uint16_t>(wbits)) : bf16_bits_to_f32(wbits);
                const float s16 = f16 ? f16_to_f32(static_cast<std::uint16_t>(sbyte * 128u + 0x3000u))
                                      : bf16_bits_to_f32(sbyte * 16u + 0x7600u);
                const float got = w16 * s16 * 128.0f;
                const std::uint8_t code = code_at_ref(qw, row, kk);
                const float want = e2m1_times_scale(code, qw.scales[row * (k / 16) + kk / 16]);
                ++seen[row * k + kk];
                if (!(got == want || (std::isnan(got) && std::isnan(want))) && ++bad <= 5)
                  ADD_FAILURE() << "row " << row << " k " << kk << ": decoded " << got << " want " << want;
              }
          }
        }
    EXPECT_EQ(bad, 0);
    for (std::size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "weight " << i << " decoded " << seen[i] << " times";
  }
  std::vector<std::uint8_t> buf(1024);
  const QuantizedWeight odd = repack_test_weight(16, 64, 1);
  EXPECT_THROW(cuda::repack_for_gemv_sm90_ref(odd.view(), buf.data(), buf.data()), Error);  // K % 128 != 0
  const QuantizedWeight odd2 = repack_test_weight(8, 128, 1);
  EXPECT_THROW(cuda::repack_for_gemv_sm90_ref(odd2.view(), buf.data(), buf.data()), Error);  // N % 16 != 0
  const QuantizedWeight ok = repack_test_weight(16, 128, 1);
  std::vector<std::uint8_t> p(ok.packed.size()), sc(ok.scales.size());
  EXPECT_THROW(cuda::repack_for_gemv_sm90_ref(ok.view(), p.data(), sc.data(), static_cast<cuda::RepackedCodes>(2)),
               Error);  // no such code placement
  EXPECT_FALSE(cuda::repack_for_gemv_sm90_supported(17, 128));
  EXPECT_TRUE(cuda::repack_for_gemv_sm90_supported(4096, 512));
}

#if defined(NVFP4_HAVE_CUDA)
using namespace cudatest;  // NOLINT: the shared helpers (cuda_test_util.h)

// Repacked path on the GPU: device repack == host reference byte for byte; one-hot rows recover
// dequantize_ref exactly; random rows match the oracle (same tolerance) for M = 1..33 and every
// tile; unsupported dtypes/shapes are errors.
void run_repacked(const DevWeight& dw, const Tensor& x, Tensor& y, std::int64_t m, const cuda::GemvTile* tile,
                  const cuda::RepackedMatmulOptions& opt = {}) {
  const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
  cuda::quantized_matmul_repacked_tile(MatrixView{dx.p, x.dtype, m, dw.k, dw.k}, dw.view(),
                                       MatrixView{dy.p, y.dtype, m, dw.n, dw.n}, nullptr, tile, nullptr, opt);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dy.back(y.data());
}

TEST(CudaRepack, DeviceRepackEqualsReferenceAndMatmulMatches) {
  REQUIRE_GPU();
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{16, 128}, {48, 256}, {208, 4096}, {160, 2560}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 777 + n * 3 + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const DevWeight dw(qw);
    std::vector<std::uint8_t> rp(qw.packed.size()), rs(qw.scales.size()), gp(rp.size()), gs(rs.size());
    cuda::repack_for_gemv_sm90_ref(qw.view(), rp.data(), rs.data());
    cudaMemcpy(gp.data(), dw.rp, gp.size(), cudaMemcpyDeviceToHost);
    cudaMemcpy(gs.data(), dw.rs, gs.size(), cudaMemcpyDeviceToHost);
    ASSERT_TRUE(rp == gp) << "device repack differs from the host reference (packed)";
    ASSERT_TRUE(rs == gs) << "device repack differs from the host reference (scales)";
    // One-hot: 16 rows per launch over a spread of k.
    Tensor deq(DType::kBF16, {n, k});
    dequantize_ref(qw.view(), MatrixView{deq.data(), DType::kBF16, n, k, k});
    std::vector<std::int64_t> ks;
    for (std::int64_t kk = 0; kk < k; kk += (k <= 256 ? 1 : 13)) ks.push_back(kk);
    ks.push_back(k - 1);
    ASSERT_NO_FATAL_FAILURE(
        expect_one_hot_exact(deq, n, k, ks, [&](Tensor& x, Tensor& y, std::int64_t rows) { run_repacked(dw, x, y, rows, nullptr); }));
    // Random rows against the oracle, table tile and every tile.
    for (std::int64_t m : {1, 2, 3, 8, 9, 16, 33}) {
      Tensor x = random_x(DType::kBF16, m, k, seed + m);
      Tensor y = nan_tensor(DType::kBF16, m, n);
      run_repacked(dw, x, y, m, nullptr);
      check_against_oracle(MatrixView{x.data(), DType::kBF16, m, k, k}, qw, MatrixView{y.data(), DType::kBF16, m, n, n},
                           "repacked M=" + std::to_string(m));
    }
    // Every tile the tuner may pick (nvfp4 tune --layout repacked): the table changes speed only.
    for (std::int64_t m : {1, 16})
      for (int cols : {16, 32})
        for (int warps : {1, 2, 4, 8, 16})
          for (int ksp : {1, 2, 4, 8, 16}) {
            if (ksp > warps || warps % ksp != 0) continue;
            const cuda::GemvTile tile{cols, warps, ksp};
            const std::string what = "repacked tile " + std::to_string(cols) + "/" + std::to_string(warps) + "/" +
                                     std::to_string(ksp) + " M=" + std::to_string(m);
            Tensor x = random_x(DType::kBF16, m, k, seed + 100 + m);
            Tensor y = nan_tensor(DType::kBF16, m, n);
            run_repacked(dw, x, y, m, &tile);
            check_against_oracle(MatrixView{x.data(), DType::kBF16, m, k, k}, qw, MatrixView{y.data(), DType::kBF16, m, n, n}, what);
          }
  }
  // Errors, not crashes: mismatched dtypes, an unsupported shape, host pointers.
  const QuantizedWeight qw = random_weight(16, 128, 5);
  const DevWeight dw(qw);
  void *dx, *dy;
  ASSERT_EQ(cudaMalloc(&dx, 16 * 128 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, 16 * 16 * 4), cudaSuccess);
  EXPECT_THROW(cuda::quantized_matmul_repacked(MatrixView{dx, DType::kF16, 1, 128, 128}, dw.view(),
                                               MatrixView{dy, DType::kBF16, 1, 16, 16}), Error);
  cuda::RepackedWeightView bad = dw.view();
  bad.k = 64;
  EXPECT_THROW(cuda::quantized_matmul_repacked(MatrixView{dx, DType::kBF16, 1, 64, 64}, bad,
                                               MatrixView{dy, DType::kBF16, 1, 16, 16}), Error);
  Tensor hx = random_x(DType::kBF16, 1, 128, 1);
  EXPECT_THROW(cuda::quantized_matmul_repacked(MatrixView{hx.data(), DType::kBF16, 1, 128, 128}, dw.view(),
                                               MatrixView{dy, DType::kBF16, 1, 16, 16}), Error);
  EXPECT_THROW(cuda::repack_for_gemv_sm90(WeightView{static_cast<std::uint8_t*>(dw.p), static_cast<std::uint8_t*>(dw.s), 1.0f, 16, 128},
                                          static_cast<std::uint8_t*>(dw.p), static_cast<std::uint8_t*>(dw.rs), nullptr), Error);  // aliasing
  cudaFree(dx);
  cudaFree(dy);
}

// fp16 / fp32 activations on repacked weights: fp16 rows as they are (the fp16 mma, 16 rows per
// launch), fp32 split exactly into 3 bf16 pieces (virtual rows; 5 real rows per launch). One-hot
// fp32 rows with fp32 output recover dequantize_ref bit for bit, and one-hot fp16 rows its fp16
// rounding; random and padded/strided rows match the oracle; the output is in x's dtype.
TEST(CudaRepack, Fp16AndFp32Activations) {
  REQUIRE_GPU();
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{48, 256}, {208, 4096}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 4242 + n + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const DevWeight dw(qw);
    Tensor deq(DType::kF32, {n, k});
    dequantize_ref(qw.view(), MatrixView{deq.data(), DType::kF32, n, k, k});
    // One-hot, fp32 (3 pieces) and fp16 (the fp16 mma; fp16 output rounds, so compare to fp16(deq)).
    for (DType dt : {DType::kF32, DType::kF16}) {
      const std::int64_t rows = 11;  // 3 launches of 5 (fp32) / one of 11 (fp16, the M = 9..16 kernel)
      Tensor x(dt, {rows, k});
      for (std::int64_t r = 0; r < rows; ++r) x.set(r * k + (r * 97 + 5) % k, 1.0f);
      Tensor y = nan_tensor(dt, rows, n);
      run_repacked(dw, x, y, rows, nullptr);
      const int bad = one_hot_mismatches(y, rows, n, [&](std::int64_t r, std::int64_t j) {
        const float d = deq.get(j * k + (r * 97 + 5) % k);
        return dt == DType::kF32 ? d : f16_to_f32(f32_to_f16(d));
      }, dtype_name(dt));
      ASSERT_EQ(bad, 0);
      for (std::int64_t m : {1, 2, 3, 5, 6, 8, 9, 16, 17}) {
        Tensor xr = random_x(dt, m, k, seed + 7 * m);
        if (dt == DType::kF32)  // values whose low bits need all three pieces
          for (std::int64_t i = 0; i < xr.numel(); i += 3) xr.set(i, xr.get(i) * (1.0f + 0x1p-20f));
        Tensor yr = nan_tensor(dt, m, n);
        run_repacked(dw, xr, yr, m, nullptr);
        check_against_oracle(MatrixView{xr.data(), dt, m, k, k}, qw, MatrixView{yr.data(), dt, m, n, n},
                             std::string("repacked ") + dtype_name(dt) + " M=" + std::to_string(m));
        // The early-weights launch (up to 16 virtual rows: fp16 M <= 16, fp32 M <= 5, the M = 9..16
        // kernel from 9; fp32's pieces are written by the kernel just before the GEMV, which only its
        // weights may precede) gives the ordinary launch's bits with the same tile.
        const cuda::GemvTile tile{16, 4, 4};
        cuda::RepackedMatmulOptions early;
        early.weights_read_early = true;
        Tensor ya = nan_tensor(dt, m, n), yb = nan_tensor(dt, m, n);
        run_repacked(dw, xr, ya, m, &tile);
        run_repacked(dw, xr, yb, m, &tile, early);
        ASSERT_TRUE(ya.bytes == yb.bytes) << dtype_name(dt) << " M=" << m << ": early-weights launch differs";
      }
    }
  }
}

// Weights repacked with fp16 codes (RepackedCodes::fp16) for fp16 rows: the device repack equals
// the host reference; every route (the GEMV at M <= 16 with the built-in and every explicit tile,
// the early launch, the wide launch, the repacked GEMM with every block shape) gives the bf16
// codes' bits exactly (the decoded products are the same exact values, summed in the same
// order); one-hot rows recover fp16(dequantize_ref); random rows match the oracle; bf16 and fp32
// rows, and an unknown code position, are errors.
TEST(CudaRepack, Fp16CodesGiveTheBf16CodesBits) {
  REQUIRE_GPU();
  const cuda::RgemmTile rg_tiles[] = {{4, 1}, {8, 1}, {4, 3}, {8, 64}};
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{16, 128}, {48, 256}, {272, 2560}, {208, 4096}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 1616 + n * 5 + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);  // zero, subnormal and largest scales too
    const DevWeight db(qw), dh(qw, cuda::RepackedCodes::fp16);
    {
      std::vector<std::uint8_t> rp(qw.packed.size()), rs(qw.scales.size()), gp(rp.size()), gs(rs.size());
      cuda::repack_for_gemv_sm90_ref(qw.view(), rp.data(), rs.data(), cuda::RepackedCodes::fp16);
      ASSERT_EQ(cudaMemcpy(gp.data(), dh.rp, gp.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(gs.data(), dh.rs, gs.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_TRUE(rp == gp) << "device repack (fp16 codes) differs from the host reference (packed)";
      ASSERT_TRUE(rs == gs) << "device repack (fp16 codes) differs from the host reference (scales)";
    }
    // The same call on both layouts; `rg` forces the repacked GEMM with that block shape.
    auto both = [&](const Tensor& x, std::int64_t m, const cuda::GemvTile* tile, const cuda::RgemmTile* rg,
                    const cuda::RepackedMatmulOptions& opt, const std::string& what) {
      Tensor y[2] = {nan_tensor(DType::kF16, m, n), nan_tensor(DType::kF16, m, n)};
      std::string name[2];
      for (int i = 0; i < 2; ++i) {
        const DevWeight& dw = i ? dh : db;
        const DeviceCopy dx(x.data(), x.bytes.size()), dy(y[i].data(), y[i].bytes.size());
        const MatrixView xv{dx.p, DType::kF16, m, k, k}, yv{dy.p, DType::kF16, m, n, n};
        if (rg)
          cuda::quantized_matmul_repacked_rgemm(xv, dw.view(), yv, nullptr, rg, &name[i], opt);
        else
          cuda::quantized_matmul_repacked_tile(xv, dw.view(), yv, nullptr, tile, &name[i], opt);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        dy.back(y[i].data());
      }
      EXPECT_EQ(name[0], name[1]) << what;
      EXPECT_TRUE(y[0].bytes == y[1].bytes) << what << " (" << name[1] << "): fp16 codes differ from bf16 codes";
      return std::move(y[1]);
    };
    Tensor deq(DType::kF32, {n, k});
    dequantize_ref(qw.view(), MatrixView{deq.data(), DType::kF32, n, k, k});
    for (const std::int64_t rows : {11, 30, 40}) {  // the M = 9..16 GEMV, the wide launch or the GEMM, the GEMM
      Tensor x(DType::kF16, {rows, k});
      for (std::int64_t r = 0; r < rows; ++r) x.set(r * k + (r * 89 + 3) % k, 1.0f);
      const Tensor y = both(x, rows, nullptr, nullptr, {}, "one-hot M=" + std::to_string(rows));
      const int bad = one_hot_mismatches(y, rows, n, [&](std::int64_t r, std::int64_t j) {
        return f16_to_f32(f32_to_f16(deq.get(j * k + (r * 89 + 3) % k)));
      }, "fp16 codes one-hot M=" + std::to_string(rows));
      ASSERT_EQ(bad, 0);
    }
    for (const std::int64_t m : {1, 2, 8, 9, 16, 17, 32, 33, 64, 130}) {
      Tensor x = random_x(DType::kF16, m, k, seed + m);
      Tensor y = both(x, m, nullptr, nullptr, {}, "M=" + std::to_string(m));
      check_against_oracle(MatrixView{x.data(), DType::kF16, m, k, k}, qw, MatrixView{y.data(), DType::kF16, m, n, n},
                           "fp16 codes M=" + std::to_string(m));
    }
    cuda::RepackedMatmulOptions early;
    early.weights_read_early = true;
    for (const std::int64_t m : {1, 16})
      for (int cols : {16, 32})
        for (int warps : {1, 4, 16})
          for (int ksp : {1, 4}) {
            if (ksp > warps) continue;
            const cuda::GemvTile tile{cols, warps, ksp};
            const std::string what = "tile " + std::to_string(cols) + "/" + std::to_string(warps) + "/" +
                                     std::to_string(ksp) + " M=" + std::to_string(m);
            const Tensor x = random_x(DType::kF16, m, k, seed + 100 + m);
            const Tensor y = both(x, m, &tile, nullptr, {}, what);
            const Tensor ye = both(x, m, &tile, nullptr, early, what + " early");
            EXPECT_TRUE(y.bytes == ye.bytes) << what << ": the early launch differs";
          }
    for (const cuda::RgemmTile& t : rg_tiles) {
      const Tensor x = random_x(DType::kF16, 70, k, seed + 7);
      both(x, 70, nullptr, &t, {}, "rgemm nb" + std::to_string(t.nb) + "/ks" + std::to_string(t.k_split));
    }
  }
  // Errors: other activation dtypes on fp16 codes, and a code position that does not exist.
  const QuantizedWeight qw = random_weight(16, 128, 5);
  const DevWeight dh(qw, cuda::RepackedCodes::fp16);
  const std::vector<std::uint8_t> zeros(40 * 128 * 4, 0);
  const DeviceCopy dx(zeros.data(), 40 * 128 * 4), dy(zeros.data(), 40 * 16 * 4);
  for (const DType dt : {DType::kBF16, DType::kF32})
    for (const std::int64_t m : {1, 40}) {
      EXPECT_THROW(cuda::quantized_matmul_repacked(MatrixView{dx.p, dt, m, 128, 128}, dh.view(), MatrixView{dy.p, dt, m, 16, 16}), Error)
          << dtype_name(dt) << " M=" << m;
      EXPECT_THROW(cuda::quantized_matmul_repacked_rgemm(MatrixView{dx.p, dt, m, 128, 128}, dh.view(),
                                                         MatrixView{dy.p, dt, m, 16, 16}, nullptr, nullptr, nullptr),
                   Error)
          << dtype_name(dt) << " M=" << m;
    }
  cuda::RepackedWeightView bad = dh.view();
  bad.codes = static_cast<cuda::RepackedCodes>(7);
  EXPECT_THROW(cuda::quantized_matmul_repacked(MatrixView{dx.p, DType::kF16, 1, 128, 128}, bad, MatrixView{dy.p, DType::kF16, 1, 16, 16}),
               Error);
  EXPECT_THROW(cuda::repack_for_gemv_sm90(WeightView{static_cast<std::uint8_t*>(dh.p), static_cast<std::uint8_t*>(dh.s), 1.0f, 16, 128},
                                          static_cast<std::uint8_t*>(dh.rp), static_cast<std::uint8_t*>(dh.rs), nullptr,
                                          static_cast<cuda::RepackedCodes>(7)),
               Error);
}

// The wide launch: 17..32 virtual rows on small weights (N x K <= kRpWideMaxWeights) run one GEMV
// launch with four n8 tiles (rp<1,4>). One-hot fp32 rows (30 virtual rows) and fp16 rows (32, the
// fp16 mma) recover dequantize_ref bit for bit; random rows of every dtype at both ends of the range match
// the oracle, on N that is one tile, a few, and not a multiple of a block's rows; padded strided
// rows; non-finite rows propagate like the oracle; a graph replay gives the stream's bits.
TEST(CudaRepack, WideLaunchOf17To32VirtualRows) {
  REQUIRE_GPU();
  for (auto nk : {std::pair<std::int64_t, std::int64_t>{16, 128}, {48, 256}, {272, 2560}, {1040, 1024}}) {
    const std::int64_t n = nk.first, k = nk.second;
    const std::uint64_t seed = 3232 + n + k;
    SCOPED_TRACE("seed " + std::to_string(seed) + " N=" + std::to_string(n) + " K=" + std::to_string(k));
    const QuantizedWeight qw = random_weight(n, k, seed);
    const DevWeight dw(qw);
    auto run = [&](const Tensor& x, Tensor& y, std::int64_t m, std::int64_t cols, std::int64_t stride) {
      const DeviceCopy dx(x.data(), x.bytes.size()), dy(y.data(), y.bytes.size());
      std::string name;
      cuda::quantized_matmul_repacked_tile(MatrixView{dx.p, x.dtype, m, cols, stride}, dw.view(),
                                           MatrixView{dy.p, y.dtype, m, n, n}, nullptr, nullptr, &name);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(name, "gemv_nvfp4_sm90_rp_r16_m32") << dtype_name(x.dtype) << " M=" << m;
      dy.back(y.data());
    };
    Tensor deq(DType::kF32, {n, k});
    dequantize_ref(qw.view(), MatrixView{deq.data(), DType::kF32, n, k, k});
    for (const DType dt : {DType::kF32, DType::kF16}) {
      const std::int64_t rows = dt == DType::kF32 ? 10 : 32;  // 30 / 32 virtual rows
      Tensor x(dt, {rows, k});
      for (std::int64_t r = 0; r < rows; ++r) x.set(r * k + (r * 61 + 3) % k, 1.0f);
      Tensor y = nan_tensor(dt, rows, n);
      ASSERT_NO_FATAL_FAILURE(run(x, y, rows, k, k));
      const int bad = one_hot_mismatches(y, rows, n, [&](std::int64_t r, std::int64_t j) {
        const float d = deq.get(j * k + (r * 61 + 3) % k);
        return dt == DType::kF32 ? d : f16_to_f32(f32_to_f16(d));
      }, std::string("wide ") + dtype_name(dt));
      ASSERT_EQ(bad, 0);
    }
    for (const auto& [dt, m] : {std::pair<DType, std::int64_t>{DType::kBF16, 17}, {DType::kBF16, 24}, {DType::kBF16, 32},
                                {DType::kF16, 17}, {DType::kF16, 32}, {DType::kF32, 6}, {DType::kF32, 10}}) {
      Tensor x = random_x(dt, m, k, seed + 11 * m);
      if (dt == DType::kF32)  // values whose low bits need all three pieces
        for (std::int64_t i = 0; i < x.numel(); i += 3) x.set(i, x.get(i) * (1.0f + 0x1p-20f));
      Tensor y = nan_tensor(dt, m, n);
      ASSERT_NO_FATAL_FAILURE(run(x, y, m, k, k));
      check_against_oracle(MatrixView{x.data(), dt, m, k, k}, qw, MatrixView{y.data(), dt, m, n, n},
                           std::string("wide ") + dtype_name(dt) + " M=" + std::to_string(m));
    }
    {  // Padded, strided bf16 rows (x.cols = K - 8, row stride K + 24): through the prepared rows.
      const std::int64_t m = 27, stride = k + 24, cols = k - 8;
      Tensor x = random_x(DType::kBF16, m, stride, seed + 99);
      Tensor y = nan_tensor(DType::kBF16, m, n);
      ASSERT_NO_FATAL_FAILURE(run(x, y, m, cols, stride));
      check_against_oracle(MatrixView{x.data(), DType::kBF16, m, cols, stride}, qw, MatrixView{y.data(), DType::kBF16, m, n, n},
                           "wide padded strided rows");
    }
    if (k >= 1024)
      for (const DType dt : {DType::kBF16, DType::kF32}) {
        const std::int64_t m = dt == DType::kF32 ? 10 : 32;
        Tensor x = random_x(dt, m, k, seed + 5);
        x.set(3 * k + 77, INFINITY);
        x.set(5 * k + 500, NAN);
        x.set(7 * k + 1000, -INFINITY);
        Tensor y = nan_tensor(dt, m, n);
        ASSERT_NO_FATAL_FAILURE(run(x, y, m, k, k));
        Tensor xf(DType::kF32, {m, k}), ref(DType::kF32, {m, n});
        for (std::int64_t i = 0; i < x.numel(); ++i) xf.set(i, x.get(i));
        quantized_matmul_ref(MatrixView{xf.data(), DType::kF32, m, k, k}, qw.view(), MatrixView{ref.data(), DType::kF32, m, n, n});
        int bad = 0;
        for (const std::int64_t r : {3, 5, 7})
          for (std::int64_t j = 0; j < n; ++j) {
            const float got = y.get(r * n + j), want = ref.get(r * n + j);
            const bool same = std::isnan(want) ? std::isnan(got) : got == want;
            if (!same && ++bad <= 5) ADD_FAILURE() << "wide " << dtype_name(dt) << " y[" << r << "," << j << "] = " << got << ", oracle " << want;
          }
        EXPECT_EQ(bad, 0);
      }
    expect_stream_and_graph_identical(qw, random_x(DType::kBF16, 32, k, seed + 7), "wide GEMV",
                                      [&](const MatrixView& xv, const MatrixView& yv, cudaStream_t st) {
                                        cuda::quantized_matmul_repacked(xv, dw.view(), yv, st);
                                      });
  }
}

// Overlapped (programmatic dependent) launch: a chain y1 = x W1^T, y2 = y1 W2^T, y3 = y2 W3^T ...
// where each GEMV reads the previous one's output. With overlapped_launch the next kernel is
// scheduled early and waits (griddepcontrol.wait) before it reads anything; the results must be
// bit-identical to the same chain launched plainly, in a plain stream and inside a captured CUDA
// graph. A large first GEMV gives the second many microseconds of overlap in which a missing
// wait would read stale x. At M = 1 and M = 4 (batched decode; the early-weights launch serves
// up to 8 virtual rows).
TEST(CudaRepack, ProgrammaticDependentLaunchChainIsExact) {
  REQUIRE_GPU();
  const std::uint64_t seed = 90210;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<std::int64_t> dims = {14336, 4096, 1024, 2048, 512};  // K of layer i = N of layer i-1
  std::vector<QuantizedWeight> qws;
  std::vector<std::unique_ptr<DevWeight>> dws;
  for (std::size_t i = 0; i + 1 < dims.size(); ++i) {
    qws.push_back(random_weight(dims[i + 1], dims[i], seed + i, 0.05f));
    dws.push_back(std::make_unique<DevWeight>(qws.back()));
  }
  std::vector<void*> act(dims.size());
  constexpr std::int64_t kMaxM = 12;  // M = 12: the M = 9..16 kernel, early launch included
  for (std::size_t i = 0; i < dims.size(); ++i) ASSERT_EQ(cudaMalloc(&act[i], kMaxM * dims[i] * 2), cudaSuccess);
  const Tensor x0 = random_x(DType::kBF16, kMaxM, dims[0], seed);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  // launch: 0 plain, 1 overlapped, 2 overlapped with the weights read before the wait
  // (weights_read_early; the chain never writes its weights).
  auto chain = [&](int launch, const cuda::GemvTile* tile, std::int64_t m) {
    cuda::RepackedMatmulOptions o;
    o.overlapped_launch = launch > 0;
    o.weights_read_early = launch == 2;
    for (std::size_t i = 0; i + 1 < dims.size(); ++i)
      cuda::quantized_matmul_repacked_tile(MatrixView{act[i], DType::kBF16, m, dims[i], dims[i]}, dws[i]->view(),
                                           MatrixView{act[i + 1], DType::kBF16, m, dims[i + 1], dims[i + 1]}, st,
                                           tile, nullptr, o);
  };
  auto run = [&](int launch, bool graph, const cuda::GemvTile* tile = nullptr, std::int64_t m = 1) {
    cudaMemcpy(act[0], x0.data(), m * dims[0] * 2, cudaMemcpyHostToDevice);
    for (std::size_t i = 1; i < dims.size(); ++i) cudaMemset(act[i], 0xFF, kMaxM * dims[i] * 2);  // NaN
    cudaDeviceSynchronize();
    run_direct_or_in_graph(st, graph, [&] { chain(launch, tile, m); });
    std::vector<std::uint16_t> out(m * dims.back());
    cudaMemcpy(out.data(), act.back(), out.size() * 2, cudaMemcpyDeviceToHost);
    return out;
  };
  const std::vector<std::uint16_t> want = run(0, false);
  // The reference chain itself against the oracle, layer by layer on the host (bf16 rounding
  // between layers, as on the device).
  {
    Tensor x = x0;
    for (std::size_t i = 0; i + 1 < dims.size(); ++i) {
      Tensor y(DType::kBF16, {1, dims[i + 1]});
      quantized_matmul_ref(MatrixView{x.data(), DType::kBF16, 1, dims[i], dims[i]}, qws[i].view(),
                           MatrixView{y.data(), DType::kBF16, 1, dims[i + 1], dims[i + 1]});
      x = y;
    }
    // Four bf16 roundings compound (and cancellation makes single outputs relatively large):
    // compare against the RMS of the output, ~2^-9 per layer.
    double ss = 0;
    for (std::int64_t j = 0; j < dims.back(); ++j) ss += static_cast<double>(x.get(j)) * x.get(j);
    const double rms = std::sqrt(ss / dims.back());
    int far = 0;
    for (std::int64_t j = 0; j < dims.back(); ++j) {
      const double a = bf16_to_f32(want[j]), b = x.get(j);
      if (!(std::fabs(a - b) <= 0.02 * rms)) ++far;
    }
    EXPECT_GT(rms, 0.0);
    EXPECT_EQ(far, 0) << "the non-PDL chain drifted from the oracle chain (rms " << rms << ")";
  }
  for (int launch : {1, 2})
    for (bool graph : {false, true})
      for (int rep = 0; rep < 10; ++rep)
        ASSERT_TRUE(run(launch, graph) == want)
            << "PDL chain differs from the plain chain (launch " << launch << ", graph " << graph << ", rep " << rep << ")";
  for (const std::int64_t m : {std::int64_t{4}, kMaxM}) {
    const std::vector<std::uint16_t> want_m = run(0, false, nullptr, m);
    // Row 0 as at M = 1 where the launches share a tile (M <= 8; the M = 9..16 entries may split K
    // differently, which changes the summation order).
    if (m <= 8) {
      for (int j = 0; j < dims.back(); ++j) ASSERT_EQ(want_m[j], want[j]) << "row 0 of the M = " << m << " chain, output " << j;
    }
    for (int launch : {1, 2})
      for (bool graph : {false, true})
        for (int rep = 0; rep < 5; ++rep)
          ASSERT_TRUE(run(launch, graph, nullptr, m) == want_m) << "M = " << m << ": PDL chain differs from the plain chain (launch "
                                                                << launch << ", graph " << graph << ", rep " << rep << ")";
  }
  // The M = 9..16 early kernel with an explicit 16-row tile (the built-in table has no early
  // entry for those launches): every launch gives the plain chain's bits.
  {
    const cuda::GemvTile t16{16, 8, 8};
    const std::vector<std::uint16_t> want_t = run(0, false, &t16, kMaxM);
    for (int launch : {1, 2})
      for (bool graph : {false, true})
        for (int rep = 0; rep < 5; ++rep)
          ASSERT_TRUE(run(launch, graph, &t16, kMaxM) == want_t)
              << "M = 12, tile 16/8/8: launch " << launch << ", graph " << graph << ", rep " << rep;
  }
  // Tiles that leave room on the SMs, so the next GEMV's blocks are resident (and, with early
  // weights, loading) while the previous one runs: each against the plain chain of the same tile
  // (the K split sets the summation order).
  for (const cuda::GemvTile tile : {cuda::GemvTile{16, 8, 8}, cuda::GemvTile{32, 4, 2}, cuda::GemvTile{16, 2, 1}}) {
    const std::vector<std::uint16_t> want_t = run(0, false, &tile);
    for (int launch : {1, 2})
      for (bool graph : {false, true})
        for (int rep = 0; rep < 5; ++rep)
          ASSERT_TRUE(run(launch, graph, &tile) == want_t)
              << "tile " << tile.cols_per_warp << "/" << tile.warps_per_block << "/" << tile.k_split << ": launch " << launch
              << ", graph " << graph << ", rep " << rep;
  }
  cudaStreamDestroy(st);
  for (void* p : act) cudaFree(p);
}

// The overlapped launch reads nothing before the previous kernel has completed, so it is exact
// even right after a kernel that writes its weights: repack A or B (alternately) into one
// repacked buffer, then the GEMV on it, ten times back to back, in a stream and in a graph.
// Each output must equal the plain-launch output of its own weight bit for bit; an early weight
// read would mix the previous weight in (the two differ in every output).
TEST(CudaRepack, OverlappedLaunchAfterARepackOfItsWeightsIsExact) {
  REQUIRE_GPU();
  const std::uint64_t seed = 4242;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::int64_t n = 16384, k = 4096;  // a 32 MB repack: microseconds of overlap to get wrong
  const QuantizedWeight qa = random_weight(n, k, seed, 0.05f), qb = random_weight(n, k, seed + 1, 0.05f);
  const DevWeight da(qa), db(qb);
  const Tensor x = random_x(DType::kBF16, 1, k, seed);
  void *dx = nullptr, *rp = nullptr, *rs = nullptr, *dy = nullptr;
  const int reps = 10;
  ASSERT_EQ(cudaMalloc(&dx, k * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&rp, qa.packed.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&rs, qa.scales.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, static_cast<std::size_t>(reps) * n * 2), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), k * 2, cudaMemcpyHostToDevice), cudaSuccess);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  const MatrixView xv{dx, DType::kBF16, 1, k, k};
  auto y_at = [&](int i) { return MatrixView{static_cast<std::uint8_t*>(dy) + static_cast<std::size_t>(i) * n * 2, DType::kBF16, 1, n, n}; };
  auto fetch = [&](int i) {
    std::vector<std::uint16_t> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), y_at(i).data, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  };
  cuda::RepackedMatmulOptions plain;
  plain.overlapped_launch = false;
  cuda::quantized_matmul_repacked(xv, da.view(), y_at(0), st, plain);
  cuda::quantized_matmul_repacked(xv, db.view(), y_at(1), st, plain);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  const std::vector<std::uint16_t> want[2] = {fetch(0), fetch(1)};
  int same = 0;
  for (std::int64_t j = 0; j < n; ++j) same += want[0][j] == want[1][j];
  ASSERT_LT(same, n / 100) << "weights A and B must give different outputs for the test to mean anything";
  const cuda::RepackedWeightView shared{static_cast<std::uint8_t*>(rp), static_cast<std::uint8_t*>(rs), qa.tensor_scale(), n, k};
  auto sequence = [&] {
    for (int i = 0; i < reps; ++i) {
      const DevWeight& w = i % 2 ? db : da;
      cuda::repack_for_gemv_sm90(WeightView{static_cast<std::uint8_t*>(w.p), static_cast<std::uint8_t*>(w.s), w.ts, n, k},
                                 static_cast<std::uint8_t*>(rp), static_cast<std::uint8_t*>(rs), st);
      cuda::quantized_matmul_repacked(xv, shared, y_at(i), st);  // overlapped launch: the default
    }
  };
  for (const bool graph : {false, true}) {
    ASSERT_EQ(cudaMemset(dy, 0xFF, static_cast<std::size_t>(reps) * n * 2), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    run_direct_or_in_graph(st, graph, sequence);
    for (int i = 0; i < reps; ++i)
      EXPECT_TRUE(fetch(i) == want[i % 2]) << "output " << i << " (weight " << (i % 2 ? "B" : "A") << ", graph " << graph << ")";
  }
  cudaStreamDestroy(st);
  for (void* p : {dx, rp, rs, dy}) cudaFree(p);
}

#endif  // NVFP4_HAVE_CUDA

}  // namespace
}  // namespace nvfp4
