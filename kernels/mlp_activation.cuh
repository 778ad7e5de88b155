// bias_activation and act_mul on the device (the ops, their arguments and their references:
// mlp_activation.h). Each element as cpu::activate computes it, term for term, rounded once to
// dtype t. Launch: a 2-D grid (y: rows, x: columns) of 128-thread blocks; 16-byte loads and
// stores (8 bf16, 4 fp32 a thread) when the width and the pointers allow, else one element a
// thread.
#pragma once

#include "kernels/cuda_check.cuh"
#include "kernels/mlp_activation.h"

namespace loom::gpu {

Status bias_activation(const BiasActivationArgs& a, cudaStream_t stream);
Status act_mul(const ActMulArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
