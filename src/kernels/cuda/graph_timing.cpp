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
  cudaGraph_t graph;
  ck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int i = 0; i < calls; ++i) launch(i);
  ck(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec;
  ck(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  cudaEvent_t e0, e1;
  ck(cudaEventCreate(&e0), "event");
  ck(cudaEventCreate(&e1), "event");
  ck(cudaGraphLaunch(exec, stream), "warm-up launch");
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    ck(cudaEventRecord(e0, stream), "record");
    ck(cudaGraphLaunch(exec, stream), "graph launch");
    ck(cudaEventRecord(e1, stream), "record");
    ck(cudaEventSynchronize(e1), "sync");
    float ms = 0;
    ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    us.push_back(1000.0 * ms / calls);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(us.size() / 2), us.end());
  return us[us.size() / 2];
}

}  // namespace nvfp4::cuda
