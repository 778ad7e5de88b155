#include <algorithm>

#include "kernels/common.cuh"
#include "kernels/mlp_activation.cuh"
#include "kernels/vec.cuh"

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

// Both ops take a 2-D grid: blockIdx.y walks the rows (grid-stride past 65535 rows), x the
// columns, so no element index is divided. The vector kernels (width and every pointer a
// multiple of 16 bytes: kVec<T> elements a thread) and the scalar ones (any width) compute
// each element with the same terms, so the path taken changes no bit.

template <class T>
__global__ void bias_activation_vec_kernel(T* y, const float* bias, int rows, int n, bool apply,
                                           Activation act) {
  constexpr int V = kVec<T>;
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * V;  // first column of the chunk
  if (c >= n) return;
  float b[V] = {};
  if (bias != nullptr) load_vec(bias + c, b);
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    T* p = y + size_t(r) * n + c;
    float v[V];
    load_vec(p, v);
#pragma unroll
    for (int e = 0; e < V; e++) {
      if (bias != nullptr) v[e] = __fadd_rn(v[e], b[e]);
      if (apply) v[e] = activate(act, v[e]);
    }
    store_vec(p, v);
  }
}

template <class T>
__global__ void bias_activation_kernel(T* y, const float* bias, int rows, int n, bool apply,
                                       Activation act) {
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    T* yr = y + size_t(r) * n;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += gridDim.x * blockDim.x) {
      float v = to_f32(yr[j]);
      if (bias != nullptr) v = __fadd_rn(v, bias[j]);
      if (apply) v = activate(act, v);
      yr[j] = from_f32<T>(v);
    }
  }
}

template <class T>
__global__ void act_mul_vec_kernel(const T* gate_up, T* out, int rows, int inter, Activation act) {
  pdl_trigger();
  pdl_wait();  // gate_up comes from the GEMM before (no-op without the launch attribute)
  constexpr int V = kVec<T>;
  const int c = (blockIdx.x * blockDim.x + threadIdx.x) * V;  // first column of the chunk
  if (c >= inter) return;
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const T* g = gate_up + size_t(r) * 2 * inter + c;
    float gv[V], uv[V];
    load_vec(g, gv);
    load_vec(g + inter, uv);
#pragma unroll
    for (int e = 0; e < V; e++) gv[e] = __fmul_rn(activate(act, gv[e]), uv[e]);
    store_vec(out + size_t(r) * inter + c, gv);
  }
}

template <class T>
__global__ void act_mul_kernel(const T* gate_up, T* out, int rows, int inter, Activation act) {
  pdl_trigger();
  pdl_wait();
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const T* g = gate_up + size_t(r) * 2 * inter;
    const T* u = g + inter;
    T* o = out + size_t(r) * inter;
    for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < inter; j += gridDim.x * blockDim.x)
      o[j] = from_f32<T>(__fmul_rn(activate(act, to_f32(g[j])), to_f32(u[j])));
  }
}

// 128 threads a block (the vector kernels: 128 chunks, 2 KiB of each input row); the rows
// beyond the grid's y limit are walked by the kernels.
constexpr int kThreads = 128;
constexpr int kMaxGridY = 65535;

// The grid over [rows, columns] for kernels whose threads cover `per_thread` columns each.
static dim3 grid_of(int rows, int cols, int per_thread) {
  return dim3(unsigned(ceil_div(ceil_div(cols, per_thread), kThreads)),
              unsigned(std::min(rows, kMaxGridY)));
}

Status bias_activation(const BiasActivationArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.rows >= 0 && a.n > 0 && a.y, "bias_activation: rows ", a.rows, ", n ", a.n);
  if (a.rows == 0) return Status::good();
  return dispatch_f32_bf16(a.t, "bias_activation", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec<T>;
    auto* y = static_cast<T*>(a.y);
    if (a.n % V == 0 && aligned16(a.y) && aligned16(a.bias))
      bias_activation_vec_kernel<T><<<grid_of(a.rows, a.n, V), kThreads, 0, stream>>>(
          y, a.bias, a.rows, a.n, a.apply_act, a.act);
    else
      bias_activation_kernel<T><<<grid_of(a.rows, a.n, 1), kThreads, 0, stream>>>(
          y, a.bias, a.rows, a.n, a.apply_act, a.act);
  });
}

Status act_mul(const ActMulArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.rows >= 0 && a.inter > 0 && a.gate_up && a.out, "act_mul: rows ", a.rows,
                 ", inter ", a.inter);
  if (a.rows == 0) return Status::good();
  return dispatch_f32_bf16(a.t, "act_mul", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec<T>;
    const auto* gate_up = static_cast<const T*>(a.gate_up);
    auto* out = static_cast<T*>(a.out);
    if (a.inter % V == 0 && aligned16(a.gate_up) && aligned16(a.out))
      launch_kernel(act_mul_vec_kernel<T>, grid_of(a.rows, a.inter, V), dim3(kThreads), 0, stream,
                    a.pdl, gate_up, out, a.rows, a.inter, a.act);
    else
      launch_kernel(act_mul_kernel<T>, grid_of(a.rows, a.inter, 1), dim3(kThreads), 0, stream,
                    a.pdl, gate_up, out, a.rows, a.inter, a.act);
  });
}

}  // namespace loom::gpu
