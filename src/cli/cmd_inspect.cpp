// cli/cmd_inspect.cpp -- `nvfp4 inspect FILE [--json]`: the detected layout, every tensor
// (name, dtype, shape) and, per quantized linear, the tensor scale (stored value and its
// dequant-direction value), block-scale min/max, a histogram of block scales by power of two
// and the share of all-zero blocks (every code +-0, or a zero scale). Loading a linear runs the
// reader's full validation, so inspect doubles as a checker. Input (activation) scales, which
// W4A4 exports carry (modelopt input_scale, compressed-tensors input_global_scale), are counted:
// nvfp4 multiplies 16/32-bit activations (W4A16) and does not use them.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "nvfp4/checkpoint.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"

namespace nvfp4::cli {
namespace {

using json = nlohmann::json;

struct InspectArgs {
  std::string path;
  bool json_out = false;
};

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::string fmt_g(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

const char* stored_scale_name(Layout l) {
  switch (l) {
    case Layout::kModelopt: return "weight_scale_2";
    case Layout::kCompressedTensors: return "weight_global_scale";
    default: return "global_scale";
  }
}

bool has_input_scale(const Checkpoint& c, const std::string& p) {
  for (const auto& o : quantized_names(c.layout(), p).optional)
    if (c.contains(o)) return true;
  return false;
}

json linear_stats(const Checkpoint& c, const std::string& p) {
  const QuantizedWeight w = c.quantized(p);
  const std::int64_t kb = w.k / kBlockSize;
  float mn = INFINITY, mx = 0.0f;
  std::map<int, std::int64_t> hist;  // floor(log2(scale)) -> count; "zero" under INT32_MIN
  std::int64_t zero_blocks = 0;
  for (std::int64_t r = 0; r < w.n; ++r) {
    for (std::int64_t b = 0; b < kb; ++b) {
      const std::uint8_t sb = w.scales[static_cast<std::size_t>(r * kb + b)];
      const float s = e4m3_to_float(static_cast<std::uint8_t>(sb & 0x7F));
      mn = std::min(mn, s);
      mx = std::max(mx, s);
      hist[s == 0.0f ? INT32_MIN : std::ilogb(s)]++;
      // 8 bytes = 16 codes; magnitude bits are 0x7 of each nibble.
      bool all_zero = s == 0.0f;
      if (!all_zero) {
        all_zero = true;
        const std::uint8_t* q = &w.packed[static_cast<std::size_t>(r * (w.k / 2) + b * (kBlockSize / 2))];
        for (int i = 0; i < kBlockSize / 2; ++i) all_zero = all_zero && (q[i] & 0x77) == 0;
      }
      zero_blocks += all_zero;
    }
  }
  json h = json::object();
  for (const auto& [e, n] : hist) h[e == INT32_MIN ? std::string("0") : "2^" + std::to_string(e)] = n;
  const std::int64_t blocks = w.n * kb;
  return {{"prefix", p},
          {"n", w.n},
          {"k", w.k},
          {"stored_scale_name", stored_scale_name(c.layout())},
          {"stored_scale", w.stored_scale},
          {"tensor_scale", w.tensor_scale()},
          {"block_scale_min", mn},
          {"block_scale_max", mx},
          {"blocks", blocks},
          {"zero_blocks", zero_blocks},
          {"zero_block_percent", blocks ? 100.0 * static_cast<double>(zero_blocks) / static_cast<double>(blocks) : 0.0},
          {"input_scale", has_input_scale(c, p)},
          {"block_scale_histogram", h}};
}

void run_inspect(const InspectArgs& a) {
  const Checkpoint c(a.path);
  json tensors = json::array();
  for (const auto& n : c.names()) {
    const RawTensor r = c.raw(n);
    tensors.push_back({{"name", n}, {"dtype", r.dtype}, {"shape", r.shape}, {"bytes", r.nbytes}});
  }
  json linears = json::array();
  std::size_t with_input_scale = 0, mlx_global_scales = 0;
  for (const auto& p : c.quantized_prefixes()) {
    linears.push_back(linear_stats(c, p));
    with_input_scale += linears.back()["input_scale"].get<bool>();
    if (c.layout() == Layout::kMlx) mlx_global_scales += c.contains(quantized_names(c.layout(), p).tensor_scale);
  }

  if (a.json_out) {
    const json j = {{"path", c.path()},
                    {"format", layout_name(c.layout())},
                    {"shards", c.shard_paths()},
                    {"total_bytes", c.total_bytes()},
                    {"linears_with_input_scale", with_input_scale},
                    {"fp8_linears", c.fp8_prefixes()},
                    {"tensors", tensors},
                    {"quantized", linears}};
    // Paths and tensor names need not be UTF-8 (JSON text must be): invalid bytes become U+FFFD.
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << "checkpoint: " << c.path() << "\n"
            << "format:     " << layout_name(c.layout()) << "\n"
            << "shards:     " << c.shard_paths().size() << "\n"
            << "tensors:    " << c.names().size() << " (" << c.total_bytes() << " bytes)\n"
            << "quantized:  " << c.quantized_prefixes().size() << " linear(s)\n";
  if (with_input_scale)
    std::cout << "activations: " << with_input_scale << " of " << c.quantized_prefixes().size()
              << " linear(s) carry an input scale (a W4A4 export); nvfp4 runs W4A16 and does not use it\n";
  if (!c.fp8_prefixes().empty())
    std::cout << "fp8:        " << c.fp8_prefixes().size()
              << " linear(s) in FP8 E4M3 (a mixed-precision modelopt export); dequantize densifies them\n";
  // mlx-lm 0.32's QuantizedLinear has no global scale and refuses such tensors (docs/format.md).
  if (mlx_global_scales)
    std::cout << "note:       " << mlx_global_scales << " linear(s) carry an MLX global_scale: mx.dequantize / "
              << "mx.quantized_matmul take it, mlx-lm 0.32 does not load it\n";
  std::cout << "\n";
  std::size_t w = 4;
  for (const auto& t : tensors) w = std::max(w, t["name"].get<std::string>().size());
  std::printf("%-*s  %-8s  %s\n", static_cast<int>(w), "name", "dtype", "shape");
  std::fflush(stdout);
  for (const auto& t : tensors) {
    std::printf("%-*s  %-8s  %s\n", static_cast<int>(w), t["name"].get<std::string>().c_str(),
                t["dtype"].get<std::string>().c_str(), shape_str(t["shape"].get<std::vector<std::int64_t>>()).c_str());
  }
  for (const auto& l : linears) {
    std::printf("\n%s  [N=%lld, K=%lld]\n", l["prefix"].get<std::string>().c_str(),
                static_cast<long long>(l["n"].get<std::int64_t>()), static_cast<long long>(l["k"].get<std::int64_t>()));
    std::printf("  tensor scale: %s = %s (dequant direction %s)\n", l["stored_scale_name"].get<std::string>().c_str(),
                fmt_g(l["stored_scale"].get<double>()).c_str(), fmt_g(l["tensor_scale"].get<double>()).c_str());
    std::printf("  block scales: min %s, max %s; zero blocks %lld of %lld (%.2f%%)\n",
                fmt_g(l["block_scale_min"].get<double>()).c_str(), fmt_g(l["block_scale_max"].get<double>()).c_str(),
                static_cast<long long>(l["zero_blocks"].get<std::int64_t>()),
                static_cast<long long>(l["blocks"].get<std::int64_t>()), l["zero_block_percent"].get<double>());
    std::string h;
    for (auto it = l["block_scale_histogram"].begin(); it != l["block_scale_histogram"].end(); ++it)
      h += (h.empty() ? "" : ", ") + it.key() + ": " + std::to_string(it.value().get<std::int64_t>());
    std::printf("  histogram (by power of two): %s\n", h.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand(
      "inspect",
      "Show a checkpoint's detected format, tensors (name, dtype, shape) and per quantized linear the "
      "tensor scale, block-scale range/histogram and share of zero blocks. Validates everything it reads.");
  sub->add_option("FILE", args->path, ".safetensors file or checkpoint folder")->required();
  sub->add_flag("--json", args->json_out, "machine-readable JSON on stdout");
  sub->callback([args] { run_inspect(*args); });
}

}  // namespace nvfp4::cli
