// bench/machine.h -- what a benchmark report records about where it ran, and the host's
// measured streaming-read ceiling.
#pragma once

#include <cstdint>
#include <string>

namespace nvfp4::bench {

struct MachineInfo {
  std::string cpu_model;
  int cores = 0;                   // hardware threads online
  int cpus_available = 0;          // of those, the ones this process may use (affinity, cgroup quota)
  int cpu_threads = 0;             // the CPU backend's threads (NVFP4_NUM_THREADS, else cpus_available)
  std::string omp_num_threads;     // OMP_NUM_THREADS as this process saw it (oneDNN's team), "" if unset
  double mem_total_bytes = 0;      // /proc/meminfo MemTotal
  double llc_bytes = 0;            // last-level cache (sysfs), 0 if unknown
  std::string os;                  // uname -sr
  std::string gpu, driver;         // empty without CUDA / device; driver: "580.159.04 (CUDA driver API 13.0, runtime 13.0)"
  double gpu_mem_bytes = 0;
  int gpu_index = -1;              // the device benchmarked (the current one), -1 without
  int gpu_count = 0;               // devices this process sees (CUDA_VISIBLE_DEVICES applies)
  std::string gpu_pci_bus_id;      // "0000:1a:00.0": which of the host's GPUs it was
};

MachineInfo machine_info();        // host part; gpu fields filled by cuda_machine_info when available
// The driver version in /proc/driver/nvidia/version's first line (the first word of digits and
// dots: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."
// -> "580.159.04"), "" for any other line.
std::string nvidia_module_version(const std::string& nvrm_line);
void cuda_machine_info(MachineInfo& m);  // no-op without CUDA

double mem_available_bytes();      // /proc/meminfo MemAvailable (0 if unreadable)
double peak_rss_bytes();           // VmHWM: peak resident set since the last reset_peak_rss()
void reset_peak_rss();
std::string git_commit();          // NVFP4_COMMIT, else `git rev-parse HEAD` of the source tree (+ "+changes" if tracked files differ), else the build's define, else "unknown"
// Throws nvfp4::Error naming `op` when NVFP4_COMMIT is set but is not 7..40 hex digits
// (optionally "+changes"): called before a run, so a report never drops it silently at the end.
void check_commit_env(const char* op);
std::string iso_date_utc();

// Streaming read of `bytes` with the CPU backend's thread count, best of `passes` (GB/s = 1e9 B/s). A plain
// sum over a buffer much larger than the last-level cache: the most a memory-bound kernel can read.
double host_read_bandwidth_gbps(double bytes = 1024.0 * 1024 * 1024, int passes = 3);

// Progress line on stderr, only when stderr is a terminal (never pollutes pipes or logs).
bool stderr_is_tty();
void progress(const std::string& line);  // rewrites the current line; "" clears it

std::string human_bytes(double b);  // "4.21 GB" (1e9)

}  // namespace nvfp4::bench
