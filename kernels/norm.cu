#include "kernels/common.cuh"
#include "kernels/norm.cuh"

namespace loom::gpu {

template <class T>
__global__ void rms_norm_residual_kernel(float* x, const T* delta, const float* weight,
                                         const int32_t* rows, int dim, float eps, T* out) {
  __shared__ float scratch[32];
  const int r = blockIdx.x;
  const int src = rows != nullptr ? rows[r] : r;
  float* xr = x + size_t(src) * dim;
  const T* dr = delta != nullptr ? delta + size_t(src) * dim : nullptr;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i];
    if (dr != nullptr) {
      v += to_f32(dr[i]);
      xr[i] = v;
    }
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss, scratch) / float(dim) + eps);
  T* o = out + size_t(r) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = from_f32<T>(xr[i] * inv * weight[i]);
}

Status rms_norm_residual(const NormArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.n_rows >= 0 && a.dim > 0, "rms_norm_residual: n_rows ", a.n_rows, ", dim ",
                 a.dim);
  LOOM_ARG_CHECK(a.x && a.weight && a.out, "rms_norm_residual: null x/weight/out");
  LOOM_ARG_CHECK(a.bias == nullptr, "rms_norm_residual: RMSNorm takes no bias");
  if (a.n_rows == 0) return Status::good();
  const int threads = a.dim >= 1024 ? 512 : 128;
  return dispatch_f32_bf16(a.t, "rms_norm_residual", [&](auto tag) {
    using T = decltype(tag);
    rms_norm_residual_kernel<T>
        <<<a.n_rows, threads, 0, stream>>>(a.x, static_cast<const T*>(a.delta), a.weight, a.rows,
                                           a.dim, a.eps, static_cast<T*>(a.out));
  });
}

}  // namespace loom::gpu
