// bench/replay.h -- model replay: every linear layer of one token (decode) or one prompt
// (prefill) in order, each layer with its own weights, back to back.
//
// Why: a per-matmul microbenchmark that reuses one weight matrix and syncs after every call
// measures the cache and the launch/sync overhead, not what inference runs (seed 003: a +2.5%
// end-to-end change was invisible to it). Replay runs the same sequence of shapes a real model
// runs, with the whole model's weights resident, so every layer reads its weights from memory
// exactly as decode does, and nothing separates the calls but what separates them in inference
// (on the GPU: all layers captured in one CUDA graph).
//
// Per replay the time is split in two parts: the transformer layers and the rest (lm_head and,
// for A/B tests, the "extra_work" linear). With --layers N < L the layer part is scaled by L/N
// to estimate a full token ("scaled" in the report, always marked as such).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/model.h"
#include "nvfp4/dtype.h"

namespace nvfp4::bench {

enum class ReplayMode { kDecode, kPrefill };
const char* replay_mode_name(ReplayMode m);

struct ReplayOptions {
  ModelSpec model;
  ReplayMode mode = ReplayMode::kDecode;
  std::int64_t prompt = 128;       // prefill: tokens in the prompt (M of every layer but lm_head)
  // decode: sequences decoded together, one token each (M of every layer, lm_head included):
  // batched decode, where an engine serves several requests per step.
  std::int64_t batch = 1;
  LinearPlan plan;                 // layers, lm_head, fuse, extra_work (layers = 0 means all)
  // Shape workloads (`--shape` on compare): when non-empty these linears replace the model's
  // (each with its own M), and nothing is scaled.
  std::vector<Linear> custom_linears;
  DType dtype = DType::kBF16;      // activations/outputs of the NVFP4 layers
  std::string backend = "cpu";     // "cpu" or "cuda"
  bool nvfp4 = true;               // run the NVFP4 replay
  // Decode runs on weights repacked once at load for the decode GEMV (CUDA:
  // nvfp4::cuda::repack_for_gemv_sm90; CPU with AVX512-BF16+VBMI: nvfp4::cpu::repack_for_gemv_cpu),
  // what an engine would do; true keeps the canonical checkpoint layout (the A/B of the repack:
  // `compare --a "self --canonical" --b self`).
  bool canonical_layout = false;
  // CUDA decode on repacked weights: launch the GEMVs plainly instead of overlapped
  // (RepackedMatmulOptions::overlapped_launch, the API's default; the A/B:
  // `compare --a "self --plain-launch" --b self`).
  bool plain_launch = false;
  // CUDA decode: repacked GEMVs read their weights before the PDL wait where the table says so
  // (RepackedMatmulOptions::weights_read_early; the CLI's default, `--no-early-weights` turns it off).
  bool early_weights = false;
  // CUDA decode with fp16 activations: the repack places the codes for fp16 rows
  // (RepackedCodes::fp16), as an fp16 engine would; true keeps bf16 codes (the A/B:
  // `compare --a "self --bf16-codes" --b self`).
  bool bf16_codes = false;
  bool dense = true;               // run the dense baseline replay (oneDNN bf16 / cuBLAS bf16)
  // CPU: the dense baseline in fp32 through OpenBLAS cblas_sgemm ("dense_f32") even where oneDNN
  // has a bf16 matmul; without one (AVX2-only CPUs, bench/dense_cpu.h) it always is.
  bool dense_f32 = false;
  int warmup = 1;                  // untimed replays first
  int min_samples = 5;             // timed replays (each one token / one prompt)
  int max_samples = 1000;
  double seconds = 2.0;            // keep sampling until this much time (and min_samples) is spent
  std::uint64_t seed = 1;
  bool progress = false;           // progress line on a terminal
};

// What one variant (nvfp4 or dense) of a replay measured.
struct ReplayVariant {
  std::string variant;   // "nvfp4", "dense_bf16" or (CPU without a oneDNN bf16 matmul) "dense_f32"
  std::string backend;   // "cpu" / "cuda"
  std::string kernel;    // "nvfp4::quantized_matmul(kCpu)", "openblas cblas_sbgemm", "cublasGemmEx bf16", ...
  double weight_bytes = 0;   // resident weights of the replayed linears
  double bytes = 0;          // bytes one replay moves at least: weights + activations + outputs
  double flops = 0;          // 2*M*N*K summed
  std::vector<double> samples_us;  // one entry per timed replay
  std::vector<double> layers_us, rest_us;  // the two parts of each sample
  double us_median = 0, us_p10 = 0, us_p90 = 0;
  double tokens_per_s = 0;       // tokens of this replay (1 or P) / median time, layers as replayed
  double full_us = 0;            // median layers part * L/N + median rest part
  double full_tokens_per_s = 0;  // tokens / full_us: the whole model's linear part
  double gbps = 0, gflops = 0;   // bytes / median, flops / median
  double pct_ceiling = 0;        // gbps / ceiling_gbps * 100
  double peak_mem_bytes = 0;     // CPU: peak RSS after this variant; GPU: device memory in use
  bool validated = false;
  double max_err = 0;            // worst |y - y_ref| / (|y_ref| + rms(y_ref)) on the checked rows
  std::string validation;        // what was checked
};

struct ReplayResult {
  ReplayOptions options;
  std::vector<Linear> linears;
  std::int64_t tokens = 1;       // batch B (decode) or P (prefill)
  bool scaled = false;           // layers replayed < model layers
  double ceiling_gbps = 0;       // measured in this run
  std::string ceiling_source;
  bool cold = true;              // total weights > 3x last-level cache (CPU) / L2 (GPU)
  std::vector<ReplayVariant> variants;
};

// One variant's resident replay: weights allocated, filled and validated at construction.
class ReplayEngine {
 public:
  virtual ~ReplayEngine() = default;
  // One replay; the two parts' times in microseconds.
  virtual void run(double* layers_us, double* rest_us) = 0;
  // The variant description (no samples); weight_bytes, bytes, flops, validation filled.
  virtual const ReplayVariant& info() const = 0;
};

// Memory the replay of one variant needs (weights + activations + outputs), in bytes.
double replay_bytes_needed(const ReplayOptions& o, const std::vector<Linear>& ls, bool dense);
// Throws nvfp4::Error before anything is allocated when a requested variant does not fit in
// `available` bytes, naming the model, the layers, the need and the largest --layers that fits.
void check_replay_fits(const ReplayOptions& o, const std::vector<Linear>& ls, double available,
                       const std::string& where);

// The linears a replay runs: custom_linears, or the model's per plan (plan.layers 0 -> all).
std::vector<Linear> replay_linears(const ReplayOptions& o);
// Shape workload: each shape repeated with its own weights until the copies of that shape hold
// more than min_bytes of NVFP4 weights (cold caches by rotation), in the order given.
std::vector<Linear> shape_linears(const std::vector<std::int64_t>& mnk_triples, double min_bytes);

// The M of each linear: the batch B in decode (1 by default); P in prefill except lm_head (logits
// of the last token only).
std::int64_t linear_m(const ReplayOptions& o, const Linear& l);
void fill_traffic(const ReplayOptions& o, const std::vector<Linear>& ls, bool dense, ReplayVariant& v);

// CPU: whether the dense baseline runs in fp32 (ReplayOptions::dense_f32, or no oneDNN bf16 matmul here).
bool cpu_dense_f32(const ReplayOptions& o);
std::unique_ptr<ReplayEngine> make_cpu_replay(const ReplayOptions& o, const std::vector<Linear>& ls, bool dense);
std::unique_ptr<ReplayEngine> make_cuda_replay(const ReplayOptions& o, const std::vector<Linear>& ls, bool dense);
double cuda_read_bandwidth_gbps();  // measured device read ceiling (throws without CUDA)
double cuda_mem_free_bytes();       // cudaMemGetInfo free (throws without CUDA)
double cuda_l2_bytes();

// Sample an engine per the options (warmup, min_samples, seconds); fills the statistics.
void sample_engine(ReplayEngine& e, const ReplayOptions& o, const ReplayResult& r, ReplayVariant& v,
                   const std::string& label);

// The option checks every entry point runs first (run_replay, serve_replay): prompt, batch in
// [1, 4096] (a negative batch reached the engines and crashed a compare child), backend.
void check_replay_options(const ReplayOptions& o);

// Full replay: fits check, ceiling, nvfp4 then dense (sequentially: only one set of weights is
// resident at a time), each validated then timed.
ReplayResult run_replay(ReplayOptions o);

// 16-byte aligned random bytes / bf16 with a seed (splitmix64), used by the CPU engines and tests.
void fill_random_bytes(std::uint8_t* p, std::size_t n, std::uint64_t seed);
// Valid E4M3 block scales in the range a real quantizer produces (8 .. 448, never NaN 0x7F).
void fill_random_scales(std::uint8_t* p, std::size_t n, std::uint64_t seed);
void fill_random_activations(void* p, DType t, std::size_t n, std::uint64_t seed);

}  // namespace nvfp4::bench
