// The KV cache's element types on the device: the compute dtype (float, bf16) or FP8 e4m3
// (fp8_e4m3). Every KV writer (rope_kv_write, the fused-RoPE decode
// kernels) stores through kv_from_f32, so there is one quantizer: x · (1/s) in fp32, then
// round to nearest even with saturation to ±448 (cvt.rn.satfinite; core/fp8.h is its host
// reference). Readers take to_f32 of an fp8_e4m3 as the raw value q and apply the scale s
// outside the inner loops (k_scale in the softmax scale, v_scale in the epilogue).
// Included by .cu files only.
#pragma once

#include <cuda_fp8.h>

#include "kernels/common.cuh"

namespace loom::gpu {

struct fp8_e4m3 {
  uint8_t bits;
};

// The one quantizer.
__device__ __forceinline__ fp8_e4m3 kv_quantize(float x, float inv_s) {
  return fp8_e4m3{
      static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fmul_rn(x, inv_s), __NV_SATFINITE, __NV_E4M3))};
}

__device__ __forceinline__ float to_f32(fp8_e4m3 v) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(v.bits, __NV_E4M3)));
}

// x (already rounded to the compute dtype) as the cache stores it; inv_s = 1 / s (fp8 only).
template <class KV>
__device__ __forceinline__ KV kv_from_f32(float x, float inv_s);
template <>
__device__ __forceinline__ float kv_from_f32<float>(float x, float) {
  return x;
}
template <>
__device__ __forceinline__ bf16 kv_from_f32<bf16>(float x, float) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ fp8_e4m3 kv_from_f32<fp8_e4m3>(float x, float inv_s) {
  return kv_quantize(x, inv_s);
}

// The scale of kv head h for K (v = false) or V from a layer's [2, kv_heads] scales; null: 1.
__device__ __forceinline__ float kv_scale_of(const float* scales, int kv_heads, int h, bool v) {
  return scales ? scales[(v ? kv_heads : 0) + h] : 1.0f;
}

// The (compute dtype, KV dtype) dispatch of a KV kernel's launcher: dispatch_f32_bf16 on the
// compute dtype t, then launch(T{}, KV{}) with KV = fp8_e4m3 for an FP8 cache, else T. A
// launch returning void gets launch_status(op), one returning a Status is returned as is.
template <class F>
Status dispatch_kv(DType t, bool kv_fp8, const char* op, F&& launch) {
  return dispatch_f32_bf16(t, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    auto with_cache = [&](auto kv) -> Status {
      auto bound = [&](auto) { return launch(T{}, kv); };
      return run_dispatched<T>(op, bound);
    };
    return kv_fp8 ? with_cache(fp8_e4m3{}) : with_cache(T{});
  });
}

}  // namespace loom::gpu
