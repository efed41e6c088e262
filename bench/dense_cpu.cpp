// bench/dense_cpu.cpp -- see dense_cpu.h.
#include "bench/dense_cpu.h"

namespace nvfp4::bench {

std::optional<dnnl::matmul::primitive_desc> onednn_bf16_matmul_pd(const dnnl::engine& eng, std::int64_t m, std::int64_t n,
                                                                   std::int64_t k, dnnl::memory::data_type dst) {
  using md = dnnl::memory::desc;
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  try {
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(md({m, k}, dt::bf16, tag::ab), md({k, n}, dt::bf16, tag::any),
                                                           md({m, n}, dst, tag::ab)),
                                        eng);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

bool onednn_bf16_matmul_available() {
  static const bool ok = [] {
    try {
      const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
      return onednn_bf16_matmul_pd(eng, 1, 256, 256, dnnl::memory::data_type::bf16).has_value();
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

}  // namespace nvfp4::bench
