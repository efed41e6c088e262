// kernels/cuda/graph_timing.cpp -- see graph_timing.h.
#include "kernels/cuda/graph_timing.h"

#include <algorithm>
#include <string>
#include <vector>

#include "nvfp4/error.h"

namespace nvfp4::cuda {
namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("graph timing", std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace

double graph_us_per_call(cudaStream_t stream, int calls, int reps, const std::function<void(int)>& launch) {
  if (calls < 1 || reps < 1) fail("graph timing", "calls and reps must be >= 1");
  // Every CUDA object is released on every way out, and a launch that throws mid-capture ends the
  // capture first: a stream left capturing refuses later work (and cudaFree from this thread).
  struct Objects {
    cudaStream_t stream;
    bool capturing = false;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    ~Objects() {
      if (capturing) {
        cudaGraph_t g = nullptr;
        (void)cudaStreamEndCapture(stream, &g);
        if (g) cudaGraphDestroy(g);
        (void)cudaGetLastError();  // the failed capture's error is not the caller's next one
      }
      if (e0) cudaEventDestroy(e0);
      if (e1) cudaEventDestroy(e1);
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
    }
  } o{stream};
  ck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  o.capturing = true;
  for (int i = 0; i < calls; ++i) launch(i);
  o.capturing = false;
  ck(cudaStreamEndCapture(stream, &o.graph), "end capture");
  ck(cudaGraphInstantiate(&o.exec, o.graph, 0), "instantiate");
  ck(cudaEventCreate(&o.e0), "event");
  ck(cudaEventCreate(&o.e1), "event");
  ck(cudaGraphLaunch(o.exec, stream), "warm-up launch");
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    ck(cudaEventRecord(o.e0, stream), "record");
    ck(cudaGraphLaunch(o.exec, stream), "graph launch");
    ck(cudaEventRecord(o.e1, stream), "record");
    ck(cudaEventSynchronize(o.e1), "sync");
    float ms = 0;
    ck(cudaEventElapsedTime(&ms, o.e0, o.e1), "elapsed");
    us.push_back(1000.0 * ms / calls);
  }
  std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(us.size() / 2), us.end());
  return us[us.size() / 2];
}

}  // namespace nvfp4::cuda
