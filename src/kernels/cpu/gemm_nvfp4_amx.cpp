// kernels/cpu/gemm_nvfp4_amx.cpp -- bf16 GEMM microkernel on AMX tiles (TDPBF16PS).
//
// C[rows, nc] += A[rows, kc] . B with A bf16 row-major (lda) and B in pair layout Bp[kc/2][nc][2]:
// exactly the AMX B-tile format (a tile row = one K pair for 16 columns, 64 bytes), so a B tile
// is a strided load of the decoded panel (row stride nc*4 bytes). Register block 32 x 32:
// C tiles tmm0..3 (2 x 2 of 16x16 fp32), A tiles tmm4..5 (16 rows x 32 k), B tiles tmm6..7
// (16 k pairs x 16 columns). rows, nc, kc are multiples of 32 (the driver pads with zeros).
// TDPBF16PS, like vdpbf16ps, flushes denormals (Intel SDM).
//
// Availability: CPUID.(7,0):EDX[24] AMX-TILE and EDX[22] AMX-BF16, and Linux must grant this
// process the XTILEDATA state (arch_prctl ARCH_REQ_XCOMP_PERM, Linux >= 5.16); without the grant
// the first tile instruction faults. amx_supported() does both once and caches the answer.
#include "kernels/cpu/kernels_cpu.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define NVFP4_HAVE_AMX_BUILD 1
#endif

namespace nvfp4::cpu {

#if defined(NVFP4_HAVE_AMX_BUILD)
namespace {
constexpr long kArchGetXcompPerm = 0x1022;
constexpr long kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

struct TileConfig {
  std::uint8_t palette_id;
  std::uint8_t start_row;
  std::uint8_t reserved[14];
  std::uint16_t colsb[16];
  std::uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads a 64-byte block");
}  // namespace

bool amx_supported() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool amx_bf16 = (d & (1u << 22)) != 0, amx_tile = (d & (1u << 24)) != 0;
    if (!amx_bf16 || !amx_tile) return false;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
    unsigned long bitmask = 0;
    if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &bitmask) != 0) return false;
    return (bitmask & (1ul << kXfeatureXtiledata)) != 0;
  }();
  return ok;
}

__attribute__((target("amx-tile,amx-bf16"))) void gemm_ukernel_amx(
    const std::uint16_t* A, std::int64_t lda, const std::uint16_t* Bp, std::int64_t nc, std::int64_t kc,
    float* C, std::int64_t ldc, std::int64_t rows) {
  TileConfig cfg{};
  cfg.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  const long cs = static_cast<long>(ldc * 4), as = static_cast<long>(lda * 2), bs = static_cast<long>(nc * 4);
  for (std::int64_t i0 = 0; i0 < rows; i0 += 32) {
    for (std::int64_t s = 0; s < nc; s += 32) {
      float* c = C + i0 * ldc + s;
      _tile_loadd(0, c, cs);
      _tile_loadd(1, c + 16, cs);
      _tile_loadd(2, c + 16 * ldc, cs);
      _tile_loadd(3, c + 16 * ldc + 16, cs);
      for (std::int64_t k = 0; k < kc; k += 32) {
        _tile_loadd(4, A + i0 * lda + k, as);
        _tile_loadd(5, A + (i0 + 16) * lda + k, as);
        const std::uint16_t* b = Bp + ((k / 2) * nc + s) * 2;
        _tile_loadd(6, b, bs);
        _tile_loadd(7, b + 32, bs);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, c, cs);
      _tile_stored(1, c + 16, cs);
      _tile_stored(2, c + 16 * ldc, cs);
      _tile_stored(3, c + 16 * ldc + 16, cs);
    }
  }
  _tile_release();
}
#else
bool amx_supported() { return false; }
void gemm_ukernel_amx(const std::uint16_t*, std::int64_t, const std::uint16_t*, std::int64_t, std::int64_t,
                      float*, std::int64_t, std::int64_t) {}
#endif

}  // namespace nvfp4::cpu
