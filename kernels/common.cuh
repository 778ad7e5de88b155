// Device helpers shared by the kernel families: element conversions between the activation
// types (fp32, bf16), warp reductions, 16-byte vector types, launches with programmatic
// dependent launch, cp.async groups and the bf16 tensor-core mma. Included by .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_f32(float v) {
  return v;
}
__device__ __forceinline__ float to_f32(bf16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_f32(__half v) {
  return __half2float(v);
}

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

// v rounded to T and back: the value a T tensor would hold.
template <class T>
__device__ __forceinline__ float round_to(float v) {
  return to_f32(from_f32<T>(v));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; `scratch` holds 32 floats. Every thread gets the result.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(t);
}

// RoPE of one pair (x0, x1) = dims (j, j + head_dim / 2) at position pos (HF rotate_half),
// every product and sum rounded on its own: rope_kv_write and the fused decode kernels must
// give the same bits (batch invariance), which contraction choices could break.
__device__ __forceinline__ void rope_pair(float x0, float x1, float pos, float inv_freq, float& y0,
                                          float& y1) {
  float s, c;
  sincosf(__fmul_rn(pos, inv_freq), &s, &c);
  y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  y1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}

// The f32 / bf16 dispatch of a launcher: calls launch(T{}) with T = float or bf16 for dtype t
// and returns the launch's status, or a bad Status naming `kernel` for any other dtype.
template <class F>
Status dispatch_f32_bf16(DType t, const char* kernel, F&& launch) {
  if (t == DType::F32)
    launch(float{});
  else if (t == DType::BF16)
    launch(bf16{});
  else
    return Status::bad(cat(kernel, ": dtype ", dtype_name(t), " (expected f32 or bf16)"));
  return launch_status(kernel);
}

inline int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// Launches kernel<<<grid, block, smem, stream>>>(args...), with programmatic dependent launch
// when pdl: the kernel may start before the previous kernel on the stream has finished, so it
// must execute griddepcontrol.wait (pdl_wait) before it reads that kernel's outputs or writes
// anything that kernel reads.
template <class... P, class... A>
cudaError_t launch_kernel(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, bool pdl, A&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}

// Waits for the previous kernel of the stream (no-op without programmatic dependent launch).
__device__ __forceinline__ void pdl_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
// Lets the next kernel of the stream start its independent prologue now.
__device__ __forceinline__ void pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;");
}

// cp.async groups (the copies themselves differ per kernel: cache hints, address forms).
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// c += A·B on the tensor cores, m16n8k16, bf16 in, fp32 accumulate. Fragments (g = lane / 4,
// t = lane % 4): a0 (row g, k 2t..2t+1), a1 (row g+8, same k), a2 (row g, k 2t+8..), a3 (row
// g+8, k 2t+8..); b0 (k 2t..2t+1, col g), b1 (k 2t+8.., col g); c0 c1 (row g, cols 2t, 2t+1),
// c2 c3 (row g+8).
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  mma_bf16(c, a[0], a[1], a[2], a[3], b0, b1);
}

}  // namespace loom::gpu
