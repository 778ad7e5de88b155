// The weight-streaming GEMV's device pieces (see gemv.cuh), shared by the GEMV kernel
// (gemv.cu) and the batch-1 decode step kernel (decode_step.cu), so that both compute a row
// with the same arithmetic: one warp per output row, each lane's 16-byte chunks c = lane,
// lane + 32, ... in order, fp32 products summed per lane, then warp_sum.
#pragma once

#include "kernels/common.cuh"
#include "kernels/gemv.cuh"

namespace loom::gpu::gemv_impl {

constexpr int kUnroll = 8;  // 16-byte loads in flight per lane (one batch)

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

// Stages the M input rows of a GEMV, transformed, as bf16 [M][k] in shared memory xs (rows
// >= m are zero), with the block's threads; no barrier after. x, rows, norm_w as in GemvArgs
// (x_stride: elements between input rows; SiluMul rows are 2k apart). scratch: 32 floats.
template <int M, GemvIn IN>
__device__ __forceinline__ void stage_input(bf16* xs, const void* x, int x_stride, int m, int k,
                                            const int32_t* rows, const float* norm_w, float eps,
                                            float* scratch) {
  const int tid = threadIdx.x, nt = blockDim.x;
  for (int i = 0; i < M; i++) {
    bf16* dst = xs + size_t(i) * k;
    if (i >= m) {
      for (int j = tid; j < k; j += nt) dst[j] = __float2bfloat16_rn(0.0f);
      continue;
    }
    if constexpr (IN == GemvIn::Plain) {
      const bf16* src = static_cast<const bf16*>(x) + size_t(i) * x_stride;
      for (int j = tid; j < k; j += nt) dst[j] = src[j];
    } else if constexpr (IN == GemvIn::RmsNorm) {
      const int r = rows != nullptr ? rows[i] : i;
      const float* src = static_cast<const float*>(x) + size_t(r) * x_stride;
      float ss = 0.0f;
      for (int j = tid; j < k; j += nt) ss += src[j] * src[j];
      const float inv = rsqrtf(block_sum(ss, scratch) / float(k) + eps);
      for (int j = tid; j < k; j += nt) dst[j] = __float2bfloat16_rn(src[j] * inv * norm_w[j]);
    } else {
      const bf16* src = static_cast<const bf16*>(x) + size_t(i) * 2 * k;
      for (int j = tid; j < k; j += nt) {
        const float g = __bfloat162float(src[j]), u = __bfloat162float(src[k + j]);
        dst[j] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
      }
    }
  }
}

// One warp's rows of y[m, n] = xs[m, :] . W[n, :]^T: rows warp0, warp0 + wstride, ..., walked
// in iterations (iteration it = load batch it % nb of the warp's (it / nb)-th row, nb batches
// of kUnroll chunks a lane per row).
template <int M, GemvOut OUT>
struct WarpRows {
  const uint4* w;
  int n, k8, nb, warp0, wstride, iters, lane;

  __device__ __forceinline__ WarpRows(const void* w_, int n_, int k, int warp0_, int wstride_)
      : w(static_cast<const uint4*>(w_)), n(n_), k8(k / 8), warp0(warp0_), wstride(wstride_) {
    nb = (k8 + 32 * kUnroll - 1) / (32 * kUnroll);
    const int my_rows = warp0 < n ? (n - 1 - warp0) / wstride + 1 : 0;
    iters = my_rows * nb;
    lane = threadIdx.x & 31;
  }

  // Issues the loads of iteration it into buf (zeros past the row's end).
  __device__ __forceinline__ void load(uint4 (&buf)[kUnroll], int it) const {
    const uint4* wrow = w + size_t(warp0 + (it / nb) * wstride) * k8;
    const int c0 = (it % nb) * 32 * kUnroll;
#pragma unroll
    for (int u = 0; u < kUnroll; u++) {
      const int c = c0 + u * 32 + lane;
      buf[u] = c < k8 ? load_stream(wrow + c) : make_uint4(0, 0, 0, 0);
    }
  }

  // Streams every iteration; wa holds iteration 0's loads (load(wa, 0) issued by the caller,
  // if iters > 0). xs4: the staged input, [M][k8] chunks; the first m rows are real.
  __device__ __forceinline__ void run(uint4 (&wa)[kUnroll], const uint4* xs4, int m, void* y,
                                      int y_stride) const {
    float acc[M];
#pragma unroll
    for (int i = 0; i < M; i++) acc[i] = 0.0f;
    auto consume = [&](const uint4(&wv)[kUnroll], int it) {
      const int c0 = (it % nb) * 32 * kUnroll;
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        const int c = c0 + u * 32 + lane;
        if (c < k8) {
          float wf[8];
          bf16x8_to_f32(wv[u], wf);
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
      const int row = warp0 + (it / nb) * wstride;
#pragma unroll
      for (int i = 0; i < M; i++) acc[i] = warp_sum(acc[i]);
      if (lane < M && lane < m) {
        float v = 0.0f;
#pragma unroll
        for (int i = 0; i < M; i++)
          if (i == lane) v = acc[i];
        const size_t o = size_t(lane) * y_stride + row;
        if constexpr (OUT == GemvOut::Store)
          static_cast<bf16*>(y)[o] = __float2bfloat16_rn(v);
        else if constexpr (OUT == GemvOut::AddF32)
          static_cast<float*>(y)[o] += v;
        else
          static_cast<float*>(y)[o] = v;
      }
#pragma unroll
      for (int i = 0; i < M; i++) acc[i] = 0.0f;
    };
    // Two register buffers: the next batch is in flight while the current one is consumed.
    uint4 wb[kUnroll];
    for (int it = 0; it < iters; it += 2) {
      if (it + 1 < iters) load(wb, it + 1);
      consume(wa, it);
      if (it + 1 < iters) {
        if (it + 2 < iters) load(wa, it + 2);
        consume(wb, it + 1);
      }
    }
  }
};

}  // namespace loom::gpu::gemv_impl
