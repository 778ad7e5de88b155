// Host references of convert and fill_uniform (activation.h).
#include "kernels/activation.h"
#include "core/error.h"
#include "core/fp8.h"
#include "core/philox.h"
#include "core/tensor.h"

namespace loom::cpu {

namespace {

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
  Tensor view;  // Tensor::at reads f32, bf16 and f16 elements as floats (exactly)
  view.dtype = src_t;
  view.shape = {int64_t(n)};
  view.data = src;
  for (size_t i = 0; i < n; i++) store(dst_t, dst, i, view.at(int64_t(i)));
}

float uniform_value(size_t i, uint64_t seed, float scale) {
  const Philox4 r = philox4x32_10(uint32_t(i), uint32_t(i >> 32), 0x5eed, 0, uint32_t(seed),
                                  uint32_t(seed >> 32));
  const float u = (float(r.v[0] >> 8) + 0.5f) * (1.0f / 16777216.0f);
  return (2.0f * u - 1.0f) * scale;
}

void fill_uniform(DType t, void* dst, size_t n, uint64_t seed, float scale) {
  if (t == DType::F8E4M3) {  // the KV quantizer's rounding with scale 1
    for (size_t i = 0; i < n; i++)
      static_cast<uint8_t*>(dst)[i] = fp8_e4m3_from_f32(uniform_value(i, seed, scale));
    return;
  }
  for (size_t i = 0; i < n; i++) store(t, dst, i, uniform_value(i, seed, scale));
}

}  // namespace loom::cpu
