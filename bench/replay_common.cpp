// bench/replay_common.cpp -- the backend-independent half of model replay: traffic counts, the
// memory check, sampling and the run_replay driver. Engines: replay_cpu.cpp, replay_cuda.cu.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "bench/machine.h"
#include "bench/replay.h"
#include "bench/stats.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"

namespace nvfp4::bench {

const char* replay_mode_name(ReplayMode m) { return m == ReplayMode::kDecode ? "decode" : "prefill"; }

std::int64_t linear_m(const ReplayOptions& o, const Linear& l) {
  if (l.m > 0) return l.m;
  if (o.mode == ReplayMode::kDecode) return o.batch;
  if (l.name == "lm_head") return 1;
  return o.prompt;
}

std::vector<Linear> replay_linears(const ReplayOptions& o) {
  if (!o.custom_linears.empty()) return o.custom_linears;
  LinearPlan p = o.plan;
  if (p.layers <= 0) p.layers = o.model.layers;
  return model_linears(o.model, p);
}

std::vector<Linear> shape_linears(const std::vector<std::int64_t>& t, double min_bytes) {
  if (t.empty() || t.size() % 3 != 0) fail("bench", "shape list must hold M,N,K triples");
  std::vector<Linear> out;
  for (std::size_t i = 0; i < t.size(); i += 3) {
    const std::int64_t m = t[i], n = t[i + 1], k = t[i + 2];
    if (m < 1 || n < 1 || k < 16 || k % kBlockSize != 0)
      fail("bench", fmt::format("shape M={} N={} K={}: need M, N >= 1 and K a positive multiple of 16", m, n, k));
    const double per = static_cast<double>(n) * static_cast<double>(k) * (0.5 + 1.0 / kBlockSize);
    const auto copies = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(min_bytes / per)));
    for (std::int64_t c = 0; c < copies; ++c)
      out.push_back({fmt::format("{}x{}x{}", m, n, k), static_cast<std::int64_t>(c), n, k, m});
  }
  return out;
}

void fill_traffic(const ReplayOptions& o, const std::vector<Linear>& ls, bool dense, ReplayVariant& v) {
  v.weight_bytes = v.bytes = v.flops = 0;
  for (const auto& l : ls) {
    const double nk = static_cast<double>(l.n) * static_cast<double>(l.k);
    const double m = static_cast<double>(linear_m(o, l));
    // NVFP4: 4-bit codes + one E4M3 byte per 16; dense: bf16 weights, activations and outputs
    // (fp32 for the CPU's fp32 baseline).
    const int dense_size = o.backend == "cpu" && cpu_dense_f32(o) ? 4 : 2;
    const double w = dense ? nk * dense_size : nk / 2 + nk / kBlockSize;
    const int in_size = dense ? dense_size : dtype_size(o.dtype);
    const int out_size = dense ? dense_size : dtype_size(o.dtype);
    v.weight_bytes += w;
    v.bytes += w + m * static_cast<double>(l.k) * in_size + m * static_cast<double>(l.n) * out_size;
    v.flops += 2 * m * nk;
  }
}

double replay_bytes_needed(const ReplayOptions& o, const std::vector<Linear>& ls, bool dense) {
  ReplayVariant v;
  v.backend = o.backend;
  fill_traffic(o, ls, dense, v);
  // Weights + every linear's activations and outputs (bytes - weight_bytes) + 64 MiB of slack
  // for validation buffers and the runtime.
  return v.bytes + 64.0 * 1024 * 1024;
}

void check_replay_fits(const ReplayOptions& o, const std::vector<Linear>& ls, double available,
                       const std::string& where) {
  double need = 0;
  std::string what;
  for (bool dense : {false, true}) {
    if ((dense && !o.dense) || (!dense && !o.nvfp4)) continue;
    const double b = replay_bytes_needed(o, ls, dense);
    if (b > need) {
      need = b;
      what = !dense ? "NVFP4" : o.backend == "cpu" && cpu_dense_f32(o) ? "dense fp32" : "dense bf16";
    }
  }
  if (need <= available) return;
  // Largest layer count that fits, for the message.
  std::int64_t fit = -1;
  for (std::int64_t n = o.custom_linears.empty() ? o.plan.layers - 1 : 0; n >= 1; --n) {
    ReplayOptions t = o;
    t.plan.layers = n;
    const auto tl = model_linears(o.model, t.plan);
    double nb = 0;
    if (o.nvfp4) nb = std::max(nb, replay_bytes_needed(t, tl, false));
    if (o.dense) nb = std::max(nb, replay_bytes_needed(t, tl, true));
    if (nb <= available) {
      fit = n;
      break;
    }
  }
  std::string hint = fit > 0 ? fmt::format("use --layers {} (or fewer) to replay part of the model and scale", fit)
                             : std::string("even one layer does not fit");
  if (o.dense) hint += ", or --no-dense to skip the dense baseline";
  fail("bench", fmt::format("replay of {} ({} of {} layers, {}, M={}) needs {} for the {} weights but only {} is "
                            "available on {}: {}",
                            o.model.name, o.plan.layers, o.model.layers, replay_mode_name(o.mode),
                            o.mode == ReplayMode::kDecode ? o.batch : o.prompt, human_bytes(need), what,
                            human_bytes(available), where, hint));
}

void sample_engine(ReplayEngine& e, const ReplayOptions& o, const ReplayResult& r, ReplayVariant& v,
                   const std::string& label) {
  double lu = 0, ru = 0;
  for (int i = 0; i < std::max(1, o.warmup); ++i) e.run(&lu, &ru);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.max_samples; ++i) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= o.min_samples && el >= o.seconds) break;
    e.run(&lu, &ru);
    v.layers_us.push_back(lu);
    v.rest_us.push_back(ru);
    v.samples_us.push_back(lu + ru);
    if (o.progress)
      progress(fmt::format("{}: sample {} ({:.1f} ms), {:.1f}/{:.1f} s", label, i + 1, (lu + ru) / 1e3, el, o.seconds));
  }
  if (o.progress) progress("");
  v.us_median = median(v.samples_us);
  v.us_p10 = quantile(v.samples_us, 0.1);
  v.us_p90 = quantile(v.samples_us, 0.9);
  const double tokens = static_cast<double>(r.tokens);
  v.tokens_per_s = tokens / (v.us_median * 1e-6);
  const double scale = static_cast<double>(o.model.layers) / static_cast<double>(std::max<std::int64_t>(1, o.plan.layers));
  v.full_us = (o.plan.layers > 0 ? median(v.layers_us) * scale : 0) + median(v.rest_us);
  v.full_tokens_per_s = tokens / (v.full_us * 1e-6);
  v.gbps = v.bytes / (v.us_median * 1e3);
  v.gflops = v.flops / (v.us_median * 1e3);
  v.pct_ceiling = r.ceiling_gbps > 0 ? 100.0 * v.gbps / r.ceiling_gbps : 0;
}

void check_replay_options(const ReplayOptions& o) {
  if (o.mode == ReplayMode::kPrefill && o.prompt < 1) fail("bench", fmt::format("prompt length P={} must be >= 1", o.prompt));
  if (o.batch < 1 || o.batch > 4096) fail("bench", fmt::format("decode batch B={} must be in [1, 4096]", o.batch));
  if (o.backend != "cpu" && o.backend != "cuda") fail("bench", "replay backend '" + o.backend + "' (expected cpu or cuda)");
}

ReplayResult run_replay(ReplayOptions o) {
  if (o.plan.layers <= 0) o.plan.layers = o.model.layers;
  if (!o.custom_linears.empty()) o.plan.layers = o.model.layers;  // shapes: nothing to scale
  check_replay_options(o);
  ReplayResult r;
  r.linears = replay_linears(o);
  r.tokens = o.mode == ReplayMode::kDecode ? o.batch : o.prompt;
  r.scaled = o.plan.layers < o.model.layers;
  // Fits check first: nothing is allocated before it.
  if (o.backend == "cpu") {
    check_replay_fits(o, r.linears, mem_available_bytes(), "this host (MemAvailable)");
  } else {
    check_replay_fits(o, r.linears, cuda_mem_free_bytes(), "the GPU (cudaMemGetInfo free)");
  }
  ReplayVariant probe;
  probe.backend = o.backend;
  fill_traffic(o, r.linears, false, probe);
  if (o.backend == "cpu") {
    if (o.progress) progress("measuring the host streaming-read ceiling ...");
    r.ceiling_gbps = host_read_bandwidth_gbps();
    r.ceiling_source = "host streaming read, all threads, 1 GiB, best of 3 (this run)";
    r.cold = probe.weight_bytes > 3 * machine_info().llc_bytes;
  } else {
    r.ceiling_gbps = cuda_read_bandwidth_gbps();
    r.ceiling_source = "device read kernel over 2 GiB, best of 5 (this run)";
    r.cold = probe.weight_bytes > 3 * cuda_l2_bytes();
  }
  r.options = o;
  for (bool dense : {false, true}) {
    if ((dense && !o.dense) || (!dense && !o.nvfp4)) continue;
    const std::string label = fmt::format("{} {} {}", replay_mode_name(o.mode), dense ? "dense" : "nvfp4", o.model.name);
    if (o.progress) progress(label + ": generating weights and validating ...");
    if (o.backend == "cpu") reset_peak_rss();  // the previous variant's weights are freed by now
    auto e = o.backend == "cpu" ? make_cpu_replay(o, r.linears, dense) : make_cuda_replay(o, r.linears, dense);
    ReplayVariant v = e->info();
    sample_engine(*e, o, r, v, label);
    if (o.backend == "cpu") v.peak_mem_bytes = peak_rss_bytes();
    r.variants.push_back(std::move(v));
  }
  return r;
}

namespace {
inline std::uint64_t splitmix64(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

void fill_random_bytes(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
  std::uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t v = splitmix64(s);
    std::memcpy(p + i, &v, 8);
  }
  if (i < n) {
    const std::uint64_t v = splitmix64(s);
    std::memcpy(p + i, &v, n - i);
  }
}

void fill_random_scales(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
  // 0x50 = 2^3 = 8 ... 0x7E = 448 (E4M3 max); 47 codes. A modelopt scale is 448 * block_amax /
  // tensor_amax, so real blocks sit in the upper part of the range; 0x7F (NaN) never appears.
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(0x50 + splitmix64(s) % 47);
}

void fill_random_activations(void* p, DType t, std::size_t n, std::uint64_t seed) {
  std::uint64_t s = seed * 0xD1B54A32D192ED03ull + 3;
  for (std::size_t i = 0; i < n; ++i) {
    // Uniform in [-1, 1): activations after a norm layer are O(1).
    const float v = static_cast<float>(static_cast<double>(splitmix64(s) >> 11) * 0x1.0p-52 - 1.0);
    store_from_f32(p, t, static_cast<std::int64_t>(i), v);
  }
}

#if !defined(NVFP4_HAVE_CUDA)
std::unique_ptr<ReplayEngine> make_cuda_replay(const ReplayOptions&, const std::vector<Linear>&, bool) {
  fail("bench", "replay on cuda: this build of nvfp4 has no CUDA backend");
}
double cuda_read_bandwidth_gbps() { fail("bench", "this build of nvfp4 has no CUDA backend"); }
double cuda_mem_free_bytes() { fail("bench", "this build of nvfp4 has no CUDA backend"); }
double cuda_l2_bytes() { fail("bench", "this build of nvfp4 has no CUDA backend"); }
#endif

}  // namespace nvfp4::bench
