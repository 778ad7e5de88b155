// The weight-streaming GEMV (see gemv.cuh). Why it is shaped this way:
//   - Batch-1 decode runs 89 GEMVs a step, 2-46 MB each; in steady state a GEMV streams at copy
//     bandwidth, so what is lost is each GEMV's ramp and drain. Hiding them needs the next GEMV
//     resident and streaming before this one ends, i.e. two GEMV blocks per SM.
//   - The bytes in flight therefore live in shared memory, not registers: each lane copies
//     16-byte chunks of its warp's rows with cp.async into its own slots of a ring and reads back
//     only what it copied, so cp.async.wait_group is the only synchronisation (no barrier, no
//     mbarrier to get wrong). A lane keeps kGemvGroups groups of `group` copies in flight.
//   - A block takes ~100 KB of shared memory (input rows + ring) and ≤ 128 registers x 256
//     threads: two blocks fit on an SM, three do not. The grid is one block per SM; under
//     programmatic dependent launch the next GEMV occupies the second slot.
//   - Order: trigger the dependents, issue the whole ring of weight copies (the weights do not
//     depend on earlier kernels), then griddepcontrol.wait, then stage the input rows (RMSNorm /
//     SiluMul prologue), then stream.
// cp.async rather than cp.async.bulk (TMA 1-D): a bulk copy would need an mbarrier per stage and
// parity tracking, whose bugs hang the GPU rather than fail a test; the per-lane ring keeps the
// old kernel's lane ↔ chunk mapping, so the fused input and output code is unchanged. The cost
// is one copy instruction per 16 bytes and lane, ~5 % of the issue slots at copy bandwidth.
#include <algorithm>

#include "kernels/common.cuh"
#include "kernels/gemv.cuh"

namespace loom::gpu {

constexpr int kGemvThreads = 256;
constexpr int kGemvWarps = kGemvThreads / 32;
// cp.async groups a lane keeps in flight: it waits for the oldest (wait_group kGemvGroups − 1),
// consumes it and refills its slots with the copies kGemvGroups groups further on.
constexpr int kGemvGroups = 4;
// Ring bytes per unit of group size: kGemvGroups slots of 16 bytes for each thread.
constexpr int kGemvGroupUnit = kGemvGroups * kGemvThreads * 16;  // 16 KB
// Default shared memory of a block: more than a third and less than half of an SM's 228 KB
// (with 1 KB reserved per block), so exactly two GEMV blocks fit on an SM. A third would let
// one grid place two of its own blocks on one SM and leave another without.
constexpr int kGemvSmemBytes = 100 * 1024;
// 16-byte input chunks a thread loads before it stores any while staging (Plain, SiluMul) and
// chunks of 8 fp32 it keeps in registers across the RMSNorm reduction: one memory latency per
// batch instead of one per chunk. k = 2048 takes one batch at m ≤ 4 (Plain) and m ≤ 2 (RmsNorm).
constexpr int kStageBatch = 4;
constexpr int kNormBatch = 2;

__device__ __forceinline__ void bf16x8_to_f32(const uint4& v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ uint4 f32x8_to_bf16(const float* f) {
  uint4 r;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&r);
#pragma unroll
  for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return r;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global → shared, not allocated in L1 (weights are read once a step), with a
// 256-byte L2 prefetch (a warp's 512-byte row segment arrives in two DRAM bursts, not four).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(dst), "l"(src)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most N of this thread's most recent groups are pending; the copies of the
// older groups are then complete and visible to this thread.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// v[i] for a run-time i < M without indexing a register array at run time (local memory).
template <int M, class T>
__device__ __forceinline__ T pick(const T (&v)[M], int i) {
  T r = v[0];
#pragma unroll
  for (int j = 1; j < M; j++)
    if (i == j) r = v[j];
  return r;
}

// Stages the M input rows, transformed, as bf16 [M][k] (xs[i * k8 + j] holds elements 8j..8j+7
// of row i; rows ≥ a.m are zero), then a block barrier. Runs after the PDL wait: it reads what
// the previous kernel wrote. Chunk e of the flattened [M][k8] array goes to thread e % threads.
template <int M, GemvIn IN>
__device__ __forceinline__ void stage_input(const GemvArgs& a, uint4* xs, float* red, int k8) {
  const int tid = threadIdx.x;
  const int total = M * k8;
  if constexpr (IN == GemvIn::Plain || IN == GemvIn::SiluMul) {
    const bf16* x = static_cast<const bf16*>(a.x);
    for (int e0 = tid; e0 < total; e0 += kStageBatch * kGemvThreads) {
      uint4 g[kStageBatch], u[kStageBatch];
#pragma unroll
      for (int b = 0; b < kStageBatch; b++) {
        const int e = e0 + b * kGemvThreads;
        g[b] = u[b] = make_uint4(0, 0, 0, 0);
        if (e >= total) continue;
        const int i = e / k8, j = e - i * k8;
        if (i >= a.m) continue;
        if constexpr (IN == GemvIn::Plain) {
          g[b] = reinterpret_cast<const uint4*>(x + size_t(i) * a.x_stride)[j];
        } else {  // x [m, 2k]: gate at j, up at k8 + j (16-byte chunks)
          const uint4* row = reinterpret_cast<const uint4*>(x + size_t(i) * 2 * a.k);
          g[b] = row[j];
          u[b] = row[k8 + j];
        }
      }
#pragma unroll
      for (int b = 0; b < kStageBatch; b++) {
        const int e = e0 + b * kGemvThreads;
        if (e >= total) continue;
        if constexpr (IN == GemvIn::Plain) {
          xs[e] = g[b];
        } else {
          float gf[8], uf[8];
          bf16x8_to_f32(g[b], gf);
          bf16x8_to_f32(u[b], uf);
#pragma unroll
          for (int q = 0; q < 8; q++) gf[q] = gf[q] / (1.0f + expf(-gf[q])) * uf[q];
          xs[e] = f32x8_to_bf16(gf);  // zero rows: silu(0) * 0 = 0
        }
      }
    }
  } else {  // RmsNorm: x fp32 [rows, x_stride], one block-wide sum of squares per row
    int src[M];
#pragma unroll
    for (int i = 0; i < M; i++) src[i] = i < a.m ? (a.rows != nullptr ? a.rows[i] : i) : 0;
    const float* x = static_cast<const float*>(a.x);
    const float4* nw4 = reinterpret_cast<const float4*>(a.norm_w);
    float4 v[kNormBatch][2], w[kNormBatch][2];
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    auto load = [&](int e0) {
#pragma unroll
      for (int b = 0; b < kNormBatch; b++) {
        const int e = e0 + b * kGemvThreads;
        v[b][0] = v[b][1] = w[b][0] = w[b][1] = zero;
        if (e >= total) continue;
        const int i = e / k8, j = e - i * k8;
        w[b][0] = nw4[2 * j];
        w[b][1] = nw4[2 * j + 1];
        if (i >= a.m) continue;
        const float4* p = reinterpret_cast<const float4*>(x + size_t(pick(src, i)) * a.x_stride);
        v[b][0] = p[2 * j];
        v[b][1] = p[2 * j + 1];
      }
    };
    float ss[M];
#pragma unroll
    for (int i = 0; i < M; i++) ss[i] = 0.0f;
    // Every thread runs at most one batch when all chunks fit: its values stay in registers
    // for the second pass instead of being read again after the reduction.
    const bool kept = total <= kNormBatch * kGemvThreads;
    for (int e0 = tid; e0 < total; e0 += kNormBatch * kGemvThreads) {
      load(e0);
#pragma unroll
      for (int b = 0; b < kNormBatch; b++) {
        const int e = e0 + b * kGemvThreads;
        if (e >= total) continue;
        const float s = v[b][0].x * v[b][0].x + v[b][0].y * v[b][0].y + v[b][0].z * v[b][0].z +
                        v[b][0].w * v[b][0].w + v[b][1].x * v[b][1].x + v[b][1].y * v[b][1].y +
                        v[b][1].z * v[b][1].z + v[b][1].w * v[b][1].w;
        const int i = e / k8;
#pragma unroll
        for (int r = 0; r < M; r++)
          if (r == i) ss[r] += s;
      }
    }
    const int lane = tid & 31, warp = tid >> 5;
#pragma unroll
    for (int i = 0; i < M; i++) {
      const float t = warp_sum(ss[i]);
      if (lane == 0) red[i * kGemvWarps + warp] = t;  // red: float [M][warps]
    }
    __syncthreads();
    float inv[M];
#pragma unroll
    for (int i = 0; i < M; i++) {
      float t = 0.0f;
#pragma unroll
      for (int q = 0; q < kGemvWarps; q++) t += red[i * kGemvWarps + q];
      inv[i] = rsqrtf(t / float(a.k) + a.eps);
    }
    for (int e0 = tid; e0 < total; e0 += kNormBatch * kGemvThreads) {
      if (!kept) load(e0);
#pragma unroll
      for (int b = 0; b < kNormBatch; b++) {
        const int e = e0 + b * kGemvThreads;
        if (e >= total) continue;
        const float r = pick(inv, e / k8);
        const float f[8] = {v[b][0].x * r * w[b][0].x, v[b][0].y * r * w[b][0].y,
                            v[b][0].z * r * w[b][0].z, v[b][0].w * r * w[b][0].w,
                            v[b][1].x * r * w[b][1].x, v[b][1].y * r * w[b][1].y,
                            v[b][1].z * r * w[b][1].z, v[b][1].w * r * w[b][1].w};
        xs[e] = f32x8_to_bf16(f);  // zero rows: v = 0
      }
    }
  }
  __syncthreads();
}

// Warp w of block b owns rows n = b * warps + w + j * (grid * warps). It walks them in steps:
// step t is chunk column (t % nb) * 32 + lane of its (t / nb)-th row (nb = ceil(k8 / 32)
// steps a row; a lane whose column is ≥ k8 copies and reads nothing). Step t lives in ring slot
// t % slots of the lane; groups of `group` steps are committed together.
template <int M, GemvIn IN, GemvOut OUT>
__global__ void __launch_bounds__(kGemvThreads, 2) gemv_kernel(GemvArgs a, int group) {
  extern __shared__ uint4 gemv_smem[];
  __shared__ float red[M * kGemvWarps];
  const int k8 = a.k / 8;         // 16-byte chunks of a weight row
  const int nb = (k8 + 31) / 32;  // steps of a row
  const int slots = kGemvGroups * group;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint4* xs = gemv_smem;  // [M][k8] bf16 x 8: the transformed input rows
  const uint4* ring =
      gemv_smem + size_t(M) * k8 + size_t(warp) * slots * 32;  // [slots][32] of this warp
  const uint32_t ring_lane = smem_addr(ring + lane);           // slot s at + s * 512 bytes
  const int warp0 = blockIdx.x * kGemvWarps + warp, wstride = gridDim.x * kGemvWarps;
  const int my_rows = warp0 < a.n ? (a.n - 1 - warp0) / wstride + 1 : 0;
  const int steps = my_rows * nb;
  const size_t row_step = size_t(wstride) * k8;  // 16-byte chunks between this warp's rows

  // Producer: the next step to copy (p_t), its column step in the row (p_c), its slot, and the
  // chunk `lane` of its row.
  const uint4* p_row = static_cast<const uint4*>(a.w) + size_t(warp0) * k8 + lane;
  int p_t = 0, p_c = 0, p_slot = 0;
  auto issue_group = [&]() {
    for (int u = 0; u < group && p_t < steps; u++) {
      if (p_c * 32 + lane < k8) cp_async16(ring_lane + uint32_t(p_slot) * 512u, p_row + p_c * 32);
      p_t++;
      p_slot = p_slot + 1 == slots ? 0 : p_slot + 1;
      if (++p_c == nb) {
        p_c = 0;
        p_row += row_step;
      }
    }
    cp_async_commit();  // possibly empty: the group count stays in step with the consumer
  };

  // Weights do not depend on earlier kernels: let the next kernel launch, fill the ring, and
  // only then wait for the previous kernel (programmatic dependent launch) before the input.
  pdl_trigger();
#pragma unroll
  for (int g = 0; g < kGemvGroups; g++) issue_group();
  pdl_wait();
  stage_input<M, IN>(a, xs, red, k8);

  float acc[M];
#pragma unroll
  for (int i = 0; i < M; i++) acc[i] = 0.0f;
  int c_c = 0, c_slot = 0, c_n = warp0;  // consumer: column step, slot, row
  // Group j (steps j * group ...) was committed as the (j+1)-th group; at the top of iteration
  // j groups 0..j+3 are committed, so wait_group(3) leaves group j complete. Its slots are then
  // refilled with group j + 4 (same slots: slots = 4 * group).
  for (int t0 = 0; t0 < steps; t0 += group) {
    cp_async_wait<kGemvGroups - 1>();
    const int t1 = min(steps, t0 + group);
    for (int t = t0; t < t1; t++) {
      const int c = c_c * 32 + lane;
      if (c < k8) {
        float wf[8];
        bf16x8_to_f32(ring[c_slot * 32 + lane], wf);
#pragma unroll
        for (int i = 0; i < M; i++) {
          float xf[8];
          bf16x8_to_f32(xs[size_t(i) * k8 + c], xf);
#pragma unroll
          for (int q = 0; q < 8; q++) acc[i] = fmaf(wf[q], xf[q], acc[i]);
        }
      }
      c_slot = c_slot + 1 == slots ? 0 : c_slot + 1;
      if (++c_c == nb) {  // row c_n done (warp-uniform)
#pragma unroll
        for (int i = 0; i < M; i++) acc[i] = warp_sum(acc[i]);
        if (lane < M && lane < a.m) {
          const float v = pick(acc, lane);
          const size_t o = size_t(lane) * a.y_stride + c_n;
          if constexpr (OUT == GemvOut::Store)
            static_cast<bf16*>(a.y)[o] = __float2bfloat16_rn(v);
          else if constexpr (OUT == GemvOut::AddF32)
            static_cast<float*>(a.y)[o] += v;
          else
            static_cast<float*>(a.y)[o] = v;
        }
#pragma unroll
        for (int i = 0; i < M; i++) acc[i] = 0.0f;
        c_c = 0;
        c_n += wstride;
      }
    }
    issue_group();
  }
}

// The launch of one instantiation: ring size from the shared-memory budget, one block per SM.
struct GemvGeometry {
  int group = 0;    // steps per cp.async group
  size_t smem = 0;  // dynamic shared memory: input rows + ring
  int ring = 0;     // ring bytes
  int grid = 0;     // blocks
};

template <int M>
static GemvGeometry gemv_geometry(const GemvArgs& a, int num_sms) {
  GemvGeometry g;
  const int x_bytes = M * a.k * 2;
  const int budget = a.smem_bytes > 0 ? a.smem_bytes : kGemvSmemBytes;
  g.group = std::max(1, (budget - x_bytes) / kGemvGroupUnit);
  g.ring = g.group * kGemvGroupUnit;
  g.smem = size_t(x_bytes) + size_t(g.ring);
  const int per_sm = a.blocks_per_sm > 0 ? a.blocks_per_sm : 1;
  g.grid = std::min(ceil_div(a.n, kGemvWarps), num_sms * per_sm);
  return g;
}

template <int M, GemvIn IN, GemvOut OUT>
static Status run_gemv(const GemvArgs& a, int num_sms, cudaStream_t stream, GemvLaunchInfo* info) {
  auto* kernel = gemv_kernel<M, IN, OUT>;
  const GemvGeometry g = gemv_geometry<M>(a, num_sms);
  static int optin = 0;  // per instantiation: the dynamic shared memory allowed, set once
  if (optin == 0) {
    int dev = 0, v = 0;
    cudaFuncAttributes fa{};
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
      e = cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&fa, kernel);
    v -= int(fa.sharedSizeBytes);  // static (the RMSNorm scratch) + dynamic ≤ the opt-in limit
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, v);
    // Two ~100 KB blocks per SM need the largest shared-memory carveout (L1 is no use here).
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               int(cudaSharedmemCarveoutMaxShared));
    if (e != cudaSuccess)
      return Status::bad(
          cat("gemv: setting the shared memory attributes: ", cudaGetErrorString(e)));
    optin = v;
  }
  LOOM_ARG_CHECK(g.smem <= size_t(optin), "gemv: ", M, " rows of k ", a.k, " and a ", g.ring,
                 "-byte ring need ", g.smem, " bytes of shared memory (device allows ", optin, ")");
  if (info != nullptr) {
    cudaFuncAttributes fa{};
    cudaError_t e = cudaFuncGetAttributes(&fa, kernel);
    int per_sm = 0;
    if (e == cudaSuccess)
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvThreads, g.smem);
    if (e != cudaSuccess) return Status::bad(cat("gemv: occupancy: ", cudaGetErrorString(e)));
    info->grid = g.grid;
    info->threads = kGemvThreads;
    info->smem_bytes = int(g.smem);
    info->ring_bytes = g.ring;
    info->registers = fa.numRegs;
    info->blocks_per_sm = per_sm;
    return Status::good();
  }
  const cudaError_t e =
      launch_kernel(kernel, dim3(g.grid), dim3(kGemvThreads), g.smem, stream, a.pdl, a, g.group);
  if (e != cudaSuccess) return Status::bad(cat("gemv: launch failed: ", cudaGetErrorString(e)));
  return launch_status("gemv");
}

template <GemvIn IN, GemvOut OUT>
static Status dispatch_rows(const GemvArgs& a, int num_sms, cudaStream_t stream,
                            GemvLaunchInfo* info) {
  if (a.m <= 1) return run_gemv<1, IN, OUT>(a, num_sms, stream, info);
  if (a.m <= 2) return run_gemv<2, IN, OUT>(a, num_sms, stream, info);
  if (a.m <= 4) return run_gemv<4, IN, OUT>(a, num_sms, stream, info);
  return run_gemv<8, IN, OUT>(a, num_sms, stream, info);
}

static Status gemv_checked(const GemvArgs& a0, int num_sms, cudaStream_t stream,
                           GemvLaunchInfo* info) {
  GemvArgs a = a0;
  if (a.x_stride == 0) a.x_stride = a.k;
  if (a.y_stride == 0) a.y_stride = a.n;
  LOOM_ARG_CHECK(a.m >= 1 && a.m <= kGemvMaxRows, "gemv: m ", a.m, " (expected 1..", kGemvMaxRows,
                 ")");
  LOOM_ARG_CHECK(a.n > 0 && a.k > 0 && a.k % 8 == 0, "gemv: n ", a.n, ", k ", a.k,
                 " (expected k a multiple of 8)");
  LOOM_ARG_CHECK(a.w && a.x && a.y, "gemv: null w/x/y");
  LOOM_ARG_CHECK(reinterpret_cast<uintptr_t>(a.w) % 16 == 0, "gemv: weights not 16-byte aligned");
  LOOM_ARG_CHECK(reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.x_stride % 8 == 0,
                 "gemv: input not 16-byte aligned or x_stride ", a.x_stride,
                 " not a multiple of 8");
  LOOM_ARG_CHECK(a.in != GemvIn::RmsNorm ||
                     (a.norm_w != nullptr && reinterpret_cast<uintptr_t>(a.norm_w) % 16 == 0),
                 "gemv: RmsNorm without a 16-byte aligned weight");
  LOOM_ARG_CHECK(a.y_stride >= a.n, "gemv: y_stride ", a.y_stride, " < n ", a.n);
  LOOM_ARG_CHECK(num_sms > 0, "gemv: num_sms ", num_sms);
  if (a.in == GemvIn::Plain && a.out == GemvOut::Store)
    return dispatch_rows<GemvIn::Plain, GemvOut::Store>(a, num_sms, stream, info);
  if (a.in == GemvIn::Plain && a.out == GemvOut::StoreF32)
    return dispatch_rows<GemvIn::Plain, GemvOut::StoreF32>(a, num_sms, stream, info);
  if (a.in == GemvIn::Plain && a.out == GemvOut::AddF32)
    return dispatch_rows<GemvIn::Plain, GemvOut::AddF32>(a, num_sms, stream, info);
  if (a.in == GemvIn::RmsNorm && a.out == GemvOut::Store)
    return dispatch_rows<GemvIn::RmsNorm, GemvOut::Store>(a, num_sms, stream, info);
  if (a.in == GemvIn::RmsNorm && a.out == GemvOut::StoreF32)
    return dispatch_rows<GemvIn::RmsNorm, GemvOut::StoreF32>(a, num_sms, stream, info);
  if (a.in == GemvIn::SiluMul && a.out == GemvOut::AddF32)
    return dispatch_rows<GemvIn::SiluMul, GemvOut::AddF32>(a, num_sms, stream, info);
  return Status::bad("gemv: unsupported input/output combination");
}

Status gemv_bf16(const GemvArgs& a, int num_sms, cudaStream_t stream) {
  return gemv_checked(a, num_sms, stream, nullptr);
}

Status gemv_launch_info(const GemvArgs& a, int num_sms, GemvLaunchInfo* info) {
  LOOM_ARG_CHECK(info != nullptr, "gemv_launch_info: null info");
  return gemv_checked(a, num_sms, nullptr, info);
}

}  // namespace loom::gpu
