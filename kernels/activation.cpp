// Host references of convert and fill_uniform (activation.h).
#include <cstring>

#include "core/error.h"
#include "core/philox.h"
#include "kernels/activation.h"

namespace loom::cpu {

namespace {

float load(DType t, const void* p, size_t i) {
  switch (t) {
    case DType::F32:
      return static_cast<const float*>(p)[i];
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::F16:
      return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    default:
      fail("cpu::convert: source dtype ", dtype_name(t), " (expected f32, bf16 or f16)");
  }
}

void store(DType t, void* p, size_t i, float v) {
  if (t == DType::F32)
    static_cast<float*>(p)[i] = v;
  else if (t == DType::BF16)
    static_cast<uint16_t*>(p)[i] = f32_to_bf16(v);
  else
    fail("cpu: destination dtype ", dtype_name(t), " (expected f32 or bf16)");
}

}  // namespace

void convert(DType src_t, const void* src, DType dst_t, void* dst, size_t n) {
  for (size_t i = 0; i < n; i++) store(dst_t, dst, i, load(src_t, src, i));
}

float uniform_value(size_t i, uint64_t seed, float scale) {
  const Philox4 r = philox4x32_10(uint32_t(i), uint32_t(i >> 32), 0x5eed, 0, uint32_t(seed),
                                  uint32_t(seed >> 32));
  const float u = (float(r.v[0] >> 8) + 0.5f) * (1.0f / 16777216.0f);
  return (2.0f * u - 1.0f) * scale;
}

void fill_uniform(DType t, void* dst, size_t n, uint64_t seed, float scale) {
  for (size_t i = 0; i < n; i++) store(t, dst, i, uniform_value(i, seed, scale));
}

}  // namespace loom::cpu
