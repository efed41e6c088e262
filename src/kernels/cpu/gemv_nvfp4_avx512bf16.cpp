// kernels/cpu/gemv_nvfp4_avx512bf16.cpp -- W4A16 NVFP4 GEMV for small M on AVX512-BF16
// (vdpbf16ps) + AVX512BW (vpermw) + AVX512-VBMI (scale decode). bf16 activations directly; fp16 /
// fp32 activations split exactly into 2 / 3 bf16 pieces that run as extra rows (split_row_bf16 in
// split_bf16_avx512.cpp, with the proof; docs/perf-cpu.md section 5).
//
// Needs AVX512-BF16 + AVX512BW + AVX512-VBMI (Zen 4, Sapphire Rapids and later; Cooper Lake has
// BF16 without VBMI and takes the Highway GEMV). The FMA dot below needs no BF16 and is compiled
// without it (tile_fma, rows_fma), so AVX-512 CPUs with VBMI but no BF16 (Ice Lake, Tiger Lake,
// Rocket Lake) run it too (gemv_fma_dot_supported).
//
// Why a separate kernel: the Highway GEMV (gemv_nvfp4_hwy.cpp) decodes every 4-bit code to fp32
// and issues one fp32 FMA per 16 products; here one vdpbf16ps does 32 products, and the decode
// is 2 instructions per 32 codes:
//   * Two 64-byte loads of one weight row cover 256 consecutive k (16 blocks); vpermt2d splits
//     them into E (even u32 words) and O (odd words), so lane i of E / O holds the 8 codes of
//     k = 16i..16i+7 / 16i+8..16i+15: one whole block per lane, 8 codes per u32.
//   * `vpsrlw E, 4s` (s = 0..3) leaves code k=16i+s in bits 3:0 of u16 word 2i and code
//     k=16i+4+s in bits 3:0 of word 2i+1. vpermw reads only bits 4:0 of each index word, so a
//     32-entry table (the 16 E2M1 values as bf16, written twice) turns both words into the exact
//     bf16 weights without masking the garbage bits above.
//   * vdpbf16ps then adds x[16i+s]*w[16i+s] + x[16i+4+s]*w[16i+4+s] into fp32 lane i. The
//     activations are permuted once per call into exactly that pair order (permute_row).
// After 8 steps (E then O) lane i holds the unscaled dot of block i, and one fp32 FMA with the
// 16 decoded |E4M3| scales (one per lane, no lane shuffle) adds it to the accumulator. The
// tensor scale multiplies the final sum once. Per 256 k and weight row: 2 loads, 2 vpermt2d,
// 6 shifts, 8 vpermw, 8*M vdpbf16ps, M FMAs, one 16-lane scale decode (4 instructions).
// Exactness: e2m1 values and bf16 x are exact in bf16, their products exact in fp32; only the
// fp32 summation order differs from the oracle, plus vdpbf16ps' flush of denormal inputs and
// outputs (Intel SDM: DAZ/FTZ semantics, round to nearest even): an unscaled partial sum below
// 2^-126 is lost before the scale (<= 448) multiplies it (tolerance: tests/cpu/test_matmul_cpu.cpp).
// K % 256 tail elements go through a scalar loop with the oracle's exact e2m1*scale product.
//
// The FMA dot (M <= CpuTuning::gemv_fma_max_m, 2 with AMX and 16 without, with a dtype in
// gemv_fma_dtypes: every dtype on Intel CPUs with AVX512-BF16 + FP16): the same
// lanes, layouts and block-scale FMA, but each u32 word of `half` gives 8 codes to vpsrld by 4p +
// vpermps (a 16-entry table of the E2M1 values as fp32: vpermps reads index bits 3:0), and one
// fp32 vfmadd231ps per 16 products against the activations converted exactly to fp32 (any
// dtype: no split, no 2^-102 floor). Why: on Emerald Rapids vdpbf16ps issues once per ~2.1
// cycles and competes with vpermw for port 5 (8 vdpbf16ps + 8 vpermw + 6 shifts = 27 cycles per
// 256 weights), while vfmadd231ps issues twice per cycle (16 vpermps + 16 FMA + 14 shifts = 23
// cycles; docs/perf-cpu.md 14). With tasks of 128 weight rows and 16 KiB K blocks of its fp32
// activations (gemv_fma_*), it is 8-25% faster cold than the vdpbf16ps dot at every Llama / Qwen
// M = 1 shape measured there, bf16 included (§16); Zen 4 runs vdpbf16ps once per cycle. At M >= 2
// a decoded weight vector feeds every row's FMA (§23; up to 6 rows per pass without AMX, §28).
// Exactness: x (exact in fp32) times an E2M1 value rounds once per FMA like any fp32 dot; no
// flush of denormals. Results are within the same tolerance as the bf16 dot, not bit-identical to it.
//
// Pre-split weights (the explicit CPU repack, include/nvfp4/cpu.h, matmul_cpu_repacked.cpp):
// the same kernel with PS = true reads each 256-k chunk of a weight row already stored as E
// (64 bytes) then O (64 bytes), so `half` is a plain load and the 2 vpermt2d per chunk and row
// go. Why: hot (cache-resident) M=1 is shuffle-port bound, and the ablation in docs/perf-cpu.md
// section 7 measured the E/O split at 15-19% of a hot M=1 call on Zen 4; with PS, 1 thread hot
// N=256 K=14336 ran 99.8 -> 79-81 us (cpu_paths_bench, numbers in include/nvfp4/cpu.h). PS is a
// template parameter, so the canonical instantiation (PS = false) is the code it was (objdump of
// rows<MR, NR, false>: the same instructions as before the change, every MR). With the halves in
// memory, the FMA dot's 4-row tiles (M = 1, 2) also read each one at byte offsets 0..3 instead of
// shifting it (fma_half, OFF; hot M = 1 -7%, docs/perf-cpu.md 30).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/kernels_cpu.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tuning_cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NVFP4_GEMV_BF16_X86 1
// GCC 12 warns inside avx512fintrin.h (masked compares, _mm512_reduce_add_ps start from
// _mm512_undefined_*()): a known false positive, not an uninitialised value of this file.
#if !defined(__clang__)  // a GCC-only warning; clang warns about the unknown group
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace nvfp4::cpu {

#if defined(NVFP4_GEMV_BF16_X86)
namespace {

// The FMA dot needs AVX512F/BW/VL/DQ + VBMI (its scale decode); the vdpbf16ps dot adds AVX512-BF16.
#define NVFP4_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi")))
#define NVFP4_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vbmi")))

constexpr std::int64_t kChunk = 256;  // k per inner iteration: 128 packed bytes, 16 scale bytes
// Smallest accepted fp32 exponent of the exact split (split_bf16_avx512.cpp): every product
// piece * e2m1 (the block scale is applied after the unscaled sum) stays >= 2^-126.
constexpr int kSplitMinExpF32 = -102;


// 16 |E4M3| bytes -> 16 fp32 lanes, exactly, in 4 instructions (AVX512-VBMI): every |E4M3|
// value has <= 4 significant bits, so its fp32 bits are two bytes followed by 16 zero bits.
// vpermb copies scale byte i into bytes 2 and 3 of lane i; two 128-entry byte lookups
// (vpermt2b reads index bits 6:0, so the sign bit is ignored as |scale| requires) give the
// high and the low byte of the fp32 bits; 0x7F maps to the quiet NaN 0x7FC00000 as in format.h.
// (The integer decode it replaces took 11 instructions, a quarter of the M=1 inner loop.)
struct ScaleTables {
  __m512i hi0, hi1, lo0, lo1, spread;
};

NVFP4_AVX512_TARGET inline __m512 decode_scales16(__m128i bytes16, const ScaleTables& t) {
  const __m512i idx = _mm512_permutexvar_epi8(t.spread, _mm512_castsi128_si512(bytes16));
  const __m512i hi = _mm512_maskz_permutex2var_epi8(0x8888888888888888ull, t.hi0, idx, t.hi1);
  const __m512i lo = _mm512_maskz_permutex2var_epi8(0x4444444444444444ull, t.lo0, idx, t.lo1);
  return _mm512_castsi512_ps(_mm512_or_si512(hi, lo));
}

NVFP4_AVX512_TARGET ScaleTables make_scale_tables() {
  alignas(64) static const struct Bytes {
    std::uint8_t hi[128], lo[128], spread[64];
    Bytes() {
      for (int b = 0; b < 128; ++b) {
        const std::uint32_t bits = f32_bits(e4m3_to_float(static_cast<std::uint8_t>(b)));
        hi[b] = static_cast<std::uint8_t>(bits >> 24);
        lo[b] = static_cast<std::uint8_t>(bits >> 16);
      }
      for (int j = 0; j < 64; ++j) spread[j] = static_cast<std::uint8_t>(j / 4);
    }
  } t;
  return {_mm512_loadu_si512(t.hi), _mm512_loadu_si512(t.hi + 64), _mm512_loadu_si512(t.lo),
          _mm512_loadu_si512(t.lo + 64), _mm512_loadu_si512(t.spread)};
}

// Every constant of the inner loop, 64-byte aligned (one copy per call, in the Ctx).
struct Consts {
  __m512i tbl;     // bf16 bits of the 16 E2M1 values (code order of format.h), twice: vpermw uses index bits 4:0
  __m512i sel[2];  // vpermt2d: even / odd u32 words of two 64-byte loads
  ScaleTables st;
  __m512 tbl32;    // FMA dot: the 16 E2M1 values as fp32 (vpermps uses index bits 3:0)
};

NVFP4_AVX512_TARGET Consts make_consts() {
  alignas(64) static const struct Tbl32 {
    float v[16];
    Tbl32() {
      for (int c = 0; c < 16; ++c) v[c] = e2m1_to_float(static_cast<std::uint8_t>(c));
    }
  } kTbl32;
  alignas(64) static const std::uint16_t kTbl[32] = {
      0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0,
      0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0,
      0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0,
      0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};
  return {_mm512_load_si512(kTbl),
          {_mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
           _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)},
          make_scale_tables(),
          _mm512_load_ps(kTbl32.v)};
}

struct Ctx {
  const MatmulArgs* a;
  const std::uint16_t* xp;  // permuted bf16 activations, [m][xs], nch * 256 used per row
  const float* xt;          // fp32 activations of the K tail, [m][k - nch*256]
  std::int64_t nch, kp, kt; // full chunks, nch*256, tail length
  Consts cs;
  std::int64_t pf;          // software prefetch distance in tiles of weight rows (0: off)
  bool pf_l2;               // prefetch into L2 (prefetcht1) instead of L1 (prefetcht0)
  std::int64_t xs = 0;      // row stride of xp (elements): kp + 32 (see gemv_run)
  const float* xf = nullptr;  // FMA dot: fp32 activations in block-lane order, [m][xs] (see permute_row_f32)
};

// The 64 bytes of half h of a 256-k chunk for NR weight rows, as E (h = 0) or O (h = 1) u32 lanes.
// Pre-split layout: bytes [64h, 64h + 64) of the chunk are exactly what the vpermt2d makes of the
// canonical chunk (repack_for_gemv_cpu stores them so).
template <int NR, bool PS>
NVFP4_AVX512_TARGET inline __attribute__((always_inline)) void load_half(const std::uint8_t* pc, std::int64_t rs,
                                                                       const Consts* cs, int h, __m512i (&half)[NR]) {
  for (int r = 0; r < NR; ++r) {
    const std::uint8_t* p = pc + r * rs;
    half[r] = PS ? _mm512_loadu_si512(p + 64 * h)
                 : _mm512_permutex2var_epi32(_mm512_loadu_si512(p), cs->sel[h], _mm512_loadu_si512(p + 64));
  }
}

// The FMA dot of one half chunk (h = 0: k = 16i..16i+7 of block i, h = 1: 16i+8..16i+15) of NR
// weight rows against MR fp32 activation rows (xc: the chunk of row m0), into acc (see tile).
// OFF (pre-split weights only): the codes of step q reach index bits 3:0 through a load at byte
// offset q/2 (lane i then starts at byte 4i + q/2, whose low nibble is code q) plus, for odd q,
// one shift by 4, instead of a shift of the loaded half by 4q: 4 shifts per half and row instead
// of 7, and loads issue on the load ports, not on ports 0 / 5, which bind the hot M = 1 call (3
// uops per 16 weights: shift, vpermps, FMA). Measured (docs/perf-cpu.md 30, interleaved): hot
// 1 x 4096 x 14336 -7%, 2 x 4096 x 14336 -1..-5%, cold no change (at the read); 3 and 6 rows
// (2-row tiles) +1..+5%, so only the 4-row tiles of M = 1 and 2 use it. The loads of half 1 read
// up to 3 bytes past the chunk: the caller keeps the buffer's last chunk off this path
// (rows_any_m).
template <int MR, int NR, bool PS, int H, bool OFF>
NVFP4_AVX512_TARGET inline __attribute__((always_inline)) void fma_half(const Ctx& g, const std::uint8_t* pc,
                                                                      std::int64_t rs, const float* xc,
                                                                      const Consts* cs, __m512 (&acc)[MR][NR]) {
  static_assert(!OFF || PS, "offset loads need the pre-split layout (whole blocks per u32 lane in memory)");
  __m512i half[NR];
  if constexpr (!OFF) load_half<NR, PS>(pc, rs, cs, H, half);
#pragma GCC unroll 8
  for (int q = 0; q < 8; ++q) {
    __m512 w[NR];
    for (int r = 0; r < NR; ++r) {
      __m512i idx;
      if constexpr (OFF) {
        idx = _mm512_loadu_si512(pc + r * rs + 64 * H + q / 2);
        if (q % 2) idx = _mm512_srli_epi32(idx, 4);
      } else {
        idx = _mm512_srli_epi32(half[r], 4 * q);
      }
      w[r] = _mm512_permutexvar_ps(idx, cs->tbl32);
    }
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m512 xv = _mm512_load_ps(xc + m * g.xs + 16 * (8 * H + q));
      for (int r = 0; r < NR; ++r)
        acc[m][r] = q == 0 ? _mm512_mul_ps(xv, w[r]) : _mm512_fmadd_ps(xv, w[r], acc[m][r]);
    }
  }
}

// The chunk loop's prologue and epilogue, shared by the two dots' tiles (tile_fma, tile_bf16).
// Software prefetch of the same k range of a later tile's weight rows (pf = tiles ahead x NR rows
// x row bytes): 2 lines per row and chunk, the scales (16 B per chunk) one line every 4 chunks;
// PF 2 = prefetcht1 (into L2), 1 = prefetcht0. Why: cold time was ~compute + read time: the
// hardware prefetcher restarts at every new 7 KiB row (4 KiB pages), while a tile takes ~1-2 us
// at M=2..4, far longer than the DRAM latency. Measured (tuning_cpu.h, docs/perf-cpu.md 2.5):
// prefetcht1 2 tiles ahead -19..-26% at M=1..4. Addresses past the weights are harmless:
// prefetches never fault.
template <int NR, int PF>
NVFP4_AVX512_TARGET inline __attribute__((always_inline)) void prefetch_chunk(const std::uint8_t* pc,
                                                                             const std::uint8_t* sc0,
                                                                             std::int64_t rs, std::int64_t ss,
                                                                             std::int64_t c, std::int64_t pf) {
  if constexpr (PF != 0) {
    for (int r = 0; r < NR; ++r) {
      const char* p = reinterpret_cast<const char*>(pc + r * rs) + pf;
      constexpr auto hint = PF == 2 ? _MM_HINT_T1 : _MM_HINT_T0;
      _mm_prefetch(p, hint);
      _mm_prefetch(p + 64, hint);
      if ((c & 3) == 0) _mm_prefetch(reinterpret_cast<const char*>(sc0 + r * ss) + pf / 8, hint);
    }
  }
}

// The loop constants are read from memory (L1) on every chunk: the asm barrier keeps the compiler
// from hoisting the 8 of them into registers, which the MR x NR partial sums need (an 8 x 2 tile
// spilled otherwise). vpermw/vpermt2b take them as memory operands.
NVFP4_AVX512_TARGET inline __attribute__((always_inline)) const Consts* chunk_consts(const Ctx& g) {
  const Consts* cs = &g.cs;
  __asm__("" : "+r"(cs));
  return cs;
}

// accmem[m * NR + r] += part[m][r] * the 16 |scales| of weight row r's chunk (one per lane).
template <int MR, int NR>
NVFP4_AVX512_TARGET inline __attribute__((always_inline)) void scale_accumulate(const std::uint8_t* sc0,
                                                                               std::int64_t ss, const Consts* cs,
                                                                               const __m512 (&part)[MR][NR],
                                                                               __m512* accmem) {
  for (int r = 0; r < NR; ++r) {
    const __m512 sc = decode_scales16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc0 + r * ss)), cs->st);
    for (int m = 0; m < MR; ++m) accmem[m * NR + r] = _mm512_fmadd_ps(part[m][r], sc, accmem[m * NR + r]);
  }
}

// accmem[m * NR + r] += per-lane sums over chunks [c0, c1) for x rows m0.. and weight rows
// n0.. (no tail, no tensor scale). The MR x NR partial sums of one chunk live in registers
// (>= 6 independent chains hide the FMA / vdpbf16ps latency); the accumulators stay in L1 (one
// FMA read-modify-write per 256 k), which frees registers so each activation load feeds NR rows.
// The FMA dot is compiled without AVX512-BF16 (it needs none), so AVX-512 CPUs without BF16 run
// it too (gemv_fma_dot_supported); the vdpbf16ps dot has a tile of its own target.
template <int MR, int NR, int PF, bool PS, bool OFF>
NVFP4_AVX512_TARGET inline __attribute__((always_inline)) void tile_fma(const Ctx& g, std::int64_t m0,
                                                                        std::int64_t n0, std::int64_t c0,
                                                                        std::int64_t c1, __m512* accmem,
                                                                        std::int64_t pf = 0) {
  const std::int64_t rs = g.a->k / 2, ss = g.a->k / kBlockSize;  // row strides of packed / scales
  for (std::int64_t c = c0; c < c1; ++c) {
    const std::uint8_t* pc = g.a->packed + n0 * rs + c * (kChunk / 2);
    const std::uint8_t* sc0 = g.a->scales + n0 * ss + c * 16;
    prefetch_chunk<NR, PF>(pc, sc0, rs, ss, c, pf);
    const Consts* cs = chunk_consts(g);
    __m512 part[MR][NR];
    // The FMA dot (see the file comment): lane i of `half` holds the 8 codes of k = 16i + 8h
    // + p at bits 4p..4p+3; vpermps reads index bits 3:0 only, so a shift by 4p and one lookup
    // in the 16 E2M1 values as fp32 give the exact weights of step (h, p), and one fp32 FMA per
    // activation row adds x[16i + 8h + p] times them into lane i. Two chains per weight row and
    // row of x (h = 0 / 1, summed after the chunk) keep >= 8 FMAs independent (4-cycle latency,
    // 2 per cycle) and fix each output's summation order for every tile shape (MR x NR), so
    // gemv_group_rows changes speed only (tuning_cpu.h).
    __m512 pe[MR][NR], po[MR][NR];
    fma_half<MR, NR, PS, 0, OFF>(g, pc, rs, g.xf + m0 * g.xs + c * kChunk, cs, pe);
    fma_half<MR, NR, PS, 1, OFF>(g, pc, rs, g.xf + m0 * g.xs + c * kChunk, cs, po);
    for (int m = 0; m < MR; ++m)
      for (int r = 0; r < NR; ++r) part[m][r] = _mm512_add_ps(pe[m][r], po[m][r]);
    scale_accumulate<MR, NR>(sc0, ss, cs, part, accmem);
  }
}

template <int MR, int NR, int PF, bool PS, bool OFF>  // OFF: the FMA dot's only
NVFP4_BF16_TARGET inline __attribute__((always_inline)) void tile_bf16(const Ctx& g, std::int64_t m0,
                                                                       std::int64_t n0, std::int64_t c0,
                                                                       std::int64_t c1, __m512* accmem,
                                                                       std::int64_t pf = 0) {
  const std::int64_t rs = g.a->k / 2, ss = g.a->k / kBlockSize;
  for (std::int64_t c = c0; c < c1; ++c) {
    const std::uint16_t* xc = g.xp + m0 * g.xs + c * kChunk;
    const std::uint8_t* pc = g.a->packed + n0 * rs + c * (kChunk / 2);
    const std::uint8_t* sc0 = g.a->scales + n0 * ss + c * 16;
    prefetch_chunk<NR, PF>(pc, sc0, rs, ss, c, pf);
    const Consts* cs = chunk_consts(g);
    __m512 part[MR][NR];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512i half[NR];
      load_half<NR, PS>(pc, rs, cs, h, half);
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        __m512bh w[NR];
        for (int r = 0; r < NR; ++r)
          w[r] = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(half[r], 4 * s), cs->tbl);
#pragma GCC unroll 8
        for (int m = 0; m < MR; ++m) {
          const __m512bh xv = (__m512bh)_mm512_load_si512(xc + m * g.xs + 32 * (4 * h + s));
          for (int r = 0; r < NR; ++r)
            part[m][r] = (h == 0 && s == 0) ? _mm512_dpbf16_ps(_mm512_setzero_ps(), xv, w[r])
                                            : _mm512_dpbf16_ps(part[m][r], xv, w[r]);
        }
      }
    }
    scale_accumulate<MR, NR>(sc0, ss, cs, part, accmem);
  }
}

// Weight rows [n0, n1) x activation rows [m0, m0+MR), chunks [c0, c1), plus the scalar K tail
// if `tail`; raw sums (no tensor scale) to dst[mi * ds + n]. PS: pre-split chunks (the K tail
// is canonical in both layouts, so `finish` is the same). One body, written out in a function
// of each dot's target (rows_fma, rows_bf16) so that each tile inlines into it: GCC inlines no
// function into one without its target, and the FMA dot's must lack AVX512-BF16 (the vdpbf16ps
// dot's 4 x 2 tile ran 7-9% slower as a call, Emerald Rapids, 2026-12-03).
// Optional K blocks (gemv_x_block_bytes): every weight row of the task passes over one block
// of the MR activation rows before the next block. Results do not depend on it: each lane's
// FMA sequence into accmem is the same.
// The FMA dot's fp32 row (K = 14336: 56 KiB) overflows L1, so it has a block size of its own.
// accmem: per tile of NR rows starting at n, [m][r]; single rows past `full`, [m].
#define NVFP4_GEMV_ROWS_BODY(TILE, IS_FMA)                                                             \
  const MatmulArgs& a = *g.a;                                                                                  \
  const std::int64_t k = a.k;                                                                                  \
  const float* stab = e4m3_abs_table();                                                                        \
  auto finish = [&](std::int64_t n, int m, float v) {                                                          \
    if (tail && g.kt > 0) {                                                                                    \
      const std::uint8_t* prow = a.packed + n * (k / 2);                                                       \
      const std::uint8_t* srow = a.scales + n * (k / kBlockSize);                                              \
      const float* xr = g.xt + (m0 + m) * g.kt;                                                                \
      float t = 0.0f;                                                                                          \
      for (std::int64_t kk = g.kp; kk < k; ++kk) {                                                             \
        const std::uint8_t byte = prow[kk / 2];                                                                \
        const std::uint8_t code = (kk & 1) ? e2m1_high(byte) : e2m1_low(byte);                                 \
        t += xr[kk - g.kp] * (e2m1_to_float(code) * stab[srow[kk / kBlockSize]]);                              \
      }                                                                                                        \
      v += t;                                                                                                  \
    }                                                                                                          \
    dst[m * ds + n] = v;                                                                                       \
  };                                                                                                           \
  const std::int64_t kb =                                                                                      \
      IS_FMA ? std::max<std::int64_t>(1, cpu_tuning().gemv_fma_x_block_bytes / (MR * kChunk * 4))              \
          : std::max<std::int64_t>(1, cpu_tuning().gemv_x_block_bytes / (MR * kChunk * 2));                    \
  constexpr std::int64_t kMaxRows = 64;                                                                        \
  alignas(64) __m512 accmem[kMaxRows * MR];                                                                    \
  for (std::int64_t nb = n0; nb < n1; nb += kMaxRows) {                                                        \
    const std::int64_t ne = std::min(n1, nb + kMaxRows), full = nb + (ne - nb) / NR * NR;                      \
    for (std::int64_t i = 0; i < (ne - nb) * MR; ++i) accmem[i] = _mm512_setzero_ps();                         \
    for (std::int64_t cb = c0; cb < c1; cb += kb) {                                                            \
      const std::int64_t ce = std::min(c1, cb + kb);                                                           \
      std::int64_t n = nb;                                                                                     \
      const std::int64_t pf = g.pf * NR * (k / 2);                                                             \
      if (g.pf > 0 && g.pf_l2) {                                                                               \
        for (; n < full; n += NR) TILE<MR, NR, 2, PS, OFF>(g, m0, n, cb, ce, accmem + (n - nb) * MR, pf);      \
      } else if (g.pf > 0) {                                                                                   \
        for (; n < full; n += NR) TILE<MR, NR, 1, PS, OFF>(g, m0, n, cb, ce, accmem + (n - nb) * MR, pf);      \
      } else {                                                                                                 \
        for (; n < full; n += NR) TILE<MR, NR, 0, PS, OFF>(g, m0, n, cb, ce, accmem + (n - nb) * MR);          \
      }                                                                                                        \
      for (; n < ne; ++n) TILE<MR, 1, 0, PS, OFF>(g, m0, n, cb, ce, accmem + (n - nb) * MR);                   \
    }                                                                                                          \
    for (std::int64_t n = nb; n < ne; ++n) {                                                                   \
      const std::int64_t t0 = n < full ? nb + (n - nb) / NR * NR : n, r = n - t0, nr = n < full ? NR : 1;      \
      for (int m = 0; m < MR; ++m) finish(n, m, _mm512_reduce_add_ps(accmem[(t0 - nb) * MR + m * nr + r]));    \
    }                                                                                                          \
  }                                                                                                            \
  (void)0

template <int MR, int NR, bool PS, bool OFF>
NVFP4_AVX512_TARGET void rows_fma(const Ctx& g, std::int64_t m0, std::int64_t n0, std::int64_t n1, std::int64_t c0,
                                  std::int64_t c1, bool tail, float* dst, std::int64_t ds) {
  NVFP4_GEMV_ROWS_BODY(tile_fma, true);
}
template <int MR, int NR, bool PS>
NVFP4_BF16_TARGET void rows_bf16(const Ctx& g, std::int64_t m0, std::int64_t n0, std::int64_t n1, std::int64_t c0,
                                 std::int64_t c1, bool tail, float* dst, std::int64_t ds) {
  constexpr bool OFF = false;
  NVFP4_GEMV_ROWS_BODY(tile_bf16, false);
}
#undef NVFP4_GEMV_ROWS_BODY

template <int MR, int NR, bool PS, bool FMA, bool OFF = false>
inline void rows(const Ctx& g, std::int64_t m0, std::int64_t n0, std::int64_t n1, std::int64_t c0, std::int64_t c1,
                 bool tail, float* dst, std::int64_t ds) {
  if constexpr (FMA)
    rows_fma<MR, NR, PS, OFF>(g, m0, n0, n1, c0, c1, tail, dst, ds);
  else
    rows_bf16<MR, NR, PS>(g, m0, n0, n1, c0, c1, tail, dst, ds);
}

// The FMA dot's 4-row tiles (M = 1, 2) over weight rows [n0, n1): on pre-split weights with the
// offset loads (fma_half OFF), except the buffer's last row when nothing follows its last chunk
// (those loads read up to 3 bytes past a chunk), which takes the shifts.
template <int MR, bool PS>
void rows_fma4(const Ctx& g, std::int64_t m0, std::int64_t n0, std::int64_t n1, std::int64_t c0, std::int64_t c1,
               bool tail, float* dst, std::int64_t ds) {
  const bool end = PS && n1 == g.a->n && c1 == g.nch && g.kt == 0;
  const std::int64_t n_off = end ? n1 - 1 : n1;
  rows<MR, 4, PS, true, PS>(g, m0, n0, n_off, c0, c1, tail, dst, ds);
  if (n_off < n1) rows<MR, 4, PS, true>(g, m0, n_off, n1, c0, c1, tail, dst, ds);
}

template <bool PS, bool FMA>
void rows_any_m(const Ctx& g, int mr, std::int64_t m0, std::int64_t n0, std::int64_t n1, std::int64_t c0,
                std::int64_t c1, bool tail, float* dst, std::int64_t ds) {
  if constexpr (FMA) {
    // The FMA dot's tiles (gemv_fma_dot; groups of <= kGemvFmaTileRows activation rows): NR
    // weight rows x 2 chains x MR, 2 MR NR + 2 NR + 1 <= 32 registers. Each decoded weight vector
    // feeds MR FMAs, each activation load NR. At M = 1 / 2, 4 weight rows (tuning_cpu.h
    // gemv_fma_max_m: at M = 2 4 rows beat 2, 356 against 400 us), then 2. (8 x 1 ran 11.2 ms at
    // 8 x 4096 x 14336 against 7.4 as two 4 x 2 passes: one L2 activation load per FMA.)
    // The 4-row tiles (M = 1, 2) on pre-split weights load codes at byte offsets (rows_fma4).
    switch (mr) {
      case 1: rows_fma4<1, PS>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
      case 2: rows_fma4<2, PS>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
      case 3: rows<3, 2, PS, true>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
      case 4: rows<4, 2, PS, true>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
      case 5: rows<5, 2, PS, true>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
      default: rows<6, 2, PS, true>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;  // mr <= 6 (caller)
    }
    return;
  }
  // MR*NR partial sums + 2*NR decode registers must fit the 32 zmm registers (the loop
  // constants come from L1); >= 6 chains per tile. NR per MR measured (1 thread, hot, N=128,
  // K=14336, docs/perf-cpu.md 2.5): MR=2 NR=4 55 us vs NR=6 60; MR=3 NR=4 66 vs NR=2 72;
  // MR=4 NR=2 85 vs NR=4 86.5; MR=5 NR=2 102 vs NR=3 119; MR=8 NR=2 169 = two 4x2 passes.
  switch (mr) {
    case 1: rows<1, 8, PS, false>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 2: rows<2, 4, PS, false>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 3: rows<3, 4, PS, false>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 4: rows<4, 2, PS, false>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 5: rows<5, 2, PS, false>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 6: rows<6, 2, PS, false>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    case 7: rows<7, 2, PS, false>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;
    default: rows<8, 2, PS, false>(g, m0, n0, n1, c0, c1, tail, dst, ds); break;  // mr <= 8 (caller)
  }
}

// One bf16 row (src, kx valid elements) into the pair order of `tile`: within each 256-k chunk,
// index 32*(4h + s) + 2i + j holds x[16i + 8h + s + 4j] (elements >= kx are zero).
inline int src_of(int v, int w) { return 16 * (w / 2) + 8 * (v / 4) + v % 4 + 4 * (w % 2); }

NVFP4_BF16_TARGET void permute_row(const std::uint16_t* src, std::int64_t kx, std::int64_t kp, std::uint16_t* dst) {
  // Output word w of vector v reads source 64*(w/8) + idx: quarter q = w/8 of the output comes
  // from source vectors 2q, 2q+1 (vpermt2w picks among their 64 words).
  alignas(64) std::uint16_t idx[8][32];
  for (int v = 0; v < 8; ++v)
    for (int w = 0; w < 32; ++w) idx[v][w] = static_cast<std::uint16_t>(src_of(v, w) - 64 * (w / 8));
  const std::int64_t full = std::min(kp, kx / kChunk * kChunk);
  for (std::int64_t c = 0; c < full; c += kChunk) {
    __m512i x[8];
    for (int q = 0; q < 8; ++q) x[q] = _mm512_loadu_si512(src + c + 32 * q);
    for (int v = 0; v < 8; ++v) {
      const __m512i id = _mm512_load_si512(idx[v]);
      __m512i o = _mm512_mask_blend_epi16(0x0000FF00u, _mm512_permutex2var_epi16(x[0], id, x[1]),
                                          _mm512_permutex2var_epi16(x[2], id, x[3]));
      o = _mm512_mask_blend_epi16(0x00FF0000u, o, _mm512_permutex2var_epi16(x[4], id, x[5]));
      o = _mm512_mask_blend_epi16(0xFF000000u, o, _mm512_permutex2var_epi16(x[6], id, x[7]));
      _mm512_store_si512(dst + c + 32 * v, o);
    }
  }
  for (std::int64_t c = full; c < kp; c += kChunk)
    for (int v = 0; v < 8; ++v)
      for (int w = 0; w < 32; ++w) {
        const std::int64_t kk = c + src_of(v, w);
        dst[c + 32 * v + w] = kk < kx ? src[kk] : 0;
      }
}

// One fp32 row (src, kp elements, zero past the valid ones) into the block-lane order of the FMA
// dot: within each 256-k chunk, index 16 * j + i holds x[16i + j] (a 16 x 16 transpose).
void permute_row_f32(const float* src, std::int64_t kp, float* dst) {
  for (std::int64_t c = 0; c < kp; c += kChunk)
    for (int j = 0; j < 16; ++j)
      for (int i = 0; i < 16; ++i) dst[c + 16 * j + i] = src[c + 16 * i + j];
}

}  // namespace

bool gemv_fma_dot_supported() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vbmi");
  }();
  return ok;
}

// The vdpbf16ps dot: the FMA dot's ISA plus AVX512-BF16.
bool gemv_avx512bf16_supported() { return gemv_fma_dot_supported() && avx512bf16_supported(); }

int gemv_avx512bf16_pieces(DType t) { return t == DType::kF32 ? 3 : t == DType::kF16 ? 2 : 1; }

namespace {

// The driver of both layouts: PS = false reads canonical weights, PS = true pre-split ones.
template <bool PS>
bool gemv_run(const MatmulArgs& a) {
  const std::int64_t k = a.k, n = a.n, m = a.m;
  const CpuTuning& tune = cpu_tuning();
  // P bf16 pieces per activation row (1 bf16, 2 fp16, 3 fp32): virtual row v = mi * P + j holds
  // piece j of row mi; the kernel below only ever sees bf16 rows.
  // M = 1 and 2 with a dtype in tuning_cpu.h gemv_fma_dtypes: the fp32 FMA dot, on the activations
  // converted exactly to fp32 (one "piece" for every dtype).
  const bool fma = gemv_fma_dot(m, a.dtype);
  // The FMA dot's code has no bf16 instruction (tile_fma's target); the vdpbf16ps dot needs BF16.
  if (fma ? !gemv_fma_dot_supported() : !gemv_avx512bf16_supported()) return false;
  const int P = fma ? 1 : gemv_avx512bf16_pieces(a.dtype);
  const std::int64_t mv = m * P;
  Ctx g{&a, nullptr, nullptr, k / kChunk, 0, 0, make_consts(), 0, tune.gemv_prefetch_l2 != 0};
  // Prefetch window by real activation rows (the weight stream is the same for any P).
  // On short weight rows the vdpbf16ps dot prefetches up to more rows, these counted as virtual
  // rows: fp16 M = 8 (16 virtual rows) lost with it where bf16 M = 8 gained (tuning_cpu.h).
  const bool short_k = !fma && k <= tune.gemv_prefetch_short_k && mv <= tune.gemv_prefetch_short_k_max_m;
  g.pf = m >= tune.gemv_prefetch_min_m && (m <= tune.gemv_prefetch_max_m || short_k)
             ? (fma ? tune.gemv_fma_prefetch_tiles : tune.gemv_prefetch_tiles)
             : 0;
  g.kp = g.nch * kChunk;
  g.kt = k - g.kp;
  // Rows of xp 64 bytes apart beyond their length: with K a multiple of 2048 a row is a multiple
  // of 4 KiB, and the MR rows' loads of one step would all map to one L1 set (Zen 4: 32 KiB,
  // 8-way, 64 sets of 64 B), beside the weights and accumulators. Measured (Zen 4 VM, 2026-12-01,
  // cpu_paths_bench, alternating builds): M=8 hot 1 thread 128 x 14336 175.7-178.8 -> 169.4-171.3
  // us, 128 x 4096 55.8-58.8 -> 52.9-54.4; cold 2 threads 4096 x 14336 M=8 3659-3851 -> 3517-3544,
  // M=16 6934-6945 -> 6097-6730; M=4 and K=2560 (rows not 4 KiB multiples) unchanged.
  g.xs = g.kp + 32;
  auto xp = alloc64<std::uint16_t>(fma ? 1 : std::max<std::int64_t>(1, mv * g.xs));
  auto xf = alloc64<float>(fma ? std::max<std::int64_t>(1, mv * g.xs) : 1);
  std::vector<float> xt(static_cast<std::size_t>(std::max<std::int64_t>(1, mv * g.kt)));
  if (fma) {
    std::vector<float> row(static_cast<std::size_t>(k));
    for (std::int64_t mi = 0; mi < m; ++mi) {
      load_x_row_f32(a, mi, row.data());  // exact for every dtype; zero past kx
      permute_row_f32(row.data(), g.kp, xf.get() + mi * g.xs);
      for (std::int64_t kk = g.kp; kk < k; ++kk) xt[mi * g.kt + kk - g.kp] = row[kk];
    }
  } else {
    std::vector<std::uint16_t> piece(static_cast<std::size_t>(P * k + 16), 0);  // zero past kx
    for (std::int64_t mi = 0; mi < m; ++mi) {
      if (!split_row_bf16(a, mi, piece.data(), kSplitMinExpF32)) return false;
      for (int j = 0; j < P; ++j) {
        const std::int64_t v = mi * P + j;
        const std::uint16_t* pj = piece.data() + j * k;
        permute_row(pj, a.kx, g.kp, xp.get() + v * g.xs);
        for (std::int64_t kk = g.kp; kk < k; ++kk) xt[v * g.kt + kk - g.kp] = kk < a.kx ? bf16_to_f32(pj[kk]) : 0.0f;
      }
    }
  }
  g.xp = xp.get();
  g.xf = xf.get();
  g.xt = xt.data();

  const std::int64_t rows_per_task = fma       ? tune.gemv_fma_rows_per_task
                                     : mv == 1 ? tune.gemv_avx512bf16_rows_per_task_m1
                                               : tune.gemv_avx512bf16_rows_per_task;
  const std::int64_t ngroups = (n + rows_per_task - 1) / rows_per_task;
  // Activation rows in balanced groups of <= gemv_group_rows (8): one pass over the weights for
  // M <= 8. With the loop constants read from L1 and the step loops unrolled, the 8 x 2 tile
  // no longer spills, and one pass beats balanced groups of <= 4 by 11-18% at M=5..7 (1 thread,
  // hot; M=8: equal). With several groups (gemv_group_rows < M) one task runs every group over
  // its weight rows, so later groups read them from L1/L2, not DRAM.
  // The FMA dot has its own group bound (tuning_cpu.h gemv_fma_group_rows; tiles up to
  // kGemvFmaTileRows): its summation order is the same for every group size too.
  const std::int64_t gmax = fma ? std::clamp<std::int64_t>(tune.gemv_fma_group_rows, 1, kGemvFmaTileRows)
                                : std::clamp<std::int64_t>(tune.gemv_group_rows, 1, 8);
  const std::int64_t mgroups = (mv + gmax - 1) / gmax;
  // Split K when N alone cannot keep every thread busy (small N, long K).
  const std::int64_t want = tune.gemv_min_tasks_per_thread * num_threads();
  std::int64_t nseg = 1;
  if (ngroups < want && g.nch >= 2) nseg = std::min<std::int64_t>(g.nch, (want + ngroups - 1) / ngroups);
  std::vector<float> sums(static_cast<std::size_t>(nseg * mv * n));

  parallel_for(ngroups * nseg, [&](std::int64_t t) {
    const std::int64_t seg = t % nseg, gi = t / nseg;
    const std::int64_t n0 = gi * rows_per_task, n1 = std::min(n, n0 + rows_per_task);
    const std::int64_t c0 = g.nch * seg / nseg, c1 = g.nch * (seg + 1) / nseg;
    for (std::int64_t mg = 0; mg < mgroups; ++mg) {
      const std::int64_t m0 = mv * mg / mgroups, m1 = mv * (mg + 1) / mgroups;
      const int mr = static_cast<int>(m1 - m0);
      float* const dst = sums.data() + seg * mv * n + m0 * n;
      if (fma)
        rows_any_m<PS, true>(g, mr, m0, n0, n1, c0, c1, seg == nseg - 1, dst, n);
      else
        rows_any_m<PS, false>(g, mr, m0, n0, n1, c0, c1, seg == nseg - 1, dst, n);
    }
  });

  gemv_store_pieces(a, P, nseg, sums.data());
  return true;
}

}  // namespace

bool gemv_nvfp4_avx512bf16(const MatmulArgs& a) { return gemv_run<false>(a); }
bool gemv_nvfp4_avx512bf16_presplit(const MatmulArgs& a) { return gemv_run<true>(a); }
#else
bool gemv_avx512bf16_supported() { return false; }
bool gemv_fma_dot_supported() { return false; }
int gemv_avx512bf16_pieces(DType t) { return t == DType::kF32 ? 3 : t == DType::kF16 ? 2 : 1; }
bool gemv_nvfp4_avx512bf16(const MatmulArgs&) { return false; }
bool gemv_nvfp4_avx512bf16_presplit(const MatmulArgs&) { return false; }
#endif

}  // namespace nvfp4::cpu
