// The norm family (kernels/norm.h) at Terra's width: rms_norm_residual and layer_norm_residual
// with the residual add, at decode (1, 64, 256 rows) and prefill (1746 rows) sizes.
#include "kernels/norm.cuh"
#include "bench.h"
#include "kernels/layer_norm.cuh"

namespace loom::bench {

nlohmann::json bench_norm(const Context& c) {
  nlohmann::json out = nlohmann::json::array();
  const int dim = 2048;
  for (bool layer : {false, true})
    for (DType t : {DType::BF16, DType::F32})
      for (int rows : {1, 64, 256, 1746}) {
        const size_t n = size_t(rows) * dim;
        std::vector<float> x = random_host(n, 1, -2, 2), delta = random_host(n, 2);
        const std::vector<float> w = random_host(size_t(dim), 3, 0.5f, 1.5f),
                                 b = random_host(size_t(dim), 4);
        Buffers d;
        float* dx = static_cast<float*>(d.upload(x, DType::F32));
        const void* dd = d.upload(delta, t);
        if (t == DType::BF16) delta = d.download(dd, n, t);  // the values the kernel reads
        const float* dw = static_cast<const float*>(d.upload(w, DType::F32));
        const float* db = static_cast<const float*>(d.upload(b, DType::F32));
        void* dout = d.alloc(n * dtype_size(t));
        NormArgs a{t, dx, dd, dw, layer ? db : nullptr, nullptr, rows, dim, 1e-5f, dout};
        auto launch = [&] {
          LOOM_KERNEL(layer ? gpu::layer_norm_residual(a, c.stream)
                            : gpu::rms_norm_residual(a, c.stream));
        };
        launch();
        std::vector<float> ref(n);
        NormArgs r{DType::F32, x.data(), delta.data(), w.data(), layer ? b.data() : nullptr,
                   nullptr,    rows,     dim,          1e-5f,    ref.data()};
        layer ? cpu::layer_norm_residual(r) : cpu::rms_norm_residual(r);
        const double err = rel_err(d.download(dout, n, t), ref);
        const double us = time_us(c, launch);
        // x read and written, delta read, out written (the weights stay in L2 across rows).
        const double bytes = double(n) * (8 + 2 * dtype_size(t));
        out.push_back(report(c, layer ? "layer_norm_residual" : "rms_norm_residual", t,
                             std::to_string(rows) + "x" + std::to_string(dim), us, bytes, err));
      }
  return out;
}

}  // namespace loom::bench
