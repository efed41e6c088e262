// tests/io/io_test_util.h -- helpers shared by the io and cli tests: a self-deleting temp
// folder, raw file bytes, running a shell command with captured output, and the python check.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace nvfp4::test {

class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "nvfp4_io_XXXXXX").string();
    if (!::mkdtemp(t.data())) std::abort();
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// u64 little-endian length + header + data.
inline std::string st_file(const std::string& header, const std::string& data, std::uint64_t len) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(len >> (8 * i));
  return out + header + data;
}
inline std::string st_file(const std::string& header, const std::string& data) {
  return st_file(header, data, header.size());
}

struct CmdResult {
  int rc = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `cmd` through /bin/sh with stdout and stderr captured to files in `dir`.
inline CmdResult run_cmd(const std::string& cmd, const std::string& dir) {
  const std::string o = dir + "/.stdout", e = dir + "/.stderr";
  const int st = std::system((cmd + " >" + o + " 2>" + e + " </dev/null").c_str());
  CmdResult r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  r.out = read_bytes(o);
  r.err = read_bytes(e);
  std::remove(o.c_str());
  std::remove(e.c_str());
  return r;
}

// Empty when python3 with safetensors and numpy is usable, else the reason (for GTEST_SKIP).
inline std::string python_missing(const std::string& dir) {
  const CmdResult r = run_cmd("python3 -c 'import safetensors, numpy'", dir);
  if (r.rc == 0) return "";
  return "python3 with the safetensors and numpy packages is not available (" + r.err.substr(0, 200) +
         "); CI installs them";
}

// Paths of leftover temporaries (*.tmp.*) in a folder.
inline std::vector<std::string> leftovers(const std::string& dir) {
  std::vector<std::string> r;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) r.push_back(e.path().string());
  return r;
}

}  // namespace nvfp4::test
