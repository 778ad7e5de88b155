#include <algorithm>

#include "kernels/gemv.cuh"
#include "kernels/gemv_impl.cuh"

namespace loom::gpu {

constexpr int kGemvThreads = 512;

using gemv_impl::kUnroll;

template <int M, GemvIn IN, GemvOut OUT>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemvArgs a) {
  extern __shared__ uint4 gemv_smem[];
  __shared__ float scratch[32];
  const int warps = kGemvThreads / 32;
  const gemv_impl::WarpRows<M, OUT> rows(a.w, a.n, a.k, blockIdx.x * warps + (threadIdx.x >> 5),
                                         gridDim.x * warps);
  // Weights do not depend on earlier kernels: start streaming them before waiting for the
  // previous kernel (programmatic dependent launch) and before staging the input.
  uint4 wa[kUnroll];
  if (rows.iters > 0) rows.load(wa, 0);
  pdl_wait();
  pdl_trigger();
  gemv_impl::stage_input<M, IN>(reinterpret_cast<bf16*>(gemv_smem), a.x, a.x_stride, a.m, a.k,
                                a.rows, a.norm_w, a.eps, scratch);
  __syncthreads();
  rows.run(wa, gemv_smem, a.m, a.y, a.y_stride);
}

template <int M, GemvIn IN, GemvOut OUT>
static Status launch_gemv(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  const size_t smem = size_t(M) * a.k * sizeof(bf16);
  static size_t configured = 48 * 1024;  // dynamic shared memory limit set so far
  if (smem > configured) {
    const cudaError_t e = cudaFuncSetAttribute(
        gemv_kernel<M, IN, OUT>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess)
      return Status::bad(cat("gemv: ", M, " rows of k ", a.k, " need ", smem,
                             " bytes of shared memory: ", cudaGetErrorString(e)));
    configured = smem;
  }
  // One wave, grid-stride over rows: as many blocks as fit on the GPU at once (a second,
  // partial wave would leave most SMs idle while it drains). Measured: one 256-thread block
  // per SM (to leave room for the next GEMV under programmatic dependent launch) streams
  // 25-30 % slower than this; the memory system wants more warps in flight.
  static int per_sm = 0;
  if (per_sm == 0) {
    const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, gemv_kernel<M, IN, OUT>, kGemvThreads, smem);
    if (e != cudaSuccess || per_sm < 1) per_sm = 1;
  }
  const int warps = kGemvThreads / 32;
  const int blocks = std::min((a.n + warps - 1) / warps, num_sms * per_sm);
  const cudaError_t e = launch_kernel(gemv_kernel<M, IN, OUT>, dim3(blocks), dim3(kGemvThreads),
                                      smem, stream, a.pdl, a);
  if (e != cudaSuccess) return Status::bad(cat("gemv: launch failed: ", cudaGetErrorString(e)));
  return launch_status("gemv");
}

template <GemvIn IN, GemvOut OUT>
static Status dispatch_rows(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  if (a.m <= 1) return launch_gemv<1, IN, OUT>(a, num_sms, stream);
  if (a.m <= 2) return launch_gemv<2, IN, OUT>(a, num_sms, stream);
  if (a.m <= 4) return launch_gemv<4, IN, OUT>(a, num_sms, stream);
  return launch_gemv<8, IN, OUT>(a, num_sms, stream);
}

// Fills the defaults of a (strides) and checks it; bad: what is wrong.
static Status check_gemv(GemvArgs& a) {
  if (a.x_stride == 0) a.x_stride = a.k;
  if (a.y_stride == 0) a.y_stride = a.n;
  LOOM_ARG_CHECK(a.m >= 1 && a.m <= kGemvMaxRows, "gemv: m ", a.m, " (expected 1..", kGemvMaxRows,
                 ")");
  LOOM_ARG_CHECK(a.n > 0 && a.k > 0 && a.k % 8 == 0, "gemv: n ", a.n, ", k ", a.k,
                 " (expected k a multiple of 8)");
  LOOM_ARG_CHECK(a.w && a.x && a.y, "gemv: null w/x/y");
  LOOM_ARG_CHECK(reinterpret_cast<uintptr_t>(a.w) % 16 == 0, "gemv: weights not 16-byte aligned");
  LOOM_ARG_CHECK(a.in != GemvIn::RmsNorm || a.norm_w != nullptr, "gemv: RmsNorm without weight");
  const bool pair_ok = (a.in == GemvIn::Plain) ||
                       (a.in == GemvIn::RmsNorm && a.out != GemvOut::AddF32) ||
                       (a.in == GemvIn::SiluMul && a.out == GemvOut::AddF32);
  LOOM_ARG_CHECK(pair_ok, "gemv: unsupported input/output combination");
  return Status::good();
}

Status gemv_bf16(const GemvArgs& a0, int num_sms, cudaStream_t stream) {
  GemvArgs a = a0;
  const Status st = check_gemv(a);
  if (!st.ok) return st;
  LOOM_ARG_CHECK(num_sms > 0, "gemv: num_sms ", num_sms);
  if (a.in == GemvIn::Plain && a.out == GemvOut::Store)
    return dispatch_rows<GemvIn::Plain, GemvOut::Store>(a, num_sms, stream);
  if (a.in == GemvIn::Plain && a.out == GemvOut::StoreF32)
    return dispatch_rows<GemvIn::Plain, GemvOut::StoreF32>(a, num_sms, stream);
  if (a.in == GemvIn::Plain && a.out == GemvOut::AddF32)
    return dispatch_rows<GemvIn::Plain, GemvOut::AddF32>(a, num_sms, stream);
  if (a.in == GemvIn::RmsNorm && a.out == GemvOut::Store)
    return dispatch_rows<GemvIn::RmsNorm, GemvOut::Store>(a, num_sms, stream);
  if (a.in == GemvIn::RmsNorm && a.out == GemvOut::StoreF32)
    return dispatch_rows<GemvIn::RmsNorm, GemvOut::StoreF32>(a, num_sms, stream);
  if (a.in == GemvIn::SiluMul && a.out == GemvOut::AddF32)
    return dispatch_rows<GemvIn::SiluMul, GemvOut::AddF32>(a, num_sms, stream);
  return Status::bad("gemv: unsupported input/output combination");
}

// ---- GEMV chain: several GEMVs in one persistent launch ----------------------------------

// All blocks reach the barrier before any goes on. Self-resetting: the last block to arrive
// zeroes the count, then bumps the generation the others wait on. Thread 0 releases the
// block's writes before it counts and acquires after (the L1 is invalidated: the block's later
// loads see the other blocks' writes).
__device__ __forceinline__ void grid_barrier(GemvBarrier* b) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned gen;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(gen) : "l"(&b->gen) : "memory");
    __threadfence();
    if (atomicAdd(&b->count, 1u) == gridDim.x - 1) {
      atomicExch(&b->count, 0u);
      __threadfence();
      atomicAdd(&b->gen, 1u);
    } else {
      unsigned now;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(now) : "l"(&b->gen) : "memory");
      } while (now == gen);
    }
    __threadfence();
  }
  __syncthreads();
}

// One GEMV of the chain with its rows' first batch already in wa: stage, then stream.
template <int M, GemvIn IN, GemvOut OUT>
__device__ __forceinline__ void chain_step(const GemvArgs& g, uint4 (&wa)[kUnroll], uint4* smem,
                                           float* scratch, int warp0, int wstride) {
  gemv_impl::stage_input<M, IN>(reinterpret_cast<bf16*>(smem), g.x, g.x_stride, g.m, g.k, g.rows,
                                g.norm_w, g.eps, scratch);
  __syncthreads();
  const gemv_impl::WarpRows<M, OUT> rows(g.w, g.n, g.k, warp0, wstride);
  rows.run(wa, smem, g.m, g.y, g.y_stride);
}

template <int M>
__global__ void __launch_bounds__(kGemvThreads) gemv_chain_kernel(GemvChainArgs c) {
  extern __shared__ uint4 gemv_smem[];
  __shared__ float scratch[32];
  const int warps = kGemvThreads / 32;
  const int warp0 = blockIdx.x * warps + (threadIdx.x >> 5), wstride = gridDim.x * warps;
  auto first_loads = [&](const GemvArgs& g, uint4(&wa)[kUnroll]) {
    const gemv_impl::WarpRows<M, GemvOut::Store> rows(g.w, g.n, g.k, warp0, wstride);
    if (rows.iters > 0) rows.load(wa, 0);
  };
  uint4 wa[kUnroll];
  first_loads(c.g[0], wa);
  pdl_wait();
  for (int i = 0; i < c.n; i++) {
    if (i > 0) grid_barrier(c.barrier);
    // Past the last barrier every block is resident: the next kernel may now take free SMs
    // (earlier, its blocks could hold SMs that blocks of this grid still need to reach the
    // barrier: a deadlock).
    if (i == c.n - 1) pdl_trigger();
    const GemvArgs& g = c.g[i];
    if (g.in == GemvIn::Plain && g.out == GemvOut::AddF32)
      chain_step<M, GemvIn::Plain, GemvOut::AddF32>(g, wa, gemv_smem, scratch, warp0, wstride);
    else if (g.in == GemvIn::Plain && g.out == GemvOut::Store)
      chain_step<M, GemvIn::Plain, GemvOut::Store>(g, wa, gemv_smem, scratch, warp0, wstride);
    else if (g.in == GemvIn::Plain)
      chain_step<M, GemvIn::Plain, GemvOut::StoreF32>(g, wa, gemv_smem, scratch, warp0, wstride);
    else if (g.in == GemvIn::RmsNorm && g.out == GemvOut::Store)
      chain_step<M, GemvIn::RmsNorm, GemvOut::Store>(g, wa, gemv_smem, scratch, warp0, wstride);
    else if (g.in == GemvIn::RmsNorm)
      chain_step<M, GemvIn::RmsNorm, GemvOut::StoreF32>(g, wa, gemv_smem, scratch, warp0, wstride);
    else
      chain_step<M, GemvIn::SiluMul, GemvOut::AddF32>(g, wa, gemv_smem, scratch, warp0, wstride);
    // This warp's rows are done: start the next GEMV's before waiting for the other blocks.
    if (i + 1 < c.n) first_loads(c.g[i + 1], wa);
  }
}

template <int M>
static Status launch_chain(const GemvChainArgs& c, int num_sms, cudaStream_t stream) {
  size_t smem = 0;
  for (int i = 0; i < c.n; i++) smem = std::max(smem, size_t(M) * c.g[i].k * sizeof(bf16));
  static size_t configured = 48 * 1024;
  if (smem > configured) {
    const cudaError_t e = cudaFuncSetAttribute(
        gemv_chain_kernel<M>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess)
      return Status::bad(
          cat("gemv_chain: ", smem, " bytes of shared memory: ", cudaGetErrorString(e)));
    configured = smem;
  }
  // Every block must be resident at once (the barriers): one block per SM, checked.
  int per_sm = 0;
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_chain_kernel<M>,
                                                                kGemvThreads, smem);
  if (e != cudaSuccess || per_sm < 1)
    return Status::bad(
        cat("gemv_chain: a block does not fit on an SM (", cudaGetErrorString(e), ")"));
  e = launch_kernel(gemv_chain_kernel<M>, dim3(num_sms), dim3(kGemvThreads), smem, stream, c.pdl,
                    c);
  if (e != cudaSuccess)
    return Status::bad(cat("gemv_chain: launch failed: ", cudaGetErrorString(e)));
  return launch_status("gemv_chain");
}

Status gemv_chain(const GemvChainArgs& c0, int num_sms, cudaStream_t stream) {
  GemvChainArgs c = c0;
  LOOM_ARG_CHECK(c.n >= 1 && c.n <= kGemvChainMax, "gemv_chain: ", c.n, " GEMVs (expected 1..",
                 kGemvChainMax, ")");
  LOOM_ARG_CHECK(c.barrier != nullptr, "gemv_chain: null barrier");
  LOOM_ARG_CHECK(num_sms > 0, "gemv_chain: num_sms ", num_sms);
  for (int i = 0; i < c.n; i++) {
    const Status st = check_gemv(c.g[i]);
    if (!st.ok) return Status::bad(cat("gemv_chain[", i, "]: ", st.message));
    LOOM_ARG_CHECK(c.g[i].m == c.g[0].m, "gemv_chain: GEMV ", i, " has ", c.g[i].m,
                   " rows, GEMV 0 ", c.g[0].m);
  }
  const int m = c.g[0].m;
  if (m <= 1) return launch_chain<1>(c, num_sms, stream);
  if (m <= 2) return launch_chain<2>(c, num_sms, stream);
  if (m <= 4) return launch_chain<4>(c, num_sms, stream);
  return launch_chain<8>(c, num_sms, stream);
}

}  // namespace loom::gpu
