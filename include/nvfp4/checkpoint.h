// nvfp4/checkpoint.h -- Hugging Face style checkpoints: a .safetensors file or a folder
// (sharded with model.safetensors.index.json, or *.safetensors without an index), in one of
// the NVFP4 layouts of the producers or dense (docs/nvfp4-format.md "Checkpoint layouts"):
//
//   modelopt            <p>.weight U8 [N, K/2], <p>.weight_scale F8_E4M3 [N, K/16],
//                       <p>.weight_scale_2 F32 [] (amax/2688), optional <p>.input_scale;
//                       hf_quant_config.json + config.json quantization_config (modelopt)
//   compressed-tensors  <p>.weight_packed U8 [N, K/2], <p>.weight_scale F8_E4M3 [N, K/16],
//                       <p>.weight_global_scale F32 [1] (2688/amax), optional
//                       <p>.input_global_scale; config.json quantization_config
//   mlx                 <p>.weight U32 [N, K/8], <p>.scales U8 [N, K/16], optional
//                       <p>.global_scale F32 [] (amax; mlx-lm writes none: tensor scale 1);
//                       config.json "quantization" + "quantization_config"
//
// The layout is detected from the tensor names (each layout's marker tensors); a checkpoint
// mixing layouts, or whose config.json names a different quant_method, is rejected. A modelopt
// mixed-precision export may also hold FP8 linears (<p>.weight F8_E4M3 [N, K], <p>.weight_scale
// F32 per tensor or per row, optional <p>.input_scale): they are read as FP8 linears (fp8_prefixes,
// fp8_dense), not as NVFP4. Every
// quantized linear is validated on read (shapes, dtypes, NaN scale bytes, tensor scale).
//
// CheckpointWriter writes a single .safetensors file (OUT ends in ".safetensors") or a folder
// (shards of at most max_shard_bytes + index, config.json updated from the source folder,
// hf_quant_config.json for modelopt, the source's tokenizer/config side files copied). Output
// is atomic: everything is built in a temporary sibling and renamed at the end; on any error
// nothing is left at OUT. A folder OUT must not exist or be empty.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nvfp4/quantize.h"
#include "nvfp4/safetensors.h"
#include "nvfp4/tensor.h"

namespace nvfp4 {

enum class Layout : std::uint8_t { kDense, kModelopt, kCompressedTensors, kMlx };

const char* layout_name(Layout l);  // "dense", "modelopt", "compressed-tensors", "mlx"
Layout layout_for_recipe(Recipe r);

// The tensor names of one quantized linear <prefix> in a layout (the constants live in
// src/io/layouts.h; this is their public face).
struct QuantizedNames {
  std::string packed;        // modelopt/mlx: <p>.weight, CT: <p>.weight_packed
  std::string scales;        // <p>.weight_scale (modelopt, CT), <p>.scales (mlx)
  std::string tensor_scale;  // <p>.weight_scale_2 / <p>.weight_global_scale / <p>.global_scale
  std::vector<std::string> optional;  // input scales etc. that belong to the linear
};
QuantizedNames quantized_names(Layout l, const std::string& prefix);

// A tensor as stored: dtype name, shape, bytes (borrowed from the mapping of the checkpoint).
struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  const std::uint8_t* data = nullptr;
  std::uint64_t nbytes = 0;
};

class Checkpoint {
 public:
  explicit Checkpoint(const std::string& path);  // file or folder; throws Error on any defect
  ~Checkpoint();
  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;

  const std::string& path() const;
  bool is_folder() const;
  Layout layout() const;
  std::vector<std::string> shard_paths() const;
  const std::vector<std::string>& names() const;  // every tensor, sorted
  bool contains(const std::string& name) const;
  RawTensor raw(const std::string& name) const;            // throws if absent
  const std::string& shard_of(const std::string& name) const;
  std::uint64_t total_bytes() const;                       // sum of tensor bytes

  // A dense F32/F16/BF16 tensor, copied; other dtypes are rejected with an Error.
  Tensor dense(const std::string& name) const;

  // Quantized linears of the detected layout, sorted; empty for kDense.
  const std::vector<std::string>& quantized_prefixes() const;
  // True when `name` is one of the tensors of a quantized linear (packed, scales, tensor
  // scale or an optional input scale), NVFP4 or FP8.
  bool is_quantized_tensor(const std::string& name) const;
  // FP8 linears of a mixed-precision modelopt export, sorted (empty otherwise).
  const std::vector<std::string>& fp8_prefixes() const;
  // One FP8 linear as a dense [N, K] tensor of dtype dt: float(e4m3 weight) * weight_scale (per
  // tensor or per row, modelopt's dequant direction), computed in fp32 and rounded once to dt.
  Tensor fp8_dense(const std::string& prefix, DType dt = DType::kF32) const;
  // The canonical weight of one quantized linear, fully validated; the stored tensor scale is
  // kept bit-exact with its convention (modelopt kDequant, CT kQuant, mlx kAmax or kNone).
  QuantizedWeight quantized(const std::string& prefix) const;

  // config.json of a folder checkpoint (raw text), "" when there is none / for a file.
  const std::string& config_json() const;
  // The folder holding config.json and side files ("" for a single-file checkpoint).
  std::string folder() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct WriterOptions {
  Layout layout = Layout::kDense;
  std::uint64_t max_shard_bytes = 5000000000ull;  // HF default "5GB"
  // Folder whose config.json / tokenizer files are carried over ("" = none).
  std::string source_folder;
  // Linear modules left unquantized (written as exclude_modules / ignore).
  std::vector<std::string> excluded_modules;
  std::string producer_version;  // written in hf_quant_config.json's producer block
};

class CheckpointWriter {
 public:
  // Checks OUT up front (parent exists; a folder OUT absent or empty) so a caller fails
  // before doing expensive work.
  CheckpointWriter(std::string out, WriterOptions opts);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Borrowed bytes (e.g. from a Checkpoint's mapping); must stay valid until commit().
  void add_raw(const RawTensor& t);
  void add_dense(const std::string& name, Tensor t);
  // Adds the layout's tensors for linear <prefix>; the weight's convention must be the layout's.
  void add_quantized(const std::string& prefix, QuantizedWeight w);
  std::size_t tensor_count() const;
  // Writes everything atomically. Call once.
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Parses a size such as "5GB", "500MB", "1.5GiB", "123456" (bytes). Throws Error.
std::uint64_t parse_byte_size(const std::string& text);

}  // namespace nvfp4
