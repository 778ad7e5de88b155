#include "kernels/common.cuh"
#include "kernels/mlp_activation.cuh"

namespace loom::gpu {

// cpu::activate, term for term (no contraction into FMAs: __fmul_rn / __fadd_rn).
__device__ __forceinline__ float activate(Activation act, float x) {
  switch (act) {
    case Activation::Silu:
      return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x)));
    case Activation::GeluTanh: {  // transformers NewGELUActivation
      const float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, x), x), x);
      const float inner = __fmul_rn(0.7978845608028654f, __fadd_rn(x, cube));
      return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanhf(inner)));
    }
    case Activation::Gelu:  // torch gelu, approximate='none'
      return __fmul_rn(__fmul_rn(0.5f, x),
                       __fadd_rn(1.0f, erff(__fmul_rn(x, 0.7071067811865476f))));
    case Activation::Relu:
      return fmaxf(x, 0.0f);
  }
  return x;
}

template <class T>
__global__ void bias_activation_kernel(T* y, const float* bias, size_t total, int n, bool apply,
                                       Activation act) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    float v = to_f32(y[i]);
    if (bias != nullptr) v = __fadd_rn(v, bias[i % size_t(n)]);
    if (apply) v = activate(act, v);
    y[i] = from_f32<T>(v);
  }
}

template <class T>
__global__ void act_mul_kernel(const T* gate_up, T* out, int rows, int inter, Activation act) {
  const size_t total = size_t(rows) * inter;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / inter, j = i % inter;
    const float g = to_f32(gate_up[r * 2 * inter + j]);
    const float u = to_f32(gate_up[r * 2 * inter + inter + j]);
    out[i] = from_f32<T>(__fmul_rn(activate(act, g), u));
  }
}

static int grid_of(size_t total) {
  return int(std::min<size_t>((total + 255) / 256, 4096));
}

Status bias_activation(const BiasActivationArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.rows >= 0 && a.n > 0 && a.y, "bias_activation: rows ", a.rows, ", n ", a.n);
  const size_t total = size_t(a.rows) * a.n;
  if (total == 0) return Status::good();
  return dispatch_f32_bf16(a.t, "bias_activation", [&](auto tag) {
    using T = decltype(tag);
    bias_activation_kernel<T><<<grid_of(total), 256, 0, stream>>>(static_cast<T*>(a.y), a.bias,
                                                                  total, a.n, a.apply_act, a.act);
  });
}

Status act_mul(const ActMulArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.rows >= 0 && a.inter > 0 && a.gate_up && a.out, "act_mul: rows ", a.rows,
                 ", inter ", a.inter);
  const size_t total = size_t(a.rows) * a.inter;
  if (total == 0) return Status::good();
  return dispatch_f32_bf16(a.t, "act_mul", [&](auto tag) {
    using T = decltype(tag);
    act_mul_kernel<T><<<grid_of(total), 256, 0, stream>>>(
        static_cast<const T*>(a.gate_up), static_cast<T*>(a.out), a.rows, a.inter, a.act);
  });
}

}  // namespace loom::gpu
