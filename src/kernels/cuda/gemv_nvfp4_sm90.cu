// kernels/cuda/gemv_nvfp4_sm90.cu -- W4A16 NVFP4 GEMV for decode (M <= 16) on Hopper, on the
// canonical checkpoint layout: the first kernel (B = weights) and the weights-as-A kernel ("wa").
// The repacked-weight kernel is gemv_nvfp4_sm90_repacked.cu; device code both use is
// gemv_sm90_device.cuh.
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

#include "kernels/cuda/gemv_sm90_device.cuh"
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
  zero_accumulators(acc);

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
  zero_accumulators(acc);

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

// Dynamic shared memory of the wa kernel: the warps' cp.async rings, then the partials.
// Max: 16 warps x 4 stages x 4 slots x 640 B + 16 x 16 x 32 x 4 B = 196 KB (sm_90 allows 227 KB per
// block; sm_80 163 KB; sm_86 / 89 99 KB, which 8 warps fit: tuning_sm90.cpp's rule of thumb).
std::size_t wa_smem_bytes(const GemvArgs& a, const GemvTile& tile, int rt) {
  const std::size_t warps = static_cast<std::size_t>(tile.warps_per_block);
  return warps * kStages * 2 * rt * 32 * kWaSlotBytes + warps * a.pieces * a.m_rows * 16 * rt * sizeof(float);
}

template <bool F16, int RT, int NB>
cudaError_t launch_wa(const GemvArgs& a, const GemvTile& tile, cudaStream_t stream) {
  const int warps = tile.warps_per_block, ks = tile.k_split;
  const int groups = warps / ks;
  const std::int64_t rows_blk = static_cast<std::int64_t>(groups) * 16 * RT;
  const std::int64_t blocks = (a.n + rows_blk - 1) / rows_blk;
  const std::size_t smem = wa_smem_bytes(a, tile, RT);
  // Set on every launch, not cached: the attribute belongs to the current device, so a cache
  // filled on GPU 0 left the launch on any other GPU of the process without it (cudaErrorInvalidValue
  // above 48 KB). A host-side attribute write, cheap next to the launch. The launch's own size, not
  // a fixed 200 KB: GPUs before Hopper refuse a value above what they allow per block.
  // (Set and launch under smem_attribute_mutex(): another thread's size must not come between.)
  std::lock_guard<std::mutex> lock(smem_attribute_mutex());
  const cudaError_t attr = cudaFuncSetAttribute(gemv_nvfp4_wa_kernel<F16, RT, NB>,
                                                cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
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

std::size_t gemv_nvfp4_sm90_smem_bytes(const GemvArgs& a, const GemvTile& tile) {
  if (wa_ok(a, tile)) return wa_smem_bytes(a, tile, tile.cols_per_warp == 32 ? 2 : 1);
  // The first kernel: fp32 partials only, <= 16 warps x 48 rows x 16 columns x 4 B = 48 KB.
  const bool vec16 = gemv_vec16_ok(a), mt3 = a.pieces * a.m_rows > 16;
  const int nt = tile.cols_per_warp == 32 && vec16 && !mt3 ? 4 : 2;
  return static_cast<std::size_t>(tile.warps_per_block) * a.pieces * a.m_rows * 8 * nt * sizeof(float);
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
