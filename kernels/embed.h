// Embedding assembly (design §4): the residual stream x of every new slot before layer 0, its
// argument structs and fp32 host references (the CUDA launchers: embed.cuh). Plain C++, so the
// CPU backend and CPU-only builds include it.
//   action_input_layer: the first layer of the action projection (action_dim is tiny), out[r] =
//                       w · actions[act_slots[r]] + b, then ReLU when relu (an MLP's inner
//                       layer); the hidden×hidden layers after it run through the GEMM path
//                       and bias_activation.
//   embed_assemble:     token slot x = embed[token]; action slot x = act_out[act_row[slot]];
//                       frame models then add pos_spatial[p % S] + pos_temporal[p / S], p the
//                       slot's position (HF adds the two tables to each other first).
// x is fp32 (the residual stream stays fp32 on every compute dtype). Learned absolute positions
// are added after this (positions.h).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace loom {

struct ActionInputArgs {
  const float* actions = nullptr;      // [n_rows_in, action_dim] fp32 action rows
  int action_dim = 0;                  //
  const int32_t* act_slots = nullptr;  // [n_act] row of `actions` for output row r
  int n_act = 0;                       //
  const float* w = nullptr;            // [hidden, action_dim] fp32
  const float* b = nullptr;            // [hidden] fp32, or null
  int hidden = 0;                      //
  bool relu = false;                   // ReLU after the bias (an inner MLP layer)
  DType out_t = DType::BF16;           // F32 or BF16 (the reference: F32)
  void* out = nullptr;                 // [n_act, hidden]
};

struct EmbedArgs {
  DType t = DType::BF16;                // dtype of embed and act_out: F32 or BF16 (ref: F32)
  const int32_t* tokens = nullptr;      // [n_slots] token id, or < 0 for an action slot
  const int32_t* positions = nullptr;   // [n_slots]
  const int32_t* act_row = nullptr;     // [n_slots] row of act_out for action slots, else -1
  const void* embed = nullptr;          // [vocab, hidden]
  const void* act_out = nullptr;        // [n_act, hidden] projected actions (may be null)
  const float* pos_spatial = nullptr;   // [spatial_rows, hidden] or null (no frame layout)
  const float* pos_temporal = nullptr;  // [temporal_rows, hidden]
  int frame_slots = 0;                  // S
  int spatial_rows = 0, temporal_rows = 0;
  int vocab = 0, n_slots = 0, hidden = 0;
  float* x = nullptr;  // [n_slots, hidden] out
};

namespace cpu {

// The fp32 references (dtypes must be F32). The CPU backend runs these; the caller checks
// token ids and positions against the tables (the kernels trust them too).
void action_input_layer(const ActionInputArgs& a);
void embed_assemble(const EmbedArgs& a);

}  // namespace cpu
}  // namespace loom
