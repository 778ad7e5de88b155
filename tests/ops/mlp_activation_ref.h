// The mlp_activation family's references (kernels/mlp_activation.h) against values computed
// with torch's formulas. A header of test cases: tests/test_ops_ref.cpp runs it in every build,
// tests/cuda/ops/test_mlp_activation.cpp beside the kernel checks.
#pragma once

#include <doctest/doctest.h>

#include <vector>

#include "kernels/mlp_activation.h"

TEST_CASE("cpu::activate, bias_activation and act_mul give fixed values") {
  using namespace loom;
  // torch: silu(1), gelu_new(1) (tanh), gelu(1) (erf), relu(-1)
  CHECK(cpu::activate(Activation::Silu, 1.0f) == doctest::Approx(0.7310586).epsilon(1e-6));
  CHECK(cpu::activate(Activation::GeluTanh, 1.0f) == doctest::Approx(0.8411920).epsilon(1e-6));
  CHECK(cpu::activate(Activation::Gelu, 1.0f) == doctest::Approx(0.8413447).epsilon(1e-6));
  CHECK(cpu::activate(Activation::Relu, -1.0f) == 0.0f);
  CHECK(cpu::activate(Activation::Relu, 2.5f) == 2.5f);

  // y [2, 2] + bias [0.5, -1]: [[1.5, -3], [0, 1]], then the activation.
  const std::vector<float> y0 = {1, -2, -0.5f, 2}, bias = {0.5f, -1};
  BiasActivationArgs a;
  a.t = DType::F32;
  a.bias = bias.data();
  a.rows = 2;
  a.n = 2;
  std::vector<float> y = y0;
  a.y = y.data();
  cpu::bias_activation(a);  // the bias add alone
  CHECK(y == std::vector<float>{1.5f, -3, 0, 1});
  y = y0;
  a.apply_act = true;
  a.act = Activation::Relu;
  cpu::bias_activation(a);
  CHECK(y == std::vector<float>{1.5f, 0, 0, 1});
  y = y0;
  a.act = Activation::Silu;
  cpu::bias_activation(a);
  CHECK(y[0] == doctest::Approx(1.2263617).epsilon(1e-6));  // silu(1.5)
  CHECK(y[2] == 0.0f);
  y = y0;
  a.bias = nullptr;
  a.act = Activation::Gelu;
  cpu::bias_activation(a);  // no bias: gelu(2) at [1, 1]
  CHECK(y[3] == doctest::Approx(1.9544997).epsilon(1e-6));

  // gate_up [1, 4]: gate [1, -1], up [2, 3] → [silu(1)·2, silu(-1)·3]; gelu_tanh(-1)·4 below.
  const std::vector<float> gu = {1, -1, 2, 3, -1, 1.5f, 4, 1};
  std::vector<float> out(4);
  ActMulArgs m;
  m.t = DType::F32;
  m.gate_up = gu.data();
  m.out = out.data();
  m.rows = 2;
  m.inter = 2;
  m.act = Activation::Silu;
  cpu::act_mul(m);
  CHECK(out[0] == doctest::Approx(1.4621172).epsilon(1e-6));
  CHECK(out[1] == doctest::Approx(-0.8068243).epsilon(1e-6));
  m.act = Activation::GeluTanh;
  cpu::act_mul(m);
  CHECK(out[2] == doctest::Approx(-0.6352320).epsilon(1e-6));
  CHECK(out[3] == doctest::Approx(1.3995716).epsilon(1e-6));  // gelu_tanh(1.5) · 1
}
