// Element types of checkpoint tensors and their conversions to fp32. bf16 and f16 are
// stored as raw uint16_t bits; conversion rounds to nearest even like torch does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace loom {

// F8E4M3: float8_e4m3fn (core/fp8.h), the FP8 KV cache's element; no checkpoint tensor has it.
enum class DType { F32, F16, BF16, I32, I64, U8, F8E4M3 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "bf16", … as printed in messages
bool parse_safetensors_dtype(const std::string& s, DType* out);  // "BF16" → BF16

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace loom
