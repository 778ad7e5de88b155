// RMSNorm fused with the residual add, on the device (the op, its arguments and its reference:
// norm.h). The residual stream x is fp32; `delta` is the previous block's output (attention or
// MLP, in the GEMM dtype t). Launch: dims a multiple of 16 bytes (8 bf16, 4 fp32) a warp a row
// up to 32 vectors, else a block a row of up to 256 threads (more past 1024 vectors) holding the
// row in registers; other dims a block a row re-reading x (norm.cu).
#pragma once

#include "kernels/cuda_check.cuh"
#include "kernels/norm.h"

namespace loom::gpu {

Status rms_norm_residual(const NormArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
