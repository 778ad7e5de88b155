// The CPU reference backend (design §6): fp32 math in plain loops over the ops of
// backend/cpu/ops.h, readable next to HF's LlamaModel. It runs the tiny test models and the
// demo, and it is what the CUDA backend is compared against.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace loom {

// Called with every named intermediate activation of a step (style.md §9), e.g.
// ("attn_norm", layer, data, rows, cols); layer is -1 outside the layer stack.
using ActivationHook =
    std::function<void(const char* name, int layer, const float* data, int rows, int cols)>;

std::unique_ptr<Backend> make_cpu_backend();
void set_cpu_activation_hook(Backend& cpu_backend, ActivationHook hook);

}  // namespace loom
