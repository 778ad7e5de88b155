// Canonical weights: every role the backends read, by name (style.md: no positional arrays).
// Built by model/mapping from the checkpoint; merged roles (qkv, gate_up) are concatenated
// along dim 0 in the order the table lists their parts. dtype is the checkpoint's.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace loom {

struct LayerWeights {
  Tensor attn_norm;  // [hidden]
  Tensor qkv;        // [q_dim + 2 * kv_dim, hidden]  rows: q, then k, then v
  Tensor o;          // [hidden, q_dim]
  Tensor mlp_norm;   // [hidden]
  Tensor gate_up;    // [2 * intermediate, hidden]   rows: gate, then up
  Tensor down;       // [hidden, intermediate]
};

struct ActionLayer {
  Tensor weight;  // [out, in]: [hidden, action_dim] for the first, [hidden, hidden] after
  Tensor bias;    // [out]
};

struct Weights {
  Tensor embed;                      // [vocab, hidden]
  std::vector<LayerWeights> layers;  // [layers]
  Tensor final_norm;                 // [hidden]
  Tensor lm_head;                    // [vocab, hidden]; a view of embed when tied
  Tensor pos_spatial;                // [spatial_rows, hidden]  (frame models)
  Tensor pos_temporal;               // [temporal_rows, hidden] (frame models)
  std::vector<ActionLayer> action;   // 1 (linear) or action_mlp_layers (MLP, ReLU between)
};

}  // namespace loom
