// fp32 references of action_input_layer and embed_assemble (embed.h).
#include <algorithm>

#include "core/error.h"
#include "kernels/embed.h"

namespace loom::cpu {

void action_input_layer(const ActionInputArgs& a) {
  LOOM_CHECK(a.out_t == DType::F32, "cpu::action_input_layer: dtype ", dtype_name(a.out_t),
             " (the reference is fp32)");
  auto* out = static_cast<float*>(a.out);
  const size_t dim = size_t(a.action_dim), hidden = size_t(a.hidden);
  for (int r = 0; r < a.n_act; r++) {
    const float* x = a.actions + size_t(a.act_slots[r]) * dim;
    float* y = out + size_t(r) * hidden;
    // HF nn.Linear: the dot product, then the bias.
    for (size_t i = 0; i < hidden; i++) {
      float acc = 0.0f;
      for (size_t j = 0; j < dim; j++) acc += x[j] * a.w[i * dim + j];
      y[i] = acc + (a.b ? a.b[i] : 0.0f);
      if (a.relu) y[i] = std::max(y[i], 0.0f);
    }
  }
}

void embed_assemble(const EmbedArgs& a) {
  LOOM_CHECK(a.t == DType::F32, "cpu::embed_assemble: dtype ", dtype_name(a.t),
             " (the reference is fp32)");
  const auto* embed = static_cast<const float*>(a.embed);
  const auto* act_out = static_cast<const float*>(a.act_out);
  const size_t H = size_t(a.hidden);
  for (int s = 0; s < a.n_slots; s++) {
    const int tok = a.tokens[s];
    const float* src = tok >= 0 ? embed + size_t(tok) * H : act_out + size_t(a.act_row[s]) * H;
    float* x = a.x + size_t(s) * H;
    std::copy(src, src + H, x);
    if (a.pos_spatial != nullptr) {
      const int p = a.positions[s];
      const float* ps = a.pos_spatial + size_t(p % a.frame_slots) * H;
      const float* pt = a.pos_temporal + size_t(p / a.frame_slots) * H;
      for (size_t h = 0; h < H; h++) x[h] += ps[h] + pt[h];
    }
  }
}

}  // namespace loom::cpu
