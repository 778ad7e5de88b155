// Canonical weights: every role the backends read, by name (style.md: no positional arrays).
// Built by model/mapping from the checkpoint as model/roles.h describes; merged roles (qkv,
// gate_up) are concatenated along dim 0 in the order the table lists their parts. dtype is the
// checkpoint's. A role the spec's features do not call for is left empty.
//
// The structs are templates over what a role holds so that one set of field names serves the
// host tensors (Weights = WeightSet<Tensor>) and a device backend's copies (the CUDA backend's
// WeightSet<DeviceTensor>); WeightSet::at is the one map from a role's Slot to its field, and
// model/roles.h gives every role its Slot.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace loom {

// Where a role lands (model/roles.h names the role of each).
enum class Slot {
  Embed,
  FinalNorm,
  FinalNormBias,
  LmHead,
  PosAbsolute,
  PosSpatial,
  PosTemporal,  // once
  AttnNorm,
  AttnNormBias,
  Qkv,
  QkvBias,
  O,
  OBias,
  MlpNorm,
  MlpNormBias,  // per layer
  GateUp,
  GateUpBias,
  Up,
  UpBias,
  Down,
  DownBias,  // per layer
  ActionWeight,
  ActionBias,  // per action layer j
};

template <class T>
struct LayerSet {
  T attn_norm;       // [hidden]                     norm_affine
  T attn_norm_bias;  // [hidden]                     norm_bias
  T qkv;             // [q_dim + 2 * kv_dim, hidden] rows: q, then k, then v
  T qkv_bias;        // [q_dim + 2 * kv_dim]         qkv_bias
  T o;               // [hidden, q_dim]
  T o_bias;          // [hidden]                     o_bias
  T mlp_norm;        // [hidden]                     norm_affine
  T mlp_norm_bias;   // [hidden]                     norm_bias
  T gate_up;         // [2 * intermediate, hidden]   SwiGLU: rows gate, then up
  T gate_up_bias;    // [2 * intermediate]           SwiGLU and mlp_bias
  T up;              // [intermediate, hidden]       plain MLP
  T up_bias;         // [intermediate]               plain MLP and mlp_bias
  T down;            // [hidden, intermediate]
  T down_bias;       // [hidden]                     mlp_bias
};

template <class T>
struct ActionSet {
  T weight;  // [out, in]: [hidden, action_dim] for the first, [hidden, hidden] after
  T bias;    // [out]
};

template <class T>
struct WeightSet {
  T embed;                           // [vocab, hidden]
  std::vector<LayerSet<T>> layers;   // [layers]
  T final_norm;                      // [hidden]  norm_affine
  T final_norm_bias;                 // [hidden]  norm_bias
  T lm_head;                         // [vocab, hidden]; a view of embed when tied
  T pos_absolute;                    // [max_positions + position_offset, hidden] (Absolute)
  T pos_spatial;                     // [spatial_rows, hidden]  (SpatioTemporal)
  T pos_temporal;                    // [temporal_rows, hidden] (SpatioTemporal)
  std::vector<ActionSet<T>> action;  // spec.action_layers(): 1 (linear) or the MLP's layers

  // The field of slot s; `layer` for per-layer slots, `j` for action slots, else ignored.
  T* at(Slot s, int layer, int j) {
    switch (s) {
      case Slot::Embed:
        return &embed;
      case Slot::FinalNorm:
        return &final_norm;
      case Slot::FinalNormBias:
        return &final_norm_bias;
      case Slot::LmHead:
        return &lm_head;
      case Slot::PosAbsolute:
        return &pos_absolute;
      case Slot::PosSpatial:
        return &pos_spatial;
      case Slot::PosTemporal:
        return &pos_temporal;
      case Slot::ActionWeight:
        return &action.at(size_t(j)).weight;
      case Slot::ActionBias:
        return &action.at(size_t(j)).bias;
      default:
        break;
    }
    LayerSet<T>& l = layers.at(size_t(layer));
    switch (s) {
      case Slot::AttnNorm:
        return &l.attn_norm;
      case Slot::AttnNormBias:
        return &l.attn_norm_bias;
      case Slot::Qkv:
        return &l.qkv;
      case Slot::QkvBias:
        return &l.qkv_bias;
      case Slot::O:
        return &l.o;
      case Slot::OBias:
        return &l.o_bias;
      case Slot::MlpNorm:
        return &l.mlp_norm;
      case Slot::MlpNormBias:
        return &l.mlp_norm_bias;
      case Slot::GateUp:
        return &l.gate_up;
      case Slot::GateUpBias:
        return &l.gate_up_bias;
      case Slot::Up:
        return &l.up;
      case Slot::UpBias:
        return &l.up_bias;
      case Slot::Down:
        return &l.down;
      case Slot::DownBias:
        return &l.down_bias;
      default:
        break;
    }
    fail("internal: weight slot ", int(s), " has no field");
  }
};

using LayerWeights = LayerSet<Tensor>;
using ActionLayer = ActionSet<Tensor>;
using Weights = WeightSet<Tensor>;

}  // namespace loom
