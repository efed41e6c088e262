// kernels/cuda/gemv_sm90_device.cuh -- device code shared by the Hopper kernels:
// gemv_nvfp4_sm90.cu (the canonical-layout GEMVs), gemv_nvfp4_sm90_repacked.cu (the repacked
// GEMV), gemm_nvfp4_sm90_repacked.cu (the repacked GEMM) and gemm_nvfp4_sm90_wgmma.cu (the wgmma
// GEMM). The PRMT / packed-multiply / mma.sync / cp.async / griddepcontrol wrappers, the block
// scale conversion, the repacked layout's decode, the static schedule of warps over K
// (warp_slot), the epilogues that sum a K split's partials in a fixed order and store, and the
// GEMMs' K-split second kernel and launch helper. Internal linkage (an anonymous namespace): each kernel file inlines its own copy.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <type_traits>

#include "kernels/cuda/gemv_nvfp4_sm90.h"
#include "kernels/cuda/repack_nvfp4_sm90.h"
#include "nvfp4/cuda.h"
#include "nvfp4/dtype.h"

namespace nvfp4::cuda {
namespace {

__device__ __forceinline__ std::uint32_t prmt(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
  std::uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

template <bool F16>
__device__ __forceinline__ std::uint32_t mul2(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d;
  if constexpr (F16) {
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  } else {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
#else
    // mul.bf16x2 is sm_90+ (PTX ISA). On sm_80..89 the same product: a * b + (-0) rounds once,
    // like the multiply, and adding -0 keeps every result, a signed zero's sign included; bf16
    // arithmetic keeps subnormals (no .ftz form exists for it).
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
#endif
  }
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

// cp.async (LDGSTS, PTX ISA sm_80+): global -> shared without registers; commit/wait by group.
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

// Programmatic dependent launch (PTX ISA griddepcontrol, sm_90). launch_dependents lets the next
// kernel on the stream be scheduled once every block of this grid has issued it (its blocks then
// fill SMs as ours retire); wait blocks until every prerequisite grid has completed and its
// memory operations are visible. Both are no-ops when the launch did not ask for PDL.
// Before sm_90 there is no PDL: the host never asks for it there (hopper_paths()), and both are
// compiler barriers only, so no load moves across them on any target.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define NVFP4_PDL_ASM(instr) asm volatile(instr ::: "memory")
#else
#define NVFP4_PDL_ASM(instr) asm volatile("" ::: "memory")
#endif
__device__ __forceinline__ void pdl_launch_dependents() { NVFP4_PDL_ASM("griddepcontrol.launch_dependents;"); }
__device__ __forceinline__ void pdl_wait() { NVFP4_PDL_ASM("griddepcontrol.wait;"); }
#undef NVFP4_PDL_ASM

// Private scale byte `sel` of s -> bf16x2 (|scale| * 2^119, broadcast) or fp16x2 (|scale| * 2^7):
// PRMT + IMAD. The byte is (E << 3) | m with |scale| = 2^(E-10) (1 + m/8), E = 1..18 (NaN: 159;
// repack_nvfp4_sm90.h). fp16: exponent field E + 12 (2^(E-3) = |scale| / (1 + m/8) * 2^7), the 3
// mantissa bits at 9:7, so the bits are byte * 128 + 0x3000: exact, <= 448 * 2^7 = 57344 < 65504;
// byte 159 gives exponent 31 with a nonzero mantissa, a NaN; byte 0 (a zero scale, whose codes
// are stored as +0) gives 0.125, finite, as the bf16 form's 2^109 is.
template <int SEL, bool F16 = false>
__device__ __forceinline__ std::uint32_t rp_scale(std::uint32_t s) {
  const std::uint32_t v = prmt(s, 0u, 0x4040u | (SEL << 8) | SEL);  // byte SEL at bytes 0 and 2
  return F16 ? v * 128u + 0x30003000u : v * 16u + 0x76007600u;
}

// The operands of a repacked-layout kernel (the rp GEMV, the rg GEMM): bf16 rows on bf16 codes,
// fp16 rows on bf16 codes (moved to fp16 bit positions in the decode), or fp16 rows on fp16 codes
// (RepackedCodes::fp16: decoded in place). fp32 rows arrive as bf16 pieces (kBf16).
enum class RpOps { kBf16, kF16OnBf16Codes, kF16 };
__host__ __device__ constexpr bool rp_f16(RpOps o) { return o != RpOps::kBf16; }

// Calls launch(std::integral_constant<RpOps, O>{}) with the O of a's operands: fp16 rows (one
// piece) on the weights' codes, else bf16 (pieces). fp16 codes take fp16 rows only.
template <class Launch>
cudaError_t with_rp_ops(const GemvArgs& a, Launch launch) {
  if ((a.a_f16 && a.pieces != 1) || (a.f16_codes && !a.a_f16)) return cudaErrorInvalidValue;
  if (!a.a_f16) return launch(std::integral_constant<RpOps, RpOps::kBf16>{});
  return a.f16_codes ? launch(std::integral_constant<RpOps, RpOps::kF16>{})
                     : launch(std::integral_constant<RpOps, RpOps::kF16OnBf16Codes>{});
}

// A decoded register (two E2M1 codes at bf16 bits (s, e1, e0, m) = (15, 8, 7, 6),
// repack::decode_word) ->
// the same codes at fp16 bits (15, 11, 10, 9): e2m1 * 2^-14 instead of e2m1 * 2^-126 (code 1, 0.5,
// is an fp16 subnormal as it is a bf16 one). d has no other bits set, and d << 3 has none at 15
// or 31, so one shift and one LOP3 ((d << 3 | d) & mask) move the magnitudes and keep the signs.
__device__ __forceinline__ std::uint32_t rp_bf16_codes_to_f16(std::uint32_t d) {
  return ((d << 3) | d) & repack::kMaskF;
}

// One layout word q -> the 4 A registers of its mma step, decoded at the bit positions of O's
// activation type (repack::decode_word, + rp_bf16_codes_to_f16, or repack::decode_word_f16: the
// definitions the host tests check; 8, 16 or 9 integer ops) and scaled:
// registers 0 / 2 (row g) by sg, 1 / 3 (row g + 8) by sg8 (rp_scale<.., rp_f16(O)> of the same
// half chunk). Exact: e2m1 * |s| * 2^-7. Shared by the rp GEMV and the rg GEMM.
template <RpOps O>
__device__ __forceinline__ void rp_decode_scaled(std::uint32_t q, std::uint32_t sg, std::uint32_t sg8,
                                                 std::uint32_t d[4]) {
  if constexpr (O == RpOps::kF16) {
    repack::decode_word_f16(q, d);
  } else {
    repack::decode_word(q, d);
    if constexpr (O == RpOps::kF16OnBf16Codes) {
#pragma unroll
      for (int i = 0; i < 4; ++i) d[i] = rp_bf16_codes_to_f16(d[i]);
    }
  }
  constexpr bool F16 = rp_f16(O);
  d[0] = mul2<F16>(d[0], sg);
  d[1] = mul2<F16>(d[1], sg8);
  d[2] = mul2<F16>(d[2], sg);
  d[3] = mul2<F16>(d[3], sg8);
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

// The mma accumulators of a warp (A x B tiles of 4 fp32 each), set to zero.
template <int A, int B>
__device__ __forceinline__ void zero_accumulators(float (&acc)[A][B][4]) {
#pragma unroll
  for (int a = 0; a < A; ++a)
#pragma unroll
    for (int b = 0; b < B; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
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


// K split (the GEMMs): y = (sum of the k_split fp32 partials ws[z][m][n] in split order) * 2^7 *
// tensor scale, one thread per output, so the result does not depend on timing. A template so
// that only the files that launch it carry the kernel.
template <int = 0>
__global__ void finalize_k_split(GemvArgs p, int k_split, const float* ws) {
  pdl_launch_dependents();
  pdl_wait();
  const std::int64_t total = static_cast<std::int64_t>(p.m_rows) * p.n;
  const DType yt = static_cast<DType>(p.y_dtype);
  const float out_scale = 128.0f * p.tensor_scale;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int z = 0; z < k_split; ++z) sum += ws[static_cast<std::size_t>(z) * total + i];
    const std::int64_t m = i / p.n, n = i % p.n;
    store_from_f32(p.y, yt, m * p.y_stride + n, sum * out_scale);
  }
}

// Held from cudaFuncSetAttribute(MaxDynamicSharedMemorySize) to the launch it is for. The
// attribute belongs to the function (and device), and each launch sets its own size, so without
// the lock a second host thread launching the same kernel with less shared memory could set its
// value between this thread's set and launch, which then fails with cudaErrorInvalidValue. Every
// kernel is launched from the file that defines it, so this file-local lock covers its launches.
// Uncontended it costs tens of ns against a launch's microseconds.
inline std::mutex& smem_attribute_mutex() {
  static std::mutex m;
  return m;
}

// Launch with the programmatic-dependent-launch attribute when `pdl` (cudaLaunchKernelExC); a
// plain launch carries no attribute at all (GPUs before sm_90 have no PDL).
inline cudaError_t launch_pdl(const void* fn, dim3 grid, dim3 block, std::size_t smem, bool pdl, cudaStream_t stream,
                              void** args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelExC(&cfg, fn, args);
}

// The K split's second kernel after a GEMM on `stream`: ~one thread per output, at most 4096
// blocks. Overlapped on Hopper (it waits for the GEMM's writes before reading); elsewhere plain:
// code built for sm_80 has no griddepcontrol.wait, so an overlapped launch of it could read the
// partials before the GEMM has written them.
inline cudaError_t launch_finalize_k_split(const GemvArgs& a, int k_split, const float* ws, cudaStream_t stream) {
  const std::int64_t total = static_cast<std::int64_t>(a.m_rows) * a.n;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((total + 255) / 256, 4096));
  GemvArgs args = a;
  int ks = k_split;
  void* fargs[] = {&args, &ks, &ws};
  return launch_pdl(reinterpret_cast<const void*>(finalize_k_split<>), dim3(blocks), dim3(256), 0, hopper_paths(), stream,
                    fargs);
}

// A GEMM launch (kernel arguments: GemvArgs, k_split, float* workspace) with its K split: the
// dynamic shared memory allowed first (> 48 KB must be, per kernel: CUDA programming guide; set on
// every launch, a host-side attribute, cheap, right for whichever device is current, and not
// cached: a cudaDeviceReset clears it and a stale cache would fail the launch), then the kernel,
// then finalize_k_split when k_split > 1. `extra`, when given, is the kernel's 4th argument (the
// ws kernel's tensor map).
inline cudaError_t launch_split_k_gemm(const void* fn, dim3 grid, dim3 block, std::size_t smem, const GemvArgs& a,
                                       int k_split, void* workspace, cudaStream_t stream, void* extra = nullptr) {
  GemvArgs args = a;
  int ks = k_split;
  float* ws = static_cast<float*>(workspace);
  void* kargs[] = {&args, &ks, &ws, extra};
  cudaError_t e;
  {
    std::lock_guard<std::mutex> lock(smem_attribute_mutex());
    e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (e != cudaSuccess) return e;
    e = launch_pdl(fn, grid, block, smem, a.pdl, stream, kargs);
  }
  if (e != cudaSuccess || ks == 1) return e;
  return launch_finalize_k_split(a, ks, ws, stream);
}

}  // namespace
}  // namespace nvfp4::cuda
