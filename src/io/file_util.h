// io/file_util.h -- internal: POSIX file helpers for atomic outputs.
//
// Atomic file: write <path>.tmp.<pid> in the same directory, fsync it, rename over <path>,
// fsync the directory (rename is atomic within one file system; the directory fsync makes the
// new name durable). Atomic folder: build everything in <out>.tmp.<pid> next to <out>, then
// rename the folder. Either way a failure leaves no trace at <path>/<out>.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace nvfp4::io {

std::string parent_dir(const std::string& path);  // "." when path has no slash
std::string base_name(const std::string& path);
std::string join_path(const std::string& dir, const std::string& name);
bool path_exists(const std::string& path);
bool is_directory(const std::string& path);
bool is_regular_file(const std::string& path);
// A whole regular file (config.json, an index, a tuning table): Error(op) for anything else
// (a FIFO, a device such as /dev/zero, a folder) and for files over kMaxTextFileBytes.
constexpr std::uint64_t kMaxTextFileBytes = std::uint64_t{256} << 20;  // the largest real index is ~1 MB
std::string read_text_file(const std::string& path, const char* op);
// The first line of a file, "" if it cannot be read (probes of /proc and /sys that may be absent).
std::string first_line_or_empty(const std::string& path);

// Refuses (Error(op)) an output that is the input file itself, or lies inside the input folder:
// the atomic rename would replace the input, or the folder would gain a shard it does not index.
void check_output_not_input(const std::string& in, const std::string& out, const char* op);

// Write all of [data, data+n) to fd; throws Error(op) naming `path` on failure.
void write_all(int fd, const void* data, std::uint64_t n, const std::string& path, const char* op);
void fsync_dir(const std::string& dir, const char* op);

// Create <path>.tmp.<pid>, call fill(fd, tmp_path), fsync, close, rename to path, fsync the
// directory. Any exception (from fill or the file system) removes the temporary file and is
// rethrown; path is then unchanged. A symlink path replaces its target (the link stays); a
// path that is a device, a pipe or a folder is an Error (nothing can replace it atomically).
void write_file_atomic(const std::string& path, const char* op,
                       const std::function<void(int fd, const std::string& tmp_path)>& fill);

// A report or table written where the user said: "-" is stdout; a symlink, device or pipe
// (/dev/stdout, a shell's >(...)) is written in place (a rename would replace the link itself:
// on 2026-12-03 one, run as root, turned /dev/stdout into a regular file); anything else
// atomically (write_file_atomic), so a failure part-way leaves the previous file or none.
void write_text_output(const std::string& path, const std::string& text, const char* op);

// A staging folder <out>.tmp.<pid> that is removed (recursively) on destruction unless
// commit() renamed it to <out>. The constructor checks <out> can be created: its parent is a
// directory and <out> does not exist or is an empty directory.
class StagingDir {
 public:
  StagingDir(const std::string& out, const char* op);
  ~StagingDir();
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;
  const std::string& path() const { return tmp_; }
  void commit();

 private:
  std::string out_, tmp_;
  const char* op_;
  bool committed_ = false;
};

// Checks (without creating anything) that `out` can be created as a new checkpoint folder.
void check_output_dir(const std::string& out, const char* op);
// Checks that `out` can be (re)placed as a file: parent is a directory, out is not a directory.
void check_output_file(const std::string& out, const char* op);

}  // namespace nvfp4::io
