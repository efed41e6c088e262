// nvfp4/cuda.h -- the GPU entry points on device pointers. No CUDA headers: the stream is
// passed as void* (a cudaStream_t); nullptr is the legacy default stream.
//
// Built without CUDA (or with no device present) available() is false and every call throws
// nvfp4::Error saying so.
//
// Threads and GPUs: calls may come from several host threads at once, each on its own stream, and
// on every GPU of the process; each call works on the current device (cudaSetDevice) and refuses
// memory of another GPU. A call gives the same bits whatever runs beside it
// (tests/cuda/test_threads_devices_cuda.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "nvfp4/tensor.h"

namespace nvfp4::cuda {

bool compiled();   // this build contains the CUDA kernels
// compiled() and the current device is a GPU of compute capability 8.0 or newer. Tuned and
// measured on Hopper (H200); Ampere / Ada (sm_80 / 86 / 89) run the same GEMV and repacked-GEMM
// kernels from sm_80 code, newer GPUs from compute_80 PTX that the driver compiles on first use.
bool available();
// Empty when available(); else why not, in one sentence (no device, a GPU older than sm_80, or a
// build without code for this GPU).
std::string unavailable_reason();
// available() on an sm_90 GPU with this build's sm_90a code: the wgmma GEMM (17..2048 rows) and
// the overlapped (PDL) launches. Elsewhere those rows take the dense panel + cuBLAS and every
// launch is a plain one; the results are the same functions within the documented tolerances.
bool hopper_paths();

// Scratch memory (fp16/fp32 activation pieces, prefill panels, K-split partials, cuBLAS's
// workspace) comes from a stream-ordered pool per device that keeps what it has held: giving it
// back after each call made the next one map it again (a synced fp16 GEMV call took ~120 us
// instead of ~48, docs/perf-cuda.md 10.1). scratch_bytes() is what the current device's pool holds
// (after a large prefill ~288 MB: a 256 MB dense panel and cuBLAS's 32 MB); release_scratch()
// returns its unused part to the driver, as torch.cuda.empty_cache() does (calls still in flight
// keep theirs). Calls captured in a CUDA graph allocate in the graph instead. Without CUDA or a
// device: 0, and nothing to do.
// The pool and the dense panel's cuBLAS handle are created per device on first use (inside a
// stream capture too) and live until the process ends. cudaDeviceReset destroys them under
// nvfp4: do not reset a device that nvfp4 has used and then call it again in the same process.
std::size_t scratch_bytes();
void release_scratch();

// y = x . dequant(w)^T on device pointers, asynchronous on `stream`. Validates the arguments
// (throws nvfp4::Error) and checks launch errors. On Hopper: up to 16 rows the GEMV; 17..1024
// bf16/fp16 rows the wgmma GEMM that decodes the weights in registers, and 1025..2048 rows where
// its grid fills the GPU (N >= 4096, >= 90% of its last wave); other rows, or fp32 rows, a dense
// bf16/fp16/fp32 panel + cuBLAS (docs/perf-cuda.md 22, 26, 29, 55, 57). Before Hopper (no wgmma):
// the GEMV up to 16 rows, the panel + cuBLAS above.
void quantized_matmul(const MatrixView& x, const WeightView& w, const MatrixView& y,
                      void* stream = nullptr);

// ---- Repacked weights for the Hopper GEMV (explicit, tested; the canonical path stays) ----
// A kernel-private layout of the same bytes (N*K/2 packed + N*K/16 scales) in which each
// lane's 16-byte load is its mma A fragments for 4 k16 steps and the block scales decode with
// one IMAD (layout: src/kernels/cuda/repack_nvfp4_sm90.h; measurements: docs/perf-cuda.md 7).
// Needs N % 16 == 0 and K % 128 == 0 (repack_for_gemv_sm90_supported); bad shapes throw.
//
// Where the repack puts the E2M1 codes inside each word, chosen for the engine's activations:
// bf16 (the default) serves bf16, fp16 and fp32 rows; fp16 serves fp16 rows only (other rows
// throw) and decodes them in 9 integer ops per 8 weights instead of 16 (bf16 rows on bf16 codes:
// 8; docs/perf-cuda.md 49, 52). The byte count is the same.
enum class RepackedCodes : std::uint8_t { bf16 = 0, fp16 = 1 };

struct RepackedWeightView {
  const std::uint8_t* packed = nullptr;  // N*K/2 bytes, gemv_sm90 layout
  const std::uint8_t* scales = nullptr;  // N*K/16 bytes, gemv_sm90 layout
  float tensor_scale = 1.0f;             // unchanged (dequant direction)
  std::int64_t n = 0;
  std::int64_t k = 0;
  RepackedCodes codes = RepackedCodes::bf16;  // as passed to the repack that wrote packed
};

bool repack_for_gemv_sm90_supported(std::int64_t n, std::int64_t k);

// Device repack (asynchronous on `stream`): canonical device weight -> the gemv_sm90 layout.
// Outputs must not alias the input. Plain C++ reference (host pointers) below; both agree byte
// for byte (tests/cuda/test_repack_cuda.cpp). The reference is available in every build.
void repack_for_gemv_sm90(const WeightView& canonical_dev, std::uint8_t* packed_out_dev,
                          std::uint8_t* scales_out_dev, void* stream = nullptr,
                          RepackedCodes codes = RepackedCodes::bf16);
void repack_for_gemv_sm90_ref(const WeightView& canonical_host, std::uint8_t* packed_out,
                              std::uint8_t* scales_out, RepackedCodes codes = RepackedCodes::bf16);

struct RepackedMatmulOptions {
  // Overlapped launch (Hopper programmatic dependent launch, PTX griddepcontrol): the GEMV's
  // blocks may be scheduled while the previous kernel on `stream` finishes; each waits until
  // that kernel has completed and its writes are visible before it reads anything, so the
  // result is the plain launch's whatever the previous kernel wrote (weights included). It
  // hides the launch gap between back-to-back kernels: a Llama-3-8B decode token took 3.6-9.3%
  // less time on H200 (two machines, docs/perf-cuda.md 14). Applied per shape where the tuning
  // table measured it no slower (its "overlap" flag: a many-block grid such as 28672 x 4096 was
  // 7-11% slower); elsewhere, with false, and on GPUs before Hopper, the call launches plainly.
  bool overlapped_launch = true;
  // With the overlapped launch, up to 16 bf16 or fp16 rows (5 fp32) per launch: each warp loads
  // its first two chunk pairs of weights *before* waiting for the previous kernel, so a GEMV whose
  // blocks are resident early streams its weights while that kernel finishes. Honoured where the
  // tuning table has an entry tuned for it (on H200, commit 06c9cf0: 4096 x 14336 9.90 -> 9.12 us,
  // 4096 x 512 2.34 -> 1.75 us, Llama-3-8B decode -7.1%, batched decode of 2-8 sequences ~-5%;
  // not at 16384^2; docs/perf-cuda.md 18-19; 9..16 rows at the small shapes only, batched decode
  // of 12 / 16 sequences -1.8% / -0.9%, §33). Only for
  // weights that no kernel still running on `stream` writes (a model's fixed weights); never
  // right after a repack into the same buffer. Activations are still read, and the output
  // written, only after the wait. Off by default because the API cannot check that promise.
  bool weights_read_early = false;
};

// y = x . dequant(w)^T on repacked device weights, any M. Activations bf16, fp16 or fp32
// (x.cols may be < K only through padding: x.cols in (K-16, K]); output in the activation dtype.
// bf16 and fp16 rows read directly count one row each (fp16: the fp16 mma; weights repacked with
// RepackedCodes::fp16 take fp16 rows only, anything else throws); fp32 rows are split
// exactly into 3 bf16 pieces in a stream-ordered workspace first (3 rows each). Up to 24 such
// rows: the GEMV, in launches of 16. More: the repacked GEMM, which reads the weights once per
// 32 or 64 rows (needs 16-byte aligned scales; otherwise the GEMV runs on). Same tolerance as quantized_matmul;
// one-hot rows recover dequantize_ref exactly. Measured on an H200 (docs/perf-cuda.md 21, 26,
// 28): the repacked GEMM is the faster choice up to ~48 bf16 rows; above that quantized_matmul
// on the canonical weights (the wgmma GEMM) is, so an engine keeps both layouts' calls: the
// Llama-3-8B replay (`nvfp4 bench --batch B`) switches at 49 rows.
// Memory: the repacked copy has the canonical byte count (N K / 2 + N K / 16), so keeping both
// layouts doubles the weight bytes. Either layout alone serves every M: the repacked one from 49
// rows through the repacked GEMM, slower than the wgmma GEMM there (128 x 4096^2: 25.5 against
// 19.6 us at 28ef57b, docs/perf-cuda.md 22); the canonical one at M <= 16 through the canonical
// GEMV (Llama-3-8B decode 2.82 against 1.44 ms per token at b58738c,
// bench/results/compare-2026-12-01-h200-repack-b58738c.json). A wgmma GEMM on the repacked layout
// (activations permuted per 64-k chunk) measured +1.3% / +9.7% per Llama-3-8B step at B = 64 / 128
// against the canonical one (docs/perf-cuda.md 39.2; not merged, the patch is in bench/results).
void quantized_matmul_repacked(const MatrixView& x, const RepackedWeightView& w, const MatrixView& y,
                               void* stream = nullptr, const RepackedMatmulOptions& options = {});

}  // namespace nvfp4::cuda
