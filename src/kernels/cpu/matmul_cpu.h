// kernels/cpu/matmul_cpu.h -- internal entry of the CPU backend (SIMD + threads).
// Arguments arrive validated (validate_matmul); host pointers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/kernels_cpu.h"
#include "nvfp4/tensor.h"

namespace nvfp4::cpu {

// y = x . dequant(w)^T for any M; picks GEMV (small M) or GEMM (large M) and the best ISA
// compiled in and supported by this CPU.
void quantized_matmul(const MatrixView& x, const WeightView& w, const MatrixView& y);

// The kernel families, for tests and benchmarks that must run one path on purpose.
enum class CpuPath : std::uint8_t {
  kAuto,
  kGemv,           // Highway GEMV (weights streamed once per 8 rows of x), any dtype
  kGemmF32,        // Highway GEMM, exact fp32 weight panels, fp32 FMA, any dtype
  kGemmAvx512Bf16, // bf16 panels + vdpbf16ps microkernel, bf16 activations only
  kGemmAmx,        // bf16 panels + AMX tiles, bf16 activations only
  kGemvAvx512Bf16, // GEMV on vdpbf16ps (vpermw decode); fp16/fp32 split exactly into 2/3 bf16
                   // pieces (falls back to kGemv for data that cannot be split exactly)
  kGemvAmx,        // GEMV on AMX tiles (weights = A operand, decoded once for all rows); any dtype
                   // (same split and fallback as kGemvAvx512Bf16); needs AMX + AVX512-BF16/VBMI
};
const char* cpu_path_name(CpuPath p);
// Whether the path can run on this CPU for activations of dtype t.
bool cpu_path_supported(CpuPath p, DType t);
// True if any output element of a (y[m, n], a.y_stride) is Inf or NaN.
bool output_has_nonfinite(const MatmulArgs& a);
// The kernels' argument block for validated views (no checks here).
MatmulArgs matmul_args(const MatrixView& x, const WeightView& w, const MatrixView& y);
// Runs exactly path p (kAuto = the normal choice). Validates like the public entry; throws
// nvfp4::Error if p cannot run here for this dtype.
void quantized_matmul_path(const MatrixView& x, const WeightView& w, const MatrixView& y, CpuPath p);
// The path kAuto picks for M rows of dtype t.
CpuPath cpu_path_for(std::int64_t m, DType t);
// Kernel name the way benchmarks report it, e.g. "gemv_nvfp4_hwy_AVX3_DL", "gemm_nvfp4_amx".
std::string cpu_kernel_name(std::int64_t m, DType t);
// The kernel cpu::quantized_matmul_repacked runs for M rows of dtype t (the pre-split GEMV).
std::string cpu_repacked_kernel_name(std::int64_t m, DType t);

// Highway targets compiled into the kernels and supported by this CPU (HWY_* bits), best first
// is not guaranteed. Tests run each with hwy::SetSupportedTargetsForTest(target).
std::vector<std::int64_t> hwy_compiled_targets();
// Name of the Highway target dynamic dispatch picks now.
const char* hwy_target_name();

}  // namespace nvfp4::cpu
