// 16-byte vector loads and stores of the activation types (fp32, bf16) for the elementwise and
// row-wise kernels (norm.cu, mlp_activation.cu), converted to and from fp32 exactly as to_f32 /
// from_f32 convert one element, so that a vector path gives the bits of its scalar twin.
// Included by .cu files only.
#pragma once

#include <cstdint>

#include "kernels/common.cuh"

namespace loom::gpu {

// kVec<T> elements a load or store: 4 fp32, 8 bf16. p must be 16-byte aligned (aligned16);
// fp32 arrays may be any multiple of 4 long.
template <class T>
constexpr int kVec = 16 / int(sizeof(T));

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

template <int N>
__device__ __forceinline__ void load_vec(const float* p, float (&f)[N]) {
  static_assert(N % 4 == 0, "fp32 vectors are float4s");
#pragma unroll
  for (int i = 0; i < N / 4; i++) {
    const float4 q = reinterpret_cast<const float4*>(p)[i];
    f[4 * i] = q.x;
    f[4 * i + 1] = q.y;
    f[4 * i + 2] = q.z;
    f[4 * i + 3] = q.w;
  }
}
template <int N>
__device__ __forceinline__ void store_vec(float* p, const float (&f)[N]) {
  static_assert(N % 4 == 0, "fp32 vectors are float4s");
#pragma unroll
  for (int i = 0; i < N / 4; i++)
    reinterpret_cast<float4*>(p)[i] =
        make_float4(f[4 * i], f[4 * i + 1], f[4 * i + 2], f[4 * i + 3]);
}
__device__ __forceinline__ void load_vec(const bf16* p, float (&f)[8]) {
  const uint4 q = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&q);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 t = __bfloat1622float2(h[i]);  // .x: the lower address
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}
__device__ __forceinline__ void store_vec(bf16* p, const float (&f)[8]) {
  uint4 q;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&q);
#pragma unroll
  for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = q;
}

}  // namespace loom::gpu
