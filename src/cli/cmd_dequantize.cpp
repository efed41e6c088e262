// cli/cmd_dequantize.cpp -- `nvfp4 dequantize IN OUT [--dtype bf16|f16|f32]`: an NVFP4
// checkpoint of any supported layout back to a dense one. Each quantized linear <p> becomes
// <p>.weight = e2m1 * e4m3 * tensor_scale (nvfp4::dequantize, the oracle, rounded once to
// --dtype); its scale tensors and input scales are dropped; every other tensor is copied
// byte for byte; config.json loses quantization_config (and MLX's "quantization").
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "io/file_util.h"
#include "io/progress.h"
#include "nvfp4/checkpoint.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

namespace nvfp4::cli {
namespace {

constexpr const char* kOp = "dequantize";

struct DequantizeArgs {
  std::string in, out, dtype = "bf16", shard_size = "5GB";
};

// compressed-tensors may record the unpadded shape in <p>.weight_shape (I64/I32 [2]); the
// checkpoint reader has validated it against the packed shape. Returns K or -1.
std::int64_t ct_logical_k(const Checkpoint& c, const std::string& p) {
  const std::string n = p + ".weight_shape";
  if (c.layout() != Layout::kCompressedTensors || !c.contains(n)) return -1;
  const RawTensor r = c.raw(n);
  if (r.nbytes == 16 && r.dtype == "I64") {
    std::int64_t d[2];
    std::memcpy(d, r.data, 16);
    return d[1];
  }
  if (r.nbytes == 8 && r.dtype == "I32") {
    std::int32_t d[2];
    std::memcpy(d, r.data, 8);
    return d[1];
  }
  return -1;
}

void run_dequantize(const DequantizeArgs& a) {
  const DType dt = dtype_from_name(a.dtype);
  const std::uint64_t shard = parse_byte_size(a.shard_size);
  io::check_output_not_input(a.in, a.out, kOp);
  Checkpoint in(a.in);
  if (in.layout() == Layout::kDense)
    fail(kOp, "'" + a.in + "' has no NVFP4 weights (no modelopt, compressed-tensors or mlx quantized tensors)");
  WriterOptions wo;
  wo.layout = Layout::kDense;
  wo.max_shard_bytes = shard;
  wo.source_folder = in.folder();
  CheckpointWriter out(a.out, wo);

  for (const auto& name : in.names())
    if (!in.is_quantized_tensor(name)) out.add_raw(in.raw(name));

  const auto& prefixes = in.quantized_prefixes();
  std::uint64_t total = 0;
  for (const auto& p : prefixes) total += in.raw(quantized_names(in.layout(), p).packed).nbytes;
  io::Progress progress("dequantize", prefixes.size(), total);
  for (const auto& p : prefixes) {
    const QuantizedWeight q = in.quantized(p);
    Tensor t = dequantize(q, dt);
    // The weights are finite (the reader checked every scale), so an Inf here is an overflow of
    // the output dtype (f16 ends at 65504): refused rather than written as a "dense" weight.
    // No weight exceeds fl(6 x the largest block scale) x the tensor scale (the oracle's
    // roundings are monotone; positive E4M3 bytes order as their values), so the elements are
    // searched only when that bound does not fit in dt: one pass over the scales, not the weight.
    std::uint8_t top = 0;
    for (std::uint8_t b : q.scales) top = std::max<std::uint8_t>(top, b & 0x7F);
    std::uint32_t bound = 0;
    store_from_f32(&bound, dt, 0, e2m1_times_scale(0x7, top) * q.tensor_scale());
    for (std::int64_t i = 0, n = std::isfinite(load_as_f32(&bound, dt, 0)) ? 0 : t.numel(); i < n; ++i) {
      if (std::isfinite(t.get(i))) continue;
      const std::uint8_t byte = q.packed[static_cast<std::size_t>(i / 2)];
      const float v = e2m1_times_scale(i % 2 == 0 ? e2m1_low(byte) : e2m1_high(byte),
                                       q.scales[static_cast<std::size_t>(i / kBlockSize)]) * q.tensor_scale();
      char value[32];
      std::snprintf(value, sizeof value, "%.7g", static_cast<double>(v));
      fail(kOp, "'" + a.in + "': linear '" + p + "' weight [" + std::to_string(i / q.k) + ", " + std::to_string(i % q.k) +
                    "] = " + value + " is beyond the range of " + dtype_name(dt) + "; use --dtype bf16 or f32");
    }
    const std::int64_t k = ct_logical_k(in, p);
    if (k > 0 && k < q.k) {
      // Drop the zero padding the producer added to reach a multiple of 16.
      Tensor c(dt, {q.n, k});
      const std::size_t es = static_cast<std::size_t>(dtype_size(dt));
      for (std::int64_t r = 0; r < q.n; ++r)
        std::memcpy(c.bytes.data() + r * k * es, t.bytes.data() + r * q.k * es, static_cast<std::size_t>(k) * es);
      t = std::move(c);
    }
    const std::string name = p + ".weight";
    if (in.contains(name) && !in.is_quantized_tensor(name))
      fail(kOp, "'" + a.in + "': '" + name + "' exists next to the quantized linear '" + p + "'");
    out.add_dense(name, std::move(t));
    progress.advance(1, static_cast<std::uint64_t>(q.packed.size()));
  }
  // FP8 linears of a mixed-precision modelopt export: densified too, so the output is all dense.
  for (const auto& p : in.fp8_prefixes()) out.add_dense(p + ".weight", in.fp8_dense(p, dt));
  out.commit();
}

}  // namespace

void add_dequantize_command(CLI::App& app) {
  auto args = std::make_shared<DequantizeArgs>();
  CLI::App* sub = app.add_subcommand(
      "dequantize",
      "Dequantize an NVFP4 checkpoint (modelopt, compressed-tensors or mlx; file or folder) to dense "
      "weights. Other tensors are copied unchanged; config.json loses quantization_config.");
  sub->add_option("IN", args->in, "quantized checkpoint: .safetensors file or folder")->required();
  sub->add_option("OUT", args->out, "output: .safetensors file, or a folder that does not exist or is empty")
      ->required();
  sub->add_option("--dtype", args->dtype, "output dtype of the dequantized weights: bf16 (default), f16, f32");
  sub->add_option("--shard-size", args->shard_size, "largest shard of a folder output (default 5GB)");
  sub->callback([args] { run_dequantize(*args); });
}

}  // namespace nvfp4::cli
