// Elementwise conversions: dtype conversion (weights arrive in the checkpoint's dtype and are
// converted on the device; bf16 logits become fp32) and a seeded uniform fill (synthetic weights
// and benchmarks). The fp32 host references here; the CUDA launchers (activation.cuh) take the
// same arguments and a stream. Plain C++, so CPU-only builds include it.
//   convert:      dst[i] = src[i] converted; src f32/f16/bf16, dst f32/bf16 (round to nearest
//                 even).
//   fill_uniform: dst[i] = uniform(-scale, scale) from Philox of (seed, i); dst f32, bf16 or
//                 f8e4m3 (the KV quantizer's rounding, scale 1: synthetic FP8 caches).
// (The SwiGLU product silu(gate)·up is act_mul with silu: mlp_activation.h.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace loom::cpu {

// The references: any dtype pair the kernels accept, bit for bit what the kernels write.
void convert(DType src_t, const void* src, DType dst_t, void* dst, size_t n);
void fill_uniform(DType t, void* dst, size_t n, uint64_t seed, float scale);

// fill_uniform's value of element i before rounding to the destination dtype.
float uniform_value(size_t i, uint64_t seed, float scale);

}  // namespace loom::cpu
