#include "kernels/common.cuh"
#include "kernels/kv_quant.cuh"
#include "kernels/rope.cuh"

namespace loom::gpu {

// One block per slot; one thread per rotated pair (heads + kv_heads) * head_dim/2, plus the
// v copy (kv_heads * head_dim). The angles' cos and sin (one per frequency, shared by every
// head) depend only on the position, a step input, and the frequencies: computed before
// griddepcontrol.wait, while the qkv GEMM ends.
template <class T, class KV>
__global__ void rope_kv_write_kernel(RopeKvArgs a) {
  extern __shared__ float rope_cs_smem[];  // [head_dim / 2] cos, then [head_dim / 2] sin
  pdl_trigger();
  const int slot = blockIdx.x;
  const int half = a.head_dim / 2;
  const float pos = float(a.positions[slot]);
  const int cs = a.cache_slot[slot];
  float* cos_j = rope_cs_smem;
  float* sin_j = rope_cs_smem + half;
  for (int j = threadIdx.x; j < half; j += blockDim.x)
    rope_angle(pos, a.inv_freq[j], cos_j[j], sin_j[j]);
  pdl_wait();
  __syncthreads();
  const int row = (a.heads + 2 * a.kv_heads) * a.head_dim;
  T* q = static_cast<T*>(a.qkv) + size_t(slot) * row;
  const int kv_row = a.kv_heads * a.head_dim;
  KV* kc = static_cast<KV*>(a.k_cache) + size_t(cs) * kv_row;
  KV* vc = static_cast<KV*>(a.v_cache) + size_t(cs) * kv_row;
  const int pairs = (a.heads + a.kv_heads) * half;
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    const int h = i / half, j = i % half;  // h < heads: q head, else k head h - heads
    T* base = q + h * a.head_dim;          // k heads follow q heads in the row
    const float x0 = to_f32(base[j]), x1 = to_f32(base[j + half]);
    float y0, y1;
    rope_rotate(x0, x1, cos_j[j], sin_j[j], y0, y1);
    if (h < a.heads) {
      base[j] = from_f32<T>(y0);
      base[j + half] = from_f32<T>(y1);
    } else if (cs >= 0) {
      const int hk = h - a.heads;
      const float inv = 1.0f / kv_scale_of(a.kv_scale, a.kv_heads, hk, false);
      KV* k = kc + hk * a.head_dim;
      k[j] = kv_from_f32<KV>(round_to<T>(y0), inv);
      k[j + half] = kv_from_f32<KV>(round_to<T>(y1), inv);
    }
  }
  if (cs >= 0) {
    const T* v = q + (a.heads + a.kv_heads) * a.head_dim;
    for (int i = threadIdx.x; i < kv_row; i += blockDim.x) {
      const float inv = 1.0f / kv_scale_of(a.kv_scale, a.kv_heads, i / a.head_dim, true);
      vc[i] = kv_from_f32<KV>(to_f32(v[i]), inv);
    }
  }
}

Status rope_kv_write(const RopeKvArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(
      a.n_slots >= 0 && a.heads > 0 && a.kv_heads > 0 && a.head_dim > 0 && a.head_dim % 2 == 0,
      "rope_kv_write: n_slots ", a.n_slots, ", heads ", a.heads, ", kv_heads ", a.kv_heads,
      ", head_dim ", a.head_dim, " (expected even head_dim)");
  LOOM_ARG_CHECK(a.qkv && a.positions && a.cache_slot && a.inv_freq && a.k_cache && a.v_cache,
                 "rope_kv_write: null pointer");
  if (a.n_slots == 0) return Status::good();
  return dispatch_kv(a.t, a.kv_fp8, "rope_kv_write", [&](auto t, auto kv) {
    launch_kernel(rope_kv_write_kernel<decltype(t), decltype(kv)>, a.n_slots, 256,
                  a.head_dim * sizeof(float), stream, a.pdl, a);
  });
}

}  // namespace loom::gpu
