#include "kernels/gemv_stage.cuh"

namespace loom::gpu {

// Batch 1's RmsNorm kernels keep the norm weight in shared memory behind xs (gemv_body below).
template <int M, GemvIn IN>
constexpr bool kNormWeightStaged = M == 1 && IN == GemvIn::RmsNorm;

// One block an SM, said to ptxas: with the explicit minimum it gives the one-row kernels 104-120
// registers instead of 97-98 (the 2-8-row ones are unchanged) and batch 1 runs ~1% faster
// (H200, session 30: the 88-GEMV chain 0.708 -> 0.695 ms, loom bench 0.746 -> 0.739 s/frame).
template <int M, GemvIn IN, GemvOut OUT>
__device__ __forceinline__ void gemv_body(const GemvArgs& a) {
  extern __shared__ uint4 gemv_smem[];
  bf16* xs = reinterpret_cast<bf16*>(gemv_smem);  // [M][k], then (M 1, RmsNorm) norm_w f32 [k]
  __shared__ float scratch[gemv_scratch_floats<M>()];
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
      store_output<OUT>(a, size_t(lane) * a.y_stride + n, v);
    }
#pragma unroll
    for (int i = 0; i < M; i++) acc[i] = 0.0f;
  };

  // Batch 1's RmsNorm weight into shared memory behind xs before the wait: it does not depend on
  // the previous kernel, and read after the staging's block sum it was a round trip on the
  // critical path (the weights' stream evicts it from L2 every step). Each thread copies the
  // float4s it reads back (stage_input_serial's j = tid + i · kGemvThreads), so its own
  // wait_group makes them visible to it. H100, loom bench batch 1, two rounds: 0.7949 / 0.7933
  // -> 0.7894 / 0.7879 s/frame (bench/results/2026-12-07-h100-s75-gemv-rows-block-minor-norm-
  // weight.json, where giving the rows to warps block-minor measured 3% slower).
  if constexpr (kNormWeightStaged<M, IN>) {
    float* nws = reinterpret_cast<float*>(xs + k);  // [k]
    for (int j = tid; j < k / 4; j += kGemvThreads)
      cp_async16(nws + 4 * j, static_cast<const float*>(a.norm_w) + 4 * j, true);
    cp_async_commit();
    GemvArgs b = a;
    b.norm_w = nws;
    stream_weights<M, IN>(b, xs, k, scratch, iters, load, consume, [](int) {});
  } else {
    stream_weights<M, IN>(a, xs, k, scratch, iters, load, consume, [](int) {});
  }
}

template <int M, GemvIn IN, GemvOut OUT>
__global__ void __launch_bounds__(kGemvThreads, 1) gemv_kernel(GemvArgs a) {
  gemv_body<M, IN, OUT>(a);
}
// GemvArgs::beside_attention. H200, loom bench batch 1, two rounds (s/frame): 0.7284 -> 0.7120
// with qkv on it; 0.7183 with qkv and o, 0.7309 with o alone (o's blocks beside attention's);
// 96 registers with the attention kernel held to 118 no better than 88
// (bench/results/2026-12-02-h200-s33-gemv-beside-attention-qkv-o-96.json).
template <int M, GemvIn IN, GemvOut OUT>
__global__ void __maxnreg__(kGemvBesideRegs) gemv_kernel_beside(GemvArgs a) {
  gemv_body<M, IN, OUT>(a);
}

template <int M, GemvIn IN, GemvOut OUT>
static Status launch_fma(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  const int warps = kGemvThreads / 32;  // a warp a row
  const size_t smem =
      size_t(M) * a.k * sizeof(bf16) + (kNormWeightStaged<M, IN> ? size_t(a.k) * sizeof(float) : 0);
  const int blocks = (a.n + warps - 1) / warps;
  if constexpr (M == 1)
    if (a.beside_attention)
      return launch_gemv<gemv_kernel_beside<M, IN, OUT>>(a, smem, blocks, num_sms, stream);
  return launch_gemv<gemv_kernel<M, IN, OUT>>(a, smem, blocks, num_sms, stream);
}

int gemv_beside_block_registers() {
  return block_registers(
      reinterpret_cast<const void*>(gemv_kernel_beside<1, GemvIn::RmsNorm, GemvOut::Store>),
      kGemvThreads);
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
  LOOM_ARG_CHECK(a.kernel != GemvKernel::Fma || a.m <= kGemvFmaMaxRows, "gemv: m ", a.m,
                 " with the FMA kernel (expected 1..", kGemvFmaMaxRows, ")");
  const bool fma =
      a.kernel == GemvKernel::Fma || (a.kernel == GemvKernel::Auto && a.m <= kGemvFmaAutoRows);
  if (!fma) return gemv_mma(a, num_sms, stream);
  return dispatch_in_out(a, [&](auto in, auto out) {
    constexpr GemvIn IN = decltype(in)::value;
    constexpr GemvOut OUT = decltype(out)::value;
    if (a.m <= 1) return launch_fma<1, IN, OUT>(a, num_sms, stream);
    if (a.m <= 2) return launch_fma<2, IN, OUT>(a, num_sms, stream);
    if (a.m <= 4) return launch_fma<4, IN, OUT>(a, num_sms, stream);
    return launch_fma<8, IN, OUT>(a, num_sms, stream);
  });
}

}  // namespace loom::gpu
