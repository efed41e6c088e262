// kernels/cpu/tuning_cpu.cpp -- per-host defaults of the CPU tuning table (tuning_cpu.h).
#include "kernels/cpu/tuning_cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace nvfp4::cpu {
namespace {

// The AMX-BF16 instruction set (CPUID leaf 7, EDX bit 22) marks the Sapphire / Emerald Rapids
// class, the Intel machines these defaults were measured on; the process need not have been
// granted AMX for the rest of that core's behaviour to apply.
bool host_has_amx_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d & (1u << 22)) != 0;
#else
  return false;
#endif
}

}  // namespace

CpuTuning host_cpu_tuning() {
  CpuTuning t{};
  // The M=1 vdpbf16ps GEMV's software prefetch helps Zen 4 (-20% cold) and costs 4-10% on
  // Emerald Rapids, cold and hot (tuning_cpu.h, gemv_prefetch_tiles).
  if (host_has_amx_isa()) t.gemv_prefetch_tiles = 0;
  return t;
}

}  // namespace nvfp4::cpu
