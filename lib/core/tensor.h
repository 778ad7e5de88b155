// A host tensor: dtype, shape and a pointer to row-major bytes that some owner keeps alive
// (an mmap of a safetensors file, or a buffer made by a merge). Copies are cheap views.
// Device memory is the CUDA backend's business and never appears here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace loom {

struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;         // row-major, dtype_size(dtype) * numel() bytes
  std::shared_ptr<const void> owner;  // keeps `data` alive

  bool empty() const { return data == nullptr; }
  int64_t numel() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape.at(size_t(i)); }

  // Element i converted to fp32 (bf16, f16, f32 only).
  float at(int64_t i) const;
  std::vector<float> to_f32() const;
  void copy_to_f32(float* dst) const;  // nbytes of fp32, numel() elements

  static Tensor own_f32(std::vector<int64_t> shape, std::vector<float> values);
  static Tensor own_bytes(DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
};

std::string shape_str(const std::vector<int64_t>& shape);  // "[256, 2048]"

}  // namespace loom
