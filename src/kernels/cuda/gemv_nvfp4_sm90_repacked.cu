// kernels/cuda/gemv_nvfp4_sm90_repacked.cu -- the repacked-weight GEMV ("rp") for decode
// (M <= 16) on Hopper, its launches (plain, overlapped, early weights), and the device repack
// into its layout (repack_nvfp4_sm90.h: the layout and the decode it is built for). The design
// and the measurements behind it are in the section comment below and docs/perf-cuda.md 7-20.
// The canonical-layout kernels are gemv_nvfp4_sm90.cu; shared device code gemv_sm90_device.cuh.
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/gemv_nvfp4_sm90.h"
#include "kernels/cuda/gemv_sm90_device.cuh"
#include "kernels/cuda/repack_nvfp4_sm90.h"

namespace nvfp4::cuda {
namespace {

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

// ---------------------------------------------------------------------------------------------
// Repacked kernel ("rp"): weights in the gemv_sm90 layout (repack_nvfp4_sm90.h), bf16 or fp16
// operand rows, 1..32 virtual rows (NB = 1 n8 tile for <= 8, 2 for <= 16, 4 for <= 32: the API
// runs that one only on small weights, docs/perf-cuda.md 30): bf16 and fp16 activations as they
// are (fp16: the fp16 mma, RpOps), fp32 as 3 exact bf16 pieces prepared by the API layer and summed
// in the epilogue (reduce_and_store). Overlapped (programmatic dependent) launch when GemvArgs::pdl.
// Per lane and 64-k chunk: one 16-byte load = 32 weights = the A fragments of 4 mma steps for
// rows g, g+8; per 2 chunks one 4-byte scale load. Per 32 weights: decode 4 x 8 integer ops
// (bf16 codes; 9 for fp16 codes), 16 HMUL2, 4 HMMA per n8 tile, 4 scale ops, 2 activation loads
// (shared by the RT row tiles). Measured in SASS (scripts/sass.sh): 142 instructions per warp and
// chunk pair at M = 1 when the decode took 9 ops (134.5 since docs/perf-cuda.md 52), of which
// ~127 were that work; the kernel uses about half of every scheduler's issue slots, so
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

// Half h of a chunk pair of RT row tiles (weights w, scales s) against NB n8 tiles of
// activation words xw (this half's), added to acc: decode, scale, mma. fp16 operands (O != kBf16):
// fp16 activation words and the fp16 mma, the codes at fp16 bit positions (rp_decode_scaled) and
// the scales as fp16, so e2m1 * |s| * 2^-7 is the same exact product.
template <int RT, int NB, RpOps O>
__device__ __forceinline__ void rp_half(int h, const uint4 (&w)[RT][2], const std::uint32_t (&s)[RT],
                                        const std::uint32_t (&xw)[NB][8], float (&acc)[RT][NB][4]) {
  constexpr bool F16 = rp_f16(O);
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const std::uint32_t sg = h ? rp_scale<2, F16>(s[r]) : rp_scale<0, F16>(s[r]);
    const std::uint32_t sg8 = h ? rp_scale<3, F16>(s[r]) : rp_scale<1, F16>(s[r]);
    const uint4 q4 = w[r][h];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::uint32_t q = j == 0 ? q4.x : (j == 1 ? q4.y : (j == 2 ? q4.z : q4.w));
      std::uint32_t d[4];
      rp_decode_scaled<O>(q, sg, sg8, d);
#pragma unroll
      for (int b = 0; b < NB; ++b)
        mma16816<F16>(acc[r][b], d[0], d[1], d[2], d[3], xw[b][2 * j], xw[b][2 * j + 1]);
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
template <int RT, int NB, bool EARLY, RpOps O>
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
      rp_half<RT, NB, O>(h, w, s, xw, acc);
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

// The rp main loop for M = 9..16 (NB = 2) and 17..32 (NB = 4), same contract, with running
// pointers and immediate offsets. RT = 2: three register buffers (pairs cp + 1 and cp + 2 in flight while cp is
// computed; 16384^2 at M = 16: 44.5 against 48.0 us with two, docs/perf-cuda.md 16). RT = 1: two
// buffers, which keep rp<1,2> at 64 registers (three: 67), so 16-warp blocks fit twice per SM;
// with it `nvfp4 tune` moved 6 of the 13 M = 16 classes to 16 rows per warp, 5-16% faster.
// M <= 8 keeps the loop above: in this pointer form ptxas issued the next pair's loads late in
// the compute and M = 1 ran 5% slower.
// EARLY (RT = 1 only): both buffers are loaded before the PDL wait, as in rp_accumulate.
template <int RT, int NB, bool EARLY, RpOps O>
__device__ __forceinline__ void rp_accumulate_m16(const std::uint8_t* const (&wt)[RT],
                                                   const std::uint8_t* const (&st)[RT],
                                                   const std::uint16_t* const (&xr)[NB], int c_beg, int c_end,
                                                   float (&acc)[RT][NB][4]) {
  static_assert(!EARLY || RT == 1, "the early loads fill two register buffers: RT = 1 only");
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
      rp_half<RT, NB, O>(h, w, s, xw, acc);
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
  if constexpr (!EARLY) {
#pragma unroll
    for (int i = 0; i + 1 < kBuf; ++i)
      if (c_beg + i < c_end) load(i, w[i], s[i]);
  } else {
    // Coherent volatile loads before the wait (ld_early16/4, see rp_accumulate), then the
    // activation bases through a volatile asm after it.
#pragma unroll
    for (int i = 0; i < kBuf; ++i)
      if (c_beg + i < c_end) {
        w[i][0][0] = ld_early16(wp[0] + 1024 * i);
        w[i][0][1] = ld_early16(wp[0] + 1024 * i + 512);
        s[i][0] = ld_early4(sp[0] + 128 * i);
      }
    pdl_wait();
#pragma unroll
    for (int b = 0; b < NB; ++b) asm volatile("" : "+l"(xp[b]));
  }
  for (int cp = c_beg; cp < c_end; cp += kBuf) {
#pragma unroll
    for (int i = 0; i < kBuf; ++i) {
      if (i > 0 && cp + i >= c_end) return;
      // (EARLY: the first pass's pair c_beg + kBuf - 1 is in its buffer already.)
      if ((!EARLY || i != 0 || cp != c_beg) && cp + i + kBuf - 1 < c_end)  // warp-uniform
        load(i + kBuf - 1, w[(i + kBuf - 1) % kBuf], s[(i + kBuf - 1) % kBuf]);
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
// EARLY (M <= 8, and M = 9..16 at RT = 1): the weights' first loads precede the wait
// (rp_accumulate, rp_accumulate_m16).
template <int RT, int NB, bool EARLY, RpOps O>
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
  zero_accumulators(acc);
  if constexpr (NB == 1)
    rp_accumulate<RT, NB, EARLY, O>(wt, st, xr, c_beg, c_end, acc);
  else
    rp_accumulate_m16<RT, NB, EARLY, O>(wt, st, xr, c_beg, c_end, acc);
  reduce_and_store<RT, NB>(acc, rp_red, p, warp, k_split, groups, g, t);
}

template <int RT, int NB, bool EARLY, RpOps O>
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
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = a.pdl ? 1 : 0;  // a plain launch carries no attribute (no PDL before sm_90)
  return cudaLaunchKernelEx(&cfg, gemv_nvfp4_rp_kernel<RT, NB, EARLY, O>, a, ks);
}

// One thread per (row tile, chunk, lane): 16 packed bytes, and the 4 scale bytes on even chunks.
__global__ void repack_nvfp4_kernel(const std::uint8_t* packed, const std::uint8_t* scales, std::int64_t n, std::int64_t k,
                                    bool f16_codes, std::uint8_t* out_p, std::uint8_t* out_s) {
  const std::int64_t chunks = k / 64, total = (n / 16) * chunks * 32;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int lane = static_cast<int>(i % 32);
    const std::int64_t c = (i / 32) % chunks, tl = i / 32 / chunks;
    std::uint32_t q[4];
    repack::lane_words(packed, scales, k, tl, c, lane, f16_codes, q);
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
                              bool f16_codes, std::uint8_t* out_p, std::uint8_t* out_s, cudaStream_t stream) {
  const std::int64_t total = (n / 16) * (k / 64) * 32;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<std::int64_t>((total + threads - 1) / threads, 65535));
  repack_nvfp4_kernel<<<blocks, threads, 0, stream>>>(packed, scales, n, k, f16_codes, out_p, out_s);
  return cudaGetLastError();
}

namespace {
// The launches of one operand type (RpOps).
template <RpOps O>
cudaError_t launch_rp_any(const GemvArgs& a, const GemvTile& tile, cudaStream_t stream) {
  const bool rt2 = tile.cols_per_warp == 32, nb2 = a.pieces * a.m_rows > 8;
  // 17..32 virtual rows (the API's wide launch on small weights): four n8 tiles, one row tile
  // per warp whatever the tile says (rp<1,4> already takes 90 registers; docs/perf-cuda.md 30).
  if (a.pieces * a.m_rows > 32) return cudaErrorInvalidValue;
  if (a.pieces * a.m_rows > 16) return launch_rp<1, 4, false, O>(a, tile, stream);
  if (nb2 && a.pdl && a.early_weights && !rt2) return launch_rp<1, 2, true, O>(a, tile, stream);
  if (nb2) return rt2 ? launch_rp<2, 2, false, O>(a, tile, stream) : launch_rp<1, 2, false, O>(a, tile, stream);
  if (a.pdl && a.early_weights)
    return rt2 ? launch_rp<2, 1, true, O>(a, tile, stream) : launch_rp<1, 1, true, O>(a, tile, stream);
  return rt2 ? launch_rp<2, 1, false, O>(a, tile, stream) : launch_rp<1, 1, false, O>(a, tile, stream);
}
}  // namespace

// fp16 activations (a.a_f16, one piece) run the fp16 instantiations: the same tiles and launches;
// fp16 codes (a.f16_codes) take fp16 activations only.
cudaError_t gemv_nvfp4_sm90_repacked(const GemvArgs& a, const GemvTile& tile, cudaStream_t stream) {
  return with_rp_ops(a, [&](auto ops) { return launch_rp_any<decltype(ops)::value>(a, tile, stream); });
}

const char* gemv_nvfp4_sm90_repacked_name(const GemvArgs& a, const GemvTile& tile) {
  const bool rt2 = tile.cols_per_warp == 32, nb2 = a.pieces * a.m_rows > 8;
  if (a.pieces * a.m_rows > 16) return "gemv_nvfp4_sm90_rp_r16_m32";
  if (!nb2 && a.pdl && a.early_weights) return rt2 ? "gemv_nvfp4_sm90_rp_r32_m8_early" : "gemv_nvfp4_sm90_rp_r16_m8_early";
  if (nb2 && !rt2 && a.pdl && a.early_weights) return "gemv_nvfp4_sm90_rp_r16_m16_early";
  return nb2 ? (rt2 ? "gemv_nvfp4_sm90_rp_r32_m16" : "gemv_nvfp4_sm90_rp_r16_m16")
             : (rt2 ? "gemv_nvfp4_sm90_rp_r32_m8" : "gemv_nvfp4_sm90_rp_r16_m8");
}

}  // namespace nvfp4::cuda
