// RoPE fused with the paged K/V write, its argument struct and fp32 host reference (the CUDA
// launcher: rope.cuh). Plain C++, so the CPU backend and CPU-only builds include it. For every
// new slot: rotate its q heads in place in the qkv buffer, rotate its k heads, and write k and v
// into the paged cache at cache_slot[slot] (= physical block · block_size + offset, computed on
// the host from the block table; -1 skips the write). HF rotate_half convention: pairs
// (j, j + head_dim/2) rotated by angle = float(position) · inv_freq[j] (rope_inv_freq). The
// kernel's cache stores each value rounded to t, then with kv_fp8 as e4m3(x · (1/s))
// (kernels/kv_quant.cuh); the reference's caches are fp32 and hold what the kernel's cache reads
// back as (with kv_fp8: the e4m3 round trip times s, core/fp8.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace loom {

struct RopeKvArgs {
  DType t = DType::BF16;                // dtype of qkv (the reference: F32)
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

// inv_freq[j] = 1 / theta^(2j / head_dim) in fp32, as HF's LlamaRotaryEmbedding computes it;
// rotary off: zeros, so every angle is 0 and x0·1 − x1·0, x1·1 + x0·0 give q and k back bit for
// bit (the RoPE ops then serve as the plain K/V write).
std::vector<float> rope_inv_freq(int head_dim, float theta, bool rotary);

namespace cpu {

// The reference (t F32): c, s = cos, sin of the angle in fp32; y0 = x0·c − x1·s,
// y1 = x1·c + x0·s. The CPU backend runs it.
void rope_kv_write(const RopeKvArgs& a);

}  // namespace cpu
}  // namespace loom
