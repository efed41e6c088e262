// kernels/cpu/matmul_cpu.cpp -- the CPU backend's dispatcher: a short ordered chain.
//   M <= gemv_fma_max_m (2 with AMX, else 16) with the dtype in gemv_fma_dtypes (every dtype on
//     Intel AVX512-BF16 + FP16 hosts and on AVX-512 hosts without BF16, fp32 on Zen 4), AVX512F/BW/VL/DQ + VBMI
//                                            -> GEMV on vdpbf16ps's lanes with fp32 FMAs (the FMA dot)
//   M's bit in gemv_amx_rows (default M = 2..16), or M > 16 with M x pieces <=
//     gemv_amx_max_virtual_rows (default 48), AMX granted, AVX512-BF16+VBMI
//                                            -> GEMV on AMX tiles, any dtype (fp16/fp32 split
//                                               exactly into 2/3 bf16 pieces; data that cannot be
//                                               split exactly runs the Highway GEMV)
//   M <= gemv_max_m, AVX512-BF16+VBMI, and bf16, or fp16/fp32 with M in gemv_split_f16_rows /
//     gemv_split_f32_rows                    -> GEMV on vdpbf16ps (fp16/fp32 split exactly into
//                                               2/3 bf16 pieces; if the data cannot be split
//                                               exactly, e.g. NaN/Inf, the Highway GEMV runs)
//   M <= gemv_max_m (tuning_cpu.h)          -> GEMV (Highway, best target)
//   AMX granted                              -> GEMM on AMX tiles, any dtype (fp16/fp32 split
//                                               exactly; data that cannot be split: fp32 GEMM)
//   M <= gemv_bf16_max_m / gemv_f16_max_m / gemv_f32_max_m (24 / 16 / 8), no AMX, the dtype not
//     in gemv_fma_dtypes (Zen 4)             -> GEMV on vdpbf16ps in groups of <= 8 (virtual) rows
//   bf16 activations, AVX512-BF16, M < gemm_bf16_fp32_min_m (default: 0 on Intel without AMX,
//     else every M)                          -> GEMM on vdpbf16ps
//   otherwise                                -> GEMM fp32 (Highway, best target)
// fp32/fp16 activations are never rounded to bf16 (that would cost ~2^-9 relative per product,
// far outside the documented tolerance): the GEMVs and the AMX GEMM split them exactly (proof in
// split_bf16_avx512.cpp); the vdpbf16ps GEMM takes bf16 only.
#include "kernels/cpu/matmul_cpu.h"

#include <limits>
#include <string>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/tuning_cpu.h"
#include "nvfp4/error.h"
#include "nvfp4/ops.h"

namespace nvfp4::cpu {

const float* e4m3_abs_table() {
  static const struct Table {
    float v[256];
    Table() {
      for (int b = 0; b < 256; ++b) v[b] = e4m3_to_float(static_cast<std::uint8_t>(b & 0x7F));
    }
  } t;
  return t.v;
}

const float* e4m3_half_abs_table() {
  static const struct Table {
    float v[256];
    Table() {
      for (int b = 0; b < 256; ++b) v[b] = e4m3_abs_table()[b] * 0.5f;
    }
  } t;
  return t.v;
}

void load_x_row_f32(const MatmulArgs& a, std::int64_t m, float* dst) {
  switch (a.dtype) {
    case DType::kF32: {
      const float* src = static_cast<const float*>(a.x) + m * a.x_stride;
      for (std::int64_t k = 0; k < a.kx; ++k) dst[k] = src[k];
      break;
    }
    case DType::kBF16: {
      const std::uint16_t* src = static_cast<const std::uint16_t*>(a.x) + m * a.x_stride;
      for (std::int64_t k = 0; k < a.kx; ++k) dst[k] = bf16_to_f32(src[k]);
      break;
    }
    default: {
      const std::uint16_t* src = static_cast<const std::uint16_t*>(a.x) + m * a.x_stride;
      for (std::int64_t k = 0; k < a.kx; ++k) dst[k] = f16_to_f32(src[k]);
      break;
    }
  }
  for (std::int64_t k = a.kx; k < a.k; ++k) dst[k] = 0.0f;
}

// True on Intel CPUs with AVX512-BF16 and AVX512-FP16 (Sapphire Rapids and later: the class both
// measured hosts belong to; Cooper Lake, BF16 without FP16, was never measured), whether or not
// AMX is exposed: a hypervisor may hide AMX (the 2026-12-02 dev VM, family 6 model 207, has
// AVX512-BF16 and AVX512-FP16 but no AMX flags) while the vector units stay the same.
static bool intel_avx512bf16_host() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool v = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
    const bool intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;  // "GenuineIntel"
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool fp16 = (d & (1u << 23)) != 0;  // CPUID.(EAX=7,ECX=0):EDX[23] = AVX512_FP16
    return intel && fp16 && avx512bf16_supported();
  }();
  return v;
#else
  return false;
#endif
}

std::int64_t gemv_fma_dtypes_rule(bool intel_bf16_fp16, bool bf16, bool fma_dot_isa) {
  // On Intel's AVX512-BF16 cores vdpbf16ps issues once per ~2 cycles and shares port 5 with
  // vpermw, while vfmadd231ps issues twice per cycle (docs/perf-cpu.md 14; vdpbf16ps_rate on the
  // AMX host and on the model 207 VM without AMX: 1.3 against 5.4 G instructions/s per thread,
  // docs/perf-cpu.md 28). Zen 4 runs vdpbf16ps once per cycle: it keeps the bf16 dot for bf16 and
  // fp16 (1 and 2 bf16 pieces), but fp32's 3 pieces cost 3 vdpbf16ps per 32 products, behind the FMA
  // dot's 2 FMAs: 19-35% slower at M = 1..8 (Zen 4 dev VM, both in one process, 2026-12-03,
  // docs/perf-cpu.md 39.8). AVX-512 CPUs without BF16 have no bf16 dot; the FMA dot beat their
  // alternative, the Highway GEMV, by 1.1-1.35x at M = 1..8 on Emerald Rapids (docs/perf.md open
  // lead 4b, 2026-12-03).
  if (!fma_dot_isa) return 0;
  return intel_bf16_fp16 || !bf16
             ? gemv_fma_dtype_bit(DType::kF32) | gemv_fma_dtype_bit(DType::kF16) | gemv_fma_dtype_bit(DType::kBF16)
             : gemv_fma_dtype_bit(DType::kF32);
}

std::int64_t gemv_fma_dtypes_default() {
  return gemv_fma_dtypes_rule(intel_avx512bf16_host(), avx512bf16_supported(), gemv_fma_dot_supported());
}

std::int64_t gemv_fma_max_m_default() { return gemv_amx_supported() ? 2 : 16; }

std::int64_t gemm_bf16_fp32_min_m_default() {
  const bool slow_vdpbf16ps = (gemv_fma_dtypes_default() & gemv_fma_dtype_bit(DType::kBF16)) != 0;
  return !amx_supported() && slow_vdpbf16ps ? 0 : std::numeric_limits<std::int64_t>::max();
}

const char* cpu_path_name(CpuPath p) {
  switch (p) {
    case CpuPath::kAuto: return "auto";
    case CpuPath::kGemv: return "gemv_nvfp4_hwy";
    case CpuPath::kGemmF32: return "gemm_nvfp4_hwy";
    case CpuPath::kGemmAvx512Bf16: return "gemm_nvfp4_avx512bf16";
    case CpuPath::kGemvAvx512Bf16: return "gemv_nvfp4_avx512bf16";
    case CpuPath::kGemvAmx: return "gemv_nvfp4_amx";
    default: return "gemm_nvfp4_amx";
  }
}

bool cpu_path_supported(CpuPath p, DType t) {
  switch (p) {
    case CpuPath::kGemmAvx512Bf16: return t == DType::kBF16 && bf16_kernel_supported(Bf16Kernel::kAvx512Bf16);
    case CpuPath::kGemvAvx512Bf16: return gemv_avx512bf16_supported();  // any dtype (exact split)
    case CpuPath::kGemmAmx: return bf16_kernel_supported(Bf16Kernel::kAmx);  // any dtype (exact split)
    case CpuPath::kGemvAmx: return gemv_amx_supported();  // any dtype (exact split)
    default: return true;
  }
}

CpuPath cpu_path_for(std::int64_t m, DType t) {
  const CpuTuning& tune = cpu_tuning();
  const bool amx_gemv_m = m <= 16 ? m >= 1 && ((tune.gemv_amx_rows >> (m - 1)) & 1u) != 0
                                  : m * gemv_avx512bf16_pieces(t) <= tune.gemv_amx_max_virtual_rows;
  // The FMA dot first: at M = 2 it is as fast as the AMX GEMV when the host's TMUL runs at full
  // rate and faster when it does not (tuning_cpu.h gemv_fma_max_m).
  if (gemv_fma_dot(m, t) && gemv_fma_dot_supported()) return CpuPath::kGemvAvx512Bf16;
  if (amx_gemv_m && cpu_path_supported(CpuPath::kGemvAmx, t)) return CpuPath::kGemvAmx;
  if (m <= tune.gemv_max_m) {
    const std::uint32_t rows = t == DType::kF32 ? tune.gemv_split_f32_rows : tune.gemv_split_f16_rows;
    const bool take = t == DType::kBF16 ||
                      (m >= 1 && m <= 32 && ((rows >> (m - 1)) & 1u) != 0);
    return take && cpu_path_supported(CpuPath::kGemvAvx512Bf16, t) ? CpuPath::kGemvAvx512Bf16 : CpuPath::kGemv;
  }
  if (cpu_path_supported(CpuPath::kGemmAmx, t)) return CpuPath::kGemmAmx;
  // Mid M on a host without AMX: the vdpbf16ps GEMV in groups of 8 (virtual) rows beats the bf16
  // GEMM (bf16) and the fp32 GEMM (fp16 / fp32) up to a per-dtype M (measured on Zen 4:
  // tuning_cpu.h). Not where the dtype takes the FMA dot (gemv_fma_dtypes): vdpbf16ps is the slow
  // unit there, and the fp32 GEMM follows the FMA dot (docs/perf-cpu.md 29).
  const std::int64_t mid_max = t == DType::kBF16 ? tune.gemv_bf16_max_m
                               : t == DType::kF16 ? tune.gemv_f16_max_m
                                                  : tune.gemv_f32_max_m;
  const bool host_has_amx = cpu_path_supported(CpuPath::kGemmAmx, DType::kBF16);
  const bool vdpbf16ps_slow = (tune.gemv_fma_dtypes & gemv_fma_dtype_bit(t)) != 0;
  if (m <= mid_max && !host_has_amx && !vdpbf16ps_slow && cpu_path_supported(CpuPath::kGemvAvx512Bf16, t))
    return CpuPath::kGemvAvx512Bf16;
  if (cpu_path_supported(CpuPath::kGemmAvx512Bf16, t) && m < tune.gemm_bf16_fp32_min_m) return CpuPath::kGemmAvx512Bf16;
  return CpuPath::kGemmF32;
}

std::string cpu_kernel_name(std::int64_t m, DType t) {
  const CpuPath p = cpu_path_for(m, t);
  std::string s = cpu_path_name(p);
  if (p == CpuPath::kGemv || p == CpuPath::kGemmF32) s += std::string("_") + hwy_target_name();
  // "_sp3" / "_sp2": fp32 / fp16 rows split into 3 / 2 bf16 pieces (<= 26 characters: the
  // width of the bench table's kernel column).
  if (p == CpuPath::kGemvAvx512Bf16 && gemv_fma_dot(m, t)) return "gemv_nvfp4_avx512fma";
  if ((p == CpuPath::kGemvAvx512Bf16 || p == CpuPath::kGemvAmx || p == CpuPath::kGemmAmx) && t != DType::kBF16)
    s += "_sp" + std::to_string(gemv_avx512bf16_pieces(t));
  return s;
}

std::string cpu_repacked_kernel_name(std::int64_t m, DType t) {
  return gemv_fma_dot(m, t) ? "gemv_nvfp4_avx512fma_presplit" : "gemv_nvfp4_avx512bf16_presplit";
}

// True if any y[m, n] is Inf or NaN (bit test per element). Measured: 2.3 us for 4096 bf16
// outputs (Zen 4 dev VM, the loop alone at -O3, 2026-11-30), 0.2% of an M=1 4096 x 14336 call.
bool output_has_nonfinite(const MatmulArgs& a) {
  bool bad = false;
  for (std::int64_t m = 0; m < a.m; ++m) {
    if (a.dtype == DType::kF32) {
      const std::uint32_t* r = static_cast<const std::uint32_t*>(a.y) + m * a.y_stride;
      for (std::int64_t n = 0; n < a.n; ++n) bad |= (r[n] & 0x7F800000u) == 0x7F800000u;
    } else {
      const std::uint16_t mask = a.dtype == DType::kBF16 ? 0x7F80u : 0x7C00u;
      const std::uint16_t* r = static_cast<const std::uint16_t*>(a.y) + m * a.y_stride;
      for (std::int64_t n = 0; n < a.n; ++n) bad |= (r[n] & mask) == mask;
    }
  }
  return bad;
}

MatmulArgs matmul_args(const MatrixView& x, const WeightView& w, const MatrixView& y) {
  MatmulArgs a;
  a.x = x.data;
  a.dtype = x.dtype;
  a.m = x.rows;
  a.kx = x.cols;
  a.x_stride = x.stride;
  a.packed = w.packed;
  a.scales = w.scales;
  a.tensor_scale = w.tensor_scale;
  a.n = w.n;
  a.k = w.k;
  a.y = y.data;
  a.y_stride = y.stride;
  return a;
}

void quantized_matmul_path(const MatrixView& x, const WeightView& w, const MatrixView& y, CpuPath p) {
  const char* op = "quantized_matmul[cpu]";
  validate_matmul(op, x, w, y);
  if (x.rows == 0) return;
  if (p == CpuPath::kAuto) p = cpu_path_for(x.rows, x.dtype);
  if (!cpu_path_supported(p, x.dtype))
    fail(op, std::string("kernel ") + cpu_path_name(p) + " cannot run here for " + dtype_name(x.dtype) +
                 " activations (M=" + std::to_string(x.rows) + " N=" + std::to_string(w.n) +
                 " K=" + std::to_string(w.k) + ")");
  const MatmulArgs a = matmul_args(x, w, y);
  // True when the kernel that ran forms sum_j e2m1_j * x_j per block before the block scale
  // (the Highway and vdpbf16ps GEMVs; the AMX GEMV and the GEMMs multiply by scaled weights).
  bool unscaled_partials = false;
  switch (p) {
    case CpuPath::kGemv:
      gemv_nvfp4_hwy(a);
      unscaled_partials = true;
      break;
    case CpuPath::kGemmF32: gemm_nvfp4_hwy(a); break;
    case CpuPath::kGemmAvx512Bf16:
      if (!gemm_nvfp4_bf16(a, Bf16Kernel::kAvx512Bf16)) gemm_nvfp4_hwy(a);  // bf16 only here: always runs
      break;
    case CpuPath::kGemvAvx512Bf16:
      // Activations that cannot be split exactly into bf16 pieces (fp32 outside [2^-102, 2^120),
      // Inf/NaN): the Highway GEMV gives the same contract (oracle within tolerance, same NaN/Inf).
      if (!gemv_nvfp4_avx512bf16(a)) gemv_nvfp4_hwy(a);
      unscaled_partials = true;
      break;
    case CpuPath::kGemvAmx:
      // Same fallback (fp32 outside [2^-93, 2^120), Inf/NaN; the bound is the AMX GEMV's).
      if (!gemv_nvfp4_amx(a)) {
        gemv_nvfp4_hwy(a);
        unscaled_partials = true;
      }
      break;
    default:
      // fp16 / fp32 rows outside the exact split (fp32 outside [2^-93, 2^120), Inf/NaN): the fp32
      // GEMM, which multiplies the same scaled weights.
      if (!gemm_nvfp4_bf16(a, Bf16Kernel::kAmx)) gemm_nvfp4_hwy(a);
      break;
  }
  // An unscaled block partial can overflow near FLT_MAX (|x| > ~2^120 with small scales: the
  // Highway GEMV's byte-table decode sums 2 * e2m1 * x) where
  // the oracle's x * (e2m1 * scale) products do not. A non-finite output (rare: it also comes
  // from NaN/Inf inputs, where the rerun gives the same) is recomputed on the GEMM, whose decoded
  // panels hold the scaled weights as the oracle does.
  if (unscaled_partials && output_has_nonfinite(a)) gemm_nvfp4_hwy(a);
}

void quantized_matmul(const MatrixView& x, const WeightView& w, const MatrixView& y) {
  quantized_matmul_path(x, w, y, CpuPath::kAuto);
}

}  // namespace nvfp4::cpu
