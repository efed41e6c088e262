// kernels/cpu/kernels_cpu.h -- internal interface between the CPU dispatcher (matmul_cpu.cpp)
// and the kernels. Kernels take raw pointers, sizes and strides (already validated by
// validate_matmul) and never throw.
//
// Layout assumed everywhere: canonical NVFP4 (format.h): packed [n, k/2] (element 2j low nibble),
// scales [n, k/16] E4M3; x [m, kx] with row stride x_stride (elements), kx in (k-16, k], the
// missing activations counting as zero; y [m, n] with row stride y_stride, dtype of x.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "nvfp4/dtype.h"
#include "nvfp4/format.h"

namespace nvfp4::cpu {

struct MatmulArgs {
  const void* x = nullptr;
  DType dtype = DType::kF32;
  std::int64_t m = 0, kx = 0, x_stride = 0;
  const std::uint8_t* packed = nullptr;
  const std::uint8_t* scales = nullptr;
  float tensor_scale = 1.0f;
  std::int64_t n = 0, k = 0;
  void* y = nullptr;
  std::int64_t y_stride = 0;
};

// gemv_nvfp4_hwy.cpp: weights streamed once per group of <= 8 rows of x; any M. Runs the
// Highway target chosen by dynamic dispatch (hwy::SetSupportedTargetsForTest narrows it).
void gemv_nvfp4_hwy(const MatmulArgs& a);
// gemv_nvfp4_avx512bf16.cpp: needs gemv_avx512bf16_supported() (AVX512-BF16 + VBMI); any M
// (tuned for M <= 8): 32 products per vdpbf16ps, codes decoded by vpsrlw + vpermw, scales by
// vpermb + vpermt2b. fp16 / fp32 activations are split exactly into 2 / 3 bf16 pieces per row
// (gemv_avx512bf16_pieces) that run as extra rows. Returns false, writing nothing, when the
// activations cannot be split exactly (fp32: a nonzero |x| < 2^-102, |x| >= 2^120, Inf, NaN;
// fp16: Inf, NaN); the caller then runs another kernel (the dispatcher: gemv_nvfp4_hwy).
bool gemv_avx512bf16_supported();
// The same file's FMA dot (gemv_fma_dot: fp32 FMAs, no bf16 instruction) needs less: AVX512F, BW,
// VL, DQ and VBMI. So AVX-512 CPUs without AVX512-BF16 (Ice Lake, Tiger Lake, Rocket Lake) run it
// through gemv_nvfp4_avx512bf16 too; the vdpbf16ps dot (the other M, or where the FMA dot is not
// the host's choice) still needs gemv_avx512bf16_supported(), else the call returns false.
bool gemv_fma_dot_supported();
int gemv_avx512bf16_pieces(DType t);
bool gemv_nvfp4_avx512bf16(const MatmulArgs& a);
// The same GEMV on pre-split weights (repack_for_gemv_cpu, include/nvfp4/cpu.h): a.packed holds
// every full 256-k chunk of a row as its 16 even u32 words then its 16 odd ones (the K % 256
// tail canonical); a.scales canonical. Same results bit for bit as gemv_nvfp4_avx512bf16 on the
// canonical bytes (same summation order), same false return for unsplittable activations.
bool gemv_nvfp4_avx512bf16_presplit(const MatmulArgs& a);
// split_bf16_avx512.cpp: row mi of x into P = gemv_avx512bf16_pieces(dtype) bf16 rows
// dst[j * k + kk] (kk < kx; the caller zero-fills the rest) whose sum is x exactly (bf16: a copy).
// Returns false (dst undefined) if the row cannot be split exactly: fp32 with a nonzero
// |x| < 2^min_exp_f32 or |x| >= 2^120, Inf or NaN; fp16 Inf or NaN. min_exp_f32 >= -102 is the
// caller's no-flush bound (proof in the file). Needs AVX512F/BW (callers check stronger ISAs).
bool split_row_bf16(const MatmulArgs& a, std::int64_t mi, std::uint16_t* dst, int min_exp_f32);
// The GEMVs' epilogue: sums[seg][m * P][n] raw fp32 sums of K segment seg for virtual row
// mi * P + j (piece j); per output: segments added in order, pieces smallest first, times the
// tensor scale, stored to y in its dtype.
void gemv_store_pieces(const MatmulArgs& a, int P, std::int64_t nseg, const float* sums);
// gemv_nvfp4_amx.cpp: GEMV for small M on AMX tiles with the weights as the A operand (16 output
// rows x 32 k of exactly decoded bf16 weights e2m1 * |scale|) and the (virtual) activation rows
// as the B operand (<= 16 per C tile); any dtype (fp16 / fp32 split exactly into 2 / 3 pieces,
// fp32 accepted down to 2^-93). Needs gemv_amx_supported() = amx_supported() &&
// gemv_avx512bf16_supported(). Returns false, writing nothing, for activations that cannot be
// split exactly (the dispatcher then runs the Highway GEMV).
bool gemv_amx_supported();
bool gemv_nvfp4_amx(const MatmulArgs& a);
// Tests only, never dispatched: the same kernel with the three tile operations (tile load,
// TDPBF16PS, tile store) emulated in scalar code (gemv_nvfp4_amx.cpp says what the emulation
// approximates), so decode, layouts, threading and epilogue are tested on CPUs without AMX.
// Needs gemv_avx512bf16_supported().
bool gemv_nvfp4_amx_emulated(const MatmulArgs& a);
// gemm_nvfp4_hwy.cpp: W decoded exactly to fp32 panels, fp32 FMA microkernel; any dtype.
void gemm_nvfp4_hwy(const MatmulArgs& a);
// Name of the Highway target dynamic dispatch picks now ("AVX3", "AVX2", "EMU128", ...).
const char* hwy_target_name();
std::vector<std::int64_t> hwy_compiled_targets();

// gemm_nvfp4_bf16.cpp: W decoded exactly to bf16 pair panels, bf16 x (exact), fp32 accumulate;
// the microkernel is AVX512-BF16 vdpbf16ps (gemm_nvfp4_avx512bf16.cpp) or AMX tiles
// (gemm_nvfp4_amx.cpp). bf16 activations; with kAmx also fp16 / fp32, split exactly into
// gemv_avx512bf16_pieces(dtype) bf16 rows each (split_row_bf16 with kAmxSplitMinExpF32) that run
// as extra rows and are summed per output. Returns false, writing nothing, for fp16 / fp32 with
// kAvx512Bf16 or rows that cannot be split (the caller then runs gemm_nvfp4_hwy).
enum class Bf16Kernel { kAvx512Bf16, kAmx };
bool bf16_kernel_supported(Bf16Kernel kind);
bool gemm_nvfp4_bf16(const MatmulArgs& a, Bf16Kernel kind);
// Smallest fp32 exponent the AMX kernels accept in the exact bf16 split: their pieces meet SCALED
// weights (>= 2^-10), and pieces of |x| >= 2^-93 are multiples of 2^-116, so every product is
// >= 2^-126 and TDPBF16PS flushes none (proof in split_bf16_avx512.cpp).
constexpr int kAmxSplitMinExpF32 = -93;

// Microkernels of the bf16 GEMM. C[rows, nc] += A[rows, kc] . B, where A is bf16 row-major
// (lda elements), B is a decoded panel in pair layout Bp[kc/2][nc][2] (bf16), C fp32 (ldc).
// rows % 32 == 0, nc % 32 == 0, kc % 32 == 0 (the driver pads with zeros).
bool avx512bf16_supported();
void gemm_ukernel_avx512bf16(const std::uint16_t* A, std::int64_t lda, const std::uint16_t* Bp,
                             std::int64_t nc, std::int64_t kc, float* C, std::int64_t ldc,
                             std::int64_t rows);
bool amx_supported();  // CPUID AMX-TILE+AMX-BF16 and the kernel granted XTILEDATA to this process
void gemm_ukernel_amx(const std::uint16_t* A, std::int64_t lda, const std::uint16_t* Bp,
                      std::int64_t nc, std::int64_t kc, float* C, std::int64_t ldc,
                      std::int64_t rows);

// 64-byte aligned scratch arrays (zmm / tile rows), freed with std::free.
struct Free64 {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
std::unique_ptr<T[], Free64> alloc64(std::int64_t count) {
  std::size_t bytes = static_cast<std::size_t>(count) * sizeof(T);
  bytes = (bytes + 63) / 64 * 64;
  return std::unique_ptr<T[], Free64>(static_cast<T*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes)));
}

// Software prefetch of one weight row's packed bytes and scales for k in [k0, kend) (Locality 3:
// prefetcht0, 2: prefetcht1). The GEMMs' panel decodes read 16-32 rows x KC/2 bytes at a time:
// runs too short for the hardware prefetchers (docs/perf-cpu.md 40).
// On x86 a volatile asm: GCC 12 (-O1..-O3) deleted every __builtin_prefetch of this function and
// of its callers' loops (a loop of prefetches after another prefetch; seen in objdump,
// docs/perf-cpu.md 40).
template <int Locality>
inline void prefetch_line(const void* p) {
#if defined(__x86_64__) && defined(__GNUC__)
  if constexpr (Locality == 3)
    asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
  else
    asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, Locality);
#endif
}
template <int Locality>
inline void prefetch_row_slice(const MatmulArgs& a, std::int64_t row, std::int64_t k0, std::int64_t kend) {
  const std::uint8_t* srow = a.scales + row * (a.k / kBlockSize);
  prefetch_line<Locality>(srow + k0 / kBlockSize);
  prefetch_line<Locality>(srow + (kend - 1) / kBlockSize);
  const std::uint8_t* prow = a.packed + row * (a.k / 2);
  for (std::int64_t kk = k0; kk < kend; kk += 128) prefetch_line<Locality>(prow + kk / 2);
}
// The GEMM drivers' next KC slice, k in [k1, k1 + kc) clipped to K, of weight rows [n0, n0 + cols)
// into L2 while the microkernel runs on the current one (nothing when k1 is past K).
inline void prefetch_next_slice_l2(const MatmulArgs& a, std::int64_t n0, std::int64_t cols, std::int64_t k1,
                                   std::int64_t kc) {
  if (k1 >= a.k) return;
  for (std::int64_t c = 0; c < cols; ++c) prefetch_row_slice<2>(a, n0 + c, k1, std::min(k1 + kc, a.k));
}

// v rounded up to a multiple of q (q > 0).
inline std::int64_t round_up(std::int64_t v, std::int64_t q) { return (v + q - 1) / q * q; }

// The GEMMs' panel width: NC columns per task, narrowed in steps of `step` (down to one step)
// while the N x M task grid would give the threads fewer than 4 tasks each (small N).
inline std::int64_t narrow_panel_cols(std::int64_t nc, std::int64_t step, std::int64_t mblocks, std::int64_t n,
                                      std::int64_t threads) {
  while (nc > step && mblocks * ((n + nc - 1) / nc) < 4 * threads) nc -= step;
  return nc;
}

// ---- shared scalar helpers (exact) -------------------------------------------------------
// |scale| as fp32 for every E4M3 byte (0x7F/0xFF -> NaN, as the oracle gives).
const float* e4m3_abs_table();  // 256 entries
// |scale| / 2 of every E4M3 byte (exact: |scale| >= 2^-9): the byte-table GEMV's block scale.
const float* e4m3_half_abs_table();

// 2 * e2m1 of codes 0..15 as int8 (E2M1: 0, .5, 1, 1.5, 2, 3, 4, 6, then the negatives; -0 -> 0):
// the byte table (pshufb) of the x86 decodes without AVX-512 (gemv_nvfp4_hwy.cpp,
// gemm_nvfp4_hwy.cpp). Exact integers; times |scale| / 2 they are the oracle's e2m1 * |scale|.
alignas(16) inline constexpr std::uint8_t kTwiceE2M1[16] = {0, 1, 2, 3, 4, 6, 8, 12,
                                                            0, 0xFF, 0xFE, 0xFD, 0xFC, 0xFA, 0xF8, 0xF4};

// Row m of x widened exactly to fp32 into dst[0, k): elements >= kx are zero.
void load_x_row_f32(const MatmulArgs& a, std::int64_t m, float* dst);

}  // namespace nvfp4::cpu
