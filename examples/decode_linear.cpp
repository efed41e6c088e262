// examples/decode_linear.cpp -- one linear layer of a decode step, the way an engine runs it,
// through the public API only (<nvfp4/...> headers; the CUDA runtime for the GPU part).
//
//   decode_linear [CHECKPOINT [PREFIX]]
//
// CHECKPOINT: a .safetensors file or a Hugging Face folder in the modelopt, compressed-tensors or
// MLX NVFP4 layout; PREFIX: one quantized linear in it (default: the first). Without arguments it
// quantizes a random 4096 x 4096 weight with modelopt's recipe, writes it as a modelopt
// checkpoint into a temporary folder and reads it back, so it runs anywhere.
//
// Then: one bf16 activation row x, y = x . dequant(W)^T on the CPU backend, checked against the
// oracle (the scalar reference); on a GPU, the same call on the checkpoint's layout and on the
// repacked layout a decode engine keeps, each checked against the CPU result and timed.
// Exit 0 when every result is within tolerance, 1 otherwise (it is also a test: example.*).
#include <nvfp4/checkpoint.h>
#include <nvfp4/cuda.h>
#include <nvfp4/error.h>
#include <nvfp4/nvfp4.h>

#if defined(NVFP4_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace {

using nvfp4::DType;
using nvfp4::Tensor;

// A modelopt checkpoint of one random linear, written and read back as a user's would be.
std::string write_demo_checkpoint(const std::string& folder) {
  Tensor w(DType::kBF16, {4096, 4096});
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (std::int64_t i = 0; i < w.numel(); ++i) w.set(i, normal(rng));
  nvfp4::QuantizeOptions opts;
  opts.name = "model.layers.0.mlp.down_proj.weight";
  nvfp4::WriterOptions wo;
  wo.layout = nvfp4::Layout::kModelopt;
  nvfp4::CheckpointWriter writer(folder + "/model.safetensors", wo);
  writer.add_quantized("model.layers.0.mlp.down_proj", nvfp4::quantize(w, opts));
  writer.commit();
  return folder + "/model.safetensors";
}

// Largest |a - b| over |b| + 1e-3 * max|b| (the bf16 outputs differ by at most an ulp or two).
double worst_difference(const Tensor& a, const Tensor& b) {
  double scale = 0, worst = 0;
  for (std::int64_t i = 0; i < b.numel(); ++i) scale = std::max(scale, double(std::fabs(b.get(i))));
  for (std::int64_t i = 0; i < b.numel(); ++i)
    worst = std::max(worst, std::fabs(double(a.get(i)) - b.get(i)) / (std::fabs(b.get(i)) + 1e-3 * scale));
  return worst;
}

#if defined(NVFP4_HAVE_CUDA)
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw nvfp4::Error(std::string(what) + ": " + cudaGetErrorString(e));
}

// The GPU part: upload once, repack once, then the per-token calls. Returns false on a mismatch.
bool run_gpu(const nvfp4::QuantizedWeight& q, const Tensor& x, const Tensor& y_cpu) {
  const std::int64_t n = q.n, k = q.k;
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::uint8_t *packed, *scales, *rpacked, *rscales;
  void *dx, *dy;
  check(cudaMalloc(&packed, q.packed.size()), "cudaMalloc");
  check(cudaMalloc(&scales, q.scales.size()), "cudaMalloc");
  check(cudaMalloc(&rpacked, q.packed.size()), "cudaMalloc");
  check(cudaMalloc(&rscales, q.scales.size()), "cudaMalloc");
  check(cudaMalloc(&dx, x.bytes.size()), "cudaMalloc");
  check(cudaMalloc(&dy, y_cpu.bytes.size()), "cudaMalloc");
  check(cudaMemcpy(packed, q.packed.data(), q.packed.size(), cudaMemcpyHostToDevice), "upload");
  check(cudaMemcpy(scales, q.scales.data(), q.scales.size(), cudaMemcpyHostToDevice), "upload");
  check(cudaMemcpy(dx, x.data(), x.bytes.size(), cudaMemcpyHostToDevice), "upload");

  const nvfp4::WeightView canonical{packed, scales, q.tensor_scale(), n, k};
  const nvfp4::MatrixView xv{dx, DType::kBF16, 1, k, k}, yv{dy, DType::kBF16, 1, n, n};
  bool ok = true;
  Tensor y(DType::kBF16, {1, n});
  auto time_calls = [&](auto&& call, const char* what) {
    call();  // first call: also validates and warms the kernel
    check(cudaMemcpyAsync(y.data(), dy, y.bytes.size(), cudaMemcpyDeviceToHost, stream), "download");
    check(cudaStreamSynchronize(stream), "sync");
    const double diff = worst_difference(y, y_cpu);
    cudaEvent_t t0, t1;
    check(cudaEventCreate(&t0), "event");
    check(cudaEventCreate(&t1), "event");
    const int calls = 200;
    check(cudaEventRecord(t0, stream), "event");
    for (int i = 0; i < calls; ++i) call();  // the weights stay in L2 here: a hot figure
    check(cudaEventRecord(t1, stream), "event");
    check(cudaEventSynchronize(t1), "event");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, t0, t1), "event");
    std::printf("GPU %-36s %7.2f us per call (hot, with launches), worst difference to the CPU %.2e\n", what,
                1000.0 * ms / calls, diff);
    ok = ok && diff < 1e-2;
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
  };
  time_calls([&] { nvfp4::cuda::quantized_matmul(xv, canonical, yv, stream); }, "checkpoint layout:");
  if (nvfp4::cuda::repack_for_gemv_sm90_supported(n, k)) {
    // Once, at load time: the layout the decode GEMV reads fastest (same byte count).
    nvfp4::cuda::repack_for_gemv_sm90(canonical, rpacked, rscales, stream);
    const nvfp4::cuda::RepackedWeightView repacked{rpacked, rscales, q.tensor_scale(), n, k};
    nvfp4::cuda::RepackedMatmulOptions opts;
    opts.weights_read_early = true;  // fixed weights: nothing running on the stream writes them
    check(cudaStreamSynchronize(stream), "sync");  // the repack is done before any early read
    time_calls([&] { nvfp4::cuda::quantized_matmul_repacked(xv, repacked, yv, stream, opts); },
               "repacked layout, weights read early:");
  }
  for (void* p : {static_cast<void*>(packed), static_cast<void*>(scales), static_cast<void*>(rpacked),
                  static_cast<void*>(rscales), dx, dy})
    cudaFree(p);
  cudaStreamDestroy(stream);
  return ok;
}
#endif

}  // namespace

int main(int argc, char** argv) try {
  std::string path = argc > 1 ? argv[1] : "";
  std::string tmp;
  if (path.empty()) {
    tmp = (std::filesystem::temp_directory_path() / ("nvfp4-example-" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(tmp);
    path = write_demo_checkpoint(tmp);
  }
  const nvfp4::Checkpoint ckpt(path);
  if (ckpt.quantized_prefixes().empty()) throw nvfp4::Error(path + " holds no NVFP4 linear");
  const std::string prefix = argc > 2 ? argv[2] : ckpt.quantized_prefixes().front();
  const nvfp4::QuantizedWeight q = ckpt.quantized(prefix);
  if (!tmp.empty()) std::filesystem::remove_all(tmp);
  std::printf("%s: %s layout, linear %s: N %lld x K %lld, tensor scale %g\n", path.c_str(),
              nvfp4::layout_name(ckpt.layout()), prefix.c_str(), static_cast<long long>(q.n),
              static_cast<long long>(q.k), q.tensor_scale());

  Tensor x(DType::kBF16, {1, q.k});
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, normal(rng));

  const auto t0 = std::chrono::steady_clock::now();
  const Tensor y = nvfp4::quantized_matmul(x, q);  // the CPU backend (SIMD, all cores)
  const auto t1 = std::chrono::steady_clock::now();
  const Tensor y_ref = nvfp4::quantized_matmul(x, q, nvfp4::Backend::kReference);
  const double diff = worst_difference(y, y_ref);
  std::printf("CPU backend: %.1f us (first call), worst difference to the oracle %.2e\n",
              std::chrono::duration<double, std::micro>(t1 - t0).count(), diff);
  bool ok = diff < 1e-2;

  if (nvfp4::cuda::available()) {
#if defined(NVFP4_HAVE_CUDA)
    ok = run_gpu(q, x, y) && ok;
#endif
  } else {
    std::printf("GPU: not run (%s)\n", nvfp4::cuda::unavailable_reason().c_str());
  }
  std::printf("%s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "decode_linear: %s\n", e.what());
  return 1;
}
