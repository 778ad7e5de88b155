// The linear layer's reference (cpu::matmul_nt, backend/cpu/ops.h; its kernels are cuBLAS,
// gemv_bf16 and linear_fixed) against hand-computed values. A header of test cases:
// tests/test_ops_ref.cpp runs it in every build, tests/cuda/ops/test_gemm.cpp beside the kernel
// checks.
#pragma once

#include <doctest/doctest.h>

#include <vector>

#include "backend/cpu/ops.h"

TEST_CASE("cpu::matmul_nt gives fixed values (HF nn.Linear: x · wᵀ + bias)") {
  using namespace loom;
  // x [2, 2], w [3, 2], bias [3].
  const std::vector<float> x = {1, 2, -1, 0.5f}, w = {1, 1, 2, -1, 0, 3}, bias = {0, 1, 0.5f};
  std::vector<float> y(6);
  cpu::matmul_nt(x.data(), w.data(), bias.data(), y.data(), 2, 3, 2);
  CHECK(y == std::vector<float>{3, 1, 6.5f, -0.5f, -1.5f, 2});
  cpu::matmul_nt(x.data(), w.data(), nullptr, y.data(), 2, 3, 2);
  CHECK(y == std::vector<float>{3, 0, 6, -0.5f, -2.5f, 1.5f});
}
