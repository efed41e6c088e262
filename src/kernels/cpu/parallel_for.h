// kernels/cpu/parallel_for.h -- the one threading primitive of the CPU backend.
//
// parallel_for(n_tasks, fn) runs fn(task) for every task in [0, n_tasks) on a persistent pool
// (one thread per core, the caller included) and returns when all are done. Tasks are handed
// out dynamically through one atomic counter, so uneven tasks still keep every core busy; the
// caller sizes tasks so one task amortises the ~1 atomic op it costs. A parallel_for issued from
// inside a task runs serially on that thread (no nested parallelism, no deadlock).
// Thread count: NVFP4_NUM_THREADS if set (>= 1), else std::thread::hardware_concurrency().
#pragma once

#include <cstdint>
#include <functional>

namespace nvfp4::cpu {

int num_threads();  // pool size including the calling thread

// fn must not throw (kernels report status, never throw).
void parallel_for(std::int64_t n_tasks, const std::function<void(std::int64_t)>& fn);

}  // namespace nvfp4::cpu
