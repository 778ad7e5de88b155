// The activation family (kernels/activation.h): convert as the weight upload (bf16 → f32, f16 →
// bf16, 64 MB of source) and the logits path (bf16 → f32, one row of 262,145) run it; checked
// bit for bit against cpu::convert.
#include <cmath>
#include <cstring>

#include "bench.h"
#include "kernels/activation.cuh"

namespace loom::bench {

nlohmann::json bench_convert(const Context& c) {
  nlohmann::json out = nlohmann::json::array();
  struct Case {
    DType src, dst;
    size_t n;
  };
  for (const Case& k : {Case{DType::BF16, DType::F32, size_t(32) << 20},
                        Case{DType::F16, DType::BF16, size_t(32) << 20},
                        Case{DType::BF16, DType::F32, size_t(262145)}}) {
    Buffers d;
    void* src = d.alloc(k.n * dtype_size(k.src));
    void* dst = d.alloc(k.n * dtype_size(k.dst));
    // Source bits from the fill kernel's bf16 / f32 values, reinterpreted as f16 for f16 sources
    // (every bit pattern but NaN / inf converts; the fill's scale keeps them finite).
    LOOM_KERNEL(
        gpu::fill_uniform(DType::BF16, src, k.n * dtype_size(k.src) / 2, 9, 1.0f, c.stream));
    auto launch = [&] { LOOM_KERNEL(gpu::convert(k.src, src, k.dst, dst, k.n, c.stream)); };
    launch();
    std::vector<uint8_t> hs(k.n * dtype_size(k.src)), hd(k.n * dtype_size(k.dst)), ref(hd.size());
    LOOM_CUDA_CHECK(cudaStreamSynchronize(c.stream));
    LOOM_CUDA_CHECK(cudaMemcpy(hs.data(), src, hs.size(), cudaMemcpyDeviceToHost));
    LOOM_CUDA_CHECK(cudaMemcpy(hd.data(), dst, hd.size(), cudaMemcpyDeviceToHost));
    cpu::convert(k.src, hs.data(), k.dst, ref.data(), k.n);
    const double err = hd == ref ? 0.0 : INFINITY;  // bit for bit
    out.push_back(report(c, "convert", k.dst,
                         std::string(dtype_name(k.src)) + "->" + dtype_name(k.dst) + " [" +
                             std::to_string(k.n) + "]",
                         time_us(c, launch), double(hs.size() + hd.size()), err));
  }
  return out;
}

}  // namespace loom::bench
