// tests/cuda/test_threads_devices_cuda.cpp -- the CUDA API as engines call it: from several host
// threads at once, each on its own stream, captured into CUDA graphs by several threads at once,
// and on every GPU of the process. Every kernel family must give, call for call, the bits that the
// same call gives alone on one thread and GPU 0:
//   * the canonical GEMV at M = 1 with a 16-warp tile (82 KB of dynamic shared memory: the
//     attribute that allows it belongs to each device);
//   * the wgmma GEMM (bf16, M = 100);
//   * the dense panel + cuBLAS (fp32 rows, M = 40: cuBLAS's stream and workspace are handle state);
//   * the repacked GEMV (M = 4) and the repacked GEMM (M = 40).
// Without a GPU every test skips with "no CUDA device: ..."; the device test also skips, saying
// so, with fewer than two usable GPUs.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nvfp4/cuda.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

#if defined(NVFP4_HAVE_CUDA)
#include <cuda_runtime.h>

#include "cuda/cuda_test_util.h"
#include "kernels/cuda/matmul_cuda.h"
#endif

namespace nvfp4 {
namespace {

#if !defined(NVFP4_HAVE_CUDA)
TEST(CudaThreads, Backend) {
  GTEST_SKIP() << "this build has no CUDA backend (nvcc not found at configure time): CUDA tests not compiled";
}
#else
using namespace cudatest;  // NOLINT: the shared helpers (cuda_test_util.h)

constexpr std::int64_t kN = 1040, kK = 4096;  // N: a partial row block for every tile

// One call of the workload: which path, its rows and dtype.
struct Call {
  const char* name;
  DType dt;
  std::int64_t m;
  bool repacked;
  bool wide_tile;  // canonical GEMV with the explicit 16-warp tile
};
const Call kCalls[] = {
    {"canonical GEMV M=1, 16-warp tile", DType::kBF16, 1, false, true},
    {"wgmma GEMM bf16 M=100 (before Hopper: the panel)", DType::kBF16, 100, false, false},
    {"panel + cuBLAS fp32 M=40", DType::kF32, 40, false, false},
    {"repacked GEMV bf16 M=4", DType::kBF16, 4, true, false},
    {"repacked GEMM bf16 M=40", DType::kBF16, 40, true, false},
};
constexpr int kNumCalls = sizeof(kCalls) / sizeof(kCalls[0]);

// Device buffers of one workload (one weight, every call's activations and `slots` outputs per
// call) on the device that was current when it was built.
struct Workload {
  int device = 0;
  cudaStream_t stream = nullptr;
  std::unique_ptr<DeviceCopy> packed, scales;
  void *rp_packed = nullptr, *rp_scales = nullptr;
  float ts = 1.0f;
  std::vector<std::unique_ptr<DeviceCopy>> x;  // per call
  std::vector<std::vector<void*>> y;      // per call, per slot
  std::vector<std::size_t> y_bytes;       // per call

  Workload(const QuantizedWeight& qw, std::uint64_t seed, int slots) {
    EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    ts = qw.tensor_scale();
    packed = std::make_unique<DeviceCopy>(qw.packed.data(), qw.packed.size());
    scales = std::make_unique<DeviceCopy>(qw.scales.data(), qw.scales.size());
    EXPECT_EQ(cudaMalloc(&rp_packed, qw.packed.size()), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&rp_scales, qw.scales.size()), cudaSuccess);
    cuda::repack_for_gemv_sm90(canonical(), static_cast<std::uint8_t*>(rp_packed),
                               static_cast<std::uint8_t*>(rp_scales), stream);
    for (int c = 0; c < kNumCalls; ++c) {
      const Tensor xh = random_x(kCalls[c].dt, kCalls[c].m, kK, seed + 100 + c);
      x.push_back(std::make_unique<DeviceCopy>(xh.data(), xh.bytes.size()));
      y_bytes.push_back(static_cast<std::size_t>(kCalls[c].m * kN * dtype_size(kCalls[c].dt)));
      y.emplace_back();
      for (int s = 0; s < slots; ++s) {
        void* d = nullptr;
        EXPECT_EQ(cudaMalloc(&d, y_bytes[c]), cudaSuccess);
        // NaN in every dtype: an output not written shows. On the workload's stream, which does
        // not wait for the legacy default stream that a plain cudaMemset may still be running on.
        EXPECT_EQ(cudaMemsetAsync(d, 0xFF, y_bytes[c], stream), cudaSuccess);
        y[c].push_back(d);
      }
    }
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;
  ~Workload() {  // the DeviceCopy members are freed after this body, on the same device
    cudaSetDevice(device);
    cudaStreamSynchronize(stream);
    for (void* p : {rp_packed, rp_scales}) cudaFree(p);
    for (auto& v : y)
      for (void* p : v) cudaFree(p);
    cudaStreamDestroy(stream);
  }

  WeightView canonical() const {
    return {static_cast<const std::uint8_t*>(packed->p), static_cast<const std::uint8_t*>(scales->p), ts, kN, kK};
  }
  // Enqueues call c into output slot s on the workload's stream.
  void run(int c, int s) const {
    const Call& call = kCalls[c];
    const MatrixView xv{x[c]->p, call.dt, call.m, kK, kK}, yv{y[c][s], call.dt, call.m, kN, kN};
    if (call.repacked) {
      const cuda::RepackedWeightView rw{static_cast<const std::uint8_t*>(rp_packed),
                                        static_cast<const std::uint8_t*>(rp_scales), ts, kN, kK};
      cuda::quantized_matmul_repacked(xv, rw, yv, stream);
    } else if (call.wide_tile) {
      const cuda::GemvTile tile{16, 16, 16};
      cuda::quantized_matmul_tile(xv, canonical(), yv, stream, &tile);
    } else {
      cuda::quantized_matmul(xv, canonical(), yv, stream);
    }
  }
  std::vector<std::uint8_t> bits(int c, int s) const {
    std::vector<std::uint8_t> h(y_bytes[c]);
    cudaMemcpy(h.data(), y[c][s], h.size(), cudaMemcpyDeviceToHost);
    return h;
  }
};

void expect_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Reports the first differing element of a slot against the expected bits.
void expect_same_bits(const std::vector<std::uint8_t>& want, const std::vector<std::uint8_t>& got,
                      const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  if (std::memcmp(want.data(), got.data(), want.size()) == 0) return;
  std::size_t i = 0;
  while (want[i] == got[i]) ++i;
  ADD_FAILURE() << what << ": bits differ from the call alone, first at byte " << i << " of " << want.size();
}

// Each of 4 host threads owns a workload (its own weight, activations and stream) and enqueues
// every call 12 times into 12 output slots, without waiting in between, while the others do the
// same; then all 4 capture their calls into CUDA graphs at once (global capture mode) and launch
// them. Threads alternate over the GPUs present. Every slot must hold the bits that the same call
// gave when it ran alone. Seeds 4242 + thread.
TEST(CudaThreads, ConcurrentCallsOnTheirOwnStreamsGiveTheBitsOfOneCallAlone) {
  REQUIRE_GPU();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  constexpr int kThreads = 4, kRounds = 12;
  std::vector<std::unique_ptr<Workload>> loads;
  std::vector<std::vector<std::vector<std::uint8_t>>> want(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(cudaSetDevice(t % devices), cudaSuccess);
    if (!cuda::available()) {  // a GPU without sm_90: stay on 0
      ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    }
    const std::uint64_t seed = 4242 + t;
    loads.push_back(std::make_unique<Workload>(random_weight(kN, kK, seed), seed, kRounds + 1));
    // Alone: one call at a time, synchronised.
    for (int c = 0; c < kNumCalls; ++c) {
      loads[t]->run(c, 0);
      ASSERT_EQ(cudaStreamSynchronize(loads[t]->stream), cudaSuccess);
      want[t].push_back(loads[t]->bits(c, 0));
    }
  }
  std::vector<std::string> errors(kThreads);
  // A reusable barrier of the kThreads threads (C++17 has no std::barrier). Every thread reaches
  // both of its calls, whatever happened before them.
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0, generation = 0;
  auto arrive_and_wait = [&] {
    std::unique_lock<std::mutex> lock(mu);
    const int gen = generation;
    if (++arrived == kThreads) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != gen; });
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      bool synced = false;  // the barrier calls below must happen in every thread
      try {
        expect_cuda(cudaSetDevice(loads[t]->device), "cudaSetDevice");
        for (int r = 0; r < kRounds; ++r)
          for (int c = 0; c < kNumCalls; ++c) loads[t]->run(c, r);
        expect_cuda(cudaStreamSynchronize(loads[t]->stream), "cudaStreamSynchronize");
        synced = true;
        // Then every thread captures its calls into a CUDA graph at the same time, in the global
        // capture mode (PyTorch's default): a call that made an API call unsafe during capture,
        // in any thread, would end the captures with an error. The graph writes the last slot.
        // Instantiating is itself unsafe while another thread captures globally, so every thread
        // ends its capture before any instantiates (a capture that failed still arrives).
        cudaGraph_t g = nullptr;
        cudaGraphExec_t ge = nullptr;
        std::string capture_error;
        arrive_and_wait();
        try {
          expect_cuda(cudaStreamBeginCapture(loads[t]->stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
          for (int c = 0; c < kNumCalls; ++c) loads[t]->run(c, kRounds);
        } catch (const std::exception& e) {
          capture_error = e.what();
        }
        const cudaError_t end = cudaStreamEndCapture(loads[t]->stream, &g);
        arrive_and_wait();
        if (!capture_error.empty()) throw std::runtime_error("during capture: " + capture_error);
        expect_cuda(end, "cudaStreamEndCapture");
        expect_cuda(cudaGraphInstantiate(&ge, g, 0), "cudaGraphInstantiate");
        expect_cuda(cudaGraphLaunch(ge, loads[t]->stream), "cudaGraphLaunch");
        expect_cuda(cudaStreamSynchronize(loads[t]->stream), "cudaStreamSynchronize (graph)");
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
      } catch (const std::exception& e) {
        errors[t] = e.what();
        if (!synced) {  // still owe both barrier arrivals
          arrive_and_wait();
          arrive_and_wait();
        }
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  for (int t = 0; t < kThreads; ++t) {
    if (!errors[t].empty()) continue;
    ASSERT_EQ(cudaSetDevice(loads[t]->device), cudaSuccess);
    for (int c = 0; c < kNumCalls; ++c)
      for (int r = 0; r <= kRounds; ++r)
        expect_same_bits(want[t][c], loads[t]->bits(c, r),
                         "seed " + std::to_string(4242 + t) + " (device " + std::to_string(loads[t]->device) + "), " +
                             kCalls[c].name + (r < kRounds ? ", round " + std::to_string(r) : std::string(", graph")));
  }
  // One result per workload against the oracle, so that "the same bits" means right bits.
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(cudaSetDevice(loads[t]->device), cudaSuccess);
    const QuantizedWeight qw = random_weight(kN, kK, 4242 + t);
    for (int c = 0; c < kNumCalls; ++c) {
      const Tensor xh = random_x(kCalls[c].dt, kCalls[c].m, kK, 4242 + t + 100 + c);
      Tensor yh(kCalls[c].dt, {kCalls[c].m, kN});
      std::memcpy(yh.data(), want[t][c].data(), want[t][c].size());
      check_against_oracle(MatrixView{const_cast<void*>(xh.data()), kCalls[c].dt, kCalls[c].m, kK, kK}, qw,
                           MatrixView{yh.data(), kCalls[c].dt, kCalls[c].m, kN, kN},
                           std::string(kCalls[c].name) + ", seed " + std::to_string(4242 + t));
    }
  }
  loads.clear();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

// Every usable GPU of the process runs every call and gives GPU 0's bits (same weight, same
// activations, seed 777). Memory of another GPU is refused with an error naming both devices.
TEST(CudaDevices, EveryGpuGivesTheBitsOfGpuZero) {
  REQUIRE_GPU();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  std::vector<int> usable;
  for (int d = 0; d < devices; ++d) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    if (cuda::available()) usable.push_back(d);
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  if (usable.size() < 2)
    GTEST_SKIP() << "needs two GPUs of compute capability 8.0 or newer; this machine has " << usable.size();
  const QuantizedWeight qw = random_weight(kN, kK, 777);
  std::vector<std::unique_ptr<Workload>> loads;
  for (const int d : usable) {
    ASSERT_EQ(cudaSetDevice(d), cudaSuccess);
    loads.push_back(std::make_unique<Workload>(qw, 777, 1));
    for (int c = 0; c < kNumCalls; ++c) {
      SCOPED_TRACE(std::string(kCalls[c].name) + " on device " + std::to_string(d));
      ASSERT_NO_THROW(loads.back()->run(c, 0));
    }
    ASSERT_EQ(cudaStreamSynchronize(loads.back()->stream), cudaSuccess);
  }
  for (std::size_t i = 1; i < loads.size(); ++i)
    for (int c = 0; c < kNumCalls; ++c) {
      ASSERT_EQ(cudaSetDevice(loads[i]->device), cudaSuccess);
      const std::vector<std::uint8_t> got = loads[i]->bits(c, 0);
      ASSERT_EQ(cudaSetDevice(loads[0]->device), cudaSuccess);
      expect_same_bits(loads[0]->bits(c, 0), got,
                       std::string(kCalls[c].name) + " on device " + std::to_string(loads[i]->device));
    }
  // Device 1 current, device 0's weights: refused before any launch, naming both devices.
  ASSERT_EQ(cudaSetDevice(loads[1]->device), cudaSuccess);
  const MatrixView xv{loads[1]->x[0]->p, DType::kBF16, 1, kK, kK}, yv{loads[1]->y[0][0], DType::kBF16, 1, kN, kN};
  try {
    cuda::quantized_matmul(xv, loads[0]->canonical(), yv, loads[1]->stream);
    ADD_FAILURE() << "weights of device " << loads[0]->device << " were accepted on device " << loads[1]->device;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("memory of device " + std::to_string(loads[0]->device)), std::string::npos) << msg;
    EXPECT_NE(msg.find("current device is " + std::to_string(loads[1]->device)), std::string::npos) << msg;
  }
  EXPECT_EQ(cudaStreamSynchronize(loads[1]->stream), cudaSuccess);  // the context is intact
  loads.clear();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

// A process's first calls of every path made inside a stream capture (global mode, the strictest):
// whatever a path creates on first use (the dense panel's cuBLAS handle, scratch pools, a
// kernel's shared-memory attribute, the wgmma GEMM's tensor-map encoder) must be creatable there.
// The cuBLAS handle was not: a Llama-3-8B prefill graph whose first linears ran the wgmma GEMM
// failed with "cublasCreate: cuBLAS status 1" on 2026-12-03 (its creation allocates device memory,
// which a global-mode capture forbids; it is now made in the thread's relaxed mode). Run in a
// fresh process (a death test re-executes this binary), so no earlier call has created anything;
// the weights are repacked before the capture, as an engine does at load. The graph's outputs
// have the bits of the same calls made directly afterwards. Exit codes: 2 setup, 3 a captured call
// threw (message on stderr), 4 capture / launch, 5 copies, 6 different bits.
TEST(CudaGraphs, FirstCallsOfEveryPathInsideACapture) {
  REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::uint64_t seed = 5151;
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto child = [&]() {
    const QuantizedWeight qw = random_weight(kN, kK, seed);
    Workload w(qw, seed, 2);
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    if (cudaStreamBeginCapture(w.stream, cudaStreamCaptureModeGlobal) != cudaSuccess) std::exit(2);
    for (int c = 0; c < kNumCalls; ++c) {
      try {
        w.run(c, 0);
      } catch (const Error& e) {
        std::fprintf(stderr, "captured call %s: %s\n", kCalls[c].name, e.what());
        std::exit(3);
      }
    }
    if (cudaStreamEndCapture(w.stream, &g) != cudaSuccess || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess ||
        cudaGraphLaunch(ge, w.stream) != cudaSuccess || cudaStreamSynchronize(w.stream) != cudaSuccess)
      std::exit(4);
    for (int c = 0; c < kNumCalls; ++c) w.run(c, 1);
    if (cudaStreamSynchronize(w.stream) != cudaSuccess) std::exit(5);
    for (int c = 0; c < kNumCalls; ++c)
      if (w.bits(c, 0) != w.bits(c, 1)) {
        std::fprintf(stderr, "%s: the graph's bits differ from the direct call's\n", kCalls[c].name);
        std::exit(6);
      }
    std::exit(0);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(0), "");
}
#endif  // NVFP4_HAVE_CUDA

}  // namespace
}  // namespace nvfp4
