// The MLP activations and the bias add that follows a biased linear layer (OPT / GPT-2: q/k/v,
// o, MLP), their argument structs and fp32 host references (the CUDA launchers:
// mlp_activation.cuh). Plain C++, so the CPU backend and CPU-only builds include it.
//   bias_activation: y[r, c] = act(y[r, c] + bias[c]) in place; bias may be null; apply_act
//                    false skips act (a bias add alone). The plain MLP's act(up·x + b), the
//                    action MLP's ReLU.
//   act_mul:         out[r, j] = act(gate_up[r, j]) · gate_up[r, inter + j] (SwiGLU with silu;
//                    gated MLPs with gelu / gelu_tanh / relu).
// Each element in fp32, rounded once to dtype t.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "model/spec.h"

namespace loom {

struct BiasActivationArgs {
  DType t = DType::BF16;        // dtype of y: F32 or BF16 (the reference: F32)
  void* y = nullptr;            // [rows, n], in place
  const float* bias = nullptr;  // [n] fp32, or null
  int rows = 0, n = 0;
  bool apply_act = false;  // false: the bias add alone
  Activation act = Activation::Relu;
};

struct ActMulArgs {
  DType t = DType::BF16;          // dtype of gate_up and out: F32 or BF16 (the reference: F32)
  const void* gate_up = nullptr;  // [rows, 2 * inter]: gate columns, then up columns
  void* out = nullptr;            // [rows, inter]
  int rows = 0, inter = 0;
  Activation act = Activation::Silu;
  bool pdl = false;  // CUDA: programmatic dependent launch, as NormArgs::pdl
};

namespace cpu {

// One activation of a float: silu, GPT-2's gelu_new (tanh), exact erf gelu, relu (the formulas
// of transformers 4.39 / torch; the kernels compute the same terms in the same order).
float activate(Activation act, float x);

// The fp32 references (t must be F32). The CPU backend runs these.
void bias_activation(const BiasActivationArgs& a);
void act_mul(const ActMulArgs& a);

}  // namespace cpu
}  // namespace loom
