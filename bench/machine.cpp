// bench/machine.cpp -- host facts for reports (cpu, memory, commit) and the streaming-read ceiling.
#include "bench/machine.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/host_buffer.h"
#include "io/file_util.h"
#include "kernels/cpu/parallel_for.h"
#include "nvfp4/error.h"

namespace nvfp4::bench {
namespace {

double meminfo_field(const char* key) {
  std::ifstream f("/proc/meminfo");
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(f, line)) {
    if (line.rfind(k, 0) == 0) return std::stod(line.substr(k.size())) * 1024.0;  // kB
  }
  return 0;
}

}  // namespace

std::string nvidia_module_version(const std::string& nvrm_line) {
  if (nvrm_line.rfind("NVRM version:", 0) != 0) return "";
  std::istringstream words(nvrm_line);
  for (std::string w; words >> w;) {
    const bool version = std::isdigit(static_cast<unsigned char>(w[0])) && w.find('.') != std::string::npos &&
                         w.find_first_not_of("0123456789.") == std::string::npos;
    if (version) return w;
  }
  return "";
}

MachineInfo machine_info() {
  MachineInfo m;
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      m.cpu_model = line.substr(line.find(':') + 2);
      break;
    }
  }
  m.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  m.cpus_available = cpu::available_cpus();
  m.cpu_threads = cpu::configured_threads();
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) m.omp_num_threads = omp;
  m.mem_total_bytes = meminfo_field("MemTotal");
  for (int idx = 0; idx < 8; ++idx) {
    const std::string base = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/";
    const std::string lvl = io::first_line_or_empty(base + "level");
    if (lvl.empty()) break;
    std::string size = io::first_line_or_empty(base + "size");  // e.g. "32768K"
    if (size.empty()) continue;
    double v = std::stod(size);
    if (size.back() == 'K') v *= 1024;
    if (size.back() == 'M') v *= 1024 * 1024;
    if (std::stoi(lvl) >= 2) m.llc_bytes = std::max(m.llc_bytes, v);
  }
  utsname u{};
  if (uname(&u) == 0) m.os = std::string(u.sysname) + " " + u.release;
  cuda_machine_info(m);
  return m;
}

double mem_available_bytes() { return meminfo_field("MemAvailable"); }

double peak_rss_bytes() {
  // VmHWM (resettable, see reset_peak_rss); getrusage's ru_maxrss as the fallback.
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_maxrss) * 1024.0;
}

void reset_peak_rss() {
  // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0, proc(5)).
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

namespace {
// 7..40 hex digits, optionally "+changes" (what scripts/device_cuda.sh and
// scripts/prebuilt_cuda.sh pass for a tree with tracked changes).
bool commit_name_ok(const std::string& c) {
  const std::string hex = c.size() > 8 && c.compare(c.size() - 8, 8, "+changes") == 0 ? c.substr(0, c.size() - 8) : c;
  if (hex.size() < 7 || hex.size() > 40) return false;
  return std::all_of(hex.begin(), hex.end(), [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) != 0; });
}
}  // namespace

void check_commit_env(const char* op) {
  const char* env = std::getenv("NVFP4_COMMIT");
  if (env && !commit_name_ok(env))
    fail(op, std::string("NVFP4_COMMIT='") + env +
                 "' is not a commit: 7 to 40 hex digits, optionally followed by '+changes' (unset it to let the report ask git)");
}

std::string git_commit() {
  // A copy of the tree without .git (the device machine) says which commit it is through the
  // environment (scripts/device_cuda.sh exports it). A malformed value was dropped silently
  // before 2026-12-03; bench and compare now refuse it before they run (check_commit_env).
  check_commit_env("bench report");
  if (const char* env = std::getenv("NVFP4_COMMIT")) return env;
#ifdef NVFP4_SOURCE_DIR
  const std::string cmd = std::string("git -C '") + NVFP4_SOURCE_DIR + "' rev-parse HEAD 2>/dev/null";
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[128] = {0};
    const bool ok = std::fgets(buf, sizeof buf, p) != nullptr;
    pclose(p);
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (ok && s.size() == 40) {
      // Tracked files that differ from HEAD: the report says so ("+changes"), as the device
      // script's NVFP4_COMMIT does, so a result is never attributed to a commit it did not run.
      const std::string diff = std::string("git -C '") + NVFP4_SOURCE_DIR + "' diff --quiet HEAD -- 2>/dev/null";
      if (std::system(diff.c_str()) != 0) s += "+changes";
      return s;
    }
  }
#endif
#ifdef NVFP4_GIT_COMMIT
  if (std::strlen(NVFP4_GIT_COMMIT) > 0) return NVFP4_GIT_COMMIT;
#endif
  return "unknown";
}

std::string iso_date_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double host_read_bandwidth_gbps(double bytes, int passes) {
  const int threads = cpu::configured_threads();  // as many as the kernels it bounds run
  const std::size_t n = static_cast<std::size_t>(bytes / sizeof(std::uint64_t)) / threads * threads;
  // Huge-page-advised, like the replay's weights (bench/host_buffer.h): the ceiling and the
  // kernels then read through the same kind of pages. With `new` the ceiling read 4 KiB pages, 22-25
  // GB/s on 2026-12-02's dev VM, where the replay's weights and the shape bench's read got ~30.
  HostBuffer mem(n * sizeof(std::uint64_t));
  std::uint64_t* const buf = reinterpret_cast<std::uint64_t*>(mem.data());
  // Touch every page with non-zero data first: an untouched page reads as the shared zero page.
  for (std::size_t i = 0; i < n; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  std::atomic<std::uint64_t> sink{0};
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    // Joined on every way out: a thread that cannot be started (a pids cgroup limit) throws
    // std::system_error, and destroying joinable threads would end the process instead.
    struct JoinAll {
      std::vector<std::thread>& v;
      ~JoinAll() {
        for (auto& th : v)
          if (th.joinable()) th.join();
      }
    } join_all{pool};
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const std::size_t chunk = n / threads;
        const std::uint64_t* q = buf + chunk * t;
        // Four independent sums so the loop is bound by loads, not by one add chain.
        std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (std::size_t i = 0; i + 4 <= chunk; i += 4) {
          s0 += q[i];
          s1 += q[i + 1];
          s2 += q[i + 2];
          s3 += q[i + 3];
        }
        sink += s0 ^ s1 ^ s2 ^ s3;
      });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(std::uint64_t)) / s / 1e9);
  }
  if (sink.load() == 42) std::fputc(' ', stderr);  // keeps the sums observable
  return best;
}

bool stderr_is_tty() { return isatty(2) == 1; }

void progress(const std::string& line) {
  if (!stderr_is_tty()) return;
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  if (line.empty()) std::fprintf(stderr, "\r");
  std::fflush(stderr);
}

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

#if !defined(NVFP4_HAVE_CUDA)
void cuda_machine_info(MachineInfo&) {}
#endif

}  // namespace nvfp4::bench
