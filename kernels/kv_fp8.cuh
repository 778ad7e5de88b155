// Host-callable pieces of the FP8 KV cache (the device quantizer itself is kernels/kv_quant.cuh).
//
// KV statistics for `loom calibrate` (core/kv_format.h KvStats): after a layer's attention has
// written the step's K (after RoPE) and V rows to the cache, fold their absolute maxima per kv
// head into absmax and count the elements an FP8 cache with `scales` would saturate
// (|x| · (1/s) > 448). The cache holds the compute dtype here (calibration runs without FP8).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

struct KvStatsArgs {
  DType t = DType::BF16;                // the cache's dtype (f32 or bf16)
  const void* k_cache = nullptr;        // [rows, kv_heads, head_dim] this layer's K
  const void* v_cache = nullptr;        // same, V
  const int32_t* cache_slot = nullptr;  // [n_slots] flat cache row, -1: not written
  int n_slots = 0, kv_heads = 0, head_dim = 0;
  float* absmax = nullptr;               // [2, kv_heads] this layer's K then V maxima (in/out)
  const float* scales = nullptr;         // [2, kv_heads] saturation scales; null: no count
  unsigned long long* counts = nullptr;  // [2]: elements seen, of them saturated (in/out)
};
Status kv_stats(const KvStatsArgs& a, cudaStream_t stream);

// q[i] = the KV quantizer's e4m3 bits of x[i] with scale s (stored = e4m3(x · (1/s))), for
// comparing the device conversion with core/fp8.h's host reference element by element.
Status fp8_quantize(const float* x, int n, float s, uint8_t* q, cudaStream_t stream);

}  // namespace loom::gpu
