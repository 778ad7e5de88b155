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

// xs[i, :k] = the transformed input row i (GemvIn), bf16; rows ≥ a.m are zero. 16-byte loads
// throughout: the staging sits between the PDL wait and the first FMA, so its round trips to
// L2 are on every GEMV's critical path.
template <int M, GemvIn IN>
__device__ __forceinline__ void stage_input(const GemvArgs& a, bf16* xs, float* scratch) {
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

template <int M, GemvIn IN, GemvOut OUT>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemvArgs a) {
  extern __shared__ uint4 gemv_smem[];
  bf16* xs = reinterpret_cast<bf16*>(gemv_smem);  // [M][k]
  __shared__ float scratch[32];
  const int k = a.k;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warps = kGemvThreads / 32;
  const int k8 = k / 8;
  const int nb = (k8 + 32 * kGemvUnroll - 1) / (32 * kGemvUnroll);  // load batches per row
  const int warp0 = blockIdx.x * warps + (tid >> 5), wstride = gridDim.x * warps;
  const int my_rows = warp0 < a.n ? (a.n - 1 - warp0) / wstride + 1 : 0;
  const int iters = my_rows * nb;  // (row, batch) steps of this warp

  // Iteration `it` streams batch it % nb of this warp's row it / nb.
  auto load = [&](uint4(&w)[kGemvUnroll], int it) {
    const int n = warp0 + (it / nb) * wstride;
    const uint4* wrow = static_cast<const uint4*>(a.w) + size_t(n) * k8;
    const int c0 = (it % nb) * 32 * kGemvUnroll;
#pragma unroll
    for (int u = 0; u < kGemvUnroll; u++) {
      const int c = c0 + u * 32 + lane;
      w[u] = c < k8 ? load_stream(wrow + c) : make_uint4(0, 0, 0, 0);
    }
  };
  float acc[M];
#pragma unroll
  for (int i = 0; i < M; i++) acc[i] = 0.0f;
  const uint4* xs4 = gemv_smem;
  auto consume = [&](const uint4(&w)[kGemvUnroll], int it) {
    const int c0 = (it % nb) * 32 * kGemvUnroll;
#pragma unroll
    for (int u = 0; u < kGemvUnroll; u++) {
      const int c = c0 + u * 32 + lane;
      if (c < k8) {
        float wf[8];
        bf16x8_to_f32(w[u], wf);
#pragma unroll
        for (int i = 0; i < M; i++) {
          float xf[8];
          bf16x8_to_f32(xs4[size_t(i) * k8 + c], xf);
#pragma unroll
          for (int e = 0; e < 8; e++) acc[i] += wf[e] * xf[e];
        }
      }
    }
    if (it % nb != nb - 1) return;
    const int n = warp0 + (it / nb) * wstride;
#pragma unroll
    for (int i = 0; i < M; i++) acc[i] = warp_sum(acc[i]);
    if (lane < M && lane < a.m) {
      float v = 0.0f;
#pragma unroll
      for (int i = 0; i < M; i++)
        if (i == lane) v = acc[i];
      const size_t o = size_t(lane) * a.y_stride + n;
      if constexpr (OUT == GemvOut::Store)
        static_cast<bf16*>(a.y)[o] = __float2bfloat16_rn(v);
      else if constexpr (OUT == GemvOut::AddF32)
        static_cast<float*>(a.y)[o] += v;
      else
        static_cast<float*>(a.y)[o] = v;
    }
#pragma unroll
    for (int i = 0; i < M; i++) acc[i] = 0.0f;
  };

  // Weights do not depend on earlier kernels: the first batch is in flight before the wait for
  // the previous kernel (programmatic dependent launch), the second once the input is staged
  // (issued before the staging, it held the staging's loads up: 5% slower a frame on the H200).
  uint4 wa[kGemvUnroll], wb[kGemvUnroll];
  if (iters > 0) load(wa, 0);
  pdl_wait();
  pdl_trigger();
  stage_input<M, IN>(a, xs, scratch);
  if (iters > 1) load(wb, 1);
  __syncthreads();

  // Two register buffers: one batch is consumed while the other is in flight.
  for (int it = 0; it < iters; it += 2) {
    consume(wa, it);
    if (it + 2 < iters) load(wa, it + 2);
    if (it + 1 < iters) {
      consume(wb, it + 1);
      if (it + 3 < iters) load(wb, it + 3);
    }
  }
}

template <int M, GemvIn IN, GemvOut OUT>
static Status launch_gemv(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  const size_t smem = size_t(M) * a.k * sizeof(bf16);
  static size_t configured = 48 * 1024;  // dynamic shared memory limit set so far
  if (smem > configured) {
    const cudaError_t e = cudaFuncSetAttribute(
        gemv_kernel<M, IN, OUT>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess)
      return Status::bad(cat("gemv: ", M, " rows of k ", a.k, " need ", smem,
                             " bytes of shared memory: ", cudaGetErrorString(e)));
    configured = smem;
  }
  // One wave, grid-stride over rows: as many blocks as fit on the GPU at once (a second,
  // partial wave would leave most SMs idle while it drains). Measured: one 256-thread block
  // per SM (to leave room for the next GEMV under programmatic dependent launch) streams
  // 25-30 % slower than this; the memory system wants more warps in flight.
  static int per_sm = 0;
  if (per_sm == 0) {
    const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, gemv_kernel<M, IN, OUT>, kGemvThreads, smem);
    if (e != cudaSuccess || per_sm < 1) per_sm = 1;
  }
  const int warps = kGemvThreads / 32;
  const int blocks = std::min((a.n + warps - 1) / warps, num_sms * per_sm);
  const cudaError_t e = launch_kernel(gemv_kernel<M, IN, OUT>, dim3(blocks), dim3(kGemvThreads),
                                      smem, stream, a.pdl, a);
  if (e != cudaSuccess) return Status::bad(cat("gemv: launch failed: ", cudaGetErrorString(e)));
  return launch_status("gemv");
}

template <GemvIn IN, GemvOut OUT>
static Status dispatch_rows(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  if (a.m <= 1) return launch_gemv<1, IN, OUT>(a, num_sms, stream);
  if (a.m <= 2) return launch_gemv<2, IN, OUT>(a, num_sms, stream);
  if (a.m <= 4) return launch_gemv<4, IN, OUT>(a, num_sms, stream);
  return launch_gemv<8, IN, OUT>(a, num_sms, stream);
}

Status gemv_bf16(const GemvArgs& a0, int num_sms, cudaStream_t stream) {
  GemvArgs a = a0;
  if (a.x_stride == 0) a.x_stride = a.k;
  if (a.y_stride == 0) a.y_stride = a.n;
  LOOM_ARG_CHECK(a.m >= 1 && a.m <= kGemvMaxRows, "gemv: m ", a.m, " (expected 1..", kGemvMaxRows,
                 ")");
  LOOM_ARG_CHECK(a.n > 0 && a.k > 0 && a.k % 8 == 0, "gemv: n ", a.n, ", k ", a.k,
                 " (expected k a multiple of 8)");
  LOOM_ARG_CHECK(a.w && a.x && a.y, "gemv: null w/x/y");
  LOOM_ARG_CHECK(reinterpret_cast<uintptr_t>(a.w) % 16 == 0, "gemv: weights not 16-byte aligned");
  LOOM_ARG_CHECK(a.in != GemvIn::RmsNorm || a.norm_w != nullptr, "gemv: RmsNorm without weight");
  // The input is staged with 16-byte loads.
  LOOM_ARG_CHECK(reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.x_stride % 8 == 0 &&
                     reinterpret_cast<uintptr_t>(a.norm_w) % 16 == 0,
                 "gemv: input or norm weight not 16-byte aligned, or x_stride ", a.x_stride,
                 " not a multiple of 8");
  LOOM_ARG_CHECK(num_sms > 0, "gemv: num_sms ", num_sms);
  if (a.in == GemvIn::Plain && a.out == GemvOut::Store)
    return dispatch_rows<GemvIn::Plain, GemvOut::Store>(a, num_sms, stream);
  if (a.in == GemvIn::Plain && a.out == GemvOut::StoreF32)
    return dispatch_rows<GemvIn::Plain, GemvOut::StoreF32>(a, num_sms, stream);
  if (a.in == GemvIn::Plain && a.out == GemvOut::AddF32)
    return dispatch_rows<GemvIn::Plain, GemvOut::AddF32>(a, num_sms, stream);
  if (a.in == GemvIn::RmsNorm && a.out == GemvOut::Store)
    return dispatch_rows<GemvIn::RmsNorm, GemvOut::Store>(a, num_sms, stream);
  if (a.in == GemvIn::RmsNorm && a.out == GemvOut::StoreF32)
    return dispatch_rows<GemvIn::RmsNorm, GemvOut::StoreF32>(a, num_sms, stream);
  if (a.in == GemvIn::SiluMul && a.out == GemvOut::AddF32)
    return dispatch_rows<GemvIn::SiluMul, GemvOut::AddF32>(a, num_sms, stream);
  return Status::bad("gemv: unsupported input/output combination");
}

}  // namespace loom::gpu
