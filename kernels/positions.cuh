// add_absolute_positions on the device (the op, its arguments and its reference: positions.h).
// Launch: one block per slot, 128 threads.
#pragma once

#include "kernels/cuda_check.cuh"
#include "kernels/positions.h"

namespace loom::gpu {

Status add_absolute_positions(const PositionsArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
