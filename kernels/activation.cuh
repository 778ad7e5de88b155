// Elementwise kernels: SwiGLU's silu(gate)·up, dtype conversion (weights arrive in the
// checkpoint's dtype and are converted on the device), and random fill (synthetic benchmarks).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

// out[r, j] = silu(gate_up[r, j]) * gate_up[r, inter + j]; gate_up [rows, 2*inter], out [rows,
// inter].
Status silu_mul(DType t, const void* gate_up, void* out, int rows, int inter, cudaStream_t stream);

// dst[i] = src[i] converted; src f32/f16/bf16, dst f32/bf16 (round to nearest even).
Status convert(DType src_t, const void* src, DType dst_t, void* dst, size_t n, cudaStream_t stream);

// dst[i] = uniform(-scale, scale) from a hash of (seed, i); dst f32 or bf16.
Status fill_uniform(DType t, void* dst, size_t n, uint64_t seed, float scale, cudaStream_t stream);

}  // namespace loom::gpu
