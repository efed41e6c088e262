// bench/bench_cpu.cpp -- `nvfp4 bench` on the CPU: NVFP4 kernels and a dense bf16 BLAS baseline.
//
// Per shape: (1) weights from fresh N(0,1) data (Options::seed) through nvfp4::quantize
// (modelopt); (2) the CPU kernel is validated against the oracle on a slice (first <= 4 rows of
// x, first <= 64 rows of W) before any timing; (3) cold rows rotate through distinct copies of
// the weights totalling >= max(3 x LLC, 512 MiB) (capped at half the free memory), so every call
// reads its weights from DRAM; hot rows reuse one copy; (4) the streaming-read ceiling
// (ceiling_gbps) is measured INTERLEAVED with the cold NVFP4 calls: every timed kernel call is
// preceded by an all-thread streaming read of another (cold) rotation copy of the same bytes,
// and the row reports the median of those read samples. On the shared dev host the read
// bandwidth drifts by ~1.5x within seconds, so a ceiling measured once per shape made
// "% of ceiling" drift with it; interleaving exposes both to the same seconds. Hot rows and the
// dense baseline rows of a shape carry the cold row's interleaved ceiling; a hot-only run (one
// copy: reading other bytes between hot calls would evict the hot weights) measures the read
// once per run over a dedicated buffer of the rotation size;
// (5) the dense baseline is oneDNN's bf16 matmul primitive (bf16 x, bf16 W, fp32 out; AMX/
// AVX512-BF16 where present) on the dequantized weights in bf16, also validated, also cold/hot.
// Debian's OpenBLAS 0.3.21 is built without BUILD_BFLOAT16 (no cblas_sbgemm symbol in
// libopenblas.so), so without oneDNN the baseline is OpenBLAS fp32 cblas_sgemm ("openblas_f32").
// Medians of >= min_reps calls.
#include <cblas.h>
#include <unistd.h>
#if defined(NVFP4_HAVE_DNNL)
#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/dense_cpu.h"
#include "bench/host_buffer.h"
#include "bench/machine.h"
#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cpu/parallel_for.h"
#include "nvfp4/cpu.h"
#include "nvfp4/error.h"
#include "nvfp4/ops.h"
#include "nvfp4/quantize.h"

namespace nvfp4::bench {
namespace {

using Clock = std::chrono::steady_clock;

double now_us() {
  return std::chrono::duration<double, std::micro>(Clock::now().time_since_epoch()).count();
}

std::int64_t llc_bytes() {
  long v = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (v > 0) return v;
  std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string s;
  if (f >> s && !s.empty()) {
    std::int64_t mult = 1;
    if (s.back() == 'K') mult = 1024;
    if (s.back() == 'M') mult = 1024 * 1024;
    return std::atoll(s.c_str()) * mult;
  }
  return 32ll << 20;
}

std::int64_t rotation_target_bytes() {
  std::int64_t want = std::max<std::int64_t>(3 * llc_bytes(), 512ll << 20);
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) want = std::min<std::int64_t>(want, static_cast<std::int64_t>(pages) * page / 2);
  return want;
}

// Median/p10/p90 of samples.
void fill_stats(Row& r) {
  std::vector<double> s = r.samples_us;
  std::sort(s.begin(), s.end());
  auto q = [&](double p) { return s[static_cast<std::size_t>(std::min<double>(s.size() - 1, p * (s.size() - 1) + 0.5))]; };
  r.us_median = q(0.5);
  r.us_p10 = q(0.1);
  r.us_p90 = q(0.9);
  r.gbps = r.bytes / (r.us_median * 1e3);
  r.gflops = 2.0 * r.shape.m * r.shape.n * r.shape.k / (r.us_median * 1e3);
}

// Times call(copy) with copies rotating. With `read` (cold rows), every timed call is preceded
// by read(copy') on the next copy in the rotation (not the one the call then reads, so both
// stay cold), and read's GB/s samples go to *read_gbps: the ceiling interleaved with the calls.
template <typename F>
std::vector<double> time_calls(const Options& o, int copies, F&& call,
                               const std::function<double(int)>& read = nullptr,
                               std::vector<double>* read_gbps = nullptr) {
  int i = 0;
  for (int w = 0; w < 2; ++w) {  // warm-up (page faults, thread pool)
    if (read) read(i++ % copies);
    call(i++ % copies);
  }
  std::vector<double> samples;
  const double t_start = now_us();
  while (static_cast<int>(samples.size()) < o.min_reps || now_us() - t_start < o.min_seconds * 1e6) {
    if (read) {
      const double g = read(i++ % copies);
      if (read_gbps != nullptr) read_gbps->push_back(g);
    }
    const double t0 = now_us();
    call(i++ % copies);
    samples.push_back(now_us() - t0);
    if (samples.size() >= 100000) break;
  }
  return samples;
}

// One streaming read of [p, p + bytes) with every thread (the ceiling the GEMV competes with),
// in 256 KiB tasks (>= 100 tasks per 33 MB layer, so both threads stay busy to the end);
// returns GB/s over the whole 8-byte-multiple prefix that was read.
double stream_read_once_gbps(const std::uint8_t* p, std::int64_t bytes) {
  const std::int64_t chunk = 1 << 18, nchunks = (bytes + chunk - 1) / chunk;
  static std::vector<std::uint64_t> sink(4096, 0);
  const double t0 = now_us();
  cpu::parallel_for(nchunks, [&](std::int64_t c) {
    const std::int64_t len = std::min(chunk, bytes - c * chunk) / 64 * 64;
    const std::uint64_t* q = reinterpret_cast<const std::uint64_t*>(p + c * chunk);
    std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (std::int64_t i = 0; i < len / 8; i += 8) {
      a0 += q[i]; a1 += q[i + 1]; a2 += q[i + 2]; a3 += q[i + 3];
      a4 += q[i + 4]; a5 += q[i + 5]; a6 += q[i + 6]; a7 += q[i + 7];
    }
    sink[static_cast<std::size_t>(c % 4096)] += a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;  // keeps the reads observable
  });
  const double us = now_us() - t0;
  return static_cast<double>(bytes / 64 * 64) / (us * 1e3);
}

// A CPU shape row before timing: what ran, on what, and its validation against the oracle.
Row shape_row(const std::string& kernel, const std::string& variant, const Shape& s, DType dt, bool cold, double bytes,
              double err, double tol) {
  Row r;
  r.backend = "cpu";
  r.kernel = kernel;
  r.variant = variant;
  r.shape = s;
  r.dtype = dt;
  r.cold = cold;
  r.bytes = bytes;
  r.max_rel_err = err;
  r.validated = err <= tol;
  return r;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Median of 5 streaming reads of a buffer (hot-only runs: once per run).
double stream_read_gbps(const std::uint8_t* p, std::int64_t bytes) {
  std::vector<double> gb;
  for (int rep = 0; rep < 5; ++rep) gb.push_back(stream_read_once_gbps(p, bytes));
  return median_of(gb);
}

// max |y - ref| / max |ref| over the slice (rows < ms, cols < ns).
double rel_err(const std::vector<float>& got, std::int64_t got_stride, const std::vector<float>& ref,
               std::int64_t ms, std::int64_t ns) {
  double num = 0, den = 1e-30;
  for (std::int64_t i = 0; i < ms; ++i)
    for (std::int64_t j = 0; j < ns; ++j) {
      const double g = got[static_cast<std::size_t>(i * got_stride + j)], r = ref[static_cast<std::size_t>(i * ns + j)];
      num = std::max(num, std::isfinite(g) ? std::fabs(g - r) : INFINITY);
      den = std::max(den, std::fabs(r));
    }
  return num / den;
}

}  // namespace

std::vector<Row> run_cpu(const Options& o) {
  std::vector<Row> rows;
  const int threads = cpu::num_threads();
  openblas_set_num_threads(threads);
  std::uint64_t seed = o.seed;
  double run_ceiling = 0;
  for (const Shape& s : o.shapes) {
    {
      // Lower bound of the host memory this shape takes: the fp32 source weights, the quantized
      // weights and >= 2 rotation copies of them, the dense baseline's weights (bf16, or fp32
      // where oneDNN has no bf16 matmul: dense_cpu.h), fp32-sized activations and two outputs.
      const double nk = static_cast<double>(s.n) * static_cast<double>(s.k);
      const double dense_bytes = onednn_bf16_matmul_available() ? 2 : 4;
      const double need = nk * 4 + 3 * nk * 9 / 16 + (o.dense ? nk * dense_bytes : 0) +
                          static_cast<double>(s.m) * s.k * 4 + 2.0 * s.m * s.n * 4;
      check_shape("CPU", s, need, mem_available_bytes(), "this host (MemAvailable)",
                  "fp32 source weights, quantized copies, dense weights, activations, outputs");
    }
    std::mt19937_64 rng(seed++);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    // Weights: fresh normal data, quantized by the library (modelopt recipe).
    QuantizedWeight qw;
    {
      Tensor wf(DType::kF32, {s.n, s.k});
      float* p = static_cast<float*>(wf.data());
      for (std::int64_t i = 0; i < s.n * s.k; ++i) p[i] = nd(rng);
      qw = quantize(wf);
    }
    Tensor x(o.dtype, {s.m, s.k});
    for (std::int64_t i = 0; i < s.m * s.k; ++i) x.set(i, nd(rng));

    // Rotation copies of packed+scales, contiguous.
    const std::int64_t pbytes = static_cast<std::int64_t>(qw.packed.size()), sbytes = static_cast<std::int64_t>(qw.scales.size());
    const std::int64_t wbytes = pbytes + sbytes;
    const std::int64_t rot = rotation_target_bytes();
    const int copies = o.cold ? static_cast<int>(std::max<std::int64_t>(2, (rot + wbytes - 1) / wbytes)) : 1;
    HostBuffer pool(static_cast<std::size_t>(wbytes * copies));
    cpu::parallel_for(copies, [&](std::int64_t c) {
      std::memcpy(pool.data() + c * wbytes, qw.packed.data(), static_cast<std::size_t>(pbytes));
      std::memcpy(pool.data() + c * wbytes + pbytes, qw.scales.data(), static_cast<std::size_t>(sbytes));
    });
    auto wview = [&](int c) {
      return WeightView{pool.data() + c * wbytes, pool.data() + c * wbytes + pbytes, qw.tensor_scale(), s.n, s.k};
    };
    // Hot-only runs: the read ceiling over a dedicated buffer of the rotation size, once per run.
    // Cold runs: measured interleaved with the cold NVFP4 calls below.
    double ceiling = 0;
    if (!o.cold) {
      if (run_ceiling == 0) {
        HostBuffer buf(static_cast<std::size_t>(rot));
        cpu::parallel_for(rot >> 20, [&](std::int64_t c) { std::memset(buf.data() + (c << 20), static_cast<int>(c), 1 << 20); });
        run_ceiling = stream_read_gbps(buf.data(), rot);
      }
      ceiling = run_ceiling;
    }

    // Oracle on a slice: first ms rows of x against the first ns rows of W.
    const std::int64_t ms = std::min<std::int64_t>(s.m, 4), ns = std::min<std::int64_t>(s.n, 64);
    std::vector<float> ref(static_cast<std::size_t>(ms * ns));
    {
      Tensor xs(DType::kF32, {ms, s.k});
      for (std::int64_t i = 0; i < ms * s.k; ++i) xs.set(i, x.get(i));
      WeightView wv = wview(0);
      wv.n = ns;
      Tensor ys(DType::kF32, {ms, ns});
      // The oracle in the activation dtype, widened: the kernels' outputs are in that dtype.
      Tensor xsd(o.dtype, {ms, s.k});
      std::memcpy(xsd.data(), x.data(), xsd.bytes.size());
      Tensor ysd(o.dtype, {ms, ns});
      quantized_matmul_ref(MatrixView{xsd.data(), o.dtype, ms, s.k, s.k}, wv,
                           MatrixView{ysd.data(), o.dtype, ms, ns, ns});
      for (std::int64_t i = 0; i < ms * ns; ++i) ref[static_cast<std::size_t>(i)] = ysd.get(i);
    }

    // --- NVFP4 on the CPU kernels ---
    Tensor y(o.dtype, {s.m, s.n});
    const MatrixView xv{x.data(), o.dtype, s.m, s.k, s.k}, yv{y.data(), o.dtype, s.m, s.n, s.n};
    // The error of the first ms rows of y against the oracle slice.
    auto y_err = [&] {
      std::vector<float> got(static_cast<std::size_t>(ms * s.n));
      for (std::int64_t i = 0; i < ms * s.n; ++i) got[static_cast<std::size_t>(i)] = y.get(i);
      return rel_err(got, s.n, ref, ms, ns);
    };
    quantized_matmul(xv, wview(0), yv, Backend::kCpu);
    const double err = y_err();
    // Cold and hot rows of one NVFP4 variant; `base` is the rotation its calls read (the
    // interleaved streaming reads touch its other copies). The first cold row measures the
    // shape's ceiling; every later row carries it (one ceiling per shape).
    bool have_ceiling = !o.cold;
    auto nvfp4_rows = [&](const char* variant, const std::string& kernel, double verr,
                          const std::function<void(int)>& call, const std::uint8_t* base) {
      for (bool cold : {true, false}) {
        if (cold && !o.cold) continue;
        Row r = shape_row(kernel, variant, s, o.dtype, cold, nvfp4_matmul_bytes(s, o.dtype), verr, 1e-2);
        if (cold) {
          std::vector<double> read_gbps;
          r.samples_us = time_calls(o, copies, call, [&](int c) { return stream_read_once_gbps(base + c * wbytes, wbytes); },
                                    &read_gbps);
          if (!have_ceiling) ceiling = median_of(read_gbps);
          have_ceiling = true;
        } else {
          r.samples_us = time_calls(o, 1, call);
        }
        r.ceiling_gbps = ceiling;
        fill_stats(r);
        rows.push_back(std::move(r));
      }
    };
    nvfp4_rows("nvfp4", cpu::cpu_kernel_name(s.m, o.dtype), err,
               [&](int c) { quantized_matmul(xv, wview(c), yv, Backend::kCpu); }, pool.data());
    // --- NVFP4 on pre-split weights (cpu::repack_for_gemv_cpu, once per rotation copy, untimed):
    // the decode GEMV without its two shuffles per chunk (include/nvfp4/cpu.h), where it replaces
    // the kernel the canonical path runs (the AVX512-BF16 GEMV; not where AMX takes M >= 2); same
    // rotation, validation and interleaved reads as the row above.
    if (cpu::repack_for_gemv_cpu_supported() && cpu::cpu_path_for(s.m, o.dtype) == cpu::CpuPath::kGemvAvx512Bf16) {
      HostBuffer rpool(static_cast<std::size_t>(wbytes * copies));
      cpu::parallel_for(copies, [&](std::int64_t c) {
        cpu::repack_for_gemv_cpu(wview(static_cast<int>(c)), rpool.data() + c * wbytes);
        std::memcpy(rpool.data() + c * wbytes + pbytes, qw.scales.data(), static_cast<std::size_t>(sbytes));
      });
      auto rview = [&](int c) {
        return cpu::CpuRepackedWeightView{rpool.data() + c * wbytes, rpool.data() + c * wbytes + pbytes, qw.tensor_scale(),
                                          s.n, s.k};
      };
      cpu::quantized_matmul_repacked(xv, rview(0), yv);
      nvfp4_rows("nvfp4_repacked", cpu::cpu_repacked_kernel_name(s.m, o.dtype), y_err(),
                 [&](int c) { cpu::quantized_matmul_repacked(xv, rview(c), yv); }, rpool.data());
    }
    pool = HostBuffer();  // release the rotation before the dense baseline allocates its own

    // --- dense baseline on the dequantized weights (unless --no-dense) ---
    if (o.dense) {
      // oneDNN's bf16 matmul where this CPU has it; else OpenBLAS fp32 cblas_sgemm
      // (bench/dense_cpu.h: AVX2-only CPUs), and the row says which.
#if defined(NVFP4_HAVE_DNNL)
      using dnnl::memory;
      const dnnl::engine eng_cpu(dnnl::engine::kind::cpu, 0);
      std::optional<dnnl::stream> strm;
      const std::optional<dnnl::matmul::primitive_desc> pd =
          onednn_bf16_matmul_pd(eng_cpu, s.m, s.n, s.k, memory::data_type::f32);
      if (pd) strm.emplace(eng_cpu);
      const bool use_dnnl = pd.has_value();
#else
      const bool use_dnnl = false;
#endif
      const DType bdt = use_dnnl ? DType::kBF16 : DType::kF32;
      const char* variant = use_dnnl ? "onednn_bf16" : "openblas_f32";
      const char* kname = use_dnnl ? "dnnl::matmul bf16:bf16:f32 (prepacked weights)"
                                   : "cblas_sgemm (no oneDNN bf16 matmul on this CPU/build)";
      const Tensor wd = dequantize(qw, bdt);
      Tensor xd(bdt, {s.m, s.k});
      for (std::int64_t i = 0; i < s.m * s.k; ++i) xd.set(i, x.get(i));
      const std::int64_t dbytes = static_cast<std::int64_t>(wd.bytes.size());
      const int dcopies = o.cold ? static_cast<int>(std::max<std::int64_t>(2, (rot + dbytes - 1) / dbytes)) : 1;
      std::vector<float> yd(static_cast<std::size_t>(s.m * s.n));
      std::function<void(int)> call;
#if defined(NVFP4_HAVE_DNNL)
      // Weights prepacked once per rotation copy into the layout oneDNN picks for this shape
      // (format_tag::any + reorder), as an inference engine loads them and as the replay's dense
      // baseline does. The plain [N][K] layout made oneDNN slower at M > 1 (2026-12-01, Zen 4,
      // M = 8: the shape rows' plain-layout oneDNN summed to 86 ms over Qwen3-4B's replayed linears,
      // the prepacked replay took 52 ms), which flattered NVFP4.
      std::optional<dnnl::matmul> prim;
      std::vector<memory> dpool_dnnl;
      std::optional<memory> a_mem, c_mem;
      if (use_dnnl) {
        prim.emplace(*pd);
        memory plain(memory::desc({s.k, s.n}, memory::data_type::bf16, memory::format_tag::ba), eng_cpu,
                     const_cast<std::uint8_t*>(wd.bytes.data()));  // W[N][K] is (K, N) in "ba"
        for (int c = 0; c < dcopies; ++c) {
          dpool_dnnl.emplace_back(pd->weights_desc(), eng_cpu);
          dnnl::reorder(plain, dpool_dnnl.back()).execute(*strm, plain, dpool_dnnl.back());
        }
        strm->wait();
        a_mem.emplace(pd->src_desc(), eng_cpu, xd.data());
        c_mem.emplace(pd->dst_desc(), eng_cpu, yd.data());
        call = [&](int c) {
          prim->execute(*strm, {{DNNL_ARG_SRC, *a_mem}, {DNNL_ARG_WEIGHTS, dpool_dnnl[c]}, {DNNL_ARG_DST, *c_mem}});
          strm->wait();
        };
      }
#endif
      HostBuffer dpool(use_dnnl ? 0 : static_cast<std::size_t>(dbytes * dcopies));
      if (!use_dnnl) {
        cpu::parallel_for(dcopies, [&](std::int64_t c) {
          std::memcpy(dpool.data() + c * dbytes, wd.bytes.data(), static_cast<std::size_t>(dbytes));
        });
        call = [&](int c) {
          const float* b = reinterpret_cast<const float*>(dpool.data() + c * dbytes);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(s.m), static_cast<blasint>(s.n),
                      static_cast<blasint>(s.k), 1.0f, static_cast<const float*>(xd.data()), static_cast<blasint>(s.k), b,
                      static_cast<blasint>(s.k), 0.0f, yd.data(), static_cast<blasint>(s.n));
        };
      }
      call(0);
      // bf16 x (rounded from a wider run dtype) times the dequantized weights in bf16: compare
      // with the oracle at 2^-6 relative.
      const double derr = rel_err(yd, s.n, ref, ms, ns);
      for (bool cold : {true, false}) {
        if (cold && !o.cold) continue;
        Row r = shape_row(kname, variant, s, bdt, cold,
                          static_cast<double>(dbytes) + static_cast<double>(s.m) * s.k * dtype_size(bdt) +
                              static_cast<double>(s.m) * s.n * 4,
                          derr, 1.0 / 64);
        r.ceiling_gbps = ceiling;
        r.samples_us = time_calls(o, cold ? dcopies : 1, call);
        fill_stats(r);
        rows.push_back(std::move(r));
      }
    }
  }
  return rows;
}

}  // namespace nvfp4::bench
