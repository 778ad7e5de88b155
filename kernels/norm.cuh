// RMSNorm fused with the residual add (HF LlamaRMSNorm, statistics in fp32). The residual
// stream x is fp32; `delta` is the previous block's output (attention or MLP, GEMM dtype).
//   src = rows ? rows[r] : r
//   x[src] += delta[src]                 (when delta != null)
//   out[r] = x[src] * rsqrt(mean(x[src]²) + eps) * weight     (rounded to dtype t)
// `rows` selects which rows to normalise: the final norm uses it to take only the last slot
// of each sequence that needs logits.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

Status rms_norm_residual(DType t, float* x, const void* delta, const float* weight,
                         const int32_t* rows, int n_rows, int dim, float eps, void* out,
                         cudaStream_t stream);

}  // namespace loom::gpu
