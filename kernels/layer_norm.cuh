// LayerNorm fused with the residual add: the LayerNorm twin of rms_norm_residual (norm.cuh),
// for OPT / GPT-2 style models (torch nn.LayerNorm, biased variance, statistics in fp32).
//   src = rows ? rows[r] : r
//   x[src] += delta[src]                                  (when delta != null)
//   mean = Σ x[src] / dim;  var = Σ (x[src] − mean)² / dim
//   out[r] = (x[src] − mean) · (1 / sqrt(var + eps)) · weight + bias   (rounded to dtype t)
// weight / bias may be null (non-affine LayerNorm / no bias). The order of operations per
// element is cpu::layer_norm's (backend/cpu/ops.h); only the order of the two block sums differs.
// Launch: one block per output row, 128 threads (512 for dim >= 1024).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

Status layer_norm_residual(DType t, float* x, const void* delta, const float* weight,
                           const float* bias, const int32_t* rows, int n_rows, int dim, float eps,
                           void* out, cudaStream_t stream);

}  // namespace loom::gpu
