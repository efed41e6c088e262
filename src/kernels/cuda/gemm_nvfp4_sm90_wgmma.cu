// kernels/cuda/gemm_nvfp4_sm90_wgmma.cu -- the wgmma GEMM ("ws") on the canonical checkpoint
// layout, for batched decode and prefills with bf16 or fp16 activations (M = 17..1024, and up to
// 2048 where wgemm_preferred) on Hopper: warp-specialized, a producer warpgroup and two or three
// consumer warpgroups, 64 to 256 activation rows per block. (A first kernel, "wg", with two
// warpgroups that both copied and computed, ran M <= 64 until the ws kernel at 64 rows measured
// 4-12% faster at every shape; docs/perf-cuda.md 22, 28.)
//
// Why: without FP4 tensor cores, prefill used to decode each weight into a dense bf16 panel
// and run cuBLAS (gemm_nvfp4_cublas.h): 0.90x dense bf16, the panel's write and read costing
// ~10% (docs/perf-cuda.md 17.3). Batched decode on repacked weights (the rg GEMM) runs mma.sync
// at 200-270 TFLOP/s, latency-bound in its decode -> HMMA chains, slower than dense bf16 beyond
// ~48 sequences (docs/perf-cuda.md 21). This kernel is the seeds' GEMM that decodes the packed
// weight straight into the MMA fragments, built on Hopper's warpgroup MMA: one wgmma.m64nBNk16
// per warpgroup and k16 step does 64 x BN x 16 MACs from 4 decoded registers per thread, so the
// decode's cost per MAC falls by BN / 8 against the rg kernel's mma.sync.
//
// Common design (per block: 128 or 192 weight rows = output columns, BN activation rows, K in
// stages of 64):
//  * A = weights, from registers. Warp q of a warpgroup owns 16 rows; lane (g, t) holds, per k16
//    step (= one E2M1 block of 16), the mma.m16n8k16-style fragment: rows g and g+8, k (2t, 2t+1)
//    and (2t+8, 2t+9), which in the canonical layout are byte t of the block's two 4-byte words.
//    Decode per register (5 integer ops): byte t -> (low nibble, high nibble << 16) -> each
//    nibble's sign to bit 15 and magnitude to bits 8:6 of its bf16 half: e2m1 * 2^-126 (as the
//    canonical GEMV, gemv_nvfp4_sm90.cu), then one HMUL2 by the block scale * 2^119: exactly
//    e2m1 * |scale| * 2^-7. The 2^7 and the tensor scale return on the fp32 result.
//    fp16 activations (the f16 wgmma): magnitude to bits 11:9, e2m1 * 2^-14 (code 1 the
//    subnormal 2^-15), times |scale| * 2^7 in fp16: the same e2m1 * |scale| * 2^-7, exact
//    (products in [2^-17, 21] with <= 6 significant bits; fp16 HMUL2 keeps subnormals).
//  * B = activations, from shared memory: BN rows x 64 k bf16 per stage, 128-byte rows with the
//    128-byte swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)), which wgmma reads
//    conflict-free; K-major, so no transpose.
//  * A ring of stages in shared memory: activations, the block's packed weights (128 or 192 rows
//    x 32 bytes, row pitch 48: the lanes' reads of 8 rows hit distinct banks), and in each row's
//    padding its 4 raw scales and their bf16 (fp16) conversion, which the producer writes once
//    per stage (not 4x per quad in the decode, and off the consumers' path: see the kernel).
//  * Two A register sets per warpgroup: the decode of stage i + 1 runs while stage i's wgmmas do
//    (wgmma reads its A registers until it completes).
//  * K split over blocks (grid z) where the tiles alone do not fill the GPU: fp32 partials and
//    finalize_k_split (gemv_sm90_device.cuh), summed in split order: deterministic.
//  * Without a K split the block's outputs go through shared memory (the free ring) and leave as
//    coalesced vector stores (store_tile; docs/perf-cuda.md 29).
// The warp specialization: see the kernel (docs/perf-cuda.md 26).
#include "kernels/cuda/gemm_nvfp4_sm90_wgmma.h"

#include <algorithm>
#include <string>

#include <cuda.h>  // CUtensorMap (types only: the encode call goes through the runtime's driver entry point)
#include <cudaTypedefs.h>

#include "kernels/cuda/gemv_sm90_device.cuh"
#include "kernels/cuda/pack2_rn.cuh"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
// In the portable device passes (compute_80: Ampere / Ada) the kernel's body is a trap that is
// never launched (hopper_paths()), so this file's sm_90a helpers go unused there.
#pragma nv_diag_suppress 177
#endif

namespace nvfp4::cuda {
namespace {

// Weight rows (output columns) per block: 64 per consumer warpgroup (WgemmTile::consumers).
__host__ __device__ constexpr int ws_rows(int consumers) { return 64 * consumers; }
// Blocks of one K split of the ws grid (launch_ws): row blocks of 64 x consumers weight rows times
// activation blocks of bn rows.
std::int64_t ws_grid_blocks(std::int64_t n, std::int64_t m, int bn, int consumers) {
  return ((n + ws_rows(consumers) - 1) / ws_rows(consumers)) * ((m + bn - 1) / bn);
}
constexpr int kMinRows = 128;  // two consumer warpgroups
constexpr int kStageK = 64;           // k per stage: 4 wgmma k16 steps, one 128-byte activation row
// Weight row r of a stage: 32 packed bytes at 48 r, its 4 raw E4M3 scales at 48 r + 32 (where they
// are copied per stage; grouped copies go to a ring of their own, see s_grouped) and their
// conversion (4 x bf16 |scale| * 2^119, or fp16 |scale| * 2^7) at 48 r + 40. The pitch of 48 puts
// the lanes' reads of 8 consecutive rows on distinct banks (8-byte reads at 48 g + 40: banks
// 12 g + 10 mod 32, distinct pairs).
constexpr int kPackedPitch = 48;
constexpr int kRawScaleOff = 32, kScaleOff = 40;

__host__ __device__ constexpr int stage_bytes(int bn, int consumers) {
  return (bn * 128 + ws_rows(consumers) * kPackedPitch + 1023) / 1024 * 1024;  // activations stay 1024-aligned
}

// Shared memory matrix descriptor (PTX ISA, "Matrix Descriptor Format" of wgmma): start address
// >> 4 (bits 0-13), leading byte offset (unused for swizzled K-major layouts: 1), stride byte
// offset >> 4 (bits 32-45: 1024 bytes between groups of 8 rows), layout type 1 = 128-byte swizzle
// (bits 62-63). A k16 step inside the 128-byte row adds 32 bytes to the start address; the
// swizzle is a function of the address bits, so the tile must be 1024-byte aligned.
__device__ __forceinline__ std::uint64_t sw128_desc(std::uint32_t smem_addr) {
  return static_cast<std::uint64_t>((smem_addr & 0x3FFFF) >> 4) | (std::uint64_t{1} << 16) |
         (std::uint64_t{1024 >> 4} << 32) | (std::uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

// Halves of a bf16x2 broadcast, written as moves of halves so that ptxas folds them into the
// multiply's operand selector (HMUL2 ... R.H0_H0) instead of issuing a PRMT (measured in the
// wgmma GEMV experiment, docs/perf-cuda.md 19.3).
__device__ __forceinline__ std::uint32_t bcast_lo(std::uint32_t v) {
  std::uint32_t d;
  asm("{.reg .b16 l, h;\nmov.b32 {l, h}, %1;\nmov.b32 %0, {l, l};}" : "=r"(d) : "r"(v));
  return d;
}
__device__ __forceinline__ std::uint32_t bcast_hi(std::uint32_t v) {
  std::uint32_t d;
  asm("{.reg .b16 l, h;\nmov.b32 {l, h}, %1;\nmov.b32 %0, {h, h};}" : "=r"(d) : "r"(v));
  return d;
}

// Byte `sel` (a PRMT selector 0x4440 | t) of canonical word q -> the bf16x2 (fp16x2) of its two
// codes: low nibble (k = 2t) in the low half, high nibble (k = 2t + 1) in the high half, each as
// e2m1 * 2^-126 (bf16: sign to bit 15, magnitude e1 e0 m to bits 8:6) or e2m1 * 2^-14 (fp16:
// magnitude to bits 11:9, where code 1 is the subnormal 2^-15), see the header comment.
template <bool F16>
__device__ __forceinline__ std::uint32_t decode_byte(std::uint32_t q, std::uint32_t sel) {
  const std::uint32_t v = prmt(q, 0u, sel);  // byte t, zero above
  if constexpr (F16) {
    // Magnitudes: v << 9 puts the low nibble's at 11:9, v << 21 the high nibble's at 27:25; signs:
    // v << 12 and v << 24 put bits 3 and 7 at 15 and 31. Each product's two shifted copies do
    // not overlap, so the multiplies are exact shifts-and-ors.
    const std::uint32_t sign = (v * 0x01001000u) & 0x80008000u;
    return ((v * 0x00200200u) & 0x0E000E00u) | sign;
  } else {
    const std::uint32_t u = (v * 0x1001u) & 0x000F000Fu;  // low nibble at bits 0-3, high at 16-19
    return (u * 0x1040u) & 0x81C081C0u;                 // (u << 6) | (u << 12): no overlapping bits
  }
}

// wgmma.mma_async m64nNk16, bf16 x bf16 (fp16 x fp16) -> fp32, A from registers (the
// mma.m16n8k16 fragment layout per warp), B from shared memory (descriptor), D += A B. The two
// types differ only in the instruction's type suffix (inline asm needs one literal per type).
#define NVFP4_WG_N64(TYPES)                                                                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPES " "                               \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n"                                    \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate))
#define NVFP4_WG_N128(TYPES)                                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPES " "                              \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"                                   \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                                                                \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate))
#define NVFP4_WG_N160(TYPES)                                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %85, 0;\n"                                          \
               "wgmma.mma_async.sync.aligned.m64n160k16.f32." TYPES " "                              \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79}, {%80,%81,%82,%83}, %84, p, 1, 1, 0;\n}\n"\
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate))
#define NVFP4_WG_N192(TYPES)                                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n192k16.f32." TYPES " "                              \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95}, {%96,%97,%98,%99}, %100, p, 1, 1, 0;\n}\n"                                   \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate))
#define NVFP4_WG_N224(TYPES)                                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %117, 0;\n"                                         \
               "wgmma.mma_async.sync.aligned.m64n224k16.f32." TYPES " "                              \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111}, {%112,%113,%114,%115}, %116, p, 1, 1, 0;\n}\n"\
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate))
#define NVFP4_WG_N256(TYPES)                                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                                        \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPES " "                              \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, {%128,%129,%130,%131}, %132, p, 1, 1, 0;\n}\n"                                   \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate))
// D += A B for one k16 step at N = BN (the accumulate predicate is always on: the kernels zero D).
template <int BN, bool F16>
__device__ __forceinline__ void wgmma_bn(float (&d)[BN / 2], const std::uint32_t (&a)[4], std::uint64_t desc) {
  constexpr int accumulate = 1;
  if constexpr (BN == 64) {
    if constexpr (F16) NVFP4_WG_N64("f16.f16"); else NVFP4_WG_N64("bf16.bf16");
  } else if constexpr (BN == 128) {
    if constexpr (F16) NVFP4_WG_N128("f16.f16"); else NVFP4_WG_N128("bf16.bf16");
  } else if constexpr (BN == 160) {
    if constexpr (F16) NVFP4_WG_N160("f16.f16"); else NVFP4_WG_N160("bf16.bf16");
  } else if constexpr (BN == 192) {
    if constexpr (F16) NVFP4_WG_N192("f16.f16"); else NVFP4_WG_N192("bf16.bf16");
  } else if constexpr (BN == 224) {
    if constexpr (F16) NVFP4_WG_N224("f16.f16"); else NVFP4_WG_N224("bf16.bf16");
  } else {
    if constexpr (F16) NVFP4_WG_N256("f16.f16"); else NVFP4_WG_N256("bf16.bf16");
  }
}
#undef NVFP4_WG_N64
#undef NVFP4_WG_N160
#undef NVFP4_WG_N192
#undef NVFP4_WG_N224
#undef NVFP4_WG_N256
#undef NVFP4_WG_N128

// The dynamic shared memory, 1024-byte aligned (the 128-byte swizzle is a function of the address
// bits; the launches add 1024 bytes of slack), and its shared-window address.
__device__ __forceinline__ std::uint8_t* aligned_smem(std::uint8_t* raw, std::uint32_t* base) {
  const std::uint32_t raw_addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(raw));
  *base = (raw_addr + 1023u) & ~1023u;
  return raw + (*base - raw_addr);
}

// This block's tile: weight rows n0.., activation rows m0.., and its share of the K split, stages
// [s_beg, s_beg + nst) of 64 k (empty for the splits past the end).
struct BlockTile {
  std::int64_t n0;
  int m0, s_beg, nst;
};
template <int BN, int ROWS>
__device__ __forceinline__ BlockTile block_tile(const GemvArgs& p, int k_split) {
  const int stages = static_cast<int>(p.k / kStageK);
  const int per = (stages + k_split - 1) / k_split;
  BlockTile b;
  b.s_beg = min(stages, static_cast<int>(blockIdx.z) * per);
  b.nst = min(stages, b.s_beg + per) - b.s_beg;
  b.n0 = static_cast<std::int64_t>(blockIdx.y) * ROWS;
  b.m0 = static_cast<int>(blockIdx.x) * BN;
  return b;
}

// One weight row's 4 raw E4M3 scales (a little-endian word, block 0 in the low byte) -> their
// conversion as the decode multiplies by it: bf16 |scale| * 2^119 or fp16 |scale| * 2^7 (exact;
// NaN stays NaN), blocks 0..3 in the halves of the two words.
template <bool F16>
__device__ __forceinline__ uint2 convert_row_scales(std::uint32_t raw) {
  std::uint32_t lo0, hi0, lo1, hi1;
  scale_pairs<F16>(raw & 0xFFFFu, &lo0, &hi0);
  scale_pairs<F16>(raw >> 16, &lo1, &hi1);
  return make_uint2(prmt(lo0, hi0, 0x5410), prmt(lo1, hi1, 0x5410));
}

// The packed words and converted scales of rows wr and wr + 8 for the stage's 4 k16 steps:
// 8-byte reads per step (not 16 per two: fewer live registers); rows g = 0..7 at pitch 48 hit
// distinct banks.
struct StageWords {
  uint2 g[4], h[4];
  uint2 sg, sh;
};
__device__ __forceinline__ void load_stage_words(const std::uint8_t* stage_w, int wr, StageWords& q) {
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    q.g[s] = *reinterpret_cast<const uint2*>(stage_w + wr * kPackedPitch + 8 * s);
    q.h[s] = *reinterpret_cast<const uint2*>(stage_w + (wr + 8) * kPackedPitch + 8 * s);
  }
  q.sg = *reinterpret_cast<const uint2*>(stage_w + wr * kPackedPitch + kScaleOff);
  q.sh = *reinterpret_cast<const uint2*>(stage_w + (wr + 8) * kPackedPitch + kScaleOff);
}

// The words -> the 4 k16 steps' A fragments (step s = E2M1 block s of the stage), scaled by the
// converted scales of rows g and g + 8.
template <bool F16>
__device__ __forceinline__ void decode_stage(const StageWords& q, std::uint32_t sel, std::uint32_t (&a)[4][4]) {
  const uint2 sg = q.sg, sh = q.sh;
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const std::uint32_t sgw = (s >> 1) ? sg.y : sg.x, shw = (s >> 1) ? sh.y : sh.x;
    const std::uint32_t scg = (s & 1) ? bcast_hi(sgw) : bcast_lo(sgw);
    const std::uint32_t sch = (s & 1) ? bcast_hi(shw) : bcast_lo(shw);
    a[s][0] = mul2<F16>(decode_byte<F16>(q.g[s].x, sel), scg);
    a[s][1] = mul2<F16>(decode_byte<F16>(q.h[s].x, sel), sch);
    a[s][2] = mul2<F16>(decode_byte<F16>(q.g[s].y, sel), scg);
    a[s][3] = mul2<F16>(decode_byte<F16>(q.h[s].y, sel), sch);
  }
}

// The epilogue, through shared memory. Why: the accumulators' fragment layout gives each lane
// scattered single outputs (lane (g, t): weight rows g, g + 8, activation rows 2t, 2t + 1), and
// storing them one by one, each through the generic dtype switch and software rounding of
// store_from_f32, cost 24% of a 2048 x 14336 x 4096 call and 28% at 256 rows (H200, measured by
// leaving the stores out; docs/perf-cuda.md 29). Here the block's fp32 tile goes to shared memory
// (the ring is free once every consumer is past its last wgmma), then every consumer thread
// stores 4 consecutive outputs of one activation row at a time (with two consumers a warp writes
// 128 consecutive outputs per instruction), rounded by the hardware conversion (RNE, as
// store_from_f32).
//
// Tile layout: fp32 [BN activation rows][kRows + 4]; the pad puts the 8 rows (2t, 2t + 1 over t)
// of a fragment store on distinct banks (2 x 132 = 264 = 8 mod 32, 2 x 196 = 392 = 8 mod 32).
__host__ __device__ constexpr int epilogue_pitch(int consumers) { return ws_rows(consumers) + 4; }
__host__ __device__ constexpr int epilogue_bytes(int bn, int consumers) { return bn * epilogue_pitch(consumers) * 4; }

// Four fp32 outputs (n .. n + 3 of one activation row) -> fp16 or bf16 (the activations' dtype,
// which the API requires of the output), one 8-byte store where the row and pointer alignment
// allow it (`vec`), else element by element up to N (`left` outputs remain in the row).
template <bool F16>
__device__ __forceinline__ void store4(std::uint16_t* d, float4 v, bool vec, std::int64_t left) {
  const std::uint32_t lo = pack2_rn<F16>(v.x, v.y), hi = pack2_rn<F16>(v.z, v.w);
  if (vec && left >= 4) {
    *reinterpret_cast<uint2*>(d) = make_uint2(lo, hi);
    return;
  }
  const std::uint16_t e[4] = {static_cast<std::uint16_t>(lo), static_cast<std::uint16_t>(lo >> 16),
                              static_cast<std::uint16_t>(hi), static_cast<std::uint16_t>(hi >> 16)};
  for (int q = 0; q < 4 && q < left; ++q) d[q] = e[q];
}

// Copies the staged tile out as outputs (times 2^7, the decode's exponent offset, and the tensor
// scale).
template <int BN, int C, bool F16>
__device__ __forceinline__ void copy_out(const float* stg, const GemvArgs& p, std::int64_t n0, int m0, int ct) {
  constexpr int kC4 = ws_rows(C) / 4, kPitch = epilogue_pitch(C), kThreads = 128 * C;
  const float out_scale = 128.0f * p.tensor_scale;
  const int rows = min(BN, p.m_rows - m0);
  const bool vec = p.y_stride % 4 == 0 && reinterpret_cast<std::uintptr_t>(p.y) % 8 == 0;
  std::uint16_t* const y = static_cast<std::uint16_t*>(p.y);
#pragma unroll 4
  for (int idx = ct; idx < rows * kC4; idx += kThreads) {
    const int r = idx / kC4, c4 = idx - r * kC4;
    const std::int64_t n = n0 + 4 * c4;
    if (n >= p.n) continue;
    float4 v = *reinterpret_cast<const float4*>(stg + r * kPitch + 4 * c4);
    v.x *= out_scale;
    v.y *= out_scale;
    v.z *= out_scale;
    v.w *= out_scale;
    store4<F16>(y + (m0 + r) * p.y_stride + n, v, vec, p.n - n);
  }
}

// Accumulator (j, c) of lane (g, t) holds weight row wr + 8 (c >> 1), activation row
// 8 j + 2 t + (c & 1) (the wgmma D fragment layout). With a K split, the fp32 partials go straight
// to `ws` for finalize_k_split: there is no rounding to save, and at 64 x 4096 x 4096 (K split 4)
// the staged path measured 0.8% slower, these direct stores 0.9% faster than before (H200,
// docs/perf-cuda.md 29). Otherwise the block's tile goes through shared memory (above).
// All consumer threads call it after their last wgmma_wait; `stg` is the ring's memory.
template <int BN, int C, bool F16>
__device__ __forceinline__ void store_tile(const float (&acc)[BN / 2], float* stg, const GemvArgs& p, int k_split, float* ws,
                                           std::int64_t n0, int wr, int m0, int t, int ct) {
  if (k_split > 1) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const std::int64_t n = n0 + wr + 8 * (c >> 1);
        const int m = m0 + 8 * j + 2 * t + (c & 1);
        if (n < p.n && m < p.m_rows) ws[(static_cast<std::int64_t>(blockIdx.z) * p.m_rows + m) * p.n + n] = acc[4 * j + c];
      }
    return;
  }
  constexpr int kPitch = epilogue_pitch(C);
  // Named barrier 1 over the consumer threads only (the producer warpgroup has exited): no
  // warpgroup may overwrite ring slots that the other's last wgmmas still read.
  asm volatile("bar.sync 1, %0;" ::"n"(128 * C) : "memory");
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int c = 0; c < 4; ++c) stg[(8 * j + 2 * t + (c & 1)) * kPitch + wr + 8 * (c >> 1)] = acc[4 * j + c];
  asm volatile("bar.sync 1, %0;" ::"n"(128 * C) : "memory");
  copy_out<BN, C, F16>(stg, p, n0, m0, ct);
}

// ---------------------------------------------------------------------------------------------
// The kernel ("ws", docs/perf-cuda.md 26): one producer warpgroup fills the
// ring (the activation tile by one TMA copy, weights and scales by cp.async), converts the
// scales once a stage's copies have landed and signals a per-slot "full" mbarrier (expect_tx for
// the TMA bytes, plus one arrival per producer thread after its copies and conversions); two
// consumer warpgroups wait on it, decode and issue wgmmas,
// and release the slot through its "empty" mbarrier once their wgmmas on it are complete. No
// block-wide barrier in the loop, both consumer warpgroups keep two A register sets (the decode
// of stage i + 1 runs while stage i's wgmmas do), and BN = 256 (twice the MACs per decoded
// register) takes the 232 registers per consumer thread that setmaxnreg moves from the producer.
// Measured on H200 against the two-warpgroup kernel before it (wg: both warpgroups copied and
// computed, one __syncthreads per stage): 7-33% faster from 96 to 256 rows, 4-12% at 17-64
// rows (bn 64); Llama-3-8B batched decode at B = 128 7.12 -> 5.83 ms per step, at B = 64 5.20 ->
// 4.72 (docs/perf-cuda.md 26, 28).
__host__ __device__ constexpr int ws_threads(int consumers) { return 128 * (1 + consumers); }  // + the producer
// Ring slots: as many as the 227 KB allow (bn 256 / 224 / 192 / 160: 5 / 6 / 7 / 8 of 38 / 34 /
// 30 / 26 KB).
__host__ __device__ constexpr int ws_stages(int bn, int consumers) {
  return bn == 256 ? 5 : bn == 224 ? 6 : bn == 192 ? 7 : bn == 160 ? 8 : (consumers == 3 ? 8 : 9);
}
// The ring of stages, then its full and empty barriers (8 bytes each), then the scale groups'
// ring (two consumer warpgroups only: 2 slots of 16 bytes per weight row), then the 1024 bytes of
// alignment slack.
__host__ __device__ constexpr int ws_scale_ring_offset(int bn, int consumers) {
  return ws_stages(bn, consumers) * stage_bytes(bn, consumers) + 2 * ws_stages(bn, consumers) * 8;
}
__host__ __device__ constexpr int ws_scale_ring_bytes(int consumers) {
  return consumers == 2 ? 2 * 16 * ws_rows(consumers) : 0;
}
__host__ __device__ constexpr int ws_smem_bytes(int bn, int consumers) {
  return ws_scale_ring_offset(bn, consumers) + ws_scale_ring_bytes(consumers) + 1024;
}
static_assert(epilogue_bytes(64, 2) <= ws_stages(64, 2) * stage_bytes(64, 2) &&
                  epilogue_bytes(128, 2) <= ws_stages(128, 2) * stage_bytes(128, 2) &&
                  epilogue_bytes(256, 2) <= ws_stages(256, 2) * stage_bytes(256, 2) &&
                  epilogue_bytes(192, 2) <= ws_stages(192, 2) * stage_bytes(192, 2) &&
                  epilogue_bytes(160, 2) <= ws_stages(160, 2) * stage_bytes(160, 2) &&
                  epilogue_bytes(224, 2) <= ws_stages(224, 2) * stage_bytes(224, 2) &&
                  epilogue_bytes(64, 3) <= ws_stages(64, 3) * stage_bytes(64, 3) &&
                  epilogue_bytes(128, 3) <= ws_stages(128, 3) * stage_bytes(128, 3),
              "the epilogue's tile must fit in the ring");
static_assert(ws_smem_bytes(64, 3) <= 227 * 1024 && ws_smem_bytes(128, 3) <= 227 * 1024 &&
                  ws_smem_bytes(128, 2) <= 227 * 1024 && ws_smem_bytes(160, 2) <= 227 * 1024 &&
                  ws_smem_bytes(192, 2) <= 227 * 1024 && ws_smem_bytes(224, 2) <= 227 * 1024 &&
                  ws_smem_bytes(256, 2) <= 227 * 1024,
              "the ring must fit the 227 KB a block may use");

__device__ __forceinline__ void mbar_init(std::uint32_t a, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t a) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(a) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint32_t a, std::uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT;\n}" ::"r"(a),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint32_t a, std::uint32_t bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(a), "r"(bytes)
               : "memory");
}
// The tensor-map copy (TMA) of box {64 k, BN rows} at (k0, row0) into `dst`, completing `bytes`
// on the mbarrier. Rows past the tensor's end arrive as zeros (and still count).
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const CUtensorMap* map, int k0, int row0, std::uint32_t mbar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(k0), "r"(row0), "r"(mbar)
      : "memory");
}
template <int BN, bool F16, int C>
__global__ void __launch_bounds__(ws_threads(C), 1)
    gemm_nvfp4_ws_kernel(GemvArgs p, int k_split, float* ws, const __grid_constant__ CUtensorMap act_map) {
  static_assert(C == 2 || (C == 3 && BN <= 128), "three consumer warpgroups only at bn 64 / 128");
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // wgmma, setmaxnreg and the tensor-map copies exist only on sm_90a. The portable builds
  // (compute_80 code for Ampere / Ada) compile this kernel too, but the host launches it only where
  // hopper_paths() holds (matmul_cuda.cu).
  __trap();
#else
  constexpr int kStage = stage_bytes(BN, C), kStages = ws_stages(BN, C), kRows = ws_rows(C);
  // Registers per consumer thread where they need more than 65536 / threads (0: no setmaxnreg):
  // (65536 - 128 x 40 of the producer) / consumer threads, rounded down to a multiple of 8.
  constexpr int kConsumerRegs = BN >= 160 ? 232 : (BN == 128 && C == 3 ? 152 : 0);
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  const int tid = threadIdx.x, lane = tid & 31;
  std::uint32_t base;
  std::uint8_t* const smem = aligned_smem(smem_raw, &base);
  const std::uint32_t full0 = base + kStages * kStage, empty0 = full0 + 8 * kStages;
  const BlockTile bt = block_tile<BN, kRows>(p, k_split);
  const int s_beg = bt.s_beg, nst = bt.nst, m0 = bt.m0;
  const std::int64_t n0 = bt.n0;

  if (tid == 0)
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full0 + 8 * s, 129);  // the producer warpgroup's 128 arrivals (publish) + the TMA's expect_tx
      mbar_init(empty0 + 8 * s, 128 * C);  // every consumer thread
    }
  __syncthreads();
  pdl_launch_dependents();
  pdl_wait();

  if (tid < 128) {
    // Producer. Per stage: the activation tile by one tensor-map copy (thread 0; the 128-byte
    // swizzle of the map is the one the wgmma descriptor reads), the kRows weight rows' 2 kRows
    // chunks (2 or 3 per thread) and the scales (see s_grouped) by cp.async. Why TMA for the activations: with 16
    // cp.async per thread and stage, each with its own address arithmetic, the producer warps
    // were the bottleneck at BN = 256 (ncu: consumers waited on the full barrier, the producer's
    // copies stalled on their address registers; docs/perf-cuda.md 26).
    // The producer also converts each stage's scales once its copies have landed (kLag stages
    // behind the copies: cp.async.wait_group), writes them beside the raw ones and only then
    // arrives on the stage's full barrier. Why: when every consumer warp converted its rows'
    // scales per stage, that chain (shared load -> conversion -> shared store -> __syncwarp ->
    // load) sat on the consumers' critical path, and the consumers bind: ncu at 64 x 14336 x 4096
    // put 10.5% of the kernel's stall samples on that load and store, the producer waited for
    // empty slots. Measured on H200 against the consumers converting (docs/perf-cuda.md 34):
    // 2-4% faster per linear from 64 to 2048 rows, Llama-3-8B batched decode B = 64 / 128 -2.9% /
    // -2.3%.
    if constexpr (kConsumerRegs > 0) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    // This thread's weight chunks: rows pr + 64 j, half tid & 1; its scale words: rows tid + 128 j.
    constexpr int kWChunks = kRows / 64, kSWords = (kRows + 127) / 128;
    const int pr = tid >> 1;
    bool w_ok[kWChunks], s_ok[kSWords];
    const std::uint8_t* w_src[kWChunks];
    const std::uint8_t* s_src[kSWords];
#pragma unroll
    for (int j = 0; j < kWChunks; ++j) {
      w_ok[j] = n0 + pr + 64 * j < p.n;
      w_src[j] = p.packed + (w_ok[j] ? n0 + pr + 64 * j : 0) * (p.k / 2) + (tid & 1) * 16;
    }
#pragma unroll
    for (int j = 0; j < kSWords; ++j) {
      s_ok[j] = n0 + tid + 128 * j < p.n;  // rows past kRows are not copied at all (below)
      s_src[j] = p.scales + (s_ok[j] ? n0 + tid + 128 * j : 0) * (p.k / 16);
    }
    const std::uint32_t w_dst = BN * 128 + pr * kPackedPitch + (tid & 1) * 16;
    const std::uint32_t s_dst = BN * 128 + tid * kPackedPitch + kRawScaleOff;
    // With two consumer warpgroups the scales are copied 4 stages (16 bytes) per row at a time,
    // into a 2-slot ring of their own beside the barriers, where K % 256 == 0 and the scale
    // pointer is 16-byte aligned; else 4 bytes per row and stage go into the stage (kRawScaleOff).
    // Why: those 4-byte copies were 40% of the kernel's L2 requests for 11% of its bytes (a
    // block's stage touched 128 sectors for 512 bytes of scales). Measured on H200 against the
    // 4-byte copies (paired, docs/perf-cuda.md 36): 64 / 128 / 256 / 1024 x 14336 x 4096 -3.4% /
    // -4.9% / -2.7% / -2.9%, Llama-3-8B batched decode B = 64 / 128 -2.2% / -3.4%. Groups of 8
    // stages (32 bytes, one whole sector per row) gained less (-2.0% / -5.2% / -2.0% / -2.2%).
    // Three consumer warpgroups keep the 4-byte copies: grouped, 56 x 6144 x 4096 ran 1.5%
    // slower (96 x 6144 x 4096 -0.8%), and the bn 128 kernel's 40-register producer spilled.
    // Group q (stages 4q .. 4q + 3) goes to ring slot q & 1 with the copies of its first stage
    // (or of the block's first stage), so the cp.async.wait_group before a stage's publication
    // covers it; group q + 2 refills the slot only after stage 4q + 3 is published (kLag < 5).
    // Why not registers: a load into whichever of two register buffers was free became, in
    // ptxas's hands, one load and moves that waited for DRAM at once (SASS), 26% slower.
    const bool s_grouped = C == 2 && p.k % 256 == 0 && reinterpret_cast<std::uintptr_t>(p.scales) % 16 == 0;
    // Shared address of scale word j's 16-byte group for stage kst (ring slot (kst / 4) & 1).
    auto s_group = [&](std::int64_t kst, int j) -> std::uint32_t {
      return base + ws_scale_ring_offset(BN, C) + (((kst >> 2) & 1) * kRows + tid + 128 * j) * 16;
    };
    // Stages whose copies may still be in flight while the producer converts an older one (so
    // that several stages' copies overlap): 3 with the 8-9 slot rings, 2 with bn 256's 5 slots.
    // Not tuned: the one setting measured (docs/perf-cuda.md 34). Bound: a consumer releases
    // stage j's slot only after stage j + 2 is published (it waits for j + 2's full barrier
    // before it releases j), and the producer, before filling stage i, waits for the release of
    // stage i - kStages while it has published up to i - 1 - kLag; so kLag <= kStages - 3, or
    // the two wait for each other.
    constexpr int kLag = kStages >= 8 ? 3 : 2;
    static_assert(kLag <= kStages - 3, "the producer's lag must leave the consumers a published stage");
    static_assert(kLag < 5, "a scale group's slot is refilled only after its last stage is published");
    // Publishes the oldest unpublished stage (ring slot pslot), whose copies by this thread have
    // landed (cp.async.wait_group).
    int slot = 0, pslot = 0, pkst = s_beg;
    std::uint32_t phase = 0;
    auto publish_next = [&]() {
      const std::uint32_t st = base + pslot * kStage;
#pragma unroll
      for (int j = 0; j < kSWords; ++j)
        if (tid + 128 * j < kRows) {
          const std::uint32_t a = st + s_dst + 128 * j * kPackedPitch;
          const std::uint32_t from = s_grouped ? s_group(pkst, j) + (pkst & 3) * 4 : a;
          std::uint32_t raw;
          asm volatile("ld.shared.b32 %0, [%1];" : "=r"(raw) : "r"(from) : "memory");
          const uint2 c = convert_row_scales<F16>(raw);
          asm volatile("st.shared.v2.b32 [%0], {%1, %2};" ::"r"(a + (kScaleOff - kRawScaleOff)), "r"(c.x), "r"(c.y) : "memory");
        }
      // Releases this thread's copies (complete: cp.async.wait_group) and stores to the consumers.
      mbar_arrive(full0 + 8 * pslot);
      if (++pslot == kStages) pslot = 0;
      ++pkst;
    };
#pragma unroll 1
    for (int i = 0; i < nst; ++i) {
      if (i >= kStages) mbar_wait(empty0 + 8 * slot, phase ^ 1);
      const std::int64_t kst = s_beg + i;
      const std::uint32_t st = base + slot * kStage;
      if (tid == 0) {
        mbar_arrive_expect_tx(full0 + 8 * slot, BN * 128);
        tma_load_2d(st, &act_map, static_cast<int>(kst * kStageK), m0, full0 + 8 * slot);
      }
#pragma unroll
      for (int j = 0; j < kWChunks; ++j) cp_async16(st + w_dst + 64 * j * kPackedPitch, w_src[j] + kst * 32, w_ok[j]);
      if (!s_grouped) {
#pragma unroll
        for (int j = 0; j < kSWords; ++j)
          if (tid + 128 * j < kRows) cp_async4(st + s_dst + 128 * j * kPackedPitch, s_src[j] + kst * 4, s_ok[j]);
      } else if (i == 0 || (kst & 3) == 0) {
#pragma unroll
        for (int j = 0; j < kSWords; ++j)
          if (tid + 128 * j < kRows)
            cp_async16(s_group(kst, j), s_src[j] + (kst >> 2) * 16, s_ok[j]);
      }
      cp_async_commit();
      if (++slot == kStages) {
        slot = 0;
        phase ^= 1;
      }
      if (i >= kLag) {
        cp_async_wait<kLag>();  // stage i - kLag's copies
        publish_next();
      }
    }
    cp_async_wait<0>();
    for (int i = max(0, nst - kLag); i < nst; ++i) publish_next();
    return;
  }

  // Consumers: warp cw owns weight rows 16 cw .. 16 cw + 15 of the block's kRows.
  if constexpr (kConsumerRegs > 0) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));
  const int cw = (tid - 128) >> 5, g = lane >> 2, t = lane & 3;
  const int wr = cw * 16 + g;
  const std::uint32_t sel = 0x4440u | static_cast<std::uint32_t>(t);
  // The next stage's words are read into registers ahead of its decode, so that their
  // shared-memory latency can overlap the wait for the previous stage's wgmmas (ncu: the decode's
  // first PRMTs waited on these loads). Same-run A/B against reading them after the wait (H200,
  // 2026-12-01, docs/perf-cuda.md 27): batched decode B = 128 / 96 1.0% / 1.2% faster (95% CIs
  // exclude 0); single linears within +-1%, except 256 x 4096^2 (27.1 against 26.2 us).
  auto load_raw = [&](int slot, StageWords& q) { load_stage_words(smem + slot * kStage + BN * 128, wr, q); };
  auto decode = [&](const StageWords& q, std::uint32_t (&a)[4][4]) { decode_stage<F16>(q, sel, a); };
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;

  // Stage i sits in slot i % kStages; its fill is phase (i / kStages) & 1 of the slot's barriers.
  // Both are tracked incrementally (a division by the ring depth per stage cost ~10 uniform
  // instructions).
  int slot = 0, prev = 0, prev_of_prev = 0;
  std::uint32_t phase = 0;
  // No proxy fence: the activations arrive through the async proxy (TMA) that wgmma reads with,
  // and the weights and scales are read with ordinary loads.
  auto ready = [&]() { mbar_wait(full0 + 8 * slot, phase); };
  std::uint32_t a0[4][4], a1[4][4];
  StageWords raw;
  if (nst > 0) {
    ready();
    load_raw(0, raw);
    decode(raw, a0);
  }
  // Stage i: issue its wgmmas; wait for stage i + 1's data and read its packed words and scales
  // (no A register is written yet); wait for stage i - 1's wgmmas (the other A set), release that
  // slot, and decode stage i + 1 into it while stage i's wgmmas run.
  auto body = [&](int i, const std::uint32_t (&acur)[4][4], std::uint32_t (&anext)[4][4]) {
    // k16 step s starts 32 bytes further into the swizzled 128-byte rows: + 2 in the descriptor's
    // address field (address >> 4; the tile is 1024-aligned, so no carry out of the field).
    const std::uint64_t desc = sw128_desc(base + slot * kStage);
    wgmma_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s) wgmma_bn<BN, F16>(acc, acur[s], desc + 2 * s);
    wgmma_commit();
    prev = slot;
    if (++slot == kStages) {
      slot = 0;
      phase ^= 1;
    }
    const bool more = i + 1 < nst;
    if (more) {
      ready();
      load_raw(slot, raw);
    }
    wgmma_wait<1>();
    // Every consumer thread releases its own reads of stage i - 1 (an mbarrier arrive orders only
    // the arriving thread's accesses; one lane per warp made racecheck flag the refill).
    if (i > 0) mbar_arrive(empty0 + 8 * prev_of_prev);
    prev_of_prev = prev;
    if (more) decode(raw, anext);
  };
#pragma unroll 1
  for (int i = 0; i < nst; i += 2) {
    body(i, a0, a1);
    if (i + 1 < nst) body(i + 1, a1, a0);
  }
  wgmma_wait<0>();

  store_tile<BN, C, F16>(acc, reinterpret_cast<float*>(smem), p, k_split, ws, n0, wr, m0, t, tid - 128);
#endif
}

// The activation rows as a 2D tensor map: {K elements, M rows}, row pitch a_stride * 2 bytes
// (a multiple of 16, as the API and the kernels require), box {64, BN}, 128-byte swizzle.
// cuTensorMapEncodeTiled is a driver API call, reached through the runtime so that nothing links
// libcuda directly; it only encodes the 128-byte descriptor on the host.
cudaError_t encode_act_map(const GemvArgs& a, int bn, CUtensorMap* map) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (!encode) return cudaErrorNotSupported;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(a.k), static_cast<cuuint64_t>(a.m_rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(a.a_stride) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kStageK), static_cast<cuuint32_t>(bn)};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(a.a), dims, strides, box, elem,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// Grid: x = activation block (fastest, so the blocks that share a row block's weights run
// together and the later ones read them from L2), y = row block of 64 x C weight rows, z = K split.
template <int BN, bool F16, int C>
cudaError_t launch_ws(const GemvArgs& a, const WgemmTile& t, void* workspace, cudaStream_t stream) {
  alignas(64) CUtensorMap map;
  if (const cudaError_t e = encode_act_map(a, BN, &map); e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((a.m_rows + BN - 1) / BN), static_cast<unsigned>((a.n + ws_rows(C) - 1) / ws_rows(C)),
                  static_cast<unsigned>(t.k_split));
  return launch_split_k_gemm(reinterpret_cast<const void*>(gemm_nvfp4_ws_kernel<BN, F16, C>), grid, dim3(ws_threads(C)),
                             ws_smem_bytes(BN, C), a, t.k_split, workspace, stream, &map);
}
template <bool F16>
cudaError_t launch_ws_tile(const GemvArgs& a, const WgemmTile& t, void* workspace, cudaStream_t stream) {
  if (t.consumers == 3)
    return t.bn == 64 ? launch_ws<64, F16, 3>(a, t, workspace, stream) : launch_ws<128, F16, 3>(a, t, workspace, stream);
  return t.bn == 64    ? launch_ws<64, F16, 2>(a, t, workspace, stream)
         : t.bn == 128 ? launch_ws<128, F16, 2>(a, t, workspace, stream)
         : t.bn == 160 ? launch_ws<160, F16, 2>(a, t, workspace, stream)
         : t.bn == 192 ? launch_ws<192, F16, 2>(a, t, workspace, stream)
         : t.bn == 224 ? launch_ws<224, F16, 2>(a, t, workspace, stream)
                       : launch_ws<256, F16, 2>(a, t, workspace, stream);
}
}  // namespace

bool wgemm_tile_valid(const WgemmTile& t) {
  return (t.bn == 64 || t.bn == 128 || (t.bn >= 160 && t.bn <= 256 && t.bn % 32 == 0)) && t.k_split >= 1 &&
         t.k_split <= 64 &&
         (t.consumers == 2 || (t.consumers == 3 && t.bn <= 128));
}

bool wgemm_supported(const std::uint8_t* packed, const std::uint8_t* scales, std::int64_t n, std::int64_t k) {
  return n > 0 && k > 0 && k % kStageK == 0 && reinterpret_cast<std::uintptr_t>(packed) % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(scales) % 4 == 0 && n <= std::int64_t{65535} * kMinRows;
}

// The smallest block shape that holds M (graph us, H200, docs/perf-cuda.md 26 and 28,
// bench/results/*ws-sweep*, *ws64*): bn 64 up to 64 rows (64 x 14336 x 4096 33.9 against 38.3
// for the two-warpgroup kernel it replaced, 64 x 4096^2 12.9 against 13.8), bn 128 up to 128
// (96 / 128 x 4096^2 16.3 / 17.7) and bn 256 beyond (256 x 14336 x 4096 59.4), or bn 192 where
// that costs less (below). K split: the largest power of two (>= 8 stages = 512 k each) that keeps
// the grid within one block per SM; the sweeps' best split at each of the 16 shapes swept on
// 2026-12-01 (bn 64: 12, bn 128/256: 4).
WgemmTile wgemm_pick_tile(int sms, std::int64_t n, std::int64_t k, std::int64_t m) {
  sms = std::max(sms, 1);
  const std::int64_t stages = k / kStageK;
  auto blocks_of = [&](int bn, int consumers) { return ws_grid_blocks(n, m, bn, consumers); };
  auto with_split = [&](int bn) {  // two consumer warpgroups, a power-of-two K split
    WgemmTile t;
    t.bn = bn;
    const std::int64_t need = std::max<std::int64_t>(1, sms / blocks_of(bn, 2));  // one block per SM
    std::int64_t ks = 1;
    while (ks * 2 <= need && ks * 2 * 8 <= stages && ks < 64) ks *= 2;
    t.k_split = static_cast<int>(ks);
    return t;
  };
  auto filled = [&](const WgemmTile& t) { return blocks_of(t.bn, t.consumers) * t.k_split; };
  // The estimates below: the grid's waves x its stages per K split x a block's cost per stage.
  auto waves_x_stages = [&](const WgemmTile& u) {
    return ((filled(u) + sms - 1) / sms) * ((stages + u.k_split - 1) / u.k_split);
  };
  WgemmTile t = with_split(m <= 64 ? 64 : (m <= 128 ? 128 : 256));
  // bn 256 whose grid fills under half the SMs even at its K split (few weight rows: Llama's k/v
  // at 1024 x 4096) takes bn 128 if that fills more: 256 x 1024 x 4096 11.1 against 15.4 us, and
  // batched decode at B = 256 -1.2%. Not from 128 to 64: there each such linear ran 11% faster
  // alone (128 x 1024 x 4096 8.9 against 10.0 us), but the decode step at B = 96 / 128 measured
  // +0.75% / +0.3% (docs/perf-cuda.md 28).
  if (t.bn == 256 && 2 * filled(t) < sms) {
    const WgemmTile half = with_split(128);
    if (filled(half) > filled(t)) t = half;
  }
  // bn 224, 192 or 160 where its grid costs less than bn 256's, estimated as waves x (bn + 64) x
  // stages per split. Why: a block's time is mostly its MACs (bn) plus a decode that does not shrink with bn
  // (the + 64, fitted to bn 128's loss of docs/perf-cuda.md 56: 1.2x bn 256's cost per MAC); bn 192
  // fills the last wave better where bn 256 leaves it a quarter empty (1536 rows at 4096 weight rows:
  // 97% against 73%) and pads fewer activation rows (M = 129..192, 257..384). Measured on H200,
  // paired against bn 256 (same binary, docs/perf-cuda.md 57): Llama-3-8B prefill P = 384 / 768 /
  // 1280 -11.6% / -5.8% / -1.7%, batched decode B = 192 -10.1%; P = 2048 (bn 256 in both) no
  // difference; at 1536 rows 1536 x 4096^2 and 1536 x 14336 x 4096 -3.5% / -4% against the panel
  // they replace, the whole P = 1536 prefill no detectable difference (+1.4%, CI [-1.3, +8.5]).
  // bn 160 and 224 (the same cost; paired against the rule with bn 192 alone, docs/perf-cuda.md
  // 58): P = 320 / 448 / 640 / 1536 -7.2% / -5.8% / -7.7% / -2.4%, batched decode B = 160 / 224
  // -6.1% / -4.9%, P = 768 (bn 192 in both) no difference.
  if (t.bn == 256 && t.consumers == 2)
    for (const int bn : {224, 192, 160}) {
      const WgemmTile u = with_split(bn);
      if (waves_x_stages(u) * (u.bn + 64) < waves_x_stages(t) * (t.bn + 64)) t = u;
    }
  // Three consumer warpgroups (192 rows per block) at bn 64 / 128, with a K split of any count
  // that keeps one wave and >= 8 stages per split, where they fill the GPU much better than two.
  // The estimate is waves x rows x stages per block; three are taken below 0.9x of two. Measured
  // on H200 (graph us, docs/perf-cuda.md 28): where the grids fill alike they were no faster
  // (4096 x 4096: 13.6 / 18.3 against 12.8 / 16.9 at M = 64 / 128; estimate 1.03x). Where
  // two fill 96 of 132 SMs and three 128 they were 20% faster (6144 x 4096, Llama's fused q/k/v:
  // 16.5 / 20.5 against 20.6 / 25.3 at M = 56 / 96; estimate 0.75x). Fused decode: this rule
  // against two consumers everywhere, B = 64 -2.6%; the rule without three at bn 128 (since the
  // staged epilogue), B = 96 / 128 +2.4% / +2.2% (docs/perf-cuda.md 29.1, 29.7).
  if (t.bn <= 128) {
    WgemmTile t3;
    t3.bn = t.bn;
    t3.consumers = 3;
    t3.k_split = static_cast<int>(
        std::max<std::int64_t>(1, std::min<std::int64_t>({sms / blocks_of(t.bn, 3), stages / 8, 64})));
    auto est = [&](const WgemmTile& u) { return static_cast<double>(waves_x_stages(u) * ws_rows(u.consumers)); };
    if (est(t3) < 0.9 * est(t)) t = t3;
  }
  return t;
}

bool wgemm_preferred(int sms, std::int64_t n, std::int64_t k, std::int64_t m) {
  if (n < 4096) return false;
  sms = std::max(sms, 1);
  const WgemmTile t = wgemm_pick_tile(sms, n, k, m);
  // Not with bn 160 (more decode per MAC): at 1280 rows its full grids on 4096 weight rows lost to
  // the panel, Llama-3-8B prefill P = 1280 +1.7% against the panel there (docs/perf-cuda.md 58).
  if (t.bn < 192) return false;
  const std::int64_t blocks = ws_grid_blocks(n, m, t.bn, t.consumers) * t.k_split;
  const std::int64_t waves = (blocks + sms - 1) / sms;
  return 10 * blocks >= 9 * waves * sms;
}

std::size_t wgemm_workspace_bytes(const GemvArgs& a, const WgemmTile& t) {
  return t.k_split <= 1 ? 0 : static_cast<std::size_t>(t.k_split) * a.m_rows * a.n * sizeof(float);
}

cudaError_t gemm_nvfp4_sm90_wgmma(const GemvArgs& a, const WgemmTile& t, void* workspace, cudaStream_t stream) {
  return a.a_f16 ? launch_ws_tile<true>(a, t, workspace, stream) : launch_ws_tile<false>(a, t, workspace, stream);
}

std::string gemm_nvfp4_sm90_wgmma_name(const WgemmTile& t) {
  return "gemm_nvfp4_sm90_ws_r" + std::to_string(ws_rows(t.consumers)) + "_m" + std::to_string(t.bn);
}

}  // namespace nvfp4::cuda
