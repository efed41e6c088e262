// kernels/cpu/gemv_nvfp4_amx.cpp -- W4A16 NVFP4 GEMV for small M (2..16) on AMX tiles.
//
// Why: on Sapphire/Emerald Rapids the vdpbf16ps GEMV is compute-bound from M=2 on (measured
// 2-core Emerald Rapids, N=4096 K=14336: M=2 1.51x, M=4 2.09x, M=8 3.74x the M=1 time), because
// its multiply-adds grow with M. With TDPBF16PS the multiply-adds are nearly free (one
// instruction does 16 x 32 x M of them); what remains is the exact decode of every weight once,
// shared by all activation rows. docs/perf-cpu.md section 6 has the cost model.
//
// Operands of C += A . B (TDPBF16PS, Intel SDM):
//   A tile (16 rows x 64 B): 16 weight rows n x 32 consecutive k, decoded bf16 e2m1 * |scale|.
//     Each A row is exactly one zmm of decoded values: no transpose.
//   B tile (16 rows x 4*mc B): row p = k pair p of the 32 k, column j = virtual activation row j
//     (mc <= 16): the activations are prepared once per call in this pair layout, per chunk of
//     <= 16 virtual rows: xb[chunk][group g][pair p][j][2] (bf16).
//   C tile (16 rows x 4*mc B): fp32 sums for 16 weight rows x mc virtual rows.
// Within a 32-k group the k order is permuted (the same permutation on A and B, so each sum is
// unchanged): A word i = 4q + w (q = 0..7 qwords, w = 0..3) holds k = 16 (q % 2) + 4 (q / 2) + w,
// which lets ONE vpmultishiftqb pull every nibble out of a 128-bit broadcast of the 16 packed
// bytes (qword q of the broadcast is packed qword q % 2 = block q % 2).
//
// Decode of one A row (32 weights = 2 E4M3 blocks of row n), per 32 weights:
//   vbroadcasti64x2 (load) -> vpmultishiftqb (nibble c of block q%2 to the low bits of word i)
//   -> vpternlogd (keep bits 3:0, set bit 4 on the words of block 1) -> vpermw from a 32-entry
//   bf16 LUT [e2m1 values x |s0|, e2m1 values x |s1|] -> one 64-byte store to the A buffer.
//   The LUT is [table[s0] | table[s1]] (one ymm load + one vinserti64x4 from memory) from an
//   8 KiB table of e2m1 x |E4M3 byte| for all 256 bytes, built once by the arithmetic of the
//   original per-group build, which tuning gemv_amx_decode_table = 0 still runs: 2 vmulps (|s|
//   broadcast from the fp32 table e4m3_abs_table()) + 1 vcvtne2ps2bf16 (uop counts at
//   decode_a_tiles; the two give the same bits, tests/cpu/test_gemv_amx.cpp).
//   Exact: e2m1 x E4M3 has <= 6 significant bits and lies in [2^-10, 2688] (or is 0 / NaN for a
//   NaN scale 0x7F/0xFF, as the oracle gives), so fp32 multiply and bf16 conversion are exact,
//   and the decoded weights are the oracle's fl(e2m1 * |s|). The tensor scale multiplies the
//   final fp32 sum once, as in every kernel and the oracle.
// A K tail of 16 (K % 32 == 16) is a group whose second block has codes 0 and scale 0: the padded
// weights are exactly 0 and the padded activations 0.
//
// Denormals: TDPBF16PS reads denormal bf16 inputs as zero and flushes denormal results (Intel
// SDM, MXCSR ignored). The weights are >= 2^-10 (normal); bf16 activations behave as in the
// vdpbf16ps GEMV (tolerance in tests/cpu/test_matmul_cpu.cpp). fp16 / fp32 activations are split
// exactly into 2 / 3 bf16 pieces (split_bf16_avx512.cpp) that run as extra virtual rows; here a
// piece meets a SCALED weight (a multiple of 2^-10), so fp32 activations are accepted from 2^-93
// (pieces multiples of 2^-116, products of 2^-126: nothing is flushed) instead of the vdpbf16ps
// GEMV's 2^-102; smaller nonzero fp32 values, Inf and NaN make the call return false (fallback).
//
// Structure: everything except the tile operations (LDTILECFG, TILELOADD, TILEZERO, TDPBF16PS,
// TILESTORED) is ordinary AVX-512 code; the tile operations come from a policy class: AmxOps
// (the instructions, as inline asm with the tile number as an immediate, so no AMX target
// attribute is needed and the file builds with any x86-64 flags) or EmuOps (a scalar emulation,
// tests only), so the whole kernel is tested on CPUs without AMX.
//
// Threads: tasks of 16 * n_tiles weight rows (tuning_cpu.h) x K segments (K is split into
// segments summed in a fixed order only when N gives too few tasks, like the vdpbf16ps GEMV).
// Within a task, per K block: decode n_tiles x 16 rows x k_block into L1 buffers, then per
// 32-k group load each B tile once and run it against every A tile (n_tiles C tiles).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tuning_cpu.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <immintrin.h>
#define NVFP4_GEMV_AMX_X86 1
// GCC 12 warns inside avx512fintrin.h (_mm512_undefined_*): a known false positive.
#if !defined(__clang__)  // a GCC-only warning; clang warns about the unknown group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace nvfp4::cpu {

#if defined(NVFP4_GEMV_AMX_X86)
namespace {

#define NVFP4_AMXV_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi")))

constexpr std::int64_t kGroupK = 32;   // k per A tile row
constexpr std::int64_t kTileElems = 16 * kGroupK;  // bf16 elements of one A tile (1 KiB)
constexpr int kMaxAbufTiles = 32;      // A buffer per task: n_tiles x k_block/32 tiles <= 32 KiB

struct TileCfg {  // LDTILECFG memory operand, palette 1 (Intel SDM vol. 2, LDTILECFG)
  std::uint8_t palette_id = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};
static_assert(sizeof(TileCfg) == 64, "LDTILECFG reads a 64-byte block");

// ---- tile operations: the instructions --------------------------------------------------------
// GCC's _tile_* macros stringify the tile number, so they cannot take a template parameter; the
// "i" operand with %c prints the immediate. Both asm dialects are given, like GCC's header.
struct AmxOps {
  static void config(const TileCfg& c) { __asm__ volatile("ldtilecfg %0" ::"m"(c)); }
  static void release() { __asm__ volatile("tilerelease" ::); }
  template <int T>
  static void zero() {
    __asm__ volatile("tilezero %%tmm%c0" ::"i"(T));
  }
  template <int T>
  static void load(const void* p, long stride) {
    __asm__ volatile("{tileloadd (%0,%1,1), %%tmm%c2|tileloadd %%tmm%c2, [%0+%1*1]}" ::"r"(p), "r"(stride), "i"(T)
                     : "memory");
  }
  template <int T>
  static void store(void* p, long stride) {
    __asm__ volatile("{tilestored %%tmm%c2, (%0,%1,1)|tilestored [%0+%1*1], %%tmm%c2}" ::"r"(p), "r"(stride), "i"(T)
                     : "memory");
  }
  template <int C, int A, int B>
  static void dp() {  // C += A . B
    __asm__ volatile("{tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0|tdpbf16ps %%tmm%c0, %%tmm%c1, %%tmm%c2}" ::"i"(C),
                     "i"(A), "i"(B));
  }
};

// ---- tile operations: scalar emulation (tests only) --------------------------------------------
// Same memory layouts and semantics as the instructions (Intel SDM pseudo-code): a tile register
// is 16 rows x 64 bytes; loads / dot products zero what lies beyond the configured rows / colsb.
// TDPBF16PS: for each C element, for k = 0 .. a.colsb/4-1 in order:
//   c += a[m][2k] * b[k][2n];  c += a[m][2k+1] * b[k][2n+1]
// with bf16 inputs whose denormals read as zero, fp32 products (exact: 8 x 8 bits), each addition
// rounded to nearest even and a denormal result flushed to zero. What it approximates: the SDM
// describes the operation with these per-product fp32 additions, but the hardware's internal
// order/fusion of the two products of a pair (and of the accumulation) is not specified
// bit-exactly; a different order changes a sum by at most the reordering error that the tests'
// tolerance covers, and not at all for the one-hot (single nonzero term) tests.
// A configuration the instruction would reject (#UD: shapes that do not match) sets `fault`;
// the emulated entry then poisons the whole output with NaN so any test fails.
struct EmuState {
  TileCfg cfg;
  alignas(64) std::uint8_t t[8][16][64];
};
EmuState& emu_state() {
  thread_local EmuState s;
  return s;
}
std::atomic<bool> g_emu_fault{false};

float emu_bf16(const std::uint8_t* p) {  // bf16 -> fp32, denormal input read as zero
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  if ((h & 0x7F80u) == 0) h &= 0x8000u;
  return bf16_to_f32(h);
}
float emu_ftz(float v) { return std::fabs(v) < 0x1p-126f ? std::copysign(0.0f, v) : v; }

__attribute__((noinline)) void emu_load(int t, const void* p, long stride) {
  EmuState& s = emu_state();
  std::memset(s.t[t], 0, sizeof s.t[t]);
  for (int r = 0; r < s.cfg.rows[t]; ++r)
    std::memcpy(s.t[t][r], static_cast<const std::uint8_t*>(p) + r * stride, s.cfg.colsb[t]);
}
__attribute__((noinline)) void emu_store(int t, void* p, long stride) {
  EmuState& s = emu_state();
  for (int r = 0; r < s.cfg.rows[t]; ++r)
    std::memcpy(static_cast<std::uint8_t*>(p) + r * stride, s.t[t][r], s.cfg.colsb[t]);
}
__attribute__((noinline)) void emu_dp(int c, int a, int b) {
  EmuState& s = emu_state();
  const TileCfg& g = s.cfg;
  if (g.rows[c] != g.rows[a] || g.colsb[c] != g.colsb[b] || g.rows[b] * 4 != g.colsb[a] || g.colsb[a] % 4 != 0 ||
      g.colsb[c] % 4 != 0) {
    g_emu_fault.store(true);
    return;
  }
  for (int m = 0; m < g.rows[c]; ++m)
    for (int n = 0; n < g.colsb[c] / 4; ++n) {
      float acc;
      std::memcpy(&acc, &s.t[c][m][4 * n], 4);
      for (int k = 0; k < g.colsb[a] / 4; ++k)
        for (int h = 0; h < 2; ++h) {
          float prod = emu_bf16(&s.t[a][m][4 * k + 2 * h]) * emu_bf16(&s.t[b][k][4 * n + 2 * h]);
          __asm__("" : "+x"(prod));  // no contraction of the product into an FMA
          acc = emu_ftz(acc + prod);
        }
      std::memcpy(&s.t[c][m][4 * n], &acc, 4);
    }
}

struct EmuOps {
  static void config(const TileCfg& c) {
    EmuState& s = emu_state();
    s.cfg = c;
    std::memset(s.t, 0, sizeof s.t);  // LDTILECFG zeroes every tile
  }
  static void release() {}
  template <int T>
  static void zero() {
    std::memset(emu_state().t[T], 0, sizeof emu_state().t[T]);
  }
  template <int T>
  static void load(const void* p, long stride) {
    emu_load(T, p, stride);
  }
  template <int T>
  static void store(void* p, long stride) {
    emu_store(T, p, stride);
  }
  template <int C, int A, int B>
  static void dp() {
    emu_dp(C, A, B);
  }
};

// ---- plain AVX-512 parts ----------------------------------------------------------------------

// k within a 32-k group held by A word i (see the header comment).
constexpr int perm_k(int i) { return 16 * ((i / 4) % 2) + 4 * (i / 8) + i % 4; }

// The scaled-value table of the table decode: row b (16 bf16 = 32 B, 32 B-aligned) =
// the 16 E2M1 values x |E4M3 byte b|, 8 KiB in all (L1-resident). Built once with the very
// instructions of the multiply/convert decode below (vmulps of the e2m1 vector by the broadcast
// fp32 |scale|, vcvtne2ps2bf16), so both decodes give the same bits for every byte, NaN scales
// (0x7F / 0xFF -> NaN entries), zero and subnormal scales included.
struct alignas(64) ScaledE2m1Table {
  std::uint16_t v[256][16];
};

// (The E2M1 values come as a pointer, not an __m512: the caller is a static initialiser compiled
// without AVX-512, and clang rejects a vector argument whose ABI differs between the two.)
NVFP4_AMXV_TARGET void build_scaled_table(ScaledE2m1Table& t, const float* e2m1_values) {
  const __m512 e2m1 = _mm512_loadu_ps(e2m1_values);
  const float* stab = e4m3_abs_table();
  for (int b = 0; b < 256; b += 2) {  // two bytes per conversion: (lo = b, hi = b + 1)
    const __m512i two = (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(e2m1, _mm512_set1_ps(stab[b + 1])),
                                                      _mm512_mul_ps(e2m1, _mm512_set1_ps(stab[b])));
    _mm512_store_si512(t.v[b], two);  // rows b and b + 1 are adjacent: 64 B
  }
}

struct DecodeConsts {
  __m512i ctrl;  // vpmultishiftqb bit offsets: word i of qword q reads nibble 4 (q / 2) + w
  __m512i lo4;   // 0x000F per word
  __m512i blk;   // 0x0010 on the words of odd qwords (block 1: the upper half of the LUT)
  __m512 e2m1;   // the 16 E2M1 values (code order of format.h) as fp32
  const ScaledE2m1Table* tab;  // the table decode's scaled values (built at first use)
};

NVFP4_AMXV_TARGET DecodeConsts make_decode_consts() {
  alignas(64) std::uint8_t ctrl[64];
  alignas(64) std::uint16_t blk[32];
  alignas(64) float e2[16];
  for (int b = 0; b < 64; ++b) {
    const int q = b / 8, w = (b % 8) / 2;
    ctrl[b] = static_cast<std::uint8_t>(4 * (4 * (q / 2) + w));
  }
  for (int i = 0; i < 32; ++i) blk[i] = static_cast<std::uint16_t>(((i / 4) % 2) ? 0x10 : 0);
  for (int c = 0; c < 16; ++c) e2[c] = e2m1_to_float(static_cast<std::uint8_t>(c));
  const __m512 e2v = _mm512_load_ps(e2);
  static const ScaledE2m1Table* const tab = [&] {  // thread-safe one-time init (C++11 statics)
    static ScaledE2m1Table t;
    build_scaled_table(t, e2);
    return &t;
  }();
  return {_mm512_load_si512(ctrl), _mm512_set1_epi16(0x000F), _mm512_load_si512(blk), e2v, tab};
}

// The decode's loop invariants as values, not behind the DecodeConsts reference: the A-buffer
// stores may alias any memory, so through the reference the compiler reloads ctrl, lo4, blk, the
// table pointer (and e2m1) from memory for every 32 weights (4-5 extra loads, seen in objdump).
struct DecodeRegs {
  __m512i ctrl, lo4, blk;
  __m512 e2m1;
  const std::uint16_t* tab;  // row b at tab + 16 b
};

// One A row of one 32-k group: 16 packed bytes (2 blocks) -> 32 bf16 (k permuted by perm_k).
NVFP4_AMXV_TARGET inline __m512i decode_row_group(const DecodeRegs& dr, __m512i src, __m512i lut) {
  __m512i idx = _mm512_multishift_epi64_epi8(dr.ctrl, src);
  idx = _mm512_ternarylogic_epi32(idx, dr.lo4, dr.blk, 0xEA);  // (idx & lo4) | blk
  return _mm512_permutexvar_epi16(idx, lut);
}

// The LUT [e2m1 x |s0| (words 0..15), e2m1 x |s1| (words 16..31)], two ways (bit-identical):
//   table (kTable): [tab[s0] | tab[s1]]: vmovdqa ymm (load) + vinserti64x4 ymm from memory;
//   multiply/convert: 2 vmulps of the e2m1 vector by |s| broadcast from e4m3_abs_table()
//     (vbroadcastss from memory) + vcvtne2ps2bf16 -- the build of the table, per group.
template <bool kTable>
NVFP4_AMXV_TARGET inline __m512i group_lut(const DecodeRegs& dr, const float* stab, unsigned s0, unsigned s1) {
  if (kTable)
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_load_si256(reinterpret_cast<const __m256i*>(dr.tab + 16 * s0))),
                              _mm256_load_si256(reinterpret_cast<const __m256i*>(dr.tab + 16 * s1)), 1);
  return (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(dr.e2m1, _mm512_set1_ps(stab[s1])),
                                      _mm512_mul_ps(dr.e2m1, _mm512_set1_ps(stab[s0])));
}

// Weight rows n0 .. n0+15, 32-k groups [g0, g1) -> dst[(g - g0) * 512 + r * 32 + i] (bf16, A tile
// layout, k permuted by perm_k); rows >= N are zero. Prefetches each row pf bytes ahead (0: off).
// Uops per 32 weights of the full-group loop (Golden Cove = SPR/EMR; 512-bit vector uops issue
// only on p0 / p5, loads on p2/p3/p11, uops.info; counted from objdump of this build):
//   multiply/convert (kTable = 0, the decode before 2026-11-30): p0/p5: vpmultishiftqb, vpternlogd,
//     vpermw, 2 vmulps, vcvtne2ps2bf16 (2) = 7 -> 3.5 cycles; loads: 2 scale bytes, 2 vbroadcastss,
//     vbroadcasti64x2 = 5; 1 store. (Before this change the loop also reloaded ctrl, lo4, blk and
//     e2m1 through the DecodeConsts reference: 4 more loads, now in registers for both forms.)
//   table (kTable = 1): p0/p5: vpmultishiftqb, vpternlogd, vpermw, vinserti64x4 = 4 -> 2.0 cycles;
//     loads: 2 scale bytes, vmovdqa ymm, vinserti64x4's ymm, vbroadcasti64x2 = 5 (1.67 cycles on 3
//     ports; + 1 per 32 weights for TILELOADD's 16 rows = 2.0); scalar: 2 shl (b * 32, the table
//     address; p0/p6), 3 pointer adds + cmp/jne; 1 store. ~14 fused uops: 2.3 cycles at 6/cycle.
//   Predicted: 3.5 -> ~2.0-2.3 cycles per 32 weights (ports 0/5, then loads and the front end bind
//   about equally), a ~1.5-1.75x faster decode; no further p0/p5 cut pays without cutting loads.
// The K-tail group (K % 32 == 16) is peeled out of the loop: block 1 is padding (codes 0; table:
// scale byte 0x00 -> +0 entries; multiply/convert: e2m1 x +0 as before), weights exactly 0.
template <bool kTable>
NVFP4_AMXV_TARGET void decode_a_tiles(const MatmulArgs& a, const DecodeConsts& dc, std::int64_t n0, std::int64_t g0,
                                      std::int64_t g1, std::int64_t pf, std::uint16_t* dst) {
  const DecodeRegs dr{dc.ctrl, dc.lo4, dc.blk, dc.e2m1, &dc.tab->v[0][0]};
  const float* stab = e4m3_abs_table();
  const std::int64_t rs = a.k / 2, ss = a.k / kBlockSize, g_full = a.k / kGroupK;
  const std::int64_t gf = std::min(g1, g_full);  // full groups [g0, gf), then the tail if g1 > gf
  for (int r = 0; r < 16; ++r) {
    std::uint16_t* d = dst + r * kGroupK;
    const std::int64_t n = n0 + r;
    if (n >= a.n) {
      for (std::int64_t g = g0; g < g1; ++g) _mm512_store_si512(d + (g - g0) * kTileElems, _mm512_setzero_si512());
      continue;
    }
    const std::uint8_t* p = a.packed + n * rs + 16 * g0;  // 16 packed bytes per group
    const std::uint8_t* sc = a.scales + n * ss + 2 * g0;  // 2 scale bytes per group
    if (pf > 0) {
      // Prefetches never fault, so addresses past the weights are harmless.
      for (std::int64_t off = 0; off < 16 * (g1 - g0); off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p + off + pf), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(sc + pf / 8), _MM_HINT_T1);
    }
    // Unrolled by 2: the 3 pointer adds + cmp/jne are then ~2 uops per group instead of 4.
#pragma GCC unroll 2
    for (const std::uint8_t* pe = p + 16 * (gf - g0); p != pe; p += 16, sc += 2, d += kTileElems) {
      const __m512i src = _mm512_broadcast_i64x2(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      _mm512_store_si512(d, decode_row_group(dr, src, group_lut<kTable>(dr, stab, sc[0], sc[1])));
    }
    if (gf < g1) {  // K tail of 16: g1 == g_full + 1
      const __m512i src = _mm512_broadcast_i64x2(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
      const __m512i lut =
          kTable ? group_lut<true>(dr, stab, sc[0], 0)
                 : (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(dr.e2m1, _mm512_setzero_ps()),
                                                _mm512_mul_ps(dr.e2m1, _mm512_set1_ps(stab[sc[0]])));
      _mm512_store_si512(d, decode_row_group(dr, src, lut));
    }
  }
}

struct Plan {
  const MatmulArgs* a = nullptr;
  std::int64_t mv = 0, ng = 0, nseg = 1;
  std::vector<std::int64_t> cm0, cmc;  // chunk: first virtual row, rows (<= 16)
  const std::uint16_t* xb = nullptr;   // B layout, chunk c at xb + ng * 32 * cm0[c]
  float* sums = nullptr;               // [seg][mv][n], raw sums (no tensor scale)
  std::int64_t kbg = 4;                // 32-k groups per K block
  std::int64_t pf = 0;
  bool table = true;                   // table decode (else multiply/convert; same bits)
};

// Virtual rows [v0, v0 + mc) of the pieces (row v at pieces + (v / P) * prow_len + (v % P) * k,
// zero past kx) -> B layout of one chunk for groups [g0, g1): dst[((g * 16 + p) * mc + j) * 2 + h]
// = piece row v0 + j at k = 32 g + perm_k(2 p + h).
NVFP4_AMXV_TARGET void prepare_b(const std::uint16_t* pieces, std::int64_t prow_len, int P, std::int64_t k,
                                 std::int64_t v0, std::int64_t mc, std::int64_t g0, std::int64_t g1,
                                 std::uint16_t* dst) {
  alignas(64) std::uint16_t pidx[32];
  for (int i = 0; i < 32; ++i) pidx[i] = static_cast<std::uint16_t>(perm_k(i));
  const __m512i idx = _mm512_load_si512(pidx);
  std::uint32_t* d32 = reinterpret_cast<std::uint32_t*>(dst);
  alignas(64) std::uint32_t tmp[16];
  for (std::int64_t g = g0; g < g1; ++g)
    for (std::int64_t j = 0; j < mc; ++j) {
      const std::int64_t v = v0 + j;
      const std::uint16_t* src = pieces + (v / P) * prow_len + (v % P) * k + g * kGroupK;
      const __mmask32 in = k - g * kGroupK >= kGroupK ? 0xFFFFFFFFu : 0x0000FFFFu;
      _mm512_store_si512(tmp, _mm512_permutexvar_epi16(idx, _mm512_maskz_loadu_epi16(in, src)));
      for (int p = 0; p < 16; ++p) d32[(g * 16 + p) * mc + j] = tmp[p];
    }
}

template <int... I, class F>
inline void unroll(std::integer_sequence<int, I...>, F&& f) {
  (f(std::integral_constant<int, I>{}), ...);
}

// Weight rows [n0, n0 + 16 NSUB) x chunks [c0, c0 + MCP) x groups [g0, g1) -> sums of segment seg.
// Tiles: C(i, j) = i * MCP + j, B(j) = NSUB * MCP + j, A: the remaining one or two (alternating).
template <class Ops, int MCP, int NSUB>
NVFP4_AMXV_TARGET void pass(const Plan& pl, const DecodeConsts& dc, std::int64_t c0, std::int64_t n0,
                            std::int64_t g0, std::int64_t g1, std::int64_t seg, std::uint16_t* abuf) {
  constexpr int kC = NSUB * MCP, kB0 = kC, kA0 = kC + MCP, kNA = 8 - kA0 >= 2 ? 2 : 1;
  static_assert(kA0 + kNA <= 8, "8 tile registers");
  const MatmulArgs& a = *pl.a;
  TileCfg cfg;
  std::int64_t mc[MCP];
  const std::uint16_t* xbj[MCP];
  for (int j = 0; j < MCP; ++j) {
    mc[j] = pl.cmc[c0 + j];
    xbj[j] = pl.xb + pl.ng * kGroupK * pl.cm0[c0 + j];
    for (int i = 0; i < NSUB; ++i) {
      cfg.rows[i * MCP + j] = 16;
      cfg.colsb[i * MCP + j] = static_cast<std::uint16_t>(4 * mc[j]);
    }
    cfg.rows[kB0 + j] = 16;
    cfg.colsb[kB0 + j] = static_cast<std::uint16_t>(4 * mc[j]);
  }
  for (int t = 0; t < kNA; ++t) {
    cfg.rows[kA0 + t] = 16;
    cfg.colsb[kA0 + t] = 64;
  }
  Ops::config(cfg);
  unroll(std::make_integer_sequence<int, kC>{}, [&](auto t) { Ops::template zero<decltype(t)::value>(); });
  for (std::int64_t gb = g0; gb < g1; gb += pl.kbg) {
    const std::int64_t ge = std::min(g1, gb + pl.kbg);
    for (int i = 0; i < NSUB; ++i) {
      std::uint16_t* ab = abuf + i * pl.kbg * kTileElems;
      if (pl.table)
        decode_a_tiles<true>(a, dc, n0 + 16 * i, gb, ge, pl.pf, ab);
      else
        decode_a_tiles<false>(a, dc, n0 + 16 * i, gb, ge, pl.pf, ab);
    }
    for (std::int64_t g = gb; g < ge; ++g) {
      unroll(std::make_integer_sequence<int, MCP>{}, [&](auto j) {
        constexpr int J = decltype(j)::value;
        Ops::template load<kB0 + J>(xbj[J] + g * 16 * mc[J] * 2, 4 * mc[J]);
      });
      unroll(std::make_integer_sequence<int, NSUB>{}, [&](auto i) {
        constexpr int I = decltype(i)::value, A = kA0 + I % kNA;
        Ops::template load<A>(abuf + (I * pl.kbg + (g - gb)) * kTileElems, 64);
        unroll(std::make_integer_sequence<int, MCP>{}, [&](auto j) {
          constexpr int J = decltype(j)::value;
          Ops::template dp<I * MCP + J, A, kB0 + J>();
        });
      });
    }
  }
  alignas(64) float cbuf[16 * 16];
  unroll(std::make_integer_sequence<int, NSUB>{}, [&](auto i) {
    constexpr int I = decltype(i)::value;
    unroll(std::make_integer_sequence<int, MCP>{}, [&](auto j) {
      constexpr int J = decltype(j)::value;
      Ops::template store<I * MCP + J>(cbuf, 64);
      for (int r = 0; r < 16; ++r) {
        const std::int64_t n = n0 + 16 * I + r;
        if (n >= a.n) break;
        for (std::int64_t col = 0; col < mc[J]; ++col)
          pl.sums[(seg * pl.mv + pl.cm0[c0 + J] + col) * a.n + n] = cbuf[r * 16 + col];
      }
    });
  });
}

// Per-call dispatch of pass<> to the (chunks per pass, C tile rows) instantiation.
template <class Ops>
void run_pass(int mcp, int nsub, const Plan& pl, const DecodeConsts& dc, std::int64_t c0, std::int64_t n0,
              std::int64_t g0, std::int64_t g1, std::int64_t seg, std::uint16_t* abuf) {
  using Fn = void (*)(const Plan&, const DecodeConsts&, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                      std::int64_t, std::uint16_t*);
  static constexpr Fn k1[6] = {pass<Ops, 1, 1>, pass<Ops, 1, 2>, pass<Ops, 1, 3>,
                               pass<Ops, 1, 4>, pass<Ops, 1, 5>, pass<Ops, 1, 6>};
  static constexpr Fn k2[2] = {pass<Ops, 2, 1>, pass<Ops, 2, 2>};
  const Fn f = mcp == 1 ? k1[nsub - 1] : mcp == 2 ? k2[std::min(nsub, 2) - 1] : pass<Ops, 3, 1>;
  f(pl, dc, c0, n0, g0, g1, seg, abuf);
}

// Most C tile rows (16 each) per pass that fit 8 tile registers with mcp chunks per pass:
// NSUB * MCP C tiles + MCP B tiles + >= 1 A tile.
int max_nsub(int mcp) { return mcp == 1 ? 6 : mcp == 2 ? 2 : 1; }

template <class Ops>
bool gemv_amx_run(const MatmulArgs& a) {
  const std::int64_t k = a.k, n = a.n, m = a.m;
  const CpuTuning& tune = cpu_tuning();
  const int P = gemv_avx512bf16_pieces(a.dtype);
  Plan pl;
  pl.a = &a;
  pl.mv = m * P;
  pl.ng = (k + kGroupK - 1) / kGroupK;

  // 1. Split every activation row into P exact bf16 pieces (zero past kx).
  const std::int64_t prow_len = P * k + kGroupK;
  std::vector<std::uint16_t> pieces(static_cast<std::size_t>(m * prow_len), 0);
  std::atomic<bool> ok{true};
  parallel_for(m, [&](std::int64_t mi) {
    if (!split_row_bf16(a, mi, pieces.data() + mi * prow_len, kAmxSplitMinExpF32)) ok.store(false);
  });
  if (!ok.load()) return false;

  // 2. Chunks of <= 16 virtual rows (balanced), passes of <= 3 chunks (balanced).
  const std::int64_t nch = (pl.mv + 15) / 16;
  for (std::int64_t c = 0; c < nch; ++c) {
    pl.cm0.push_back(pl.mv * c / nch);
    pl.cmc.push_back(pl.mv * (c + 1) / nch - pl.mv * c / nch);
  }
  const std::int64_t npass = (nch + 2) / 3, mcp_max = (nch + npass - 1) / npass;
  const int nsub = static_cast<int>(std::clamp<std::int64_t>(tune.gemv_amx_n_tiles, 1, max_nsub(static_cast<int>(mcp_max))));
  pl.kbg = std::clamp<std::int64_t>(tune.gemv_amx_k_block / kGroupK, 1, kMaxAbufTiles / nsub);
  pl.pf = std::max<std::int64_t>(0, tune.gemv_amx_prefetch_bytes);
  pl.table = tune.gemv_amx_decode_table != 0;

  // 3. Activations into the B layout, in parallel over group ranges.
  auto xb = alloc64<std::uint16_t>(pl.mv * pl.ng * kGroupK);
  const std::int64_t gtasks = std::min<std::int64_t>(pl.ng, 4 * num_threads());
  parallel_for(gtasks, [&](std::int64_t t) {
    const std::int64_t g0 = pl.ng * t / gtasks, g1 = pl.ng * (t + 1) / gtasks;
    for (std::int64_t c = 0; c < nch; ++c)
      prepare_b(pieces.data(), prow_len, P, k, pl.cm0[c], pl.cmc[c], g0, g1, xb.get() + pl.ng * kGroupK * pl.cm0[c]);
  });
  pl.xb = xb.get();

  // 4. Tasks: 16 * nsub weight rows x K segments (split only when N alone gives too few tasks).
  const std::int64_t rows_per_task = 16 * nsub, ntn = (n + rows_per_task - 1) / rows_per_task;
  const std::int64_t want = tune.gemv_min_tasks_per_thread * num_threads();
  if (ntn < want && pl.ng >= 2) pl.nseg = std::min<std::int64_t>(pl.ng, (want + ntn - 1) / ntn);
  std::vector<float> sums(static_cast<std::size_t>(pl.nseg * pl.mv * n));
  pl.sums = sums.data();
  const DecodeConsts dc = make_decode_consts();
  parallel_for(ntn * pl.nseg, [&](std::int64_t t) {
    const std::int64_t seg = t % pl.nseg, n0 = t / pl.nseg * rows_per_task;
    const std::int64_t g0 = pl.ng * seg / pl.nseg, g1 = pl.ng * (seg + 1) / pl.nseg;
    alignas(64) std::uint16_t abuf[kMaxAbufTiles * kTileElems];
    for (std::int64_t q = 0; q < npass; ++q) {
      const std::int64_t c0 = nch * q / npass, c1 = nch * (q + 1) / npass;
      run_pass<Ops>(static_cast<int>(c1 - c0), nsub, pl, dc, c0, n0, g0, g1, seg, abuf);
    }
    Ops::release();
  });

  // 5. K segments in order, pieces smallest first, tensor scale, store.
  gemv_store_pieces(a, P, pl.nseg, sums.data());
  return true;
}

}  // namespace

bool gemv_amx_supported() { return amx_supported() && gemv_avx512bf16_supported(); }

bool gemv_nvfp4_amx(const MatmulArgs& a) { return gemv_amx_run<AmxOps>(a); }

bool gemv_nvfp4_amx_emulated(const MatmulArgs& a) {
  g_emu_fault.store(false);
  if (!gemv_amx_run<EmuOps>(a)) return false;
  if (g_emu_fault.load())  // a tile shape the hardware would reject: make every test fail
    for (std::int64_t mi = 0; mi < a.m; ++mi)
      for (std::int64_t ni = 0; ni < a.n; ++ni) store_from_f32(a.y, a.dtype, mi * a.y_stride + ni, NAN);
  return true;
}
#else
bool gemv_amx_supported() { return false; }
bool gemv_nvfp4_amx(const MatmulArgs&) { return false; }
bool gemv_nvfp4_amx_emulated(const MatmulArgs&) { return false; }
#endif

}  // namespace nvfp4::cpu
