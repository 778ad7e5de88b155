// Device helpers shared by the kernel families: element conversions between the activation
// types (fp32, bf16), warp reductions, 16-byte vector types, launches with programmatic
// dependent launch, cp.async groups and the bf16 tensor-core mma. Included by .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

using bf16 = __nv_bfloat16;

// A shared-memory pointer as the 32-bit address PTX's .shared operands take.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

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
// give the same bits (batch invariance), which contraction choices could break. rope_rotate
// takes the angle's cos and sin, computed ahead.
__device__ __forceinline__ void rope_rotate(float x0, float x1, float c, float s, float& y0,
                                            float& y1) {
  y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  y1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
}
// The angle's cos and sin, as every RoPE path computes them.
__device__ __forceinline__ void rope_angle(float pos, float inv_freq, float& c, float& s) {
  sincosf(__fmul_rn(pos, inv_freq), &s, &c);
}
__device__ __forceinline__ void rope_pair(float x0, float x1, float pos, float inv_freq, float& y0,
                                          float& y1) {
  float c, s;
  rope_angle(pos, inv_freq, c, s);
  rope_rotate(x0, x1, c, s, y0, y1);
}

// The one dtype dispatch of the launchers: dispatch_dtype<Ts...>(t, op, launch) calls
// launch(T{}) with T the element type among Ts (float, bf16, __half) whose DType is t. A launch
// that returns void gets launch_status(op); one that returns a Status (a nested dispatch, a
// launcher that checks more) is returned as is. Any other dtype gives a bad Status naming op,
// t and the dtypes accepted. dispatch_f32_bf16 is the common case (activations and outputs).
//   return dispatch_f32_bf16(a.t, "rms_norm_residual", [&](auto tag) {
//     using T = decltype(tag);
//     rms_norm_residual_kernel<T><<<grid, block, 0, stream>>>(...);
//   });
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::F32;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::BF16;
}
template <>
constexpr DType dtype_of<__half>() {
  return DType::F16;
}

template <class T, class F>
Status run_dispatched(const char* op, F& launch) {
  if constexpr (std::is_void_v<decltype(launch(T{}))>) {
    launch(T{});
    return launch_status(op);
  } else {
    return launch(T{});
  }
}

template <class... Ts, class F>
Status dispatch_dtype(DType t, const char* op, F&& launch) {
  Status st;
  const bool found =
      ((dtype_of<Ts>() == t ? (st = run_dispatched<Ts>(op, launch), true) : false) || ...);
  if (found) return st;
  std::string accepted;
  ((accepted += (accepted.empty() ? "" : " or ") + std::string(dtype_name(dtype_of<Ts>()))), ...);
  return Status::bad(cat(op, ": dtype ", dtype_name(t), " (expected ", accepted, ")"));
}

template <class F>
Status dispatch_f32_bf16(DType t, const char* op, F&& launch) {
  return dispatch_dtype<float, bf16>(t, op, std::forward<F>(launch));
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

// Registers a block of `threads` threads of `kernel` takes on an SM (a warp's are allocated in
// units of 256), or -1 if the attributes cannot be read.
inline int block_registers(const void* kernel, int threads) {
  cudaFuncAttributes f;
  if (cudaFuncGetAttributes(&f, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return (f.numRegs * 32 + 255) / 256 * 256 * ((threads + 31) / 32);
}

// Cross-block synchronisation in global memory: an acquire load at GPU scope, the global timer.
__device__ __forceinline__ uint32_t ld_acquire_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// *c += v at gpu scope with acquire-release order (atom.acq_rel.gpu); returns the old value. The
// release half publishes this thread's earlier writes and those it observed through a barrier
// before it (a warp's or block's partials, __syncwarp / __syncthreads first); the acquire half
// makes what earlier adds released visible to it and, through a barrier after it, to its warp
// or block. A threadfence reduction's count without a fence.sc.gpu on every thread either side.
__device__ __forceinline__ int atomic_add_acq_rel_gpu(int* c, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;"
               : "=r"(old)
               : "l"(c), "r"(v)
               : "memory");
  return old;
}

// Thread 0's wait until *c >= target (acquire). A grid whose blocks cannot all be resident
// would wait forever: after 2 s it traps, so the launch fails instead of hanging.
__device__ __forceinline__ void spin_until_count(const int* c, int target) {
  const uint64_t t0 = global_ns();
  while (int(ld_acquire_gpu(reinterpret_cast<const uint32_t*>(c))) < target) {
    if (global_ns() - t0 > 2000000000ull) __trap();
    __nanosleep(20);
  }
}

// Waits for the previous kernel of the stream (no-op without programmatic dependent launch).
__device__ __forceinline__ void pdl_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
// Lets the next kernel of the stream start its independent prologue now.
__device__ __forceinline__ void pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;");
}

// 16 bytes global → shared by cp.async, cached in L2 only (.cg: coherent with what other SMs
// wrote and published), of which only the first `bytes` (0..16) are read, the rest zero-filled.
__device__ __forceinline__ void cp_async16_bytes(void* smem, const void* gmem, int bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes)
               : "memory");
}
// All 16 bytes, or (valid false) nothing read and 16 zero bytes written.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  cp_async16_bytes(smem, gmem, valid ? 16 : 0);
}
// cp.async groups (the copies themselves may differ per kernel: cache hints, address forms).
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
