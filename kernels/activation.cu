#include "core/philox.h"
#include "kernels/activation.cuh"
#include "kernels/common.cuh"

namespace loom::gpu {

template <class T>
__global__ void silu_mul_kernel(const T* gate_up, T* out, int rows, int inter) {
  const size_t total = size_t(rows) * inter;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / inter, j = i % inter;
    const float g = to_f32(gate_up[r * 2 * inter + j]);
    const float u = to_f32(gate_up[r * 2 * inter + inter + j]);
    // HF: act_fn(gate) * up, silu(g) = g * sigmoid(g); in fp32, rounded once to T.
    out[i] = from_f32<T>(g / (1.0f + expf(-g)) * u);
  }
}

Status silu_mul(DType t, const void* gate_up, void* out, int rows, int inter, cudaStream_t stream) {
  LOOM_ARG_CHECK(rows >= 0 && inter > 0 && gate_up && out, "silu_mul: rows ", rows, ", inter ",
                 inter);
  const size_t total = size_t(rows) * inter;
  if (total == 0) return Status::good();
  const int blocks = int(std::min<size_t>((total + 255) / 256, 8192));
  if (t == DType::F32)
    silu_mul_kernel<float><<<blocks, 256, 0, stream>>>(static_cast<const float*>(gate_up),
                                                       static_cast<float*>(out), rows, inter);
  else if (t == DType::BF16)
    silu_mul_kernel<bf16><<<blocks, 256, 0, stream>>>(static_cast<const bf16*>(gate_up),
                                                      static_cast<bf16*>(out), rows, inter);
  else
    return Status::bad(cat("silu_mul: dtype ", dtype_name(t)));
  return launch_status("silu_mul");
}

template <class S, class D>
__global__ void convert_kernel(const S* src, D* dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    dst[i] = from_f32<D>(to_f32(src[i]));
}

template <class D>
static Status convert_to(DType src_t, const void* src, D* dst, size_t n, cudaStream_t stream) {
  const int blocks = int(std::min<size_t>((n + 255) / 256, 8192));
  switch (src_t) {
    case DType::F32:
      convert_kernel<<<blocks, 256, 0, stream>>>(static_cast<const float*>(src), dst, n);
      break;
    case DType::BF16:
      convert_kernel<<<blocks, 256, 0, stream>>>(static_cast<const bf16*>(src), dst, n);
      break;
    case DType::F16:
      convert_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __half*>(src), dst, n);
      break;
    default:
      return Status::bad(cat("convert: source dtype ", dtype_name(src_t)));
  }
  return launch_status("convert");
}

Status convert(DType src_t, const void* src, DType dst_t, void* dst, size_t n,
               cudaStream_t stream) {
  LOOM_ARG_CHECK(src && dst, "convert: null pointer");
  if (n == 0) return Status::good();
  if (dst_t == DType::F32) return convert_to(src_t, src, static_cast<float*>(dst), n, stream);
  if (dst_t == DType::BF16) return convert_to(src_t, src, static_cast<bf16*>(dst), n, stream);
  return Status::bad(cat("convert: destination dtype ", dtype_name(dst_t)));
}

template <class T>
__global__ void fill_uniform_kernel(T* dst, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const Philox4 r = philox4x32_10(uint32_t(i), uint32_t(i >> 32), 0x5eed, 0, uint32_t(seed),
                                    uint32_t(seed >> 32));
    const float u = (float(r.v[0] >> 8) + 0.5f) * (1.0f / 16777216.0f);
    dst[i] = from_f32<T>((2.0f * u - 1.0f) * scale);
  }
}

Status fill_uniform(DType t, void* dst, size_t n, uint64_t seed, float scale, cudaStream_t stream) {
  LOOM_ARG_CHECK(dst, "fill_uniform: null pointer");
  if (n == 0) return Status::good();
  const int blocks = int(std::min<size_t>((n + 255) / 256, 16384));
  if (t == DType::F32)
    fill_uniform_kernel<<<blocks, 256, 0, stream>>>(static_cast<float*>(dst), n, seed, scale);
  else if (t == DType::BF16)
    fill_uniform_kernel<<<blocks, 256, 0, stream>>>(static_cast<bf16*>(dst), n, seed, scale);
  else
    return Status::bad(cat("fill_uniform: dtype ", dtype_name(t)));
  return launch_status("fill_uniform");
}

}  // namespace loom::gpu
