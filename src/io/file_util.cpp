// io/file_util.cpp -- POSIX helpers for atomic outputs (see file_util.h).
#include "io/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "nvfp4/error.h"

namespace nvfp4::io {
namespace {

std::string errno_text() { return std::strerror(errno); }

std::string tmp_name(const std::string& path) {
  return path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
}

// Strip trailing slashes so "out/" and "out" name the same folder.
std::string strip_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace

std::string parent_dir(const std::string& path_in) {
  const std::string path = strip_slashes(path_in);
  const auto pos = path.rfind('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

std::string base_name(const std::string& path_in) {
  const std::string path = strip_slashes(path_in);
  const auto pos = path.rfind('/');
  return pos == std::string::npos ? path : path.substr(pos + 1);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir == ".") return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string read_text_file(const std::string& path, const char* op) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever; the
  // fstat below then refuses anything that is not a regular file (FIFOs, /dev/zero, folders).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(op, "cannot open '" + path + "': " + errno_text());
  // Closed on every way out, the string's allocation failing (up to kMaxTextFileBytes) included.
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) fail(op, "'" + path + "' is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > kMaxTextFileBytes)
    fail(op, "'" + path + "' is " + std::to_string(st.st_size) + " bytes; a JSON side file may have at most " +
                 std::to_string(kMaxTextFileBytes));
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t r = ::read(fd, &text[got], text.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail(op, "cannot read '" + path + "': " + (r < 0 ? errno_text() : "the file shrank while it was read"));
    got += static_cast<std::size_t>(r);
  }
  return text;
}

void check_output_not_input(const std::string& in, const std::string& out, const char* op) {
  namespace fs = std::filesystem;
  std::error_code e1, e2;
  const fs::path a = fs::weakly_canonical(in, e1), b = fs::weakly_canonical(out, e2);
  if (e1 || e2) return;  // the reader or the writer names the real problem
  std::error_code eq;
  if (a == b || fs::equivalent(a, b, eq))
    fail(op, "output '" + out + "' is the input '" + in + "'; write to a new path");
  if (is_directory(a.string())) {
    const std::string dir = a.string() + "/";
    if (b.string().compare(0, dir.size(), dir) == 0)
      fail(op, "output '" + out + "' lies inside the input folder '" + in + "'; write outside it");
  }
}

std::string first_line_or_empty(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

void write_all(int fd, const void* data, std::uint64_t n, const std::string& path, const char* op) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    // Linux write() moves at most 0x7ffff000 bytes per call.
    const std::size_t chunk = n > (1u << 30) ? (1u << 30) : static_cast<std::size_t>(n);
    const ssize_t w = ::write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail(op, "cannot write '" + path + "': " + errno_text());
    }
    p += w;
    n -= static_cast<std::uint64_t>(w);
  }
}

void fsync_dir(const std::string& dir, const char* op) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) fail(op, "cannot open directory '" + dir + "' to sync it: " + errno_text());
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems (e.g. certain FUSE/tmpfs setups) do not support fsync on directories;
  // EINVAL there means "nothing to do", not a failed write.
  if (rc != 0 && err != EINVAL) fail(op, "cannot sync directory '" + dir + "': " + std::strerror(err));
}

void write_file_atomic(const std::string& path_in, const char* op,
                       const std::function<void(int, const std::string&)>& fill) {
  // The rename replaces a name: through a symlink it must replace the link's target, not the
  // link (run as root, an early bench change replaced /dev/stdout by a regular file, 2026-12-03),
  // and a device or a pipe cannot be replaced at all.
  std::string path = path_in;
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    char* real = ::realpath(path_in.c_str(), nullptr);
    if (!real) fail(op, "output '" + path_in + "' is a symlink that does not resolve: " + errno_text());
    path = real;
    std::free(real);
  }
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail(op, "output '" + path_in + "' is not a regular file (a device, a pipe or a folder); give a file path");
  const std::string tmp = tmp_name(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(op, "cannot create '" + tmp + "': " + errno_text());
  bool open_fd = true;  // a failed close must not be followed by a second one: the number may
                        // already belong to a file another thread opened since
  try {
    fill(fd, tmp);
    if (::fsync(fd) != 0) fail(op, "cannot sync '" + tmp + "': " + errno_text());
    open_fd = false;
    if (::close(fd) != 0) fail(op, "cannot close '" + tmp + "': " + errno_text());
  } catch (...) {
    if (open_fd) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string msg = errno_text();
    ::unlink(tmp.c_str());
    fail(op, "cannot rename '" + tmp + "' to '" + path + "': " + msg);
  }
  fsync_dir(parent_dir(path), op);
}

void check_output_dir(const std::string& out, const char* op) {
  if (out.empty()) fail(op, "output path is empty");
  const std::string parent = parent_dir(out);
  if (!is_directory(parent)) fail(op, "output folder's parent '" + parent + "' is not an existing directory");
  if (!path_exists(out)) return;
  if (!is_directory(out)) fail(op, "output '" + out + "' exists and is not a directory");
  std::error_code ec;
  if (!std::filesystem::is_empty(out, ec) || ec)
    fail(op, "output folder '" + out + "' exists and is not empty (refusing to overwrite)");
}

void check_output_file(const std::string& out, const char* op) {
  if (out.empty()) fail(op, "output path is empty");
  const std::string parent = parent_dir(out);
  if (!is_directory(parent)) fail(op, "output file's folder '" + parent + "' is not an existing directory");
  if (is_directory(out)) fail(op, "output '" + out + "' is a directory, expected a file path");
}

StagingDir::StagingDir(const std::string& out, const char* op)
    : out_(strip_slashes(out)), tmp_(tmp_name(strip_slashes(out))), op_(op) {
  check_output_dir(out_, op);
  std::error_code ec;
  std::filesystem::remove_all(tmp_, ec);  // a stale folder of a crashed run with our pid
  if (::mkdir(tmp_.c_str(), 0755) != 0) fail(op, "cannot create '" + tmp_ + "': " + errno_text());
}

StagingDir::~StagingDir() {
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
  }
}

void StagingDir::commit() {
  fsync_dir(tmp_, op_);
  // An existing empty <out> is replaced by rename(2) (allowed for an empty target directory).
  if (::rename(tmp_.c_str(), out_.c_str()) != 0)
    fail(op_, "cannot rename '" + tmp_ + "' to '" + out_ + "': " + errno_text());
  committed_ = true;
  fsync_dir(parent_dir(out_), op_);
}

void write_text_output(const std::string& path, const std::string& text, const char* op) {
  if (path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      fail(op, "cannot write to stdout: " + errno_text());
    return;
  }
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail(op, "cannot open '" + path + "' for writing: " + errno_text());
    try {
      write_all(fd, text.data(), text.size(), path, op);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (::close(fd) != 0) fail(op, "cannot close '" + path + "': " + errno_text());
    return;
  }
  write_file_atomic(path, op, [&](int fd, const std::string& tmp) { write_all(fd, text.data(), text.size(), tmp, op); });
}

}  // namespace nvfp4::io
