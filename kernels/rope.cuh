// RoPE fused with the paged K/V write: the CUDA launcher (the argument struct, the semantics and
// the fp32 reference: rope.h).
#pragma once

#include "kernels/cuda_check.cuh"
#include "kernels/rope.h"

namespace loom::gpu {

using ::loom::RopeKvArgs;
Status rope_kv_write(const RopeKvArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
