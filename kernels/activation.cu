#include "core/philox.h"
#include "kernels/activation.cuh"
#include "kernels/common.cuh"
#include "kernels/kv_quant.cuh"

namespace loom::gpu {

template <class S, class D>
__global__ void convert_kernel(const S* src, D* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    dst[i] = from_f32<D>(to_f32(src[i]));
}

Status convert(DType src_t, const void* src, DType dst_t, void* dst, size_t n,
               cudaStream_t stream) {
  LOOM_ARG_CHECK(src && dst, "convert: null pointer");
  if (n == 0) return Status::good();
  const int blocks = int(std::min<size_t>((n + 255) / 256, 8192));
  return dispatch_f32_bf16(dst_t, "convert (destination)", [&](auto dst_tag) {
    using D = decltype(dst_tag);
    return dispatch_dtype<float, bf16, __half>(src_t, "convert (source)", [&](auto src_tag) {
      using S = decltype(src_tag);
      convert_kernel<<<blocks, 256, 0, stream>>>(static_cast<const S*>(src), static_cast<D*>(dst),
                                                 n);
    });
  });
}

// The fill's value as dst's type: rounded to nearest even, or for e4m3 by the KV quantizer
// with scale 1 (core/fp8.h's fp8_e4m3_from_f32 on the host).
template <class T>
__device__ __forceinline__ T fill_cast(float x) {
  return from_f32<T>(x);
}
template <>
__device__ __forceinline__ fp8_e4m3 fill_cast<fp8_e4m3>(float x) {
  return kv_quantize(x, 1.0f);
}

// cpu::uniform_value (activation.cpp), term for term.
template <class T>
__global__ void fill_uniform_kernel(T* dst, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const Philox4 r = philox4x32_10(uint32_t(i), uint32_t(i >> 32), 0x5eed, 0, uint32_t(seed),
                                    uint32_t(seed >> 32));
    const float u = (float(r.v[0] >> 8) + 0.5f) * (1.0f / 16777216.0f);
    dst[i] = fill_cast<T>((2.0f * u - 1.0f) * scale);
  }
}

Status fill_uniform(DType t, void* dst, size_t n, uint64_t seed, float scale, cudaStream_t stream) {
  LOOM_ARG_CHECK(dst, "fill_uniform: null pointer");
  if (n == 0) return Status::good();
  const int blocks = int(std::min<size_t>((n + 255) / 256, 16384));
  if (t == DType::F8E4M3) {
    fill_uniform_kernel<<<blocks, 256, 0, stream>>>(static_cast<fp8_e4m3*>(dst), n, seed, scale);
    return launch_status("fill_uniform");
  }
  return dispatch_f32_bf16(t, "fill_uniform", [&](auto tag) {
    using T = decltype(tag);
    fill_uniform_kernel<<<blocks, 256, 0, stream>>>(static_cast<T*>(dst), n, seed, scale);
  });
}

}  // namespace loom::gpu
