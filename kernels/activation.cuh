// convert and fill_uniform on the device (the ops and their references: activation.h).
// Launch: grid-stride, 256 threads, up to 8192 (convert) / 16384 (fill) blocks.
#pragma once

#include "kernels/activation.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

Status convert(DType src_t, const void* src, DType dst_t, void* dst, size_t n, cudaStream_t stream);

Status fill_uniform(DType t, void* dst, size_t n, uint64_t seed, float scale, cudaStream_t stream);

}  // namespace loom::gpu
