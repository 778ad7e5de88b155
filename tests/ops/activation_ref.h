// The activation family's references (kernels/activation.h: convert, fill_uniform) against fixed
// values: round-to-nearest-even ties, f16 decoding, and Philox outputs computed outside loom
// (Random123's formulas, checked against its known-answer vector). A header of test cases:
// tests/test_ops_ref.cpp runs it in every build, tests/cuda/ops/test_activation.cpp beside the
// kernel checks.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "core/philox.h"
#include "kernels/activation.h"

TEST_CASE("cpu::convert and cpu::fill_uniform give fixed values") {
  using namespace loom;
  // f32 → bf16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (ties to even: 1); 1 + 3·2^-8 is
  // halfway between 1 + 2^-7 and 1 + 2^-6 (ties to even: 1 + 2^-6); -2.5 exact.
  const std::vector<float> src = {1.00390625f, 1.01171875f, -2.5f};
  std::vector<uint16_t> bf(3);
  cpu::convert(DType::F32, src.data(), DType::BF16, bf.data(), 3);
  CHECK(bf == std::vector<uint16_t>{0x3f80, 0x3f82, 0xc020});
  // bf16 → f32 and f16 → f32 are exact.
  std::vector<float> f(3);
  cpu::convert(DType::BF16, bf.data(), DType::F32, f.data(), 3);
  CHECK(f == std::vector<float>{1.0f, 1.015625f, -2.5f});
  const std::vector<uint16_t> half = {0x3c00, 0xc000, 0x3555};
  cpu::convert(DType::F16, half.data(), DType::F32, f.data(), 3);
  CHECK(f == std::vector<float>{1.0f, -2.0f, 0.333251953125f});
  CHECK_THROWS(cpu::convert(DType::F32, src.data(), DType::F16, bf.data(), 3));

  // Philox4x32-10 known answer (Random123 kat_vectors: counter 0, key 0).
  const Philox4 kat = philox4x32_10(0, 0, 0, 0, 0, 0);
  CHECK(kat.v[0] == 0x6627e8d5u);
  CHECK(kat.v[3] == 0x9b00dbd8u);
  // fill_uniform(i, seed, 0.5): counter (i, 0, 0x5eed, 0), key seed; u = ((v0 >> 8) + 0.5) / 2^24.
  std::vector<float> u(6);
  cpu::fill_uniform(DType::F32, u.data(), 6, 7, 0.5f);
  CHECK(u[5] == 0.25096750259399414f);
  cpu::fill_uniform(DType::F32, u.data(), 2, 0, 0.5f);
  CHECK(u[0] == 0.37156879901885986f);
  CHECK(u[1] == -0.23223260045051575f);
}
