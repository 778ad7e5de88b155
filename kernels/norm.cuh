// RMSNorm fused with the residual add, on the device (the op, its arguments and its reference:
// norm.h). The residual stream x is fp32; `delta` is the previous block's output (attention or
// MLP, in the GEMM dtype t). Launch: one block per output row, 128 threads (512 for dim >= 1024).
#pragma once

#include "kernels/cuda_check.cuh"
#include "kernels/norm.h"

namespace loom::gpu {

Status rms_norm_residual(const NormArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
