#include "kernels/common.cuh"
#include "kernels/kv_fp8.cuh"
#include "kernels/kv_quant.cuh"

namespace loom::gpu {

// One block per slot; threads over (K or V, kv head, dim).
template <class T>
__global__ void kv_stats_kernel(KvStatsArgs a) {
  const int cs = a.cache_slot[blockIdx.x];
  if (cs < 0) return;
  const int row = a.kv_heads * a.head_dim;
  unsigned long long sat = 0;
  for (int i = threadIdx.x; i < 2 * row; i += blockDim.x) {
    const bool v = i >= row;
    const int h = (i % row) / a.head_dim;
    const T* c = static_cast<const T*>(v ? a.v_cache : a.k_cache);
    const float x = fabsf(to_f32(c[size_t(cs) * row + i % row]));
    // Non-negative floats order like their bits.
    atomicMax(reinterpret_cast<int*>(a.absmax + (v ? a.kv_heads : 0) + h), __float_as_int(x));
    if (a.scales) sat += __fmul_rn(x, 1.0f / kv_scale_of(a.scales, a.kv_heads, h, v)) > 448.0f;
  }
  if (threadIdx.x == 0) atomicAdd(a.counts, 2ull * row);
  if (sat) atomicAdd(a.counts + 1, sat);
}

Status kv_stats(const KvStatsArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.k_cache && a.v_cache && a.cache_slot && a.absmax && a.counts,
                 "kv_stats: null pointer");
  if (a.n_slots == 0) return Status::good();
  return dispatch_f32_bf16(a.t, "kv_stats", [&](auto t) {
    kv_stats_kernel<decltype(t)><<<a.n_slots, 256, 0, stream>>>(a);
  });
}

__global__ void fp8_quantize_kernel(const float* x, int n, float inv_s, uint8_t* q) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) q[i] = kv_from_f32<fp8_e4m3>(x[i], inv_s).bits;
}

Status fp8_quantize(const float* x, int n, float s, uint8_t* q, cudaStream_t stream) {
  LOOM_ARG_CHECK(x && q && n >= 0 && s > 0, "fp8_quantize: n ", n, ", s ", s);
  if (n == 0) return Status::good();
  fp8_quantize_kernel<<<ceil_div(n, 256), 256, 0, stream>>>(x, n, 1.0f / s, q);
  return launch_status("fp8_quantize");
}

}  // namespace loom::gpu
