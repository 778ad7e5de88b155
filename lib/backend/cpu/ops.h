// CPU reference ops, fp32, plain loops (design §6): the definition every CUDA kernel is tested
// against (style.md §5: one op, one signature, two implementations). Each mirrors the HF
// transformers 4.39 LlamaModel computation it replaces.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/spec.h"

namespace loom::cpu {

// y[m, n] = x[m, k] · w[n, k]ᵀ (+ bias[n] when bias != nullptr). HF nn.Linear.
void matmul_nt(const float* x, const float* w, const float* bias, float* y, int m, int n, int k);

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) * weight. HF LlamaRMSNorm (fp32). y may be x.
void rms_norm(const float* x, const float* weight, float* y, int rows, int dim, float eps);

// y[r, :] = (x[r, :] − mean) / sqrt(var + eps) * weight + bias, var the biased variance (torch
// nn.LayerNorm in fp32). weight / bias may be nullptr (non-affine / no bias). y may be x.
void layer_norm(const float* x, const float* weight, const float* bias, float* y, int rows, int dim,
                float eps);

// One activation of a float: silu, GPT-2's gelu_new (tanh), exact erf gelu, relu.
float activate(Activation act, float x);

// x[rows, heads, head_dim] rotated in place at positions[rows], HF rotate_half convention:
// pairs (j, j + head_dim/2), angle = float(pos) * inv_freq[j], inv_freq[j] = 1 /
// theta^(2j/head_dim) computed in fp32 as HF's LlamaRotaryEmbedding does.
void rope(float* x, const int32_t* positions, int rows, int heads, int head_dim, float theta);

// out[r, j] = act(gate_up[r, j]) * gate_up[r, inter + j]; gate_up [rows, 2 * inter] (SwiGLU
// with act = silu).
void act_mul(Activation act, const float* gate_up, float* out, int rows, int inter);

// SwiGLU: act_mul with silu (the CUDA kernel tests compare silu_mul against this).
inline void silu_mul(const float* gate_up, float* out, int rows, int inter) {
  act_mul(Activation::Silu, gate_up, out, rows, inter);
}

// x[n] = act(x[n]) in place (the plain MLP's activation).
void act_inplace(Activation act, float* x, size_t n);

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
