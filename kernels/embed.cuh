// Embedding assembly on the device (the ops, their arguments and their references: embed.h).
// Launch: one block per slot (embed_assemble: 128 threads, 512 for hidden >= 512) or per action
// row (action_input_layer: 256 threads).
#pragma once

#include "kernels/cuda_check.cuh"
#include "kernels/embed.h"

namespace loom::gpu {

Status action_input_layer(const ActionInputArgs& a, cudaStream_t stream);
Status embed_assemble(const EmbedArgs& a, cudaStream_t stream);
// Pipelined steps: tokens[i] = drawn[r] + offset where tokens[i] is future_token(r)
// (backend.h; r an out row of the previous step, whose draws `drawn` holds); other slots stay.
// One block.
Status resolve_future_tokens(int32_t* tokens, int n_slots, const int32_t* drawn, int offset,
                             cudaStream_t stream);

}  // namespace loom::gpu
