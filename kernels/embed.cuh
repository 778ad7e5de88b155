// Embedding assembly on the device (the ops, their arguments and their references: embed.h).
// Launch: one block per slot (embed_assemble: 128 threads, 512 for hidden >= 512) or per action
// row (action_input_layer: 256 threads).
#pragma once

#include "kernels/cuda_check.cuh"
#include "kernels/embed.h"

namespace loom::gpu {

Status action_input_layer(const ActionInputArgs& a, cudaStream_t stream);
Status embed_assemble(const EmbedArgs& a, cudaStream_t stream);

}  // namespace loom::gpu
