// bias_activation and act_mul on the device (the ops, their arguments and their references:
// mlp_activation.h). Each element as cpu::activate computes it, term for term, rounded once to
// dtype t. Launch: grid-stride, 256 threads, up to 4096 blocks.
#pragma once

#include "kernels/cuda_check.cuh"
#include "kernels/mlp_activation.h"

namespace loom::gpu {

Status bias_activation(const BiasActivationArgs& a, cudaStream_t stream);
Status act_mul(const ActMulArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
