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

// The (compute dtype, KV dtype) dispatch of a KV kernel's launcher: calls launch(T{}, KV{})
// for kv_t the compute dtype or F8E4M3.
template <class F>
Status dispatch_kv(DType t, DType kv_t, const char* kernel, F&& launch) {
  if (t == DType::F32 && kv_t == DType::F32)
    launch(float{}, float{});
  else if (t == DType::F32 && kv_t == DType::F8E4M3)
    launch(float{}, fp8_e4m3{});
  else if (t == DType::BF16 && kv_t == DType::BF16)
    launch(bf16{}, bf16{});
  else if (t == DType::BF16 && kv_t == DType::F8E4M3)
    launch(bf16{}, fp8_e4m3{});
  else
    return Status::bad(
        cat(kernel, ": dtype ", dtype_name(t), " with a ", dtype_name(kv_t),
            " KV cache (expected f32 or bf16, with a KV cache of the same dtype or fp8)"));
  return launch_status(kernel);
}

}  // namespace loom::gpu
