// dispatch/matmul.cpp -- the public quantized_matmul: validate once, pick the backend.
// Kernel choice *within* a backend (GEMV vs GEMM, ISA, tile) belongs to that backend's own
// dispatch and tuning table (src/kernels/<backend>/); this file only routes.
#include <cmath>
#include <string>

#include "dispatch/overlap.h"
#include "format/validate.h"
#include "kernels/cpu/matmul_cpu.h"
#include "kernels/cuda/cuda_host.h"
#include "nvfp4/cuda.h"
#include "nvfp4/error.h"
#include "nvfp4/format.h"
#include "nvfp4/ops.h"

namespace nvfp4 {
namespace {

std::string shape_str(const MatrixView& v) {
  return std::to_string(v.rows) + "x" + std::to_string(v.cols) + " " + dtype_name(v.dtype) +
         " stride=" + std::to_string(v.stride);
}

bool aligned(const void* p, int bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

struct ByteRange {
  std::uintptr_t begin = 0, end = 0;  // [begin, end)
};

// The bytes a row-major view can touch: from its first element to the end of its last row.
ByteRange range_of(const MatrixView& v) {
  const auto b = reinterpret_cast<std::uintptr_t>(v.data);
  const std::uint64_t es = static_cast<std::uint64_t>(dtype_size(v.dtype));
  return {b, b + (static_cast<std::uint64_t>(v.rows - 1) * v.stride + v.cols) * es};
}

bool intersect(ByteRange a, ByteRange b) {
  return byte_spans_overlap(reinterpret_cast<const void*>(a.begin), a.end - a.begin, reinterpret_cast<const void*>(b.begin),
                            b.end - b.begin);
}

// True when the output view y shares a byte with the activation view x. Views with the same
// row pitch whose column windows are disjoint (x and y interleaved in one wider buffer) do not
// overlap; other intersecting spans are treated as overlapping.
bool views_overlap(const MatrixView& x, const MatrixView& y) {
  const ByteRange rx = range_of(x), ry = range_of(y);
  if (!intersect(rx, ry)) return false;
  const std::uint64_t px = static_cast<std::uint64_t>(x.stride) * dtype_size(x.dtype);
  const std::uint64_t py = static_cast<std::uint64_t>(y.stride) * dtype_size(y.dtype);
  if (px != py) return true;
  const std::uint64_t wx = static_cast<std::uint64_t>(x.cols) * dtype_size(x.dtype);
  const std::uint64_t wy = static_cast<std::uint64_t>(y.cols) * dtype_size(y.dtype);
  const std::uint64_t o = (ry.begin >= rx.begin ? ry.begin - rx.begin : px - (rx.begin - ry.begin) % px) % px;
  return o < wx || o + wy > px;  // y's window [o, o + wy) within each pitch meets x's [0, wx)
}

}  // namespace

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::kAuto: return "auto";
    case Backend::kReference: return "reference";
    case Backend::kCpu: return "cpu";
    case Backend::kCuda: return "cuda";
  }
  return "unknown";
}

Backend backend_from_name(const std::string& name) {
  if (name == "auto") return Backend::kAuto;
  if (name == "reference" || name == "ref") return Backend::kReference;
  if (name == "cpu") return Backend::kCpu;
  if (name == "cuda" || name == "gpu") return Backend::kCuda;
  fail("backend", "unknown backend '" + name + "' (expected auto, reference, cpu or cuda)");
}

bool backend_available(Backend b) {
  return b == Backend::kCuda ? cuda::available() : true;
}

void validate_matmul(const char* op, const MatrixView& x, const WeightView& w, const MatrixView& y) {
  const std::string ws = "weight N=" + std::to_string(w.n) + " K=" + std::to_string(w.k);
  if (w.k <= 0 || w.k % kBlockSize != 0)
    fail(op, ws + ": K must be a positive multiple of 16 (quantize pads other K)");
  if (w.n <= 0) fail(op, ws + ": N must be positive");
  if (!w.packed || !w.scales) fail(op, ws + ": null packed or scales pointer");
  detail::check_tensor_scale(op, w.tensor_scale, ws);
  const detail::WeightBytes wb = detail::weight_bytes(op, w.n, w.k, ws);
  detail::check_dtype(op, x.dtype, "activations");
  detail::check_dtype(op, y.dtype, "output");
  if (x.rows < 0 || x.cols <= 0 || x.stride < x.cols)
    fail(op, "activations " + shape_str(x) + ": need rows >= 0, cols > 0 and stride >= cols");
  if (x.cols > w.k || x.cols <= w.k - kBlockSize)
    fail(op, "activations " + shape_str(x) + " do not match " + ws +
                 " (activation K must equal the weight's K, or its unpadded K)");
  if (y.rows != x.rows || y.cols != w.n || y.stride < y.cols)
    fail(op, "output " + shape_str(y) + " does not match M=" + std::to_string(x.rows) +
                 " N=" + std::to_string(w.n));
  if (y.dtype != x.dtype)
    fail(op, std::string("output dtype ") + dtype_name(y.dtype) + " differs from activation dtype " +
                 dtype_name(x.dtype));
  if (x.rows > 0 && (!x.data || !y.data)) fail(op, "null activation or output pointer (M=" + std::to_string(x.rows) + ")");
  // Spans that fit in 64 bits and in the address space: range_of below and the kernels' row
  // addressing rely on it (a wrapped stride would read row 0 again, silently).
  std::uint64_t span = 0;
  if (!detail::view_bytes_fit(x, &span)) detail::view_bytes(op, x, "activations " + shape_str(x));  // throws
  if (!detail::view_bytes_fit(y, &span)) detail::view_bytes(op, y, "output " + shape_str(y));       // throws
  const int es = dtype_size(x.dtype);
  if (!aligned(x.data, es) || !aligned(y.data, es))
    fail(op, "activation or output pointer is not aligned to its " + std::to_string(es) + "-byte element");
  // The kernels read x and the weights while other threads (blocks) write y: an output that
  // shares bytes with them would give a silently wrong result, so it is refused.
  if (x.rows > 0) {
    if (views_overlap(x, y))
      fail(op, "output " + shape_str(y) + " overlaps the activations " + shape_str(x) + " (in-place matmul is not supported)");
    const ByteRange ry = range_of(y);
    const auto p = reinterpret_cast<std::uintptr_t>(w.packed), s = reinterpret_cast<std::uintptr_t>(w.scales);
    if (intersect(ry, {p, p + wb.packed}) || intersect(ry, {s, s + wb.scales}))
      fail(op, "output " + shape_str(y) + " overlaps the packed weights or the scales of " + ws);
  }
}

void quantized_matmul(const MatrixView& x, const WeightView& w, const MatrixView& y, Backend backend) {
  validate_matmul("quantized_matmul", x, w, y);
  if (x.rows == 0) return;
  switch (backend) {
    case Backend::kReference: quantized_matmul_ref(x, w, y); return;
    case Backend::kCuda: cuda::quantized_matmul_host(x, w, y); return;
    case Backend::kAuto:  // host views: the CPU (device pointers go through cuda::quantized_matmul)
    case Backend::kCpu: cpu::quantized_matmul(x, w, y); return;
  }
  fail("quantized_matmul", "unknown Backend value " + std::to_string(static_cast<int>(backend)));
}

Tensor quantized_matmul(const Tensor& x, const QuantizedWeight& w, Backend backend) {
  const char* op = "quantized_matmul";
  if (x.shape.empty()) fail(op, "activation must have at least one dimension");
  detail::check_tensor(op, x, "activation tensor");
  detail::check_quantized_weight(op, w, "weight");
  const std::int64_t k = x.shape.back();
  const std::int64_t m = k == 0 ? 0 : x.numel() / k;
  std::vector<std::int64_t> out_shape(x.shape.begin(), x.shape.end() - 1);
  out_shape.push_back(w.n);
  Tensor y(x.dtype, out_shape);
  quantized_matmul(MatrixView{const_cast<void*>(x.data()), x.dtype, m, k, k}, w.view(),
                   MatrixView{y.data(), y.dtype, m, w.n, w.n}, backend);
  return y;
}

}  // namespace nvfp4
