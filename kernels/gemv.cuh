// Weight-streaming GEMV for small batches (m ≤ 8 rows) with bf16 weights: y[m, n] = in[m, :] ·
// W[n, :]ᵀ. At batch-1 decode every GEMM is bound by reading W once, so the kernel is built for
// that: one warp per output row, 16-byte streaming loads, eight in flight per lane, the m input
// rows staged once per block in shared memory (bf16). The input transform and the output mode
// are fused so that a decode layer is four GEMVs, a RoPE/KV write and attention:
//   in:  Plain    x bf16 [m, k] (row stride x_stride)
//        RmsNorm  bf16(x[src] * rsqrt(mean(x[src]²) + eps) * norm_w), x fp32 [rows, k],
//                 src = rows ? rows[i] : i       (attention / MLP / final norm)
//        SiluMul  bf16(silu(g) * u), g = x[i, j], u = x[i, k + j], x bf16 [m, 2k]
//   out: Store    y bf16 [m, n]
//        AddF32   y fp32 [m, n] += result        (the residual stream)
//        StoreF32 y fp32 [m, n]                  (logits)
// Each GEMV of a decode step pays a ramp (its first loads in flight, HBM idle) and a drain (the
// last loads trickling in). The caller can name the next GEMV of the chain (next_w): when a warp
// has issued its last weight loads it asks L2 to prefetch what the matching warp of the next
// GEMV will load first (cp.async.bulk.prefetch.L2: no registers, no completion), so HBM keeps
// streaming across the kernel boundary and the next GEMV starts on L2 hits.
#pragma once

#include <cstdint>

#include "kernels/cuda_check.cuh"

namespace loom::gpu {

enum class GemvIn { Plain, RmsNorm, SiluMul };
enum class GemvOut { Store, AddF32, StoreF32 };

constexpr int kGemvMaxRows = 8;
constexpr int kGemvThreads = 512;  // one block per SM (95-128 registers a thread)
constexpr int kGemvUnroll = 8;     // 16-byte loads in flight per lane and load step
// Load steps of the next GEMV each warp prefetches by default: 2 steps of a k = 2048 GEMV on
// 132 SMs are 2 x 2112 rows x 4 KB = 17 MB (all of qkv and o, 2/3 of down), a third of L2.
constexpr int kGemvPrefetchWaves = 2;

struct GemvArgs {
  const void* w = nullptr;  // bf16 [n, k], 16-byte aligned rows (k % 8 == 0)
  int n = 0, k = 0, m = 0;  // m ≤ kGemvMaxRows
  GemvIn in = GemvIn::Plain;
  const void* x = nullptr;        // see above
  int x_stride = 0;               // elements between input rows (Plain, RmsNorm); 0: k
  const int32_t* rows = nullptr;  // RmsNorm: source rows, or null for 0..m-1
  const float* norm_w = nullptr;  // RmsNorm: [k]
  float eps = 1e-6f;
  GemvOut out = GemvOut::Store;
  void* y = nullptr;  // [m, y_stride]
  int y_stride = 0;   // elements between output rows; 0: n
  // Programmatic dependent launch: the kernel may start while the previous kernel on the
  // stream finishes; it streams its first weights, then waits for that kernel before reading
  // x or writing y. Only for launches whose predecessor is a kernel of this backend.
  bool pdl = false;
  // The next GEMV of the chain (null: none), launched on the same GPU with the same m, any
  // in/out: its first `next_waves` load steps (per warp; a step is 8 x 16 B a lane, 4 KB) are
  // prefetched into L2 as each warp of this one issues its last loads. Performance only: the
  // results do not depend on it. next_w may be w itself (a GEMV repeated).
  const void* next_w = nullptr;  // bf16 [next_n, next_k], 16-byte aligned, next_k % 8 == 0
  int next_n = 0, next_k = 0;
  int next_waves = kGemvPrefetchWaves;  // ≥ 0; capped at the next GEMV's steps per warp
  // At the start each warp also prefetches its own load steps 1..own_waves (0: none; ≤ 31),
  // which are otherwise issued only after the input is staged.
  int own_waves = 0;
};

// The bytes a GEMV on W [n, k] (bf16, k % 8 == 0) launched with `warps` warps in all loads in
// warp `warp`'s load step `it` (it = 0, 1, ...; the kernel's order): *off .. *off + the return
// value, 0 when that warp has no step `it`. Step it of a warp is chunk it % nb of its row
// warp + (it / nb) * warps, a chunk being 256 16-byte vectors of the row (nb chunks a row, the
// last one partial). Shared by the kernel's prefetches and the tests.
__host__ __device__ inline uint32_t gemv_step_bytes(int n, int k, int warps, int warp, int it,
                                                    size_t* off) {
  const int k8 = k / 8, per_chunk = 32 * kGemvUnroll;
  const int nb = (k8 + per_chunk - 1) / per_chunk;
  const long long row = warp + static_cast<long long>(it / nb) * warps;
  if (row >= n) return 0;
  const int c0 = (it % nb) * per_chunk;
  const int c1 = c0 + per_chunk < k8 ? c0 + per_chunk : k8;
  *off = (static_cast<size_t>(row) * k8 + c0) * 16;
  return static_cast<uint32_t>(c1 - c0) * 16;
}

// Blocks of a GEMV launch on n rows (one wave, grid-stride over rows).
inline int gemv_blocks(int n, int num_sms, int blocks_per_sm) {
  const int warps = kGemvThreads / 32, by_rows = (n + warps - 1) / warps;
  return by_rows < num_sms * blocks_per_sm ? by_rows : num_sms * blocks_per_sm;
}

// Supported: k % 8 == 0, m in 1..8, in/out pairs Plain→Store, Plain→AddF32, Plain→StoreF32,
// RmsNorm→Store,
// RmsNorm→StoreF32, SiluMul→AddF32.
Status gemv_bf16(const GemvArgs& a, int num_sms, cudaStream_t stream);

}  // namespace loom::gpu
