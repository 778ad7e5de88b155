// Weight-streaming GEMV for small batches (m ≤ 16 rows) with bf16 weights: y[m, n] = in[m, :] ·
// W[n, :]ᵀ. At small-batch decode every GEMM is bound by reading W once, so the kernels are built
// for that: 16-byte streaming loads in batches of eight a lane (the first batch issued before the
// PDL wait), the m input rows staged once per block in shared memory (bf16, 16-byte loads). Two
// kernels share that skeleton:
//   Fma  (gemv.cu, m ≤ 8)   one warp an output row, CUDA-core FMAs; each weight vector meets
//                           each input row, so the work grows with m (compute-bound near 8)
//   Mma  (gemv_mma.cu)      one warp a k-slice of eight output rows, the weights as the B
//                           operand of mma.sync m16n8k16 and the (≤ 16) input rows as A: the
//                           same instructions for any m, the slices summed in a fixed order
// The input transform and the output mode are fused so that a decode layer is four GEMVs, a
// RoPE/KV write and attention:
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
enum class GemvKernel { Auto, Fma, Mma };  // Auto: Fma for m ≤ kGemvFmaAutoRows, else Mma

constexpr int kGemvMaxRows = 16;
constexpr int kGemvFmaMaxRows = 8;
constexpr int kGemvFmaAutoRows = 1;
// 512 threads x 88 registers and a decode-attention block (128 threads x 149, allocated as 152)
// take 64,512 of an SM's 65,536 registers.
constexpr int kGemvBesideRegs = 88;

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
  GemvKernel kernel = GemvKernel::Auto;  // Fma needs m ≤ kGemvFmaMaxRows
  // One row, FMA kernel: the same code built for at most kGemvBesideRegs registers a thread
  // (same bits), so that a split-decode attention block fits on an SM beside the GEMV's block:
  // for the qkv GEMV before batch-1 decode attention, whose blocks then become resident while
  // qkv streams and issue their K/V tiles before qkv ends.
  bool beside_attention = false;
};

// Registers a block of the qkv GEMV built to run beside attention (beside_attention, RmsNorm →
// Store) takes on an SM.
int gemv_beside_block_registers();

// Supported: k % 8 == 0, x and norm_w 16-byte aligned, x_stride % 8 == 0, m in 1..16, in/out pairs
// Plain→Store, Plain→AddF32, Plain→StoreF32, RmsNorm→Store, RmsNorm→StoreF32, SiluMul→AddF32.
Status gemv_bf16(const GemvArgs& a, int num_sms, cudaStream_t stream);

}  // namespace loom::gpu
