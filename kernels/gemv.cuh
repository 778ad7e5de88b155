// Weight-streaming GEMV for small batches (m ≤ 8 rows) with bf16 weights: y[m, n] = in[m, :] ·
// W[n, :]ᵀ. At batch-1 decode every GEMM is bound by reading W once, so the kernel is built for
// that: one warp per output row, the weights copied with 16-byte cp.async into a per-lane ring in
// shared memory (~50-96 KB in flight per block, not in registers), the m input rows staged once
// per block in shared memory (bf16). A block is sized so that exactly two fit on an SM: the grid
// takes one slot per SM and, under programmatic dependent launch, the next GEMV takes the other,
// streams its first ring of weights while this one drains, and waits only before its input.
// The input transform and the output mode are fused so that a decode layer is four GEMVs and
// attention:
//   in:  Plain    x bf16 [m, k] (row stride x_stride)
//        RmsNorm  bf16(x[src] * rsqrt(mean(x[src]²) + eps) * norm_w), x fp32 [rows, k],
//                 src = rows ? rows[i] : i       (attention / MLP / final norm)
//        SiluMul  bf16(silu(g) * u), g = x[i, j], u = x[i, k + j], x bf16 [m, 2k]
//   out: Store    y bf16 [m, n]
//        AddF32   y fp32 [m, n] += result        (the residual stream)
//        StoreF32 y fp32 [m, n]                  (logits)
#pragma once

#include <cstdint>

#include "kernels/cuda_check.cuh"

namespace loom::gpu {

enum class GemvIn { Plain, RmsNorm, SiluMul };
enum class GemvOut { Store, AddF32, StoreF32 };

constexpr int kGemvMaxRows = 8;

struct GemvArgs {
  const void* w = nullptr;  // bf16 [n, k], 16-byte aligned rows (k % 8 == 0)
  int n = 0, k = 0, m = 0;  // m ≤ kGemvMaxRows
  GemvIn in = GemvIn::Plain;
  const void* x = nullptr;        // see above; 16-byte aligned
  int x_stride = 0;               // elements between input rows (Plain, RmsNorm), % 8 == 0; 0: k
  const int32_t* rows = nullptr;  // RmsNorm: source rows, or null for 0..m-1
  const float* norm_w = nullptr;  // RmsNorm: [k], 16-byte aligned
  float eps = 1e-6f;
  GemvOut out = GemvOut::Store;
  void* y = nullptr;  // [m, y_stride]
  int y_stride = 0;   // elements between output rows; 0: n
  // Programmatic dependent launch: the kernel may start while the previous kernel on the
  // stream finishes; it streams its first weights, then waits for that kernel before reading
  // x or writing y. Only for launches whose predecessor is a kernel of this backend.
  bool pdl = false;
  // Tuning knobs for the bench (0: the defaults, which the backend uses).
  int smem_bytes = 0;     // shared memory a block may take (input rows + ring); 0: 100 KB
  int blocks_per_sm = 0;  // grid = SMs x this (capped by the rows); 0: 1
};

// Supported: k % 8 == 0, m in 1..8, in/out pairs Plain→Store, Plain→AddF32, Plain→StoreF32,
// RmsNorm→Store, RmsNorm→StoreF32, SiluMul→AddF32.
Status gemv_bf16(const GemvArgs& a, int num_sms, cudaStream_t stream);

// How gemv_bf16 would launch `a` (for tests and the bench): the per-block resources and how
// many such blocks fit on one SM (2 is the design: this GEMV and the next one).
struct GemvLaunchInfo {
  int grid = 0;           // blocks
  int threads = 0;        // per block
  int smem_bytes = 0;     // dynamic shared memory per block
  int ring_bytes = 0;     // of which the weight ring
  int registers = 0;      // per thread
  int blocks_per_sm = 0;  // occupancy of this kernel alone
};
Status gemv_launch_info(const GemvArgs& a, int num_sms, GemvLaunchInfo* info);

}  // namespace loom::gpu
