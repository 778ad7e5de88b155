#include "core/tensor.h"

#include <cstring>

#include "core/error.h"

namespace loom {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

float Tensor::at(int64_t i) const {
  switch (dtype) {
    case DType::F32:
      return static_cast<const float*>(data)[i];
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::F16:
      return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    default:
      fail("tensor of dtype ", dtype_name(dtype), " cannot be read as floats");
  }
}

void Tensor::copy_to_f32(float* dst) const {
  const int64_t n = numel();
  switch (dtype) {
    case DType::F32:
      std::memcpy(dst, data, size_t(n) * 4);
      return;
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(data);
      for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(data);
      for (int64_t i = 0; i < n; i++) dst[i] = f16_to_f32(s[i]);
      return;
    }
    default:
      fail("tensor of dtype ", dtype_name(dtype), " cannot be read as floats");
  }
}

std::vector<float> Tensor::to_f32() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  copy_to_f32(out.data());
  return out;
}

Tensor Tensor::own_f32(std::vector<int64_t> shape, std::vector<float> values) {
  auto buf = std::make_shared<std::vector<float>>(std::move(values));
  Tensor t;
  t.dtype = DType::F32;
  t.shape = std::move(shape);
  LOOM_CHECK(int64_t(buf->size()) == t.numel(), "own_f32: ", buf->size(), " values for shape ",
             shape_str(t.shape));
  t.data = buf->data();
  t.owner = buf;
  return t;
}

Tensor Tensor::own_bytes(DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  auto buf = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  LOOM_CHECK(buf->size() == t.nbytes(), "own_bytes: ", buf->size(), " bytes for ",
             dtype_name(dtype), " ", shape_str(t.shape));
  t.data = buf->data();
  t.owner = buf;
  return t;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

}  // namespace loom
