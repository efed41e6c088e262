// tests/cpu/vdpbf16ps_rate.cpp -- microbenchmark (not a test): sustained vdpbf16ps zmm rate per
// core, alone and mixed with the GEMV's decode instructions, on 1 thread and on every thread at
// once (checks whether the vCPUs share FP pipes). Gives the compute floor of the small-M GEMV
// (docs/perf-cpu.md, section 1), and the same for the fp32 FMA dot (section 14) and the AMX
// TDPBF16PS (section 22: whether the two vCPUs share one core's tile unit right now). Usage:
// vdpbf16ps_rate [seconds_per_variant=0.3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#define T_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"), noinline))

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Each kernel runs `iters` loop iterations and returns the number of vdpbf16ps issued; results
// are folded into a sink so nothing is dead. Chains are independent accumulators.
template <int CH>
T_BF16 double dp_regs(long iters, float* sink) {
  __m512 acc[CH];
  for (int i = 0; i < CH; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512bh a = (__m512bh)_mm512_set1_epi32(0x3F803F80), b = (__m512bh)_mm512_set1_epi32(0x00010001);
  for (long it = 0; it < iters; ++it) {
    for (int i = 0; i < CH; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    __asm__ volatile("" : "+v"(a), "+v"(b));
  }
  __m512 s = acc[0];
  for (int i = 1; i < CH; ++i) s = _mm512_add_ps(s, acc[i]);
  *sink += _mm512_reduce_add_ps(s);
  return static_cast<double>(iters) * CH;
}

// The GEMV step: per 32 codes one vpsrlw + one vpermw (decode), then MR vdpbf16ps with the
// activation vector loaded from L1 (memory operand), 2 weight vectors per step (NR = 2).
template <int MR, int NR>
T_BF16 double dp_decode(long iters, float* sink) {
  alignas(64) static std::uint16_t x[8][32];
  for (int m = 0; m < 8; ++m)
    for (int j = 0; j < 32; ++j) x[m][j] = 0x3F80;
  __m512 acc[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) acc[m][r] = _mm512_setzero_ps();
  __m512i tbl = _mm512_set1_epi32(0x3F803F00), h[NR];
  for (int r = 0; r < NR; ++r) h[r] = _mm512_set1_epi32(0x12345678 + r);
  for (long it = 0; it < iters; ++it) {
    __m512bh w[NR];
    for (int r = 0; r < NR; ++r) w[r] = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(h[r], 4), tbl);
    for (int m = 0; m < MR; ++m) {
      const __m512bh xv = (__m512bh)_mm512_load_si512(x[m]);
      for (int r = 0; r < NR; ++r) acc[m][r] = _mm512_dpbf16_ps(acc[m][r], xv, w[r]);
    }
    __asm__ volatile("" : "+v"(tbl));
    for (int r = 0; r < NR; ++r) __asm__ volatile("" : "+v"(h[r]));
  }
  __m512 s = _mm512_setzero_ps();
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) s = _mm512_add_ps(s, acc[m][r]);
  *sink += _mm512_reduce_add_ps(s);
  return static_cast<double>(iters) * MR * NR;
}

// As dp_decode<MR, 2>, but the activation vectors stream through a buffer of XKB KiB (rows of
// x laid out like the GEMV's permuted activations: 8 steps of 64 B per 256 k): with XKB > 32
// they come from L2, as in the GEMV at K=14336 (4 rows x 28 KiB).
template <int MR, int XKB>
T_BF16 double dp_decode_xbuf(long iters, float* sink) {
  constexpr long kRow = XKB * 1024 / MR / 2;  // u16 elements per row
  static std::uint16_t* x = [] {
    auto* p = static_cast<std::uint16_t*>(std::aligned_alloc(64, XKB * 1024));
    for (long i = 0; i < XKB * 512; ++i) p[i] = 0x3F80;
    return p;
  }();
  constexpr int NR = 2;
  __m512 acc[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) acc[m][r] = _mm512_setzero_ps();
  __m512i tbl = _mm512_set1_epi32(0x3F803F00), h[NR];
  for (int r = 0; r < NR; ++r) h[r] = _mm512_set1_epi32(0x12345678 + r);
  long off = 0;
  for (long it = 0; it < iters; ++it) {
    __m512bh w[NR];
    for (int r = 0; r < NR; ++r) w[r] = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(h[r], 4), tbl);
    for (int m = 0; m < MR; ++m) {
      const __m512bh xv = (__m512bh)_mm512_load_si512(x + m * kRow + off);
      for (int r = 0; r < NR; ++r) acc[m][r] = _mm512_dpbf16_ps(acc[m][r], xv, w[r]);
    }
    off += 32;
    if (off == kRow) off = 0;
    __asm__ volatile("" : "+v"(tbl));
    for (int r = 0; r < NR; ++r) __asm__ volatile("" : "+v"(h[r]));
  }
  __m512 s = _mm512_setzero_ps();
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) s = _mm512_add_ps(s, acc[m][r]);
  *sink += _mm512_reduce_add_ps(s);
  return static_cast<double>(iters) * MR * NR;
}

// LOADS 512-bit loads from L1 per vdpbf16ps (one as its memory operand, the rest summed into
// the other operand by vpternlogd, 1 cheap ALU op each): is the load port the GEMV's limit?
template <int LOADS>
T_BF16 double dp_loads(long iters, float* sink) {
  alignas(64) static std::uint16_t buf[16][32];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 32; ++j) buf[i][j] = 0x3F80;
  constexpr int CH = 8;
  __m512 acc[CH];
  for (int i = 0; i < CH; ++i) acc[i] = _mm512_setzero_ps();
  __m512i w = _mm512_set1_epi32(0x3F803F80);
  for (long it = 0; it < iters; ++it) {
    for (int i = 0; i < CH; ++i) {
      __m512i v = w;
      for (int l = 1; l < LOADS; ++l)
        v = _mm512_ternarylogic_epi32(v, _mm512_load_si512(buf[(i + l) & 15]), w, 0x96);
      acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)_mm512_load_si512(buf[i]), (__m512bh)v);
    }
    __asm__ volatile("" : "+v"(w));
  }
  __m512 s = acc[0];
  for (int i = 1; i < CH; ++i) s = _mm512_add_ps(s, acc[i]);
  *sink += _mm512_reduce_add_ps(s);
  return static_cast<double>(iters) * CH;
}

// The FMA dot of the M = 1 GEMV (gemv_fma_dtypes): per 16 codes one vpsrld + one vpermps (decode,
// 16-entry fp32 table) and one vfmadd231ps per weight vector; NR weight vectors, 2 chains each.
// Counts vfmadd231ps (16 MACs each, half a vdpbf16ps). CH = 0: FMAs only, 16 chains.
template <int NR>
T_BF16 double fma_decode(long iters, float* sink) {
  alignas(64) static float x[16];
  for (int j = 0; j < 16; ++j) x[j] = 1.0f;
  __m512 acc[NR][2];
  for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  __m512 tbl = _mm512_set1_ps(0.5f);
  __m512i h[NR];
  for (int r = 0; r < NR; ++r) h[r] = _mm512_set1_epi32(0x12345678 + r);
  for (long it = 0; it < iters; ++it) {
    const __m512 xv = _mm512_load_ps(x);
    for (int q = 0; q < 2; ++q)
      for (int r = 0; r < NR; ++r)
        acc[r][q] = _mm512_fmadd_ps(xv, _mm512_permutexvar_ps(_mm512_srli_epi32(h[r], 4 * (q + 1)), tbl), acc[r][q]);
    __asm__ volatile("" : "+v"(tbl));
    for (int r = 0; r < NR; ++r) __asm__ volatile("" : "+v"(h[r]));
  }
  __m512 s = _mm512_setzero_ps();
  for (int r = 0; r < NR; ++r) s = _mm512_add_ps(s, _mm512_add_ps(acc[r][0], acc[r][1]));
  *sink += _mm512_reduce_add_ps(s);
  return static_cast<double>(iters) * NR * 2;
}

T_BF16 double fma_regs(long iters, float* sink) {
  constexpr int CH = 16;
  __m512 acc[CH];
  for (int i = 0; i < CH; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512 a = _mm512_set1_ps(1.0f), b = _mm512_set1_ps(0.5f);
  for (long it = 0; it < iters; ++it) {
    for (int i = 0; i < CH; ++i) acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
    __asm__ volatile("" : "+v"(a), "+v"(b));
  }
  __m512 s = acc[0];
  for (int i = 1; i < CH; ++i) s = _mm512_add_ps(s, acc[i]);
  *sink += _mm512_reduce_add_ps(s);
  return static_cast<double>(iters) * CH;
}

// TDPBF16PS with its tiles in registers: 4 independent C tiles, A and B tiles loaded once.
// Counts TDPBF16PS (16 x 16 x 32 bf16 MACs = 256 vdpbf16ps zmm). Each thread configures its
// own tiles (LDTILECFG is per thread); the process asked for the tile state in main().
template <int RowsA>
__attribute__((target("amx-tile,amx-bf16"), noinline)) double amx_regs(long iters, float* sink) {
  struct alignas(64) Cfg {
    std::uint8_t palette = 1, start = 0, reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
  } cfg;
  for (int i = 0; i < 8; ++i) {
    cfg.colsb[i] = 64;
    cfg.rows[i] = i < 6 ? RowsA : 16;  // C tiles 0-3 and A tiles 4-5 have RowsA rows; B 16
  }
  alignas(64) static std::uint16_t ab[16][32];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 32; ++j) ab[i][j] = 0x3F80;
  alignas(64) float c[16][16];
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ab, 64);
  _tile_loadd(5, ab, 64);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  for (long it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, 64);
  _tile_release();
  *sink += c[0][0];
  return static_cast<double>(iters) * 4;
}

struct Variant {
  const char* name;
  std::function<double(long, float*)> f;
};

// Runs f on `threads` threads (pinned to cpus 0..threads-1) for ~secs; returns G vdpbf16ps/s per thread
// (median of 5 repeats).
double rate(const Variant& v, int threads, double secs) {
  long iters = 1000;
  float sink = 0;
  for (;;) {  // calibrate on one thread
    const double t0 = now_s();
    v.f(iters, &sink);
    if (now_s() - t0 > secs / 5) break;
    iters *= 2;
  }
  std::vector<double> reps;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<double> per(threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        cpu_set_t cs;
        CPU_ZERO(&cs);
        CPU_SET(t, &cs);
        pthread_setaffinity_np(pthread_self(), sizeof(cs), &cs);
        float s = 0;
        const double t0 = now_s();
        const double n = v.f(iters, &s);
        per[t] = n / (now_s() - t0) / 1e9;
        if (s == 12345.f) std::printf(" ");
      });
    for (auto& t : ts) t.join();
    reps.push_back(*std::min_element(per.begin(), per.end()));
  }
  std::sort(reps.begin(), reps.end());
  if (sink == 12345.f) std::printf(" ");
  return reps[reps.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  // Every variant but AMX runs AVX-512 code: on a CPU without AVX512-BF16 (CPUID leaf 7.1 EAX
  // bit 5) say so instead of dying of SIGILL.
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  if (!__builtin_cpu_supports("avx512f") || !__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) || !(a1 >> 5 & 1)) {
    std::fprintf(stderr, "vdpbf16ps_rate: this CPU has no AVX512-BF16; nothing to measure\n");
    return 77;
  }
  const double secs = argc > 1 ? std::atof(argv[1]) : 0.3;
  const int nthreads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const Variant vs[] = {
      {"dp regs, 4 chains", dp_regs<4>},       {"dp regs, 8 chains", dp_regs<8>},
      {"dp regs, 12 chains", dp_regs<12>},     {"dp regs, 16 chains", dp_regs<16>},
      {"dp+decode M=1 NR=8", dp_decode<1, 8>}, {"dp+decode M=2 NR=4", dp_decode<2, 4>},
      {"dp+decode M=4 NR=2", dp_decode<4, 2>}, {"dp+decode M=4 NR=3", dp_decode<4, 3>},
      {"dp+decode M=8 NR=1", dp_decode<8, 1>}, {"dp+decode M=8 NR=2", dp_decode<8, 2>},
      {"M=4 NR=2 x 16 KiB", dp_decode_xbuf<4, 16>}, {"M=4 NR=2 x 112 KiB", dp_decode_xbuf<4, 112>},
      {"M=8 NR=2 x 224 KiB", dp_decode_xbuf<8, 224>},
      {"1 zmm load per dp", dp_loads<1>}, {"3 zmm loads per dp", dp_loads<3>},
      {"2 zmm loads per dp", dp_loads<2>},
      {"fma regs, 16 chains *", fma_regs},  {"fma+decode NR=4 *", fma_decode<4>},
  };
  std::printf("%-22s %14s %14s\n", "variant", "G dp/s 1 thr", "G dp/s/thr all");
  for (const Variant& v : vs)
    std::printf("%-22s %14.3f %14.3f\n", v.name, rate(v, 1, secs), rate(v, nthreads, secs));
  // AMX where the CPU has it and the kernel grants the tile state (ARCH_REQ_XCOMP_PERM, 18 =
  // XTILEDATA). The all-threads column is the slowest thread's rate: about half the 1-thread
  // rate when two vCPUs are hyperthreads of one core, sharing its TMUL.
  // CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE (Intel SDM); not __builtin_cpu_supports,
  // whose "amx-bf16" clang 14 does not know.
  unsigned ca = 0, cb = 0, cc = 0, cd = 0;
  const bool amx = __get_cpuid_count(7, 0, &ca, &cb, &cc, &cd) && (cd >> 22 & 1) && (cd >> 24 & 1);
  if (amx && syscall(SYS_arch_prctl, 0x1023, 18) == 0) {
    const Variant amx[] = {{"tdpbf16ps regs **", amx_regs<16>},
                           {"tdpbf16ps A 8 rows", amx_regs<8>},
                           {"tdpbf16ps A 4 rows", amx_regs<4>},
                           {"tdpbf16ps A 1 row", amx_regs<1>}};
    for (const Variant& v : amx)
      std::printf("%-22s %14.3f %14.3f\n", v.name, rate(v, 1, secs), rate(v, nthreads, secs));
  }
  std::printf("threads=%d (one vdpbf16ps zmm = 32 bf16 MACs; * rows count vfmadd231ps zmm = 16 fp32 MACs;\n"
              "** rows count TDPBF16PS = 16 x 16 x 32 bf16 MACs)\n",
              nthreads);
  return 0;
}
#else
int main() {
  std::printf("x86-64 AVX512-BF16 only\n");
  return 0;
}
#endif
