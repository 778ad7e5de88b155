// The norm family's references (kernels/norm.h) against hand-computed values. A header of test
// cases: tests/test_ops_ref.cpp runs it in every build, tests/cuda/ops/test_norm.cpp beside the
// kernel checks.
#pragma once

#include <doctest/doctest.h>

#include <vector>

#include "kernels/norm.h"

namespace loom::test {

inline NormArgs norm_ref_args(float* x, const float* delta, const float* w, const float* b,
                              const int32_t* rows, int n_rows, int dim, float* out) {
  NormArgs a;
  a.t = DType::F32;
  a.x = x;
  a.delta = delta;
  a.weight = w;
  a.bias = b;
  a.rows = rows;
  a.n_rows = n_rows;
  a.dim = dim;
  a.eps = 0.0f;
  a.out = out;
  return a;
}

}  // namespace loom::test

TEST_CASE("cpu::rms_norm_residual gives fixed values (residual add, selected rows)") {
  using namespace loom;
  // x rows [1, 4] and [0, 5]; delta [2, 0] turns row 0 into [3, 4]. Both rows then have
  // mean(x²) = 12.5, scale 1 / sqrt(12.5). Output row 0 reads x row 1, output row 1 x row 0.
  std::vector<float> x = {1, 4, 0, 5};
  const std::vector<float> delta = {2, 0, 0, 0}, w = {1, 2};
  const std::vector<int32_t> rows = {1, 0};
  std::vector<float> out(4);
  cpu::rms_norm_residual(test::norm_ref_args(x.data(), delta.data(), w.data(), nullptr, rows.data(),
                                             2, 2, out.data()));
  CHECK(x == std::vector<float>{3, 4, 0, 5});
  const float want[4] = {0.0f, 2.8284271f, 0.8485281f, 2.2627417f};
  for (int i = 0; i < 4; i++) CHECK(out[size_t(i)] == doctest::Approx(want[i]).epsilon(1e-6));
}

TEST_CASE("cpu::layer_norm_residual gives fixed values (affine, non-affine, residual add)") {
  using namespace loom;
  // [0, 2, 3, 4] + delta [1, 0, 0, 0] = [1, 2, 3, 4]: mean 2.5, biased variance 1.25;
  // (x - 2.5) / sqrt(1.25).
  std::vector<float> x = {0, 2, 3, 4};
  const std::vector<float> delta = {1, 0, 0, 0};
  std::vector<float> y(4);
  cpu::layer_norm_residual(
      test::norm_ref_args(x.data(), delta.data(), nullptr, nullptr, nullptr, 1, 4, y.data()));
  CHECK(x == std::vector<float>{1, 2, 3, 4});
  const float want[4] = {-1.3416408f, -0.4472136f, 0.4472136f, 1.3416408f};
  for (int i = 0; i < 4; i++) CHECK(y[size_t(i)] == doctest::Approx(want[i]).epsilon(1e-6));
  const std::vector<float> w = {2, 2, 2, 2}, b = {1, 1, 1, 1};
  cpu::layer_norm_residual(
      test::norm_ref_args(x.data(), nullptr, w.data(), b.data(), nullptr, 1, 4, y.data()));
  for (int i = 0; i < 4; i++) CHECK(y[size_t(i)] == doctest::Approx(2 * want[i] + 1).epsilon(1e-6));
}
