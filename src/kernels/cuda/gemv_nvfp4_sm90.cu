// kernels/cuda/gemv_nvfp4_sm90.cu -- W4A16 NVFP4 GEMV for decode (M <= 16) on Hopper.
//
// Layout: the canonical checkpoint layout, read as is (format.h): packed [N, K/2] with element
// 2j in the low nibble of byte j, E4M3 scales [N, K/16]. No repack.
//
// Why tensor cores in a GEMV: at 4.45 TB/s an H200 streams ~7.9 G NVFP4 weights/us, i.e. 34
// per SM per clock. fp32 FMAs (128/SM/clk) already cap M at ~3 before any decode work, and the
// issue asks M = 16 for <= 1.15x the M = 1 time. mma.sync m16n8k16 does 16 rows for free: one
// mma covers 128 weights, so the stream needs ~0.27 mma/SM/clk, well under the mma.sync rate.
//
// Mapping (one warp, one k-step): lane = 4*g + t. Lane (g, t) owns output column n0 + g of each
// of NT n8-tiles and loads VEC contiguous bytes (2*VEC weights) of that column: a quad reads
// 4*VEC contiguous bytes, a warp 8 such runs per load -- whole 32-byte sectors, 16-byte loads
// (VEC = 16; VEC = 8 when K % 32 != 0 makes rows only 8-byte aligned). Loads are
// ld.global.nc.L1::no_allocate.L2::256B: weights are read once, so they skip L1 and ask L2 to
// fetch the following sectors of the same row (the next k-steps) early.
//
// Decode (exact): a u32 of 8 nibbles becomes 4 half2/bf162 pairs, nibbles (3,7) (2,6) (1,5)
// (0,4), by moving the nibble's sign to bit 15 and its 3 magnitude bits into the low exponent
// bits + top mantissa bit: that reads as e2m1 * 2^-14 in fp16 (e2m1 * 2^-126 in bf16; code 1
// becomes a subnormal, which fp16/bf16 multiplies keep). One multiply by the block scale
// pre-scaled by 2^7 (fp16) or 2^119 (bf16) gives e2m1 * scale * 2^-7 exactly: e2m1 * scale has
// <= 6 significant bits and lies in [2^-10, 2688], so the product is representable in both
// formats. The 2^7 goes back into the fp32 accumulator at the end, with the tensor scale:
// y = (acc * 2^7) * tensor_scale, the oracle's "tensor scale once at the end".
//
// The mma's k order inside one instruction is free as long as A and B agree: lane t feeds its own
// physical k's into the slots (2t, 2t+1, 2t+8, 2t+9), and builds the matching activation pairs
// with PRMT from one 16-byte load of 8 activations.
//
// Activations "A": 16-bit rows (bf16 or fp16). fp32 activations are split exactly into three
// bf16 pieces (hi + mid + lo == x) that ride as extra mma rows; the epilogue sums them.
//
// K split: k_split warps of a block share the same columns and take contiguous k ranges; their
// fp32 partials meet in shared memory and are summed in a fixed order (deterministic).
#include "kernels/cuda/gemv_nvfp4_sm90.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "nvfp4/dtype.h"

namespace nvfp4::cuda {
namespace {

__device__ __forceinline__ uint4 ld_stream16(const std::uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ uint2 ld_stream8(const std::uint8_t* p) {
  uint2 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

__device__ __forceinline__ std::uint32_t prmt(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
  std::uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

template <bool F16>
__device__ __forceinline__ std::uint32_t mul2(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d;
  if constexpr (F16)
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

template <bool F16>
__device__ __forceinline__ void mma16816(float c[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                         std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  if constexpr (F16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 8 E2M1 codes -> 4 pairs (see the header comment): r[i] holds nibbles (3-i, 7-i) as
// e2m1 * 2^-14 (fp16) or e2m1 * 2^-126 (bf16).
template <bool F16>
__device__ __forceinline__ void decode8(std::uint32_t q, std::uint32_t r[4]) {
  constexpr std::uint32_t kSign = 0x80008000u;
  constexpr int kShift = F16 ? 3 : 6;  // bits 14:12 -> 11:9 (fp16) or 8:6 (bf16)
  constexpr std::uint32_t kMag = F16 ? 0x0E000E00u : 0x01C001C0u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t x = q << (4 * i);
    r[i] = (x & kSign) | ((x >> kShift) & kMag);
  }
}

// Two E4M3 scale bytes (low byte first) -> two broadcast pairs (s0,s0), (s1,s1) holding
// |s| * 2^7 (fp16) or |s| * 2^119 (bf16), exact. NaN bytes stay NaN.
template <bool F16>
__device__ __forceinline__ void scale_pairs(std::uint32_t s2, std::uint32_t* lo, std::uint32_t* hi) {
  const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(s2 & 0x7F7Fu), __NV_E4M3);
  if constexpr (F16) {
    std::uint32_t h = static_cast<std::uint32_t>(hr.x) | (static_cast<std::uint32_t>(hr.y) << 16);
    h = mul2<true>(h, 0x58005800u);  // * (128, 128): exact, |s| * 128 <= 57344 < 65504
    *lo = prmt(h, h, 0x1010);
    *hi = prmt(h, h, 0x3232);
  } else {
    const float f0 = __half2float(__ushort_as_half(hr.x)) * 0x1p119f;  // <= 2^127.8, exact
    const float f1 = __half2float(__ushort_as_half(hr.y)) * 0x1p119f;
    const std::uint32_t b0 = __float_as_uint(f0) >> 16, b1 = __float_as_uint(f1) >> 16;  // 4 sig. bits: exact
    *lo = b0 | (b0 << 16);
    *hi = b1 | (b1 << 16);
  }
}

template <bool F16, int NT, int MT, int VEC>
__global__ void __launch_bounds__(512) gemv_nvfp4_kernel(GemvArgs p, int k_split) {
  constexpr int kWords = VEC / 4;     // u32 words of packed weights per lane per k-step
  constexpr int kKThread = VEC * 2;   // weights (k) per lane per k-step
  constexpr int kKStep = kKThread * 4;  // k per k-step (a quad)
  constexpr int kCols = 8 * NT;       // output columns per warp
  extern __shared__ float red[];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = blockDim.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int slice = warp % k_split, grp = warp / k_split, groups = nwarps / k_split;
  const std::int64_t K = p.k;
  const std::int64_t col0 = (static_cast<std::int64_t>(blockIdx.x) * groups + grp) * kCols;
  const std::int64_t nsteps = (K + kKStep - 1) / kKStep;
  const std::int64_t per = (nsteps + k_split - 1) / k_split;
  const std::int64_t s_beg = min(nsteps, slice * per);
  const std::int64_t s_end = min(nsteps, s_beg + per);
  const int vr_total = p.pieces * p.m_rows;

  const std::uint8_t* wp[NT];
  const std::uint8_t* sp[NT];
  bool cv[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const std::int64_t n = col0 + 8 * j + g;
    cv[j] = n < p.n;
    const std::int64_t nn = cv[j] ? n : 0;
    wp[j] = p.packed + nn * (K / 2) + t * VEC;
    sp[j] = p.scales + nn * (K / 16) + t * (VEC / 8);
  }
  const std::uint16_t* ap[MT][2];
  bool av[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int vr = 16 * i + g + 8 * h;
      av[i][h] = vr < vr_total;
      ap[i][h] = static_cast<const std::uint16_t*>(p.a) + (av[i][h] ? vr : 0) * p.a_stride + t * kKThread;
    }

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

  // Both k-steps' loads (NT*2 16-byte loads per lane) are issued before either is computed.
  // Measured on H200 (docs/perf-cuda.md): a register double buffer (load s+1 while computing s)
  // was no faster (16384^2: 82 vs 81 us; 151936x2560: 117 vs 107 us), so this simpler order stays.
  auto load_step = [&](std::int64_t s, std::uint32_t (&wq)[NT][kWords], std::uint32_t (&sc)[NT]) {
    const bool kv = s < s_end && s * kKStep + t * kKThread < K;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      if (kv && cv[j]) {
        const std::uint8_t* w = wp[j] + s * (kKStep / 2);
        if constexpr (VEC == 16) {
          const uint4 v = ld_stream16(w);
          wq[j][0] = v.x; wq[j][1] = v.y; wq[j][2] = v.z; wq[j][3] = v.w;
          sc[j] = __ldg(reinterpret_cast<const unsigned short*>(sp[j] + s * (kKStep / 16)));
        } else {
          const uint2 v = ld_stream8(w);
          wq[j][0] = v.x; wq[j][1] = v.y;
          sc[j] = __ldg(sp[j] + s * (kKStep / 16));
        }
      } else {
#pragma unroll
        for (int w = 0; w < kWords; ++w) wq[j][w] = 0;
        sc[j] = 0;
      }
    }
  };
  auto compute_step = [&](std::int64_t s, const std::uint32_t (&wq)[NT][kWords], const std::uint32_t (&sc)[NT]) {
    const bool kv = s * kKStep + t * kKThread < K;
    std::uint32_t slo[NT], shi[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) scale_pairs<F16>(sc[j], &slo[j], &shi[j]);
#pragma unroll
    for (int w = 0; w < kWords; ++w) {
      // Activation pairs for this word, matching decode8's order.
      std::uint32_t af[MT][2][4];
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint4 v = make_uint4(0, 0, 0, 0);
          if (kv && av[i][h] && 16 * i < vr_total)
            v = __ldg(reinterpret_cast<const uint4*>(ap[i][h] + s * kKStep + 8 * w));
          af[i][h][0] = prmt(v.y, v.w, 0x7632);  // (x3, x7)
          af[i][h][1] = prmt(v.y, v.w, 0x5410);  // (x2, x6)
          af[i][h][2] = prmt(v.x, v.z, 0x7632);  // (x1, x5)
          af[i][h][3] = prmt(v.x, v.z, 0x5410);  // (x0, x4)
        }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        std::uint32_t b[4];
        decode8<F16>(wq[j][w], b);
        // VEC 16: words 0,1 are block 2t, words 2,3 block 2t+1. VEC 8: one block.
        const std::uint32_t sw = (VEC == 16 && w >= 2) ? shi[j] : slo[j];
#pragma unroll
        for (int r = 0; r < 4; ++r) b[r] = mul2<F16>(b[r], sw);
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          if (16 * i < vr_total) {  // warp-uniform
            mma16816<F16>(acc[i][j], af[i][0][0], af[i][1][0], af[i][0][1], af[i][1][1], b[0], b[1]);
            mma16816<F16>(acc[i][j], af[i][0][2], af[i][1][2], af[i][0][3], af[i][1][3], b[2], b[3]);
          }
        }
      }
    }
  };
  std::uint32_t wq0[NT][kWords], sc0[NT], wq1[NT][kWords], sc1[NT];
  for (std::int64_t s = s_beg; s < s_end; s += 2) {
    load_step(s, wq0, sc0);
    load_step(s + 1, wq1, sc1);
    compute_step(s, wq0, sc0);
    if (s + 1 >= s_end) break;  // warp-uniform
    compute_step(s + 1, wq1, sc1);
  }

  // Partials -> shared memory [warp][virtual row][column], then a fixed-order sum.
  float* mine = red + static_cast<std::size_t>(warp) * vr_total * kCols;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int vr = 16 * i + g + 8 * h;
        if (vr < vr_total) {
          mine[vr * kCols + 8 * j + 2 * t] = acc[i][j][2 * h];
          mine[vr * kCols + 8 * j + 2 * t + 1] = acc[i][j][2 * h + 1];
        }
      }
  __syncthreads();
  const int cols_blk = groups * kCols;
  const DType yt = static_cast<DType>(p.y_dtype);
  for (int o = threadIdx.x; o < p.m_rows * cols_blk; o += blockDim.x) {
    const int m = o / cols_blk, c = o % cols_blk;
    const int gr = c / kCols, cc = c % kCols;
    const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * cols_blk + c;
    if (n >= p.n) continue;
    float sum = 0.0f;
    for (int pc = 0; pc < p.pieces; ++pc)
      for (int s = 0; s < k_split; ++s)
        sum += red[(static_cast<std::size_t>(gr * k_split + s) * vr_total + pc * p.m_rows + m) * kCols + cc];
    store_from_f32(p.y, yt, m * p.y_stride + n, (sum * 128.0f) * p.tensor_scale);
  }
}

template <bool F16, int NT, int MT, int VEC>
cudaError_t launch(const GemvArgs& a, const GemvTile& tile, cudaStream_t stream) {
  const int warps = tile.warps_per_block, ks = tile.k_split;
  const int groups = warps / ks;
  const std::int64_t cols_blk = static_cast<std::int64_t>(groups) * 8 * NT;
  const std::int64_t blocks = (a.n + cols_blk - 1) / cols_blk;
  const std::size_t smem = static_cast<std::size_t>(warps) * a.pieces * a.m_rows * 8 * NT * sizeof(float);
  gemv_nvfp4_kernel<F16, NT, MT, VEC><<<static_cast<unsigned>(blocks), warps * 32, smem, stream>>>(a, ks);
  return cudaGetLastError();
}

}  // namespace

bool gemv_vec16_ok(const GemvArgs& a) {
  return a.k % 32 == 0 && reinterpret_cast<std::uintptr_t>(a.packed) % 16 == 0;
}

// The instantiations that earn their place (CI compiles them on 2 cores):
//   16-byte path: bf16/fp16 x {16, 32 columns per warp} for <= 16 rows; bf16 x 16 columns for
//   the 48 virtual rows of fp32 activations (M 6..16).
//   8-byte path (K % 32 == 16): bf16/fp16 at 16 columns, bf16 with 48 rows.
cudaError_t gemv_nvfp4_sm90(const GemvArgs& a, const GemvTile& tile_in, cudaStream_t stream) {
  GemvTile tile = tile_in;
  const int vr = a.pieces * a.m_rows;
  const bool vec16 = gemv_vec16_ok(a);
  const bool mt3 = vr > 16;
  if (mt3 || !vec16) tile.cols_per_warp = 16;  // only 16 columns per warp instantiated there
  const bool nt4 = tile.cols_per_warp == 32;
  if (vec16) {
    if (mt3) return launch<false, 2, 3, 16>(a, tile, stream);
    if (a.a_f16) return nt4 ? launch<true, 4, 1, 16>(a, tile, stream) : launch<true, 2, 1, 16>(a, tile, stream);
    return nt4 ? launch<false, 4, 1, 16>(a, tile, stream) : launch<false, 2, 1, 16>(a, tile, stream);
  }
  if (mt3) return launch<false, 2, 3, 8>(a, tile, stream);
  if (a.a_f16) return launch<true, 2, 1, 8>(a, tile, stream);
  return launch<false, 2, 1, 8>(a, tile, stream);
}

const char* gemv_nvfp4_sm90_name(const GemvArgs& a, const GemvTile& tile) {
  const bool vec16 = gemv_vec16_ok(a);
  const bool mt3 = a.pieces * a.m_rows > 16;
  const bool nt4 = tile.cols_per_warp == 32 && vec16 && !mt3;
  if (!vec16) return mt3 ? "gemv_nvfp4_sm90_v8_c16_r48" : "gemv_nvfp4_sm90_v8_c16";
  if (mt3) return "gemv_nvfp4_sm90_v16_c16_r48";
  return nt4 ? "gemv_nvfp4_sm90_v16_c32" : "gemv_nvfp4_sm90_v16_c16";
}

}  // namespace nvfp4::cuda
