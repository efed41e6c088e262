// cli/cmd_quantize.cpp -- `nvfp4 quantize IN OUT`: a dense checkpoint (file or folder) to an
// NVFP4 checkpoint in the modelopt / compressed-tensors / MLX layout.
//
// Selection: every 2-D F32/F16/BF16 tensor named "*.weight" whose K (last dim) is a non-zero
// multiple of 16, except the default excludes (embeddings, norms, lm_head; listed in --help)
// and each --exclude REGEX. K % 16 != 0 is left dense rather than zero-padded: a padded packed
// shape would not match the model's Linear shape in any loader.
// Shared tensor scales (modelopt and compressed-tensors both fuse them for weights that read
// the same input): q_proj/k_proj/v_proj of one attention module, gate_proj/up_proj of one MLP,
// w1/w3 of one expert. MLX quantizes each weight with its own global scale.
#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "io/file_util.h"
#include "io/progress.h"
#include "nvfp4/checkpoint.h"
#include "nvfp4/error.h"
#include "nvfp4/quantize.h"

namespace nvfp4::cli {
namespace {

constexpr const char* kOp = "quantize";

// Matched (std::regex_search, ECMAScript) against the full tensor name. Embeddings and norms
// are not Linear layers (they are never written to the exclude list); lm_head is.
const char* const kNotLinearRegex = R"((^|\.)[^.]*(embed|norm)[^.]*\.|(^|\.)(wte|wpe)\.)";
const char* const kDefaultExcludeHelp =
    "Default excludes (regex on the tensor name): any module whose name contains 'embed' "
    "(embed_tokens, embeddings, embed_in/out) or 'norm' (layernorms, RMSNorms), wte, wpe, lm_head.";
const char* const kLmHeadRegex = R"((^|\.)lm_head\.)";

struct QuantizeArgs {
  std::string in, out, format = "modelopt", shard_size = "5GB";
  std::vector<std::string> excludes;
  bool legacy = false;
  bool no_default_excludes = false;
  // mlx-lm's layout by default: mlx-lm 0.32's QuantizedLinear has no global scale and refuses a
  // checkpoint that carries one ("parameters not in model"; scripts/check_producers.sh).
  bool mlx_global_scale = false;
};

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// Group key of a weight: weights with the same key share one tensor scale.
std::string group_key(const std::string& name, bool share) {
  static const std::regex kQkv(R"(^(.*)\.(q_proj|k_proj|v_proj)\.weight$)");
  static const std::regex kGateUp(R"(^(.*)\.(gate_proj|up_proj)\.weight$)");
  static const std::regex kW13(R"(^(.*)\.(w1|w3)\.weight$)");
  std::smatch m;
  if (share) {
    if (std::regex_match(name, m, kQkv)) return m[1].str() + ".{q,k,v}_proj";
    if (std::regex_match(name, m, kGateUp)) return m[1].str() + ".{gate,up}_proj";
    if (std::regex_match(name, m, kW13)) return m[1].str() + ".{w1,w3}";
  }
  return name;
}

void run_quantize(const QuantizeArgs& a) {
  const Recipe recipe = recipe_from_name(a.format);
  if (a.legacy && recipe != Recipe::kModelopt)
    fail(kOp, "--legacy-modelopt applies to --format modelopt only (got --format " + a.format + ")");
  if (a.mlx_global_scale && recipe != Recipe::kMlx)
    fail(kOp, "--mlx-global-scale applies to --format mlx only (got --format " + a.format + ")");
  const std::uint64_t shard = parse_byte_size(a.shard_size);
  std::vector<std::regex> user;
  for (const auto& r : a.excludes) {
    try {
      user.emplace_back(r, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      fail(kOp, "--exclude '" + r + "' is not a valid regular expression (" + e.what() + ")");
    }
  }
  const std::regex not_linear(kNotLinearRegex), lm_head(kLmHeadRegex);

  io::check_output_not_input(a.in, a.out, kOp);
  Checkpoint in(a.in);
  if (in.layout() != Layout::kDense)
    fail(kOp, "'" + a.in + "' is already quantized (" + layout_name(in.layout()) + " layout)");

  // Pick the weights, then group them. Nothing is read yet: only names, dtypes and shapes.
  std::map<std::string, std::vector<std::string>> groups;
  std::vector<std::string> excluded_modules;
  std::uint64_t quant_bytes = 0;
  std::size_t quant_count = 0;
  for (const auto& name : in.names()) {
    const RawTensor t = in.raw(name);
    const bool candidate = ends_with(name, ".weight") && t.shape.size() == 2 &&
                           (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16");
    if (!candidate) continue;
    const bool is_not_linear = std::regex_search(name, not_linear);
    bool skip = !a.no_default_excludes && (is_not_linear || std::regex_search(name, lm_head));
    for (const auto& r : user) skip = skip || std::regex_search(name, r);
    skip = skip || t.shape[0] == 0 || t.shape[1] == 0 || t.shape[1] % 16 != 0;
    if (skip) {
      if (!is_not_linear) excluded_modules.push_back(name.substr(0, name.size() - 7));
      continue;
    }
    groups[group_key(name, recipe != Recipe::kMlx)].push_back(name);
    quant_bytes += t.nbytes;
    ++quant_count;
  }
  if (quant_count == 0)
    fail(kOp, "'" + a.in + "' has no weight to quantize (2-D F32/F16/BF16 '*.weight' with K a multiple of 16, "
              "not excluded)");

  WriterOptions wo;
  wo.layout = layout_for_recipe(recipe);
  wo.max_shard_bytes = shard;
  wo.source_folder = in.folder();
  wo.excluded_modules = excluded_modules;
  CheckpointWriter out(a.out, wo);  // checks OUT before the expensive part

  std::map<std::string, bool> quantized;
  for (const auto& g : groups)
    for (const auto& n : g.second) quantized[n] = true;
  for (const auto& name : in.names())
    if (!quantized.count(name)) out.add_raw(in.raw(name));

  io::Progress progress("quantize", quant_count, quant_bytes);
  QuantizeOptions qo;
  qo.recipe = recipe;
  qo.modelopt_legacy = a.legacy;
  qo.mlx_global_scale = a.mlx_global_scale;
  for (const auto& [key, names] : groups) {
    std::vector<Tensor> dense;
    std::vector<const Tensor*> ptrs;
    std::uint64_t bytes = 0;
    dense.reserve(names.size());
    for (const auto& n : names) {
      dense.push_back(in.dense(n));
      bytes += dense.back().bytes.size();
    }
    for (const auto& d : dense) ptrs.push_back(&d);
    std::vector<QuantizedWeight> q = quantize_group(ptrs, names, qo);
    for (std::size_t i = 0; i < names.size(); ++i)
      out.add_quantized(names[i].substr(0, names[i].size() - 7), std::move(q[i]));
    progress.advance(names.size(), bytes);
  }
  out.commit();
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* sub = app.add_subcommand(
      "quantize",
      std::string("Quantize every 2-D F32/F16/BF16 '*.weight' of a checkpoint (a .safetensors file or a "
                  "folder, sharded or not) to NVFP4. OUT ending in .safetensors is one file; otherwise a "
                  "new folder (shards + index, config.json, hf_quant_config.json for modelopt, tokenizer "
                  "files copied). q/k/v and gate/up (w1/w3) share one tensor scale (modelopt, "
                  "compressed-tensors). Weights with K not a multiple of 16 stay dense. ") +
          kDefaultExcludeHelp);
  sub->add_option("IN", args->in, "input checkpoint: .safetensors file or folder")->required();
  sub->add_option("OUT", args->out, "output: .safetensors file, or a folder that does not exist or is empty")
      ->required();
  sub->add_option("--format", args->format, "modelopt (default), compressed-tensors or mlx");
  sub->add_option("--exclude", args->excludes,
                  "leave tensors whose name matches REGEX (ECMAScript, search) unquantized; repeatable")
      ->allow_extra_args(false)
      ->type_name("REGEX");
  sub->add_flag("--no-default-excludes", args->no_default_excludes,
                "quantize embeddings/norms/lm_head too when they are 2-D '*.weight'");
  sub->add_flag("--legacy-modelopt", args->legacy,
                "modelopt releases up to 0.44, before the 2^-9 block-scale clamp (tiny blocks may get scale 0)");
  sub->add_flag("--mlx-global-scale,!--mlx-no-global-scale", args->mlx_global_scale,
                "mlx: quantize with global_scale = amax, as mx.quantize(..., global_scale=) does (finer block "
                "scales for small weights; mx.dequantize / mx.quantized_matmul take it, mlx-lm 0.32 does not load "
                "it). Default: none, mlx-lm's layout (block scales = block_amax/6)");
  sub->add_option("--shard-size", args->shard_size, "largest shard of a folder output (default 5GB; e.g. 500MB, 2GiB)");
  sub->callback([args] { run_quantize(*args); });
}

}  // namespace nvfp4::cli
