// The CUDA entry points of a build without CUDA: report that, never crash.
#include "kernels/cuda/cuda_host.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"
namespace nvfp4::cuda {
bool compiled() { return false; }
bool available() { return false; }
bool hopper_paths() { return false; }
std::string unavailable_reason() { return "this build of nvfp4 has no CUDA backend (configure with nvcc on PATH)"; }
std::size_t scratch_bytes() { return 0; }
void release_scratch() {}
void quantized_matmul(const MatrixView&, const WeightView&, const MatrixView&, void*) {
  fail("cuda::quantized_matmul", "this build of nvfp4 has no CUDA backend (configure with nvcc on PATH)");
}
void quantized_matmul_host(const MatrixView&, const WeightView&, const MatrixView&, const GemvTile*) {
  fail("quantized_matmul", "backend=cuda requested but this build of nvfp4 has no CUDA backend");
}
void repack_for_gemv_sm90(const WeightView&, std::uint8_t*, std::uint8_t*, void*, RepackedCodes) {
  fail("cuda::repack_for_gemv_sm90", "this build of nvfp4 has no CUDA backend (the host reference repack_for_gemv_sm90_ref works)");
}
void quantized_matmul_repacked(const MatrixView&, const RepackedWeightView&, const MatrixView&, void*,
                               const RepackedMatmulOptions&) {
  fail("cuda::quantized_matmul_repacked", "this build of nvfp4 has no CUDA backend");
}
}  // namespace nvfp4::cuda

// The autotuner needs the CUDA backend too.
#include "kernels/cuda/tuning_sm90.h"
namespace nvfp4::cuda {
std::vector<GemvTableEntry> gemv_autotune(const TuneOptions&) {
  fail("tune", "this build of nvfp4 has no CUDA backend: nothing to tune");
}
}  // namespace nvfp4::cuda
