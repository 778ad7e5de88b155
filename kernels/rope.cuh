// RoPE fused with the paged K/V write. For every new slot: rotate its q heads in place in the
// qkv buffer, rotate its k heads, and write k and v into the paged cache at cache_slot[slot]
// (= physical block * block_size + offset, computed on the host from the block table; -1 skips
// the write). HF rotate_half convention: pairs (j, j + head_dim/2) rotated by
// angle = float(position) * inv_freq[j], inv_freq computed in fp32 on the host like HF.
// The cache stores each value rounded to t first, then as e4m3 with kv_fp8 (kernels/kv_quant.cuh:
// FP8 is e4m3(x / s)).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

struct RopeKvArgs {
  DType t = DType::BF16;                // dtype of qkv
  bool kv_fp8 = false;                  // the cache holds e4m3 (else t)
  const float* kv_scale = nullptr;      // [2, kv_heads] this layer's K, V scales (fp8; null: 1)
  void* qkv = nullptr;                  // [n_slots, (heads + 2 * kv_heads) * head_dim]: q, k, v
  const int32_t* positions = nullptr;   // [n_slots]
  const int32_t* cache_slot = nullptr;  // [n_slots] flat cache row, -1: do not write
  const float* inv_freq = nullptr;      // [head_dim / 2]
  int n_slots = 0, heads = 0, kv_heads = 0, head_dim = 0;
  void* k_cache = nullptr;  // [num_blocks * block_size, kv_heads, head_dim] this layer's K
  void* v_cache = nullptr;  // same shape, V
  bool pdl = false;         // programmatic dependent launch (see launch_kernel)
};
Status rope_kv_write(const RopeKvArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
