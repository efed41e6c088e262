// nvfp4/safetensors.h -- a validating safetensors reader (mmap) and an atomic writer.
//
// File layout (safetensors spec, docs/nvfp4-format.md "safetensors"):
//   u64 little-endian N | N bytes of UTF-8 JSON (starts with '{', may be space padded) | buffer
//   header: {"name": {"dtype": "U8", "shape": [..], "data_offsets": [begin, end]}, ...,
//            "__metadata__": {str: str}}   offsets relative to the buffer start.
// The reader rejects, with an nvfp4::Error naming the file and the defect, every violation the
// spec lists: short file, header length > 100,000,000 or past the file end, header not a JSON
// object starting with '{', duplicate keys, missing/mistyped dtype/shape/data_offsets, unknown
// dtype, begin > end, end - begin != numel * bits / 8, holes or overlaps between tensors, data
// not ending exactly at the file end, non-string metadata.
// Sub-byte dtypes (F4, F6_*) store the logical (unpacked) shape; numel * bits must be a
// multiple of 8 (the official reader's rule: no partial trailing byte), otherwise an error.
//
// The writer pads the header with spaces to a multiple of 8, orders tensors by dtype width
// (widest first) then name so every tensor starts aligned to its element size, and writes
// atomically: <path>.tmp.<pid> in the same directory, fsync, rename, fsync the directory. On
// any failure the temporary file is removed and an existing <path> is left untouched.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace nvfp4 {

// Bits per element of a safetensors dtype name ("F32" -> 32, "F4" -> 4); -1 if unknown.
int safetensors_dtype_bits(const std::string& dtype);

// Bytes of a tensor: numel * bits / 8. Throws Error (op "safetensors") on overflow or when
// numel * bits is not a multiple of 8. `what` names the tensor in the message.
std::uint64_t safetensors_nbytes(const std::string& dtype, const std::vector<std::int64_t>& shape,
                                 const std::string& what);

struct SafetensorsEntry {
  std::string name;
  std::string dtype;                 // as in the file: "F32", "U8", "F8_E4M3", "F4", ...
  std::vector<std::int64_t> shape;   // logical shape (for F4: unpacked elements)
  std::uint64_t begin = 0;           // offsets in the data buffer
  std::uint64_t end = 0;
  std::uint64_t nbytes() const { return end - begin; }
};

// A read-only, memory-mapped, fully validated safetensors file. Movable, not copyable.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // throws Error on any defect
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const;
  const std::vector<SafetensorsEntry>& entries() const;  // sorted by name
  const SafetensorsEntry* find(const std::string& name) const;  // nullptr if absent
  const SafetensorsEntry& at(const std::string& name) const;    // throws Error if absent
  const std::uint8_t* data(const SafetensorsEntry& e) const;    // points into the mapping
  const std::map<std::string, std::string>& metadata() const;
  std::uint64_t file_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One tensor to write; `data` is borrowed and must stay valid during the call.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::uint64_t nbytes = 0;  // must equal numel * bits / 8
};

// Serialized size of a file holding these tensors (header + padding + data). Validates like
// write_safetensors.
std::uint64_t safetensors_file_size(const std::vector<SafetensorsTensor>& tensors,
                                    const std::map<std::string, std::string>& metadata = {});

// Write atomically (see above). Validates names (non-empty, unique, not "__metadata__"),
// dtypes, shapes and sizes first and throws Error without touching the file system.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace nvfp4
