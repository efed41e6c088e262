// io/checkpoint.cpp -- open/validate/detect checkpoints (file or folder, sharded or not) in the
// modelopt / compressed-tensors / MLX / dense layouts, and write them back atomically.
// Names and config values come from io/layouts.h (one place to correct them).
#include "nvfp4/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "format/validate.h"
#include "io/file_util.h"
#include "io/json_util.h"
#include "io/layouts.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "MLX uint32 packing is read as the U8 stream: little-endian hosts only"
#endif

namespace nvfp4 {
namespace {

constexpr const char* kOp = "checkpoint";
using json = nlohmann::json;
namespace L = layouts;
namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::int64_t numel_of(const std::vector<std::int64_t>& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

json parse_json_file(const std::string& path) {
  return io::parse_json(io::read_text_file(path, kOp), kOp, "'" + path + "'");
}

// A shard name from an index must be a plain file name inside the folder.
void check_shard_name(const std::string& index_path, const std::string& f) {
  if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
    fail(kOp, "'" + index_path + "': shard name '" + f + "' is not a plain file name in the folder");
}

}  // namespace

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kModelopt: return "modelopt";
    case Layout::kCompressedTensors: return "compressed-tensors";
    case Layout::kMlx: return "mlx";
    default: return "dense";
  }
}

Layout layout_for_recipe(Recipe r) {
  switch (r) {
    case Recipe::kModelopt: return Layout::kModelopt;
    case Recipe::kCompressedTensors: return Layout::kCompressedTensors;
    default: return Layout::kMlx;
  }
}

QuantizedNames quantized_names(Layout l, const std::string& p) {
  switch (l) {
    case Layout::kModelopt:
      return {p + L::kModeloptPacked, p + L::kModeloptScales, p + L::kModeloptTensorScale,
              {p + L::kModeloptInputScale}};
    case Layout::kCompressedTensors:
      return {p + L::kCtPacked, p + L::kCtScales, p + L::kCtTensorScale,
              {p + L::kCtInputScale, p + L::kCtWeightShape}};
    case Layout::kMlx: return {p + L::kMlxPacked, p + L::kMlxScales, p + L::kMlxTensorScale, {}};
    default: fail(kOp, "a dense layout has no quantized tensor names");
  }
}

static ScaleConvention convention_of(Layout l) {
  switch (l) {
    case Layout::kModelopt: return ScaleConvention::kDequant;
    case Layout::kCompressedTensors: return ScaleConvention::kQuant;
    default: return ScaleConvention::kAmax;
  }
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------
struct Checkpoint::Impl {
  std::string path;
  bool folder = false;
  std::vector<SafetensorsFile> shards;
  std::map<std::string, std::size_t> where;  // tensor -> shard index
  std::vector<std::string> names;
  Layout layout = Layout::kDense;
  std::vector<std::string> prefixes;
  std::vector<std::string> fp8_prefixes;  // FP8 linears of a mixed-precision modelopt export
  std::set<std::string> quantized_tensors;
  std::string config_text;

  const SafetensorsEntry& entry(const std::string& name) const {
    auto it = where.find(name);
    if (it == where.end()) fail(kOp, "'" + path + "': no tensor named '" + name + "'");
    return shards[it->second].at(name);
  }
  const SafetensorsFile& file_of(const std::string& name) const {
    entry(name);
    return shards[where.at(name)];
  }
  std::string err(const std::string& what) const { return "'" + path + "': " + what; }

  void add_shard(const std::string& file) {
    shards.emplace_back(file);
    const std::size_t idx = shards.size() - 1;
    for (const auto& e : shards.back().entries()) {
      auto [it, fresh] = where.emplace(e.name, idx);
      if (!fresh)
        fail(kOp, err("tensor '" + e.name + "' appears in both '" + shards[it->second].path() + "' and '" +
                      file + "'"));
    }
  }
  void open_folder();
  void detect_layout();
};

void Checkpoint::Impl::open_folder() {
  const std::string index = io::join_path(path, L::kIndexFile);
  if (io::path_exists(index)) {
    const json j = parse_json_file(index);
    if (!j.is_object()) fail(kOp, "'" + index + "' is not a JSON object");
    auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object()) fail(kOp, "'" + index + "' has no \"weight_map\" object");
    std::map<std::string, std::string> map;  // tensor -> shard file
    std::set<std::string> files;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string())
        fail(kOp, "'" + index + "': weight_map entry '" + it.key() + "' is not a file name string");
      const std::string f = it.value().get<std::string>();
      check_shard_name(index, f);
      map[it.key()] = f;
      files.insert(f);
    }
    if (files.empty()) fail(kOp, "'" + index + "': weight_map is empty");
    for (const auto& f : files) {
      const std::string fp = io::join_path(path, f);
      if (!io::is_regular_file(fp)) fail(kOp, "'" + index + "' names shard '" + f + "', which does not exist");
      add_shard(fp);
    }
    for (const auto& [name, f] : map) {
      auto it = where.find(name);
      if (it == where.end())
        fail(kOp, "'" + index + "': tensor '" + name + "' is mapped to '" + f + "' but is not in it");
      if (io::base_name(shards[it->second].path()) != f)
        fail(kOp, "'" + index + "': tensor '" + name + "' is mapped to '" + f + "' but is stored in '" +
                      shards[it->second].path() + "'");
    }
    for (const auto& [name, idx] : where)
      if (!map.count(name))
        fail(kOp, "'" + index + "': tensor '" + name + "' in '" + shards[idx].path() + "' is missing from weight_map");
    auto md = j.find("metadata");
    if (md != j.end() && md->is_object()) {
      auto ts = md->find("total_size");
      if (ts != md->end()) {
        std::uint64_t total = 0;
        for (const auto& s : shards)
          for (const auto& e : s.entries()) total += e.nbytes();
        if (!ts->is_number() || ts->get<double>() != static_cast<double>(total))
          fail(kOp, "'" + index + "': metadata.total_size " + io::json_excerpt(*ts) + " != the shards' tensor bytes " +
                        std::to_string(total));
      }
    }
  } else {
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& de : fs::directory_iterator(path, ec)) {
      if (!ends_with(de.path().filename().string(), ".safetensors")) continue;
      std::error_code se;  // the non-throwing form: a symlink loop gets this reader's message
      const bool regular = de.is_regular_file(se);
      if (se) fail(kOp, err("cannot read '" + de.path().string() + "': " + se.message()));
      if (regular) files.push_back(de.path().string());
    }
    if (ec) fail(kOp, err("cannot list the folder: " + ec.message()));
    if (files.empty()) fail(kOp, err("folder has no *.safetensors file and no " + std::string(L::kIndexFile)));
    std::sort(files.begin(), files.end());
    for (const auto& f : files) add_shard(f);
  }
  const std::string cfg = io::join_path(path, L::kConfigFile);
  if (io::is_regular_file(cfg)) {
    config_text = io::read_text_file(cfg, kOp);
    const json c = io::parse_json(config_text, kOp, "'" + cfg + "'");
    if (!c.is_object()) fail(kOp, "'" + cfg + "' is not a JSON object");
  }
}

void Checkpoint::Impl::detect_layout() {
  std::set<std::string> mo, ct, mlx;
  for (const auto& n : names) {
    if (ends_with(n, L::kModeloptTensorScale)) mo.insert(n.substr(0, n.size() - std::strlen(L::kModeloptTensorScale)));
    if (ends_with(n, L::kCtPacked)) ct.insert(n.substr(0, n.size() - std::strlen(L::kCtPacked)));
    if (ends_with(n, L::kMlxScales)) {
      const std::string p = n.substr(0, n.size() - std::strlen(L::kMlxScales));
      auto w = where.find(p + L::kMlxPacked);
      if (w != where.end() && shards[w->second].at(p + L::kMlxPacked).dtype == "U32") mlx.insert(p);
    }
  }
  const int kinds = !mo.empty() + !ct.empty() + !mlx.empty();
  if (kinds > 1)
    fail(kOp, err(std::string("mixes quantized layouts (") + (mo.empty() ? "" : "modelopt ") +
                  (ct.empty() ? "" : "compressed-tensors ") + (mlx.empty() ? "" : "mlx") + ")"));
  std::set<std::string> pre;
  if (!mo.empty()) layout = Layout::kModelopt, pre = mo;
  if (!ct.empty()) layout = Layout::kCompressedTensors, pre = ct;
  if (!mlx.empty()) layout = Layout::kMlx, pre = mlx;
  prefixes.assign(pre.begin(), pre.end());

  // Cross-check config.json: a quant_method that is not this layout's means we would misread.
  if (!config_text.empty()) {
    const json c = io::parse_json(config_text, kOp, "config.json");
    auto qc = c.find("quantization_config");
    if (qc != c.end() && qc->is_object()) {
      auto qm = qc->find("quant_method");
      const std::string method = qm != qc->end() && qm->is_string() ? qm->get<std::string>() : "";
      if (method == L::kModeloptQuantMethod && layout != Layout::kModelopt)
        fail(kOp, err("config.json says quant_method \"modelopt\" but there are no NVFP4 (" +
                      std::string(L::kModeloptTensorScale) + ") tensors; only NVFP4 is supported"));
      if (method == L::kCtQuantMethod && layout != Layout::kCompressedTensors)
        fail(kOp, err("config.json says quant_method \"compressed-tensors\" but there are no " +
                      std::string(L::kCtPacked) + " tensors; only nvfp4-pack-quantized is supported"));
      if (method == L::kCtQuantMethod) {
        auto f = qc->find("format");
        if (f != qc->end() && f->is_string() && f->get<std::string>() != L::kCtFormat)
          fail(kOp, err("config.json quantization_config.format is \"" + f->get<std::string>() +
                        "\", expected \"" + L::kCtFormat + "\""));
      }
    }
    auto q = c.find("quantization");
    if (layout == Layout::kMlx && q != c.end() && q->is_object()) {
      auto mode = q->find("mode");
      const std::string m = mode != q->end() && mode->is_string() ? mode->get<std::string>() : "affine";
      if (m != L::kMlxMode) fail(kOp, err("config.json quantization.mode is \"" + m + "\", not \"nvfp4\""));
    }
  }

  for (const auto& p : prefixes) {
    const QuantizedNames qn = quantized_names(layout, p);
    // MLX's global scale is optional: mlx-lm's QuantizedLinear writes none (tensor scale 1).
    const bool scale_optional = layout == Layout::kMlx;
    for (const std::string* n : {&qn.packed, &qn.scales, &qn.tensor_scale})
      if (!where.count(*n) && !(scale_optional && n == &qn.tensor_scale))
        fail(kOp, err("quantized linear '" + p + "' has no tensor '" + *n + "'"));
    quantized_tensors.insert(qn.packed);
    quantized_tensors.insert(qn.scales);
    if (where.count(qn.tensor_scale)) quantized_tensors.insert(qn.tensor_scale);
    for (const auto& o : qn.optional)
      if (where.count(o)) quantized_tensors.insert(o);
    if (layout == Layout::kMlx && where.count(p + ".biases"))
      fail(kOp, err("'" + p + "' has MLX affine biases ('" + p + ".biases'): not an nvfp4 weight"));
  }
  // A scale tensor without its linear is a truncated or foreign checkpoint -- or, in a modelopt
  // mixed-precision export (hf_quant_config MIXED_PRECISION: NVFP4 MLPs, FP8 attention), an FP8
  // linear: <p>.weight F8_E4M3 [N, K] with an F32 scale per tensor or per row.
  if (layout == Layout::kModelopt)
    for (const auto& n : names) {
      if (!ends_with(n, L::kModeloptScales) || quantized_tensors.count(n)) continue;
      const std::string p = n.substr(0, n.size() - std::strlen(L::kModeloptScales));
      const auto w = where.find(p + L::kModeloptPacked);
      bool fp8 = false;
      if (w != where.end()) {
        const SafetensorsEntry& we = shards[w->second].at(w->first);
        const SafetensorsEntry& se = entry(n);
        const std::int64_t sn = numel_of(se.shape);
        fp8 = we.dtype == "F8_E4M3" && we.shape.size() == 2 && se.dtype == "F32" &&
              (sn == 1 || sn == we.shape[0]);
      }
      if (!fp8)
        fail(kOp, err("'" + n + "' has no matching '" + L::kModeloptTensorScale +
                      "' and is not an FP8 linear's scale (F8_E4M3 weight, F32 scale per tensor or row): "
                      "a truncated or foreign checkpoint?"));
      // Checked here, not when the weight is materialized, so that inspect (which reads no
      // weight) refuses what dequantize would: the scales are N floats at most.
      const SafetensorsEntry& se = entry(n);
      const std::uint8_t* sd = file_of(n).data(se);
      for (std::uint64_t i = 0; i < se.nbytes() / 4; ++i) {
        float v;
        std::memcpy(&v, sd + 4 * i, 4);
        if (!std::isfinite(v) || v < 0.0f)
          fail(kOp, err("FP8 linear '" + p + "': weight_scale[" + std::to_string(i) + "] = " + std::to_string(v) +
                        " must be finite and non-negative"));
      }
      fp8_prefixes.push_back(p);
      for (const std::string& t : {p + L::kModeloptPacked, n, p + L::kModeloptInputScale})
        if (where.count(t)) quantized_tensors.insert(t);
    }
  std::sort(fp8_prefixes.begin(), fp8_prefixes.end());
  if (layout == Layout::kCompressedTensors) {
    for (const auto& n : names)
      if (ends_with(n, L::kCtTensorScale) && !quantized_tensors.count(n))
        fail(kOp, err("'" + n + "' has no matching '" + L::kCtPacked + "'"));
    for (const auto& p : prefixes)  // which of the two would a loader take?
      if (where.count(p + ".weight"))
        fail(kOp, err("'" + p + "' has both a dense '" + p + ".weight' and a packed '" + p + L::kCtPacked + "'"));
  }
  // Every tensor not claimed above is dense and is copied as such (dequantize, quantize). Packed
  // codes, FP8 values or scales among them mean a linear lost part of itself -- a truncated or
  // hand-edited file -- and copying them into a "dense" output would be silently wrong.
  if (layout != Layout::kDense) {
    std::vector<const char*> scale_names;
    if (layout == Layout::kModelopt) scale_names = {L::kModeloptScales, L::kModeloptTensorScale};
    if (layout == Layout::kCompressedTensors) scale_names = {L::kCtScales, L::kCtTensorScale, L::kCtPacked};
    if (layout == Layout::kMlx) scale_names = {L::kMlxScales, L::kMlxTensorScale};
    for (const auto& n : names) {
      if (quantized_tensors.count(n)) continue;
      const std::string& dt = entry(n).dtype;
      bool stray = ends_with(n, ".weight") && (dt == "U8" || dt == "U32" || dt == "F8_E4M3");
      for (const char* sfx : scale_names) stray = stray || ends_with(n, sfx);
      if (stray)
        fail(kOp, err("'" + n + "' (" + dt + ") is quantization data of no complete " + layout_name(layout) +
                      " linear (its packed weight or scales are missing): a truncated or edited checkpoint?" +
                      (dt == "F8_E4M3" && layout != Layout::kModelopt
                           ? " (FP8 linears are read in modelopt mixed-precision checkpoints only)"
                           : "")));
    }
  }
}

Checkpoint::Checkpoint(const std::string& path) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  if (io::is_directory(path)) {
    m.folder = true;
    m.open_folder();
  } else if (io::is_regular_file(path)) {
    m.add_shard(path);
  } else {
    fail(kOp, "'" + path + "': " + (io::path_exists(path) ? "not a regular file or a folder" : "no such file or folder"));
  }
  for (const auto& [n, i] : m.where) m.names.push_back(n);
  m.detect_layout();
}

Checkpoint::~Checkpoint() = default;
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;

const std::string& Checkpoint::path() const { return impl_->path; }
bool Checkpoint::is_folder() const { return impl_->folder; }
Layout Checkpoint::layout() const { return impl_->layout; }
const std::vector<std::string>& Checkpoint::names() const { return impl_->names; }
bool Checkpoint::contains(const std::string& n) const { return impl_->where.count(n) != 0; }
const std::vector<std::string>& Checkpoint::quantized_prefixes() const { return impl_->prefixes; }
bool Checkpoint::is_quantized_tensor(const std::string& n) const { return impl_->quantized_tensors.count(n) != 0; }
const std::vector<std::string>& Checkpoint::fp8_prefixes() const { return impl_->fp8_prefixes; }

Tensor Checkpoint::fp8_dense(const std::string& p, DType dt) const {
  const Impl& m = *impl_;
  if (!std::binary_search(m.fp8_prefixes.begin(), m.fp8_prefixes.end(), p))
    fail(kOp, m.err("no FP8 linear '" + p + "'"));
  detail::check_dtype(kOp, dt, m.err("FP8 linear '" + p + "': output"));
  const RawTensor w = raw(p + L::kModeloptPacked), s = raw(p + L::kModeloptScales);
  const std::int64_t n = w.shape[0], k = w.shape[1];  // N * K bytes: the safetensors reader checked them
  const std::size_t ns = static_cast<std::size_t>(s.nbytes / 4);
  std::vector<float> scale(ns);
  std::memcpy(scale.data(), s.data, ns * 4);  // finite and non-negative: checked at open
  Tensor t(dt, {n, k});
  if (n == 0 || k == 0) return t;  // (an [2^62, 0] weight would spin through its empty rows)
  for (std::int64_t r = 0; r < n; ++r) {
    const float sr = scale[ns == 1 ? 0 : static_cast<std::size_t>(r)];
    for (std::int64_t c = 0; c < k; ++c) {
      const std::uint8_t b = w.data[r * k + c];
      if (e4m3_is_nan(b))
        fail(kOp, m.err("FP8 linear '" + p + "': weight [" + std::to_string(r) + ", " + std::to_string(c) +
                        "] is NaN (byte 0x" + (b == 0x7F ? std::string("7F") : std::string("FF")) + ")"));
      t.set(r * k + c, e4m3_to_float(b) * sr);
    }
  }
  return t;
}
const std::string& Checkpoint::config_json() const { return impl_->config_text; }
std::string Checkpoint::folder() const { return impl_->folder ? impl_->path : std::string(); }

std::vector<std::string> Checkpoint::shard_paths() const {
  std::vector<std::string> r;
  for (const auto& s : impl_->shards) r.push_back(s.path());
  return r;
}

const std::string& Checkpoint::shard_of(const std::string& name) const { return impl_->file_of(name).path(); }

std::uint64_t Checkpoint::total_bytes() const {
  std::uint64_t t = 0;
  for (const auto& s : impl_->shards)
    for (const auto& e : s.entries()) t += e.nbytes();
  return t;
}

RawTensor Checkpoint::raw(const std::string& name) const {
  const SafetensorsEntry& e = impl_->entry(name);
  return {e.name, e.dtype, e.shape, impl_->file_of(name).data(e), e.nbytes()};
}

Tensor Checkpoint::dense(const std::string& name) const {
  const RawTensor r = raw(name);
  Tensor t;
  if (r.dtype == "F32") t.dtype = DType::kF32;
  else if (r.dtype == "F16") t.dtype = DType::kF16;
  else if (r.dtype == "BF16") t.dtype = DType::kBF16;
  else
    fail(kOp, impl_->err("tensor '" + name + "' has dtype " + r.dtype +
                         "; only F32, F16 and BF16 can be read as dense values"));
  t.shape = r.shape;
  try {
    t.bytes.assign(r.data, r.data + r.nbytes);
  } catch (const std::bad_alloc&) {
    fail(kOp, impl_->err("tensor '" + name + "' (" + std::to_string(r.nbytes) + " bytes) does not fit in memory"));
  }
  return t;
}

QuantizedWeight Checkpoint::quantized(const std::string& p) const {
  const Impl& m = *impl_;
  if (m.layout == Layout::kDense) fail(kOp, m.err("is not quantized; no linear '" + p + "'"));
  if (!std::binary_search(m.prefixes.begin(), m.prefixes.end(), p))
    fail(kOp, m.err("no quantized linear '" + p + "' (" + layout_name(m.layout) + " layout)"));
  const QuantizedNames qn = quantized_names(m.layout, p);
  const bool mlx = m.layout == Layout::kMlx;
  // mlx-lm's QuantizedLinear writes no global scale (tensor scale 1): ScaleConvention::kNone.
  const bool no_tensor_scale = mlx && !contains(qn.tensor_scale);
  const RawTensor pk = raw(qn.packed), sc = raw(qn.scales);
  const std::string lin = "quantized linear '" + p + "': ";

  const char* want_packed = mlx ? "U32" : "U8";
  if (pk.dtype != want_packed)
    fail(kOp, m.err(lin + "'" + qn.packed + "' has dtype " + pk.dtype + ", expected " + want_packed));
  if (pk.shape.size() != 2)
    fail(kOp, m.err(lin + "'" + qn.packed + "' has shape " + shape_str(pk.shape) + "; only 2-D weights are supported"));
  QuantizedWeight w;
  w.n = pk.shape[0];
  w.k = detail::mul_or_fail(kOp, pk.shape[1], mlx ? 8 : 2, m.err(lin + "K of '" + qn.packed + "' " + shape_str(pk.shape)));
  if (w.n == 0 || w.k == 0) fail(kOp, m.err(lin + "'" + qn.packed + "' is empty " + shape_str(pk.shape)));
  if (w.k % kBlockSize != 0)
    fail(kOp, m.err(lin + "K=" + std::to_string(w.k) + " (from '" + qn.packed + "' " + shape_str(pk.shape) +
                    ") is not a multiple of 16"));
  if (sc.dtype != "F8_E4M3" && sc.dtype != "U8")
    fail(kOp, m.err(lin + "'" + qn.scales + "' has dtype " + sc.dtype + ", expected F8_E4M3 (or U8)"));
  const std::vector<std::int64_t> want_sc = {w.n, w.k / kBlockSize};
  if (sc.shape != want_sc)
    fail(kOp, m.err(lin + "'" + qn.scales + "' has shape " + shape_str(sc.shape) + ", expected " +
                    shape_str(want_sc) + " for a weight of N=" + std::to_string(w.n) + ", K=" + std::to_string(w.k)));
  float stored = 1.0f;
  w.convention = no_tensor_scale ? ScaleConvention::kNone : convention_of(m.layout);
  if (!no_tensor_scale) {
    const RawTensor ts = raw(qn.tensor_scale);
    if (ts.dtype != "F32" || numel_of(ts.shape) != 1 || ts.shape.size() > 1)
      fail(kOp, m.err(lin + "'" + qn.tensor_scale + "' is " + ts.dtype + " " + shape_str(ts.shape) +
                      ", expected F32 [] or [1]"));
    std::memcpy(&stored, ts.data, 4);  // bit-exact: written back unchanged
  }
  // The rule the writer applies too (zero is the all-zero-tensor policy; CT divides by it).
  detail::check_stored_scale(kOp, w.convention, stored, m.err(lin + "'" + qn.tensor_scale + "'"));
  w.stored_scale = stored;
  if (m.layout == Layout::kCompressedTensors && contains(p + L::kCtWeightShape)) {
    const RawTensor ws = raw(p + L::kCtWeightShape);
    if ((ws.dtype == "I64" || ws.dtype == "I32") && numel_of(ws.shape) == 2) {
      std::int64_t d[2];
      for (int i = 0; i < 2; ++i) {
        if (ws.dtype == "I64") std::memcpy(&d[i], ws.data + 8 * i, 8);
        else { std::int32_t v; std::memcpy(&v, ws.data + 4 * i, 4); d[i] = v; }
      }
      if (d[0] != w.n || d[1] > w.k || d[1] <= w.k - kBlockSize)
        fail(kOp, m.err(lin + "'" + p + L::kCtWeightShape + "' [" + std::to_string(d[0]) + ", " +
                        std::to_string(d[1]) + "] does not match packed N=" + std::to_string(w.n) +
                        ", K=" + std::to_string(w.k)));
    }
  }
  w.scales.assign(sc.data, sc.data + sc.nbytes);
  const std::int64_t kb = w.k / kBlockSize;
  const std::int64_t i = detail::first_nan_scale(w.scales.data(), w.scales.size());
  if (i >= 0)
    fail(kOp, m.err(lin + "block scale '" + qn.scales + "'[" + std::to_string(i / kb) + ", " + std::to_string(i % kb) +
                    "] is NaN (byte 0x" + (w.scales[static_cast<std::size_t>(i)] == 0xFF ? "FF" : "7F") + ")"));
  w.packed.assign(pk.data, pk.data + pk.nbytes);  // MLX: little-endian words == the U8 stream
  return w;
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------
struct CheckpointWriter::Impl {
  std::string out;
  WriterOptions opts;
  bool single_file = false;
  bool committed = false;
  std::vector<SafetensorsTensor> tensors;
  std::set<std::string> names;
  std::set<std::string> quantized;  // prefixes given to add_quantized
  std::vector<std::unique_ptr<std::vector<std::uint8_t>>> owned;

  void add(SafetensorsTensor t) {
    if (committed) fail(kOp, "writer for '" + out + "' is already committed");
    if (!names.insert(t.name).second) fail(kOp, "writing '" + out + "': tensor '" + t.name + "' added twice");
    // MLX reads <p>.biases next to a quantized <p> as affine-mode biases, which the reader (and
    // MLX's nvfp4 mode) refuses: with both, the file would be unreadable. Checked whichever
    // comes first, before any work is spent on the rest.
    const std::string base = ends_with(t.name, ".biases") ? t.name.substr(0, t.name.size() - 7) : "";
    const std::string mate = ends_with(t.name, L::kMlxScales) ? t.name.substr(0, t.name.size() - 7) + ".biases" : "";
    if (opts.layout == Layout::kMlx && ((!base.empty() && quantized.count(base)) || (!mate.empty() && names.count(mate))))
      fail(kOp, "writing '" + out + "': '" + (base.empty() ? mate : t.name) +
                    "' would read as the MLX affine biases of a quantized linear; rename or leave it out");
    const std::uint64_t need = safetensors_nbytes(t.dtype, t.shape, "writing '" + out + "': tensor '" + t.name + "'");
    if (need != t.nbytes)
      fail(kOp, "writing '" + out + "': tensor '" + t.name + "' has " + std::to_string(t.nbytes) +
                    " bytes, its shape needs " + std::to_string(need));
    tensors.push_back(std::move(t));
  }
  const std::uint8_t* keep(std::vector<std::uint8_t> v) {
    owned.push_back(std::make_unique<std::vector<std::uint8_t>>(std::move(v)));
    return owned.back()->data();
  }
  json quant_config() const;
  void write_folder();
};

json CheckpointWriter::Impl::quant_config() const {
  const json excluded = opts.excluded_modules;
  switch (opts.layout) {
    case Layout::kModelopt:
      return {{"quant_method", L::kModeloptQuantMethod},
              {"quant_algo", L::kModeloptQuantAlgo},
              {"kv_cache_quant_algo", nullptr},
              {"group_size", kBlockSize},
              {"exclude_modules", excluded},
              {"producer", {{"name", L::kModeloptProducer}, {"version", opts.producer_version}}}};
    case Layout::kCompressedTensors: {
      const json weights = {{"num_bits", 4},          {"type", "float"},     {"strategy", "tensor_group"},
                            {"group_size", kBlockSize}, {"symmetric", true}, {"dynamic", false},
                            {"observer", "minmax"},   {"actorder", nullptr}, {"block_structure", nullptr}};
      return {{"quant_method", L::kCtQuantMethod},
              {"format", L::kCtFormat},
              {"config_groups",
               {{"group_0",
                 {{"targets", {"Linear"}},
                  {"weights", weights},
                  {"input_activations", nullptr},
                  {"output_activations", nullptr},
                  {"format", L::kCtFormat}}}}},
              {"ignore", excluded},
              {"kv_cache_scheme", nullptr},
              {"quantization_status", "compressed"}};
    }
    case Layout::kMlx: return {{"group_size", kBlockSize}, {"bits", 4}, {"mode", L::kMlxMode}};
    default: return nullptr;
  }
}

void CheckpointWriter::Impl::write_folder() {
  io::StagingDir stage(out, kOp);
  const std::map<std::string, std::string> meta = {{"format", opts.layout == Layout::kMlx ? "mlx" : "pt"}};

  // Greedy sharding in name order: a new shard starts when the next tensor would pass the
  // limit (a single tensor larger than the limit gets a shard of its own, as HF does).
  std::vector<const SafetensorsTensor*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
  std::vector<std::vector<SafetensorsTensor>> shards(1);
  std::uint64_t cur = 0, total = 0;
  for (const SafetensorsTensor* t : order) {
    if (cur > 0 && cur + t->nbytes > opts.max_shard_bytes) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(*t);
    cur += t->nbytes;
    total += t->nbytes;
  }
  if (shards.size() == 1) {
    write_safetensors(io::join_path(stage.path(), L::kSingleFile), shards[0], meta);
  } else {
    json wm = json::object();
    const std::size_t n = shards.size();
    for (std::size_t i = 0; i < n; ++i) {
      char fname[64];
      std::snprintf(fname, sizeof fname, "model-%05zu-of-%05zu.safetensors", i + 1, n);
      write_safetensors(io::join_path(stage.path(), fname), shards[i], meta);
      for (const auto& t : shards[i]) wm[t.name] = fname;
    }
    const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", wm}};
    const std::string text = index.dump(2) + "\n";
    io::write_file_atomic(io::join_path(stage.path(), L::kIndexFile), kOp, [&](int fd, const std::string& tmp) {
      io::write_all(fd, text.data(), text.size(), tmp, kOp);
    });
  }

  auto write_json = [&](const char* file, const json& j) {
    const std::string text = j.dump(2) + "\n";
    io::write_file_atomic(io::join_path(stage.path(), file), kOp, [&](int fd, const std::string& tmp) {
      io::write_all(fd, text.data(), text.size(), tmp, kOp);
    });
  };
  const std::string src = opts.source_folder;
  const std::string src_cfg = src.empty() ? "" : io::join_path(src, L::kConfigFile);
  if (!src.empty() && io::is_regular_file(src_cfg)) {
    json cfg = parse_json_file(src_cfg);
    if (!cfg.is_object()) fail(kOp, "'" + src_cfg + "' is not a JSON object");
    cfg.erase("quantization_config");
    cfg.erase("quantization");
    if (opts.layout != Layout::kDense) cfg["quantization_config"] = quant_config();
    if (opts.layout == Layout::kMlx) cfg["quantization"] = quant_config();
    write_json(L::kConfigFile, cfg);
  }
  if (opts.layout == Layout::kModelopt) {
    const json hf = {{"producer", {{"name", L::kModeloptProducer}, {"version", opts.producer_version}}},
                     {"quantization",
                      {{"quant_algo", L::kModeloptQuantAlgo},
                       {"kv_cache_quant_algo", nullptr},
                       {"group_size", kBlockSize},
                       {"exclude_modules", opts.excluded_modules}}}};
    write_json(L::kHfQuantConfigFile, hf);
  }
  // Side files a loader needs (tokenizer, generation config, chat template); weights in other
  // formats and the files rewritten above are not carried over.
  if (!src.empty()) {
    static const char* kSideExt[] = {".json", ".txt", ".model", ".tiktoken", ".jinja", ".py", ".md"};
    std::error_code ec;
    for (const auto& de : fs::directory_iterator(src, ec)) {
      const std::string f = de.path().filename().string();
      std::error_code se;
      const bool regular = de.is_regular_file(se);
      if (se) fail(kOp, "cannot read '" + de.path().string() + "' (a file to copy into '" + out + "'): " + se.message());
      if (!regular || f == L::kConfigFile || f == L::kHfQuantConfigFile ||
          ends_with(f, ".safetensors.index.json"))
        continue;
      bool side = false;
      for (const char* e : kSideExt) side = side || ends_with(f, e);
      if (!side) continue;
      fs::copy_file(de.path(), io::join_path(stage.path(), f), ec);
      if (ec) fail(kOp, "cannot copy '" + de.path().string() + "' into '" + out + "': " + ec.message());
    }
    if (ec) fail(kOp, "cannot list '" + src + "': " + ec.message());
  }
  stage.commit();
}

CheckpointWriter::CheckpointWriter(std::string out, WriterOptions opts) : impl_(std::make_unique<Impl>()) {
  impl_->out = std::move(out);
  impl_->opts = std::move(opts);
  if (impl_->opts.max_shard_bytes == 0) fail(kOp, "max shard size must be positive");
  if (impl_->opts.producer_version.empty()) impl_->opts.producer_version = "nvfp4 " NVFP4_VERSION_STRING;
  impl_->single_file = ends_with(impl_->out, ".safetensors");
  if (impl_->single_file) io::check_output_file(impl_->out, kOp);
  else io::check_output_dir(impl_->out, kOp);
}

CheckpointWriter::~CheckpointWriter() = default;

void CheckpointWriter::add_raw(const RawTensor& t) { impl_->add({t.name, t.dtype, t.shape, t.data, t.nbytes}); }

void CheckpointWriter::add_dense(const std::string& name, Tensor t) {
  detail::check_tensor(kOp, t, "writing '" + impl_->out + "': tensor '" + name + "'");
  const char* dt = t.dtype == DType::kF32 ? "F32" : t.dtype == DType::kF16 ? "F16" : "BF16";
  const std::uint64_t n = t.bytes.size();
  impl_->add({name, dt, t.shape, impl_->keep(std::move(t.bytes)), n});
}

void CheckpointWriter::add_quantized(const std::string& p, QuantizedWeight w) {
  const Layout l = impl_->opts.layout;
  if (l == Layout::kDense) fail(kOp, "writing '" + impl_->out + "': a dense checkpoint cannot hold quantized '" + p + "'");
  const bool mlx_none = l == Layout::kMlx && w.convention == ScaleConvention::kNone;
  if (w.convention != convention_of(l) && !mlx_none)
    fail(kOp, "writing '" + impl_->out + "': '" + p + "' has the tensor-scale convention of another layout than " +
                  layout_name(l));
  // What the reader would refuse is refused here, before anything is written: sizes, the
  // tensor scale's rule and NaN block scales (Checkpoint::quantized).
  const std::string what = "writing '" + impl_->out + "': '" + p + "'";
  detail::check_quantized_weight(kOp, w, what);
  const std::int64_t nan_at = detail::first_nan_scale(w.scales.data(), w.scales.size());
  if (nan_at >= 0)
    fail(kOp, what + ": block scale [" + std::to_string(nan_at / (w.k / kBlockSize)) + ", " +
                  std::to_string(nan_at % (w.k / kBlockSize)) + "] is an E4M3 NaN (byte 0x" +
                  (w.scales[static_cast<std::size_t>(nan_at)] == 0xFF ? "FF" : "7F") + ")");
  const QuantizedNames qn = quantized_names(l, p);
  impl_->quantized.insert(p);
  const std::int64_t n = w.n, k = w.k;
  const ScaleConvention convention = w.convention;
  std::vector<std::uint8_t> ts(4);
  std::memcpy(ts.data(), &w.stored_scale, 4);
  const std::uint64_t pk_bytes = w.packed.size(), sc_bytes = w.scales.size();
  const std::uint8_t* pk = impl_->keep(std::move(w.packed));
  const std::uint8_t* sc = impl_->keep(std::move(w.scales));
  const std::uint8_t* tsp = impl_->keep(std::move(ts));
  if (l == Layout::kMlx) {
    impl_->add({qn.packed, "U32", {n, k / 8}, pk, pk_bytes});
    impl_->add({qn.scales, "U8", {n, k / kBlockSize}, sc, sc_bytes});
    if (convention != ScaleConvention::kNone) impl_->add({qn.tensor_scale, "F32", {}, tsp, 4});
  } else {
    impl_->add({qn.packed, "U8", {n, k / 2}, pk, pk_bytes});
    impl_->add({qn.scales, "F8_E4M3", {n, k / kBlockSize}, sc, sc_bytes});
    if (l == Layout::kModelopt) impl_->add({qn.tensor_scale, "F32", {}, tsp, 4});
    else impl_->add({qn.tensor_scale, "F32", {1}, tsp, 4});
  }
}

std::size_t CheckpointWriter::tensor_count() const { return impl_->tensors.size(); }

void CheckpointWriter::commit() {
  if (impl_->committed) fail(kOp, "writer for '" + impl_->out + "' is already committed");
  if (impl_->tensors.empty()) fail(kOp, "writing '" + impl_->out + "': no tensors to write");

  if (impl_->single_file) {
    const std::map<std::string, std::string> meta = {
        {"format", impl_->opts.layout == Layout::kMlx ? "mlx" : "pt"}};
    write_safetensors(impl_->out, impl_->tensors, meta);
  } else {
    impl_->write_folder();
  }
  impl_->committed = true;
}

std::uint64_t parse_byte_size(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string num = text.substr(0, i), unit = text.substr(i);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},      {"B", 1},       {"KB", 1e3},          {"MB", 1e6},          {"GB", 1e9},
      {"TB", 1e12}, {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}, {"TIB", 1099511627776.0}};
  double mult = -1;
  for (const auto& u : kUnits)
    if (unit == u.first) mult = u.second;
  double v = 0;
  bool ok = !num.empty() && mult > 0 && std::count(num.begin(), num.end(), '.') <= 1 && num != ".";
  if (ok) {
    try {
      v = std::stod(num) * mult;
    } catch (const std::exception&) {  // std::out_of_range for digits beyond a double's range
      ok = false;
    }
  }
  if (!ok || !(v >= 1) || v > 1.8e19)
    fail("size", "cannot parse size '" + text + "' (examples: 5GB, 500MB, 2GiB, 1000000)");
  return static_cast<std::uint64_t>(v);
}

}  // namespace nvfp4
