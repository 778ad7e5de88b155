// Device helpers of the two GEMV kernels (gemv.cu: CUDA-core FMAs, one warp a weight row;
// gemv_mma.cu: tensor-core mma, one warp a slice of eight weight rows): the block size, the
// streaming weight load and the staging of the fused input in shared memory. Included by those
// two .cu files only.
#pragma once

#include <algorithm>
#include <type_traits>

#include "kernels/common.cuh"
#include "kernels/gemv.cuh"

namespace loom::gpu {

constexpr int kGemvThreads = 512;
constexpr int kGemvUnroll = 8;  // 16-byte loads in flight per lane

__device__ __forceinline__ void bf16x8_to_f32(const uint4& v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

// Weights are read once per step: no L1 allocation, and a 256-byte L2 prefetch per request
// (the warp's 512-byte row segment arrives in two DRAM bursts instead of four).
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ uint4 pack_bf16x8(const float* f) {
  uint4 v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

// The rows one after another, the whole block on each (row stride k): the batch-1 FMA kernel's
// staging, kept for M = 1 because the all-rows staging below ran batch 1 slower
// (bench/NOTES-cuda.md, session 28). Still a template over M, as measured, so that its code
// (checked as PTX) stays what was measured.
template <int M, GemvIn IN>
__device__ __forceinline__ void stage_input_serial(const GemvArgs& a, bf16* xs, float* scratch) {
  const int k = a.k, k8 = k / 8, tid = threadIdx.x;
  for (int i = 0; i < M; i++) {
    uint4* dst = reinterpret_cast<uint4*>(xs + size_t(i) * k);  // [k / 8] vectors of 8
    if (i >= a.m) {
      for (int j = tid; j < k8; j += kGemvThreads) dst[j] = make_uint4(0, 0, 0, 0);
      continue;
    }
    if constexpr (IN == GemvIn::Plain) {
      const uint4* src =
          reinterpret_cast<const uint4*>(static_cast<const bf16*>(a.x) + size_t(i) * a.x_stride);
      for (int j = tid; j < k8; j += kGemvThreads) dst[j] = src[j];
    } else if constexpr (IN == GemvIn::RmsNorm) {
      const int r = a.rows != nullptr ? a.rows[i] : i;
      const float4* src =
          reinterpret_cast<const float4*>(static_cast<const float*>(a.x) + size_t(r) * a.x_stride);
      const float4* nw = reinterpret_cast<const float4*>(a.norm_w);
      float ss = 0.0f;
      for (int j = tid; j < k / 4; j += kGemvThreads) {
        const float4 v = src[j];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
      const float inv = rsqrtf(block_sum(ss, scratch) / float(k) + a.eps);
      cp_async_wait<0>();  // gemv.cu's copy of norm_w at batch 1 (a no-op where none is pending)
      uint2* dst2 = reinterpret_cast<uint2*>(dst);  // [k / 4] vectors of 4
      for (int j = tid; j < k / 4; j += kGemvThreads) {
        const float4 v = src[j], w = nw[j];
        uint2 o;
        *reinterpret_cast<__nv_bfloat162*>(&o.x) =
            __floats2bfloat162_rn(v.x * inv * w.x, v.y * inv * w.y);
        *reinterpret_cast<__nv_bfloat162*>(&o.y) =
            __floats2bfloat162_rn(v.z * inv * w.z, v.w * inv * w.w);
        dst2[j] = o;
      }
    } else {
      const uint4* g = reinterpret_cast<const uint4*>(static_cast<const bf16*>(a.x) +
                                                      size_t(i) * 2 * k);  // [k / 8]
      const uint4* u = g + k8;                                             // [k / 8]
      for (int j = tid; j < k8; j += kGemvThreads) {
        float gf[8], uf[8], f[8];
        bf16x8_to_f32(g[j], gf);
        bf16x8_to_f32(u[j], uf);
#pragma unroll
        for (int e = 0; e < 8; e++) f[e] = gf[e] / (1.0f + expf(-gf[e])) * uf[e];
        dst[j] = pack_bf16x8(f);
      }
    }
  }
}

// Shared memory the staging's reductions use (stage_input<M>'s scratch): at M = 1 block_sum's 32
// floats, else a sum a warp for each of up to kGemvMaxRows rows, then the rows' scales.
template <int M>
constexpr int gemv_scratch_floats() {
  return M == 1 ? 32 : (kGemvThreads / 32 + 1) * kGemvMaxRows;
}

// xs[i, :k] (row stride ld, a multiple of 8) = the transformed input row i (GemvIn), bf16; rows
// a.m..M-1 are zero. The staging sits between the PDL wait and the first FMA, so its round trips
// to L2 are on every GEMV's critical path: 16-byte loads throughout, and every row's loads in
// flight together (a row after another cost ~0.8 µs a row a GEMV at m = 8). RmsNorm's sums
// follow block_sum's order (a lane's strided sum, warp_sum, then warp_sum over the warps'
// sums), so a row's bits do not depend on M.
template <int M, GemvIn IN>
__device__ __forceinline__ void stage_input(const GemvArgs& a, bf16* xs, int ld, float* scratch) {
  if constexpr (M == 1) {
    stage_input_serial<1, IN>(a, xs, scratch);
    return;
  }
  const int k = a.k, k8 = k / 8, tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  uint4* dst = reinterpret_cast<uint4*>(xs);  // [M][ld / 8] vectors of 8
  const int ld8 = ld / 8;
  if constexpr (IN == GemvIn::Plain || IN == GemvIn::SiluMul) {
    for (int j = tid; j < k8; j += kGemvThreads) {
#pragma unroll
      for (int i = 0; i < M; i++) {
        uint4 v = make_uint4(0, 0, 0, 0);
        if (i < a.m) {
          if constexpr (IN == GemvIn::Plain) {
            v = reinterpret_cast<const uint4*>(static_cast<const bf16*>(a.x) +
                                               size_t(i) * a.x_stride)[j];
          } else {
            const uint4* g = reinterpret_cast<const uint4*>(static_cast<const bf16*>(a.x) +
                                                            size_t(i) * 2 * k);  // [k / 8]
            float gf[8], uf[8], f[8];
            bf16x8_to_f32(g[j], gf);
            bf16x8_to_f32(g[k8 + j], uf);
#pragma unroll
            for (int e = 0; e < 8; e++) f[e] = gf[e] / (1.0f + expf(-gf[e])) * uf[e];
            v = pack_bf16x8(f);
          }
        }
        dst[size_t(i) * ld8 + j] = v;
      }
    }
  } else {
    auto src = [&](int i) {  // fp32 [k / 4] vectors of 4
      const int r = a.rows != nullptr ? a.rows[i] : i;
      return reinterpret_cast<const float4*>(static_cast<const float*>(a.x) +
                                             size_t(r) * a.x_stride);
    };
    float ss[M];
#pragma unroll
    for (int i = 0; i < M; i++) ss[i] = 0.0f;
    for (int j = tid; j < k / 4; j += kGemvThreads) {
#pragma unroll
      for (int i = 0; i < M; i++)
        if (i < a.m) {
          const float4 v = src(i)[j];
          ss[i] += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
    }
    float* warp_sums = scratch;                                 // [kGemvThreads / 32][M]
    float* inv = scratch + (kGemvThreads / 32) * kGemvMaxRows;  // [M]
#pragma unroll
    for (int i = 0; i < M; i++) {
      const float v = warp_sum(ss[i]);
      if (lane == 0) warp_sums[warp * M + i] = v;
    }
    __syncthreads();
    if (warp < M) {  // M ≤ 16 = the block's warps: warp i finishes row i
      const float t = warp_sum(lane < kGemvThreads / 32 ? warp_sums[lane * M + warp] : 0.0f);
      if (lane == 0) inv[warp] = rsqrtf(t / float(k) + a.eps);
    }
    __syncthreads();
    const float4* nw = reinterpret_cast<const float4*>(a.norm_w);
    for (int j = tid; j < k / 4; j += kGemvThreads) {
      const float4 w = nw[j];
#pragma unroll
      for (int i = 0; i < M; i++) {
        uint2 o = make_uint2(0, 0);
        if (i < a.m) {
          const float4 v = src(i)[j];
          const float s = inv[i];
          *reinterpret_cast<__nv_bfloat162*>(&o.x) =
              __floats2bfloat162_rn(v.x * s * w.x, v.y * s * w.y);
          *reinterpret_cast<__nv_bfloat162*>(&o.y) =
              __floats2bfloat162_rn(v.z * s * w.z, v.w * s * w.w);
        }
        reinterpret_cast<uint2*>(dst + size_t(i) * ld8)[j] = o;
      }
    }
  }
}

// y[o] of the output mode (GemvOut) = v.
template <GemvOut OUT>
__device__ __forceinline__ void store_output(const GemvArgs& a, size_t o, float v) {
  if constexpr (OUT == GemvOut::Store)
    static_cast<bf16*>(a.y)[o] = __float2bfloat16_rn(v);
  else if constexpr (OUT == GemvOut::AddF32)
    static_cast<float*>(a.y)[o] += v;
  else
    static_cast<float*>(a.y)[o] = v;
}

// The weight stream both kernels run, `iters` batches of kGemvUnroll 16-byte loads a lane:
// load(w, it) fills a register buffer, consume(w, it) uses it, after(it) follows the refill.
// Weights do not depend on earlier kernels, so the first batch is in flight before the wait for
// the previous kernel (programmatic dependent launch), the second once the input is staged
// (issued before the staging, it held the staging's loads up: 5% slower a frame on the H200).
// Then two register buffers in turn, each refilled as soon as it is consumed.
template <int M, GemvIn IN, class Load, class Consume, class After>
__device__ __forceinline__ void stream_weights(const GemvArgs& a, bf16* xs, int ld, float* scratch,
                                               int iters, Load& load, Consume& consume,
                                               After&& after) {
  uint4 wa[kGemvUnroll], wb[kGemvUnroll];
  if (iters > 0) load(wa, 0);
  pdl_wait();
  pdl_trigger();
  stage_input<M, IN>(a, xs, ld, scratch);
  if (iters > 1) load(wb, 1);
  __syncthreads();
  for (int it = 0; it < iters; it += 2) {
    consume(wa, it);
    if (it + 2 < iters) load(wa, it + 2);
    after(it);
    if (it + 1 < iters) {
      consume(wb, it + 1);
      if (it + 3 < iters) load(wb, it + 3);
      after(it + 1);
    }
  }
}

// Launches Kernel(a) with `smem` bytes of dynamic shared memory on at most `blocks` blocks: one
// wave, grid-stride over the work (a second, partial wave would leave most SMs idle while it
// drains), as many blocks as fit on the GPU at once. Measured: one 256-thread block per SM (to
// leave room for the next GEMV under programmatic dependent launch) streams 25-30 % slower than
// this; the memory system wants more warps in flight.
template <auto Kernel>
Status launch_gemv(const GemvArgs& a, size_t smem, int blocks, int num_sms, cudaStream_t stream) {
  // The dynamic shared memory limit set so far. Set at the first launch whatever its size: the
  // default 48 KB bounds static + dynamic bytes together (the staging's scratch is static), so
  // 48 KB of dynamic memory less than the scratch already needs the opt-in.
  static size_t configured = 0;
  if (smem > configured) {
    const cudaError_t e =
        cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // not left for the next launch's check
      return Status::bad(cat("gemv: ", a.m, " rows of k ", a.k, " need ", smem,
                             " bytes of shared memory: ", cudaGetErrorString(e)));
    }
    configured = smem;
  }
  // Blocks an SM holds, by shared memory size (it depends on k): counted once a size.
  struct Fit {
    size_t smem;
    int per_sm;
  };
  static Fit fits[16];
  static int n_fits = 0;
  int per_sm = 0;
  for (int f = 0; f < n_fits && per_sm == 0; f++)
    if (fits[f].smem == smem) per_sm = fits[f].per_sm;
  if (per_sm == 0) {
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, kGemvThreads, smem) !=
            cudaSuccess ||
        per_sm < 1) {
      (void)cudaGetLastError();
      per_sm = 1;
    }
    if (n_fits < 16) fits[n_fits++] = {smem, per_sm};
  }
  const cudaError_t e = launch_kernel(Kernel, dim3(std::min(blocks, num_sms * per_sm)),
                                      dim3(kGemvThreads), smem, stream, a.pdl, a);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::bad(cat("gemv: launch failed: ", cudaGetErrorString(e)));
  }
  return launch_status("gemv");
}

// launch(in, out) with std::integral_constant tags for a's (input, output) pair, or a bad Status
// for a pair no kernel is built for.
template <class F>
Status dispatch_in_out(const GemvArgs& a, F&& launch) {
  using In = GemvIn;
  using Out = GemvOut;
  auto tags = [&](auto in, auto out) { return a.in == in.value && a.out == out.value; };
  const std::integral_constant<In, In::Plain> plain;
  const std::integral_constant<In, In::RmsNorm> norm;
  const std::integral_constant<In, In::SiluMul> silu;
  const std::integral_constant<Out, Out::Store> store;
  const std::integral_constant<Out, Out::StoreF32> store_f32;
  const std::integral_constant<Out, Out::AddF32> add_f32;
  if (tags(plain, store)) return launch(plain, store);
  if (tags(plain, store_f32)) return launch(plain, store_f32);
  if (tags(plain, add_f32)) return launch(plain, add_f32);
  if (tags(norm, store)) return launch(norm, store);
  if (tags(norm, store_f32)) return launch(norm, store_f32);
  if (tags(silu, add_f32)) return launch(silu, add_f32);
  return Status::bad("gemv: unsupported input/output combination");
}

// The tensor-core kernel (gemv_mma.cu), for any m in 1..kGemvMaxRows; arguments checked.
Status gemv_mma(const GemvArgs& a, int num_sms, cudaStream_t stream);

}  // namespace loom::gpu
