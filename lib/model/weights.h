// Canonical weights: every role the backends read, by name (style.md: no positional arrays).
// Built by model/mapping from the checkpoint as model/roles.h describes; merged roles (qkv,
// gate_up) are concatenated along dim 0 in the order the table lists their parts. dtype is the
// checkpoint's. A role the spec's features do not call for is left empty.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace loom {

struct LayerWeights {
  Tensor attn_norm;       // [hidden]                     norm_affine
  Tensor attn_norm_bias;  // [hidden]                     norm_bias
  Tensor qkv;             // [q_dim + 2 * kv_dim, hidden] rows: q, then k, then v
  Tensor qkv_bias;        // [q_dim + 2 * kv_dim]         qkv_bias
  Tensor o;               // [hidden, q_dim]
  Tensor o_bias;          // [hidden]                     o_bias
  Tensor mlp_norm;        // [hidden]                     norm_affine
  Tensor mlp_norm_bias;   // [hidden]                     norm_bias
  Tensor gate_up;         // [2 * intermediate, hidden]   SwiGLU: rows gate, then up
  Tensor gate_up_bias;    // [2 * intermediate]           SwiGLU and mlp_bias
  Tensor up;              // [intermediate, hidden]       plain MLP
  Tensor up_bias;         // [intermediate]               plain MLP and mlp_bias
  Tensor down;            // [hidden, intermediate]
  Tensor down_bias;       // [hidden]                     mlp_bias
};

struct ActionLayer {
  Tensor weight;  // [out, in]: [hidden, action_dim] for the first, [hidden, hidden] after
  Tensor bias;    // [out]
};

struct Weights {
  Tensor embed;                      // [vocab, hidden]
  std::vector<LayerWeights> layers;  // [layers]
  Tensor final_norm;                 // [hidden]  norm_affine
  Tensor final_norm_bias;            // [hidden]  norm_bias
  Tensor lm_head;                    // [vocab, hidden]; a view of embed when tied
  Tensor pos_absolute;               // [max_positions + position_offset, hidden] (Absolute)
  Tensor pos_spatial;                // [spatial_rows, hidden]  (SpatioTemporal)
  Tensor pos_temporal;               // [temporal_rows, hidden] (SpatioTemporal)
  std::vector<ActionLayer> action;   // spec.action_layers(): 1 (linear) or the MLP's layers
};

}  // namespace loom
