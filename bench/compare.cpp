// bench/compare.cpp -- interleaved A/B sampling, in process or against another build's
// `bench --serve` child. See compare.h for the protocol.
#include "bench/compare.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstring>
#include <thread>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/machine.h"
#include "nvfp4/error.h"

namespace nvfp4::bench {

EngineSampler::EngineSampler(std::unique_ptr<ReplayEngine> e, int reps, std::string name)
    : e_(std::move(e)), reps_(std::max(1, reps)), name_(std::move(name)) {}

double EngineSampler::sample_us() {
  std::vector<double> t;
  for (int i = 0; i < reps_; ++i) {
    double l = 0, r = 0;
    e_->run(&l, &r);
    t.push_back(l + r);
  }
  return median(t);
}

VariantSpec parse_variant(const std::string& s) {
  std::vector<std::string> words;
  std::string cur;
  bool have = false;
  char quote = 0;
  for (char c : s) {
    if (quote) {
      if (c == quote) quote = 0;
      else cur += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      have = true;
    } else if (c == ' ' || c == '\t') {
      if (have || !cur.empty()) words.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += c;
    }
  }
  if (quote) fail("compare", "variant '" + s + "': unclosed quote");
  if (have || !cur.empty()) words.push_back(cur);
  VariantSpec v;
  std::size_t i = 0;
  for (; i < words.size() && words[i].find('=') != std::string::npos && words[i][0] != '-'; ++i) v.env.push_back(words[i]);
  if (i == words.size()) fail("compare", "variant '" + s + "' names no binary (expected \"[KEY=VAL ...] BIN [args]\")");
  v.binary = words[i] == "self" ? "/proc/self/exe" : words[i];
  v.args.assign(words.begin() + static_cast<std::ptrdiff_t>(i) + 1, words.end());
  return v;
}

ProcessSampler::ProcessSampler(const std::string& variant, const std::vector<std::string>& workload, int reps)
    : variant_(variant), reps_(std::max(1, reps)) {
  const VariantSpec spec = parse_variant(variant);
  std::vector<std::string> argv{spec.binary, "bench", "--serve"};
  argv.insert(argv.end(), workload.begin(), workload.end());
  argv.insert(argv.end(), spec.args.begin(), spec.args.end());
  // /proc/self/exe must be resolved here: in the child it would name the child's image anyway,
  // but exec needs a path that exists for the error message to be useful.
  if (spec.binary == "/proc/self/exe") {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) argv[0].assign(buf, static_cast<std::size_t>(n));
  }
  if (access(argv[0].c_str(), X_OK) != 0)
    fail("compare", "variant '" + variant + "': '" + argv[0] + "' is not an executable file");
  // A child that dies makes the next write to it raise SIGPIPE, whose default action killed this
  // process (exit 141) before it could say which variant failed: the write fails with EPIPE
  // instead, and the read that follows reports the child's exit status.
  std::signal(SIGPIPE, SIG_IGN);
  int in_pipe[2], out_pipe[2];
  if (pipe(in_pipe) != 0) fail("compare", std::string("pipe: ") + std::strerror(errno));
  if (pipe(out_pipe) != 0) {
    const int err = errno;
    close(in_pipe[0]);
    close(in_pipe[1]);
    fail("compare", std::string("pipe: ") + std::strerror(err));
  }
  pid_ = fork();
  if (pid_ < 0) {
    const int err = errno;
    for (const int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) close(fd);
    fail("compare", std::string("fork: ") + std::strerror(err));
  }
  if (pid_ == 0) {
    dup2(in_pipe[0], 0);
    dup2(out_pipe[1], 1);
    close(in_pipe[0]);
    close(in_pipe[1]);
    close(out_pipe[0]);
    close(out_pipe[1]);
    for (const auto& kv : spec.env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    std::fprintf(stderr, "nvfp4 compare: exec %s failed: %s\n", cargv[0], std::strerror(errno));
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  to_ = fdopen(in_pipe[1], "w");
  from_ = fdopen(out_pipe[0], "r");
  try {
    if (!to_ || !from_) fail("compare", std::string("fdopen: ") + std::strerror(errno));
    ready_ = read_line();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(ready_);
    } catch (const nlohmann::json::exception&) {
      fail("compare", "variant '" + variant + "': child did not answer with a ready line (got '" + ready_ + "')");
    }
    if (!j.value("ready", false)) fail("compare", "variant '" + variant + "': child not ready: " + ready_);
  } catch (...) {
    // No destructor runs for a constructor that throws: end the child here (it keeps its weights,
    // on the GPU too, until it exits) and close the pipes.
    if (!to_) close(in_pipe[1]);
    if (!from_) close(out_pipe[0]);
    shut_down();
    throw;
  }
}

std::string ProcessSampler::read_line() {
  std::string line;
  int c;
  while ((c = std::fgetc(from_)) != EOF && c != '\n') line += static_cast<char>(c);
  if (c == EOF && line.empty()) {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    const std::string how = WIFEXITED(status)     ? fmt::format("exited with status {}", WEXITSTATUS(status))
                            : WIFSIGNALED(status) ? fmt::format("was killed by signal {}", WTERMSIG(status))
                                                  : std::string("stopped");
    fail("compare", fmt::format("variant '{}': the child {} before answering; its stderr says why", variant_, how));
  }
  return line;
}

double ProcessSampler::sample_us() {
  std::fprintf(to_, "run %d\n", reps_);
  std::fflush(to_);
  const std::string line = read_line();
  try {
    const auto j = nlohmann::json::parse(line);
    return median(j.at("us").get<std::vector<double>>());
  } catch (const nlohmann::json::exception&) {
    fail("compare", "variant '" + variant_ + "': unexpected answer '" + line + "'");
  }
}

void ProcessSampler::shut_down() {
  if (to_) {
    if (pid_ > 0) std::fputs("quit\n", to_);  // a child already reaped gets nothing (EPIPE)
    std::fclose(to_);  // EOF on its stdin ends the serve loop too
    to_ = nullptr;
  }
  if (from_) {
    std::fclose(from_);
    from_ = nullptr;
  }
  if (pid_ > 0) {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
}

ProcessSampler::~ProcessSampler() { shut_down(); }

CompareRun run_interleaved(Sampler& a, Sampler& b, int rounds, int warmup, bool show) {
  if (rounds < 2) fail("compare", "rounds=" + std::to_string(rounds) + " must be >= 2");
  CompareRun r;
  r.a_name = a.describe();
  r.b_name = b.describe();
  for (int i = 0; i < warmup; ++i) {
    a.sample_us();
    b.sample_us();
  }
  // Each sample starts after a short idle gap, so the other variant's idle tail (thread pools
  // spinning before they sleep: nvfp4's own 50 us, other runtimes' more) is over and each variant
  // runs as if alone. On 2 cores, the pool's former 0.4 ms idle spin was one of two causes of
  // 20-27x slower 0.5 ms samples of the other variant (docs/perf-cpu.md 20).
  const auto sample = [](Sampler& s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return s.sample_us();
  };
  for (int i = 0; i < rounds; ++i) {
    double ta, tb;
    if (i % 2 == 0) {
      ta = sample(a);
      tb = sample(b);
    } else {
      tb = sample(b);
      ta = sample(a);
    }
    r.a_us.push_back(ta);
    r.b_us.push_back(tb);
    r.process.push_back(0);
    if (show) progress(fmt::format("compare: round {}/{}  A {:.1f} us  B {:.1f} us  B/A {:.4f}", i + 1, rounds, ta, tb, tb / ta));
  }
  if (show) progress("");
  return r;
}

CompareRun run_processes(const SamplerFactory& make_a, const SamplerFactory& make_b, int processes, int rounds, int warmup,
                         bool show, const std::function<void(int, Sampler&, Sampler&)>& on_pair) {
  if (processes < 1) fail("compare", "processes=" + std::to_string(processes) + " must be >= 1");
  CompareRun all;
  for (int p = 0; p < processes; ++p) {
    if (show) progress(fmt::format("compare: starting process pair {}/{}", p + 1, processes));
    std::unique_ptr<Sampler> a, b;
    if (p % 2 == 0) {  // which side allocates first alternates too
      a = make_a();
      b = make_b();
    } else {
      b = make_b();
      a = make_a();
    }
    if (on_pair) on_pair(p, *a, *b);
    const CompareRun r = run_interleaved(*a, *b, rounds, warmup, show);
    all.a_name = r.a_name;
    all.b_name = r.b_name;
    all.a_us.insert(all.a_us.end(), r.a_us.begin(), r.a_us.end());
    all.b_us.insert(all.b_us.end(), r.b_us.begin(), r.b_us.end());
    all.process.insert(all.process.end(), r.a_us.size(), p);
  }
  return all;
}

int serve_replay(const ReplayOptions& o0, bool dense, std::istream& in, std::ostream& out) {
  ReplayOptions o = o0;
  if (o.plan.layers <= 0) o.plan.layers = o.model.layers;
  check_replay_options(o);
  const auto ls = replay_linears(o);
  if (o.backend == "cpu") check_replay_fits(o, ls, mem_available_bytes(), "this host (MemAvailable)");
  else check_replay_fits(o, ls, cuda_mem_free_bytes(), "the GPU (cudaMemGetInfo free)");
  auto e = o.backend == "cpu" ? make_cpu_replay(o, ls, dense) : make_cuda_replay(o, ls, dense);
  const auto& v = e->info();
  nlohmann::json ready{{"ready", true},       {"variant", v.variant},     {"kernel", v.kernel},
                       {"bytes", v.bytes},    {"flops", v.flops},         {"validated", v.validated},
                       {"validation", v.validation}, {"linears", ls.size()}, {"commit", git_commit()}};
  out << ready.dump() << std::endl;
  std::string line;
  while (std::getline(in, line)) {
    if (line == "quit") break;
    int reps = 0;
    if (std::sscanf(line.c_str(), "run %d", &reps) != 1 || reps < 1) {
      out << nlohmann::json{{"error", "expected 'run R' or 'quit', got '" + line + "'"}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
      continue;
    }
    std::vector<double> us;
    for (int i = 0; i < reps; ++i) {
      double l = 0, r = 0;
      e->run(&l, &r);
      us.push_back(l + r);
    }
    out << nlohmann::json{{"us", us}}.dump() << std::endl;
  }
  return 0;
}

}  // namespace nvfp4::bench
