// bench/replay_cpu.cpp -- model replay on the host: NVFP4 layers through the public
// nvfp4::quantized_matmul(Backend::kCpu), the dense baseline through oneDNN bf16 matmul (OpenBLAS
// fp32 cblas_sgemm where this CPU has no oneDNN bf16 matmul: dense_cpu.h).
//
// Weights: the whole replayed model is resident, one buffer per linear, filled directly with
// random packed codes and valid E4M3 scales (quantizing gigabytes with the scalar quantizer would
// take minutes and change nothing the kernels see: they read bytes). Dense weights are random
// bf16. Before any timing the first linear is checked against the oracle.
#include <cblas.h>
#include <dnnl.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>


#include "bench/dense_cpu.h"
#include "bench/host_buffer.h"
#include "bench/replay.h"
#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cpu/parallel_for.h"
#include "nvfp4/cpu.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

namespace nvfp4::bench {
namespace {

using Buf = HostBuffer;  // bench/host_buffer.h: huge-page-advised weights

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

// One replay of `ls` (decoder layers first, then the rest: lm_head), timed in those two parts.
// matmul(i) runs linear i; settle() waits for queued work before a part's clock stops.
template <class Matmul, class Settle>
void run_timed_parts(const std::vector<Linear>& ls, Matmul matmul, Settle settle, double* layers_us, double* rest_us) {
  auto t = Clock::now();
  bool in_layers = true;
  *layers_us = 0;
  for (std::size_t i = 0; i < ls.size(); ++i) {
    if (in_layers && ls[i].layer < 0) {
      settle();
      *layers_us = us_since(t);
      t = Clock::now();
      in_layers = false;
    }
    matmul(i);
  }
  settle();
  if (in_layers) {
    *layers_us = us_since(t);
    *rest_us = 0;
  } else {
    *rest_us = us_since(t);
  }
}

// Relative error measure shared by both engines: |y - ref| / (|ref| + rms(ref)). The rms term keeps
// a near-zero output (cancellation) from turning a rounding difference into a huge ratio.
double checked_err(const float* y, const float* ref, std::size_t n, std::size_t* where) {
  double rms = 0;
  for (std::size_t i = 0; i < n; ++i) rms += static_cast<double>(ref[i]) * ref[i];
  rms = std::sqrt(rms / static_cast<double>(std::max<std::size_t>(n, 1)));
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = std::isfinite(y[i]) ? std::fabs(static_cast<double>(y[i]) - ref[i]) / (std::fabs(ref[i]) + rms) : INFINITY;
    if (!(e <= worst)) {
      worst = e;
      *where = i;
    }
  }
  return worst;
}

class CpuNvfp4Replay final : public ReplayEngine {
 public:
  CpuNvfp4Replay(const ReplayOptions& o, const std::vector<Linear>& ls) : o_(o), ls_(ls) {
    info_.variant = "nvfp4";
    info_.backend = "cpu";
    fill_traffic(o, ls, false, info_);
    // Decode on weights pre-split once at load (cpu::repack_for_gemv_cpu, as an engine would)
    // where the canonical path would run the AVX512-BF16 GEMV (so not where AMX takes M >= 2),
    // unless --canonical; every linear, or none.
    presplit_ = !o.canonical_layout && cpu::repack_for_gemv_cpu_supported() &&
                std::all_of(ls.begin(), ls.end(), [&](const Linear& l) {
                  return cpu::cpu_path_for(linear_m(o, l), o.dtype) == cpu::CpuPath::kGemvAvx512Bf16;
                });
    info_.kernel = presplit_ ? "nvfp4::cpu::quantized_matmul_repacked (weights pre-split at load)"
                             : "nvfp4::quantized_matmul(Backend::kCpu)";
    std::uint64_t seed = o.seed * 1000003;
    for (const auto& l : ls) {
      const auto nk = static_cast<std::size_t>(l.n * l.k);
      packed_.emplace_back(nk / 2);
      scales_.emplace_back(nk / kBlockSize);
      fill_random_bytes(packed_.back().data(), nk / 2, ++seed);
      fill_random_scales(scales_.back().data(), nk / kBlockSize, ++seed);
      if (presplit_) {
        // Random canonical bytes -> pre-split, through an 8 MiB window of rows (no second copy of
        // a layer in memory: the replay's peak memory stays the weights'); layer 0 keeps its
        // canonical bytes for the oracle (validate).
        if (packed_.size() == 1) {
          canonical0_ = Buf(nk / 2);
          std::memcpy(canonical0_.data(), packed_.back().data(), nk / 2);
        }
        const std::int64_t rb = std::max<std::int64_t>(1, (8 << 20) / (l.k / 2));
        Buf window(static_cast<std::size_t>(std::min(rb, l.n) * (l.k / 2)));
        for (std::int64_t r0 = 0; r0 < l.n; r0 += rb) {
          const std::int64_t rows = std::min(rb, l.n - r0);
          std::uint8_t* at = packed_.back().data() + r0 * (l.k / 2);
          std::memcpy(window.data(), at, static_cast<std::size_t>(rows * (l.k / 2)));
          cpu::repack_for_gemv_cpu(WeightView{window.data(), scales_.back().data() + r0 * (l.k / kBlockSize), 1.0f, rows, l.k}, at);
        }
      }
      const std::int64_t m = linear_m(o, l);
      // One activation buffer per (K, M): layers reading the same width share their input, as in
      // a real forward pass where q/k/v (and gate/up) read the same normalised hidden state.
      auto key = std::make_pair(l.k, m);
      if (!x_.count(key)) {
        x_.emplace(key, Buf(static_cast<std::size_t>(m * l.k * dtype_size(o.dtype))));
        fill_random_activations(x_.at(key).data(), o.dtype, static_cast<std::size_t>(m * l.k), ++seed);
      }
      y_.emplace_back(static_cast<std::size_t>(m * l.n * dtype_size(o.dtype)));
    }
    validate();
  }

  void run(double* layers_us, double* rest_us) override {
    run_timed_parts(ls_, [this](std::size_t i) { matmul(i); }, [] {}, layers_us, rest_us);
  }

  const ReplayVariant& info() const override { return info_; }

 private:
  MatrixView x_view(std::size_t i) {
    const auto& l = ls_[i];
    const std::int64_t m = linear_m(o_, l);
    return {x_.at({l.k, m}).data(), o_.dtype, m, l.k, l.k};
  }
  // The canonical view (the oracle's; with pre-split weights only layer 0 has one).
  WeightView w_view(std::size_t i) {
    // Tensor scale ~1e-4: with scales 8..448 and codes up to 6 the weights are O(0.01-0.1), as in LLMs.
    const std::uint8_t* p = presplit_ ? canonical0_.data() : packed_[i].data();
    return {p, scales_[i].data(), kTensorScale, ls_[i].n, ls_[i].k};
  }
  void matmul(std::size_t i) {
    const std::int64_t m = linear_m(o_, ls_[i]);
    MatrixView y{y_[i].data(), o_.dtype, m, ls_[i].n, ls_[i].n};
    if (presplit_)
      cpu::quantized_matmul_repacked(x_view(i), cpu::CpuRepackedWeightView{packed_[i].data(), scales_[i].data(), kTensorScale,
                                                                           ls_[i].n, ls_[i].k},
                                     y);
    else
      quantized_matmul(x_view(i), w_view(i), y, Backend::kCpu);
  }

  void validate() {
    // First linear: kernel on the full M (the path timing uses) into a NaN-poisoned output, the
    // oracle on its first rows (the oracle is scalar; 4 rows keep it under a second at K=16384).
    const auto& l = ls_[0];
    const std::int64_t m = linear_m(o_, l);
    const std::int64_t rows = std::min<std::int64_t>(m, 4);
    const int es = dtype_size(o_.dtype);
    for (std::int64_t i = 0; i < m * l.n; ++i) store_from_f32(y_[0].data(), o_.dtype, i, std::nanf(""));
    matmul(0);
    Buf ref(static_cast<std::size_t>(rows * l.n * es));
    MatrixView xv = x_view(0);
    xv.rows = rows;
    quantized_matmul_ref(xv, w_view(0), MatrixView{ref.data(), o_.dtype, rows, l.n, l.n});
    std::vector<float> a(static_cast<std::size_t>(rows * l.n)), b(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      a[i] = load_as_f32(y_[0].data(), o_.dtype, static_cast<std::int64_t>(i));
      b[i] = load_as_f32(ref.data(), o_.dtype, static_cast<std::int64_t>(i));
    }
    std::size_t where = 0;
    const double err = checked_err(a.data(), b.data(), a.size(), &where);
    // Both round one fp32 sum to the output dtype; summation order may differ, which can move the
    // rounded result by one ulp of the output type (bf16 2^-8 relative, f16 2^-11, f32 ~K*2^-24).
    const double tol = o_.dtype == DType::kBF16 ? 0x1p-7 : o_.dtype == DType::kF16 ? 0x1p-10 : 1e-4;
    info_.max_err = err;
    info_.validation = fmt::format("layer 0 {} [N={}, K={}], M={}: rows 0..{} vs quantized_matmul_ref, tol {:.2g}",
                                   l.name, l.n, l.k, m, rows - 1, tol);
    if (!(err <= tol))
      fail("bench", fmt::format("nvfp4 cpu replay: {} differs from the oracle: error {:.3g} > {:.3g} at row {} col {} "
                                "(y={}, ref={})",
                                info_.validation, err, tol, where / l.n, where % l.n, a[where], b[where]));
    info_.validated = true;
  }

  ReplayOptions o_;
  std::vector<Linear> ls_;
  ReplayVariant info_;
  static constexpr float kTensorScale = 1.0f / 4096;
  bool presplit_ = false;
  Buf canonical0_;  // layer 0's canonical bytes when packed_ holds pre-split ones
  std::vector<Buf> packed_, scales_, y_;
  std::map<std::pair<std::int64_t, std::int64_t>, Buf> x_;
};

// The dense engines' check of layer 0 before any timing: rows 0..1 of y against an fp64 dot of the
// same x and w values (accessors by flat index: x [M][K], w [N][K], y [M][N]); throws past tol.
template <class X, class W, class Y>
void validate_dense(const ReplayOptions& o, const Linear& l, X x, W w, Y y, double tol, ReplayVariant& info) {
  const std::int64_t m = linear_m(o, l);
  const std::int64_t rows = std::min<std::int64_t>(m, 2);
  std::vector<float> ref(static_cast<std::size_t>(rows * l.n)), got(ref.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t n = 0; n < l.n; ++n) {
      double acc = 0;
      for (std::int64_t k = 0; k < l.k; ++k) acc += static_cast<double>(x(r * l.k + k)) * w(n * l.k + k);
      ref[static_cast<std::size_t>(r * l.n + n)] = static_cast<float>(acc);
      got[static_cast<std::size_t>(r * l.n + n)] = y(r * l.n + n);
    }
  std::size_t where = 0;
  const double err = checked_err(got.data(), ref.data(), ref.size(), &where);
  info.max_err = err;
  info.validation = fmt::format("layer 0 {} [N={}, K={}], M={}: rows 0..{} vs fp64 dot of the {} values, tol {:.2g}", l.name,
                                l.n, l.k, m, rows - 1, info.variant == "dense_f32" ? "fp32" : "bf16", tol);
  if (!(err <= tol))
    fail("bench", fmt::format("dense cpu replay: {} fails: error {:.3g} at row {} col {}", info.validation, err, where / l.n,
                              where % l.n));
  info.validated = true;
}

// Random bf16 weights O(0.05) of linear l, W[N][K] row-major, into `w`.
void fill_dense_weights(const Linear& l, std::uint64_t seed, std::uint16_t* w) {
  const auto nk = static_cast<std::size_t>(l.n * l.k);
  fill_random_activations(w, DType::kBF16, nk, seed);
  for (std::size_t j = 0; j < nk; ++j) w[j] = f32_to_bf16(bf16_to_f32(w[j]) * 0.0625f);
}

// Dense bf16 baseline through oneDNN's matmul (Debian's OpenBLAS 0.3.21 declares cblas_sbgemm
// in its header but is built without BUILD_BFLOAT16: the symbol is missing, measured 2026-11-30).
// Weights are reordered once, at load, into the layout oneDNN picks (format_tag::any), as an
// inference engine prepacks; bf16 in, bf16 out, fp32 accumulation.
class CpuDenseReplay final : public ReplayEngine {
 public:
  CpuDenseReplay(const ReplayOptions& o, const std::vector<Linear>& ls) : o_(o), ls_(ls), eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
    info_.variant = "dense_bf16";
    info_.backend = "cpu";
    const auto v = dnnl_version();
    info_.kernel = fmt::format("oneDNN {}.{}.{} matmul bf16 (prepacked weights)", v->major, v->minor, v->patch);
    fill_traffic(o, ls, true, info_);
    using md = dnnl::memory::desc;
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    std::uint64_t seed = o.seed * 7919 + 17;
    for (std::size_t i = 0; i < ls.size(); ++i) {
      const auto& l = ls[i];
      const std::int64_t m = linear_m(o, l);
      const auto key = std::make_tuple(m, l.n, l.k);
      if (!pd_.count(key)) {
        // dense_cpu.h: where this CPU has no bf16 matmul, make_cpu_replay runs CpuDenseF32Replay.
        auto made = onednn_bf16_matmul_pd(eng_, m, l.n, l.k, dnnl::memory::data_type::bf16);
        if (!made)
          fail("bench", fmt::format("dense cpu replay: oneDNN cannot create a bf16 matmul {}x{}x{} on this CPU; "
                                    "run with --no-dense to skip the dense baseline",
                                    m, l.n, l.k));
        pd_.emplace(key, *made);
        prim_.emplace(key, dnnl::matmul(*made));
      }
      const auto& pd = pd_.at(key);
      // W[N, K] row-major is the (K, N) matrix in format "ba".
      Buf plain(static_cast<std::size_t>(l.n * l.k) * 2);
      auto* wp = reinterpret_cast<std::uint16_t*>(plain.data());
      fill_dense_weights(l, ++seed, wp);
      dnnl::memory plain_mem(md({l.k, l.n}, dt::bf16, tag::ba), eng_, plain.data());
      w_.emplace_back(pd.weights_desc(), eng_);
      dnnl::reorder(plain_mem, w_.back()).execute(strm_, plain_mem, w_.back());
      strm_.wait();
      auto xkey = std::make_pair(l.k, m);
      if (!x_.count(xkey)) {
        x_.emplace(xkey, Buf(static_cast<std::size_t>(m * l.k * 2)));
        fill_random_activations(x_.at(xkey).data(), DType::kBF16, static_cast<std::size_t>(m * l.k), ++seed);
      }
      y_.emplace_back(static_cast<std::size_t>(m * l.n * 2));
      xm_.emplace_back(pd.src_desc(), eng_, x_.at(xkey).data());
      ym_.emplace_back(pd.dst_desc(), eng_, y_.back().data());
      if (i == 0) validate(wp);
    }
  }

  void run(double* layers_us, double* rest_us) override {
    run_timed_parts(ls_, [this](std::size_t i) { matmul(i); }, [this] { strm_.wait(); }, layers_us, rest_us);
  }

  const ReplayVariant& info() const override { return info_; }

 private:
  void matmul(std::size_t i) {
    const auto& l = ls_[i];
    prim_.at(std::make_tuple(linear_m(o_, l), l.n, l.k))
        .execute(strm_, {{DNNL_ARG_SRC, xm_[i]}, {DNNL_ARG_WEIGHTS, w_[i]}, {DNNL_ARG_DST, ym_[i]}});
  }

  void validate(const std::uint16_t* w) {
    const auto& l = ls_[0];
    const std::int64_t m = linear_m(o_, l);
    auto* y = reinterpret_cast<std::uint16_t*>(y_[0].data());
    std::fill(y, y + m * l.n, static_cast<std::uint16_t>(0x7FC0));  // bf16 NaN
    matmul(0);
    strm_.wait();
    const auto* x = reinterpret_cast<const std::uint16_t*>(x_.at({l.k, m}).data());
    // One bf16 rounding of the output (2^-8 relative) plus order effects.
    validate_dense(
        o_, l, [&](std::int64_t i) { return bf16_to_f32(x[i]); }, [&](std::int64_t i) { return bf16_to_f32(w[i]); },
        [&](std::int64_t i) { return bf16_to_f32(y[i]); }, 0x1p-7, info_);
  }

  ReplayOptions o_;
  std::vector<Linear> ls_;
  ReplayVariant info_;
  dnnl::engine eng_;
  dnnl::stream strm_;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, dnnl::matmul::primitive_desc> pd_;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, dnnl::matmul> prim_;
  std::vector<dnnl::memory> w_, xm_, ym_;
  std::vector<Buf> y_;
  std::map<std::pair<std::int64_t, std::int64_t>, Buf> x_;
};

// Dense fp32 baseline through OpenBLAS cblas_sgemm, where oneDNN has no bf16 matmul on this CPU
// (dense_cpu.h: AVX2-only CPUs) or ReplayOptions::dense_f32 asks for it. fp32 weights (4 bytes
// each, what such a CPU's BLAS reads), activations and outputs; the weights hold the same bf16
// values the oneDNN baseline would use.
class CpuDenseF32Replay final : public ReplayEngine {
 public:
  CpuDenseF32Replay(const ReplayOptions& o, const std::vector<Linear>& ls) : o_(o), ls_(ls) {
    info_.variant = "dense_f32";
    info_.backend = "cpu";
    info_.kernel = fmt::format("{} cblas_sgemm fp32 ({})", openblas_get_config(),
                               o.dense_f32 ? "dense_f32 requested" : "no oneDNN bf16 matmul on this CPU");
    fill_traffic(o, ls, true, info_);
    openblas_set_num_threads(cpu::num_threads());
    std::uint64_t seed = o.seed * 7919 + 17;
    for (const auto& l : ls) {
      const std::int64_t m = linear_m(o, l);
      const auto nk = static_cast<std::size_t>(l.n * l.k);
      // The bf16 values are made in the upper half of the fp32 buffer and widened front to back
      // through a small copy (fp32 element j ends at byte 4j + 4 <= 2nk + 2j + 2, before any bf16
      // value not yet copied), so no second copy of a layer is allocated: the memory check counts
      // 4 bytes per weight.
      w_.emplace_back(nk * 4);
      std::uint8_t* wbytes = w_.back().data();
      fill_dense_weights(l, ++seed, reinterpret_cast<std::uint16_t*>(wbytes + nk * 2));
      std::uint16_t part[4096];
      float wide[4096];
      for (std::size_t j0 = 0; j0 < nk; j0 += 4096) {
        const std::size_t len = std::min<std::size_t>(4096, nk - j0);
        std::memcpy(part, wbytes + nk * 2 + j0 * 2, len * 2);
        for (std::size_t j = 0; j < len; ++j) wide[j] = bf16_to_f32(part[j]);
        std::memcpy(wbytes + j0 * 4, wide, len * 4);
      }
      const auto key = std::make_pair(l.k, m);
      if (!x_.count(key)) {
        const auto mk = static_cast<std::size_t>(m * l.k);
        x_.emplace(key, Buf(mk * 4));
        fill_random_activations(x_.at(key).data(), DType::kF32, mk, ++seed);
      }
      y_.emplace_back(static_cast<std::size_t>(m * l.n) * 4);
    }
    const auto& l = ls_[0];
    const std::int64_t m = linear_m(o, l);
    auto* y = reinterpret_cast<float*>(y_[0].data());
    std::fill(y, y + m * l.n, std::nanf(""));
    matmul(0);
    const auto* x = reinterpret_cast<const float*>(x_.at({l.k, m}).data());
    const auto* w = reinterpret_cast<const float*>(w_[0].data());
    // fp32 sums of K products: ~K * 2^-24 relative at worst, far under 1e-4 at these K.
    validate_dense(
        o_, l, [&](std::int64_t i) { return x[i]; }, [&](std::int64_t i) { return w[i]; }, [&](std::int64_t i) { return y[i]; },
        1e-4, info_);
  }

  void run(double* layers_us, double* rest_us) override {
    run_timed_parts(ls_, [this](std::size_t i) { matmul(i); }, [] {}, layers_us, rest_us);
  }

  const ReplayVariant& info() const override { return info_; }

 private:
  void matmul(std::size_t i) {
    const auto& l = ls_[i];
    const std::int64_t m = linear_m(o_, l);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(l.n),
                static_cast<blasint>(l.k), 1.0f, reinterpret_cast<const float*>(x_.at({l.k, m}).data()),
                static_cast<blasint>(l.k), reinterpret_cast<const float*>(w_[i].data()), static_cast<blasint>(l.k), 0.0f,
                reinterpret_cast<float*>(y_[i].data()), static_cast<blasint>(l.n));
  }

  ReplayOptions o_;
  std::vector<Linear> ls_;
  ReplayVariant info_;
  std::vector<Buf> w_, y_;
  std::map<std::pair<std::int64_t, std::int64_t>, Buf> x_;
};

}  // namespace

bool cpu_dense_f32(const ReplayOptions& o) { return o.dense_f32 || !onednn_bf16_matmul_available(); }

std::unique_ptr<ReplayEngine> make_cpu_replay(const ReplayOptions& o, const std::vector<Linear>& ls, bool dense) {
  if (dense && cpu_dense_f32(o)) return std::make_unique<CpuDenseF32Replay>(o, ls);
  if (dense) return std::make_unique<CpuDenseReplay>(o, ls);
  return std::make_unique<CpuNvfp4Replay>(o, ls);
}

}  // namespace nvfp4::bench
