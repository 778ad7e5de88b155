#include "kernels/common.cuh"
#include "kernels/layer_norm.cuh"

namespace loom::gpu {

template <class T>
__global__ void layer_norm_residual_kernel(float* x, const T* delta, const float* weight,
                                           const float* bias, const int32_t* rows, int dim,
                                           float eps, T* out) {
  __shared__ float scratch[32];
  const int r = blockIdx.x;
  const int src = rows != nullptr ? rows[r] : r;
  float* xr = x + size_t(src) * dim;
  const T* dr = delta != nullptr ? delta + size_t(src) * dim : nullptr;
  // Each thread reads back only the elements it wrote, so no barrier between the passes.
  float sum = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i];
    if (dr != nullptr) {
      v = __fadd_rn(v, to_f32(dr[i]));
      xr[i] = v;
    }
    sum += v;
  }
  const float mean = __fdiv_rn(block_sum(sum, scratch), float(dim));
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float c = __fsub_rn(xr[i], mean);
    ss = __fadd_rn(ss, __fmul_rn(c, c));
  }
  const float var = __fdiv_rn(block_sum(ss, scratch), float(dim));
  const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
  T* o = out + size_t(r) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = __fmul_rn(__fsub_rn(xr[i], mean), scale);
    if (weight != nullptr) v = __fmul_rn(v, weight[i]);
    if (bias != nullptr) v = __fadd_rn(v, bias[i]);
    o[i] = from_f32<T>(v);
  }
}

Status layer_norm_residual(const NormArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.n_rows >= 0 && a.dim > 0, "layer_norm_residual: n_rows ", a.n_rows, ", dim ",
                 a.dim);
  LOOM_ARG_CHECK(a.x && a.out, "layer_norm_residual: null x/out");
  if (a.n_rows == 0) return Status::good();
  const int threads = a.dim >= 1024 ? 512 : 128;
  return dispatch_f32_bf16(a.t, "layer_norm_residual", [&](auto tag) {
    using T = decltype(tag);
    layer_norm_residual_kernel<T>
        <<<a.n_rows, threads, 0, stream>>>(a.x, static_cast<const T*>(a.delta), a.weight, a.bias,
                                           a.rows, a.dim, a.eps, static_cast<T*>(a.out));
  });
}

}  // namespace loom::gpu
