// The norms over the residual stream, RMSNorm (norm.cuh) and LayerNorm (layer_norm.cuh): one
// argument struct for both, shared by the CUDA launchers and the fp32 host references below
// (style.md §5). Plain C++, so the CPU backend and CPU-only builds include it. Per output row r:
//   src = rows ? rows[r] : r
//   x[src] += delta[src]                                   (when delta != null)
//   RMSNorm:   out[r] = x[src] · (1 / sqrt(mean(x[src]²) + eps)) · weight       (HF LlamaRMSNorm)
//   LayerNorm: out[r] = (x[src] − mean) · (1 / sqrt(var + eps)) · weight + bias (torch LayerNorm,
//              biased variance; weight / bias may be null: non-affine / no bias)
// Statistics in fp32; out rounded once to dtype t. `rows` lets the final norm take only the last
// slot of each sequence that needs logits.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace loom {

struct NormArgs {
  DType t = DType::BF16;          // dtype of delta and out: F32 or BF16 (the references: F32)
  float* x = nullptr;             // [x_rows, dim] residual stream, fp32, updated in place
  const void* delta = nullptr;    // [x_rows, dim] the previous block's output, or null
  const float* weight = nullptr;  // [dim]; RMSNorm requires it, LayerNorm: null = non-affine
  const float* bias = nullptr;    // [dim] LayerNorm only, or null
  const int32_t* rows = nullptr;  // [n_rows] source row of each output row, or null: row r
  int n_rows = 0, dim = 0;
  float eps = 1e-6f;
  void* out = nullptr;  // [n_rows, dim], not x
  // CUDA, RMSNorm: programmatic dependent launch (the kernel starts while the previous kernel
  // of the stream finishes and waits for it before reading; it lets the next kernel start its
  // prologue at once). Only after a kernel of this backend.
  bool pdl = false;
};

namespace cpu {

// The fp32 references (t must be F32). The CPU backend runs these.
void rms_norm_residual(const NormArgs& a);
void layer_norm_residual(const NormArgs& a);

// Both references' first step for output row r: checks the dtype (naming `op`), adds delta to
// x's source row when given, and returns that row.
float* residual_row(const NormArgs& a, int r, const char* op);

}  // namespace cpu
}  // namespace loom
