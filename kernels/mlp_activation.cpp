// fp32 references of bias_activation and act_mul (mlp_activation.h).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/mlp_activation.h"

namespace loom::cpu {

float activate(Activation act, float x) {
  switch (act) {
    case Activation::Silu:
      return x / (1.0f + std::exp(-x));
    case Activation::GeluTanh:  // transformers NewGELUActivation
      return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case Activation::Gelu:  // torch gelu, approximate='none'
      return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
    case Activation::Relu:
      return std::max(x, 0.0f);
  }
  return x;
}

void bias_activation(const BiasActivationArgs& a) {
  LOOM_CHECK(a.t == DType::F32, "cpu::bias_activation: dtype ", dtype_name(a.t),
             " (the reference is fp32)");
  auto* y = static_cast<float*>(a.y);
  const size_t n = size_t(a.n), total = size_t(a.rows) * n;
  for (size_t i = 0; i < total; i++) {
    float v = y[i];
    if (a.bias) v += a.bias[i % n];
    y[i] = a.apply_act ? activate(a.act, v) : v;
  }
}

void act_mul(const ActMulArgs& a) {
  LOOM_CHECK(a.t == DType::F32, "cpu::act_mul: dtype ", dtype_name(a.t),
             " (the reference is fp32)");
  const auto* gate_up = static_cast<const float*>(a.gate_up);
  auto* out = static_cast<float*>(a.out);
  const size_t inter = size_t(a.inter);
  for (size_t r = 0; r < size_t(a.rows); r++) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    for (size_t j = 0; j < inter; j++) out[r * inter + j] = activate(a.act, g[j]) * u[j];
  }
}

}  // namespace loom::cpu
