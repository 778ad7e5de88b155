// Host-callable pieces of the FP8 KV cache (the device quantizer itself: kernels/kv_quant.cuh):
// the kv_stats launcher (its argument struct, semantics and reference: kv_fp8.h) and a test
// hook for the quantizer.
#pragma once

#include <cstdint>

#include "kernels/cuda_check.cuh"
#include "kernels/kv_fp8.h"

namespace loom::gpu {

using ::loom::KvStatsArgs;
Status kv_stats(const KvStatsArgs& a, cudaStream_t stream);

// q[i] = the KV quantizer's e4m3 bits of x[i] with scale s (stored = e4m3(x · (1/s))), for
// comparing the device conversion with core/fp8.h's host reference element by element.
Status fp8_quantize(const float* x, int n, float s, uint8_t* q, cudaStream_t stream);

}  // namespace loom::gpu
