// Embedding assembly (design §4): the residual stream x of every new slot before layer 0.
//   token slot:  x = embed[token]
//   action slot: x = action projection of the slot's action row (Linear, or an MLP with ReLU
//                between its Linear layers, all with bias); the first layer runs here
//                (action_dim is tiny), the hidden×hidden layers through the GEMM path.
//   frame models then add pos_spatial[p % S] + pos_temporal[p / S], p = the slot's position.
// x is fp32 (the residual stream stays fp32 on every compute dtype).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"

namespace loom::gpu {

struct EmbedArgs {
  DType t = DType::BF16;                // dtype of embed and act_out (F32 or BF16)
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
Status embed_assemble(const EmbedArgs& a, cudaStream_t stream);

// out[r, :] = w · actions[act_slots[r], :] + b, then ReLU when relu. w [hidden, action_dim] fp32.
Status action_input_layer(const float* actions, int action_dim, const int32_t* act_slots, int n_act,
                          const float* w, const float* b, int hidden, bool relu, DType out_t,
                          void* out, cudaStream_t stream);

// y[r, :] += bias, then ReLU when relu; y [rows, n] in dtype t.
Status bias_act(DType t, void* y, const float* bias, int rows, int n, bool relu,
                cudaStream_t stream);

}  // namespace loom::gpu
