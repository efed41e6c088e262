// Reports: the JSON envelope and replay records carry what docs/bench-json.md promises, CSV has
// its header, the SVGs are well-formed and show the ceiling and the verdict; `nvfp4 bench --json -`
// emits a parseable report.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/machine.h"
#include "bench/report.h"
#include "io/file_util.h"
#include "test_util.h"

namespace nvfp4::bench {
ModelSpec tiny_model();
namespace {

ReplayResult tiny_replay() {
  ReplayOptions o;
  o.model = tiny_model();
  o.plan.layers = 2;
  o.seconds = 0;
  o.min_samples = 3;
  return run_replay(o);
}

TEST(BenchReport, JsonCsvTable) {
  const ReplayResult r = tiny_replay();
  nlohmann::json j = report_envelope({"nvfp4", "bench"});
  // (json::array: a one-element braced list of a json is a copy under clang and an array under
  // GCC, nlohmann/json's documented brace-initialisation pitfall.)
  j["replays"] = nlohmann::json::array({to_json(r)});
  EXPECT_EQ(j["schema"], kJsonSchema);
  for (const char* k : {"date", "commit", "command", "machine"}) EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"cpu", "cores", "cpus_available", "cpu_threads", "mem_total_bytes", "gpu", "driver", "gpu_index",
                        "gpu_count", "gpu_pci_bus_id"})
    EXPECT_TRUE(j["machine"].contains(k)) << k;
  EXPECT_GT(j["machine"]["cores"].get<int>(), 0);
  EXPECT_GE(j["machine"]["cpus_available"].get<int>(), 1);
  EXPECT_LE(j["machine"]["cpus_available"].get<int>(), j["machine"]["cores"].get<int>());
  EXPECT_GE(j["machine"]["cpu_threads"].get<int>(), 1);
  // A GPU, when there is one, names the device benchmarked among those the process sees.
  if (!j["machine"]["gpu"].is_null()) {
    EXPECT_GE(j["machine"]["gpu_index"].get<int>(), 0);
    EXPECT_LT(j["machine"]["gpu_index"].get<int>(), j["machine"]["gpu_count"].get<int>());
    EXPECT_EQ(j["machine"]["gpu_pci_bus_id"].get<std::string>().size(), 12u) << j["machine"].dump();
  } else {
    EXPECT_EQ(j["machine"]["gpu_count"], 0);
  }
  const auto& rj = j["replays"][0];
  EXPECT_EQ(rj["model"]["name"], "tiny");
  EXPECT_EQ(rj["variants"].size(), 2u);
  EXPECT_EQ(rj["variants"][0]["samples_us"].size(), 3u);
  EXPECT_TRUE(rj.contains("speedup_vs_dense"));
  const std::string csv = replays_csv({r});
  EXPECT_EQ(csv.rfind("model,mode,backend", 0), 0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  const std::string t = replay_table(r);
  EXPECT_NE(t.find("nvfp4"), std::string::npos);
  EXPECT_NE(t.find("scaled"), std::string::npos);
}

// The shape table's "x read" column: a row's graph time over the read_floor row of the same N x K
// and cache mode, "-" where there is none (another shape, a hot row, no graph time).
TEST(BenchReport, ShapeTableRatioToTheReadFloor) {
  auto row = [](const char* variant, std::int64_t n, bool cold, double us_graph) {
    Row r;
    r.backend = "cuda";
    r.kernel = "k";
    r.variant = variant;
    r.shape = {1, n, 4096};
    r.cold = cold;
    r.us_median = 10;
    r.us_graph = us_graph;
    r.validated = true;
    return r;
  };
  const std::vector<Row> rows = {row("read_floor", 4096, true, 4.0), row("nvfp4_repacked", 4096, true, 5.0),
                                 row("nvfp4_repacked", 1024, true, 3.0), row("nvfp4_repacked", 4096, false, 4.4),
                                 row("nvfp4", 4096, true, 0.0)};
  const std::string t = rows_table(rows);
  std::vector<std::string> lines;
  for (std::size_t a = 0, b; (b = t.find('\n', a)) != std::string::npos; a = b + 1) lines.push_back(t.substr(a, b - a));
  ASSERT_EQ(lines.size(), 6u) << t;
  EXPECT_NE(lines[0].find("x read"), std::string::npos) << t;
  auto field = [](const std::string& line, int i) {  // whitespace-separated field i
    std::size_t a = 0;
    for (int f = 0;; ++f) {
      a = line.find_first_not_of(' ', a);
      const std::size_t b = line.find(' ', a);
      if (f == i) return line.substr(a, b - a);
      a = b;
    }
  };
  EXPECT_EQ(field(lines[1], 8), "1.00") << t;  // the floor against itself
  EXPECT_EQ(field(lines[2], 8), "1.25") << t;  // 5.0 / 4.0
  EXPECT_EQ(field(lines[3], 8), "-") << t;     // no floor at N = 1024
  EXPECT_EQ(field(lines[4], 8), "-") << t;     // a hot row: the floor is cold
  EXPECT_EQ(field(lines[5], 8), "-") << t;     // no graph time
}

TEST(BenchReport, SvgPlots) {
  const std::string roof = roofline_svg({{"a nvfp4", 3.5, 40, false}, {"a dense", 1.0, 9, true}}, 14.0, 0, "t <&>");
  EXPECT_EQ(roof.rfind("<svg", 0), 0u);
  EXPECT_NE(roof.find("measured ceiling 14 GB/s"), std::string::npos);
  EXPECT_NE(roof.find("t &lt;&amp;&gt;"), std::string::npos);
  EXPECT_EQ(roof.substr(roof.size() - 7), "</svg>\n");
  std::vector<double> a{100, 101, 99, 100}, b{103, 104, 102, 103};
  const auto s = compare_samples(a, b);
  const std::string ab = ab_svg(a, b, s, "A", "B", "ab");
  EXPECT_NE(ab.find(verdict_text(s.verdict)), std::string::npos);
  const std::string path = ::testing::TempDir() + "/ab.svg";
  write_plot(path, ab);
  std::ifstream f(path);
  std::string first;
  std::getline(f, first);
  EXPECT_EQ(first.rfind("<svg", 0), 0u);
  EXPECT_EQ(compare_csv({a, b, {}, "A", "B"}).rfind("round,process,first,a_us,b_us,ratio\n0,0,A,", 0), 0u);
}

// Runs a shell command; returns its stdout and sets *rc to pclose's status (-1: popen failed).
std::string run_shell(const std::string& cmd, int* rc) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *rc = -1;
    return "";
  }
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

// `nvfp4 bench` on one tiny CPU shape, the arguments the CLI tests share.
const char* const kTinyCpuBench = " bench --backend cpu --shape 1,256,256 --seconds 0 --samples 2 ";

// The `machine` object of a tiny CPU shape run's JSON report; `cmd` starts the CLI with
// kTinyCpuBench + "--no-dense --json -" (under taskset, in a cgroup, ...). Expects exit 0.
nlohmann::json cli_machine(const std::string& cmd) {
  int rc = 0;
  const std::string out = run_shell(cmd, &rc);
  EXPECT_EQ(rc, 0) << cmd << "\n" << out;
  return nlohmann::json::parse(out, nullptr, false)["machine"];
}

TEST(BenchReport, CliJsonToStdout) {
  const char* cli = std::getenv("NVFP4_CLI");
  ASSERT_TRUE(cli && access(cli, X_OK) == 0) << "NVFP4_CLI must name the built nvfp4 binary";
  const std::string model = ::testing::TempDir() + "/cli_tiny.json";
  std::ofstream(model) << R"({"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
      "num_hidden_layers": 2, "vocab_size": 1000})";
  const std::string cmd = std::string(cli) + " bench --model " + model + " --backend cpu --seconds 0 --samples 2 --json - 2>/dev/null";
  int rc = 0;
  std::string out = run_shell(cmd, &rc);
  ASSERT_NE(rc, -1) << "popen failed";
  EXPECT_EQ(rc, 0);
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["schema"], kJsonSchema);
  ASSERT_EQ(j["replays"].size(), 2u);  // decode and prefill
  EXPECT_EQ(j["replays"][1]["mode"], "prefill");
  EXPECT_TRUE(j["replays"][0]["variants"][0]["validated"].get<bool>());
  // Too large: a clear error, exit 1, before allocating.
  const std::string big = std::string(cli) + " bench --model llama-3-70b --backend cpu 2>&1";
  out = run_shell(big, &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("[bench] replay of llama-3-70b"), std::string::npos) << out;
}

// A shape run honours --no-dense (no baseline row) and refuses --no-nvfp4, which only a replay can
// honour, instead of ignoring either.
TEST(BenchReport, CliShapeRunNoDenseAndNoNvfp4) {
  const char* cli = std::getenv("NVFP4_CLI");
  ASSERT_TRUE(cli && access(cli, X_OK) == 0) << "NVFP4_CLI must name the built nvfp4 binary";
  auto run = [&](const std::string& args, int* rc) {
    return run_shell(std::string(cli) + kTinyCpuBench + args, rc);
  };
  int rc = 0;
  const auto j = nlohmann::json::parse(run("--no-dense --json - 2>/dev/null", &rc));
  EXPECT_EQ(rc, 0);
  ASSERT_FALSE(j["shapes"].empty());
  for (const auto& r : j["shapes"]) EXPECT_EQ(r["variant"].get<std::string>().rfind("nvfp4", 0), 0u) << r["variant"];
  const std::string err = run("--no-nvfp4 2>&1", &rc);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("--no-nvfp4 applies to the model replay only"), std::string::npos) << err;
}

// The CPU backend's threads, the read ceiling's and the oneDNN baseline's follow the affinity mask
// (taskset, a cpuset) unless NVFP4_NUM_THREADS says otherwise; the report records the counts.
TEST(BenchReport, CliThreadsFollowTheAffinityMask) {
  const char* cli = std::getenv("NVFP4_CLI");
  ASSERT_TRUE(cli && access(cli, X_OK) == 0) << "NVFP4_CLI must name the built nvfp4 binary";
  int rc = 0;
  run_shell("taskset -V >/dev/null 2>&1", &rc);
  if (rc != 0) GTEST_SKIP() << "no taskset (util-linux) on this host";
  const int first = test::first_allowed_cpu(test::affinity_mask());
  auto machine = [&](const std::string& env) {
    return cli_machine(env + " taskset -c " + std::to_string(first) + " " + cli + kTinyCpuBench + "--no-dense --json - 2>/dev/null");
  };
  // OMP_NUM_THREADS (the oneDNN baseline's team) follows the CPU backend's count unless set.
  const auto one = machine("env -u NVFP4_NUM_THREADS -u OMP_NUM_THREADS");
  EXPECT_EQ(one["cpus_available"].get<int>(), 1);
  EXPECT_EQ(one["cpu_threads"].get<int>(), 1);
  EXPECT_EQ(one["omp_num_threads"], "1");
  const auto three = machine("env -u OMP_NUM_THREADS NVFP4_NUM_THREADS=3");
  EXPECT_EQ(three["cpus_available"].get<int>(), 1);
  EXPECT_EQ(three["cpu_threads"].get<int>(), 3);  // the user's setting wins
  EXPECT_EQ(three["omp_num_threads"], "3");
  const auto own = machine("env NVFP4_NUM_THREADS=3 OMP_NUM_THREADS=2");
  EXPECT_EQ(own["omp_num_threads"], "2");  // and so does theirs for OpenMP
}

// The kernel module's version as nvidia-smi prints it, from both wordings of the proprietary and
// the open module (the open one read on the H200 machine, 2026-12-03).
TEST(BenchReport, NvidiaModuleVersion) {
  EXPECT_EQ(nvidia_module_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                                  "(nixbld@)  "),
            "580.159.04");
  EXPECT_EQ(nvidia_module_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024"),
            "535.183.01");
  EXPECT_EQ(nvidia_module_version(""), "");
  EXPECT_EQ(nvidia_module_version("GCC version:  gcc version 15.3.0 (GCC)"), "");
}

// A cgroup of this test's own under the cpu controller, removed when it goes out of scope: v1
// (/sys/fs/cgroup/cpu, a child of the root) or v2 (a child of the root, where the root already
// delegates the cpu controller: the test changes no setting of the host's). Empty dir() where
// neither can be made (not root, a read-only or absent mount, no cpu controller for children).
class ScratchCgroup {
 public:
  ScratchCgroup() {
    const std::string name = "nvfp4-test-" + std::to_string(getpid());
    if (const std::string d = "/sys/fs/cgroup/cpu/" + name; mkdir_ok(d) && access((d + "/cpu.cfs_quota_us").c_str(), F_OK) == 0) {
      dir_ = d;
    } else if (const std::string d2 = "/sys/fs/cgroup/" + name;
               (" " + io::first_line_or_empty("/sys/fs/cgroup/cgroup.subtree_control") + " ").find(" cpu ") !=
                   std::string::npos &&
               mkdir_ok(d2) &&
               access((d2 + "/cpu.max").c_str(), F_OK) == 0) {
      dir_ = d2;
      v2_ = true;
    }
  }
  ~ScratchCgroup() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) rmdir(it->c_str());
  }
  const std::string& dir() const { return dir_; }
  // A child cgroup (no quota of its own) under dir().
  std::string child(const std::string& name) {
    const std::string d = dir_ + "/" + name;
    return mkdir_ok(d) ? d : std::string();
  }
  // quota / period CPUs on dir(): cpu.max (v2) or cpu.cfs_{period,quota}_us (v1).
  bool set_quota(long long quota_us, long long period_us) const {
    if (v2_) return write_file(dir_ + "/cpu.max", std::to_string(quota_us) + " " + std::to_string(period_us));
    return write_file(dir_ + "/cpu.cfs_period_us", std::to_string(period_us)) &&
           write_file(dir_ + "/cpu.cfs_quota_us", std::to_string(quota_us));
  }

 private:
  bool mkdir_ok(const std::string& d) {
    if (mkdir(d.c_str(), 0755) != 0) return false;
    made_.push_back(d);
    return true;
  }
  static bool write_file(const std::string& path, const std::string& text) {
    std::ofstream f(path);
    f << text << std::flush;
    return static_cast<bool>(f);
  }
  std::string dir_;
  bool v2_ = false;
  std::vector<std::string> made_;
};

// The default thread count follows a real cgroup CPU quota (docker --cpus, a Kubernetes CPU
// limit), set on the parent of the cgroup the CLI runs in, so the walk up the hierarchy is
// what finds it. Runs where the test may make cgroups (root with a writable cpu controller:
// the CI and dev VMs); skips elsewhere, saying why.
TEST(BenchReport, CliThreadsFollowACgroupCpuQuota) {
  const char* cli = std::getenv("NVFP4_CLI");
  ASSERT_TRUE(cli && access(cli, X_OK) == 0) << "NVFP4_CLI must name the built nvfp4 binary";
  const cpu_set_t mask = test::affinity_mask();
  if (CPU_COUNT(&mask) < 2) GTEST_SKIP() << "needs 2 CPUs in the affinity mask for a 1-CPU quota to show";
  ScratchCgroup cg;
  if (cg.dir().empty()) GTEST_SKIP() << "cannot make a cgroup with a CPU quota here (needs root and a writable cpu controller)";
  ASSERT_TRUE(cg.set_quota(100000, 100000)) << "writing a 1-CPU quota to " << cg.dir();
  const std::string inner = cg.child("inner");
  ASSERT_FALSE(inner.empty()) << "mkdir " << cg.dir() << "/inner";
  auto machine = [&](const std::string& env) {
    return cli_machine("sh -c 'echo $$ > " + inner + "/cgroup.procs && exec " + env + " " + cli + kTinyCpuBench +
                       "--no-dense --json -' 2>/dev/null");
  };
  const auto one = machine("env -u NVFP4_NUM_THREADS -u OMP_NUM_THREADS");
  EXPECT_EQ(one["cpus_available"], 1) << one.dump();
  EXPECT_EQ(one["cpu_threads"], 1);
  EXPECT_EQ(one["omp_num_threads"], "1");
  // 1.5 CPUs of quota round up to 2 (a thread for the half CPU), no more than the mask allows.
  ASSERT_TRUE(cg.set_quota(150000, 100000));
  const auto half = machine("env -u NVFP4_NUM_THREADS -u OMP_NUM_THREADS");
  EXPECT_EQ(half["cpus_available"], 2) << half.dump();
  EXPECT_EQ(machine("env NVFP4_NUM_THREADS=3")["cpu_threads"], 3);  // the user's setting wins
}

}  // namespace
}  // namespace nvfp4::bench
