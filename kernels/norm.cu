// rms_norm_residual (norm.cuh). Two kernels of one formula, picked by dim and alignment alone
// (never by the row count, so a row gives the same bits in any batch):
//   vector: dim a multiple of kVec<T> (4 fp32, 8 bf16) and every pointer 16-byte aligned. A row
//     is a group of G threads (one warp with several rows a block for small dims, else a block
//     of its own); thread t holds chunks t, t + G, …, t + (K−1)·G of kVec<T> elements in
//     registers from the residual add through the scaling, so x is read from memory once.
//   scalar: any dim; one block a row, x re-read for the scaling.
// Summation order of the sum of squares (both kernels): each thread adds its elements' squares
// in index order (vector: chunk by chunk, element by element), then the threads' partial sums
// are added by warp_sum's xor butterfly and, with more than one warp a row, the warps' sums by
// block_sum. G and K follow from dim and the dtype, so the order does too.
#include "kernels/common.cuh"
#include "kernels/norm.cuh"
#include "kernels/vec.cuh"

namespace loom::gpu {

// Row r = blockIdx.x · blockDim.y + threadIdx.y; blockDim.x = G threads a row, either 32
// (warp_sum alone, any blockDim.y) or a multiple of 32 with blockDim.y = 1 (block_sum).
template <class T, int K>
__global__ void rms_norm_residual_vec_kernel(float* x, const T* delta, const float* weight,
                                             const int32_t* rows, int n_rows, int dim, float eps,
                                             T* out) {
  constexpr int V = kVec<T>;
  __shared__ float scratch[32];
  pdl_trigger();
  // The weight and the row index are not written by the kernels before: read before the wait,
  // so that neither is a round trip after it (as gemv.cu's norm_w at batch 1). H100, loom bench
  // batch 8 (this kernel beside the GEMVs at 3-8 slots), two rounds: 1.0682 / 1.0680 -> 1.0575 /
  // 1.0568 s/frame (bench/results/2026-12-07-h100-s75-gemv-rows-per-warp-norm-weight-b8.json).
  const int r = blockIdx.x * blockDim.y + threadIdx.y;
  const bool live = r < n_rows;
  const int chunks = dim / V;
  float w[K][V];
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = threadIdx.x + k * blockDim.x;
    if (live && c < chunks) load_vec(weight + size_t(c) * V, w[k]);
  }
  const int src = !live ? 0 : rows != nullptr ? rows[r] : r;
  pdl_wait();  // x and delta come from the kernels before (no-op without the launch attribute)
  if (!live) return;  // the last block of several rows only: no __syncthreads there
  float* xr = x + size_t(src) * dim;
  const T* dr = delta != nullptr ? delta + size_t(src) * dim : nullptr;
  float v[K][V];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c >= chunks) break;
    load_vec(xr + size_t(c) * V, v[k]);
    if (dr != nullptr) {
      float d[V];
      load_vec(dr + size_t(c) * V, d);
#pragma unroll
      for (int e = 0; e < V; e++) v[k][e] += d[e];
      store_vec(xr + size_t(c) * V, v[k]);
    }
#pragma unroll
    for (int e = 0; e < V; e++) ss += v[k][e] * v[k][e];
  }
  ss = blockDim.x == 32 ? warp_sum(ss) : block_sum(ss, scratch);
  const float inv = rsqrtf(ss / float(dim) + eps);
  T* o = out + size_t(r) * dim;
#pragma unroll
  for (int k = 0; k < K; k++) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c >= chunks) break;
#pragma unroll
    for (int e = 0; e < V; e++) w[k][e] = v[k][e] * inv * w[k][e];
    store_vec(o + size_t(c) * V, w[k]);
  }
}

template <class T>
__global__ void rms_norm_residual_kernel(float* x, const T* delta, const float* weight,
                                         const int32_t* rows, int dim, float eps, T* out) {
  __shared__ float scratch[32];
  pdl_trigger();
  pdl_wait();
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

// The vector kernel's largest K and G: dims up to 4 · 1024 chunks (16384 fp32, 32768 bf16).
constexpr int kMaxChunksPerThread = 4, kMaxRowThreads = 1024;
// Rows a block when a warp holds a row.
constexpr int kWarpRowsPerBlock = 8;

template <class T>
void launch_rms_norm_residual(const NormArgs& a, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  const auto* delta = static_cast<const T*>(a.delta);
  auto* out = static_cast<T*>(a.out);
  const int chunks = a.dim / V;
  const bool vec = a.dim % V == 0 && chunks <= kMaxChunksPerThread * kMaxRowThreads &&
                   aligned16(a.x) && aligned16(a.delta) && aligned16(a.weight) && aligned16(a.out);
  if (!vec) {
    const int threads = a.dim >= 1024 ? 512 : 128;
    launch_kernel(rms_norm_residual_kernel<T>, dim3(a.n_rows), dim3(threads), 0, stream, a.pdl, a.x,
                  delta, a.weight, a.rows, a.dim, a.eps, out);
    return;
  }
  if (chunks <= 32) {  // a warp a row
    launch_kernel(rms_norm_residual_vec_kernel<T, 1>, dim3(ceil_div(a.n_rows, kWarpRowsPerBlock)),
                  dim3(32, kWarpRowsPerBlock), 0, stream, a.pdl, a.x, delta, a.weight, a.rows,
                  a.n_rows, a.dim, a.eps, out);
    return;
  }
  // A block a row, at most 256 threads while K ≤ 4 allows (Terra's 2048: 256 threads, K = 1
  // for bf16, 2 for fp32): fewer threads a row make block_sum cheaper, more keep fewer values
  // in registers.
  const int k = chunks <= 256 ? 1 : chunks <= 512 ? 2 : 4;
  const int threads = ceil_div(ceil_div(chunks, k), 32) * 32;
  auto* kernel = k == 1   ? rms_norm_residual_vec_kernel<T, 1>
                 : k == 2 ? rms_norm_residual_vec_kernel<T, 2>
                          : rms_norm_residual_vec_kernel<T, 4>;
  launch_kernel(kernel, dim3(a.n_rows), dim3(threads), 0, stream, a.pdl, a.x, delta, a.weight,
                a.rows, a.n_rows, a.dim, a.eps, out);
}

Status rms_norm_residual(const NormArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.n_rows >= 0 && a.dim > 0, "rms_norm_residual: n_rows ", a.n_rows, ", dim ",
                 a.dim);
  LOOM_ARG_CHECK(a.x && a.weight && a.out, "rms_norm_residual: null x/weight/out");
  LOOM_ARG_CHECK(a.bias == nullptr, "rms_norm_residual: RMSNorm takes no bias");
  if (a.n_rows == 0) return Status::good();
  return dispatch_f32_bf16(a.t, "rms_norm_residual",
                           [&](auto tag) { launch_rms_norm_residual<decltype(tag)>(a, stream); });
}

}  // namespace loom::gpu
