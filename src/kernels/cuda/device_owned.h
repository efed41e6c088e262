// kernels/cuda/device_owned.h -- internal: owning handles for the CUDA runtime objects that the
// host paths, the autotuner and the benchmarks make for themselves (device memory, streams,
// events). Each frees its object when it goes out of scope, so an error thrown half-way (an
// allocation out of memory, a failed launch) leaves nothing behind. capture_graph ends a capture
// that throws half-way, since a stream left capturing refuses all later work.
// Why: the autotuner made and freed these by hand, and a throw between the two leaked every
// rotation copy of the weights into the calling process; the autotuner is library code, and its
// caller may catch the error and go on. DeviceBuffer also replaces three near-identical buffer
// structs (the host path's, the shape bench's and the replay's).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "nvfp4/error.h"

namespace nvfp4::cuda {

// Device memory from cudaMalloc. At least 16 bytes are allocated, so a zero-size tensor still
// gets a valid, 16-byte aligned pointer (the kernels' vector loads assume that alignment).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;  // empty: no allocation
  // `op` names the operation in the error, e.g. "tune": "tune: cudaMalloc of 4096 bytes (weights): ...".
  DeviceBuffer(std::size_t bytes, const char* op, const char* what = "device buffer") : bytes_(bytes) {
    const cudaError_t e = cudaMalloc(&p_, std::max<std::size_t>(bytes, 16));
    if (e != cudaSuccess) {
      p_ = nullptr;
      (void)cudaGetLastError();  // not sticky: the caller may catch this and go on
      fail(op, "cudaMalloc of " + std::to_string(bytes) + " bytes (" + what + "): " + cudaGetErrorName(e) + " (" +
                   cudaGetErrorString(e) + ")");
    }
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// A non-blocking stream (it does not synchronize with the legacy default stream).
class OwnedStream {
 public:
  explicit OwnedStream(const char* op) {
    const cudaError_t e = cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking);
    if (e != cudaSuccess) fail(op, std::string("cudaStreamCreateWithFlags: ") + cudaGetErrorString(e));
  }
  ~OwnedStream() { cudaStreamDestroy(s_); }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// A timing event.
class OwnedEvent {
 public:
  explicit OwnedEvent(const char* op) {
    const cudaError_t e = cudaEventCreate(&e_);
    if (e != cudaSuccess) fail(op, std::string("cudaEventCreate: ") + cudaGetErrorString(e));
  }
  ~OwnedEvent() { cudaEventDestroy(e_); }
  OwnedEvent(const OwnedEvent&) = delete;
  OwnedEvent& operator=(const OwnedEvent&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// An instantiated graph.
struct GraphExecDestroy {
  void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); }
};
using OwnedGraphExec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDestroy>;

// Captures the work `record()` enqueues on `stream` (not the legacy default stream) into a graph
// and instantiates it. If `record` or the capture fails, the capture is ended and its graph
// dropped before the error goes on: a stream left capturing refuses later work, and cudaFree from
// this thread. `op` names the operation in the error.
template <class Record>
OwnedGraphExec capture_graph(cudaStream_t stream, const char* op, Record&& record) {
  const auto check = [op](cudaError_t e, const char* what) {
    if (e != cudaSuccess) fail(op, std::string(what) + ": " + cudaGetErrorString(e));
  };
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    record();
  } catch (...) {
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // the failed capture's error is not the caller's next one
    throw;
  }
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check(e, "cudaGraphInstantiate");
  return OwnedGraphExec(exec);
}

}  // namespace nvfp4::cuda
