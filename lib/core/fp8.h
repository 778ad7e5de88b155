// FP8 e4m3 (float8_e4m3fn: 1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no
// infinities; 0x7F / 0xFF are NaN; largest finite 448; smallest subnormal 2^-9): the host
// reference of the KV cache's quantizer (README "FP8 KV cache"). The CUDA kernels use the
// hardware conversion (cvt.rn.satfinite.e4m3x2.f32), which tests/cuda/test_kv_fp8.cpp checks
// against this one element by element.
//
// KV convention (FlashInfer / TensorRT-LLM): stored q = e4m3(x · (1/s)), dequantised x' = q · s,
// with 1/s computed in fp32 and the product rounded to fp32 before the conversion.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace loom {

constexpr float kFp8E4m3Max = 448.0f;
constexpr uint8_t kFp8E4m3NaN = 0x7F;

// e4m3 bits → float (exact).
inline float fp8_e4m3_to_f32(uint8_t q) {
  const int e = (q >> 3) & 0xF, m = q & 7;
  const float sign = (q & 0x80) ? -1.0f : 1.0f;
  if (e == 0xF && m == 7) return std::nanf("");
  if (e == 0) return sign * std::ldexp(float(m), -9);  // subnormal: m · 2^-9
  return sign * std::ldexp(float(8 + m), e - 10);      // (1 + m/8) · 2^(e-7)
}

// float → e4m3 bits: round to nearest, ties to even mantissa; |x| beyond 448 (infinity
// included) saturates to ±448; NaN gives 0x7F; −0 keeps its sign.
inline uint8_t fp8_e4m3_from_f32(float x) {
  if (std::isnan(x)) return kFp8E4m3NaN;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= kFp8E4m3Max) return uint8_t(sign | 0x7E);
  // Quantum of a's binade: 2^(e-3) for normals (e ≥ -6), 2^-9 below 2^-6 (subnormals).
  int e = 0;
  std::frexp(a, &e);  // a = f · 2^e, f in [0.5, 1): a's binade is 2^(e-1)
  const int qexp = (e - 1 < -6 ? -6 : e - 1) - 3;
  const float units = std::ldexp(a, -qexp);  // exact (a power-of-two scaling)
  const float r = std::nearbyint(units);     // ties to even (the default rounding mode)
  const float y = std::ldexp(r, qexp);       // rounded magnitude, ≤ 448 here (a < 448)
  if (y == 0.0f) return sign;
  // Encode y: subnormal when below 2^-6.
  if (y < 0.015625f) return uint8_t(sign | int(std::ldexp(y, 9)));
  int ye = 0;
  const float f = std::frexp(y, &ye);  // y = f · 2^ye, f in [0.5, 1)
  const int m = int(std::ldexp(f, 4)) - 8;
  return uint8_t(sign | ((ye - 1 + 7) << 3) | m);
}

// The KV round trip of one element with scale s: q · s for q = e4m3(x · (1/s)).
inline float kv_fp8_round_trip(float x, float s) {
  const float inv = 1.0f / s;
  return fp8_e4m3_to_f32(fp8_e4m3_from_f32(x * inv)) * s;
}

}  // namespace loom
