// Paged attention: the CUDA launchers (the argument struct, the tiling constants, the
// semantics and the fp32 reference: attention.h).
#pragma once

#include "kernels/attention.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

using ::loom::attention_mma_max_parts;
using ::loom::attention_mma_partial_floats;
using ::loom::attention_mma_supported;
using ::loom::attention_partial_floats;
using ::loom::attention_slots_per_tile;
using ::loom::AttentionArgs;
using ::loom::kAttnRows;
using ::loom::kDecodeMaxG;
using ::loom::kMmaPartKeys;
using ::loom::kMmaPartTiles;
using ::loom::kMmaTileKeys;
using ::loom::kMmaWarps;

// Launches the attention kernel and, when num_splits > 1, the combine kernel.
Status paged_attention(const AttentionArgs& a, cudaStream_t stream);

// The tensor-core path (attention_mma.cu); paged_attention calls it for supported shapes.
Status paged_attention_mma(const AttentionArgs& a, cudaStream_t stream);

// Registers a block of the split decode kernel takes (attention_mma.cu; bf16 cache, head_dim 64):
// what a GEMV running beside it must leave (gemv.cuh, GemvArgs::beside_attention).
int paged_attention_mma_decode_block_registers();

// The tensor-core decode with TMA-pipelined loads (attention_tma.cu), for decode steps: head_dim
// 64, cache_slots set, a block size that divides 64 or is a multiple of it. With fuse_rope it
// does RoPE and the new key's write itself. paged_attention_mma calls it when it is usable.
bool tma_decode_usable(const AttentionArgs& a);
Status paged_attention_tma_decode(const AttentionArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
