// kernels/cpu/parallel_for.h -- the one threading primitive of the CPU backend.
//
// parallel_for(n_tasks, fn) runs fn(task) for every task in [0, n_tasks) on a persistent pool
// (one thread per core, the caller included) and returns when all are done. Tasks are handed
// out dynamically through one atomic counter, so uneven tasks still keep every core busy; the
// caller sizes tasks so one task amortises the ~1 atomic op it costs. A parallel_for issued from
// inside a task runs serially on that thread (no nested parallelism, no deadlock).
// Thread count: NVFP4_NUM_THREADS if set (1..1024; anything else is an Error naming it), else
// available_cpus().
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace nvfp4::cpu {

int num_threads();         // pool size including the calling thread (creates the pool)
int configured_threads();  // what num_threads() is or will be, without creating the pool

// CPUs this process may run on: the count of its affinity mask (taskset, a container's cpuset),
// lowered to a cgroup CPU quota where one is set (docker --cpus, Kubernetes CPU limits), at
// least 1. std::thread::hardware_concurrency() counts every online CPU of the host instead, so a
// process confined to 2 of 16 cores ran 16 threads on them (docs/perf-cpu.md 36).
int available_cpus();

namespace detail {
// ceil(quota / period) for a cgroup CPU quota, 0 where there is none (quota < 0, "max") or the
// values make no sense. cgroup v2: the two fields of `cpu.max` ("max 100000", "150000 100000");
// cgroup v1: cpu.cfs_quota_us (-1: none) and cpu.cfs_period_us.
int cpus_from_cgroup2_cpu_max(const std::string& cpu_max);
int cpus_from_cgroup_quota(long long quota_us, long long period_us);
// available_cpus() computed now (available_cpus() computes it once per process).
int count_available_cpus();
}  // namespace detail

// fn should not throw (kernels report status). If a task throws anyway (an allocation failing),
// no further task is started, the call waits for the tasks already running, and the first
// exception is rethrown here; the pool stays usable.
void parallel_for(std::int64_t n_tasks, const std::function<void(std::int64_t)>& fn);

}  // namespace nvfp4::cpu
