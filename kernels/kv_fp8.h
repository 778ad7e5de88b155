// KV statistics for `loom calibrate` (core/kv_format.h KvStats), its argument struct and fp32
// host reference (the CUDA launcher, and the device e4m3 quantizer's test hook: kv_fp8.cuh).
// After a layer's attention has written the step's K (after RoPE) and V rows to the cache, fold
// their absolute maxima per kv head into absmax and count the elements an FP8 cache with
// `scales` would saturate (|x| · (1/s) > 448). The cache holds the compute dtype here
// (calibration runs without FP8). Plain C++, so the CPU backend and CPU-only builds include it.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace loom {

struct KvStatsArgs {
  DType t = DType::BF16;                // the cache's dtype (f32 or bf16; the reference: f32)
  const void* k_cache = nullptr;        // [rows, kv_heads, head_dim] this layer's K
  const void* v_cache = nullptr;        // same, V
  const int32_t* cache_slot = nullptr;  // [n_slots] flat cache row, -1: not written
  int n_slots = 0, kv_heads = 0, head_dim = 0;
  float* absmax = nullptr;               // [2, kv_heads] this layer's K then V maxima (in/out)
  const float* scales = nullptr;         // [2, kv_heads] saturation scales; null: no count
  unsigned long long* counts = nullptr;  // [2]: elements seen, of them saturated (in/out)
};

namespace cpu {

// The reference. The CPU backend runs it.
void kv_stats(const KvStatsArgs& a);

}  // namespace cpu
}  // namespace loom
