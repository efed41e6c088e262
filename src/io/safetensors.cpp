// io/safetensors.cpp -- validating mmap reader and atomic writer for safetensors files.
// The rules checked are the spec's (see nvfp4/safetensors.h); every error names the file.
#include "nvfp4/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "io/file_util.h"
#include "io/json_util.h"
#include "nvfp4/error.h"

namespace nvfp4 {
namespace {

constexpr const char* kOp = "safetensors";
constexpr std::uint64_t kMaxHeader = 100000000;  // spec: header at most 100 MB
constexpr const char* kMetadataKey = "__metadata__";

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  fail(kOp, "'" + path + "': " + what);
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

int safetensors_dtype_bits(const std::string& d) {
  static const std::pair<const char*, int> kTable[] = {
      {"BOOL", 8},    {"F4", 4},        {"F6_E2M3", 6},  {"F6_E3M2", 6}, {"U8", 8},
      {"I8", 8},      {"F8_E5M2", 8},   {"F8_E4M3", 8},  {"F8_E8M0", 8}, {"I16", 16},
      {"U16", 16},    {"F16", 16},      {"BF16", 16},    {"I32", 32},    {"U32", 32},
      {"F32", 32},    {"C64", 64},      {"F64", 64},     {"I64", 64},    {"U64", 64},
  };
  for (const auto& e : kTable)
    if (d == e.first) return e.second;
  return -1;
}

std::uint64_t safetensors_nbytes(const std::string& dtype, const std::vector<std::int64_t>& shape,
                                 const std::string& what) {
  const int bits = safetensors_dtype_bits(dtype);
  if (bits < 0) fail(kOp, what + ": unknown dtype '" + dtype + "'");
  std::uint64_t numel = 1;
  for (std::int64_t d : shape) {
    if (d < 0) fail(kOp, what + ": negative dimension in shape " + shape_str(shape));
    if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(d), &numel))
      fail(kOp, what + ": shape " + shape_str(shape) + " overflows 64 bits");
  }
  std::uint64_t nbits = 0;
  if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(bits), &nbits))
    fail(kOp, what + ": shape " + shape_str(shape) + " overflows 64 bits");
  if (nbits % 8 != 0)
    fail(kOp, what + ": " + std::to_string(numel) + " elements of " + dtype + " (" +
                  std::to_string(bits) + " bits) do not fill whole bytes");
  return nbits / 8;
}

struct SafetensorsFile::Impl {
  std::string path;
  int fd = -1;
  void* map = nullptr;
  std::uint64_t size = 0;
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;

  ~Impl() {
    if (map) ::munmap(map, static_cast<std::size_t>(size));
    if (fd >= 0) ::close(fd);
  }
  const std::uint8_t* base() const { return static_cast<const std::uint8_t*>(map); }
  void open_and_validate();
};

void SafetensorsFile::Impl::open_and_validate() {
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) bad(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) bad(path, std::string("cannot stat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) bad(path, "not a regular file");
  size = static_cast<std::uint64_t>(st.st_size);
  if (size < 8) bad(path, "file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  map = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    map = nullptr;
    bad(path, std::string("cannot mmap: ") + std::strerror(errno));
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | base()[i];  // little-endian u64
  if (n > kMaxHeader)
    bad(path, "header length " + std::to_string(n) + " exceeds the 100,000,000-byte limit");
  if (n > size - 8)
    bad(path, "header length " + std::to_string(n) + " runs past the end of the " + std::to_string(size) +
                  "-byte file");
  if (n == 0 || base()[8] != '{') bad(path, "header does not start with '{'");
  data_start = 8 + n;
  // JSON never contains a raw NUL (strings escape it); nlohmann would stop reading there and
  // accept NUL padding that the official reader rejects.
  if (const void* z = std::memchr(base() + 8, 0, static_cast<std::size_t>(n)))
    bad(path, "header contains a NUL byte at offset " +
                  std::to_string(static_cast<const std::uint8_t*>(z) - base()) + " (not valid JSON)");

  // Duplicate keys at any depth are errors: which of two entries for one tensor is meant?
  const json h = io::parse_json(reinterpret_cast<const char*>(base() + 8), reinterpret_cast<const char*>(base() + 8 + n),
                                kOp, "'" + path + "': header", /*duplicate_keys_are_errors=*/true);
  if (!h.is_object()) bad(path, "header is not a JSON object");

  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == kMetadataKey) {
      if (!v.is_object()) bad(path, "__metadata__ is not an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          bad(path, "__metadata__ value of '" + m.key() + "' is not a string (" + m.value().type_name() + ")");
        metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string what = "tensor '" + name + "'";
    if (!v.is_object()) bad(path, what + " is not a JSON object");
    const auto dt = v.find("dtype");
    const auto sh = v.find("shape");
    const auto off = v.find("data_offsets");
    if (dt == v.end()) bad(path, what + " has no dtype");
    if (sh == v.end()) bad(path, what + " has no shape");
    if (off == v.end()) bad(path, what + " has no data_offsets");
    if (!dt->is_string()) bad(path, what + ": dtype is not a string");
    SafetensorsEntry e;
    e.name = name;
    e.dtype = dt->get<std::string>();
    if (safetensors_dtype_bits(e.dtype) < 0) bad(path, what + ": unknown dtype '" + e.dtype + "'");
    if (!sh->is_array()) bad(path, what + ": shape is not an array");
    for (const json& d : *sh) {
      // JSON numbers: -1 is number_integer, 1.5 is number_float; only unsigned is a dimension.
      if (!d.is_number_unsigned())
        bad(path, what + ": shape entry " + io::json_excerpt(d) + " is not a non-negative integer");
      const std::uint64_t u = d.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) bad(path, what + ": shape entry " + io::json_excerpt(d) + " is too large");
      e.shape.push_back(static_cast<std::int64_t>(u));
    }
    if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      bad(path, what + ": data_offsets " + io::json_excerpt(*off) + " is not [begin, end] of non-negative integers");
    e.begin = (*off)[0].get<std::uint64_t>();
    e.end = (*off)[1].get<std::uint64_t>();
    if (e.begin > e.end)
      bad(path, what + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                    "] has begin > end");
    // Its errors read as bad()'s: "[safetensors] 'path': what: ...".
    const std::uint64_t expect = safetensors_nbytes(e.dtype, e.shape, "'" + path + "': " + what);
    if (e.end - e.begin != expect)
      bad(path, what + ": data_offsets span " + std::to_string(e.end - e.begin) + " bytes but " + e.dtype +
                    " " + shape_str(e.shape) + " needs " + std::to_string(expect));
    entries.push_back(std::move(e));
  }

  // Coverage: sorted by offset, each tensor starts where the previous one ended.
  std::vector<const SafetensorsEntry*> by_off;
  for (const auto& e : entries) by_off.push_back(&e);
  std::sort(by_off.begin(), by_off.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t cursor = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry* e : by_off) {
    if (e->begin > cursor)
      bad(path, "hole of " + std::to_string(e->begin - cursor) + " bytes in the data buffer before tensor '" +
                    e->name + "' (offsets " + std::to_string(cursor) + ".." + std::to_string(e->begin) + ")");
    if (e->begin < cursor)
      bad(path, "tensor '" + e->name + "' (offset " + std::to_string(e->begin) + ") overlaps tensor '" +
                    (prev ? prev->name : std::string("?")) + "' (ends at " + std::to_string(cursor) + ")");
    cursor = e->end;
    prev = e;
  }
  const std::uint64_t buffer = size - data_start;
  if (cursor > buffer)
    bad(path, "tensor data ends at buffer offset " + std::to_string(cursor) + ", past the end of the " +
                  std::to_string(buffer) + "-byte data buffer (file truncated?)");
  if (cursor < buffer)
    bad(path, std::to_string(buffer - cursor) + " trailing bytes after the last tensor (buffer is " +
                  std::to_string(buffer) + " bytes, tensors cover " + std::to_string(cursor) + ")");
  std::sort(entries.begin(), entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.name < b.name; });
}

SafetensorsFile::SafetensorsFile(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->open_and_validate();  // on throw, ~Impl unmaps and closes
}
SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;

const std::string& SafetensorsFile::path() const { return impl_->path; }
const std::vector<SafetensorsEntry>& SafetensorsFile::entries() const { return impl_->entries; }
const std::map<std::string, std::string>& SafetensorsFile::metadata() const { return impl_->metadata; }
std::uint64_t SafetensorsFile::file_size() const { return impl_->size; }

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  const auto& v = impl_->entries;
  auto it = std::lower_bound(v.begin(), v.end(), name,
                             [](const SafetensorsEntry& e, const std::string& n) { return e.name < n; });
  return it != v.end() && it->name == name ? &*it : nullptr;
}

const SafetensorsEntry& SafetensorsFile::at(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) bad(impl_->path, "no tensor named '" + name + "'");
  return *e;
}

const std::uint8_t* SafetensorsFile::data(const SafetensorsEntry& e) const {
  return impl_->base() + impl_->data_start + e.begin;
}

namespace {

struct Plan {
  std::string header;  // padded
  std::vector<const SafetensorsTensor*> order;
  std::uint64_t data_bytes = 0;
};

Plan plan_file(const std::vector<SafetensorsTensor>& tensors, const std::map<std::string, std::string>& metadata,
               const std::string& path) {
  Plan p;
  std::set<std::string> names;
  for (const auto& t : tensors) {
    const std::string what = "writing '" + path + "': tensor '" + t.name + "'";
    if (t.name.empty()) fail(kOp, "writing '" + path + "': empty tensor name");
    if (t.name == kMetadataKey) fail(kOp, what + ": name is reserved");
    if (!names.insert(t.name).second) fail(kOp, what + " appears twice");
    const std::uint64_t need = safetensors_nbytes(t.dtype, t.shape, what);
    if (need != t.nbytes)
      fail(kOp, what + ": " + t.dtype + " " + shape_str(t.shape) + " needs " + std::to_string(need) +
                    " bytes, got " + std::to_string(t.nbytes));
    if (t.nbytes > 0 && t.data == nullptr) fail(kOp, what + ": null data");
    p.order.push_back(&t);
  }
  // Widest dtype first, then by name: every tensor then starts at a multiple of its element
  // size (the header is padded to 8), which lets readers use the mapping without copies.
  std::sort(p.order.begin(), p.order.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
    const int ba = safetensors_dtype_bits(a->dtype), bb = safetensors_dtype_bits(b->dtype);
    return ba != bb ? ba > bb : a->name < b->name;
  });
  json h = json::object();
  if (!metadata.empty()) h[kMetadataKey] = metadata;
  std::uint64_t off = 0;
  for (const SafetensorsTensor* t : p.order) {
    h[t->name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {off, off + t->nbytes}}};
    off += t->nbytes;
  }
  p.data_bytes = off;
  p.header = h.dump();
  p.header.append((8 - p.header.size() % 8) % 8, ' ');
  if (p.header.size() > kMaxHeader)
    fail(kOp, "writing '" + path + "': header of " + std::to_string(p.header.size()) +
                  " bytes exceeds the 100,000,000-byte limit");
  return p;
}

}  // namespace

std::uint64_t safetensors_file_size(const std::vector<SafetensorsTensor>& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  const Plan p = plan_file(tensors, metadata, "(size estimate)");
  return 8 + p.header.size() + p.data_bytes;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const Plan p = plan_file(tensors, metadata, path);
  io::check_output_file(path, kOp);
  io::write_file_atomic(path, kOp, [&](int fd, const std::string& tmp) {
    std::uint8_t len[8];
    std::uint64_t n = p.header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(n >> (8 * i));
    io::write_all(fd, len, 8, tmp, kOp);
    io::write_all(fd, p.header.data(), p.header.size(), tmp, kOp);
    for (const SafetensorsTensor* t : p.order) io::write_all(fd, t->data, t->nbytes, tmp, kOp);
  });
}

}  // namespace nvfp4
