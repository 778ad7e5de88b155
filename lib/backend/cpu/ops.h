// CPU reference ops, fp32, plain loops (design §6): the definition every CUDA kernel is tested
// against (style.md §5: one op, one signature, two implementations). Each mirrors the HF
// transformers 4.39 LlamaModel computation it replaces. The op families of kernels/ keep their
// references beside their kernels, with the argument struct both take (kernels/<family>.h,
// plain C++); this header gathers them for the CPU backend, with the references whose kernels
// take other forms (the linear layer: cuBLAS, gemv, linear_fixed).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/embed.h"
#include "kernels/kv_fp8.h"
#include "kernels/mlp_activation.h"
#include "kernels/norm.h"
#include "kernels/positions.h"
#include "kernels/rope.h"

namespace loom::cpu {

// y[m, n] = x[m, k] · w[n, k]ᵀ (+ bias[n] when bias != nullptr). HF nn.Linear.
void matmul_nt(const float* x, const float* w, const float* bias, float* y, int m, int n, int k);

}  // namespace loom::cpu
