// The mlp_activation family (kernels/mlp_activation.h) at Terra's MLP width: act_mul (SwiGLU's
// silu and gelu_tanh) and bias_activation (gelu_tanh with a bias), decode and prefill rows.
#include "kernels/mlp_activation.cuh"
#include "bench.h"

namespace loom::bench {

nlohmann::json bench_mlp_activation(const Context& c) {
  nlohmann::json out = nlohmann::json::array();
  const int inter = 5632;
  for (DType t : {DType::BF16, DType::F32})
    for (int rows : {1, 64, 256, 1746})
      for (Activation act : {Activation::Silu, Activation::GeluTanh}) {
        const std::string shape = std::to_string(rows) + "x" + std::to_string(inter);
        const size_t n = size_t(rows) * inter;
        Buffers d;
        // act_mul: gate_up [rows, 2 inter] → out [rows, inter].
        const void* dgu = d.upload(random_host(2 * n, 5, -4, 4), t);
        const std::vector<float> gu = d.download(dgu, 2 * n, t);
        void* dout = d.alloc(n * dtype_size(t));
        const ActMulArgs am{t, dgu, dout, rows, inter, act};
        auto mul = [&] { LOOM_KERNEL(gpu::act_mul(am, c.stream)); };
        mul();
        std::vector<float> ref(n);
        cpu::act_mul({DType::F32, gu.data(), ref.data(), rows, inter, act});
        double err = rel_err(d.download(dout, n, t), ref);
        out.push_back(report(c, act == Activation::Silu ? "act_mul silu" : "act_mul gelu_tanh", t,
                             shape, time_us(c, mul), double(n) * 3 * dtype_size(t), err));
        if (act != Activation::GeluTanh) continue;
        // bias_activation in place on the up GEMM's output (the plain MLP).
        std::vector<float> y = random_host(n, 6, -4, 4);
        void* dy = d.upload(y, t);
        y = d.download(dy, n, t);
        const std::vector<float> bias = random_host(size_t(inter), 7);
        const float* db = static_cast<const float*>(d.upload(bias, DType::F32));
        const BiasActivationArgs ba{t, dy, db, rows, inter, true, act};
        LOOM_KERNEL(gpu::bias_activation(ba, c.stream));
        cpu::bias_activation({DType::F32, y.data(), bias.data(), rows, inter, true, act});
        err = rel_err(d.download(dy, n, t), y);
        auto bias_act = [&] { LOOM_KERNEL(gpu::bias_activation(ba, c.stream)); };
        out.push_back(report(c, "bias_activation gelu_t", t, shape, time_us(c, bias_act),
                             double(n) * 2 * dtype_size(t), err));
      }
  return out;
}

}  // namespace loom::bench
