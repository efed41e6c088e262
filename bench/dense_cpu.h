// bench/dense_cpu.h -- what the dense CPU baselines (the shape benchmark, bench_cpu.cpp, and the
// model replay, replay_cpu.cpp) share: oneDNN's bf16 matmul, where this CPU has one.
//
// oneDNN 2.x (Debian 12's libdnnl 2.7) creates a bf16 matmul only on CPUs with AVX-512 (bf16
// natively or emulated) or AMX. On AVX2-only CPUs (measured 2026-12-02 on an AMD EPYC family 23
// dev VM, and under qemu-aarch64 on 2026-12-01) it throws "could not create a primitive descriptor
// iterator"; Debian's OpenBLAS has no cblas_sbgemm symbol (bench/CMakeLists.txt). There the
// baselines run OpenBLAS fp32 cblas_sgemm instead and say so.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <optional>

namespace nvfp4::bench {

// The matmul bf16 [m x k] (row-major) x bf16 [k x n] (in the layout oneDNN picks, format_tag::any:
// the weights are prepacked once, as an engine loads them) -> `dst` [m x n] row-major, fp32
// accumulation; nullopt where oneDNN has no such matmul on this CPU.
std::optional<dnnl::matmul::primitive_desc> onednn_bf16_matmul_pd(const dnnl::engine& eng, std::int64_t m, std::int64_t n,
                                                                   std::int64_t k, dnnl::memory::data_type dst);

// Whether this CPU has it (probed once, at 1 x 256 x 256).
bool onednn_bf16_matmul_available();

}  // namespace nvfp4::bench
