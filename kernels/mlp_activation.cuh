// The MLP activations beyond SwiGLU-with-silu (silu_mul, activation.cuh), and the bias add that
// follows a biased linear layer (OPT / GPT-2: q/k/v, o, MLP):
//   bias_activation: y[r, c] = act(y[r, c] + bias[c]) in place; bias may be null; `activate`
//                    false skips act (a bias add alone). The plain MLP's act(up·x + b).
//   act_mul:         out[r, j] = act(gate_up[r, j]) · gate_up[r, inter + j] (gated MLPs with
//                    gelu / gelu_tanh / relu).
// Each element in fp32 as cpu::activate / cpu::act_mul compute it (backend/cpu/ops.h), rounded
// once to dtype t. Launch: grid-stride, 256 threads, up to 4096 blocks.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"
#include "model/spec.h"

namespace loom::gpu {

Status bias_activation(DType t, void* y, const float* bias, int rows, int n, bool activate,
                       Activation act, cudaStream_t stream);

Status act_mul(DType t, const void* gate_up, void* out, int rows, int inter, Activation act,
               cudaStream_t stream);

}  // namespace loom::gpu
