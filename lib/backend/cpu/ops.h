// CPU reference ops, fp32, plain loops (design §6): the definition every CUDA kernel is tested
// against (style.md §5: one op, one signature, two implementations). Each mirrors the HF
// transformers 4.39 LlamaModel computation it replaces. The op families of kernels/ keep their
// references beside their kernels, with the argument struct both take (kernels/<family>.h,
// plain C++); this header gathers them for the CPU backend, with the references whose kernels
// take other forms (the linear layer: cuBLAS, gemv, linear_fixed) or are still to become
// families (RoPE, the KV write, attention).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/activation.h"
#include "kernels/embed.h"
#include "kernels/mlp_activation.h"
#include "kernels/norm.h"
#include "kernels/positions.h"

namespace loom::cpu {

// y[m, n] = x[m, k] · w[n, k]ᵀ (+ bias[n] when bias != nullptr). HF nn.Linear.
void matmul_nt(const float* x, const float* w, const float* bias, float* y, int m, int n, int k);

// x[rows, heads, head_dim] rotated in place at positions[rows], HF rotate_half convention:
// pairs (j, j + head_dim/2), angle = float(pos) * inv_freq[j], inv_freq[j] = 1 /
// theta^(2j/head_dim) computed in fp32 as HF's LlamaRotaryEmbedding does.
void rope(float* x, const int32_t* positions, int rows, int heads, int head_dim, float theta);

// Causal GQA attention for one sequence's n_new new slots over its paged cache.
// q:   [n_new, heads, head_dim] (already rotated)
// k, v caches: [num_blocks, block_size, kv_heads, head_dim] for this layer
// block_table: [ceil((kv_len + n_new) / block_size)] physical block ids
// New slot j sits at cache index kv_len + j and attends to indices [0, kv_len + j].
// out: [n_new, heads, head_dim]; query head h reads kv head h / (heads / kv_heads).
void paged_attention(const float* q, const float* k_cache, const float* v_cache,
                     const int32_t* block_table, int kv_len, int n_new, int heads, int kv_heads,
                     int head_dim, int block_size, float* out);

// Writes k, v [n_new, kv_heads, head_dim] into cache indices kv_len .. kv_len + n_new - 1.
void kv_write(const float* k, const float* v, float* k_cache, float* v_cache,
              const int32_t* block_table, int kv_len, int n_new, int kv_heads, int head_dim,
              int block_size);

}  // namespace loom::cpu
