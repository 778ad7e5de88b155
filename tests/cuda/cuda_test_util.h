// Helpers of the CUDA suites: device buffers that upload/download fp32 values as f32 or bf16,
// poisoned (NaN bytes) before every kernel run so that an unwritten element fails the check,
// seeded random data, and the relative error ‖a − b‖ / ‖b‖.
#pragma once

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::test {

class DevBuf {
 public:
  DevBuf() = default;
  explicit DevBuf(size_t bytes) {
    LOOM_CUDA_CHECK(cudaMalloc(&p_, bytes_ = std::max<size_t>(bytes, 16)));
  }
  ~DevBuf() {
    if (p_) cudaFree(p_);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  void poison() { LOOM_CUDA_CHECK(cudaMemset(p_, 0xff, bytes_)); }  // NaN in f32 and bf16

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// values → device as dtype t (F32 or BF16).
inline DevBuf upload(const std::vector<float>& v, DType t) {
  DevBuf b(v.size() * dtype_size(t));
  if (t == DType::F32) {
    LOOM_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  } else {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); i++) h[i] = f32_to_bf16(v[i]);
    LOOM_CUDA_CHECK(cudaMemcpy(b.get(), h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  }
  return b;
}

template <class I>
inline DevBuf upload_ints(const std::vector<I>& v) {
  DevBuf b(v.size() * sizeof(I));
  LOOM_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(I), cudaMemcpyHostToDevice));
  return b;
}

inline std::vector<float> download(const DevBuf& b, size_t n, DType t) {
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> v(n);
  if (t == DType::F32) {
    LOOM_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), n * 4, cudaMemcpyDeviceToHost));
  } else {
    std::vector<uint16_t> h(n);
    LOOM_CUDA_CHECK(cudaMemcpy(h.data(), b.get(), n * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) v[i] = bf16_to_f32(h[i]);
  }
  return v;
}

// Values a bf16 tensor would hold (for building CPU references of bf16 inputs).
inline std::vector<float> round_bf16(std::vector<float> v) {
  for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

inline std::vector<float> random_vec(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// ‖a − b‖₂ / ‖b‖₂; NaN anywhere gives +inf.
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); i++) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    const double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline double tolerance(DType t) {
  return t == DType::F32 ? 1e-5 : 1e-2;
}

}  // namespace loom::test
