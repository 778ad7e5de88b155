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

Status rms_norm_residual(DType t, float* x, const void* delta, const float* weight,
                         const int32_t* rows, int n_rows, int dim, float eps, void* out,
                         cudaStream_t stream) {
  LOOM_ARG_CHECK(n_rows >= 0 && dim > 0, "rms_norm_residual: n_rows ", n_rows, ", dim ", dim);
  LOOM_ARG_CHECK(x && weight && out, "rms_norm_residual: null x/weight/out");
  if (n_rows == 0) return Status::good();
  const int threads = dim >= 1024 ? 512 : 128;
  if (t == DType::F32)
    rms_norm_residual_kernel<float><<<n_rows, threads, 0, stream>>>(
        x, static_cast<const float*>(delta), weight, rows, dim, eps, static_cast<float*>(out));
  else if (t == DType::BF16)
    rms_norm_residual_kernel<bf16><<<n_rows, threads, 0, stream>>>(
        x, static_cast<const bf16*>(delta), weight, rows, dim, eps, static_cast<bf16*>(out));
  else
    return Status::bad(cat("rms_norm_residual: dtype ", dtype_name(t), " (expected f32 or bf16)"));
  return launch_status("rms_norm_residual");
}

}  // namespace loom::gpu
