// LayerNorm fused with the residual add, on the device: the LayerNorm twin of rms_norm_residual
// (norm.cuh), for OPT / GPT-2 style models (the op, its arguments and its reference: norm.h).
// The order of operations per element is cpu::layer_norm_residual's, every product and sum
// rounded on its own; only the order of the two block sums differs.
// Launch: one block per output row, 128 threads (512 for dim >= 1024).
#pragma once

#include "kernels/cuda_check.cuh"
#include "kernels/norm.h"

namespace loom::gpu {

Status layer_norm_residual(const NormArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
