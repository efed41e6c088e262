// quantize/quantize.cpp -- everything around the per-producer block recipes: names, amax with
// NaN/Inf detection, zero padding of K, the row/block loop and tensor-scale groups.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "format/validate.h"
#include "kernels/cpu/parallel_for.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/quantize.h"
#include "quantize/recipes.h"

namespace nvfp4 {
namespace {

// Rows x cols view of a weight: leading dims flattened into rows.
void weight_dims(const Tensor& w, const std::string& name, std::int64_t* rows, std::int64_t* cols) {
  detail::check_tensor("quantize", w, "tensor '" + name + "'");
  if (w.shape.size() < 2)
    fail("quantize", "tensor '" + name + "' has " + std::to_string(w.shape.size()) +
                         " dimension(s); a weight needs at least 2 ([N, K])");
  *cols = w.shape.back();
  *rows = *cols == 0 ? 0 : w.numel() / *cols;
  if (*rows == 0 || *cols == 0) fail("quantize", "tensor '" + name + "' is empty");
}

}  // namespace

const char* recipe_name(Recipe r) {
  switch (r) {
    case Recipe::kModelopt: return "modelopt";
    case Recipe::kCompressedTensors: return "compressed-tensors";
    case Recipe::kMlx: return "mlx";
  }
  return "unknown";
}

Recipe recipe_from_name(const std::string& name) {
  if (name == "modelopt") return Recipe::kModelopt;
  if (name == "compressed-tensors" || name == "ct") return Recipe::kCompressedTensors;
  if (name == "mlx") return Recipe::kMlx;
  fail("quantize", "unknown format '" + name + "' (expected modelopt, compressed-tensors or mlx)");
}

ScaleConvention recipe_convention(Recipe r) {
  switch (r) {
    case Recipe::kModelopt: return ScaleConvention::kDequant;
    case Recipe::kCompressedTensors: return ScaleConvention::kQuant;
    case Recipe::kMlx: return ScaleConvention::kAmax;
  }
  fail("quantize", "unknown Recipe value " + std::to_string(static_cast<int>(r)));
}

namespace {
ScaleConvention convention_for(const QuantizeOptions& o) {
  if (o.recipe == Recipe::kMlx && !o.mlx_global_scale) return ScaleConvention::kNone;
  return recipe_convention(o.recipe);
}

// Elements per task of the quantizer's parallel loops: enough to amortise a task's hand-out.
constexpr std::int64_t kQuantizeTaskElements = std::int64_t{1} << 16;

// The first (lowest) flat index each task stopped at, or -1: tasks cover ascending ranges, so the
// first task with one holds the lowest bad index of the tensor, and errors name the same element
// whatever the thread count.
std::int64_t first_flagged(const std::vector<std::int64_t>& per_task) {
  for (std::int64_t i : per_task)
    if (i >= 0) return i;
  return -1;
}
}  // namespace

float weight_amax(const Tensor& w, const std::string& name) {
  detail::check_tensor("quantize", w, "tensor '" + name + "'");
  const std::int64_t n = w.numel();
  const std::int64_t tasks = (n + kQuantizeTaskElements - 1) / kQuantizeTaskElements;
  std::vector<float> amax(static_cast<std::size_t>(tasks), 0.0f);
  std::vector<std::int64_t> bad(static_cast<std::size_t>(tasks), -1);
  // Threads: max is exact and order-independent, so the result does not depend on them.
  cpu::parallel_for(tasks, [&](std::int64_t t) {
    float m = 0.0f;
    for (std::int64_t i = t * kQuantizeTaskElements, e = std::min(n, i + kQuantizeTaskElements); i < e; ++i) {
      const float v = w.get(i);
      if (!std::isfinite(v)) {
        bad[static_cast<std::size_t>(t)] = i;
        return;
      }
      m = std::max(m, std::fabs(v));
    }
    amax[static_cast<std::size_t>(t)] = m;
  });
  const std::int64_t i = first_flagged(bad);
  if (i >= 0) {
    const float v = w.get(i);
    // Name the index in the tensor's own coordinates, e.g. [3, 17].
    std::string idx;
    std::int64_t rem = i;
    for (std::size_t d = w.shape.size(); d-- > 0;) {
      idx = std::to_string(rem % w.shape[d]) + (idx.empty() ? "" : ", ") + idx;
      rem /= w.shape[d];
    }
    fail("quantize", "tensor '" + name + "' has " + (std::isnan(v) ? "NaN" : "Inf") +
                         " at index [" + idx + "] (flat " + std::to_string(i) + ")");
  }
  float m = 0.0f;
  for (float a : amax) m = std::max(m, a);
  return m;
}

float stored_scale_for_amax(Recipe r, float amax, DType src) {
  if (!(amax >= 0.0f) || !std::isfinite(amax))
    fail("quantize", "amax " + std::to_string(amax) + " is not a finite non-negative value (stored_scale_for_amax, " +
                         recipe_name(r) + ")");
  switch (r) {
    case Recipe::kModelopt: return recipes::modelopt_stored_scale(amax);
    case Recipe::kCompressedTensors: return recipes::ct_stored_scale(amax, src);
    case Recipe::kMlx: return amax;  // MLX global_scale is the amax itself
  }
  fail("quantize", "unknown Recipe value " + std::to_string(static_cast<int>(r)));
}

QuantizedWeight quantize_with_amax(const Tensor& w, float amax, const QuantizeOptions& opts) {
  std::int64_t rows = 0, cols = 0;
  weight_dims(w, opts.name, &rows, &cols);
  if (!(amax >= 0.0f) || !std::isfinite(amax))
    fail("quantize", "tensor '" + opts.name + "': amax " + std::to_string(amax) + " is not a finite non-negative value");
  if (std::string(recipe_name(opts.recipe)) == "unknown")
    fail("quantize", "tensor '" + opts.name + "': unknown Recipe value " + std::to_string(static_cast<int>(opts.recipe)));
  QuantizedWeight q;
  q.n = rows;
  q.k = (cols + kBlockSize - 1) / kBlockSize * kBlockSize;  // zero-pad K as modelopt does
  q.convention = convention_for(opts);
  q.stored_scale = q.convention == ScaleConvention::kNone ? 1.0f : stored_scale_for_amax(opts.recipe, amax, w.dtype);
  const detail::WeightBytes wb = detail::weight_bytes("quantize", q.n, q.k, "tensor '" + opts.name + "'");
  q.packed.assign(static_cast<std::size_t>(wb.packed), 0);
  q.scales.assign(static_cast<std::size_t>(wb.scales), 0);

  const std::int64_t nblocks = q.k / kBlockSize;
  // Rows in parallel (each block is quantized alone, so the bits do not depend on the threads).
  // A task stops at its first non-finite or out-of-range value; the lowest one is reported.
  const std::int64_t rows_per_task = std::max<std::int64_t>(1, kQuantizeTaskElements / q.k);
  const std::int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
  std::vector<std::int64_t> bad(static_cast<std::size_t>(tasks), -1);
  cpu::parallel_for(tasks, [&](std::int64_t t) {
    float x[kBlockSize];
    recipes::BlockOut out{};
    for (std::int64_t r = t * rows_per_task, re = std::min(rows, r + rows_per_task); r < re; ++r) {
      for (std::int64_t b = 0; b < nblocks; ++b) {
        for (int i = 0; i < kBlockSize; ++i) {
          const std::int64_t c = b * kBlockSize + i;
          x[i] = c < cols ? w.get(r * cols + c) : 0.0f;
          if (!std::isfinite(x[i]) || std::fabs(x[i]) > amax) {
            bad[static_cast<std::size_t>(t)] = r * cols + c;
            return;
          }
        }
        switch (opts.recipe) {
          case Recipe::kModelopt:
            recipes::modelopt_quantize_block(x, q.stored_scale, opts.modelopt_legacy, &out);
            break;
          case Recipe::kCompressedTensors:
            recipes::ct_quantize_block(x, q.stored_scale, w.dtype, &out);
            break;
          default:
            recipes::mlx_quantize_block(x, q.stored_scale, q.convention == ScaleConvention::kAmax, &out);
            break;
        }
        q.scales[static_cast<std::size_t>(r * nblocks + b)] = out.scale;
        std::uint8_t* dst = &q.packed[static_cast<std::size_t>(r * (q.k / 2) + b * (kBlockSize / 2))];
        for (int i = 0; i < kBlockSize; i += 2) dst[i / 2] = e2m1_pack(out.codes[i], out.codes[i + 1]);
      }
    }
  });
  const std::int64_t i = first_flagged(bad);
  if (i >= 0) {
    const std::int64_t r = i / cols, c = i % cols;
    const float v = w.get(i);
    if (!std::isfinite(v))
      fail("quantize", "tensor '" + opts.name + "' has a non-finite value at index [" + std::to_string(r) + ", " +
                           std::to_string(c) + "]");
    fail("quantize", "tensor '" + opts.name + "': |value| at [" + std::to_string(r) + ", " + std::to_string(c) +
                         "] exceeds the given amax " + std::to_string(amax));
  }
  return q;
}

QuantizedWeight quantize(const Tensor& w, const QuantizeOptions& opts) {
  return quantize_with_amax(w, weight_amax(w, opts.name), opts);
}

std::vector<QuantizedWeight> quantize_group(const std::vector<const Tensor*>& weights,
                                            const std::vector<std::string>& names,
                                            const QuantizeOptions& opts) {
  if (weights.size() != names.size()) fail("quantize_group", "weights and names differ in length");
  for (std::size_t i = 0; i < weights.size(); ++i)
    if (!weights[i]) fail("quantize_group", "weight " + std::to_string(i) + " ('" + names[i] + "') is a null pointer");
  float amax = 0.0f;
  for (std::size_t i = 0; i < weights.size(); ++i) amax = std::max(amax, weight_amax(*weights[i], names[i]));
  std::vector<QuantizedWeight> out;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    QuantizeOptions o = opts;
    o.name = names[i];
    out.push_back(quantize_with_amax(*weights[i], amax, o));
  }
  return out;
}

}  // namespace nvfp4
