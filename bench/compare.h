// bench/compare.h -- A/B runs: two variants sampled interleaved, A B B A A B B A ..., so slow
// drift of a shared machine hits both alike (stats.h says how the rounds are judged).
//
// A variant is a sampler. Two kinds:
//  - EngineSampler: a replay engine in this process (tests; two configurations of one build).
//  - ProcessSampler: another build. The variant string is "[KEY=VAL ...] BIN [bench args...]";
//    the child runs `BIN bench --serve <workload args> <bench args>` with KEY=VAL in its
//    environment, allocates its weights once, validates, prints one "ready" JSON line, then
//    answers each "run R" line on stdin with one JSON line {"us": [R replay times]} and exits
//    on "quit". BIN "self" is this executable. So a round costs one replay per side, not a
//    process start and gigabytes of weight generation.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <functional>
#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "bench/replay.h"
#include "bench/stats.h"

namespace nvfp4::bench {

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual double sample_us() = 0;  // one measurement (median of reps_per_sample replays)
  virtual std::string describe() const = 0;
};

class EngineSampler final : public Sampler {
 public:
  EngineSampler(std::unique_ptr<ReplayEngine> e, int reps_per_sample, std::string name);
  double sample_us() override;
  std::string describe() const override { return name_; }

 private:
  std::unique_ptr<ReplayEngine> e_;
  int reps_;
  std::string name_;
};

class ProcessSampler final : public Sampler {
 public:
  // workload_args: the bench flags describing the workload (--model ..., --layers ...).
  ProcessSampler(const std::string& variant, const std::vector<std::string>& workload_args, int reps_per_sample);
  ~ProcessSampler() override;
  double sample_us() override;
  std::string describe() const override { return variant_; }
  const std::string& ready_line() const { return ready_; }

 private:
  std::string read_line();
  void shut_down();  // "quit" to a live child, close the pipes, reap it (the destructor, and a failed start)
  std::string variant_;
  int reps_;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  std::string ready_;
};

// Splits "K=V K2=V2 bin --flag 'a b'" into env assignments, binary and arguments (single and
// double quotes group words). Throws nvfp4::Error on an empty variant or an unclosed quote.
struct VariantSpec {
  std::vector<std::string> env;
  std::string binary;
  std::vector<std::string> args;
};
VariantSpec parse_variant(const std::string& s);

struct CompareRun {
  std::vector<double> a_us, b_us;  // round i: a_us[i], b_us[i]
  std::vector<int> process;        // round i was measured by process pair process[i] (0, 1, ...)
  std::string a_name, b_name;
};

// `rounds` rounds after `warmup` untimed ones; round i runs A first when i is even, B first when
// odd (A B B A ...). Progress on a terminal.
CompareRun run_interleaved(Sampler& a, Sampler& b, int rounds, int warmup = 1, bool show_progress = false);

// `processes` pairs one after another, each made fresh by the factories (a child process: its own
// allocation of the weights, so its own placement; bench/stats.h says why that matters), each
// running run_interleaved(rounds, warmup); only one pair is alive at a time, and which side is
// made (allocates) first alternates. `on_pair(p, a, b)` (optional) sees each pair once it is made.
using SamplerFactory = std::function<std::unique_ptr<Sampler>()>;
CompareRun run_processes(const SamplerFactory& make_a, const SamplerFactory& make_b, int processes, int rounds,
                         int warmup = 1, bool show_progress = false,
                         const std::function<void(int, Sampler&, Sampler&)>& on_pair = {});

// The child side of ProcessSampler: build the engine for `o` (nvfp4, or the dense baseline when
// `dense`), print the ready line, answer "run R" lines until "quit" or end of input.
int serve_replay(const ReplayOptions& o, bool dense, std::istream& in, std::ostream& out);

}  // namespace nvfp4::bench
