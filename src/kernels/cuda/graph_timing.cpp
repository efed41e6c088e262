// kernels/cuda/graph_timing.cpp -- see graph_timing.h.
#include "kernels/cuda/graph_timing.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cuda/device_owned.h"
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
  // capture first (device_owned.h).
  const OwnedGraphExec exec = capture_graph(stream, "graph timing", [&] {
    for (int i = 0; i < calls; ++i) launch(i);
  });
  const OwnedEvent e0("graph timing"), e1("graph timing");
  ck(cudaGraphLaunch(exec.get(), stream), "warm-up launch");
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    ck(cudaEventRecord(e0.get(), stream), "record");
    ck(cudaGraphLaunch(exec.get(), stream), "graph launch");
    ck(cudaEventRecord(e1.get(), stream), "record");
    ck(cudaEventSynchronize(e1.get()), "sync");
    float ms = 0;
    ck(cudaEventElapsedTime(&ms, e0.get(), e1.get()), "elapsed");
    us.push_back(1000.0 * ms / calls);
  }
  std::nth_element(us.begin(), us.begin() + static_cast<std::ptrdiff_t>(us.size() / 2), us.end());
  return us[us.size() / 2];
}

}  // namespace nvfp4::cuda
