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

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/repack_nvfp4_sm90.h"
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

// The repacked kernel's weight load: no L2 prefetch hint. A warp's load there already covers
// 512 contiguous bytes (whole 256-byte runs) and its next chunk pair is loaded one iteration
// ahead anyway; measured on H200 (bench/results/cuda-2026-11-30-h200-l2hint-*.json, same run,
// two passes each, graph us): without the hint 1.0-1.8% faster at every M = 1 shape (16384^2
// 40.17 / 40.27 vs 41.03 / 40.68) and at M = 16. The first kernel keeps .L2::256B: without it
// that kernel was 11% slower (M = 16, 16384^2: 100.7 vs 90.2-90.7 us).
__device__ __forceinline__ uint4 ld_stream16_nohint(const std::uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
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

// Where a thread sits in the static schedule shared by every GEMV kernel here: a block is
// `groups` column groups x k_split warps, warp (grp, slice) takes the slice's contiguous share
// [beg, end) of `steps` k-steps; lane = 4g + t (the mma fragment coordinates).
template <class I>
struct WarpSlot {
  int lane, warp, g, t, grp, groups;
  I beg, end;
};

template <class I>
__device__ __forceinline__ WarpSlot<I> warp_slot(int k_split, I steps) {
  WarpSlot<I> s;
  s.lane = threadIdx.x & 31;
  s.warp = threadIdx.x >> 5;
  s.g = s.lane >> 2;
  s.t = s.lane & 3;
  s.grp = s.warp / k_split;
  s.groups = (blockDim.x >> 5) / k_split;
  const I per = (steps + k_split - 1) / k_split;
  s.beg = min(steps, (s.warp % k_split) * per);
  s.end = min(steps, s.beg + per);
  return s;
}

// Second half of every kernel's epilogue, after the barrier: partials red[warp][virtual row][c]
// (C outputs per warp; warp = column group * k_split + slice). Output (m, n) of this block is the
// fixed-order sum over the K split and over the `pieces` exact bf16 pieces of fp32/fp16
// activations, times 2^7 (the decode's exponent offset, docs/perf-cuda.md 2) and the tensor
// scale, rounded once to the output dtype. Fixed order: results do not depend on timing.
// kFast (the M <= 8 rp and wa kernels, where small grids spend a visible part of their time
// here): per_blk is a power of two for every tile the tuner writes (warps and k_split are), so a
// shift replaces an integer division's ~20 instructions, and the slices' shared loads are
// unrolled so several are in flight, the adds in the same order (bit-identical). Not used at
// M = 9..16: there it pushed rp<2,2> to 128 registers with spills in the main loop.
template <int C, bool kFast = false>
__device__ __forceinline__ void sum_partials_and_store(const float* red, const GemvArgs& p, int k_split, int groups) {
  const int vr_total = p.pieces * p.m_rows;
  const int per_blk = groups * C;
  const DType yt = static_cast<DType>(p.y_dtype);
  const bool pow2 = kFast && (per_blk & (per_blk - 1)) == 0;
  const int sh = __ffs(per_blk) - 1;
  for (int o = threadIdx.x; o < p.m_rows * per_blk; o += blockDim.x) {
    const int m = pow2 ? o >> sh : o / per_blk, c = pow2 ? o & (per_blk - 1) : o % per_blk;
    const int gr = c / C, cc = c % C;
    const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * per_blk + c;
    if (n >= p.n) continue;
    float sum = 0.0f;
    if constexpr (kFast) {
      const std::size_t s_stride = static_cast<std::size_t>(vr_total) * C;
      for (int pc = 0; pc < p.pieces; ++pc) {
        const float* r = red + (static_cast<std::size_t>(gr * k_split) * vr_total + pc * p.m_rows + m) * C + cc;
#pragma unroll 4
        for (int s = 0; s < k_split; ++s) sum += r[s * s_stride];
      }
    } else {
      for (int pc = 0; pc < p.pieces; ++pc)
        for (int s = 0; s < k_split; ++s)
          sum += red[(static_cast<std::size_t>(gr * k_split + s) * vr_total + pc * p.m_rows + m) * C + cc];
    }
    store_from_f32(p.y, yt, m * p.y_stride + n, (sum * 128.0f) * p.tensor_scale);
  }
}

template <bool F16, int NT, int MT, int VEC>
__global__ void __launch_bounds__(512) gemv_nvfp4_kernel(GemvArgs p, int k_split) {
  constexpr int kWords = VEC / 4;     // u32 words of packed weights per lane per k-step
  constexpr int kKThread = VEC * 2;   // weights (k) per lane per k-step
  constexpr int kKStep = kKThread * 4;  // k per k-step (a quad)
  constexpr int kCols = 8 * NT;       // output columns per warp
  extern __shared__ float red[];

  // The schedule of warp_slot, written out: routed through it (64- or 32-bit steps) this kernel's
  // register allocation moved by +-10 and its M = 8..16 times by +-2-4% (H200 A/B,
  // bench/results/device-2026-11-30-h200-review-ab.log), so it keeps its own tuned form.
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
  sum_partials_and_store<kCols>(red, p, k_split, groups);
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


// ---------------------------------------------------------------------------------------------
// Weights-as-A kernel ("wa"): runs for K % 64 == 0, 16-byte aligned packed rows, 4-byte aligned
// scales and one virtual activation row (see wa_ok for why only M = 1). Same exact decode, three changes against the
// kernel above, each from the measured diagnosis in docs/perf-cuda.md (issue- and latency-bound,
// 16 warps/SM at 127 registers):
//  * The mma's A operand (16 x 16) is the decoded weights, B (16 x 8) the activations: one mma
//    covers 256 weights instead of 128 (half the HMMAs), and the activation pairs (PRMT) are built
//    once per k-step and reused by every row tile of the warp.
//    Lane (g, t) owns output rows g and g+8 of each 16-row tile and physical k's
//    [32t, 32t+32) of each 128-k step (16 contiguous bytes per row: a quad reads 64 contiguous
//    bytes). Word w of a row (8 nibbles) gives 4 pairs (nibble i, i+4): pairs 0,1 are mma
//    (w, 0)'s a0/a2 (row g) and a1/a3 (row g+8), pairs 2,3 mma (w, 1)'s; B = (x_i, x_i+4) pairs
//    of the same k's, so A and B agree on the (free) order of k inside the instruction.
//    Accumulator c0..c3 = rows (g, g, g+8, g+8) x virtual activation rows (2t, 2t+1, 2t, 2t+1).
//  * Weights and scales reach shared memory through cp.async (LDGSTS), kStages deep: bytes in
//    flight no longer cost registers. Each lane copies exactly the bytes it later reads, so the
//    only synchronisation is its own cp.async.wait_group (no barrier, no cross-lane hazard).
//  * Fewer registers (no double-buffered uint4s): 59-64 (ptxas -v) instead of 127.
// Measured (docs/perf-cuda.md 6): within +-8% of the first kernel. ncu + SASS show why: the loop
// issues 660 instructions per 128 weights per lane (5.2/weight; decode 16 + 4 HMUL2 per 8
// weights, the rest addressing/predication), so it is issue-bound like the first kernel.
// ---------------------------------------------------------------------------------------------
constexpr int kStages = 4;          // cp.async ring depth per warp (k-steps of 128)
constexpr int kWaStepK = 128;       // k per step: 4 lanes x 32
constexpr int kWaSlotBytes = 20;    // per lane per row per stage: 16 weight bytes + 4 scale bytes

__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, bool valid) {
  // src-size 0 zero-fills the 16 bytes without reading global memory (PTX ISA, cp.async).
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async4(std::uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }

// Two E4M3 scale bytes (low byte first) -> one pair (s0, s1) holding |s| * 2^7 (fp16) or
// |s| * 2^119 (bf16), exact; NaN bytes stay NaN. (Not broadcast: see wa_scale_bcast.)
template <bool F16>
__device__ __forceinline__ std::uint32_t scale_pair(std::uint32_t s2) {
  const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(s2 & 0x7F7Fu), __NV_E4M3);
  if constexpr (F16) {
    const std::uint32_t h = static_cast<std::uint32_t>(hr.x) | (static_cast<std::uint32_t>(hr.y) << 16);
    return mul2<true>(h, 0x58005800u);  // * 128: exact, |s| * 128 <= 57344 < 65504
  } else {
    const float f0 = __half2float(__ushort_as_half(hr.x)) * 0x1p119f;  // <= 2^127.8, exact
    const float f1 = __half2float(__ushort_as_half(hr.y)) * 0x1p119f;
    return (__float_as_uint(f0) >> 16) | (__float_as_uint(f1) & 0xFFFF0000u);  // 4 sig. bits: exact
  }
}

// decode8's result for the wa kernel, bf16, in fewer integer ops: pair (i, i+4) of a canonical
// word needs its sign moved by 12-4i bits and its magnitude by 6-4i; with m = the two nibbles,
// (m << a) | (m << (a + 6)) puts both in place (a = 6-4i), and the two shifted copies of a 4-bit
// nibble 6 bits apart never overlap, so the multiply m * (2^a + 2^(a+6)) adds without carries
// (one IMAD, on the FMA pipe, instead of two shifts and a merge on the integer pipe). a < 0 for
// i = 2, 3: the same on q >> 8 with the i = 0, 1 constants. Result order as decode8: r[3-i].
__device__ __forceinline__ void decode8_bf16_mul(std::uint32_t q, std::uint32_t r[4]) {
  constexpr std::uint32_t kT = 0x81C081C0u;  // bf16 sign + low 2 exponent bits + top mantissa bit
  const std::uint32_t q8 = q >> 8;
  r[3] = ((q & 0x000F000Fu) * ((1u << 6) + (1u << 12))) & kT;  // nibbles 0, 4
  r[2] = ((q & 0x00F000F0u) * ((1u << 2) + (1u << 8))) & kT;   // nibbles 1, 5
  r[1] = ((q8 & 0x000F000Fu) * ((1u << 6) + (1u << 12))) & kT; // nibbles 2, 6
  r[0] = ((q8 & 0x00F000F0u) * ((1u << 2) + (1u << 8))) & kT;  // nibbles 3, 7
}

// Epilogue of the weights-as-A kernels (wa, rp): the mma accumulators (A rows = outputs, B
// columns = virtual activation rows) go to shared memory [warp][virtual row][row]; after a barrier
// sum_partials_and_store.
template <int RT, int NB>
__device__ __forceinline__ void reduce_and_store(const float (&acc)[RT][NB][4], float* red, const GemvArgs& p, int warp,
                                                 int k_split, int groups, int g, int t) {
  constexpr int kRows = 16 * RT;
  const int vr_total = p.pieces * p.m_rows;
  float* mine = red + static_cast<std::size_t>(warp) * vr_total * kRows;
#pragma unroll
  for (int rt = 0; rt < RT; ++rt)
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int vr = 8 * b + 2 * t + (c & 1);
        const int row = 16 * rt + g + 8 * (c >> 1);
        if (vr < vr_total) mine[vr * kRows + row] = acc[rt][b][c];
      }
  __syncthreads();
  sum_partials_and_store<kRows, NB == 1>(red, p, k_split, groups);
}

template <bool F16, int RT, int NB>
__global__ void __launch_bounds__(512) gemv_nvfp4_wa_kernel(GemvArgs p, int k_split) {
  constexpr int kRows = 16 * RT;  // output rows per warp
  extern __shared__ __align__(16) unsigned char wa_smem[];
  const std::int64_t K = p.k;
  const std::int64_t nsteps = (K + kWaStepK - 1) / kWaStepK;
  const auto ws = warp_slot<std::int64_t>(k_split, nsteps);
  const int lane = ws.lane, warp = ws.warp, g = ws.g, t = ws.t, nwarps = blockDim.x >> 5, groups = ws.groups;
  const std::int64_t s_beg = ws.beg, s_end = ws.end;
  const std::int64_t row0 = (static_cast<std::int64_t>(blockIdx.x) * groups + ws.grp) * kRows;
  const int vr_total = p.pieces * p.m_rows;

  // Ring: [stage][row slot 0..2RT-1][lane] uint4 weights, then [stage][row slot][lane] u32 scales.
  unsigned char* ring = wa_smem + static_cast<std::size_t>(warp) * kStages * 2 * RT * 32 * kWaSlotBytes;
  const std::uint32_t ring_w = static_cast<std::uint32_t>(__cvta_generic_to_shared(ring)) + lane * 16;
  const std::uint32_t ring_s = static_cast<std::uint32_t>(__cvta_generic_to_shared(ring)) +
                               kStages * 2 * RT * 32 * 16 + lane * 4;

  const std::uint8_t* wrow[2 * RT];
  const std::uint8_t* srow[2 * RT];
  bool rv[2 * RT];
#pragma unroll
  for (int r = 0; r < 2 * RT; ++r) {
    const std::int64_t n = row0 + 16 * (r >> 1) + g + 8 * (r & 1);
    rv[r] = n < p.n;
    const std::int64_t nn = rv[r] ? n : 0;
    wrow[r] = p.packed + nn * (K / 2) + t * 16;
    srow[r] = p.scales + nn * (K / 16) + (t >> 1) * 4;  // the 4-byte word holding blocks 2t, 2t+1
  }
  const std::uint16_t* arow[NB];
  bool avld[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    const int vr = 8 * b + g;
    avld[b] = vr < vr_total;
    arow[b] = static_cast<const std::uint16_t*>(p.a) + (avld[b] ? vr : 0) * p.a_stride + t * 32;
  }

  auto issue = [&](std::int64_t s) {
    const int slot = static_cast<int>(s % kStages);
    const bool kv = s < s_end && s * kWaStepK + t * 32 < K;  // K % 64 == 0: a lane's 32 k are all in or all out
    // Invalid rows already point at row 0; steps past the end point at the last step. With
    // src-size 0 nothing is read either way, but the address stays inside the allocation.
    const std::uint32_t sc = static_cast<std::uint32_t>(min(s, nsteps - 1));
#pragma unroll
    for (int r = 0; r < 2 * RT; ++r) {
      const bool v = kv && rv[r];
      const int idx = (slot * 2 * RT + r) * 32;
      cp_async16(ring_w + idx * 16, wrow[r] + sc * (kWaStepK / 2), v);
      cp_async4(ring_s + idx * 4, srow[r] + sc * (kWaStepK / 16), v);
    }
    cp_async_commit();
  };

  float acc[RT][NB][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[r][b][c] = 0.0f;

#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(s_beg + i);
  for (std::int64_t s = s_beg; s < s_end; ++s) {
    // Slot (s + kStages - 1) % kStages was read (into registers, already consumed) at s - 1.
    issue(s + kStages - 1);
    const bool kv = s * kWaStepK + t * 32 < K;
    // Activations: 32 k of virtual row 8b + g (L1-resident, reused by every warp); issued before
    // the wait so their latency overlaps it.
    uint4 xv[NB][4];
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int w = 0; w < 4; ++w)
        xv[b][w] = (kv && avld[b]) ? __ldg(reinterpret_cast<const uint4*>(arow[b] + s * kWaStepK + 8 * w))
                                   : make_uint4(0, 0, 0, 0);
    cp_async_wait<kStages - 1>();  // this thread's group for step s has landed
    const int slot = static_cast<int>(s % kStages);
    std::uint32_t bf[NB][4][4];  // [b][word][pair i] = (x_{8w+i}, x_{8w+i+4})
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        bf[b][w][0] = prmt(xv[b][w].x, xv[b][w].z, 0x5410);
        bf[b][w][1] = prmt(xv[b][w].x, xv[b][w].z, 0x7632);
        bf[b][w][2] = prmt(xv[b][w].y, xv[b][w].w, 0x5410);
        bf[b][w][3] = prmt(xv[b][w].y, xv[b][w].w, 0x7632);
      }
#pragma unroll
    for (int rt = 0; rt < RT; ++rt) {
      uint4 q[2];
      std::uint32_t slo[2], shi[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int idx = (slot * 2 * RT + 2 * rt + h) * 32;
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(q[h].x), "=r"(q[h].y), "=r"(q[h].z), "=r"(q[h].w)
                     : "r"(ring_w + idx * 16));
        std::uint32_t sw;
        asm volatile("ld.shared.u32 %0, [%1];" : "=r"(sw) : "r"(ring_s + idx * 4));
        const std::uint32_t s2 = (t & 1) ? (sw >> 16) : (sw & 0xFFFFu);  // blocks 2t, 2t+1
        const std::uint32_t sp = scale_pair<F16>(s2);
        slo[h] = prmt(sp, sp, 0x1010);
        shi[h] = prmt(sp, sp, 0x3232);
      }
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const std::uint32_t w0 = w == 0 ? q[0].x : (w == 1 ? q[0].y : (w == 2 ? q[0].z : q[0].w));
        const std::uint32_t w1 = w == 0 ? q[1].x : (w == 1 ? q[1].y : (w == 2 ? q[1].z : q[1].w));
        std::uint32_t d0[4], d1[4];
        if constexpr (F16) {
          decode8<true>(w0, d0);  // d[3 - i] = nibbles (i, i+4)
          decode8<true>(w1, d1);
        } else {
          decode8_bf16_mul(w0, d0);
          decode8_bf16_mul(w1, d1);
        }
        const std::uint32_t s0 = w < 2 ? slo[0] : shi[0], s1 = w < 2 ? slo[1] : shi[1];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          d0[i] = mul2<F16>(d0[i], s0);
          d1[i] = mul2<F16>(d1[i], s1);
        }
#pragma unroll
        for (int b = 0; b < NB; ++b) {
          if (b == 0 || 8 * b < vr_total) {  // warp-uniform; tile 0 always has a row
            mma16816<F16>(acc[rt][b], d0[3], d1[3], d0[2], d1[2], bf[b][w][0], bf[b][w][1]);
            mma16816<F16>(acc[rt][b], d0[1], d1[1], d0[0], d1[0], bf[b][w][2], bf[b][w][3]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy may outlive the block (zero-fill groups past s_end)

  // Partials -> shared memory (after the rings), fixed-order sum.
  float* red = reinterpret_cast<float*>(wa_smem + static_cast<std::size_t>(nwarps) * kStages * 2 * RT * 32 * kWaSlotBytes);
  reduce_and_store<RT, NB>(acc, red, p, warp, k_split, groups, g, t);
}

template <bool F16, int RT, int NB>
cudaError_t launch_wa(const GemvArgs& a, const GemvTile& tile, cudaStream_t stream) {
  const int warps = tile.warps_per_block, ks = tile.k_split;
  const int groups = warps / ks;
  const std::int64_t rows_blk = static_cast<std::int64_t>(groups) * 16 * RT;
  const std::int64_t blocks = (a.n + rows_blk - 1) / rows_blk;
  const std::size_t smem = static_cast<std::size_t>(warps) * kStages * 2 * RT * 32 * kWaSlotBytes +
                           static_cast<std::size_t>(warps) * a.pieces * a.m_rows * 16 * RT * sizeof(float);
  // Max: 16 warps x 4 stages x 4 slots x 640 B + 16 x 16 x 32 x 4 B = 196 KB < 227 KB (sm_90).
  static const cudaError_t attr = cudaFuncSetAttribute(gemv_nvfp4_wa_kernel<F16, RT, NB>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  if (attr != cudaSuccess) return attr;
  gemv_nvfp4_wa_kernel<F16, RT, NB><<<static_cast<unsigned>(blocks), warps * 32, smem, stream>>>(a, ks);
  return cudaGetLastError();
}

// Only one virtual activation row (M = 1, bf16/fp16): measured on H200 (docs/perf-cuda.md 6,
// same run, graph us, wa vs first kernel) the wa kernel is 2-8% faster at M = 1 on 5 of 7 shapes
// but 2-5% slower at M = 2..8 (16384^2) and 18% slower at M = 16 (4096x14336), so the second
// n8 tile (NB = 2) is not instantiated and M > 1 stays on the first kernel.
bool wa_ok(const GemvArgs& a, const GemvTile& tile) {
  return !tile.legacy && a.k > 0 && a.k % 64 == 0 && reinterpret_cast<std::uintptr_t>(a.packed) % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(a.scales) % 4 == 0 && a.pieces * a.m_rows == 1;
}

// ---------------------------------------------------------------------------------------------
// Repacked kernel ("rp"): weights in the gemv_sm90 layout (repack_nvfp4_sm90.h), bf16 operand
// rows, 1..16 virtual rows (NB = 1 n8 tile for <= 8, 2 for <= 16): bf16 activations as they
// are, fp16 / fp32 as 2 / 3 exact bf16 pieces prepared by the API layer and summed in the
// epilogue (reduce_and_store). Overlapped (programmatic dependent) launch when GemvArgs::pdl.
// Per lane and 64-k chunk: one 16-byte load = 32 weights = the A fragments of 4 mma steps for
// rows g, g+8; per 2 chunks one 4-byte scale load. Per 32 weights: decode 4 x 9 integer ops,
// 16 HMUL2, 4 HMMA per n8 tile, 4 scale ops, 2 activation loads (shared by the RT row tiles).
// Measured in SASS (scripts/sass.sh): 142 instructions per warp and chunk pair at M = 1, of
// which ~127 are that work; the kernel uses about half of every scheduler's issue slots, so
// every other instruction in the loop costs time (docs/perf-cuda.md 15-16). B = the lane's own
// activation words (no PRMT). Register buffers of weights + scales: two at M <= 8
// (rp_accumulate), two or three at M = 9..16 (rp_accumulate_m16).
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ std::uint32_t ld_stream4(const std::uint8_t* p) {
  std::uint32_t v;
  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// The weight loads that EARLY kernels issue before griddepcontrol.wait: coherent and volatile,
// because ptxas moves ld.global.nc below the wait (checked in SASS, sm_90a, CUDA 13.0); a plain
// ld.global stays above it. (.nc loads pinned above the wait by a shared store of a loaded word
// were no faster at any shape and made the decode replay 1.15% slower: docs/perf-cuda.md 18.2.)
__device__ __forceinline__ uint4 ld_early16(const std::uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ std::uint32_t ld_early4(const std::uint8_t* p) {
  std::uint32_t v;
  asm volatile("ld.global.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ void rp_decode(std::uint32_t q, std::uint32_t r[4]) {
  r[0] = q & repack::kMaskP;
  r[1] = __funnelshift_r(q, q, 6) & repack::kMaskP;
  r[2] = __funnelshift_r(q, q, 12) & repack::kMaskP;
  r[3] = ((q << 6) & 0x80C080C0u) | ((q >> 2) & 0x01000100u);
}

// Private scale byte `sel` of s -> bf16x2 (|scale| * 2^119, broadcast): PRMT + IMAD.
template <int SEL>
__device__ __forceinline__ std::uint32_t rp_scale(std::uint32_t s) {
  const std::uint32_t v = prmt(s, 0u, 0x4040u | (SEL << 8) | SEL);  // byte SEL at bytes 0 and 2
  return v * 16u + 0x76007600u;
}

// Programmatic dependent launch (PTX ISA griddepcontrol, sm_90). launch_dependents lets the next
// kernel on the stream be scheduled once every block of this grid has issued it (its blocks then
// fill SMs as ours retire); wait blocks until every prerequisite grid has completed and its
// memory operations are visible. Both are no-ops when the launch did not ask for PDL.
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Half h of a chunk pair of RT row tiles (weights w, scales s) against NB n8 tiles of
// activation words xw (this half's), added to acc: decode, scale, mma.
template <int RT, int NB>
__device__ __forceinline__ void rp_half(int h, const uint4 (&w)[RT][2], const std::uint32_t (&s)[RT],
                                        const std::uint32_t (&xw)[NB][8], float (&acc)[RT][NB][4]) {
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const std::uint32_t sg = h ? rp_scale<2>(s[r]) : rp_scale<0>(s[r]);
    const std::uint32_t sg8 = h ? rp_scale<3>(s[r]) : rp_scale<1>(s[r]);
    const uint4 q4 = w[r][h];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::uint32_t q = j == 0 ? q4.x : (j == 1 ? q4.y : (j == 2 ? q4.z : q4.w));
      std::uint32_t d[4];
      rp_decode(q, d);
      d[0] = mul2<false>(d[0], sg);
      d[1] = mul2<false>(d[1], sg8);
      d[2] = mul2<false>(d[2], sg);
      d[3] = mul2<false>(d[3], sg8);
#pragma unroll
      for (int b = 0; b < NB; ++b)
        mma16816<false>(acc[r][b], d[0], d[1], d[2], d[3], xw[b][2 * j], xw[b][2 * j + 1]);
    }
  }
}

// The activation words of lane (g, t) for one half chunk: 8 u32 from px (16-byte aligned).
__device__ __forceinline__ void rp_load_x(const uint4* px, std::uint32_t (&xw)[8]) {
  const uint4 v0 = __ldg(px), v1 = __ldg(px + 1);
  xw[0] = v0.x; xw[1] = v0.y; xw[2] = v0.z; xw[3] = v0.w;
  xw[4] = v1.x; xw[5] = v1.y; xw[6] = v1.z; xw[7] = v1.w;
}

// The rp main loop for M <= 8 (NB = 1): chunk pairs [c_beg, c_end) of RT row tiles (bases wt/st
// include this lane's offset) against the activation rows xr, added to acc. Two register
// buffers: pair cp + 1 is in flight while pair cp is computed.
// EARLY (RepackedMatmulOptions::weights_read_early): both buffers are loaded before the PDL
// wait, which this function then issues; the activation bases pass through a volatile asm after
// it, so no activation load is hoisted above the wait.
template <int RT, int NB, bool EARLY = false>
__device__ __forceinline__ void rp_accumulate(const std::uint8_t* const (&wt)[RT], const std::uint8_t* const (&st)[RT],
                                              const std::uint16_t* const (&xr_in)[NB], int c_beg,
                                              int c_end, float (&acc)[RT][NB][4]) {
  const std::uint16_t* xr[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) xr[b] = xr_in[b];
  // Pair cp's weights and scales into w / s: the main loop's .nc loads, or (early_tag true) the
  // coherent volatile ones EARLY issues before the wait (ld_early16/4).
  auto load_pair = [&](auto early_tag, int cp, uint4 (&w)[RT][2], std::uint32_t (&s)[RT]) {
    const std::uint32_t wo = static_cast<std::uint32_t>(cp) * 1024u, so = static_cast<std::uint32_t>(cp) * 128u;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      if constexpr (decltype(early_tag)::value) {
        w[r][0] = ld_early16(wt[r] + wo);
        w[r][1] = ld_early16(wt[r] + wo + 512);
        s[r] = ld_early4(st[r] + so);
      } else {
        w[r][0] = ld_stream16_nohint(wt[r] + wo);
        w[r][1] = ld_stream16_nohint(wt[r] + wo + 512);
        s[r] = ld_stream4(st[r] + so);
      }
    }
  };
  auto load = [&](int cp, uint4 (&w)[RT][2], std::uint32_t (&s)[RT]) { load_pair(std::false_type{}, cp, w, s); };
  auto compute = [&](int cp, const uint4 (&w)[RT][2], const std::uint32_t (&s)[RT]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      std::uint32_t xw[NB][8];
#pragma unroll
      for (int b = 0; b < NB; ++b)
        // Pair cp = 16 uint4 of the row, half h its 8 uint4 from 8h: one unsigned 32-bit offset
        // per pair, immediate offsets for the halves (a signed (2cp + h) * 64 cost 5 integer ops
        // per half in SASS).
        rp_load_x(reinterpret_cast<const uint4*>(xr[b]) + static_cast<std::uint32_t>(cp) * 16u + 8 * h, xw[b]);
      rp_half<RT, NB>(h, w, s, xw, acc);
    }
  };
  uint4 wa[RT][2], wb[RT][2];
  std::uint32_t sa[RT], sb[RT];
  if constexpr (!EARLY) {
    if (c_beg < c_end) load(c_beg, wa, sa);
  } else {
    // Coherent volatile loads (ld_early16/4): ptxas moved the .nc loads of `load` below the
    // wait (SASS: every LDG after ACQBULK), which would have read nothing early.
    if (c_beg < c_end) load_pair(std::true_type{}, c_beg, wa, sa);
    if (c_beg + 1 < c_end) load_pair(std::true_type{}, c_beg + 1, wb, sb);
    pdl_wait();
#pragma unroll
    for (int b = 0; b < NB; ++b) asm volatile("" : "+l"(xr[b]));
  }
  for (int cp = c_beg; cp < c_end; cp += 2) {
    if ((!EARLY || cp != c_beg) && cp + 1 < c_end) load(cp + 1, wb, sb);  // warp-uniform
    compute(cp, wa, sa);
    if (cp + 1 >= c_end) break;
    if (cp + 2 < c_end) load(cp + 2, wa, sa);
    compute(cp + 1, wb, sb);
  }
}

// The rp main loop for M = 9..16 (NB = 2), same contract, with running pointers and immediate
// offsets. RT = 2: three register buffers (pairs cp + 1 and cp + 2 in flight while cp is
// computed; 16384^2 at M = 16: 44.5 against 48.0 us with two, docs/perf-cuda.md 16). RT = 1: two
// buffers, which keep rp<1,2> at 64 registers (three: 67), so 16-warp blocks fit twice per SM;
// with it `nvfp4 tune` moved 6 of the 13 M = 16 classes to 16 rows per warp, 5-16% faster.
// M <= 8 keeps the loop above: in this pointer form ptxas issued the next pair's loads late in
// the compute and M = 1 ran 5% slower.
template <int RT, int NB>
__device__ __forceinline__ void rp_accumulate_m16(const std::uint8_t* const (&wt)[RT],
                                                   const std::uint8_t* const (&st)[RT],
                                                   const std::uint16_t* const (&xr)[NB], int c_beg, int c_end,
                                                   float (&acc)[RT][NB][4]) {
  const std::uint8_t* wp[RT];  // at chunk pair cp
  const std::uint8_t* sp[RT];
  const uint4* xp[NB];  // a pair = 16 uint4 of an activation row
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    wp[r] = wt[r] + static_cast<std::size_t>(c_beg) * 1024;
    sp[r] = st[r] + static_cast<std::size_t>(c_beg) * 128;
  }
#pragma unroll
  for (int b = 0; b < NB; ++b) xp[b] = reinterpret_cast<const uint4*>(xr[b]) + static_cast<std::size_t>(c_beg) * 16;
  auto load = [&](int i, uint4 (&w)[RT][2], std::uint32_t (&s)[RT]) {  // pair cp + i
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      w[r][0] = ld_stream16_nohint(wp[r] + 1024 * i);
      w[r][1] = ld_stream16_nohint(wp[r] + 1024 * i + 512);
      s[r] = ld_stream4(sp[r] + 128 * i);
    }
  };
  auto compute = [&](int i, const uint4 (&w)[RT][2], const std::uint32_t (&s)[RT]) {  // pair cp + i
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      std::uint32_t xw[NB][8];
#pragma unroll
      for (int b = 0; b < NB; ++b) rp_load_x(xp[b] + 16 * i + 8 * h, xw[b]);
      rp_half<RT, NB>(h, w, s, xw, acc);
    }
  };
  auto advance = [&](int pairs) {
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      wp[r] += 1024 * pairs;
      sp[r] += 128 * pairs;
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) xp[b] += 16 * pairs;
  };
  // kBuf register buffers: pairs cp + 1 .. cp + kBuf - 1 are in flight while pair cp is computed.
  // This one loop replaced two written-out ones (2 and 3 buffers, the measured code) with the same
  // PTX for both instantiations (scripts/ptx_diff.sh: 0 lines). Leaving at the tail with `break`
  // instead of `return` did not: rp<1,2> got 3 more instructions per loop.
  constexpr int kBuf = RT == 1 ? 2 : 3;
  uint4 w[kBuf][RT][2];
  std::uint32_t s[kBuf][RT];
#pragma unroll
  for (int i = 0; i + 1 < kBuf; ++i)
    if (c_beg + i < c_end) load(i, w[i], s[i]);
  for (int cp = c_beg; cp < c_end; cp += kBuf) {
#pragma unroll
    for (int i = 0; i < kBuf; ++i) {
      if (i > 0 && cp + i >= c_end) return;
      if (cp + i + kBuf - 1 < c_end) load(i + kBuf - 1, w[(i + kBuf - 1) % kBuf], s[(i + kBuf - 1) % kBuf]);  // warp-uniform
      compute(i, w[i], s[i]);
    }
    advance(kBuf);
  }
}

// Activation row bases of lane (g, t) for NB n8 tiles: virtual row 8b + g, k offset 16t. A lane
// whose row is past the last one reads row 0 instead: mma output column n depends only on B
// column n, and the columns of rows past the last are never stored (reduce_and_store), so their
// values need not be zero. Loading them unconditionally saves the zeroing (4 CS2R per half chunk
// at M = 1, 5% of the main loop's SASS) and the predicates (docs/perf-cuda.md 16).
template <int NB>
__device__ __forceinline__ void rp_activation_rows(const GemvArgs& p, int g, int t, const std::uint16_t* (&xr)[NB]) {
  const int vr_total = p.pieces * p.m_rows;  // virtual activation rows (fp16/fp32: exact bf16 pieces)
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    const int row = 8 * b + g;
    xr[b] = static_cast<const std::uint16_t*>(p.a) + (row < vr_total ? row : 0) * p.a_stride + 16 * t;
  }
}

// Static schedule: block = `groups` column groups x k_split warps; warp (grp, slice) owns RT row
// tiles and the slice's contiguous chunk pairs; partials meet in shared memory.
// One instantiation for both launches: without the PDL attribute griddepcontrol is a no-op.
// EARLY (M <= 8 only): the weights' first loads precede the wait (rp_accumulate).
template <int RT, int NB, bool EARLY = false>
__global__ void __launch_bounds__(512) gemv_nvfp4_rp_kernel(GemvArgs p, int k_split) {
  extern __shared__ float rp_red[];
  const auto ws = warp_slot<int>(k_split, static_cast<int>(p.k / 128));  // k-steps: chunk pairs
  const int lane = ws.lane, warp = ws.warp, g = ws.g, t = ws.t, groups = ws.groups;
  const int c_beg = ws.beg, c_end = ws.end;
  const int ntiles = static_cast<int>(p.n / 16);
  const int tile0 = (blockIdx.x * groups + ws.grp) * RT;

  // Overlapped launch (PDL): this grid may already be resident while the previous kernel on the
  // stream finishes; let the next one be scheduled the same way, then wait until the previous
  // one has completed and its writes are visible. By default nothing is read before the wait
  // (exact after any kernel, including one that writes these weights): the weight loads are asm
  // without a memory operand, and their bases pass through a volatile asm after the wait
  // (volatile asm statements keep their order), so no load can be hoisted above it. EARLY
  // (weights_read_early) loads the first weights before the wait instead, in rp_accumulate.
  const std::uint8_t* packed = p.packed;
  const std::uint8_t* scales = p.scales;
  pdl_launch_dependents();
  if constexpr (!EARLY) {
    pdl_wait();
    asm volatile("" : "+l"(packed), "+l"(scales));
  }
  const std::uint8_t* wt[RT];
  const std::uint8_t* st[RT];
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const int tl = tile0 + r < ntiles ? tile0 + r : 0;  // past the end: read tile 0, store nothing
    wt[r] = packed + static_cast<std::size_t>(tl) * (8 * p.k) + lane * 16;
    st[r] = scales + static_cast<std::size_t>(tl) * p.k + lane * 4;
  }
  const std::uint16_t* xr[NB];
  rp_activation_rows<NB>(p, g, t, xr);
  float acc[RT][NB][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[r][b][c] = 0.0f;
  if constexpr (NB == 1)
    rp_accumulate<RT, NB, EARLY>(wt, st, xr, c_beg, c_end, acc);
  else
    rp_accumulate_m16<RT, NB>(wt, st, xr, c_beg, c_end, acc);
  reduce_and_store<RT, NB>(acc, rp_red, p, warp, k_split, groups, g, t);
}

template <int RT, int NB, bool EARLY = false>
cudaError_t launch_rp(const GemvArgs& a, const GemvTile& tile, cudaStream_t stream) {
  const int warps = tile.warps_per_block, ks = tile.k_split;
  const int groups = warps / ks;
  const std::int64_t rows_blk = static_cast<std::int64_t>(groups) * 16 * RT;
  const std::int64_t blocks = (a.n + rows_blk - 1) / rows_blk;
  const std::size_t smem = static_cast<std::size_t>(warps) * a.pieces * a.m_rows * 16 * RT * sizeof(float);  // <= 32 KB
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(static_cast<unsigned>(warps * 32));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = a.pdl ? 1 : 0;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, gemv_nvfp4_rp_kernel<RT, NB, EARLY>, a, ks);
}

// One thread per (row tile, chunk, lane): 16 packed bytes, and the 4 scale bytes on even chunks.
__global__ void repack_nvfp4_kernel(const std::uint8_t* packed, const std::uint8_t* scales, std::int64_t n, std::int64_t k,
                                    std::uint8_t* out_p, std::uint8_t* out_s) {
  const std::int64_t chunks = k / 64, total = (n / 16) * chunks * 32;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int lane = static_cast<int>(i % 32);
    const std::int64_t c = (i / 32) % chunks, tl = i / 32 / chunks;
    std::uint32_t q[4];
    repack::lane_words(packed, scales, k, tl, c, lane, q);
    reinterpret_cast<uint4*>(out_p)[i] = make_uint4(q[0], q[1], q[2], q[3]);
    if (c % 2 == 0) {
      std::uint8_t s[4];
      repack::lane_scales(scales, k, tl, c / 2, lane, s);
      reinterpret_cast<std::uint32_t*>(out_s)[(tl * (chunks / 2) + c / 2) * 32 + lane] =
          s[0] | (s[1] << 8) | (s[2] << 16) | (static_cast<std::uint32_t>(s[3]) << 24);
    }
  }
}

}  // namespace

cudaError_t repack_nvfp4_sm90(const std::uint8_t* packed, const std::uint8_t* scales, std::int64_t n, std::int64_t k,
                              std::uint8_t* out_p, std::uint8_t* out_s, cudaStream_t stream) {
  const std::int64_t total = (n / 16) * (k / 64) * 32;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<std::int64_t>((total + threads - 1) / threads, 65535));
  repack_nvfp4_kernel<<<blocks, threads, 0, stream>>>(packed, scales, n, k, out_p, out_s);
  return cudaGetLastError();
}

cudaError_t gemv_nvfp4_sm90_repacked(const GemvArgs& a, const GemvTile& tile, cudaStream_t stream) {
  const bool rt2 = tile.cols_per_warp == 32, nb2 = a.pieces * a.m_rows > 8;
  if (nb2) return rt2 ? launch_rp<2, 2>(a, tile, stream) : launch_rp<1, 2>(a, tile, stream);
  if (a.pdl && a.early_weights) return rt2 ? launch_rp<2, 1, true>(a, tile, stream) : launch_rp<1, 1, true>(a, tile, stream);
  return rt2 ? launch_rp<2, 1>(a, tile, stream) : launch_rp<1, 1>(a, tile, stream);
}

const char* gemv_nvfp4_sm90_repacked_name(const GemvArgs& a, const GemvTile& tile) {
  const bool rt2 = tile.cols_per_warp == 32, nb2 = a.pieces * a.m_rows > 8;
  if (!nb2 && a.pdl && a.early_weights) return rt2 ? "gemv_nvfp4_sm90_rp_r32_m8_early" : "gemv_nvfp4_sm90_rp_r16_m8_early";
  return nb2 ? (rt2 ? "gemv_nvfp4_sm90_rp_r32_m16" : "gemv_nvfp4_sm90_rp_r16_m16")
             : (rt2 ? "gemv_nvfp4_sm90_rp_r32_m8" : "gemv_nvfp4_sm90_rp_r16_m8");
}

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
  if (wa_ok(a, tile)) {
    const bool rt2 = tile.cols_per_warp == 32;
    if (a.a_f16) return rt2 ? launch_wa<true, 2, 1>(a, tile, stream) : launch_wa<true, 1, 1>(a, tile, stream);
    return rt2 ? launch_wa<false, 2, 1>(a, tile, stream) : launch_wa<false, 1, 1>(a, tile, stream);
  }
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
  if (wa_ok(a, tile)) return tile.cols_per_warp == 32 ? "gemv_nvfp4_sm90_wa_r32_m8" : "gemv_nvfp4_sm90_wa_r16_m8";
  const bool vec16 = gemv_vec16_ok(a);
  const bool mt3 = a.pieces * a.m_rows > 16;
  const bool nt4 = tile.cols_per_warp == 32 && vec16 && !mt3;
  if (!vec16) return mt3 ? "gemv_nvfp4_sm90_v8_c16_r48" : "gemv_nvfp4_sm90_v8_c16";
  if (mt3) return "gemv_nvfp4_sm90_v16_c16_r48";
  return nt4 ? "gemv_nvfp4_sm90_v16_c32" : "gemv_nvfp4_sm90_v16_c16";
}

}  // namespace nvfp4::cuda
