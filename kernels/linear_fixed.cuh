// Batch-invariant linear layer (issue 4 §3, `--batch-invariant`): y[m, n] = x[m, :] · w[n, :]ᵀ
// with bf16 operands and fp32 accumulation, where the arithmetic that produces one output
// element depends on k alone — never on m, on how n and m are tiled, on the grid or on what
// else is in the batch. So a token's row of y is bitwise the same whether it is computed alone
// or as row 17 of 300 (cuBLAS picks kernels and split-k by shape, the GEMV and the GEMM
// schedules sum in different orders: both change the rounding with the batch).
//
// The fixed order (vLLM's VLLM_BATCH_INVARIANT and SGLang's deterministic mode make the same
// trade): k is cut into segments of kLinearSegment (the last one shorter, zero-filled to a
// multiple of 32). Within a segment, mma.sync m16n8k16 (bf16 → fp32) k-steps run in k order
// from a zero accumulator; segment results are then added in segment order with __fadd_rn,
// starting from +0. Which warp or block computes a segment, and how many rows or tokens share
// its fragments, does not enter the arithmetic.
//
// Two kernels share that arithmetic: for small m (decode) a register path where each warp
// streams one segment's weights straight into fragments; for larger m a tiled path that streams
// 64-wide k steps of a weight tile and a token tile through shared memory (cp.async ring) and
// reads each lane's 16 bytes from there, with per-segment accumulators folded into running sums
// in segment order. Which one runs is a choice by shape only and never changes a bit.
//
// Layout: w is the mma's A operand (16 weight rows), x rows are its B operand (8 tokens; B
// col-major = x row-major). Inside each 32-wide k chunk every lane loads 16 contiguous bytes
// of two weight rows and of one token row and feeds two k16 mmas; that permutes k inside a
// step identically for A and B, which leaves the sum's terms unchanged and the order fixed.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

constexpr int kLinearSegment = 256;  // k per fixed-order segment

struct LinearFixedArgs {
  const void* x = nullptr;  // bf16 [m, k], rows back to back, 16-byte aligned
  const void* w = nullptr;  // bf16 [n, k], 16-byte aligned
  void* y = nullptr;        // y_t [m, ldy]: columns [0, n) written, the rest untouched
  DType y_t = DType::BF16;  // BF16 (layer outputs) or F32 (logits)
  int m = 0, n = 0, k = 0;  // m ≥ 0 (0: nothing to do), n ≥ 1, k ≥ 8 and k % 8 == 0
  int ldy = 0;              // elements between rows of y; 0: n
  // Programmatic dependent launch: the kernel may start while the previous kernel of the
  // stream finishes; it issues its first weight loads, then waits for that kernel before it
  // reads x or writes y. Only where the previous launch is a kernel (not a copy).
  bool pdl = false;
  // Which kernel computes it (every choice gives the same bits; tests and benchmarks force
  // one): kPathAuto picks by shape, kPathRows the register path (decode sizes), kPathTile64,
  // kPathTile128 and kPathTile192 the shared-memory tiled path with 64×64, 128×128 or 192×128
  // (weight rows × tokens) tiles.
  int path = 0;
};

constexpr int kPathAuto = 0, kPathRows = 1, kPathTile64 = 2, kPathTile128 = 3, kPathTile192 = 4;

Status linear_fixed(const LinearFixedArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
