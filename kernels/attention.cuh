// Paged attention over the KV cache, one kernel for prefill chunks and decode (flash-decoding
// style). A block takes one KV head, one tile of query rows and one split of the keys:
//   rows    = (slot, query head) pairs of that KV head: all G = heads / kv_heads query heads of
//             up to kRows / G consecutive new slots of one sequence (decode: one slot, G rows),
//             so every K/V element loaded serves all G heads (GQA);
//   splits  = the keys [0, kv_len + last slot] cut into num_splits contiguous ranges, so a long
//             context (14,550 slots) at batch 1 still fills the GPU; each split leaves an
//             unnormalised partial (o, max, sum) and a combine kernel merges them.
// Keys are streamed in tiles of kKeys through shared memory with an online softmax. New slot j
// of sequence s sits at cache index kv_len[s] + j and attends to indices [0, kv_len[s] + j].
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

constexpr int kAttnRows = 32;   // query rows (slot, head) per block
constexpr int kDecodeMaxG = 8;  // the decode kernel's largest GQA ratio

struct AttentionArgs {
  DType t = DType::BF16;                  // dtype of qkv, caches and out
  const void* qkv = nullptr;              // [n_slots, (heads + 2 kv_heads) * head_dim], q rotated
  const void* k_cache = nullptr;          // [num_blocks, block_size, kv_heads, head_dim]
  const void* v_cache = nullptr;          // same
  const int32_t* block_tables = nullptr;  // [n_seqs, bt_stride]
  int bt_stride = 0;
  const int32_t* kv_len = nullptr;      // [n_seqs]
  const int32_t* slot_start = nullptr;  // [n_seqs + 1]
  const int32_t* tiles = nullptr;       // [n_tiles, 3]: sequence, first new slot j0, slots nj
  int n_tiles = 0, heads = 0, kv_heads = 0, head_dim = 0, block_size = 0;
  int num_splits = 1;
  float* partial_o = nullptr;   // [n_tiles, kv_heads, num_splits, kAttnRows, head_dim] (splits > 1)
  float* partial_ml = nullptr;  // [n_tiles, kv_heads, num_splits, kAttnRows, 2] max, sum
  void* out = nullptr;          // [n_slots, heads * head_dim]
  // Every tile holds one slot (a decode step) and heads / kv_heads ≤ kDecodeMaxG: use the
  // decode kernel (splits of whole 128-key passes, 4 threads a key).
  bool decode = false;
  bool pdl = false;  // programmatic dependent launch (see launch_kernel in common.cuh)
  // Decode only: do rope_kv_write's work here (rotate q and the new k, write the new k and v
  // into the cache at cache_slot), saving a kernel per layer. Needs the three inputs below.
  bool fuse_rope = false;
  const int32_t* positions = nullptr;   // [n_slots]
  const int32_t* cache_slot = nullptr;  // [n_slots]
  const float* inv_freq = nullptr;      // [head_dim / 2]
};

// Slots of one sequence per tile for a GQA ratio G = heads / kv_heads.
inline int attention_slots_per_tile(int heads, int kv_heads) {
  return kAttnRows / (heads / kv_heads);
}

// Floats of partial_o needed for `blocks` = n_tiles * kv_heads * num_splits.
inline size_t attention_partial_floats(size_t blocks, int head_dim) {
  return blocks * kAttnRows * size_t(head_dim);
}

// Launches the attention kernel and, when num_splits > 1, the combine kernel.
Status paged_attention(const AttentionArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
